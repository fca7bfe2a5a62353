"""The fine road of the pipeline model: the task graph of one step, solved exactly or by Monte Carlo.

:func:`build_graph` builds the graph of
:func:`~queuesgd.schemes.parallel.pipeline_graph.pipeline_graph` from a
:class:`~queuesgd.schemes.parallel.pipeline_setup.PipelineSetup` (refusing one too
large to build); :func:`solve_fine` solves it (the longest path if
deterministic, else a Monte Carlo of :func:`queuesgd.dag.simulate`);
:func:`batch_fine` evaluates one graph at many communication costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.dag import TaskGraph, default_iterations, schedule, simulate
from queuesgd.distributions import Deterministic
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.base import BatchSolution, SchemeSolution
from queuesgd.schemes.fine.fine import COMMUNICATION
from queuesgd.schemes.parallel.pipeline_bucket import bucket_durations, with_bucket
from queuesgd.schemes.parallel.pipeline_closed import closed_form_blocker, condition_blocker
from queuesgd.schemes.parallel.pipeline_graph import (
    MAX_TASKS,
    check_task_count,
    pipeline_graph,
    require_plain,
    task_count,
)
from queuesgd.schemes.parallel.pipeline_setup import (
    PipelineSetup,
    batch_costs,
    batch_rows,
    pipeline_parts,
    pipeline_setup,
    pipeline_solution,
    row_cluster,
)

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.pipeline import Pipeline
    from queuesgd.workload import Cluster, Workload

__all__ = ["batch_fine", "build_graph", "solve_fine"]


def build_graph(
    scheme: Pipeline, workload: Workload, cluster: Cluster, st: PipelineSetup, symmetric: bool
) -> TaskGraph:
    """The task graph of one step from ``st``; ``symmetric`` draws one replica (see ``Pipeline.task_graph``).

    A graph above :data:`~queuesgd.schemes.parallel.pipeline_graph.MAX_TASKS` tasks is
    refused before it is built, with the closed form as the hint where it is
    exact.
    """
    drawn = 1 if symmetric else st.replicas
    if task_count(scheme.stages, scheme.microbatches, drawn, sharded=st.gather is not None) > MAX_TASKS:
        check_task_count(
            scheme.stages,
            scheme.microbatches,
            drawn,
            sharded=st.gather is not None,
            hint=_large_graph_hint(scheme, workload, cluster, st),
        )
    return pipeline_graph(
        workload,
        cluster,
        st.profile,
        microbatches=scheme.microbatches,
        schedule=scheme.schedule,
        send_costs=st.send,
        gather_costs=st.gather,
        collective_costs=st.collective,
        update_costs=st.update,
        replicas=st.replicas,
        overlap=scheme.overlap,
        symmetric=symmetric,
        p2p=scheme.p2p,
        duplex=scheme.duplex,
        overhead=scheme.action_overhead,
    )


def _large_graph_hint(scheme: Pipeline, workload: Workload, cluster: Cluster, st: PipelineSetup) -> str:
    """What to use instead of a task graph too large to build: the closed form where it is exact."""
    blocker = closed_form_blocker(scheme, workload, cluster, st)
    if blocker is None:
        blocker = condition_blocker(scheme, st, float(np.max(st.send, initial=0.0)))
    if blocker is None:
        return "method='closed_form' (--method closed_form) is exact here and costs nothing"
    return f"the closed form is not exact here ({blocker})"


def solve_fine(
    scheme: Pipeline, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
) -> SchemeSolution:
    """The task graph, exact if deterministic, else Monte Carlo (``Pipeline.solve_fine``)."""
    require_plain(cluster)
    st = pipeline_setup(scheme, workload, cluster)
    graph = build_graph(scheme, workload, cluster, st, st.symmetric)
    details: dict[str, Any] = {"tasks": len(graph)}
    extra: dict[str, Any] = {}
    if scheme.link_bucket > 0:  # with random passes: the transfers' costs of the schedule at the means
        sizes = scheme.activation_sizes()
        durations, rounds, done = bucket_durations(
            graph, sizes, cluster.bandwidth, cluster.latency, scheme.link_bucket
        )
        graph = with_bucket(graph, durations)
        details["bucket_rounds"], details["bucket_fixpoint"] = rounds, done
    if graph.is_deterministic:
        sched = schedule(graph)
        makespan = float(sched.makespan)
        shares = sched.group_share()
        details["critical_path"] = sched.critical_path()
        how = "longest path (max-plus) of the deterministic task graph, exact"
    else:
        iters = default_iterations(scheme.fine_iterations, len(graph), iterations)
        # The breakdown's shares come from the critical path at the mean durations (one max-plus
        # pass): estimating them per iteration would double the cost of the Monte Carlo.
        sim = simulate(graph, iters, rng, critical_path=False)
        makespan = float(sim.mean)
        shares = schedule(graph, critical_path=True).group_share()
        lo, hi = sim.interval
        g = st.replicas * scheme.microbatches
        extra["interval"] = (g / hi, g / lo) if lo > 0 else None
        details["iterations"] = iters
        qs = (0.05, 0.5, 0.95, 0.99)
        details["iteration_time_quantiles"] = dict(zip(qs, (float(v) for v in sim.quantile(qs))))
        how = (
            f"Monte Carlo of {iters} independent steps of the task graph (independent task durations; "
            "breakdown shares from the critical path at the mean durations)"
        )
    details["critical_share"] = dict(shares)
    drawn = (
        "one replica drawn (identical, deterministic)" if st.symmetric else f"{st.replicas} replicas drawn"
    )
    reason = (
        f"pipeline task graph ({scheme.schedule}, p2p={scheme.p2p}): {len(graph)} tasks, {drawn}; {how}; "
        f"{st.profile.note}"
    )
    return pipeline_solution(
        scheme,
        workload,
        cluster,
        st,
        "fine",
        makespan,
        makespan * shares.get(COMMUNICATION, 0.0),
        makespan * shares.get("update", 0.0),
        reason,
        details,
        model=graph,
        **extra,
    )


def batch_fine(
    scheme: Pipeline,
    workload: Workload,
    cluster: Cluster,
    workers: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
) -> BatchSolution:
    """One graph per worker count, many costs: :meth:`~.pipeline.Pipeline.batch_fine`."""
    n, D, bw, lat = batch_rows(scheme, cluster, workers, bandwidth, latency)
    if not isinstance(workload.compute, Deterministic):
        raise NotRepresentable("random compute: the fine road simulates each row")
    if scheme.duplex < 1.0:
        # The fused exchanges' durations are send / duplex: the rows are solved one by one.
        raise NotRepresentable("duplex < 1: the fine road solves each row")
    if scheme.link_bucket > 0:
        raise NotRepresentable("a token-bucket link: the fine road solves each row")
    rate = np.empty(n.shape)
    largest = np.empty(n.shape, dtype=object)
    S = scheme.stages
    for d in np.unique(D).tolist():
        rows = np.flatnonzero(D == d)
        c = row_cluster(cluster, d * S)
        st = pipeline_setup(scheme, workload, c)
        graph = build_graph(scheme, workload, c, st, True)
        send, gather, collective, update = batch_costs(
            scheme, workload, D[rows], bw[rows], lat[rows], st.profile
        )
        dur = np.tile(graph.mean_durations, (rows.size, 1))
        names = graph.names
        for j, name in enumerate(names):
            if "/act" in name or "/grad" in name:
                k = int(name.split("/")[1].replace("act", "").replace("grad", "").split("->")[0])
                boundary = k if "/act" in name else k - 1
                dur[:, j] = send[:, boundary]
            elif name.endswith(("/allreduce", "/reducescatter")):
                dur[:, j] = collective[:, int(name[1:].split("/")[0])]
            elif name.endswith("/allgather") and gather is not None:
                dur[:, j] = gather[:, int(name[1:].split("/")[0])]
        sched = schedule(graph, dur, critical_path=True)
        makespan = np.asarray(sched.makespan)
        shares = sched.group_share()
        comm = makespan * shares.get(COMMUNICATION, 0.0)
        rate[rows] = 1.0 / makespan
        largest[rows] = pipeline_parts(scheme, st, makespan, comm, makespan * shares.get("update", 0.0))[1]
    return BatchSolution(rate, (D * scheme.microbatches).astype(float), largest, "fine")
