"""Task graphs as plain data: tasks with durations, dependencies and shared FIFO resources.

A :class:`TaskGraph` describes one iteration of anything (an SGD step, a
build, a request) as a directed acyclic graph of :class:`Task` objects. A task
starts when all the tasks it comes ``after`` have finished; tasks that name the
same ``resource`` run one at a time, in FIFO order of the time they become
ready (ties broken by declaration order). Durations are numbers (or unit
strings) or :class:`~queuesgd.distributions.Distribution` laws, optionally
multiplied by a named random *factor* shared by several tasks (a worker's
speed in this iteration).

The graph is validated once, when it is built: names, predecessors, cycles,
and the rule that makes the vectorized evaluation possible — no task of a
resource may depend, even through other tasks or resources, on another task
of the same resource (see ``docs/dag.md``).

Examples
--------
>>> from queuesgd.dag import Task, TaskGraph
>>> g = TaskGraph([Task("load", "2ms"), Task("step", 0.01, after="load")], name="toy")
>>> len(g), g.names, g.index("step")
(2, ('load', 'step'), 1)
>>> g.mean_durations.tolist(), g.is_deterministic
([0.002, 0.01], True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from queuesgd import _checks
from queuesgd.dag.arrays import check_durations, check_groups, check_names, check_rows
from queuesgd.dag.structure import GraphStructure, readonly, super_depths
from queuesgd.distributions import Deterministic, Distribution
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.units import parse_seconds

__all__ = ["Task", "TaskGraph", "check_graph", "check_law"]

_V = TypeVar("_V")

#: A random duration may put at most this probability below 0 (a Normal law with mean >= 6 std);
#: the rare negative samples are clipped at 0.
NEGATIVE_TOLERANCE = 1e-9

#: How many known names an UnknownNameError lists before "... (N more)".
_LIST_NAMES = 10


class _More:
    """Prints as ``... (N more)`` inside the list of known names of an error message."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"... ({self.n} more)"


def _known(names: list[str] | tuple[str, ...]) -> list[Any]:
    """At most ``_LIST_NAMES`` names, then a ``... (N more)`` marker: never 10,000 names in a message."""
    if len(names) <= _LIST_NAMES:
        return list(names)
    return [*names[:_LIST_NAMES], _More(len(names) - _LIST_NAMES)]


def check_law(field: str, law: Distribution) -> bool:
    """Validate a law of a duration or a factor; return True if it can (rarely) be negative.

    A law must have numeric parameters and ``P(X < 0) <= NEGATIVE_TOLERANCE``.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential, Normal
    >>> check_law("d", Exponential(1.0)), check_law("d", Normal(10.0, 1.0))
    (False, True)
    >>> check_law("d", Normal(1.0, 1.0))
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: d: got Normal(mean=1.0, std=1.0); accepted: a law of ...
    """
    if law.is_symbolic:
        raise InvalidParameterError(
            field, law, "a Distribution with numeric parameters; substitute the symbols first (law.subs)"
        )
    below = float(law.cdf(-np.finfo(float).tiny))
    if below > NEGATIVE_TOLERANCE:
        raise InvalidParameterError(
            field,
            law,
            f"a law of nonnegative durations (P(X < 0) <= {NEGATIVE_TOLERANCE:g}, e.g. a Normal law with "
            "mean >= 6 std); prefer LogNormal or Gamma (both have from_mean_std)",
        )
    return below > 0.0


def _optional_name(field: str, value: Any) -> str | None:
    return None if value is None else _checks.name(field, value)


@dataclass(frozen=True)
class Task:
    """One task of a :class:`TaskGraph`.

    Parameters
    ----------
    name : str
        Unique name in the graph (non-empty).
    duration : float, str or Distribution, default 0.0
        Seconds (>= 0, finite), a unit string such as ``"5ms"``, or a law of a
        nonnegative random duration (sampled anew in every iteration).
    after : str or iterable of str, default ()
        Names of the tasks that must finish before this one starts; stored as
        a tuple (one name may be given as a plain string).
    resource : str, optional
        Tasks naming the same resource run one at a time, in FIFO order of
        their ready times, ties broken by declaration order.
    scale : str, optional
        Name of a random factor in ``TaskGraph.factors``; the duration is
        multiplied by that factor's draw of the iteration (one draw shared by
        every task with the same ``scale``).
    group : str, optional
        Label under which critical-path shares are aggregated (``"backward"``,
        ``"comm"``); tasks without one count as ``"other"``.

    Examples
    --------
    >>> Task("allreduce", "5ms", after=["bwd1", "bwd2"], resource="net", group="comm")
    Task(name='allreduce', duration=0.005, after=('bwd1', 'bwd2'), resource='net', scale=None, group='comm')
    """

    name: str
    duration: float | str | Distribution = 0.0
    after: tuple[str, ...] = ()
    resource: str | None = None
    scale: str | None = None
    group: str | None = None

    def __post_init__(self) -> None:
        name = self.name
        if type(name) is not str or not name.strip():
            _checks.name("Task.name", name)  # raises with the standard message
        field = f"Task({name!r}).duration"
        d = self.duration
        if type(d) is float and 0.0 <= d < math.inf:
            pass  # the common case, kept fast for graphs of 10,000s of tasks
        elif isinstance(d, Distribution):
            check_law(field, d)
        else:
            object.__setattr__(self, "duration", parse_seconds(d, field))
        after = self.after
        if type(after) is not tuple or not all(type(a) is str and a for a in after):
            object.__setattr__(self, "after", self._names_after(after))
        for attr in ("resource", "scale", "group"):
            value = getattr(self, attr)
            if value is not None and (type(value) is not str or not value.strip()):
                _optional_name(f"Task({name!r}).{attr}", value)

    def _names_after(self, after: Any) -> tuple[str, ...]:
        field = f"Task({self.name!r}).after"
        if isinstance(after, str):
            after = (after,)
        try:
            out = tuple(after)
        except TypeError:
            raise InvalidParameterError(field, after, "a task name or an iterable of task names") from None
        for a in out:
            _checks.name(field, a)
        return out


def _tasks(names: tuple[str, ...], D: np.ndarray, ptr: np.ndarray, idx: np.ndarray, groups: tuple) -> tuple:
    """The Task objects of a graph made by :meth:`TaskGraph.from_arrays`."""
    ptr, idx, d = ptr.tolist(), idx.tolist(), D.tolist()
    return tuple(
        Task(n, d[i], tuple(names[j] for j in idx[ptr[i] : ptr[i + 1]]), group=groups[i])
        for i, n in enumerate(names)
    )


class TaskGraph:
    """An immutable, validated DAG of tasks with shared FIFO resources and random factors.

    Parameters
    ----------
    tasks : iterable of Task
        At least one task; names unique; every ``after`` name declared.
    factors : mapping of str to Distribution, optional
        Random factors (nonnegative laws): each iteration draws one value per
        factor and multiplies it into the duration of every task whose
        ``scale`` names it.
    name : str, optional
        A label for printing.

    Attributes
    ----------
    tasks : tuple of Task
    factors : mapping (read-only)
    name : str or None
    names : tuple of str
        Task names in declaration order (the column order of every array).
    resources : tuple of str
        Resource names in order of first appearance.
    groups : tuple of str
        Group labels in order of first appearance (``None`` is ``"other"``).
    mean_durations : numpy.ndarray, shape (T,)
        Deterministic durations, law means, times ``E[factor]`` for scaled tasks.
    is_deterministic : bool
        True if no duration and no factor is random (``Deterministic`` laws
        count as constants).

    Raises
    ------
    InvalidParameterError
        Duplicate names, a cycle, a task of a resource that depends (directly,
        through other tasks or through other resources) on another task of the
        same resource, a factor that is not a nonnegative law, no tasks.
    UnknownNameError
        An ``after`` or ``scale`` name that is not declared.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential, LogNormal
    >>> g = TaskGraph(
    ...     [Task("a", Exponential(mean=1.0), group="compute"),
    ...      Task("b", 2.0, after="a", resource="net", scale="speed"),
    ...      Task("c", 1.0, resource="net")],
    ...     factors={"speed": LogNormal.from_mean_scv(1.5, 0.1)})
    >>> g.resources, g.groups, g.mean_durations.round(12).tolist()
    (('net',), ('compute', 'other'), [1.0, 3.0, 1.0])
    >>> TaskGraph([Task("x", after="y")])
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: Task('x').after: got 'y'; accepted: one of 'x'
    """

    __slots__ = (
        "_tasks",
        "_factors",
        "_name",
        "_index",
        "_names",
        "_resources",
        "_groups",
        "_mean",
        "_deterministic",
        "_structure",
        "_group_of",
        "_cache",
    )

    def __init__(
        self,
        tasks: Iterable[Task],
        factors: Mapping[str, Distribution] | None = None,
        name: str | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "_name", _optional_name("TaskGraph.name", name))
        set_(self, "_factors", MappingProxyType(self._check_factors(factors)))
        try:
            tasks = tuple(tasks)
        except TypeError:
            raise InvalidParameterError("TaskGraph.tasks", tasks, "an iterable of Task objects") from None
        if not tasks:
            raise InvalidParameterError("TaskGraph.tasks", [], "at least one Task")
        index: dict[str, int] = {}
        for i, t in enumerate(tasks):
            if not isinstance(t, Task):
                raise InvalidParameterError(f"TaskGraph.tasks[{i}]", t, "a Task")
            if t.name in index:
                raise InvalidParameterError(
                    f"TaskGraph.tasks[{i}].name", t.name, "a name not used by an earlier task"
                )
            index[t.name] = i
        names = tuple(index)
        set_(self, "_tasks", tasks)
        set_(self, "_index", index)
        set_(self, "_names", names)

        preds = self._resolve(tasks, index, names)
        res_index: dict[str, int] = {}
        res_of = [res_index.setdefault(t.resource, len(res_index)) if t.resource else -1 for t in tasks]
        set_(self, "_resources", tuple(res_index))
        _, groups, group_of = check_groups([t.group for t in tasks], len(tasks))
        set_(self, "_groups", groups)
        set_(self, "_group_of", group_of)
        counts = [len(p) for p in preds]
        ptr = readonly(np.concatenate(([0], np.cumsum(counts, dtype=np.int64))))
        idx = readonly(np.array([p for ps in preds for p in ps], dtype=np.int64))
        res = readonly(np.array(res_of, dtype=np.int64))
        depth = super_depths(ptr, idx, res, names, self._resources)
        set_(self, "_structure", GraphStructure(ptr, idx, res, depth))
        set_(self, "_mean", readonly(self._means()))
        set_(
            self,
            "_deterministic",
            all(
                not isinstance(t.duration, Distribution) or isinstance(t.duration, Deterministic)
                for t in tasks
            )
            and all(isinstance(f, Deterministic) for f in self._factors.values()),
        )
        set_(self, "_cache", {})

    @classmethod
    def from_arrays(
        cls,
        names: Sequence[str],
        durations: ArrayLike,
        pred_ptr: ArrayLike,
        pred_idx: ArrayLike,
        groups: Sequence[str | None] | None = None,
        name: str | None = None,
    ) -> TaskGraph:
        """The graph of plain tasks (fixed durations; no resource, no factor) given as arrays.

        The graph ``TaskGraph([Task(names[i], durations[i], after, group=groups[i]) ...])``
        whose task ``i`` comes after tasks ``pred_idx[pred_ptr[i]:pred_ptr[i + 1]]``
        (indices, in that order; a repeat is kept once), checked as a whole
        (names non-empty and unique, durations finite and >= 0, indices in
        range, no cycle) rather than task by task: for the graphs of 10^5
        tasks a library builds. :attr:`tasks` is made when first asked for.

        Parameters
        ----------
        names : sequence of str
            ``T`` task names.
        durations : array_like of float, shape (T,)
            Seconds, finite and >= 0.
        pred_ptr : array_like of int, shape (T + 1,)
            Where each task's predecessors begin in ``pred_idx`` (from 0, nondecreasing).
        pred_idx : array_like of int
            The predecessors' indices in ``[0, T)``, task after task.
        groups : sequence of (str or None), optional
            Each task's group (None: ``"other"``).
        name : str, optional

        Examples
        --------
        >>> g = TaskGraph.from_arrays(["a", "b", "c"], [1.0, 2.0, 0.5], [0, 0, 0, 2], [0, 1],
        ...                           groups=["io", None, "io"], name="toy")
        >>> g.structure.pred_idx.tolist(), g.groups, g.tasks[2].after, g.tasks[2].group
        ([0, 1], ('io', 'other'), ('a', 'b'), 'io')
        >>> TaskGraph.from_arrays(["a", "b"], [1.0, 1.0], [0, 1, 2], [1, 0])   # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: TaskGraph.tasks: got 'b -> a -> b'; accepted: an acyclic ...
        """
        set_ = object.__setattr__
        self = object.__new__(cls)
        set_(self, "_name", _optional_name("TaskGraph.name", name))
        set_(self, "_factors", MappingProxyType({}))
        names = check_names(names)
        T = len(names)
        D = check_durations(durations, T)
        ptr, idx = check_rows(pred_ptr, pred_idx, names)
        groups, labels, group_of = check_groups(groups, T)
        set_(self, "_names", names)
        set_(self, "_index", dict(zip(names, range(T))))
        set_(self, "_tasks", partial(_tasks, names, D, ptr, idx, groups))
        set_(self, "_resources", ())
        set_(self, "_groups", labels)
        res = readonly(np.full(T, -1, dtype=np.int64))
        set_(self, "_structure", GraphStructure(ptr, idx, res, super_depths(ptr, idx, res, names, ())))
        set_(self, "_group_of", group_of)
        set_(self, "_mean", readonly(D))
        set_(self, "_deterministic", True)
        set_(self, "_cache", {})
        return self

    # ------------------------------------------------------------------ validation helpers
    @staticmethod
    def _check_factors(factors: Any) -> dict[str, Distribution]:
        if factors is None:
            return {}
        if not isinstance(factors, Mapping):
            raise InvalidParameterError("TaskGraph.factors", factors, "a mapping {name: Distribution}")
        out = {}
        for k, law in factors.items():
            _checks.name("TaskGraph.factors key", k)
            if not isinstance(law, Distribution):
                raise InvalidParameterError(
                    f"TaskGraph.factors[{k!r}]", law, "a Distribution, e.g. LogNormal.from_mean_scv(1.0, 0.1)"
                )
            check_law(f"TaskGraph.factors[{k!r}]", law)
            out[k] = law
        return out

    def _resolve(self, tasks: tuple[Task, ...], index: dict[str, int], names: tuple[str, ...]) -> list:
        """Predecessor indices per task (duplicates dropped); unknown names and self-loops refused."""
        preds: list[list[int] | tuple[int, ...]] = []
        factors = self._factors
        for i, t in enumerate(tasks):
            after = t.after
            if len(after) > 1:
                after = tuple(dict.fromkeys(after))
            ps = []
            for a in after:
                j = index.get(a)
                if j is None:
                    raise UnknownNameError(f"Task({t.name!r}).after", a, _known(names))
                if j == i:
                    raise InvalidParameterError(
                        "TaskGraph.tasks",
                        f"{t.name} -> {t.name}",
                        "an acyclic graph (no task may depend on itself)",
                    )
                ps.append(j)
            preds.append(ps)
            if t.scale is not None and t.scale not in factors:
                raise UnknownNameError(f"Task({t.name!r}).scale", t.scale, _known(tuple(factors)))
        return preds

    def _means(self) -> np.ndarray:
        law_mean: dict[int, float] = {}
        out = np.empty(len(self._tasks))
        for i, t in enumerate(self._tasks):
            d = t.duration
            if isinstance(d, Distribution):
                m = law_mean.get(id(d))
                if m is None:
                    m = law_mean[id(d)] = float(d.mean)
                d = m
            if t.scale is not None:
                d = d * float(self._factors[t.scale].mean)
            out[i] = d
        return out

    # ------------------------------------------------------------------ public, read-only
    @property
    def tasks(self) -> tuple[Task, ...]:
        """The tasks, in declaration order."""
        if not isinstance(self._tasks, tuple):  # from_arrays: made when first asked for
            object.__setattr__(self, "_tasks", self._tasks())
        return self._tasks

    @property
    def factors(self) -> Mapping[str, Distribution]:
        """Random factors ``{name: law}`` (read-only)."""
        return self._factors

    @property
    def name(self) -> str | None:
        """The graph's label."""
        return self._name

    @property
    def names(self) -> tuple[str, ...]:
        """Task names in declaration order."""
        return self._names

    @property
    def resources(self) -> tuple[str, ...]:
        """Resource names in order of first appearance."""
        return self._resources

    @property
    def groups(self) -> tuple[str, ...]:
        """Group labels in order of first appearance (tasks without a group are ``"other"``)."""
        return self._groups

    @property
    def group_index(self) -> np.ndarray:
        """Each task's group as its index in :attr:`groups` (read-only array, shape (T,)).

        Examples
        --------
        >>> TaskGraph([Task("a", group="io"), Task("b"), Task("c", group="io")]).group_index.tolist()
        [0, 1, 0]
        """
        return self._group_of

    @property
    def mean_durations(self) -> np.ndarray:
        """Mean duration of every task (read-only array, shape (T,))."""
        return self._mean

    @property
    def is_deterministic(self) -> bool:
        """True if every duration and factor is constant."""
        return self._deterministic

    @property
    def structure(self) -> GraphStructure:
        """Predecessors (compressed rows), resources and evaluation depths, read-only.

        Examples
        --------
        >>> g = TaskGraph([Task("a", 1.0), Task("b", 1.0, after="a", resource="link")])
        >>> s = g.structure
        >>> s.pred_ptr.tolist(), s.pred_idx.tolist(), s.resource_of.tolist(), s.depth.tolist()
        ([0, 0, 1], [0], [-1, 0], [0, 1])
        """
        return self._structure

    def cached(self, key: str, build: Callable[[TaskGraph], _V]) -> _V:
        """``build(self)``, computed once per graph and key, then kept with the graph.

        The evaluation keeps what it derives from a graph (its stage plan, its
        duration sampler) here, so that repeated evaluations of one graph
        build it once. ``build`` must depend on the graph alone (the graph is
        immutable, so the value never goes stale).

        Examples
        --------
        >>> g = TaskGraph([Task("a", 1.0)])
        >>> g.cached("count", len), g.cached("count", lambda graph: -1)
        (1, 1)
        """
        if key not in self._cache:
            self._cache[key] = build(self)
        return self._cache[key]

    def index(self, name: str) -> int:
        """Column of task ``name`` in every array.

        Examples
        --------
        >>> TaskGraph([Task("a"), Task("b")]).index("b")
        1
        """
        try:
            return self._index[name]
        except (KeyError, TypeError):
            raise UnknownNameError("task name", name, _known(self._names)) from None

    def __len__(self) -> int:
        return len(self._names)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its tasks, factors and name, built again (and checked again) when loaded."""
        return (TaskGraph, (self.tasks, dict(self._factors), self._name))

    def __repr__(self) -> str:
        parts = [f"name={self._name!r}"] if self._name is not None else []
        parts.append(f"tasks={len(self._names)}")
        if self._resources:
            parts.append(f"resources={self._resources!r}")
        if self._factors:
            parts.append(f"factors={tuple(self._factors)!r}")
        return f"TaskGraph({', '.join(parts)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("TaskGraph is immutable; build a new one instead")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("TaskGraph is immutable")


def check_graph(graph: Any, field: str = "graph") -> TaskGraph:
    """``graph`` if it is a :class:`TaskGraph`, else a clear error naming ``field``.

    Examples
    --------
    >>> check_graph([1, 2])
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: graph: got [1, 2]; accepted: a TaskGraph
    """
    if not isinstance(graph, TaskGraph):
        raise InvalidParameterError(field, graph, "a TaskGraph")
    return graph
