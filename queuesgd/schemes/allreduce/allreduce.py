"""Synchronous decentralized SGD: wait for every worker, then one all-reduce.

Three collectives (alpha-beta costs of :mod:`queuesgd.schemes.costs`): a
ring (reduce-scatter then all-gather; Patarasuk and Yuan 2009), a binary
tree (reduce then broadcast; Thakur et al. 2005) and a two-level
hierarchical all-reduce (ring inside each node, ring across nodes, ring
inside again; Jia et al. 2018). After the all-reduce every worker applies
the averaged gradient itself, in parallel: ``workload.update_time`` once per
iteration. Each worker holds what a PyTorch DDP worker holds
(:func:`~queuesgd.schemes.memory.ddp_memory`: a profiled step's memory and
DDP's gradient buckets), where the workload comes from a profile. See
``docs/schemes/allreduce.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks, units
from queuesgd.cluster import MIN_BANDWIDTH
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.barrier.barrier import BarrierScheme, SymbolicWorkload
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.costs import hierarchical_allreduce, ring_allreduce, tree_allreduce
from queuesgd.schemes.fine.fine import FineModel, allreduce_graph, ring_message_costs
from queuesgd.schemes.fine.finegrained import FineGrained
from queuesgd.schemes.memory import Memory, ddp_memory
from queuesgd.workload import Cluster, Workload

__all__ = ["HierarchicalAllReduce", "RingAllReduce", "TreeAllReduce"]


@dataclass(frozen=True)
class _AllReduce(FineGrained, BarrierScheme):
    _message_symbol: ClassVar[str] = "S"

    overlap: bool = True
    fusion_bytes: float | str | None = "64MiB"
    fusion_time: float | str | None = "5ms"
    fusion: str = "threshold"
    bucket_cap: float | str = "25MiB"
    first_bucket: float | str | None = "1MiB"

    def __post_init__(self) -> None:
        self._check_fine_fields()

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        buckets = self.buckets(workload)
        costs = self.message_costs(workload, cluster, np.array([b.nbytes for b in buckets]))
        return allreduce_graph(workload, cluster, buckets, costs, overlap=self.overlap)

    def _collective(self, n: Any, size: Any, bandwidth: Any, latency: Any, workload: Any) -> Any:
        raise NotImplementedError

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``(all-reduce of the gradient, one local update)``; ``ps_shards`` is ignored."""
        comm = self._collective(n, workload.gradient_bytes, bandwidth, latency, workload)
        return comm, workload.update_time

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory | None:
        """One worker's memory under PyTorch DDP (:func:`~queuesgd.schemes.memory.ddp_memory`), or None.

        A profiled workload (:func:`queuesgd.profile` records its memory)
        gets the step's :class:`~queuesgd.schemes.memory.Memory` plus DDP's
        gradient buckets, the same on every worker and for any number of
        workers; a workload without that record gets None. Every road puts
        it in its solution's ``details["memory"]``
        (:attr:`queuesgd.Prediction.memory`).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster, predict
        >>> w = Workload(0.1, "4MB", provenance={"parameter_bytes": 4e6, "optimizer_state_bytes": 4e6,
        ...                                      "kept_activation_bytes": 2e6, "transient_bytes": 3e6})
        >>> predict(RingAllReduce(), w, Cluster(4, "1GB/s")).memory.ddp_buckets
        4000000.0
        >>> RingAllReduce().memory_per_worker(Workload(0.1, "4MB"), Cluster(4, "1GB/s")) is None
        True
        """
        return ddp_memory(workload)

    def _with_memory(self, sol: SchemeSolution, workload: Workload, cluster: Cluster) -> SchemeSolution:
        mem = self.memory_per_worker(workload, cluster)
        return sol if mem is None else replace(sol, details={**sol.details, "memory": mem})

    def _solution(self, workload: Workload, cluster: Cluster, *args: Any, **kwargs: Any) -> SchemeSolution:
        # closed_form, ctmc and simulate all end here
        return self._with_memory(super()._solution(workload, cluster, *args, **kwargs), workload, cluster)

    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The fine-grained task graph (:meth:`FineGrained.solve_fine`), with the memory per worker."""
        sol = super().solve_fine(workload, cluster, rng=rng, iterations=iterations)
        return self._with_memory(sol, workload, cluster)

    def solve_coarse(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The coarse phase model (:meth:`FineGrained.solve_coarse`), with the memory per worker."""
        sol = super().solve_coarse(workload, cluster, rng=rng, iterations=iterations)
        return self._with_memory(sol, workload, cluster)

    def _assumptions(self) -> str:
        return (
            "n i.i.d. compute times; the barrier waits for all n; then one all-reduce of the S-byte "
            "gradient (alpha-beta costs, full-duplex links) and a local update u on every worker in "
            "parallel; no overlap"
        )


@dataclass(frozen=True)
class RingAllReduce(_AllReduce):
    """Synchronous SGD with a ring all-reduce: ``E[max] + 2(n-1)/n S/B + 2(n-1) alpha + u``.

    Parameters
    ----------
    overlap : bool
        Fine and coarse roads: a message's collective starts as soon as its
        last gradient is ready (wait-free back-propagation; default True);
        False: after the whole backward pass.
    fusion : {"threshold", "ddp"}
        How the fine and coarse roads pack gradients into messages:
        ``"threshold"`` (the default; Horovod's fusion buffer, the two
        thresholds below) or ``"ddp"`` (PyTorch DDP's buckets,
        :func:`~queuesgd.schemes.fine.ddp_buckets.ddp_buckets`).
    fusion_bytes, fusion_time : float, str or None
        ``fusion="threshold"``: flush a fused message once it holds this many
        bytes (default ``"64MiB"``) or this much backward computation (default
        ``"5ms"``; :func:`~queuesgd.schemes.fine.fine.fuse`); ``None`` disables
        a threshold, both ``None``: one message per tensor.
    bucket_cap, first_bucket : float, str or None
        ``fusion="ddp"``: DDP's bucket limit (``bucket_cap_mb``, default
        ``"25MiB"``) and its first bucket's (default ``"1MiB"``; ``None``: the
        same as ``bucket_cap``; see
        :class:`~queuesgd.schemes.fine.finegrained.FineGrained`).
    overlap_efficiency : float
        ``eta``, fine road, with ``overlap=True``: the share of the
        communication's overlap with the backward pass that is realized.
        Where the workers' cores also run the collective (gloo on shared
        CPUs), communicating slows the computation it overlaps, and the step
        is ``eta`` of the way from the serial step (``overlap=False``) to the
        fully overlapped one: ``T = eta T_overlap + (1 - eta) T_serial``. 1
        (the default) is full overlap; a measured value comes from
        :func:`queuesgd.harness.overlap.measure_overlap`.

    Notes
    -----
    The closed form, ``ctmc`` and ``simulate`` are the phase model (no
    overlap, one all-reduce of the whole gradient) and ignore every
    parameter above; ``coarse`` reads all of them but ``overlap_efficiency``.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, Layer, predict
    >>> w = Workload(0.1, "100MB", batch_size=32)
    >>> p = predict(RingAllReduce(), w, Cluster(workers=4, bandwidth="1GB/s"))
    >>> round(p.iteration_time, 12)           # 0.1 + 2 x 3/4 x 0.1 s
    0.25
    >>> w = Workload(0.1, None, layers=[Layer("a", "50MB", 0.05), Layer("b", "50MB", 0.05)])
    >>> c = Cluster(workers=4, bandwidth="1GB/s")
    >>> per_layer = dict(fusion_bytes=None, fusion_time=None)     # one message per layer
    >>> half = predict(RingAllReduce(overlap_efficiency=0.5, **per_layer), w, c, "fine")
    >>> full = predict(RingAllReduce(**per_layer), w, c, "fine")
    >>> serial = predict(RingAllReduce(overlap=False, **per_layer), w, c, "fine")
    >>> round(full.iteration_time, 9), round(serial.iteration_time, 9)  # serial: 0.1 + 2 x 3/4 x 0.1 s
    (0.2, 0.25)
    >>> round(half.iteration_time, 9)      # 0.5 x 0.2 + 0.5 x 0.25
    0.225
    """

    key: ClassVar[str] = "ring-allreduce"
    FINE_PARAMETERS: ClassVar[tuple[str, ...]] = (*_AllReduce.FINE_PARAMETERS, "overlap_efficiency")

    overlap_efficiency: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        eta = _checks.positive("RingAllReduce.overlap_efficiency", self.overlap_efficiency, allow_zero=True)
        if eta > 1.0:
            raise InvalidParameterError("RingAllReduce.overlap_efficiency", eta, "a share between 0 and 1")
        if eta < 1.0 and not self.overlap:
            raise InvalidParameterError(
                "RingAllReduce.overlap_efficiency",
                eta,
                "1 with overlap=False (there is no overlap to realize)",
            )
        object.__setattr__(self, "overlap_efficiency", eta)

    def solve_fine(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The fine-grained task graph; with ``overlap_efficiency < 1``, blended with the serial step's."""
        full = super().solve_fine(workload, cluster, rng=rng, iterations=iterations)
        eta = self.overlap_efficiency
        if eta == 1.0:
            return full
        serial_scheme = replace(self, overlap=False, overlap_efficiency=1.0)
        serial = serial_scheme.solve_fine(workload, cluster, rng=rng, iterations=iterations)
        # Only part of the communication hides behind the backward pass: the step is eta of the way from
        # the serial step to the fully overlapped one, each the samples of an iteration over the road's
        # samples per second (as predict reports them).
        b = workload.batch_size
        samples = cluster.workers * b
        rate_full = full.iteration_rate * full.gradients_per_update * b
        rate_serial = serial.iteration_rate * serial.gradients_per_update * b
        it = eta * samples / rate_full + (1.0 - eta) * samples / rate_serial
        breakdown = {
            k: eta * full.breakdown.get(k, 0.0) + (1.0 - eta) * serial.breakdown.get(k, 0.0)
            for k in {*full.breakdown, *serial.breakdown}
        }
        reason = (
            f"{full.reason}; overlap efficiency {eta:.3f}: the step is {eta:.3f} x the overlapped step "
            f"({full.iteration_time:.6g} s) + {1 - eta:.3f} x the serial one ({serial.iteration_time:.6g} s)"
        )
        details = {
            **full.details,
            "overlapped_step": full.iteration_time,
            "serial_step": serial.iteration_time,
        }
        return replace(
            full,
            iteration_rate=1.0 / it,
            iteration_time=it,
            breakdown=breakdown,
            reason=reason,
            details=details,
            interval=None,
            bottleneck=max(breakdown, key=lambda key: breakdown[key]),
        )

    def message_costs(self, workload: Workload, cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
        """Reduce-scatter (with ``n - 1`` vector additions of ``S/n`` bytes) then all-gather, per message."""
        n = cluster.workers
        return ring_message_costs(n, nbytes, cluster.bandwidth, cluster.latency, workload.reduction_time)

    def _collective(self, n: Any, size: Any, bandwidth: Any, latency: Any, workload: Any) -> Any:
        return ring_allreduce(n, size, bandwidth, latency)


@dataclass(frozen=True)
class TreeAllReduce(_AllReduce):
    """Synchronous SGD with a binary-tree all-reduce: ``E[max] + 2 ceil(log2 n) (alpha + S/B) + u``.

    Parameters
    ----------
    overlap : bool
        Wait-free back-propagation in the fine and coarse roads, as
        :class:`~queuesgd.RingAllReduce`'s.
    fusion : {"threshold", "ddp"}
        The fusion policy of the fine and coarse roads, as :class:`~queuesgd.RingAllReduce`'s.
    fusion_bytes, fusion_time : float, str or None
        ``fusion="threshold"``'s thresholds, as :class:`~queuesgd.RingAllReduce`'s.
    bucket_cap, first_bucket : float, str or None
        ``fusion="ddp"``'s bucket limits, as :class:`~queuesgd.RingAllReduce`'s.

    Notes
    -----
    The closed form, ``ctmc`` and ``simulate`` ignore these parameters (the
    phase model, no overlap, one message).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> w = Workload(0.1, "100MB", batch_size=32)
    >>> p = predict(TreeAllReduce(), w, Cluster(workers=4, bandwidth="1GB/s"))
    >>> round(p.iteration_time, 12)           # 0.1 + 2 x 2 levels x 0.1 s
    0.5
    """

    key: ClassVar[str] = "tree-allreduce"

    def message_costs(self, workload: Workload, cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
        """Tree reduce then broadcast per message, one vector addition of ``S`` per level going up."""
        s = np.asarray(nbytes, dtype=float)
        depth = np.ceil(np.log2(cluster.workers) - 1e-12) if cluster.workers > 1 else 0.0
        return tree_allreduce(cluster.workers, s, cluster.bandwidth, cluster.latency) + depth * np.asarray(
            workload.reduction_time(s)
        )

    def _collective(self, n: Any, size: Any, bandwidth: Any, latency: Any, workload: Any) -> Any:
        return tree_allreduce(n, size, bandwidth, latency)


@dataclass(frozen=True)
class HierarchicalAllReduce(_AllReduce):
    """Synchronous SGD with a two-level all-reduce: inside each node, across nodes, inside again.

    Parameters
    ----------
    per_node : int
        Workers per node (``g``, default 8); the number of workers must be a multiple.
    intra_bandwidth : float or str
        Bandwidth between the workers of one node (``"100Gbit/s"``, NVLink or
        PCIe), bytes/s (default ``"100Gbit/s"``).
    intra_latency : float or str
        One-way latency inside a node, seconds (default 0).
    overlap : bool
        Wait-free back-propagation in the fine and coarse roads, as
        :class:`~queuesgd.RingAllReduce`'s.
    fusion : {"threshold", "ddp"}
        The fusion policy of the fine and coarse roads, as :class:`~queuesgd.RingAllReduce`'s.
    fusion_bytes, fusion_time : float, str or None
        ``fusion="threshold"``'s thresholds, as :class:`~queuesgd.RingAllReduce`'s.
    bucket_cap, first_bucket : float, str or None
        ``fusion="ddp"``'s bucket limits, as :class:`~queuesgd.RingAllReduce`'s.

    Notes
    -----
    Every road reads ``per_node``, ``intra_bandwidth`` and ``intra_latency``;
    the fusion parameters, the fine and coarse roads only. The iteration
    time is ``E[max] + 2(g-1)/g S/B_intra + 2(g-1) alpha_intra
    + 2(r-1)/r S/B + 2(r-1) alpha + u`` with ``r = n / g`` nodes (see
    :func:`~queuesgd.schemes.costs.hierarchical_allreduce`).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> w = Workload(0.1, "100MB", batch_size=32)
    >>> s = HierarchicalAllReduce(per_node=2, intra_bandwidth="10GB/s")
    >>> p = predict(s, w, Cluster(workers=4, bandwidth="1GB/s"))
    >>> round(p.iteration_time, 12)           # 0.1 + 2 x 1/2 x 0.01 s + 2 x 1/2 x 0.1 s
    0.21
    >>> predict(s, w, Cluster(workers=3, bandwidth="1GB/s"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HierarchicalAllReduce.per_node: got 2; accepted: ...
    """

    key: ClassVar[str] = "hierarchical-allreduce"
    parameter_units: ClassVar[dict[str, str]] = {"intra_bandwidth": "B/s", "intra_latency": "s"}
    placement_hint: ClassVar[str] = "its nodes are its own per_node, intra_bandwidth and intra_latency"

    per_node: int = 8
    intra_bandwidth: float | str = "100Gbit/s"
    intra_latency: float | str = 0.0

    def __post_init__(self) -> None:
        self._check_fine_fields()
        set_ = object.__setattr__
        per_node = _checks.integer("HierarchicalAllReduce.per_node", self.per_node, maximum=_checks.MAX_COUNT)
        set_(self, "per_node", per_node)
        bw = units.parse_bandwidth(self.intra_bandwidth, "HierarchicalAllReduce.intra_bandwidth")
        if bw < MIN_BANDWIDTH:  # as Cluster.bandwidth: below 1 bit/s transfer times of real sizes overflow
            raise InvalidParameterError(
                "HierarchicalAllReduce.intra_bandwidth", self.intra_bandwidth, "at least 1 bit/s (0.125 B/s)"
            )
        set_(self, "intra_bandwidth", bw)
        lat = _checks.duration("HierarchicalAllReduce.intra_latency", self.intra_latency)
        set_(self, "intra_latency", lat)

    def check(self, workload: Workload, cluster: Cluster) -> None:
        if cluster.workers % self.per_node:
            raise InvalidParameterError(
                "HierarchicalAllReduce.per_node",
                self.per_node,
                f"a divisor of the number of workers (= {cluster.workers}): the workers fill whole nodes",
            )

    def _symbols(self) -> dict[str, Any]:
        import sympy

        return {
            "g": sympy.Symbol("g", integer=True, positive=True),
            "B_intra": sympy.Symbol("B_intra", positive=True),
            "alpha_intra": sympy.Symbol("alpha_intra", positive=True),
        }

    def message_costs(self, workload: Workload, cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
        """Two-level all-reduce per message, with the reduce-scatter additions of both rings."""
        s = np.asarray(nbytes, dtype=float)
        g, m = self.per_node, cluster.workers // self.per_node
        bw, lat = cluster.bandwidth, cluster.latency
        comm = hierarchical_allreduce(
            cluster.workers, g, s, bw, lat, self.intra_bandwidth, self.intra_latency
        )
        add = (g - 1) * np.asarray(workload.reduction_time(s / g)) + (m - 1) * np.asarray(
            workload.reduction_time(s / (g * m))
        )
        return comm + add

    def _collective(self, n: Any, size: Any, bandwidth: Any, latency: Any, workload: Any) -> Any:
        if isinstance(workload, SymbolicWorkload):
            g, bi, ai = (workload.syms[k] for k in ("g", "B_intra", "alpha_intra"))
        else:
            g, bi, ai = self.per_node, self.intra_bandwidth, self.intra_latency
        return hierarchical_allreduce(n, g, size, bandwidth, latency, bi, ai)
