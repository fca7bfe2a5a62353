"""The evaluation core against a SimPy discrete-event simulation, and critical-path invariants."""

import numpy as np
import pytest

from queuesgd.dag import Task, TaskGraph, schedule
from queuesgd.dag._evaluate import as_index, chunk_rows
from queuesgd.errors import InvalidParameterError


def simulate_with_simpy(graph: TaskGraph, durations: np.ndarray) -> np.ndarray:
    """The SimPy peer (``pip install -e ".[peers]"``); a test that calls it skips without SimPy."""
    pytest.importorskip("simpy")
    from peers.simpy_dag import simulate_with_simpy as peer

    return peer(graph, durations)


def random_graph(seed: int, n_tasks: int = 30, n_resources: int = 3) -> TaskGraph:
    """A random DAG where most tasks use one of a few FIFO resources (kept only where the rule holds)."""
    rng = np.random.default_rng(seed)
    tasks: list[Task] = []
    for i in range(n_tasks):
        k = int(rng.integers(0, min(i, 3) + 1))
        after = [f"t{j}" for j in rng.choice(i, size=k, replace=False)] if k else []
        choices = [f"R{int(r)}" for r in rng.permutation(n_resources)] if rng.random() < 0.7 else []
        for r in [*choices, None]:
            try:
                TaskGraph([*tasks, Task(f"t{i}", 1.0, after=after, resource=r)])
            except InvalidParameterError as err:
                assert err.field.startswith("TaskGraph resource")
                continue
            tasks.append(Task(f"t{i}", 1.0, after=after, resource=r))
            break
    return TaskGraph(tasks)


def check_critical_path(g: TaskGraph, s, row=None):
    """The path is a chain in time: from 0, each task starts as the previous one ends, up to the makespan."""
    start = s.start if row is None else s.start[row]
    finish = s.finish if row is None else s.finish[row]
    ms = s.makespan if row is None else s.makespan[row]
    D = s.durations if row is None else s.durations[row]
    path = s.critical_path(0 if row is None else row)
    idx = [g.index(n) for n in path]
    assert start[idx[0]] == 0.0
    assert finish[idx[-1]] == pytest.approx(ms, rel=1e-12)
    for u, v in zip(idx, idx[1:]):
        assert start[v] == pytest.approx(finish[u], rel=1e-12, abs=1e-300)
        # linked by a dependency or by the shared resource
        assert g.names[u] in g.tasks[v].after or (
            g.tasks[u].resource is not None and g.tasks[u].resource == g.tasks[v].resource
        )
    assert float(np.sum(D[idx])) == pytest.approx(ms, rel=1e-12, abs=1e-300)
    return idx


@pytest.mark.parametrize("seed", range(60))
def test_integer_durations_agree_exactly_with_simpy(seed):
    # small integers (zeros included): many ties of ready times, every sum exact in floating point
    g = random_graph(seed)
    rng = np.random.default_rng(1000 + seed)
    D = rng.integers(0, 4, size=(8, len(g))).astype(float)
    batch = schedule(g, D)
    for k in range(D.shape[0]):
        np.testing.assert_array_equal(batch.finish[k], simulate_with_simpy(g, D[k]))
        idx = check_critical_path(g, batch, row=k)
        assert float(np.sum(D[k, idx])) == batch.makespan[k]  # exactly, with integers
    one = schedule(g, D[0])
    np.testing.assert_array_equal(one.finish, simulate_with_simpy(g, D[0]))


@pytest.mark.parametrize("seed", range(30))
def test_sampled_durations_agree_with_simpy(seed):
    # continuous draws: the schedule (FIFO order) is identical; times agree to the last bits
    g = random_graph(seed, n_tasks=40, n_resources=2)
    rng = np.random.default_rng(seed)
    D = rng.lognormal(0.0, 1.0, size=(6, len(g)))
    batch = schedule(g, D)
    for k in range(D.shape[0]):
        peer = simulate_with_simpy(g, D[k])
        np.testing.assert_allclose(batch.finish[k], peer, rtol=1e-13, atol=0)
        check_critical_path(g, batch, row=k)
        np.testing.assert_allclose(sum(batch.group_share().values())[k], 1.0, rtol=1e-12)


def test_deterministic_durations_agree_with_simpy():
    g = TaskGraph(
        [
            Task("p", 1.0),
            Task("q", 0.5),
            Task("a", 2.0, resource="link"),
            Task("b", 1.0, resource="link"),
            Task("c", 1.0, after="p", resource="link"),
            Task("d", 1.0, after="q", resource="link"),
            Task("e", 0.5, after="c", resource="disk"),
            Task("f", 0.25, after="a", resource="disk"),
        ]
    )
    s = schedule(g)
    np.testing.assert_array_equal(s.finish, simulate_with_simpy(g, g.mean_durations))
    check_critical_path(g, s)


def test_zero_duration_cascade_through_two_resources():
    # at t = 1: u (R2, zero duration) makes y ready on R1 at the same instant as x; y is declared first
    g = TaskGraph(
        [
            Task("s", 1.0),
            Task("y", 2.0, after="u", resource="R1"),
            Task("x", 3.0, after="s", resource="R1"),
            Task("u", 0.0, after="s", resource="R2"),
        ]
    )
    s = schedule(g)
    assert s["y"] == (1.0, 3.0) and s["x"] == (3.0, 6.0)
    np.testing.assert_array_equal(s.finish, simulate_with_simpy(g, g.mean_durations))


def test_group_and_task_shares_sum_to_one():
    g = TaskGraph(
        [
            Task(
                f"t{i}", 1.0, after=[f"t{j}" for j in range(max(0, i - 2), i)], group=f"g{i % 3}", resource=r
            )
            for i, r in enumerate([None, "r", None, None, "s", None])
        ]
    )
    D = np.random.default_rng(0).exponential(size=(20, len(g)))
    s = schedule(g, D)
    np.testing.assert_allclose(sum(s.group_share().values()), 1.0, rtol=1e-12)
    np.testing.assert_allclose(sum(s.task_share().values()), 1.0, rtol=1e-12)


def test_helpers():
    assert chunk_rows(3) == 1_000_000
    assert as_index(np.array([4])) == slice(4, 5, 1)
    assert as_index(np.array([9, 6])).tolist() == [9, 6]  # decreasing: kept as an array


@pytest.mark.parametrize("seed", range(10))
def test_the_plan_lists_every_task_once_with_its_own_predecessors(seed):
    # the stages are built from arrays over every group at once: each must hold what it says
    from queuesgd.dag._evaluate import plan

    rng = np.random.default_rng(seed)
    T = 150
    tasks = []
    for i in range(T):  # chains in parallel (slices), joins of 2 to 12, a few resources
        w = i % 5
        k = int(rng.integers(0, min(i, 12) + 1)) if rng.random() < 0.3 else 0
        after = {f"t{i - 5}"} if i >= 5 else set()
        after |= {f"t{int(j)}" for j in rng.integers(0, i, k)} if i else set()
        res = f"R{w}" if (i < 5 and rng.random() < 0.5) else None
        tasks.append(Task(f"t{i}", 1.0, tuple(sorted(after)), resource=res))
    g = TaskGraph(tasks)
    ptr, pred_idx, res_of, depth = g.structure
    seen = np.zeros(T, dtype=int)
    last = -1
    for st in plan(g).stages:
        idx = st.idx
        seen[idx] += 1
        assert np.array_equal(np.arange(T)[st.sel], idx)
        assert len(set(depth[idx].tolist())) == 1 and depth[idx[0]] >= last
        last = depth[idx[0]]
        if st.P is not None:
            for row, t in zip(st.P.tolist(), idx.tolist()):
                own = pred_idx[ptr[t] : ptr[t + 1]].tolist()
                assert row == own + [T] * (len(row) - len(own)) and len(row) == max(
                    1, max(ptr[j + 1] - ptr[j] for j in idx)
                )
        if st.p1 is not None:
            assert np.array_equal(np.arange(T)[st.p1], st.P[:, 0])
            assert st.p1_unique == (len(set(st.P[:, 0].tolist())) == len(idx))
    assert (seen == 1).all()
