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
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp

__all__ = [
    "KINDS",
    "SHARDED_MODES",
    "ShardedCalibration",
    "batch_p2p_probe",
    "calibrate_parallel",
    "calibration_ranks",
    "collective_probe",
]

#: Calibrations :func:`calibrate_parallel` makes: FSDP's collectives, and the pipeline's activation link.
KINDS = ("sharded", "p2p")

#: How a ``"sharded"`` calibration times and reduces its collectives (a campaign spec's
#: ``"sharded_calibration"``): ``"idle-median"``, each after a barrier (and an idle gap), timed from the
#: last rank's start, the median per size; ``"busy-mean"``, each after every rank's own synthetic work,
#: timed by each rank from the end of its work (what a rank waits in a step, its peer's lag included), the
#: mean per size (a step is a sum of its collectives, and a throughput the reciprocal of a mean step).
SHARDED_MODES = ("idle-median", "busy-mean")


@dataclass(frozen=True)
class ShardedCalibration(Calibration):
    """A ``"sharded"`` calibration: gloo's all-gather fitted to alpha-beta, and what a reduce-scatter adds.

    ``alpha``, ``bandwidth`` and ``r2`` are the fit of the timed all-gathers
    (``(n - 1) alpha + (n - 1) / n x S / B``). gloo's reduce-scatter is
    slower than its all-gather of the same size (on the development
    machine, 7.3 ms against 2.1 ms for 4 MiB on two ranks: its additions
    and its implementation), so ``reduce_extra`` keeps, per full size ``S``
    (bytes, as a string key), the median (``mode`` ``"busy-mean"``: mean)
    reduce-scatter time minus the
    all-gather fit's time at ``S``, clipped at 0: the model charges it as the
    reduce-scatter's ``n - 1`` additions of ``S / n`` bytes
    (``Workload.add_cost``; see :meth:`add_cost`). ``mode`` and
    ``busy_work``: how the collectives were timed (:data:`SHARDED_MODES`).

    Examples
    --------
    >>> c = ShardedCalibration("sharded", 2, None, 1e-4, 1e9, 1.0, "none", "now",
    ...                        reduce_extra={"4096": 0.0001, "1048576": 0.0003})
    >>> curve = c.add_cost()
    >>> [round(float(curve(x)), 6) for x in (2048, 524288)]     # per rank: S / 2 bytes, one addition
    [0.0001, 0.0003]
    """

    reduce_extra: Mapping[str, float] = field(default_factory=dict)
    mode: str = "idle-median"  # SHARDED_MODES: how the collectives were timed and reduced
    busy_work: float = 0.0  # "busy-mean": seconds of synthetic work before each collective

    def add_cost(self) -> Any:
        """The reduce-scatter's extra time as a per-addition :class:`~queuesgd.workload.CostCurve`."""
        from queuesgd.workload import CostCurve

        n = self.workers
        points = sorted((float(k) / n, max(float(v), 0.0) / (n - 1)) for k, v in self.reduce_extra.items())
        if len(points) < 2:
            return CostCurve([0.0, 1.0], [0.0, 0.0])
        return CostCurve([x for x, _ in points], [t for _, t in points])


def collective_probe(
    ctx: Any, sizes: list[int], repeats: int, warmup: int, gap: float = 0.0, busy: float = 0.0
) -> None:
    """In a worker process: time all-gathers and reduce-scatters of each full size; a record per op and size.

    The full tensor is ``size`` bytes of float32 (each rank holds ``size / n``
    of it), as FSDP2 gathers a unit's flat parameters
    (``dist.all_gather_single``) and reduce-scatters its flat gradients
    (``dist.reduce_scatter_single``; torch 2.13,
    ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``). Each op
    runs after a barrier (and ``gap`` idle seconds); with ``busy > 0`` each
    rank then first computes products of two 128 x 128 float32 matrices, as
    many as took ``busy`` seconds on it before the first op (the same work on
    every rank, as the ranks of a step compute alike), and its ``t0`` is the
    end of that work. Records are ``{"op", "size", "t0": [...], "t1": [...]}``.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    n = ctx.world_size
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    work = _busy_work(torch, busy)
    for op in ("allgather", "reducescatter"):
        for size in sizes:
            full = torch.ones(size // 4, dtype=torch.float32)
            shard = torch.ones(size // 4 // n, dtype=torch.float32)
            t0s, t1s = [], []
            for r in range(warmup + repeats):
                dist.barrier()
                if gap > 0:
                    time.sleep(gap)
                work()
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


def _busy_work(torch: Any, seconds: float) -> Any:
    """A function that computes for about ``seconds`` (matrix products counted once, here); a no-op at 0."""
    if seconds <= 0:
        return lambda: None
    a, b = torch.rand(128, 128), torch.rand(128, 128)
    for _ in range(20):  # warm
        torch.mm(a, b)
    t0 = time.perf_counter()
    for _ in range(200):
        torch.mm(a, b)
    count = max(1, round(seconds / ((time.perf_counter() - t0) / 200)))

    def work() -> None:
        for _ in range(count):
            torch.mm(a, b)

    return work


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


def _spans(records: list[dict], sizes: list[int], *, own: bool = False) -> tuple[list[float], list[float]]:
    """Per size and repeat, one time over the ranks (one shared clock).

    By default the latest end minus the latest start: as the harness's
    all-reduce calibration reads its probes, the operation's time from the
    moment the last rank joined it. With ``own``: the mean over the ranks of
    each rank's own time from its ``t0`` to its ``t1``, what a rank of a step
    waits at the collective (the operation, and the lag of a peer that reached
    it later).

    Examples
    --------
    >>> recs = [{"size": 8, "t0": [0.0, 1.0], "t1": [0.5, 1.2]},     # rank 0: 0.5 s, 0.2 s
    ...         {"size": 8, "t0": [0.2, 1.0], "t1": [0.5, 1.4]}]     # rank 1: 0.3 s, 0.4 s
    >>> _spans(recs, [8], own=True)
    ([8.0, 8.0], [0.4, 0.3])
    >>> _spans(recs, [8])                                             # from the last start: 0.3 s, 0.4 s
    ([8.0, 8.0], [0.3, 0.3999999999999999])
    """
    nbytes: list[float] = []
    seconds: list[float] = []
    for size in sorted(set(sizes)):
        recs = [r for r in records if int(r.get("size", -1)) == size]
        if not recs:
            raise InvalidParameterError("records", f"none for {size} bytes", "one record per rank and size")
        starts = np.array([r["t0"] for r in recs], dtype=float)
        ends = np.array([r["t1"] for r in recs], dtype=float)
        if own:
            span = [round(float(x), 12) for x in (ends - starts).mean(axis=0)]
        else:
            span = [float(x) for x in ends.max(axis=0) - starts.max(axis=0)]
        nbytes += [float(size)] * len(span)
        seconds += span
    return nbytes, seconds


def _fit_collectives(
    records: list[dict], sizes: list[int], n: int, mode: str = "idle-median"
) -> tuple[Any, dict]:
    """The all-gathers' alpha-beta fit, ``t = (n - 1) alpha + (n - 1) / n x S / B``, and the reduce extra.

    The line is fitted as point-to-point messages of ``S / n`` bytes taking
    ``t / (n - 1)`` (the same two unknowns; a ring all-gather is ``n - 1``
    such steps: Thakur, Rabenseifner, Gropp, IJHPCA 2005) to each size's
    median time (``mode`` ``"busy-mean"``: each rank's own times,
    ``_spans(own=True)``, reduced to each size's mean). The extra is, per
    size, the reduce-scatters' median (mean) time minus the fit's time.
    """
    from queuesgd.harness.calibrate import fit_alpha_beta

    mean = mode == "busy-mean"
    reduce = np.mean if mean else np.median
    b, t = _spans([r for r in records if r.get("op") == "allgather"], sizes, own=mean)
    if mean:  # one point per size, its mean (fit_alpha_beta reduces each size to its median)
        b, t = [float(s) for s in sizes], [float(np.mean([y for x, y in zip(b, t) if x == s])) for s in sizes]
    fit = fit_alpha_beta([x / n for x in b], [y / (n - 1) for y in t], kind="p2p")
    rb, rt = _spans([r for r in records if r.get("op") == "reducescatter"], sizes, own=mean)
    extra = {}
    for size in sizes:
        typical = float(reduce([y for x, y in zip(rb, rt) if x == size]))
        wire = 0.0 if math.isinf(fit.bandwidth) else (n - 1) / n * size / fit.bandwidth
        model = (n - 1) * fit.alpha + wire
        extra[str(int(size))] = max(typical - model, 0.0)
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
    mode: str = "idle-median",
    busy: float = 0.0,
    force: bool = False,
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
    mode, busy
        ``"sharded"`` only: how the collectives are timed and reduced
        (:data:`SHARDED_MODES`), and with ``"busy-mean"`` the seconds of
        synthetic work each rank does before each collective (> 0; an FSDP
        step's compute between two of its collectives).
    force : bool
        Start more ranks than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts
        (or any namespace is made).

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
    check_processes("workers", workers, n, force=force)
    reps = _checks.integer("repeats", repeats)
    idle = _checks.positive("gap", gap, allow_zero=True)
    mode = _checks.choice("mode", mode, SHARDED_MODES)
    work = _checks.positive("busy", busy, allow_zero=True)
    if (mode == "busy-mean") != (work > 0):
        raise InvalidParameterError("busy", busy, "seconds > 0 with mode 'busy-mean', and 0 otherwise")
    if mode != "idle-median" and kind != "sharded":
        raise InvalidParameterError("mode", mode, "'idle-median' for a 'p2p' calibration")
    limit = _checks.positive("timeout", timeout)
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    # Whole float32 elements that split evenly over the ranks.
    sizes_b = sorted({4 * n * max(1, math.ceil(_checks.integer("sizes", s) / (4 * n))) for s in sizes})
    if len(sizes_b) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct sizes in bytes")
    measured = stamp()

    def go(setup: Any, host: str) -> Any:
        from queuesgd.harness.launch import run_workers

        def fn(ctx: Any) -> None:
            if kind == "p2p":
                batch_p2p_probe(ctx, sizes_b, reps, 2, idle)
            else:
                collective_probe(ctx, sizes_b, reps, 2, idle, work)

        records = run_workers(
            fn, n, timeout=limit, progress_timeout=None, setup=setup, host=host, force=force
        )
        if kind == "p2p":
            nbytes, seconds = _spans(records, sizes_b)
            return calibrate.fit_alpha_beta(nbytes, seconds, kind="p2p"), None
        return _fit_collectives(records, sizes_b, n, mode)

    from queuesgd.harness.netns import on_network

    (fit, extra), emulation = on_network(n, bw, go)
    common = (kind, n, bw, fit.alpha, fit.bandwidth, fit.r2, emulation, measured)
    if kind == "p2p":
        return Calibration(*common, samples=fit.samples)  # its sizes' medians
    return ShardedCalibration(*common, reduce_extra=extra, mode=mode, busy_work=work)


def calibration_ranks(kind: str, workers: int) -> int:
    """Ranks a calibration of ``kind`` takes for a run of ``workers``: all of them, or the two of a link."""
    kind = _checks.choice("kind", kind, KINDS)
    return 2 if kind == "p2p" else _checks.integer("workers", workers)
