"""The schedule graphs built from arrays are the graphs built task by task, and time the same.

``interleaved_graph`` and ``interleaved_cut`` build their graphs with ``TaskGraph.from_arrays`` (index
arrays, checked as a whole). The reference here builds each one the general way, a ``Task`` a pass
named by its predecessors, from the pass orders of tests/pipeline_schedule_sim.py (written apart from
the package): the same names, durations, predecessors (in order), groups and Task objects, and, for
random pass times, bit-identical start and finish times and critical paths.
"""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_schedule_sim import interleaved_order, one_f_one_b_order

import queuesgd.schemes.parallel.interleaved_graph as ig
from queuesgd.dag import Task, TaskGraph, schedule


def _orders(p, v, m, sched):
    if sched == "interleaved":
        return [interleaved_order(p, v, m, r) for r in range(p)]
    return [[(kind, 0, j) for kind, _, j in one_f_one_b_order(p, m, r)] for r in range(p)]


def _reference(p, v, m, sched, first=0, stop=None, cut=False):
    """Every GPU's passes ``first .. stop - 1`` as Tasks; ``cut``: inputs before ``first`` are cut tasks."""
    orders = _orders(p, v, m, sched)
    where = {
        (kind, k * p + r, j): (r, i) for r, order in enumerate(orders) for i, (kind, k, j) in enumerate(order)
    }

    def name(kind, s, j):
        r, i = where[kind, s, j]
        return f"cut/r{r}/{i}" if cut and i < first else f"s{s}/{kind}{j}"

    tasks = (
        [Task(f"cut/r{r}/{i}", 0.0, group="cut") for i in (first - 2, first - 1) for r in range(p)]
        if cut
        else []
    )
    for r, order in enumerate(orders):
        for i, (kind, k, j) in enumerate(order[first:stop], start=first):
            s = k * p + r
            after = [name(*_own(order[i - 1], p, r))] if i > 0 else []
            if kind == "F" and s > 0:
                after.append(name("F", s - 1, j))
            if kind == "B" and s < p * v - 1:
                after.append(name("B", s + 1, j))
            tasks.append(
                Task(
                    f"s{s}/{kind}{j}",
                    0.0,
                    tuple(dict.fromkeys(after)),
                    group="forward" if kind == "F" else "backward",
                )
            )
    return TaskGraph(tasks)


def _own(op, p, r):
    kind, k, j = op
    return kind, k * p + r, j


def _same(fast, ref, rng):
    a, b = fast.graph, ref
    # the reference lists GPU by GPU as the package does; the cut tasks first
    assert a.names == b.names and a.groups == b.groups
    assert a.group_index.tolist() == b.group_index.tolist()
    assert a.mean_durations.tolist() == b.mean_durations.tolist()
    for x, y in zip(a.structure, b.structure):
        assert x.tolist() == y.tolist()
    assert a.tasks == b.tasks
    D = rng.uniform(0.0, 1.0, (3, len(a)))
    D[1] = np.round(D[1] * 4) / 4  # ties between paths
    s, t = schedule(a, D), schedule(b, D)
    assert np.array_equal(s.start, t.start) and np.array_equal(s.finish, t.finish)
    assert np.array_equal(s.makespan, t.makespan) and np.array_equal(s.on_critical_path, t.on_critical_path)


@pytest.mark.parametrize(
    "p, v, m, sched",
    [
        (1, 1, 3, "1f1b"),
        (4, 1, 2, "1f1b"),
        (4, 1, 9, "1f1b"),
        (1, 3, 2, "interleaved"),
        (2, 2, 2, "interleaved"),
        (3, 1, 6, "interleaved"),
        (4, 3, 8, "interleaved"),
        (5, 2, 15, "interleaved"),
    ],
)
def test_whole_graphs_are_the_task_by_task_ones(p, v, m, sched):
    _same(
        ig.interleaved_graph(p, v, m, sched),
        _reference(p, v, m, sched),
        np.random.default_rng(p * 100 + v * 10 + m),
    )


@pytest.mark.parametrize(
    "p, v, sched",
    [(2, 3, "interleaved"), (4, 2, "interleaved"), (3, 1, "interleaved"), (4, 1, "1f1b"), (6, 1, "1f1b")],
)
def test_cut_graphs_are_the_task_by_task_ones(p, v, sched):
    c = ig.interleaved_cut(p, v, sched)
    q = p if sched == "interleaved" else 1
    rng = np.random.default_rng(p * 10 + v)
    _same(c.head, _reference(p, v, c.groups * q, sched, stop=c.position), rng)
    _same(c.tail, _reference(p, v, c.groups * q, sched, first=c.position + 2 * q * v, cut=True), rng)
