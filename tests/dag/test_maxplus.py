"""schedule(): hand-computed schedules, Shi et al.'s WFBP recursion, shares, batches and bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuesgd.dag import Task, TaskGraph, schedule
from queuesgd.distributions import Exponential, LogNormal
from queuesgd.errors import InvalidParameterError, UnknownNameError


def test_chain_by_hand():
    g = TaskGraph([Task("a", 1.5), Task("b", 2.0, after="a"), Task("c", "250ms", after="b")])
    s = schedule(g)
    assert s.start.tolist() == [0.0, 1.5, 3.5]
    assert s.finish.tolist() == [1.5, 3.5, 3.75]
    assert s.makespan == 3.75
    assert s.critical_path() == ("a", "b", "c")
    assert s["b"] == (1.5, 3.5)


def test_fork_join_by_hand():
    # fork (1) -> x (2), y (5), z (3) -> join (1): makespan 1 + 5 + 1
    g = TaskGraph(
        [
            Task("fork", 1.0),
            Task("x", 2.0, after="fork"),
            Task("y", 5.0, after="fork"),
            Task("z", 3.0, after="fork"),
            Task("join", 1.0, after=["x", "y", "z"]),
        ]
    )
    s = schedule(g)
    assert s.finish.tolist() == [1.0, 3.0, 6.0, 4.0, 7.0]
    assert s.start[4] == 6.0
    assert s.makespan == 7.0
    assert s.critical_path() == ("fork", "y", "join")
    assert s.on_critical_path.tolist() == [True, False, True, False, True]


def test_resource_fifo_and_ties_by_hand():
    # ready times: a 0, b 0 (tie: a declared first), c 1 (after p), d 0.5 (after q)
    # FIFO order a, b, d, c: a 0-2, b 2-3, d 3-4, c 4-5; e after c: 5-5.5
    g = TaskGraph(
        [
            Task("p", 1.0),
            Task("q", 0.5),
            Task("a", 2.0, resource="link"),
            Task("b", 1.0, resource="link"),
            Task("c", 1.0, after="p", resource="link"),
            Task("d", 1.0, after="q", resource="link"),
            Task("e", 0.5, after="c"),
        ]
    )
    s = schedule(g)
    assert s.start.tolist() == [0.0, 0.0, 0.0, 2.0, 4.0, 3.0, 5.0]
    assert s.finish.tolist() == [1.0, 0.5, 2.0, 3.0, 5.0, 4.0, 5.5]
    assert s.makespan == 5.5
    # c waited for d, d for b, b for a, a opened the busy period at 0
    assert s.critical_path() == ("a", "b", "d", "c", "e")


def test_tie_goes_to_the_earlier_declaration():
    g1 = TaskGraph([Task("x", 1.0, resource="r"), Task("y", 2.0, resource="r")])
    g2 = TaskGraph([Task("y", 2.0, resource="r"), Task("x", 1.0, resource="r")])
    assert schedule(g1)["x"] == (0.0, 1.0) and schedule(g1)["y"] == (1.0, 3.0)
    assert schedule(g2)["y"] == (0.0, 2.0) and schedule(g2)["x"] == (2.0, 3.0)


def test_idle_gap_on_a_resource_starts_a_new_busy_period():
    # a 0-1 on r; b ready at 3 (after s) on r: starts at 3, not 1; critical path s -> b
    g = TaskGraph([Task("s", 3.0), Task("a", 1.0, resource="r"), Task("b", 2.0, after="s", resource="r")])
    s = schedule(g)
    assert s["b"] == (3.0, 5.0)
    assert s.critical_path() == ("s", "b")


def test_shares_by_hand():
    g = TaskGraph(
        [
            Task("fwd", 2.0, group="compute"),
            Task("bwd", 4.0, after="fwd", group="compute"),
            Task("comm", 3.0, after="fwd", group="comm"),
            Task("upd", 1.0, after=["bwd", "comm"]),
        ]
    )
    s = schedule(g)
    assert s.makespan == 7.0
    assert s.task_share() == {"fwd": 2 / 7, "bwd": 4 / 7, "upd": 1 / 7}
    assert s.group_share() == pytest.approx({"compute": 6 / 7, "comm": 0.0, "other": 1 / 7}, abs=1e-15)


def test_zero_makespan_has_zero_shares():
    s = schedule(TaskGraph([Task("a"), Task("b", after="a")]))
    assert s.makespan == 0.0
    assert s.task_share() == {"a": 0.0, "b": 0.0}
    assert s.group_share() == {"other": 0.0}


def test_default_durations_are_the_means_and_not_the_mean_makespan():
    g = TaskGraph([Task("a", Exponential(1.0)), Task("b", Exponential(1.0))])
    assert schedule(g).makespan == 1.0  # max of the means, while E[max] = 1.5


def test_batch_equals_row_by_row():
    g = TaskGraph(
        [
            Task("a", 1.0),
            Task("b", 2.0, resource="r"),
            Task("c", 1.0, after="a", resource="r"),
            Task("d", 1.0, after=["b", "c"]),
        ]
    )
    rng = np.random.default_rng(3)
    D = rng.exponential(size=(50, 4))
    batch = schedule(g, D)
    assert batch.start.shape == (50, 4) and batch.makespan.shape == (50,)
    for k in range(50):
        one = schedule(g, D[k])
        np.testing.assert_array_equal(batch.start[k], one.start)
        np.testing.assert_array_equal(batch.finish[k], one.finish)
        assert batch.makespan[k] == one.makespan
        assert batch.critical_path(k) == one.critical_path()
    shares = batch.group_share()
    np.testing.assert_allclose(shares["other"], 1.0, rtol=1e-12)
    assert set(batch.task_share()) <= set(g.names)


def test_batch_larger_than_one_chunk(monkeypatch):
    from queuesgd.dag import _evaluate

    monkeypatch.setattr(_evaluate, "CHUNK_ELEMENTS", 20)  # 5 rows per chunk for 3 tasks
    g = TaskGraph([Task("a", 1.0), Task("b", 1.0, resource="r"), Task("c", 1.0, after="a", resource="r")])
    D = np.arange(30.0).reshape(10, 3) % 4
    s = schedule(g, D)
    for k in range(10):
        a, b, c = D[k]
        # b is ready at 0 <= a, so it goes first (a tie at a = 0 goes to b, declared first)
        assert s.finish[k, 1] == b
        assert s.finish[k, 2] == max(a, b) + c
        assert s.makespan[k] == max(a, b) + c


def test_critical_path_off():
    s = schedule(TaskGraph([Task("a", 1.0)]), critical_path=False)
    assert s.on_critical_path is None and s.makespan == 1.0
    with pytest.raises(InvalidParameterError, match="critical_path=True"):
        s.critical_path()


@pytest.mark.parametrize(
    "durations",
    [
        [1.0, 2.0],  # wrong length
        [[1.0, 2.0, 3.0]] * 2 + [[1.0]],  # ragged
        np.ones((2, 2, 3)),
        np.ones((0, 3)),
        [1.0, -1.0, 0.0],
        [1.0, math.nan, 0.0],
        [1.0, math.inf, 0.0],
        "abc",
    ],
)
def test_bad_durations(durations):
    g = TaskGraph([Task("a"), Task("b"), Task("c")])
    with pytest.raises(InvalidParameterError) as err:
        schedule(g, durations)
    assert err.value.field == "durations"


def test_bad_graph_and_rows():
    with pytest.raises(InvalidParameterError) as err:
        schedule([Task("a")])
    assert err.value.field == "graph"
    g = TaskGraph([Task("a", 1.0)])
    with pytest.raises(InvalidParameterError):
        schedule(g, [[1.0], [2.0]]).critical_path(row=2)
    with pytest.raises(InvalidParameterError):
        schedule(g).critical_path(row=1)
    with pytest.raises(UnknownNameError):
        schedule(g)["b"]


def test_results_are_read_only():
    s = schedule(TaskGraph([Task("a", 1.0)]))
    with pytest.raises(ValueError):
        s.start[0] = 5.0
    with pytest.raises(AttributeError):
        s.makespan = 2.0


# ---------------------------------------------------------------------------- Shi et al. (2018) WFBP


def wfbp_recursion(tb, tc):
    """Shi, Wang, Chu, Li (2018): backward and communication start times with wait-free backprop."""
    L = len(tb)
    tau_b = [0.0] * L
    tau_c = [0.0] * L
    for l in range(L - 2, -1, -1):
        tau_b[l] = tau_b[l + 1] + tb[l + 1]
    tau_c[L - 1] = tau_b[L - 1] + tb[L - 1]
    for l in range(L - 2, -1, -1):
        tau_c[l] = max(tau_c[l + 1] + tc[l + 1], tau_b[l] + tb[l])
    t_no = tau_c[0] + tc[0] - (tau_b[0] + tb[0])
    return tau_b, tau_c, t_no


def wfbp_graph(L, tf, tb, tc, *, resource=True):
    """Forward layers 0..L-1, backward L-1..0, each layer's gradient sent FIFO on one link."""
    tasks = [Task(f"f{l}", tf[l], after=() if l == 0 else f"f{l - 1}", group="forward") for l in range(L)]
    for l in range(L - 1, -1, -1):
        tasks.append(Task(f"b{l}", tb[l], after=f"f{L - 1}" if l == L - 1 else f"b{l + 1}", group="backward"))
        if resource:  # FIFO link: the graph's queue does the max of the recursion
            tasks.append(Task(f"c{l}", tc[l], after=f"b{l}", resource="net", group="comm"))
        else:  # the recursion written as edges
            tasks.append(
                Task(f"c{l}", tc[l], after=[f"b{l}"] + ([f"c{l + 1}"] if l < L - 1 else []), group="comm")
            )
    return TaskGraph(tasks)


layer_times = st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_wfbp_recursion_matches_schedule(data):
    L = data.draw(st.integers(1, 30))
    times = st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=L, max_size=L)
    tf, tb, tc = data.draw(times), data.draw(times), data.draw(times)
    tau_b, tau_c, t_no = wfbp_recursion(tb, tc)
    t_f, t_b = sum(tf), sum(tb)
    for resource in (False, True):
        g = wfbp_graph(L, [0.0] * L, tb, tc, resource=resource)  # backward pass alone, as in the paper
        s = schedule(g)
        starts_b = [s[f"b{l}"][0] for l in range(L)]
        starts_c = [s[f"c{l}"][0] for l in range(L)]
        if resource:  # Lindley's prefix max: equal to rounding
            np.testing.assert_allclose(starts_b, tau_b, rtol=0, atol=0)
            np.testing.assert_allclose(starts_c, tau_c, rtol=1e-12, atol=1e-12)
        else:  # the same additions and maxima in the same order: bit for bit
            assert starts_b == tau_b and starts_c == tau_c
        # iteration = t_f + t_b + t_no (no update task)
        full = schedule(wfbp_graph(L, tf, tb, tc, resource=resource))
        assert full.makespan == pytest.approx(t_f + t_b + t_no, rel=1e-12, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=40))
def test_wfbp_integer_times_exact(layers):
    tb = [float(b) for b, _ in layers]
    tc = [float(c) for _, c in layers]
    L = len(layers)
    tau_b, tau_c, t_no = wfbp_recursion(tb, tc)
    s = schedule(wfbp_graph(L, [0.0] * L, tb, tc))
    assert [s[f"c{l}"][0] for l in range(L)] == tau_c
    assert s.makespan == sum(tb) + t_no


def test_wfbp_example_numbers():
    # three layers: tb = (1, 2, 3) for layers 0, 1, 2; tc = (4, 1, 2)
    tb, tc = [1.0, 2.0, 3.0], [4.0, 1.0, 2.0]
    tau_b, tau_c, t_no = wfbp_recursion(tb, tc)
    assert tau_b == [5.0, 3.0, 0.0]
    assert tau_c == [6.0, 5.0, 3.0]  # c2 at 3; c1 at max(3 + 2, 3 + 2) = 5; c0 at max(5 + 1, 5 + 1) = 6
    assert t_no == 4.0  # 6 + 4 - 6
    s = schedule(wfbp_graph(3, [0.0] * 3, tb, tc))
    assert s.makespan == 10.0
    assert s.group_share() == pytest.approx({"forward": 0.0, "backward": 0.6, "comm": 0.4})


def test_random_graph_at_lognormal_means():
    g = TaskGraph([Task("a", LogNormal(0.0, 0.5)), Task("b", 1.0, after="a")])
    assert schedule(g).makespan == pytest.approx(math.exp(0.125) + 1.0, rel=1e-15)
