"""Gradient compression with its cost: a transform of the fine-grained all-reduce model, and its breakeven.

The what-if analysis of Zhang et al., *Is Network the Bottleneck of
Distributed Training?* (NetAI 2020; :func:`queuesgd.scaling.whatif`,
:meth:`queuesgd.workload.Workload.compressed`) divides the bytes on the wire
by a compression ratio and charges nothing for compressing and
decompressing. :class:`CompressedAllReduce` charges for both: on every
worker, per message (bucket),

- a **compression task** on the worker's compute stream right after the
  bucket's last gradient is ready -- it sits *in* the compute chain, between
  two backward tasks, so it delays the rest of the backward pass (on a GPU
  and on a CPU the compression kernels run on the compute stream);
- the collective on the compressed message, on the shared FIFO network;
- a **decompression task** before the update, on the compute stream after
  the backward pass (deferring it there is the best order on one stream: it
  feeds only the update, so running it earlier would only delay the
  compressions and collectives behind it).

Three methods, with their sizes and collectives (``S`` the uncompressed
message bytes, fp32 gradients):

- ``"topk"`` (Aji and Heafield 2017; Lin et al., DGC, 2018): keep a fraction
  ``d`` of the elements, values and int32 indices, ``2 d S`` bytes per rank.
  Sparse vectors with different supports cannot be summed in a ring, so the
  collective is a ring **all-gather** of every rank's values and indices,
  ``(n-1) 2 d S / B + (n-1) alpha``; decompression sums the ``n`` sparse
  vectors into a dense gradient (``n`` times the per-vector cost).
- ``"powersgd"`` (Vogels, Karimireddy and Jaggi, NeurIPS 2019): a tensor of
  ``E`` elements is viewed as an ``a x b`` matrix; rank ``r`` factors
  ``P`` (``a x r``) and ``Q`` (``b x r``) are all-reduced, one ring
  all-reduce of all the ``P`` of the message, then one of all the ``Q``.
  The profile has no shapes, so the matrix is taken **square**,
  ``a = b = sqrt(E)``: ``4 r sqrt(E)`` bytes for each factor. A tensor whose
  factors would not be smaller (``2 r sqrt(E) >= E``, biases and other
  small tensors) goes uncompressed in the first all-reduce, as PyTorch's
  PowerSGD hook sends such tensors uncompressed. The orthogonalisation and
  the matrix products are the compression cost.
- ``"fp16"``: half the bytes, one ring all-reduce; a cast each way.

Costs of compressing and decompressing are ``compress_time`` and
``decompress_time``: seconds per byte of *uncompressed* gradient (a number
or a unit string, ``"1ns"``), or a :class:`~queuesgd.workload.CostCurve` of
seconds against uncompressed bytes (:func:`measure_compression` measures
one with PyTorch on this machine). For ``"topk"``, ``decompress_time`` is the
cost of adding *one* sparse vector into the dense gradient.

Closed form (no overlap, one message; :meth:`CompressedAllReduce.formula`):
``T(B) = E[max X] + compress(S) + comm_c(S, B) + decompress(S) + u`` against
``T_0(B) = E[max X] + allreduce(S, B) + u``. The **breakeven** bandwidth,
above which compression stops paying, solves ``T(B) = T_0(B)``
(:func:`compression_breakeven`); with overlap and fusion the fine model's
breakeven is found by bisection (:func:`fine_breakeven`). See
``docs/compression.md``.

Examples
--------
>>> from queuesgd import Workload, Cluster
>>> s = CompressedAllReduce("topk", density=0.01, compress_time="0.1ns", decompress_time="0.01ns")
>>> w = Workload(0.1, "100MB")
>>> round(compression_breakeven(w, Cluster(4, "10Gbit/s"), s) / 1e9, 4)   # GB/s; 1.44e8 B / 14 ms
10.2857
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks, units
from queuesgd.dag import Task, TaskGraph, schedule
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError
from queuesgd.schemes.barrier import BarrierScheme, SymbolicWorkload
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.costs import ring_allreduce
from queuesgd.schemes.fine import Bucket, FineModel, allreduce_graph, ring_message_costs
from queuesgd.schemes.finegrained import FineGrained
from queuesgd.schemes.memory import Memory
from queuesgd.workload import CostCurve

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "COMPRESSION",
    "METHODS",
    "CompressedAllReduce",
    "compressed_allreduce_graph",
    "compression_breakeven",
    "fine_breakeven",
    "measure_compression",
]

#: The compression methods (``CompressedAllReduce.compressor``).
METHODS: tuple[str, ...] = ("topk", "powersgd", "fp16")
#: Group name of the compression and decompression tasks in the task graph.
COMPRESSION = "compression"
#: Bytes of one fp32 gradient element.
_FP32 = 4.0


def _cost_field(field: str, value: Any) -> float | CostCurve:
    """Seconds per uncompressed byte (a number or unit string, 0 to ``units.MAX_SECONDS``), or a CostCurve."""
    if isinstance(value, CostCurve):
        return value
    accepted = (
        f"seconds per byte of uncompressed gradient from 0 to {units.MAX_SECONDS:g} (a number or a unit "
        "string such as '1ns'), or a queuesgd.workload.CostCurve of seconds against uncompressed bytes"
    )
    try:
        return _checks.duration(field, value, per="byte")
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None


def _apply_cost(cost: float | CostCurve, nbytes: Any) -> Any:
    """Seconds of ``cost`` (per-byte rate or curve) for ``nbytes`` uncompressed bytes (array-friendly)."""
    if isinstance(cost, CostCurve):
        return cost(np.asarray(nbytes, dtype=float)) if np.ndim(nbytes) else cost(float(nbytes))
    return cost * nbytes


# ----------------------------------------------------------------------------- the graph
def compressed_allreduce_graph(
    workload: Workload,
    cluster: Cluster,
    buckets: Sequence[Bucket],
    message_cost: Sequence[float],
    compress_cost: Sequence[float],
    decompress_cost: Sequence[float],
    *,
    overlap: bool = True,
    update_time: float | None = None,
    symmetric: bool | None = None,
) -> FineModel:
    """The task graph of synchronous all-reduce SGD with a compression and a decompression task per message.

    Built from :func:`~queuesgd.schemes.fine.allreduce_graph` (the same
    forward, backward, collectives and update), transformed: on every drawn
    worker ``w``,

    - ``w{w}/compress{b}`` (``compress_cost[b]`` seconds) follows the
      backward task of bucket ``b``'s last tensor and precedes the next
      backward task (it is in the compute chain);
    - the collective ``allreduce{b}`` (``message_cost[b]``, on the FIFO
      resource ``"network"``) waits for every drawn worker's
      ``compress{b}`` (with ``overlap=False``: for the end of every worker's
      chain, its last compression);
    - ``w{w}/decompress{b}`` (``decompress_cost[b]``) runs after the end of
      the worker's chain, after ``decompress{b-1}`` and after
      ``allreduce{b}``; the update follows the last decompression.

    Compression and decompression times are deterministic (not stretched by
    the worker's random compute factor), as the communication is.

    Parameters
    ----------
    workload, cluster : Workload, Cluster
    buckets : sequence of Bucket
        The messages (:func:`~queuesgd.schemes.fine.fuse`).
    message_cost, compress_cost, decompress_cost : sequence of float
        Seconds per message of the collective (all workers together), of the
        compression and of the decompression on one worker.
    overlap : bool
        Wait-free back-propagation (a message's collective may start as soon
        as it is compressed).
    update_time : float, optional
        The local update; defaults to ``workload.update_time``.
    symmetric : bool, optional
        As in :func:`~queuesgd.schemes.fine.allreduce_graph`.

    Returns
    -------
    FineModel
        ``backward_ends`` are the ends of the workers' chains (their last
        compression).

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> from queuesgd.dag import schedule
    >>> from queuesgd.schemes.fine import fuse
    >>> w = Workload(0.05, None, layers=[Layer("b", 1e6, "10ms"), Layer("a", 1e6, "20ms")])
    >>> m = compressed_allreduce_graph(w, Cluster(2, "1GB/s"), fuse(w, None, None),
    ...                                [0.002, 0.002], [0.004, 0.004], [0.002, 0.002])
    >>> round(schedule(m.graph).makespan, 9)  # chain ends at 58 ms, then two 2 ms decompressions
    0.062
    """
    nb = len(buckets)
    costs = {}
    for field, values in (
        ("compress_cost", compress_cost),
        ("decompress_cost", decompress_cost),
    ):
        arr = np.asarray(values, dtype=float)
        if arr.shape != (nb,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise InvalidParameterError(field, values, f"one finite cost >= 0 per bucket ({nb})")
        costs[field] = arr
    base = allreduce_graph(
        workload,
        cluster,
        buckets,
        message_cost,
        overlap=overlap,
        update_time=update_time,
        symmetric=symmetric,
    )
    layers = workload.layers
    assert layers is not None  # allreduce_graph required them
    drawn = base.workers_in_graph
    last_bwd = {
        f"w{w}/backward/{layers[b.last].name}": (w, i) for w in range(drawn) for i, b in enumerate(buckets)
    }
    chain_end = [f"w{w}/compress{nb - 1}" for w in range(drawn)]
    comm_names = {base.graph.names[i] for i in base.comm_tasks}

    def rename(after: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for a in after:
            hit = last_bwd.get(a)
            out.append(a if hit is None else f"w{hit[0]}/compress{hit[1]}")
        return tuple(out)

    tasks: list[Task] = []
    for t in base.graph.tasks:
        if t.group == "update":
            w = int(t.name.split("/", 1)[0][1:])
            prev = chain_end[w]
            for b in range(nb):
                name = f"w{w}/decompress{b}"
                tasks.append(
                    Task(name, float(costs["decompress_cost"][b]), (prev, f"allreduce{b}"), group=COMPRESSION)
                )
                prev = name
            tasks.append(dataclasses.replace(t, after=(prev,)))
            continue
        if t.name in comm_names and not overlap:
            tasks.append(dataclasses.replace(t, after=tuple(chain_end)))
            continue
        tasks.append(
            dataclasses.replace(t, after=rename(t.after)) if any(a in last_bwd for a in t.after) else t
        )
        hit = last_bwd.get(t.name)
        if hit is not None:
            w, b = hit
            tasks.append(
                Task(f"w{w}/compress{b}", float(costs["compress_cost"][b]), (t.name,), group=COMPRESSION)
            )
    graph = TaskGraph(tasks, dict(base.graph.factors) or None, name="sync compressed all-reduce iteration")
    return FineModel(
        graph,
        tuple(buckets),
        drawn,
        tuple(graph.index(c) for c in chain_end),
        tuple(graph.index(f"allreduce{b}") for b in range(nb)),
        base.note,
    )


# ----------------------------------------------------------------------------- the scheme
@dataclass(frozen=True)
class CompressedAllReduce(FineGrained, BarrierScheme):
    """Synchronous ring all-reduce SGD with gradient compression, its compute cost included.

    Parameters
    ----------
    compressor : {"topk", "powersgd", "fp16"}
        Top-k sparsification (all-gather of values and indices), PowerSGD
        (two ring all-reduces of the rank-``r`` factors per message) or a cast
        to half precision (one ring all-reduce of half the bytes).
    density : float
        Top-k: fraction of the elements kept, in ``(0, 1]`` (only ``"topk"``
        reads it; leave the default otherwise).
    rank : int
        PowerSGD's rank ``r >= 1`` (only ``"powersgd"`` reads it).
    compress_time, decompress_time : float, str or CostCurve
        Seconds per byte of uncompressed gradient (``"0.1ns"``), or a
        :class:`~queuesgd.workload.CostCurve` of seconds against uncompressed
        bytes (:func:`measure_compression`). For ``"topk"`` the decompression
        is ``n`` times ``decompress_time`` (``n`` sparse vectors summed). The
        defaults, ``0``, are Zhang et al.'s free compression.
    overlap, fusion_bytes, fusion_time, fusion, bucket_cap, first_bucket
        The fine-grained parameters of :class:`~queuesgd.RingAllReduce`
        (:class:`~queuesgd.schemes.finegrained.FineGrained`); the buckets are
        formed on the uncompressed gradients.

    Notes
    -----
    Roads: ``closed_form`` (no overlap, one message: ``E[max X] +
    compress(S) + comm_c + decompress(S) + u``, exact for i.i.d. compute),
    ``ctmc``, ``simulate`` (the barrier family's, with that communication
    phase) and ``fine`` (the task graph of :func:`compressed_allreduce_graph`).
    The closed form's collectives have no reduction cost, as
    :class:`~queuesgd.RingAllReduce`'s closed form; the fine model's ring
    all-reduces include the ``n - 1`` vector additions of ``S/n`` bytes.
    Without a per-tensor profile the closed form takes the gradient as one
    tensor (for PowerSGD, one square matrix).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> s = CompressedAllReduce("fp16", compress_time="0.01ns", decompress_time="0.01ns")
    >>> p = predict(s, Workload(0.1, "100MB"), Cluster(4, "1GB/s"))
    >>> round(p.iteration_time, 12)           # 0.1 + 1 ms + 2 x 3/4 x 0.05 s + 1 ms
    0.177
    >>> CompressedAllReduce("topk", density=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: CompressedAllReduce.density: got 0; accepted: a fraction in ...
    """

    key: ClassVar[str] = "compressed-allreduce"
    _message_symbol: ClassVar[str] = "S"
    #: No coarse phase model: the compression in the compute chain has no heuristic window yet.
    solve_coarse = None  # type: ignore[assignment]

    compressor: str = "topk"
    density: float = 0.01
    rank: int = 4
    compress_time: float | str | CostCurve = 0.0
    decompress_time: float | str | CostCurve = 0.0
    overlap: bool = True
    fusion_bytes: float | str | None = "64MiB"
    fusion_time: float | str | None = "5ms"
    fusion: str = "threshold"
    bucket_cap: float | str = "25MiB"
    first_bucket: float | str | None = "1MiB"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        name = type(self).__name__
        if not isinstance(self.compressor, str) or self.compressor not in METHODS:
            raise UnknownNameError(f"{name}.compressor", self.compressor, METHODS)
        accepted_d = "a fraction in (0, 1] of the elements kept (top-k density)"
        try:
            set_(self, "density", _checks.positive(f"{name}.density", self.density, maximum=1.0))
        except InvalidParameterError:
            raise InvalidParameterError(f"{name}.density", self.density, accepted_d) from None
        try:
            set_(self, "rank", _checks.integer(f"{name}.rank", self.rank, maximum=_checks.MAX_COUNT))
        except InvalidParameterError:
            raise InvalidParameterError(
                f"{name}.rank", self.rank, f"an integer >= 1, at most {_checks.MAX_COUNT:,} (PowerSGD's rank)"
            ) from None
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for field, reader in (("density", "topk"), ("rank", "powersgd")):
            if self.compressor != reader and getattr(self, field) != defaults[field]:
                raise InvalidParameterError(
                    f"{name}.{field}",
                    getattr(self, field),
                    f"its default ({defaults[field]!r}) with compressor={self.compressor!r}, which does not "
                    "read it; "
                    f"it belongs to compressor={reader!r}",
                )
        set_(self, "compress_time", _cost_field(f"{name}.compress_time", self.compress_time))
        set_(self, "decompress_time", _cost_field(f"{name}.decompress_time", self.decompress_time))
        self._check_fine_fields()

    # ---- sizes and costs -------------------------------------------------------------
    def wire_bytes(self, tensor_bytes: Sequence[float]) -> tuple[float, float]:
        """Bytes one worker puts into the first and second collective of a message of these tensors.

        ``topk``: ``(2 d S, 0)`` (values and int32 indices, all-gathered);
        ``powersgd``: ``(bytes of all P + uncompressed tensors, bytes of all Q)``
        with square matrices, ``4 r sqrt(E)`` bytes per factor of a tensor of
        ``E = bytes / 4`` elements, unless ``2 r sqrt(E) >= E`` (then the
        tensor goes uncompressed in the first all-reduce); ``fp16``:
        ``(S / 2, 0)``.

        Parameters
        ----------
        tensor_bytes : sequence of float
            Uncompressed bytes of each tensor of the message.

        Returns
        -------
        tuple of float

        Examples
        --------
        >>> CompressedAllReduce("powersgd", rank=4).wire_bytes([4e6, 64])  # 1000 x 1000 matrix; 16 elements
        (16064.0, 16000.0)
        >>> CompressedAllReduce("topk", density=0.01).wire_bytes([4e6])
        (80000.0, 0.0)
        """
        s = np.asarray(tensor_bytes, dtype=float)
        total = float(s.sum())
        if self.compressor == "topk":
            return 2.0 * self.density * total, 0.0
        if self.compressor == "fp16":
            return total / 2.0, 0.0
        elements = s / _FP32
        factor = self.rank * np.sqrt(elements)  # elements of P (= of Q) for a square matrix
        compress = 2.0 * factor < elements
        factors = float(np.sum(np.where(compress, factor * _FP32, 0.0)))
        raw = float(np.sum(np.where(compress, 0.0, s)))
        return factors + raw, factors

    def compress_cost(self, nbytes: Any) -> Any:
        """Seconds one worker compresses ``nbytes`` uncompressed bytes (array-friendly).

        Examples
        --------
        >>> CompressedAllReduce("fp16", compress_time="1ns").compress_cost(4e6)
        0.004
        """
        return _apply_cost(self.compress_time, nbytes)  # type: ignore[arg-type]

    def decompress_cost(self, nbytes: Any, workers: Any) -> Any:
        """Seconds one worker decompresses a message of ``nbytes`` uncompressed bytes with ``workers`` ranks.

        ``topk``: ``workers`` sparse vectors are summed (``workers x
        decompress_time``); else one decompression.

        Examples
        --------
        >>> s = CompressedAllReduce("topk", decompress_time="1ns")
        >>> round(s.decompress_cost(1e6, 4), 12)        # 4 sparse vectors, 1 ms each
        0.004
        """
        one = _apply_cost(self.decompress_time, nbytes)  # type: ignore[arg-type]
        return workers * one if self.compressor == "topk" else one

    def _closed_wire(self, workload: Workload) -> tuple[float, float]:
        tensors = (
            [x.gradient_bytes for x in workload.layers] if workload.layers else [workload.gradient_bytes]
        )
        return self.wire_bytes(tensors)

    def _terms(self, n: Any, latency: Any, first: Any, second: Any, symbolic: bool) -> tuple[Any, Any]:
        """``(bytes over B, latency seconds)`` of the compressed collective (numbers, arrays or SymPy)."""
        if self.compressor == "topk":  # ring all-gather of 2dS bytes per rank: (n-1) steps
            return (n - 1) * first, (n - 1) * latency
        if self.compressor == "fp16":
            return 2 * (n - 1) / n * first, 2 * (n - 1) * latency
        reduces = 2 if symbolic or second > 0 else 1  # P then Q; Q only where a tensor was compressed
        return 2 * (n - 1) / n * (first + second), reduces * 2 * (n - 1) * latency

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``(compress + compressed collective + decompress, local update)``: one message, no reductions."""
        if isinstance(workload, SymbolicWorkload):
            syms = workload.syms
            size = workload.gradient_bytes
            first, second = self._symbolic_wire(syms, size)
            extra = syms["c_c"] * size + (n if self.compressor == "topk" else 1) * syms["c_d"] * size
            volume, lat = self._terms(n, latency, first, second, True)
        else:
            size = workload.gradient_bytes
            first, second = self._closed_wire(workload)
            extra = self.compress_cost(size) + self.decompress_cost(size, n)
            volume, lat = self._terms(n, latency, first, second, False)
        return extra + volume / bandwidth + lat, workload.update_time

    def _symbolic_wire(self, syms: dict[str, Any], size: Any) -> tuple[Any, Any]:
        import sympy

        if self.compressor == "topk":
            return 2 * syms["d"] * size, sympy.Integer(0)
        if self.compressor == "fp16":
            return size / 2, sympy.Integer(0)
        factor = 2 * syms["r"] * sympy.sqrt(size)  # 4 r sqrt(S/4) bytes: one square matrix
        return factor, factor

    def message_costs_of(self, workload: Workload, cluster: Cluster, buckets: Sequence[Bucket]) -> np.ndarray:
        """Seconds of each message's compressed collective on the network, reductions included.

        ``topk``: ring all-gather ``(n-1) 2 d S_b / B + (n-1) alpha``;
        ``powersgd``: ring all-reduce of the ``P`` then of the ``Q`` (each
        with its ``n - 1`` vector additions); ``fp16``: ring all-reduce of
        ``S_b / 2`` bytes.

        Examples
        --------
        >>> from queuesgd import Workload, Layer, Cluster
        >>> from queuesgd.schemes.fine import fuse
        >>> w = Workload(0.1, None, layers=[Layer("a", 4e6, "1ms")])
        >>> s = CompressedAllReduce("topk", density=0.05)
        >>> s.message_costs_of(w, Cluster(4, "1GB/s", latency="10us"), fuse(w)).round(9)  # 3 (0.4 ms + 10 us)
        array([0.00123])
        """
        layers = workload.layers
        assert layers is not None
        parts = np.array(
            [self.wire_bytes([x.gradient_bytes for x in layers[b.first : b.last + 1]]) for b in buckets]
        )
        return self._collective_costs(workload, cluster.workers, cluster.bandwidth, cluster.latency, parts)

    def _collective_costs(
        self, workload: Workload, n: int, bw: Any, lat: Any, parts: np.ndarray
    ) -> np.ndarray:
        first, second = parts[:, 0], parts[:, 1]
        if self.compressor == "topk":
            return (n - 1) * first / bw + (n - 1) * lat
        red = workload.reduction_time
        out = ring_message_costs(n, first, bw, lat, red)
        if self.compressor == "powersgd":
            out = out + np.where(second > 0, ring_message_costs(n, second, bw, lat, red), 0.0)
        return np.asarray(out, dtype=float)

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        """The task graph of :func:`compressed_allreduce_graph` with this scheme's buckets and costs."""
        buckets = self.buckets(workload)
        sizes = np.array([b.nbytes for b in buckets])
        return compressed_allreduce_graph(
            workload,
            cluster,
            buckets,
            self.message_costs_of(workload, cluster, buckets),
            np.broadcast_to(np.asarray(self.compress_cost(sizes), dtype=float), sizes.shape),
            np.broadcast_to(
                np.asarray(self.decompress_cost(sizes, cluster.workers), dtype=float), sizes.shape
            ),
            overlap=self.overlap,
        )

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory:
        """:meth:`memory` (every worker holds the same)."""
        return self.memory(workload, cluster)

    def memory(self, workload: Workload, cluster: Cluster) -> Memory:
        """Bytes per worker: parameters, and gradients with the compression buffers.

        ``topk``: an error-feedback residual of ``S`` (Lin et al. 2018), the
        own ``2 d S`` and the ``n`` gathered ``2 d S``; ``powersgd``: an
        error-feedback buffer of ``S`` and the factors (Vogels et al.
        2019); ``fp16``: a half-size copy. Optimizer state and activations are
        not counted (plain SGD, no profile of activations).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> s = CompressedAllReduce("topk", density=0.01)
        >>> s.memory(Workload(0.1, "100MB"), Cluster(4, "1GB/s")).gradients
        210000000.0
        """
        s = workload.gradient_bytes
        first, second = self._closed_wire(workload)
        if self.compressor == "topk":
            extra = s + (1 + cluster.workers) * first
        elif self.compressor == "powersgd":
            extra = s + first + second
        else:
            extra = s / 2
        return Memory(parameters=workload.parameter_bytes, gradients=s + extra, optimizer=0.0)

    # ---- roads -----------------------------------------------------------------------
    def _split(self, workload: Workload, cluster: Cluster) -> tuple[float, float]:
        """``(compression + decompression, collective)`` seconds of the closed form's phase."""
        size = workload.gradient_bytes
        n = cluster.workers
        extra = float(self.compress_cost(size) + self.decompress_cost(size, n))
        volume, lat = self._terms(n, cluster.latency, *self._closed_wire(workload), False)
        return extra, float(volume / cluster.bandwidth + lat)

    def _solution(self, workload: Workload, cluster: Cluster, *args: Any, **kwargs: Any) -> SchemeSolution:
        sol = super()._solution(workload, cluster, *args, **kwargs)
        extra, _ = self._split(workload, cluster)
        breakdown = dict(sol.breakdown)
        breakdown["communication"] -= extra
        breakdown["compression"] = extra
        details = {**sol.details, "memory": self.memory(workload, cluster)}
        return dataclasses.replace(sol, breakdown=breakdown, details=details)

    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The task graph with compression in the compute chain: exact longest path or its Monte Carlo."""
        sol = FineGrained.solve_fine(self, workload, cluster, rng=rng, iterations=iterations)
        it = sol.iteration_time
        breakdown = dict(sol.breakdown)
        breakdown["compression"] = it * float(sol.details["critical_share"].get(COMPRESSION, 0.0))
        details = {**sol.details, "memory": self.memory(workload, cluster)}
        tasks = f"{self.compressor} compression and decompression tasks on each worker's compute"
        reason = f"{sol.reason}; {tasks}"
        return dataclasses.replace(
            sol,
            breakdown=breakdown,
            details=details,
            reason=reason,
            bottleneck=max(breakdown, key=lambda k: breakdown[k]),
        )

    # ---- formula ---------------------------------------------------------------------
    def _symbols(self) -> dict[str, Any]:
        import sympy

        pos = {"positive": True}
        return {
            "d": sympy.Symbol("d", **pos),
            "r": sympy.Symbol("r", integer=True, **pos),
            "c_c": sympy.Symbol("c_c", **pos),
            "c_d": sympy.Symbol("c_d", **pos),
        }

    def _meanings(self) -> dict[str, str]:
        return {
            "d": "top-k density (fraction of the elements kept)",
            "r": "PowerSGD rank",
            "c_c": "compression seconds per byte of uncompressed gradient",
            "c_d": "decompression seconds per byte of uncompressed gradient"
            + (" (one sparse vector; n are summed)" if self.compressor == "topk" else ""),
        }

    def formula(self, compute: str = "exponential", quantity: str = "throughput") -> Formula:
        """Throughput (samples/s) or breakeven bandwidth (bytes/s) as a :class:`~queuesgd.formula.Formula`.

        ``quantity="throughput"``: ``n m / (E[max X] + c_c S + comm_c(S, B)
        + c_d S + u)`` (``n c_d S`` for top-k). ``quantity="breakeven"``: the
        bandwidth ``B*`` at which that equals the plain ring all-reduce's
        throughput; compression pays below it (when the denominator is
        positive; ``compute`` does not enter it). One message, no overlap;
        the gradient is one tensor (for PowerSGD one square matrix of ``S/4``
        elements, factors of ``2 r sqrt(S)`` bytes each, assuming ``S > 16
        r^2``).

        Examples
        --------
        >>> f = CompressedAllReduce("topk").formula("deterministic", quantity="breakeven")
        >>> f.expr
        -2*S*(n - 1)*(d*n - 1)/(n*(S*(c_c + c_d*n) - alpha*n + alpha))
        >>> round(f.evaluate(S=100e6, n=4, d=0.01, c_c=1e-10, c_d=1e-11, alpha=1e-5) / 1e9, 4)
        10.3078
        """
        quantity = _checks.choice("quantity", quantity, ("throughput", "breakeven"))
        if quantity == "throughput":
            return super().formula(compute)
        import sympy

        from queuesgd.formula import Formula

        pos = {"positive": True}
        syms = {
            "n": sympy.Symbol("n", integer=True, **pos),
            "S": sympy.Symbol("S", **pos),
            "alpha": sympy.Symbol("alpha", **pos),
            **self._symbols(),
        }
        n, size, alpha = syms["n"], syms["S"], syms["alpha"]
        first, second = self._symbolic_wire(syms, size)
        volume, lat = self._terms(n, alpha, first, second, True)
        extra = syms["c_c"] * size + (n if self.compressor == "topk" else 1) * syms["c_d"] * size
        # T(B) - T_0(B) = extra + lat - 2(n-1) alpha + (volume - 2(n-1)/n S) / B = 0
        gain = sympy.factor(ring_allreduce(n, size, 1, 0) - volume)
        expr = gain / sympy.collect(sympy.expand(extra + lat - 2 * (n - 1) * alpha), size)
        meaning = {
            "n": "workers",
            "S": "gradient bytes (uncompressed)",
            "alpha": "one-way latency, s",
            **self._meanings(),
        }
        return Formula.pruned(
            expr,
            syms,
            meaning,
            f"{self.key} ({self.compressor}) breakeven bandwidth, bytes/s",
            "one message, no overlap: compression pays below B* when the denominator (compression cost plus "
            "latency difference) is positive; deterministic costs linear in the uncompressed bytes",
        )

    def _assumptions(self) -> str:
        return (
            f"n i.i.d. compute times; the barrier waits for all n; then {self.compressor} compression of the "
            "S-byte "
            "gradient, its collective (alpha-beta costs, no reductions), decompression and a local update u; "
            "one message, no overlap"
        )


# ----------------------------------------------------------------------------- breakeven
def _plain(scheme: CompressedAllReduce) -> Any:
    from queuesgd.schemes.allreduce import RingAllReduce

    fine = {f: getattr(scheme, f) for f in FineGrained.FINE_PARAMETERS}
    return RingAllReduce(**fine)


def _check_scheme(scheme: Any) -> CompressedAllReduce:
    if not isinstance(scheme, CompressedAllReduce):
        raise InvalidParameterError("scheme", scheme, "a CompressedAllReduce")
    return scheme


def compression_breakeven(workload: Workload, cluster: Cluster, scheme: CompressedAllReduce) -> float:
    """The bandwidth (bytes/s) above which compression stops paying, closed form (no overlap, one message).

    Solves ``T(B) = T_0(B)`` exactly, with ``T`` the closed form of
    ``scheme`` and ``T_0`` that of :class:`~queuesgd.RingAllReduce`:
    ``extra + L_c + V_c / B = L_0 + V_0 / B`` with ``extra`` the compression
    and decompression seconds, ``V`` the bytes each link carries
    (``V_0 = 2 (n-1)/n S``) and ``L`` the latency terms
    (``L_0 = 2 (n-1) alpha``)::

        B* = (V_0 - V_c) / (extra + L_c - L_0)

    Compression pays for ``B < B*``. ``cluster.bandwidth`` is not read.

    Returns
    -------
    float
        ``B*``; ``math.inf`` when compression pays at every bandwidth (no
        positive cost: zero compression costs and no extra latency); ``0.0``
        when it pays at none (it sends no fewer bytes, or one worker).

    Raises
    ------
    NotRepresentable
        When compression pays only *above* a bandwidth (top-k with ``d >=
        1/n`` sends more bytes than the ring but has ``n - 1`` fewer latency
        steps): the message gives that bandwidth.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> s = CompressedAllReduce("fp16", compress_time="1ns", decompress_time="0.5ns")
    >>> compression_breakeven(Workload(0.05, "8MB"), Cluster(2, "1GB/s"), s)  # 4e6 B / 12 ms
    333333333.3333333
    >>> compression_breakeven(Workload(0.05, "8MB"), Cluster(2, "1GB/s"), CompressedAllReduce("fp16"))
    inf
    """
    scheme = _check_scheme(scheme)
    n, alpha = cluster.workers, cluster.latency
    size = workload.gradient_bytes
    extra = float(scheme.compress_cost(size) + scheme.decompress_cost(size, n))
    volume, lat = scheme._terms(n, alpha, *scheme._closed_wire(workload), False)
    gain = 2 * (n - 1) / n * size - volume
    cost = extra + lat - 2 * (n - 1) * alpha
    if gain > 0:
        return math.inf if cost <= 0 else gain / cost
    if cost >= 0:
        return 0.0
    if gain == 0:
        return math.inf
    raise NotRepresentable(
        f"{scheme.compressor} compression sends {-gain:.6g} more bytes per link than the ring all-reduce but "
        f"saves {-cost:.6g} s of latency: it pays only above {gain / cost:.6g} B/s, not below"
    )


def _fine_makespans(scheme: Any, workload: Workload, cluster: Cluster, bandwidths: np.ndarray) -> np.ndarray:
    """The fine model's iteration time at each bandwidth (one batched longest-path evaluation)."""
    model = scheme.fine_model(workload, cluster)
    if not model.graph.is_deterministic:
        raise NotRepresentable(
            "fine_breakeven needs a deterministic task graph (deterministic compute, identical workers): "
            "with random compute the fine model is a Monte Carlo estimate"
        )
    rows = np.tile(model.graph.mean_durations, (bandwidths.size, 1))
    comm = list(model.comm_tasks)
    for i, bw in enumerate(bandwidths):
        c = dataclasses.replace(cluster, bandwidth=float(bw))
        if isinstance(scheme, CompressedAllReduce):
            rows[i, comm] = scheme.message_costs_of(workload, c, model.buckets)
        else:
            rows[i, comm] = scheme.message_costs(workload, c, np.array([b.nbytes for b in model.buckets]))
    return np.asarray(schedule(model.graph, rows, critical_path=False).makespan, dtype=float)


def fine_breakeven(
    workload: Workload,
    cluster: Cluster,
    scheme: CompressedAllReduce,
    *,
    lower: float | str = "1Mbit/s",
    upper: float | str = "10Tbit/s",
    points: int = 64,
    rtol: float = 1e-9,
) -> float:
    """The bandwidth above which compression stops paying in the fine model (overlap, fusion): bisection.

    Compares the fine task graphs of ``scheme`` and of the plain
    :class:`~queuesgd.RingAllReduce` with the same fine-grained parameters
    (both deterministic, solved exactly by longest path) on a log grid of
    ``points`` bandwidths from ``lower`` to ``upper``, then bisects (in log
    bandwidth) the step of the highest bandwidth where compression stops
    paying, to a relative width ``rtol``. Exact up to ``rtol`` for the fine
    model; crossings closer together than one grid step are not resolved.

    Returns
    -------
    float
        The breakeven bandwidth, bytes/s; ``math.inf`` if compression pays at
        every grid bandwidth, ``0.0`` if it pays at none.

    Raises
    ------
    NotRepresentable
        A random task graph, or compression that pays again at ``upper``
        after not paying below it.

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> w = Workload(0.05, None, layers=[Layer("b", 4e6, "10ms"), Layer("a", 4e6, "20ms")])
    >>> s = CompressedAllReduce("fp16", compress_time="1ns", decompress_time="0.5ns",
    ...                         fusion_bytes=None, fusion_time=None)
    >>> round(fine_breakeven(w, Cluster(2, "1GB/s"), s) / 1e8, 6)   # 2e6 B fp16 message at 10 ms
    2.0
    """
    scheme = _check_scheme(scheme)
    lo = _checks.positive("lower", units.parse_bandwidth(lower, "lower"))
    hi = _checks.positive("upper", units.parse_bandwidth(upper, "upper"))
    if hi <= lo:
        raise InvalidParameterError("upper", upper, f"a bandwidth above lower ({lo:g} B/s)")
    points = _checks.integer("points", points, minimum=2)
    rtol = _checks.positive("rtol", rtol)
    plain = _plain(scheme)

    def diff(bws: np.ndarray) -> np.ndarray:
        return _fine_makespans(scheme, workload, cluster, bws) - _fine_makespans(
            plain, workload, cluster, bws
        )

    grid = np.geomspace(lo, hi, points)
    pays = diff(grid) < 0
    if pays.all():
        return math.inf
    if not pays.any():
        return 0.0
    if pays[-1]:
        raise NotRepresentable(
            f"{scheme.compressor} compression pays again at {hi:g} B/s after not paying below it: "
            "no single breakeven"
        )
    i = int(np.flatnonzero(pays)[-1])
    a, b = math.log(grid[i]), math.log(grid[i + 1])
    while b - a > rtol:
        mid = 0.5 * (a + b)
        if diff(np.array([math.exp(mid)]))[0] < 0:
            a = mid
        else:
            b = mid
    return math.exp(0.5 * (a + b))


# ----------------------------------------------------------------------------- measurement
def measure_compression(
    method: str,
    sizes: Sequence[float | str],
    *,
    density: float = 0.01,
    rank: int = 4,
    repeats: int = 5,
    device: str = "cpu",
    timer: Callable[[], float] = time.perf_counter,
) -> tuple[CostCurve, CostCurve]:
    """Measure compression and decompression times with PyTorch on this machine, as two CostCurves.

    For each size (uncompressed bytes of an fp32 gradient of ``E = size/4``
    elements) the fastest of ``repeats`` timings (the one least disturbed by other
    processes), after one warm-up run:

    - ``"topk"``: compress = ``torch.topk`` of ``|g|`` keeping ``k =
      max(1, round(d E))`` elements and gathering their signed values;
      decompress = ``index_add_`` of one sparse vector (``k`` values) into a
      dense gradient (the model sums ``n`` of them);
    - ``"powersgd"``: the gradient as a square ``a x a`` matrix (``a =
      ceil(sqrt(E))``, zero-padded); compress = ``P = M Q``, a QR
      orthogonalisation of ``P``, ``Q = M^T P``; decompress = ``P Q^T``;
    - ``"fp16"``: compress = ``g.half()``, decompress = ``h.float()``.

    PyTorch is imported here (``pip install queuesgd[validation]``).

    Parameters
    ----------
    method : {"topk", "powersgd", "fp16"}
    sizes : sequence of float or str
        At least two strictly increasing sizes in bytes (``"4MiB"``).
    density, rank : float, int
        As :class:`CompressedAllReduce`.
    repeats : int
        Timings per size (the fastest is kept).
    device : str
        A torch device (``"cpu"``, ``"cuda"``); CUDA is synchronized around each timing.
    timer : callable
        A clock in seconds (``time.perf_counter``).

    Returns
    -------
    (CostCurve, CostCurve)
        Seconds against uncompressed bytes of compression and of decompression
        (``compress_time`` and ``decompress_time`` of :class:`CompressedAllReduce`).

    Examples
    --------
    >>> comp, dec = measure_compression("fp16", ["4KiB", "64KiB"], repeats=3)
    >>> comp.sizes, all(t > 0 for t in comp.times + dec.times)
    ((4096.0, 65536.0), True)
    """
    method = _checks.choice("method", method, METHODS)
    scheme = CompressedAllReduce(method, density=density, rank=rank)
    repeats = _checks.integer("repeats", repeats)
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise InvalidParameterError("sizes", sizes, "a sequence of at least two increasing sizes in bytes")
    parsed = [
        _checks.positive(f"sizes[{i}]", units.parse_bytes(s, f"sizes[{i}]")) for i, s in enumerate(sizes)
    ]
    if len(parsed) < 2 or any(y <= x for x, y in zip(parsed, parsed[1:])):
        raise InvalidParameterError("sizes", sizes, "at least two strictly increasing sizes in bytes")
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        from queuesgd.errors import MissingDependencyError

        raise MissingDependencyError("torch", "validation") from err
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def timed(fn: Callable[[], Any]) -> float:
        fn()  # warm-up
        out = []
        for _ in range(repeats):
            sync()
            t0 = timer()
            fn()
            sync()
            out.append(timer() - t0)
        return max(float(np.min(out)), 0.0)

    comp, dec = [], []
    gen = torch.Generator(device="cpu").manual_seed(0)
    for size in parsed:
        e = max(1, int(round(size / _FP32)))
        g = torch.randn(e, generator=gen).to(dev)
        if method == "topk":
            k = max(1, int(round(scheme.density * e)))
            dense = torch.zeros(e, device=dev)

            def compress(g: Any = g, k: int = k) -> Any:
                idx = torch.topk(g.abs(), k, sorted=False).indices
                return g[idx], idx.to(torch.int32)

            vals, idx = compress()
            idx64 = idx.long()

            def decompress(dense: Any = dense, idx: Any = idx64, vals: Any = vals) -> Any:
                return dense.index_add_(0, idx, vals)

        elif method == "powersgd":
            a = math.isqrt(e - 1) + 1 if e > 1 else 1
            m = torch.zeros(a * a, device=dev)
            m[:e] = g
            m = m.view(a, a)
            q0 = torch.randn(a, scheme.rank, generator=gen).to(dev)

            def compress(m: Any = m, q0: Any = q0) -> Any:
                p = m @ q0
                p, _ = torch.linalg.qr(p)
                return p, m.T @ p

            p, q = compress()

            def decompress(p: Any = p, q: Any = q) -> Any:
                return p @ q.T

        else:
            h = g.half()

            def compress(g: Any = g) -> Any:
                return g.half()

            def decompress(h: Any = h) -> Any:
                return h.float()

        comp.append(timed(compress))
        dec.append(timed(decompress))
    return CostCurve(parsed, comp), CostCurve(parsed, dec)
