"""The task-graph road of sharded data parallelism: one step's graph, exact or by Monte Carlo.

:func:`solve_fine` is
:meth:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel.solve_fine`: the
graph of :func:`~.sharded_graph.sharded_graph` solved by its longest path
(deterministic compute) or its Monte Carlo, with the channel's issue order
and the communication left after the backward pass in the details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd.dag import default_iterations
from queuesgd.schemes.base import SchemeSolution

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.sharded import ShardedDataParallel
    from queuesgd.workload import Cluster, Workload

__all__ = ["solve_fine"]


def solve_fine(
    scheme: ShardedDataParallel,
    workload: Workload,
    cluster: Cluster,
    *,
    rng: Any = None,
    iterations: int | None = None,
) -> SchemeSolution:
    """:meth:`~.sharded.ShardedDataParallel.solve_fine` (the task graph of one step)."""
    from queuesgd.schemes.fine.finegrained import communication_after_backward, fine_solution, run_fine_graph

    model = scheme.fine_model(workload, cluster)
    graph = model.graph
    n = cluster.workers
    iters = default_iterations(scheme.fine_iterations, len(graph), iterations)
    run = run_fine_graph(graph, n, iters, rng, unit="steps")
    details: dict[str, Any] = {
        "memory": scheme.memory(workload, cluster),
        "tasks": len(graph),
        "units": len(model.units),
        "channel_order": tuple(f"{kind}{i}" for kind, i in model.order),
        **run.details,
    }
    details["communication_after_backward"] = communication_after_backward(
        run, model.comm_tasks, model.backward_ends
    )
    return fine_solution(
        run,
        graph,
        workload,
        cluster,
        workers_in_graph=model.workers_in_graph,
        head=(
            f"sharded data-parallel task graph, ZeRO stage {scheme.stage}: {len(graph)} tasks, "
            f"{len(model.units)} units, prefetch {'on' if scheme.prefetch else 'off'}, overlap "
            f"{'on' if scheme.overlap else 'off'}"
        ),
        details=details,
    )
