"""Deterministic longest-path (max-plus) schedules of a task graph, one or many at once.

``schedule(graph, durations)`` computes when every task starts and finishes
for given durations, the makespan and the critical path. A 2-D array of
durations (k rows) gives k schedules in one vectorized evaluation: a what-if
grid, or durations sampled elsewhere.

Examples
--------
>>> from queuesgd.dag import Task, TaskGraph, schedule
>>> g = TaskGraph([Task("fwd", 3.0), Task("bwd", 5.0, after="fwd"), Task("log", 1.0, after="fwd")])
>>> s = schedule(g)
>>> s.makespan, s.critical_path(), s["log"]
(8.0, ('fwd', 'bwd'), (3.0, 4.0))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from queuesgd.dag import _evaluate
from queuesgd.dag.graph import TaskGraph, check_graph
from queuesgd.dag.structure import readonly
from queuesgd.errors import InvalidParameterError

__all__ = ["Schedule", "schedule"]


def _durations(graph: TaskGraph, durations: ArrayLike) -> np.ndarray:
    T = len(graph)
    accepted = f"finite durations >= 0 (seconds) of shape ({T},) or (k, {T}) with k >= 1"
    try:
        D = np.array(durations, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError("durations", durations, accepted) from None
    if D.ndim not in (1, 2) or D.shape[-1] != T or D.size == 0:
        raise InvalidParameterError("durations", f"an array of shape {D.shape}", accepted)
    if not np.all(np.isfinite(D)) or np.any(D < 0):
        bad = D[~(np.isfinite(D) & (D >= 0))] if D.size else D
        raise InvalidParameterError("durations", f"an array containing {bad.flat[0]!r}", accepted)
    return D


def _share(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (a zero makespan has no meaningful shares)."""
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=np.broadcast_to(den != 0, out.shape))
    return out


@dataclass(frozen=True, eq=False)
class Schedule:
    """Start and finish times of every task for given durations (one row or a batch).

    Attributes
    ----------
    graph : TaskGraph
    durations : numpy.ndarray
        The durations used, shape (T,) or (k, T).
    start, finish : numpy.ndarray
        Shape (T,) for one schedule, (k, T) for a batch; columns in ``graph.names`` order.
    makespan : float or numpy.ndarray
        Largest finish time: a float, or shape (k,) for a batch.
    on_critical_path : numpy.ndarray or None
        Boolean, same shape as ``start``: the tasks of one longest chain whose
        durations add up to the makespan (ties: the first latest predecessor in
        ``after`` order). ``None`` if computed with ``critical_path=False``.

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph, schedule
    >>> g = TaskGraph([Task("a", 1.0, group="io"), Task("b", 3.0, after="a")])
    >>> s = schedule(g)
    >>> s.task_share(), s.group_share()
    ({'a': 0.25, 'b': 0.75}, {'io': 0.25, 'other': 0.75})
    """

    graph: TaskGraph
    durations: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    makespan: float | np.ndarray
    on_critical_path: np.ndarray | None

    @property
    def is_batch(self) -> bool:
        """True for a batch of k schedules (2-D arrays)."""
        return self.start.ndim == 2

    def _on(self) -> np.ndarray:
        if self.on_critical_path is None:
            raise InvalidParameterError(
                "Schedule.on_critical_path", None, "a schedule computed with critical_path=True"
            )
        return self.on_critical_path

    def critical_path(self, row: int = 0) -> tuple[str, ...]:
        """Names of the tasks on the critical path of one row, in execution order.

        Parameters
        ----------
        row : int, default 0
            Which schedule of a batch (ignored for a single schedule, which is row 0).

        Examples
        --------
        >>> from queuesgd.dag import Task, TaskGraph, schedule
        >>> g = TaskGraph([Task("a", 1.0), Task("b", 1.0), Task("c", 1.0, after=["a", "b"])])
        >>> schedule(g, [[1.0, 2.0, 1.0], [3.0, 2.0, 1.0]]).critical_path(row=1)
        ('a', 'c')
        """
        on = self._on()
        if self.is_batch:
            k = on.shape[0]
            if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not -k <= row < k:
                raise InvalidParameterError("row", row, f"an integer row index in [0, {k})")
            on, start, finish = on[row], self.start[row], self.finish[row]
        else:
            if row not in (0, -1):
                raise InvalidParameterError("row", row, "0 (a single schedule has one row)")
            start, finish = self.start, self.finish
        idx = np.flatnonzero(on)
        # execution order; ties of zero-duration tasks: evaluation depth, then FIFO order (ready, declaration)
        g = self.graph
        ptr, preds, _, depth = g.structure
        ready = [max(finish[preds[ptr[i] : ptr[i + 1]]], default=0.0) for i in idx]
        keys = np.lexsort((idx, ready, depth[idx], finish[idx], start[idx]))
        return tuple(self.graph.names[i] for i in idx[keys])

    def task_share(self) -> dict[str, Any]:
        """``{task: its duration / makespan}`` for the tasks on the critical path.

        A batch gives ``{task: array (k,)}`` for tasks on the path of at least one
        row (0 in the other rows). A zero makespan gives shares of 0.

        Examples
        --------
        >>> from queuesgd.dag import Task, TaskGraph, schedule
        >>> g = TaskGraph([Task("a", 1.0), Task("b", 3.0, after="a")])
        >>> schedule(g).task_share()
        {'a': 0.25, 'b': 0.75}
        """
        on = self._on()
        w = np.where(on, self.durations, 0.0)
        shares = _share(w, np.asarray(self.makespan)[..., None])
        names = self.graph.names
        if not self.is_batch:
            return {names[i]: float(shares[i]) for i in np.flatnonzero(on)}
        return {names[i]: shares[:, i] for i in np.flatnonzero(on.any(axis=0))}

    def group_share(self) -> dict[str, Any]:
        """``{group: share of the makespan}`` over the critical path, for every group of the graph.

        Shares add up to 1 (to rounding) unless the makespan is 0. A batch gives
        ``{group: array (k,)}``.

        Examples
        --------
        >>> from queuesgd.dag import Task, TaskGraph, schedule
        >>> g = TaskGraph([Task("a", 1.0, group="x"), Task("b", 3.0, after="a", group="x")])
        >>> schedule(g).group_share()
        {'x': 1.0}
        """
        on = self._on()
        w = np.where(on, self.durations, 0.0)
        totals = w @ _group_matrix(self.graph)  # (..., G)
        shares = _share(totals, np.asarray(self.makespan)[..., None])
        if not self.is_batch:
            return {g: float(v) for g, v in zip(self.graph.groups, shares)}
        return {g: shares[:, j] for j, g in enumerate(self.graph.groups)}

    def __getitem__(self, name: str) -> tuple[Any, Any]:
        """``(start, finish)`` of task ``name``: floats, or arrays (k,) for a batch."""
        i = self.graph.index(name)
        if self.is_batch:
            return self.start[:, i], self.finish[:, i]
        return float(self.start[i]), float(self.finish[i])


def _group_matrix(graph: TaskGraph) -> np.ndarray:
    """(T, G) 0/1 matrix: task i belongs to group j (cached on the graph)."""
    return graph.cached("groups", _build_group_matrix)


def _build_group_matrix(graph: TaskGraph) -> np.ndarray:
    M = np.zeros((len(graph), len(graph.groups)))
    M[np.arange(len(graph)), graph.group_index] = 1.0
    return M


def group_totals(graph: TaskGraph, per_task: np.ndarray) -> Mapping[str, float]:
    """Sum a per-task vector by group (used by the Monte Carlo shares)."""
    return dict(zip(graph.groups, (per_task @ _group_matrix(graph)).tolist()))


def schedule(graph: TaskGraph, durations: ArrayLike | None = None, *, critical_path: bool = True) -> Schedule:
    """Earliest schedule of ``graph`` for fixed durations (longest path, FIFO resources).

    Parameters
    ----------
    graph : TaskGraph
    durations : array_like, optional
        Seconds, shape (T,) for one schedule or (k, T) for k schedules evaluated
        together, columns in ``graph.names`` order; used as given (laws and
        factors are ignored). Default: ``graph.mean_durations`` — for a random
        graph this is the schedule *at the mean durations*, which is generally
        shorter than the mean makespan ``E[max] >= max E``; use
        :func:`~queuesgd.dag.simulate` for the latter.
    critical_path : bool, default True
        Also find one critical path per row (a reverse pass; a little slower).

    Returns
    -------
    Schedule

    Raises
    ------
    InvalidParameterError
        ``graph`` is not a TaskGraph, or ``durations`` has the wrong shape or a
        negative, infinite or NaN entry.

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph, schedule
    >>> g = TaskGraph([Task("a", 2.0, resource="disk"), Task("b", 1.0, resource="disk"),
    ...                Task("c", 1.0, after="b")])
    >>> s = schedule(g)
    >>> s.start.tolist(), s.finish.tolist(), s.makespan
    ([0.0, 2.0, 3.0], [2.0, 3.0, 4.0], 4.0)
    >>> s.critical_path()
    ('a', 'b', 'c')
    >>> schedule(g, [[2.0, 1.0, 1.0], [2.0, 1.0, 5.0]]).makespan.tolist()
    [4.0, 8.0]
    """
    graph = check_graph(graph)
    D = graph.mean_durations if durations is None else _durations(graph, durations)
    single = D.ndim == 1
    rows = D[None, :] if single else D
    k, T = rows.shape
    start = np.empty((k, T))
    finish = np.empty((k, T))
    makespan = np.empty(k)
    on = np.empty((k, T), dtype=bool) if critical_path else None
    pl = _evaluate.plan(graph)
    step = _evaluate.chunk_rows(T)
    for r0 in range(0, k, step):
        r1 = min(k, r0 + step)
        ev = _evaluate.evaluate(pl, np.ascontiguousarray(rows[r0:r1].T), bool(critical_path))
        start[r0:r1] = ev.start.T
        finish[r0:r1] = ev.finish[:T].T
        makespan[r0:r1] = ev.makespan
        if on is not None:
            on[r0:r1] = ev.on_path[:T].T
    if single:
        start, finish = start[0], finish[0]
        on = None if on is None else on[0]
    return Schedule(
        graph=graph,
        durations=readonly(np.array(D)),
        start=readonly(start),
        finish=readonly(finish),
        makespan=float(makespan[0]) if single else readonly(makespan),
        on_critical_path=None if on is None else readonly(on),
    )
