"""TaskGraph.from_arrays: the graph TaskGraph builds task by task, and its errors; the depths it orders by.

The reference is the general path (a ``Task`` a task, ``after`` by name): on random DAGs, listed in a
random order with repeated predecessors and a mix of groups, ``from_arrays`` must give the same names,
structure (predecessors in order, resources, depths), groups, mean durations and Task objects, and
bit-identical schedules. The depths (``super_depths``) are checked against a longest path computed
apart (memoized over the resource super-graph), with and without resources.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from queuesgd.dag import Task, TaskGraph, schedule
from queuesgd.errors import InvalidParameterError


def _random_dag(rng, T, extra=3):
    """Names, durations, predecessor lists (a random DAG listed in a random order, some repeats), groups."""
    rank = rng.permutation(T)  # the topological order
    at = np.argsort(rank)  # the task at each rank
    preds = []
    for i in range(T):
        r = rank[i]
        k = int(rng.integers(0, min(r, extra) + 1))
        ps = [int(at[x]) for x in rng.integers(0, r, k)] if r else []
        if ps and rng.random() < 0.2:
            ps.append(ps[0])  # a repeat, kept once
        preds.append(ps)
    names = [f"t{i}" for i in rng.permutation(T)]
    groups = [[None, "fwd", "bwd", "comm"][int(x)] for x in rng.integers(0, 4, T)]
    return names, rng.uniform(0.0, 2.0, T).round(2), preds, groups


@pytest.mark.parametrize("seed", range(6))
def test_from_arrays_is_the_task_by_task_graph(seed):
    rng = np.random.default_rng(seed)
    names, D, preds, groups = _random_dag(rng, int(rng.integers(1, 300)))
    ptr = np.concatenate(([0], np.cumsum([len(p) for p in preds])))
    idx = np.array([p for ps in preds for p in ps], dtype=np.int64)
    fast = TaskGraph.from_arrays(names, D, ptr, idx, groups, name="g")
    ref = TaskGraph(
        [
            Task(n, float(d), tuple(names[j] for j in ps), group=g)
            for n, d, ps, g in zip(names, D, preds, groups)
        ],
        name="g",
    )
    assert fast.names == ref.names and fast.groups == ref.groups and fast.resources == ()
    assert fast.group_index.tolist() == ref.group_index.tolist()
    assert fast.mean_durations.tolist() == ref.mean_durations.tolist() and fast.is_deterministic
    for a, b in zip(fast.structure, ref.structure):
        assert a.tolist() == b.tolist() and not a.flags.writeable
    assert [t.after for t in fast.tasks] == [tuple(dict.fromkeys(t.after)) for t in ref.tasks]
    assert [(t.name, t.duration, t.group) for t in fast.tasks] == [
        (t.name, t.duration, t.group) for t in ref.tasks
    ]
    assert len(fast) == len(ref) and repr(fast) == repr(ref) and fast.index(names[-1]) == len(names) - 1
    rows = rng.uniform(0.0, 1.0, (4, len(names))).round(1)  # ties
    s, t = schedule(fast, rows), schedule(ref, rows)
    for x, y in ((s.start, t.start), (s.finish, t.finish), (s.on_critical_path, t.on_critical_path)):
        assert np.array_equal(x, y)
    assert schedule(fast).group_share() == schedule(ref).group_share()


def _depths_apart(preds, resource_of):
    """Longest-path depth of each task's node when each resource is one node (memoized recursion)."""
    node = [("r", r) if r >= 0 else ("t", i) for i, r in enumerate(resource_of)]
    into: dict = {}
    for i, ps in enumerate(preds):
        into.setdefault(node[i], set()).update(node[p] for p in ps)

    @functools.cache
    def depth(x):
        return max((depth(y) + 1 for y in into.get(x, ())), default=0)

    return [depth(x) for x in node]


@pytest.mark.parametrize("seed", range(8))
def test_depths_are_the_longest_paths_of_the_resource_graph(seed):
    rng = np.random.default_rng(100 + seed)
    names, D, preds, _ = _random_dag(rng, int(rng.integers(2, 120)))
    checked = 0
    for attempt in range(40):
        res = [-1] * len(names)  # one or two resources of two or three tasks each, the rest plain
        for r in range(1 + attempt % 2):
            for i in rng.choice(len(names), 2 + attempt % 3 if len(names) > 5 else 2, replace=False):
                res[int(i)] = r
        tasks = [
            Task(n, float(d), tuple(names[j] for j in ps), resource=f"R{r}" if r >= 0 else None)
            for n, d, ps, r in zip(names, D, preds, res)
        ]
        try:
            g = TaskGraph(tasks)
        except InvalidParameterError as err:  # a resource that depends on itself: refused, by rule
            assert "TaskGraph resource" in err.field
            continue
        order = {r: j for j, r in enumerate(dict.fromkeys(r for r in res if r >= 0))}
        want = _depths_apart(preds, [order[r] if r >= 0 else -1 for r in res])
        assert g.structure.depth.tolist() == want
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(
    "args, field",
    [
        ((["a", "a"], [1.0, 1.0], [0, 0, 0], []), "names[1]"),
        ((["a", ""], [1.0, 1.0], [0, 0, 0], []), "names[1]"),
        ((["a", 3], [1.0, 1.0], [0, 0, 0], []), "names[1]"),
        (([], [], [0], []), "names"),
        ((["a", "b"], [1.0, -1.0], [0, 0, 0], []), "durations"),
        ((["a", "b"], [1.0, np.nan], [0, 0, 0], []), "durations"),
        ((["a", "b"], [1.0], [0, 0, 0], []), "durations"),
        ((["a", "b"], "1s", [0, 0, 0], []), "durations"),
        ((["a", "b"], [1.0, 1.0], [0, 0], []), "pred_ptr"),
        ((["a", "b"], [1.0, 1.0], [0, 1, 0], [0]), "pred_ptr"),
        ((["a", "b"], [1.0, 1.0], [0.0, 0.0, 1.0], [0]), "pred_ptr"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 2], [0]), "pred_idx"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 1], [2]), "pred_idx"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 1], [-1]), "pred_idx"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 1], [1]), "TaskGraph.tasks"),  # b after b
        ((["a", "b", "c"], [1.0] * 3, [0, 1, 2, 3], [2, 0, 1]), "TaskGraph.tasks"),  # a cycle
        ((["a", "b"], [1.0, 1.0], [0, 0, 0], [], ["x"]), "groups"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 0], [], ["x", " "]), "groups"),
        ((["a", "b"], [1.0, 1.0], [0, 0, 0], [], [["x"], None]), "groups"),
    ],
)
def test_from_arrays_refuses_bad_arrays(args, field):
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph.from_arrays(*args)
    assert err.value.field == field


def test_from_arrays_names_the_cycle_as_the_task_path_does():
    with pytest.raises(InvalidParameterError) as fast:
        TaskGraph.from_arrays(["a", "b", "c"], [1.0] * 3, [0, 1, 2, 3], [2, 0, 1])
    with pytest.raises(InvalidParameterError) as ref:
        TaskGraph([Task("a", after="c"), Task("b", after="a"), Task("c", after="b")])
    assert str(fast.value) == str(ref.value) and "b -> c -> a -> b" in str(fast.value)
