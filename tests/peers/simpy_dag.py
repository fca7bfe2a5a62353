"""A SimPy discrete-event simulation of one iteration of a :class:`~queuesgd.dag.TaskGraph`.

An independent peer for :func:`queuesgd.dag.schedule`: every task is a SimPy
process that waits for its predecessors' completion events, then (if it has a
resource) requests a ``simpy.Resource`` of capacity 1 and holds it for its
duration. SimPy's resource queue is FIFO by request order; to make requests
issued at the *same* instant follow declaration order, a task that becomes
ready does not request at once: it joins its resource's arrivals of this
instant, and an end-of-instant event (scheduled with a priority after every
ordinary event of that instant) issues the requests sorted by declaration
index. Resources upstream in the graph settle their instant first (lower
priority number), so zero-duration cascades through several resources are
ordered too.

Examples
--------
>>> from queuesgd.dag import Task, TaskGraph
>>> g = TaskGraph([Task("a", 2.0, resource="r"), Task("b", 1.0, resource="r"), Task("c", 1.0, after="b")])
>>> simulate_with_simpy(g, [2.0, 1.0, 1.0]).tolist()
[2.0, 3.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from queuesgd.dag import TaskGraph

# the `peers` extra: without it, tests using this peer skip (simpy.core comes with simpy)
simpy = pytest.importorskip("simpy")


class _EndOfInstant(simpy.Event):
    """An event processed after all ordinary events of the current instant (like simpy.Timeout(0))."""

    def __init__(self, env: simpy.Environment, priority: int) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, priority=priority)


def _resource_ranks(graph: TaskGraph) -> dict[str, int]:
    """A topological rank of the resources (a resource feeding another one gets a smaller rank)."""
    index = {t.name: i for i, t in enumerate(graph.tasks)}
    upstream: list[set[str]] = [set() for _ in graph.tasks]  # resources a task depends on
    done = [False] * len(graph.tasks)

    def visit(i: int) -> set[str]:
        if not done[i]:
            for p in graph.tasks[i].after:
                j = index[p]
                upstream[i] |= visit(j)
                if graph.tasks[j].resource is not None:
                    upstream[i].add(graph.tasks[j].resource)
            done[i] = True
        return upstream[i]

    feeds: dict[str, set[str]] = {r: set() for r in graph.resources}
    for i, t in enumerate(graph.tasks):
        if t.resource is not None:
            feeds[t.resource] |= visit(i)
    rank: dict[str, int] = {}

    def level(r: str) -> int:
        if r not in rank:
            rank[r] = 1 + max((level(u) for u in feeds[r]), default=0)
        return rank[r]

    return {r: level(r) for r in graph.resources}


def simulate_with_simpy(graph: TaskGraph, durations_row: Sequence[float]) -> np.ndarray:
    """Finish time of every task (declaration order) in one SimPy run with the given durations.

    Parameters
    ----------
    graph : TaskGraph
    durations_row : sequence of float
        One duration per task, in ``graph.names`` order (laws and factors are ignored).
    """
    env = simpy.Environment()
    tasks = graph.tasks
    index = {t.name: i for i, t in enumerate(tasks)}
    d = [float(x) for x in durations_row]
    assert len(d) == len(tasks)
    done = [env.event() for _ in tasks]
    finish = np.full(len(tasks), np.nan)
    servers = {r: simpy.Resource(env, capacity=1) for r in graph.resources}
    arrivals: dict[str, list[int]] = {r: [] for r in graph.resources}
    priority = {r: simpy.core.NORMAL + k for r, k in _resource_ranks(graph).items()}

    def hold(i: int, res: simpy.Resource, req: simpy.resources.resource.Request):
        yield req
        yield env.timeout(d[i])
        res.release(req)
        finish[i] = env.now
        done[i].succeed()

    def issue(r: str):
        def callback(_event: simpy.Event) -> None:
            res = servers[r]
            for i in sorted(arrivals[r]):  # same ready instant: declaration order
                env.process(hold(i, res, res.request()))
            arrivals[r].clear()

        return callback

    def task(i: int):
        yield env.all_of([done[index[p]] for p in tasks[i].after])
        r = tasks[i].resource
        if r is None:
            yield env.timeout(d[i])
            finish[i] = env.now
            done[i].succeed()
            return
        if not arrivals[r]:
            _EndOfInstant(env, priority[r]).callbacks.append(issue(r))
        arrivals[r].append(i)

    for i in range(len(tasks)):
        env.process(task(i))
    env.run()
    assert not np.isnan(finish).any(), "some task never ran"
    return finish
