"""The networks of fully sharded and pipeline runs, calibrated beforehand in runs of their own.

``"sharded"``: gloo's all-gather and reduce-scatter among the FSDP ranks
(:func:`collective_probe`, fitted to alpha-beta, :class:`ShardedCalibration`);
``"p2p"``: batched point-to-point messages between two ranks, the primitive
a pipeline's activations cross (:func:`batch_p2p_probe`). Both through
:func:`calibrate_parallel`; the kind a live scheme takes is its row's
:meth:`~queuesgd.harness.live_schemes.LiveScheme.calibration`.

Examples
--------
>>> calibration_ranks("p2p", 4), calibration_ranks("sharded", 4)     # a boundary joins two ranks
(2, 4)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.provenance import stamp

__all__ = [
    "KINDS",
    "ShardedCalibration",
    "batch_p2p_probe",
    "calibrate_parallel",
    "calibration_ranks",
    "collective_probe",
]

#: Calibrations :func:`calibrate_parallel` makes: FSDP's collectives, and the pipeline's activation link.
KINDS = ("sharded", "p2p")


@dataclass(frozen=True)
class ShardedCalibration(Calibration):
    """A ``"sharded"`` calibration: gloo's all-gather fitted to alpha-beta, and what a reduce-scatter adds.

    ``alpha``, ``bandwidth`` and ``r2`` are the fit of the timed all-gathers
    (``(n - 1) alpha + (n - 1) / n x S / B``). gloo's reduce-scatter is
    slower than its all-gather of the same size (on the development
    machine, 7.3 ms against 2.1 ms for 4 MiB on two ranks: its additions
    and its implementation), so ``reduce_extra`` keeps, per full size ``S``
    (bytes, as a string key), the median reduce-scatter time minus the
    all-gather fit's time at ``S``, clipped at 0: the model charges it as the
    reduce-scatter's ``n - 1`` additions of ``S / n`` bytes
    (``Workload.add_cost``; see :meth:`add_cost`).

    Examples
    --------
    >>> c = ShardedCalibration("sharded", 2, None, 1e-4, 1e9, 1.0, "none", "now",
    ...                        reduce_extra={"4096": 0.0001, "1048576": 0.0003})
    >>> curve = c.add_cost()
    >>> [round(float(curve(x)), 6) for x in (2048, 524288)]     # per rank: S / 2 bytes, one addition
    [0.0001, 0.0003]
    """

    reduce_extra: Mapping[str, float] = field(default_factory=dict)

    def add_cost(self) -> Any:
        """The reduce-scatter's extra time as a per-addition :class:`~queuesgd.workload.CostCurve`."""
        from queuesgd.workload import CostCurve

        n = self.workers
        points = sorted((float(k) / n, max(float(v), 0.0) / (n - 1)) for k, v in self.reduce_extra.items())
        if len(points) < 2:
            return CostCurve([0.0, 1.0], [0.0, 0.0])
        return CostCurve([x for x, _ in points], [t for _, t in points])


def collective_probe(ctx: Any, sizes: list[int], repeats: int, warmup: int, gap: float = 0.0) -> None:
    """In a worker process: time all-gathers and reduce-scatters of each full size; a record per op and size.

    The full tensor is ``size`` bytes of float32 (each rank holds ``size / n``
    of it), as FSDP2 gathers a unit's flat parameters
    (``dist.all_gather_single``) and reduce-scatters its flat gradients
    (``dist.reduce_scatter_single``; torch 2.13,
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``). Each op
    runs after a barrier (and ``gap`` idle seconds); records are
    ``{"op", "size", "t0": [...], "t1": [...]}``.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    n = ctx.world_size
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    for op in ("allgather", "reducescatter"):
        for size in sizes:
            full = torch.ones(size // 4, dtype=torch.float32)
            shard = torch.ones(size // 4 // n, dtype=torch.float32)
            t0s, t1s = [], []
            for r in range(warmup + repeats):
                dist.barrier()
                if gap > 0:
                    time.sleep(gap)
                t0 = time.perf_counter()
                if op == "allgather":
                    gather(full, shard)
                else:
                    scatter(shard, full)
                t1 = time.perf_counter()
                if r >= warmup:
                    t0s.append(t0)
                    t1s.append(t1)
            ctx.report({"op": op, "size": size, "t0": t0s, "t1": t1s})


def batch_p2p_probe(ctx: Any, sizes: list[int], repeats: int, warmup: int, gap: float = 0.0) -> None:
    """In a worker process: ping-pong between ranks 0 and 1 with ``dist.batch_isend_irecv``; rank 0 reports.

    The primitive ``torch.distributed.pipelining`` sends activations and
    their gradients with (``_batch_p2p`` in its ``schedules.py``), each
    operation waited on as the schedules wait on theirs. (Blocking
    ``dist.send``/``dist.recv`` pairs took about 2 ms per message on the
    development machine in some runs, against 0.1 ms this way: the same
    loopback, another code path.) A record's ``t1`` is half the round trip
    after its ``t0``; ``gap`` idle seconds precede each round trip.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    rank, peer = ctx.rank, 1 - ctx.rank

    def one(op: Any, tensor: Any) -> None:
        for work in dist.batch_isend_irecv([dist.P2POp(op, tensor, peer)]):
            work.wait()

    for size in sizes:
        message = torch.zeros(size // 4, dtype=torch.float32)
        t0s, t1s = [], []
        dist.barrier()
        for r in range(warmup + repeats):
            if rank == 0:
                if gap > 0:
                    time.sleep(gap)
                t0 = time.perf_counter()
                one(dist.isend, message)
                one(dist.irecv, message)
                t1 = time.perf_counter()
                if r >= warmup:
                    t0s.append(t0)
                    t1s.append(t0 + (t1 - t0) / 2)
            else:
                one(dist.irecv, message)
                one(dist.isend, message)
        if rank == 0:
            ctx.report({"size": size, "t0": t0s, "t1": t1s})


def _spans(records: list[dict], sizes: list[int]) -> tuple[list[float], list[float]]:
    """Per size and repeat: the latest end minus the latest start over the ranks (one shared clock).

    As the harness's all-reduce calibration reads its probes: the operation's
    time from the moment the last rank joined it.
    """
    nbytes: list[float] = []
    seconds: list[float] = []
    for size in sorted(set(sizes)):
        recs = [r for r in records if int(r.get("size", -1)) == size]
        if not recs:
            raise InvalidParameterError("records", f"none for {size} bytes", "one record per rank and size")
        starts = np.array([r["t0"] for r in recs], dtype=float)
        ends = np.array([r["t1"] for r in recs], dtype=float)
        span = ends.max(axis=0) - starts.max(axis=0)
        nbytes += [float(size)] * span.size
        seconds += [float(x) for x in span]
    return nbytes, seconds


def _fit_collectives(records: list[dict], sizes: list[int], n: int) -> tuple[Any, dict]:
    """The all-gathers' alpha-beta fit, ``t = (n - 1) alpha + (n - 1) / n x S / B``, and the reduce extra.

    The line is fitted as point-to-point messages of ``S / n`` bytes taking
    ``t / (n - 1)`` (the same two unknowns; a ring all-gather is ``n - 1``
    such steps: Thakur, Rabenseifner, Gropp, IJHPCA 2005). The extra is,
    per size, the reduce-scatters' median time minus the fit's time.
    """
    from queuesgd.harness.calibrate import fit_alpha_beta

    b, t = _spans([r for r in records if r.get("op") == "allgather"], sizes)
    fit = fit_alpha_beta([x / n for x in b], [y / (n - 1) for y in t], kind="p2p")
    rb, rt = _spans([r for r in records if r.get("op") == "reducescatter"], sizes)
    extra = {}
    for size in sizes:
        median = float(np.median([y for x, y in zip(rb, rt) if x == size]))
        wire = 0.0 if math.isinf(fit.bandwidth) else (n - 1) / n * size / fit.bandwidth
        model = (n - 1) * fit.alpha + wire
        extra[str(int(size))] = max(median - model, 0.0)
    return fit, extra


def calibrate_parallel(
    kind: str,
    workers: int,
    rate: float | str | None = None,
    *,
    sizes: Iterable[int] = (4096, 1 << 20, 4 << 20),
    repeats: int = 10,
    gap: float = 0.0,
    timeout: float = 300.0,
) -> Calibration:
    """Calibrate the network of an FSDP or a pipeline run beforehand, in a run of its own.

    Parameters
    ----------
    kind : {"sharded", "p2p"}
        ``"sharded"``: timed all-gathers and reduce-scatters among ``workers``
        ranks (:func:`collective_probe`), one alpha-beta fit of both
        (``(n - 1) alpha + (n - 1) / n x S / B`` each). ``"p2p"``: ping-pong
        messages between two ranks
        (:func:`~queuesgd.harness.calibrate.calibrate_p2p`: the link a
        pipeline's activations cross).
    workers : int
        Ranks of the collectives (``>= 2``; 2 for ``"p2p"``).
    rate : float, str or None
        The emulated link rate (network namespaces and ``tc tbf``, as
        :func:`~queuesgd.harness.apriori.calibrate_network`); None: loopback.
    sizes, repeats, gap, timeout
        Full tensor (message) sizes in bytes, timed operations per size,
        idle seconds before each, wall-clock limit.

    Returns
    -------
    Calibration
        With ``kind`` ``"sharded"`` or ``"p2p"``.

    Examples
    --------
    >>> calibrate_parallel("allreduce", 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: kind: got 'allreduce'; accepted: one of 'sharded', 'p2p'
    """
    from queuesgd import units
    from queuesgd.harness import calibrate

    kind = _checks.choice("kind", kind, KINDS)
    n = _checks.integer("workers", workers, minimum=2)
    if kind == "p2p" and n != 2:
        raise InvalidParameterError("workers", workers, "2 for a point-to-point calibration")
    reps = _checks.integer("repeats", repeats)
    idle = _checks.positive("gap", gap, allow_zero=True)
    limit = _checks.positive("timeout", timeout)
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    # Whole float32 elements that split evenly over the ranks.
    sizes_b = sorted({4 * n * max(1, math.ceil(_checks.integer("sizes", s) / (4 * n))) for s in sizes})
    if len(sizes_b) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct sizes in bytes")
    measured = stamp()

    def go(setup: Any, host: str) -> Any:
        from queuesgd.harness.launch import run_workers

        probe = batch_p2p_probe if kind == "p2p" else collective_probe

        def fn(ctx: Any) -> None:
            probe(ctx, sizes_b, reps, 2, idle)

        records = run_workers(fn, n, timeout=limit, progress_timeout=None, setup=setup, host=host)
        if kind == "p2p":
            nbytes, seconds = _spans(records, sizes_b)
            return calibrate.fit_alpha_beta(nbytes, seconds, kind="p2p"), None
        return _fit_collectives(records, sizes_b, n)

    from queuesgd.harness.netns import on_network

    (fit, extra), emulation = on_network(n, bw, go)
    if kind == "p2p":
        return Calibration(kind, n, bw, fit.alpha, fit.bandwidth, fit.r2, emulation, measured)
    return ShardedCalibration(
        kind, n, bw, fit.alpha, fit.bandwidth, fit.r2, emulation, measured, reduce_extra=extra
    )


def calibration_ranks(kind: str, workers: int) -> int:
    """Ranks a calibration of ``kind`` takes for a run of ``workers``: all of them, or the two of a link."""
    kind = _checks.choice("kind", kind, KINDS)
    return 2 if kind == "p2p" else _checks.integer("workers", workers)
