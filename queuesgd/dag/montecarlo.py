"""Vectorized Monte Carlo of a task graph with random durations and random factors.

Each iteration draws every random duration and one value per factor, then
schedules the graph (same rules and same evaluation core as
:func:`~queuesgd.dag.schedule`). Iterations are independent replications,
so nothing is discarded as warm-up; the mean makespan gets the 95%
batch-means interval of :mod:`queuesgd.batchmeans` (the policy of every
simulation in queuesgd).

Examples
--------
>>> from queuesgd.dag import Task, TaskGraph, simulate
>>> from queuesgd.distributions import Exponential
>>> g = TaskGraph([Task(f"w{i}", Exponential(1.0)) for i in range(4)])
>>> sim = simulate(g, 20_000, rng=1)
>>> bool(sim.interval[0] < 25 / 12 < sim.interval[1])      # E[max of 4] = H_4
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from queuesgd import _checks
from queuesgd.batchmeans import batch_means, check_simulation_size, check_tail
from queuesgd.dag import _evaluate
from queuesgd.dag.graph import TaskGraph, check_graph, check_law
from queuesgd.dag.maxplus import group_totals
from queuesgd.dag.structure import readonly
from queuesgd.distributions import Deterministic, Distribution
from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.rng import as_generator
from queuesgd.run_options import MAX_ITERATIONS, iterations_option

__all__ = ["SECONDS_PER_TASK", "Simulation", "default_iterations", "simulate"]


#: Seconds one task costs in one iteration of :func:`simulate`: 70-110 ns measured on a 2-core development
#: machine (2026-11-26, graphs of 19,000-69,000 tasks), rounded up. The size guard and
#: :func:`default_iterations` plan with it.
SECONDS_PER_TASK = 1.2e-7
#: The longest a simulation run with a scheme's default number of iterations is planned to take.
DEFAULT_BUDGET_SECONDS = 20.0
#: The fewest iterations :func:`default_iterations` gives, however large the graph.
MIN_DEFAULT_ITERATIONS = 200


def default_iterations(default: int, tasks: int, iterations: int | None = None) -> int:
    """The iterations a scheme simulates: ``iterations`` where the caller gives it, else ``default``, fewer
    for a large graph.

    At most :data:`DEFAULT_BUDGET_SECONDS` of simulation by :data:`SECONDS_PER_TASK`, and at least
    :data:`MIN_DEFAULT_ITERATIONS`; the batch-means interval of the result says the precision this buys.
    An explicit ``iterations`` is only checked (an integer from 1 to
    :data:`~queuesgd.run_options.MAX_ITERATIONS`), never changed.

    Examples
    --------
    >>> default_iterations(10_000, 100), default_iterations(10_000, 137_000)
    (10000, 1216)
    >>> default_iterations(10_000, 10**7), default_iterations(10_000, 10**7, iterations=5_000)
    (200, 5000)
    """
    if iterations is not None:
        return int(iterations_option(iterations))
    fit = int(DEFAULT_BUDGET_SECONDS / (SECONDS_PER_TASK * max(int(tasks), 1)))
    return max(MIN_DEFAULT_ITERATIONS, min(int(default), fit))


@dataclass(frozen=True, eq=False)
class Simulation:
    """Monte Carlo estimates of a task graph's makespan and critical path.

    Attributes
    ----------
    graph : TaskGraph
    makespans : numpy.ndarray
        One makespan per iteration, shape (iterations,).
    mean : float
        Mean makespan.
    interval : tuple of float
        95% confidence interval of the mean: the Student-t interval of
        :data:`~queuesgd.batchmeans.BATCHES` batch means
        (:func:`queuesgd.batchmeans.batch_means`; with fewer iterations, one
        per batch); ``(-inf, inf)`` for one iteration. Makespans with a tail
        too heavy for it get the studentized subsampling interval
        (:func:`queuesgd.subsampling.subsampling_interval`) and an
        :class:`~queuesgd.errors.AccuracyWarning`
        (:func:`queuesgd.batchmeans.check_tail`).
    mean_start, mean_finish : numpy.ndarray
        Mean start and finish time of every task, shape (T,).
    task_share : mapping
        ``E[duration of the task while on the critical path] / E[makespan]`` for
        every task with a share > 0 (declaration order); empty without critical paths.
    group_share : mapping
        The same summed by group, for every group of the graph; adds up to 1.

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph, simulate
    >>> g = TaskGraph([Task("a", 1.0, group="io"), Task("b", 3.0, after="a")])
    >>> sim = simulate(g, 10, rng=0)
    >>> sim.mean, sim.interval, dict(sim.group_share), sim.quantile(0.5)
    (4.0, (4.0, 4.0), {'io': 0.25, 'other': 0.75}, 4.0)
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    graph: TaskGraph
    makespans: np.ndarray
    mean: float
    interval: tuple[float, float]
    mean_start: np.ndarray
    mean_finish: np.ndarray
    task_share: Mapping[str, float]
    group_share: Mapping[str, float]

    def quantile(self, q: float | ArrayLike) -> float | np.ndarray:
        """Empirical quantile(s) of the makespan (``numpy.quantile``, linear interpolation).

        Examples
        --------
        >>> from queuesgd.dag import Task, TaskGraph, simulate
        >>> from queuesgd.distributions import Empirical
        >>> sim = simulate(TaskGraph([Task("a", Empirical([1.0, 3.0]))]), 1000, rng=0)
        >>> sim.quantile([0.0, 1.0]).tolist()
        [1.0, 3.0]
        """
        try:
            qa = np.asarray(q, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError("q", q, "a probability in [0, 1] or an array of them") from None
        if not np.all((qa >= 0) & (qa <= 1)):
            raise InvalidParameterError("q", q, "a probability in [0, 1] or an array of them")
        out = np.quantile(self.makespans, qa)
        return float(out) if qa.ndim == 0 else out


@dataclass(frozen=True, eq=False)
class _Sampler:
    """How to draw one chunk of durations: constants, groups of equal laws, factors."""

    const_sel: slice | np.ndarray | None
    const_val: np.ndarray | None
    laws: tuple[tuple[Distribution, slice | np.ndarray, bool], ...]  # (law, tasks, clip at 0)
    factors: tuple[tuple[Distribution, slice | np.ndarray, bool], ...]  # (law, scaled tasks, clip)


def _sampler(graph: TaskGraph) -> _Sampler:
    return graph.cached("sampler", _build_sampler)


def _build_sampler(graph: TaskGraph) -> _Sampler:
    const_idx, const_val = [], []
    groups: dict[Distribution, list[int]] = {}
    by_id: dict[int, list[int]] = {}  # hash each law object once; equal laws share one list
    for i, t in enumerate(graph.tasks):
        d = t.duration
        if isinstance(d, Deterministic):
            d = float(d.mean)
        if isinstance(d, Distribution):
            members = by_id.get(id(d))
            if members is None:
                members = by_id[id(d)] = groups.setdefault(d, [])
            members.append(i)
        else:
            const_idx.append(i)
            const_val.append(d)
    laws = tuple(
        (law, _evaluate.as_index(np.array(idx)), check_law("duration", law)) for law, idx in groups.items()
    )
    scaled: dict[str, list[int]] = {}
    for i, t in enumerate(graph.tasks):
        if t.scale is not None:
            scaled.setdefault(t.scale, []).append(i)
    factors = tuple(
        (graph.factors[f], _evaluate.as_index(np.array(idx)), check_law("factor", graph.factors[f]))
        for f, idx in scaled.items()
    )
    out = _Sampler(
        const_sel=_evaluate.as_index(np.array(const_idx)) if const_idx else None,
        const_val=np.array(const_val)[:, None] if const_idx else None,
        laws=laws,
        factors=factors,
    )
    return out


def _draw(sp: _Sampler, gen: np.random.Generator, T: int, rows: int) -> np.ndarray:
    """Durations of ``rows`` independent iterations, task-major (T, rows)."""
    D = np.empty((T, rows))
    if sp.const_sel is not None:
        D[sp.const_sel] = sp.const_val
    for law, sel, clip in sp.laws:
        n = sel.size if isinstance(sel, np.ndarray) else len(range(T)[sel])
        X = law.sample(gen, (n, rows))
        if clip:
            np.maximum(X, 0.0, out=X)
        D[sel] = X
    for law, sel, clip in sp.factors:
        f = law.sample(gen, rows)
        if clip:
            np.maximum(f, 0.0, out=f)
        D[sel] *= f
    return D


def simulate(
    graph: TaskGraph,
    iterations: int = 10_000,
    rng: np.random.Generator | int | None = None,
    *,
    critical_path: bool = True,
) -> Simulation:
    """Monte Carlo distribution of the makespan of ``graph`` (independent iterations).

    Parameters
    ----------
    graph : TaskGraph
        Random durations are drawn anew in every iteration (tasks with equal
        laws are drawn together); each factor is drawn once per iteration and
        multiplies every task whose ``scale`` names it. A deterministic graph
        gives identical iterations.
    iterations : int, default 10_000
        Number of independent iterations (>= 1).
    rng : numpy.random.Generator or int, optional
        Source of randomness or a seed; ``None`` draws a fresh seed from the OS
        (never global state).
    critical_path : bool, default True
        Also estimate each task's and group's share of the critical path.

    Returns
    -------
    Simulation

    Notes
    -----
    A law that can be negative with a tiny probability (``P(X < 0) <= 1e-9``,
    e.g. a Normal law with mean >= 6 std) is accepted; its rare negative draws
    are clipped at 0.

    The interval is asymptotic (central limit theorem). Where the makespans'
    upper tail looks like a power law of index below 2
    (:func:`~queuesgd.batchmeans.check_tail`), it warns
    (:class:`~queuesgd.errors.AccuracyWarning`): the maximum of 8 lognormal
    tasks of sigma 3 covered its mean in 163 of 200 runs of 20,000 iterations.

    Examples
    --------
    >>> from queuesgd.dag import Task, TaskGraph, simulate
    >>> from queuesgd.distributions import Exponential, LogNormal
    >>> g = TaskGraph([Task("fwd", 1.0, scale="w"), Task("bwd", 2.0, after="fwd", scale="w")],
    ...               factors={"w": LogNormal.from_mean_scv(1.0, 0.2)})
    >>> sim = simulate(g, 20_000, rng=7)
    >>> bool(sim.interval[0] < 3.0 < sim.interval[1])        # E[factor] * (1 + 2)
    True
    >>> {k: round(v, 6) for k, v in sim.task_share.items()}
    {'fwd': 0.333333, 'bwd': 0.666667}
    """
    graph = check_graph(graph)
    n = _checks.integer("iterations", iterations, maximum=MAX_ITERATIONS)  # iterations_option's, None refused
    gen = as_generator(np.random.default_rng() if rng is None else rng)
    critical = bool(critical_path)
    T = len(graph)
    # One makespan kept per iteration; the draws are evaluated in chunks at SECONDS_PER_TASK a task.
    check_simulation_size(
        n,
        1,
        unit="makespan",
        what="makespans",
        seconds_per_iteration=SECONDS_PER_TASK * T,
        instead="a deterministic law (one longest-path pass) or a smaller graph",
    )
    pl = _evaluate.plan(graph)
    sp = _sampler(graph)
    makespans = np.empty(n)
    sum_start = np.zeros(T)
    sum_finish = np.zeros(T)
    sum_path = np.zeros(T)
    step = _evaluate.chunk_rows(T)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        D = _draw(sp, gen, T, r1 - r0)
        ev = _evaluate.evaluate(pl, D, critical)
        makespans[r0:r1] = ev.makespan
        sum_start += ev.start.sum(axis=1)
        sum_finish += ev.finish[:T].sum(axis=1)
        if critical:
            flat = np.flatnonzero(ev.on_path[:T])  # much faster than a 2-D nonzero
            sum_path += np.bincount(flat // (r1 - r0), weights=D.ravel()[flat], minlength=T)
    # Iterations are independent replications: no warm-up, batch means over all of them. A makespan whose
    # tail looks too heavy for the central limit theorem gets the subsampling interval, and is said so.
    mean, interval = batch_means(makespans)
    check_tail(makespans, f"simulate(iterations={n:,})", repaired=True)
    total = float(makespans.sum())
    task_share: dict[str, float] = {}
    group_share: dict[str, float] = {}
    if critical:
        share = sum_path / total if total > 0 else np.zeros(T)
        names = graph.names
        task_share = {names[i]: float(share[i]) for i in np.flatnonzero(share > 0)}
        group_share = dict(group_totals(graph, share))
    return Simulation(
        graph=graph,
        makespans=readonly(makespans),
        mean=mean,
        interval=interval,
        mean_start=readonly(sum_start / n),
        mean_finish=readonly(sum_finish / n),
        task_share=MappingProxyType(task_share),
        group_share=MappingProxyType(group_share),
    )
