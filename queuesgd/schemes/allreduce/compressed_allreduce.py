"""The compressed all-reduce scheme: its parameters, checks, sizes, memory and roads.

:class:`CompressedAllReduce` is described, with every assumption, in
:mod:`queuesgd.schemes.allreduce.compression`, where its public names are gathered.
Where each piece lives: this module holds the scheme;
:mod:`~.compression_costs` the bytes and seconds each method sends and
spends; :mod:`~.compression_graph` the task graph of the ``fine`` road;
:mod:`~.compression_formula` the symbols and the breakeven formula;
:mod:`~.compression_breakeven` the breakeven bandwidths;
:mod:`~.compression_measure` the PyTorch measurement of the costs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.schemes.allreduce import compression_costs, compression_formula
from queuesgd.schemes.allreduce.compression_costs import METHODS
from queuesgd.schemes.allreduce.compression_graph import COMPRESSION, compressed_allreduce_graph
from queuesgd.schemes.barrier.barrier import BarrierScheme, SymbolicWorkload
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.fine.fine import Bucket, FineModel
from queuesgd.schemes.fine.finegrained import FineGrained
from queuesgd.schemes.memory import Memory
from queuesgd.workload import CostCurve

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Cluster, Workload

__all__ = ["CompressedAllReduce"]


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
        bytes (:func:`~.compression_measure.measure_compression`). For ``"topk"`` the decompression
        is ``n`` times ``decompress_time`` (``n`` sparse vectors summed). The
        defaults, ``0``, are Zhang et al.'s free compression.
    overlap, fusion_bytes, fusion_time, fusion, bucket_cap, first_bucket
        The fine-grained parameters of :class:`~queuesgd.RingAllReduce`
        (:class:`~queuesgd.schemes.fine.finegrained.FineGrained`); the buckets are
        formed on the uncompressed gradients.

    Notes
    -----
    Roads: ``closed_form`` (no overlap, one message: ``E[max X] +
    compress(S) + comm_c + decompress(S) + u``, exact for i.i.d. compute),
    ``ctmc``, ``simulate`` (the barrier family's, with that communication
    phase) and ``fine`` (the task graph of :func:`~.compression_graph.compressed_allreduce_graph`).
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
    parameter_units: ClassVar[dict[str, str]] = {"compress_time": "s/B", "decompress_time": "s/B"}
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
        set_(self, "compress_time", compression_costs.cost_field(f"{name}.compress_time", self.compress_time))
        decompress = compression_costs.cost_field(f"{name}.decompress_time", self.decompress_time)
        set_(self, "decompress_time", decompress)
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
        return compression_costs.wire_bytes(self, tensor_bytes)

    def compress_cost(self, nbytes: Any) -> Any:
        """Seconds one worker compresses ``nbytes`` uncompressed bytes (array-friendly).

        Examples
        --------
        >>> CompressedAllReduce("fp16", compress_time="1ns").compress_cost(4e6)
        0.004
        """
        return compression_costs.apply_cost(self.compress_time, nbytes)  # type: ignore[arg-type]

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
        one = compression_costs.apply_cost(self.decompress_time, nbytes)  # type: ignore[arg-type]
        return workers * one if self.compressor == "topk" else one

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``(compress + compressed collective + decompress, local update)``: one message, no reductions."""
        if isinstance(workload, SymbolicWorkload):
            syms = workload.syms
            size = workload.gradient_bytes
            first, second = compression_costs.symbolic_wire(self, syms, size)
            extra = syms["c_c"] * size + (n if self.compressor == "topk" else 1) * syms["c_d"] * size
            volume, lat = compression_costs.collective_terms(self, n, latency, first, second, True)
        else:
            size = workload.gradient_bytes
            first, second = compression_costs.closed_wire(self, workload)
            extra = self.compress_cost(size) + self.decompress_cost(size, n)
            volume, lat = compression_costs.collective_terms(self, n, latency, first, second, False)
        return extra + volume / bandwidth + lat, workload.update_time

    def message_costs_of(self, workload: Workload, cluster: Cluster, buckets: Sequence[Bucket]) -> np.ndarray:
        """Seconds of each message's compressed collective on the network, reductions included.

        ``topk``: ring all-gather ``(n-1) 2 d S_b / B + (n-1) alpha``;
        ``powersgd``: ring all-reduce of the ``P`` then of the ``Q`` (each
        with its ``n - 1`` vector additions); ``fp16``: ring all-reduce of
        ``S_b / 2`` bytes.

        Examples
        --------
        >>> from queuesgd import Workload, Layer, Cluster
        >>> from queuesgd.schemes.fine.fine import fuse
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
        n, bw, lat = cluster.workers, cluster.bandwidth, cluster.latency
        return compression_costs.collective_costs(self, workload, n, bw, lat, parts)

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        """:func:`~.compression_graph.compressed_allreduce_graph` with this scheme's buckets and costs."""
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
        first, second = compression_costs.closed_wire(self, workload)
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
        wire = compression_costs.closed_wire(self, workload)
        volume, lat = compression_costs.collective_terms(self, n, cluster.latency, *wire, False)
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
        return compression_formula.symbols()

    def _meanings(self) -> dict[str, str]:
        return compression_formula.meanings(self.compressor)

    def _conditions(self, syms: dict[str, Any]) -> tuple[tuple[Any, str], ...]:
        return compression_formula.conditions(self.compressor, syms["G"], syms["r"])

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
        return compression_formula.breakeven_formula(self)

    def _assumptions(self) -> str:
        return (
            f"n i.i.d. compute times; the barrier waits for all n; then {self.compressor} compression of the "
            "S-byte "
            "gradient, its collective (alpha-beta costs, no reductions), decompression and a local update u; "
            "one message, no overlap"
        )
