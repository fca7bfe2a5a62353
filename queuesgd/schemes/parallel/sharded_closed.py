"""The closed-form road of sharded data parallelism: its two limiting cases, exact where they hold.

- :func:`full_overlap` -- whether every collective but the first gather and
  the last reduction hides under the compute, and the step then
  (vectorized over workers, bandwidths and latencies);
- :func:`exposed_sum` -- every collective of a step, one after the other
  (the no-overlap case);
- :func:`closed_parts`, :func:`solve_closed_form` and
  :func:`batch_closed_form` -- the road of
  :class:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel` (one
  configuration, or a sweep in one evaluation).

The assumptions are the module docstring's of :mod:`queuesgd.schemes.parallel.sharded`.

Examples
--------
>>> import numpy as np
>>> from queuesgd import Workload, Layer
>>> from queuesgd.schemes.parallel.sharded import ShardedDataParallel
>>> w = Workload(0.09, None, layers=[Layer(f"l{i}", 10e6, "20ms", "10ms") for i in range(3)])
>>> ok, it = full_overlap(ShardedDataParallel(), w, np.array([4]), np.array([1e9]), 0.0)
>>> ok.tolist(), it.round(6).tolist()
([True], [0.105])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.distributions import Deterministic
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.base import BatchSolution, SchemeSolution
from queuesgd.schemes.laws import worker_laws
from queuesgd.schemes.parallel.sharded_graph import unit_costs
from queuesgd.schemes.solution import bottleneck

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.sharded import ShardedDataParallel
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "RTOL",
    "batch_closed_form",
    "closed_parts",
    "exposed_sum",
    "full_overlap",
    "own_compute",
    "solve_closed_form",
]

#: Relative slack of the full-overlap conditions (a gather that fits under compute up to rounding).
RTOL = 1e-12


def full_overlap(
    scheme: ShardedDataParallel,
    workload: Workload,
    n: Any,
    bandwidth: Any,
    latency: Any,
    stretch: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(holds, iteration_time)`` of the full-overlap case, vectorized over ``n``, B, alpha.

    :meth:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel.full_overlap`,
    which states the conditions.
    """
    us = scheme.unit_list(workload)
    a, r, c = unit_costs(workload, us, n, bandwidth, latency)
    f = np.array([u.forward_time for u in us]) * stretch
    b = np.array([u.backward_time for u in us]) * stretch
    other = (workload.phase_times().other if workload.layers is not None else 0.0) * stretch
    compute = other + f.sum() + b.sum()
    upd = scheme.update_seconds(workload, n)
    k = len(us)
    tol = RTOL * max(compute, 1e-300)
    if scheme.stage in (0, 2):
        msg = c if scheme.stage == 0 else r
        ends = other + f.sum() + np.cumsum(b[::-1])[::-1]  # e_i, end of B(i)
        g = np.full(a.shape[:-1], -np.inf)
        for i in range(k - 1, 0, -1):
            g = np.maximum(g, ends[i]) + msg[..., i]
        holds = g <= ends[0] + tol
        it = compute + msg[..., 0] + upd
        if scheme.stage == 2:
            it = it + a.sum(axis=-1)
        return np.broadcast_to(holds, it.shape).copy(), it
    if scheme.stage != 3 or not scheme.prefetch:
        raise NotRepresentable(f"stage {scheme.stage} with these settings has no overlap: see no_overlap")
    holds = np.ones(a.shape[:-1], dtype=bool)
    for i in range(1, k):
        holds &= a[..., i] <= f[i - 1] + tol
    for i in range(k):
        before = r[..., i + 1] if (scheme.overlap and i + 1 < k) else 0.0  # r_{i+1}, issued first
        load = before + (a[..., i - 1] if i >= 1 else 0.0)
        holds &= load <= b[i] + tol
    tail = r[..., 0] if scheme.overlap else r.sum(axis=-1)
    it = a[..., 0] + compute + tail + upd
    return holds, it


def exposed_sum(scheme: ShardedDataParallel, a: np.ndarray, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Sum of every collective of one step (the no-overlap case), from :func:`~.sharded_graph.unit_costs`.

    Stage 0: every all-reduce ``sum c``; stages 1 and 2: every reduce-scatter
    and every all-gather ``sum r + sum a``; stage 3: the gathers before the
    forwards and before all but the last backward, and the reduce-scatters,
    ``sum a + sum_{i<k-1} a_i + sum r``.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.sharded import ShardedDataParallel
    >>> a, r, c = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])
    >>> [float(exposed_sum(ShardedDataParallel(stage=s), a, r, c)) for s in (0, 1, 3)]
    [11.0, 10.0, 11.0]
    """
    if scheme.stage == 0:
        return c.sum(axis=-1)
    if scheme.stage in (1, 2):
        return r.sum(axis=-1) + a.sum(axis=-1)
    return a.sum(axis=-1) + a[..., :-1].sum(axis=-1) + r.sum(axis=-1)


def closed_parts(
    scheme: ShardedDataParallel,
    workload: Workload,
    cluster: Cluster,
    n: np.ndarray,
    bw: np.ndarray,
    lat: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(iteration time, wait to the slowest compute, exposed communication, reason)`` per row.

    The no-overlap case where every collective is exposed (any compute laws),
    else the full-overlap case (deterministic workers, where
    :func:`full_overlap` holds); elsewhere
    :class:`~queuesgd.errors.NotRepresentable` says why.
    """
    if cluster.stragglers is not None:
        raise NotRepresentable("ShardedDataParallel does not model RandomDelay stragglers")
    upd = np.broadcast_to(np.asarray(scheme.update_seconds(workload, n), dtype=float), n.shape)
    if scheme.all_exposed(workload):
        from queuesgd.schemes.barrier.kofn import time_to_barrier

        waits = {}
        for nn in np.unique(n).tolist():
            waits[nn] = time_to_barrier(worker_laws(workload, _with_workers(cluster, nn)), int(nn))
        wait = np.array([waits[v] for v in n.tolist()], dtype=float).reshape(n.shape)
        a, r, c = unit_costs(workload, scheme.unit_list(workload), n, bw, lat)
        comm = exposed_sum(scheme, a, r, c)
        reason = (
            "closed form, no overlap: E[max_w X_w] (order statistics) + every collective one after the "
            "other (ring alpha-beta) + update; exact, every collective is on the critical path"
        )
        return wait + comm + upd, wait, comm, reason
    if not all(isinstance(law, Deterministic) for law in worker_laws(workload, cluster)):
        raise NotRepresentable(
            "ShardedDataParallel closed form with overlap needs deterministic compute (whether the "
            "collectives fit under a random compute time changes from step to step); use method='fine'"
        )
    speeds = np.asarray(cluster.speed_factors, dtype=float)
    stretch = 1.0 / float(speeds.min())
    holds, it = full_overlap(scheme, workload, n, bw, lat, stretch)
    if not np.all(holds):
        raise NotRepresentable(
            f"ShardedDataParallel (stage {scheme.stage}) closed form: the collectives do not all fit under "
            "the compute here (the full-overlap condition of ShardedDataParallel.full_overlap fails), so "
            "the step is not a closed form; use method='fine' (the task graph, exact)"
        )
    wait = np.full(n.shape, workload.compute_time * stretch)
    reason = (
        "closed form, full overlap: every collective but the first gather, the last reduction and the "
        "post-update gathers hides under compute (the condition of full_overlap holds); exact"
    )
    return it, wait, it - wait - upd, reason


def own_compute(workload: Workload, cluster: Cluster, n: np.ndarray) -> np.ndarray:
    """A worker's mean own compute time per row of ``n`` workers (:func:`~.kofn.mean_compute`)."""
    from queuesgd.schemes.barrier.kofn import mean_compute

    means = {nn: mean_compute(workload, _with_workers(cluster, nn)) for nn in np.unique(n).tolist()}
    return np.array([means[v] for v in n.tolist()], dtype=float).reshape(n.shape)


def _with_workers(cluster: Cluster, n: int) -> Cluster:
    return cluster if n == cluster.workers else cluster.with_workers(int(n))


def solve_closed_form(scheme: ShardedDataParallel, workload: Workload, cluster: Cluster) -> SchemeSolution:
    """:meth:`~.sharded.ShardedDataParallel.solve_closed_form` (one configuration)."""
    n = np.array([cluster.workers])
    bw, lat = np.array([cluster.bandwidth]), np.array([cluster.latency])
    it, wait, comm, reason = closed_parts(scheme, workload, cluster, n, bw, lat)
    t, w, cm = float(it[0]), float(wait[0]), float(comm[0])
    upd = float(scheme.update_seconds(workload, cluster.workers))
    compute = min(float(own_compute(workload, cluster, n)[0]), w)
    breakdown = {"compute": compute, "communication": cm, "update": upd, "waiting": w - compute}
    return SchemeSolution(
        iteration_rate=1.0 / t,
        gradients_per_update=float(cluster.workers),
        iteration_time=t,
        breakdown=breakdown,
        method="closed_form",
        reason=reason,
        details={"memory": scheme.memory(workload, cluster), "units": len(scheme.unit_list(workload))},
        bottleneck=bottleneck(w, compute, cm, upd),
    )


def batch_closed_form(
    scheme: ShardedDataParallel,
    workload: Workload,
    cluster: Cluster,
    workers: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
) -> BatchSolution:
    """:meth:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel.batch_closed_form` (one evaluation).

    Each row's ``bottleneck`` is :func:`solve_closed_form`'s: the largest part
    of the breakdown, waiting at the barrier apart from compute
    (:func:`~queuesgd.schemes.solution.bottleneck`).
    """
    n = np.asarray(workers).astype(int).ravel()
    bw = np.broadcast_to(np.asarray(bandwidth, dtype=float), n.shape)
    lat = np.broadcast_to(np.asarray(latency, dtype=float), n.shape)
    it, wait, comm, _ = closed_parts(scheme, workload, cluster, n, bw, lat)
    upd = np.broadcast_to(np.asarray(scheme.update_seconds(workload, n), dtype=float), n.shape)
    which = bottleneck(wait, own_compute(workload, cluster, n), comm, upd)
    return BatchSolution(1.0 / it, n.astype(float), which, "closed_form")
