"""What every road of the pipeline model needs: the per-stage costs, and the shape of its answer.

:class:`~queuesgd.schemes.parallel.pipeline.Pipeline` builds a :class:`PipelineSetup`
(:func:`pipeline_setup`: the stage split and the cost of every send,
collective and update, for one workload and cluster; :func:`batch_costs`:
the same for many rows of a sweep) and its roads
(:mod:`~queuesgd.schemes.parallel.pipeline_closed`,
:mod:`~queuesgd.schemes.parallel.pipeline_fine`) turn a makespan into a
:class:`~queuesgd.schemes.base.SchemeSolution` with
:func:`pipeline_solution`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.costs import ring_allgather, ring_allreduce, ring_reduce_scatter
from queuesgd.schemes.parallel.pipeline_graph import require_plain
from queuesgd.schemes.parallel.pipeline_stages import StageSplit
from queuesgd.schemes.solution import bottleneck

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.pipeline import Pipeline
    from queuesgd.workload import Cluster, Workload

__all__ = [
    "PipelineSetup",
    "batch_costs",
    "batch_rows",
    "pipeline_parts",
    "pipeline_setup",
    "pipeline_solution",
    "row_cluster",
    "with_overhead",
]


@dataclass(frozen=True)
class PipelineSetup:
    """Everything a road of :class:`~.pipeline.Pipeline` needs for one workload and cluster.

    Built by :func:`pipeline_setup`; plain data, in seconds and bytes.

    Attributes
    ----------
    profile : StageSplit
        The workload split into the pipeline's stages, each pass lengthened by
        the scheme's ``action_overhead`` (the runtime's work per action, on
        the stage's thread).
    replicas : int
        ``D``, the pipeline replicas.
    speed : ndarray (D, S)
        Speed of every worker (worker ``r S + s`` runs stage ``s`` of replica ``r``).
    deterministic, symmetric : bool
        Deterministic compute; and, with it, identical replicas (one stands for all).
    send : ndarray (S-1,)
        Seconds of one send across each stage boundary.
    gather : ndarray (S,) or None
        All-gather seconds per stage (``data_parallel="sharded"`` only).
    collective, update : ndarray (S,)
        Each stage's gradient collective and optimizer step, seconds.
    """

    profile: StageSplit
    replicas: int
    speed: np.ndarray  # (D, S) speed of every worker
    deterministic: bool
    symmetric: bool
    send: np.ndarray  # (S-1,) seconds per send across each boundary
    gather: np.ndarray | None  # (S,) all-gather seconds, sharded only
    collective: np.ndarray  # (S,)
    update: np.ndarray  # (S,)


def pipeline_setup(scheme: Pipeline, workload: Workload, cluster: Cluster) -> PipelineSetup:
    """The stage split and the costs of every send, collective and update (:class:`PipelineSetup`).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.schemes.parallel.pipeline import Pipeline
    >>> s = Pipeline(2, 4, activation_bytes="1MB")
    >>> st = pipeline_setup(s, Workload("6ms", "2MB"), Cluster(4, "1GB/s"))
    >>> st.replicas, st.send.tolist(), st.collective.tolist()      # ring of 1 MB over 2: 1 ms
    (2, [0.001], [0.001, 0.001])
    """
    profile = with_overhead(scheme.profile(workload), scheme.action_overhead)
    D, S = scheme.replicas(cluster), scheme.stages
    bw, lat = cluster.bandwidth, cluster.latency
    speed = cluster.speed_factors.reshape(D, S)
    deterministic = isinstance(workload.compute, Deterministic)
    symmetric = deterministic and bool(np.all(speed == speed[0])) and cluster.stragglers is None
    row = batch_costs(scheme, workload, np.array([D]), np.array([bw]), np.array([lat]), profile)
    send, gather, collective, update = (None if c is None else c[0] for c in row)
    return PipelineSetup(profile, D, speed, deterministic, symmetric, send, gather, collective, update)


def with_overhead(profile: StageSplit, overhead: float) -> StageSplit:
    """``profile`` with ``overhead`` seconds added to every stage's forward and backward pass.

    The runtime's own work per action (``Pipeline.action_overhead``) runs on
    the stage's thread, serial with the pass: the task graph and the closed
    form read it as part of the pass (with a random compute law the task
    graph scales only the profiled part and adds the overhead as a constant).

    Examples
    --------
    >>> from queuesgd import Workload
    >>> from queuesgd.schemes.parallel.pipeline_stages import stage_split
    >>> p = with_overhead(stage_split(Workload("6ms", "2MB"), 2), 0.0005)
    >>> [round(t, 12) for t in p.forward + p.backward]         # 1 + 0.5 ms, 2 + 0.5 ms per stage
    [0.0015, 0.0015, 0.0025, 0.0025]
    """
    if overhead == 0:
        return profile
    return replace(
        profile,
        forward=tuple(f + overhead for f in profile.forward),
        backward=tuple(b + overhead for b in profile.backward),
        note=f"{profile.note}; + {overhead:.6g} s of runtime work per pass (action_overhead)",
    )


def pipeline_solution(
    scheme: Pipeline,
    workload: Workload,
    cluster: Cluster,
    st: PipelineSetup,
    method: str,
    makespan: float,
    comm: float,
    update: float,
    reason: str,
    details: dict[str, Any],
    **extra: Any,
) -> SchemeSolution:
    """A road's answer: a makespan and its communication and update parts, with the breakdown and details.

    The breakdown and the bottleneck are :func:`pipeline_parts`'. ``extra``
    goes to :class:`~queuesgd.schemes.base.SchemeSolution` (``model``,
    ``interval``).
    """
    breakdown, largest = pipeline_parts(scheme, st, makespan, comm, update)
    return SchemeSolution(
        iteration_rate=1.0 / makespan,
        gradients_per_update=float(st.replicas * scheme.microbatches),
        iteration_time=makespan,
        breakdown=breakdown,
        method=method,
        reason=reason,
        details={**_details(scheme, workload, cluster, st, makespan), **details},
        bottleneck=largest,
        **extra,
    )


def pipeline_parts(
    scheme: Pipeline, st: PipelineSetup, makespan: Any, comm: Any, update: Any
) -> tuple[dict[str, Any], Any]:
    """The breakdown of a makespan and its bottleneck, for one row (numbers) or many (arrays).

    ``compute`` is the busiest worker's passes (at most what the makespan
    leaves after ``comm`` and ``update``); the rest is waiting. The
    bottleneck is the largest part (:func:`~queuesgd.schemes.solution.bottleneck`),
    the same rule for :func:`pipeline_solution` and the sweep's rows.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.schemes.parallel.pipeline import Pipeline
    >>> s = Pipeline(2, 4)
    >>> st = pipeline_setup(s, Workload("6ms", "2MB"), Cluster(2, "1GB/s"))
    >>> parts, which = pipeline_parts(s, st, 0.02, 0.002, 0.0)   # busy: 4 x 3 ms
    >>> {k: round(v, 9) for k, v in parts.items()}, which
    ({'compute': 0.012, 'communication': 0.002, 'update': 0.0, 'waiting': 0.006}, 'compute')
    """
    busy = scheme.microbatches * float(np.max(np.add(st.profile.forward, st.profile.backward) / st.speed))
    before = np.asarray(makespan) - comm - update  # compute and waiting
    compute = np.maximum(np.minimum(busy, before), 0.0)
    parts = {
        "compute": compute,
        "communication": comm,
        "update": update,
        "waiting": np.maximum(np.asarray(makespan) - compute - comm - update, 0.0),
    }
    if np.ndim(makespan) == 0:
        parts = {k: float(v) for k, v in parts.items()}
    return parts, bottleneck(before, busy, comm, update)


def row_cluster(cluster: Cluster, workers: int) -> Cluster:
    """``cluster`` at ``workers`` (a multiple of the stages), the first worker's speed for every worker.

    A sweep's base cluster may have a worker count no row has (one worker
    under two stages); its rows' costs come from this cluster instead
    (:func:`batch_rows` has refused rows whose speeds differ).
    """
    if cluster.workers == workers:
        return cluster
    speeds = None if cluster.speeds is None else [cluster.speeds[0]] * workers
    return cluster.with_workers(workers, speeds=speeds)


def _details(
    scheme: Pipeline, workload: Workload, cluster: Cluster, st: PipelineSetup, makespan: float
) -> dict[str, Any]:
    """The details every road reports: memory, bubble, partition, stage times."""
    mem = scheme.memory(workload, cluster)
    worst = max(range(scheme.stages), key=lambda s: (mem[s].total, -s))
    busy = scheme.microbatches * (np.add(st.profile.forward, st.profile.backward) / st.speed)  # (D, S)
    return {
        "memory": mem[worst],
        "memory_stage": worst,
        "memory_per_stage": mem,
        "bubble": float(1.0 - busy.max() / makespan) if makespan > 0 else 0.0,
        "partition": st.profile.counts,
        "stage_forward": st.profile.forward,
        "stage_backward": st.profile.backward,
        "stage_gradient_bytes": st.profile.gradient_bytes,
        "replicas": st.replicas,
        "schedule": scheme.schedule,
    }


def batch_rows(
    scheme: Pipeline, cluster: Cluster, workers: np.ndarray, bandwidth: np.ndarray, latency: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a sweep: the worker counts, ``D``, bandwidths and latencies per row.

    Refuses worker counts that are no multiple of ``S``; per-worker speeds that
    differ, or ``RandomDelay`` stragglers, raise
    :class:`~queuesgd.errors.NotRepresentable` (the rows are then solved one by one).
    """
    require_plain(cluster)
    n = np.asarray(workers).astype(int).ravel()
    if np.any(n % scheme.stages) or np.any(n < 1):
        bad = int(n[(n % scheme.stages != 0) | (n < 1)][0])
        raise InvalidParameterError(
            "Cluster.workers", bad, f"a multiple of Pipeline.stages (= {scheme.stages})"
        )
    if not cluster.same_speeds:
        raise NotRepresentable("per-worker speeds that differ: solve the rows one by one")
    bw = np.broadcast_to(np.asarray(bandwidth, dtype=float), n.shape)
    lat = np.broadcast_to(np.asarray(latency, dtype=float), n.shape)
    return n, n // scheme.stages, bw, lat


def batch_costs(
    scheme: Pipeline, workload: Workload, D: np.ndarray, bw: np.ndarray, lat: np.ndarray, profile: StageSplit
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """The costs of every send, collective and update for ``k`` rows of replicas, bandwidths and latencies.

    Returns per row: send (k, S-1), gather (k, S) or None, collective (k, S), update (k, S).
    :func:`pipeline_setup` takes its costs from one such row.

    Examples
    --------
    >>> from queuesgd import Workload
    >>> from queuesgd.schemes.parallel.pipeline import Pipeline
    >>> s, w = Pipeline(2, 4, activation_bytes="1MB"), Workload("6ms", "2MB")
    >>> send, gather, collective, update = batch_costs(
    ...     s, w, np.array([1, 2]), np.array([1e9, 1e9]), np.array([0.0, 0.0]), s.profile(w))
    >>> send.tolist(), collective.tolist()          # a ring of 1 MB: free on 1 replica, 1 ms over 2
    ([[0.001], [0.001]], [[0.0, 0.0], [0.001, 0.001]])
    """
    Dc, bwc, latc = D[:, None].astype(float), bw[:, None], lat[:, None]
    send = latc + np.asarray(scheme.activation_sizes(), dtype=float)[None, :] / bwc
    g = np.asarray(profile.gradient_bytes)[None, :]
    p = np.asarray(profile.parameter_bytes)[None, :]
    share = g / workload.gradient_bytes
    if scheme.data_parallel == "sharded":
        collective = ring_reduce_scatter(Dc, g, bwc, latc)
        gather = ring_allgather(Dc, p, bwc, latc)
        update = workload.update_time * share / Dc
    else:
        collective = np.asarray(ring_allreduce(Dc, g, bwc, latc), dtype=float)
        gather = None
        update = np.broadcast_to(workload.update_time * share, collective.shape)
    return send.reshape(len(D), -1), gather, collective, np.array(update)
