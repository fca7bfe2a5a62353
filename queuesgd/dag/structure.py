"""The dependency structure of a task graph, as the evaluation reads it.

A :class:`~queuesgd.dag.TaskGraph` checks its dependencies once and keeps them
as a :class:`GraphStructure`: predecessors in compressed rows, each task's
resource and the depth of its node in the super-graph where each resource is
one node. That super-graph must be acyclic; when it is not, the error names the
tasks that make the cycle (:func:`super_depths`).

Examples
--------
>>> import numpy as np
>>> ptr, idx = np.array([0, 0, 1, 2]), np.array([0, 1])      # c after b after a
>>> super_depths(ptr, idx, np.array([-1, -1, -1]), ("a", "b", "c"), ()).tolist()
[0, 1, 2]
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from queuesgd.errors import InvalidParameterError

__all__ = ["GraphStructure", "readonly", "super_depths"]


class GraphStructure(NamedTuple):
    """The dependencies of a task graph as read-only integer arrays (``T`` tasks).

    Attributes
    ----------
    pred_ptr : ndarray (T + 1,)
        Task ``i``'s predecessors are ``pred_idx[pred_ptr[i]:pred_ptr[i + 1]]``.
    pred_idx : ndarray
        Predecessor indices, task by task (duplicates dropped).
    resource_of : ndarray (T,)
        Index of each task's resource in ``graph.resources``; -1 for none.
    depth : ndarray (T,)
        Longest-path depth of each task's node in the resource super-graph.
    """

    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    resource_of: np.ndarray
    depth: np.ndarray


def readonly(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself, made read-only (results and structures are immutable).

    Examples
    --------
    >>> readonly(np.zeros(2)).flags.writeable
    False
    """
    arr.flags.writeable = False
    return arr


def super_depths(
    pred_ptr: np.ndarray,
    pred_idx: np.ndarray,
    res_of: np.ndarray,
    names: tuple[str, ...],
    resources: tuple[str, ...],
) -> np.ndarray:
    """Longest-path depth of every task's node in the graph where each resource is one node.

    The super-graph must be acyclic: that is the rule "no task of a resource depends on
    another task of the same resource, directly or through other resources". The
    predecessors are compressed rows (``pred_idx[pred_ptr[i]:pred_ptr[i + 1]]``, in
    ``[0, T)``); ``res_of`` is each task's resource (-1: none). Kahn's algorithm over
    the edges, sorted by source once (NumPy), then one pass in plain Python.

    Examples
    --------
    >>> ptr, idx = np.array([0, 0, 1, 2]), np.array([0, 1])
    >>> super_depths(ptr, idx, np.array([-1, -1, -1]), ("a", "b", "c"), ()).tolist()
    [0, 1, 2]
    >>> super_depths(ptr, idx, np.array([0, -1, 0]), ("a", "b", "c"), ("gpu",))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: TaskGraph resource 'gpu': got "task 'c' depends on task 'a' ...
    """
    T = len(names)
    res_of = np.asarray(res_of, dtype=np.int64)
    node = np.where(res_of >= 0, T + res_of, np.arange(T))
    task = np.repeat(np.arange(T), np.diff(pred_ptr))  # the task of each edge
    u, v = node[pred_idx], node[task]
    loop = np.flatnonzero(u == v)
    if loop.size:
        preds = _rows(pred_ptr, pred_idx)
        _raise_cycle(preds, names)  # a task cycle is reported as such first
        i, p = int(task[loop[0]]), int(pred_idx[loop[0]])
        raise InvalidParameterError(
            f"TaskGraph resource {resources[res_of[i]]!r}",
            f"task {names[i]!r} depends on task {names[p]!r}",
            _RESOURCE_RULE,
        )
    n_nodes = T + len(resources)
    order = np.argsort(u, kind="stable")
    succ = v[order].tolist()
    ptr = np.concatenate(([0], np.cumsum(np.bincount(u, minlength=n_nodes)))).tolist()
    indeg_a = np.bincount(v, minlength=n_nodes)
    present = np.zeros(n_nodes, dtype=bool)
    present[node] = True
    indeg = indeg_a.tolist()
    depth = [0] * n_nodes
    queue = np.flatnonzero(present & (indeg_a == 0)).tolist()
    append = queue.append
    for x in queue:  # the list grows as nodes become ready: a breadth-first Kahn
        dx = depth[x] + 1
        for y in succ[ptr[x] : ptr[x + 1]]:
            left = indeg[y] - 1
            indeg[y] = left
            if not left:  # first in, first out: the nodes come level by level, its last input's the deepest
                depth[y] = dx
                append(y)
    if len(queue) < int(present.sum()):
        preds = _rows(pred_ptr, pred_idx)
        _raise_cycle(preds, names)
        _raise_resource_cycle(preds, node.tolist(), indeg, names, resources)
    return readonly(np.array(depth, dtype=np.int64)[node])


def _rows(pred_ptr: np.ndarray, pred_idx: np.ndarray) -> list[list[int]]:
    """The predecessors as one list per task (for the error messages)."""
    idx = pred_idx.tolist()
    ptr = pred_ptr.tolist()
    return [idx[a:b] for a, b in zip(ptr[:-1], ptr[1:])]


def _raise_cycle(preds: list, names: tuple[str, ...]) -> None:
    """Raise if the task graph itself has a cycle (Kahn's algorithm, then walk back along it)."""
    T = len(preds)
    indeg = [len(ps) for ps in preds]
    succ: list[list[int]] = [[] for _ in range(T)]
    for i, ps in enumerate(preds):
        for p in ps:
            succ[p].append(i)
    queue = deque(i for i in range(T) if indeg[i] == 0)
    while queue:
        u = queue.popleft()
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    remaining = [i for i in range(T) if indeg[i] > 0]
    if not remaining:
        return
    cycle = _walk_back(remaining[0], lambda u: (p for p in preds[u] if indeg[p] > 0))
    text = _path_text([names[i] for i in [*cycle, cycle[0]]])
    raise InvalidParameterError("TaskGraph.tasks", text, "an acyclic graph (no task may depend on itself)")


def _raise_resource_cycle(
    preds: list, node: list[int], indeg: list[int], names: tuple[str, ...], resources: tuple[str, ...]
) -> None:
    """Explain a cycle of the resource super-graph as task dependencies, then raise."""
    T = len(preds)
    members: dict[int, list[int]] = {}
    for i, v in enumerate(node):
        members.setdefault(v, []).append(i)

    def edge(u: int, v: int) -> tuple[int, int]:
        return next((p, t) for t in members[v] for p in preds[t] if node[p] == u)

    def super_preds(v: int):
        return (node[p] for t in members[v] for p in preds[t] if indeg[node[p]] > 0)

    start = next(v for v in members if v >= T and indeg[v] > 0)
    cycle = _walk_back(start, super_preds)
    for v in cycle:  # the common case: a task of R depends on another task of R through plain tasks
        if v >= T:
            _raise_same_resource(preds, members[v], names, resources[v - T])
    k = next(j for j, v in enumerate(cycle) if v >= T)
    cycle = cycle[k:] + cycle[:k]  # starts at a resource
    n = len(cycle)
    clauses = []
    origin = -1
    for j in range(n):  # one clause per stretch from a resource to the next one
        p, t = edge(cycle[j], cycle[(j + 1) % n])
        if cycle[j] >= T:
            origin = p  # the stretch leaves resource cycle[j] from task p
        if cycle[(j + 1) % n] >= T:
            clauses.append(f"task {names[t]!r} depends on task {names[origin]!r}")
    r = resources[cycle[0] - T]
    raise InvalidParameterError(f"TaskGraph resource {r!r}", "; ".join(clauses), _RESOURCE_RULE)


def _raise_same_resource(preds: list, jobs: list[int], names: tuple[str, ...], resource: str) -> None:
    """Raise if a task of resource ``r`` depends, through data edges only, on another one of its tasks."""
    jobset = set(jobs)
    for t in jobs:
        parent = {p: t for p in preds[t]}
        stack = list(parent)
        while stack:
            u = stack.pop()
            if u in jobset:
                path = [u]
                while path[-1] != t:
                    path.append(parent[path[-1]])
                got = f"task {names[t]!r} depends on task {names[u]!r}"
                if len(path) > 2:
                    got += f" ({_path_text([names[i] for i in path])})"
                name = resource
                raise InvalidParameterError(f"TaskGraph resource {name!r}", got, _RESOURCE_RULE)
            for p in preds[u]:
                if p not in parent:
                    parent[p] = u
                    stack.append(p)


_RESOURCE_RULE = (
    "tasks sharing a FIFO resource must not depend on one another, directly, through other tasks or "
    "through other resources (each resource must be evaluable as one FIFO queue once all its tasks' "
    "ready times are known); split the resource or remove the dependency"
)


def _path_text(names: list[str]) -> str:
    """``a -> b -> c``, shortened to the first and last three names for long paths."""
    if len(names) > 8:
        names = [*names[:3], f"... {len(names) - 6} more ...", *names[-3:]]
    return " -> ".join(names)


def _walk_back(start: int, back) -> list[int]:
    """Follow ``back(u)`` (first choice) from ``start`` until a node repeats; return that cycle in order."""
    path = [start]
    seen = {start: 0}
    u = start
    while True:
        u = next(iter(back(u)))
        if u in seen:
            cycle = path[seen[u] :]
            return cycle[::-1]  # walked backwards: reverse into execution order
        seen[u] = len(path)
        path.append(u)
