"""Tangible reachability graphs: marking counts, vanishing elimination, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy
from petri_helpers import retry_loop, symbolic_branch_net

from queuesgd import PetriNet
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, UnknownNameError
from queuesgd.petri import statespace as ssmod
from queuesgd.petri.compiled import PATH_STEPS
from queuesgd.petri.statespace import TimelessTrapError, UnboundedNetError, state_space


def ring(n_tokens: int, n_places: int, rate: float = 1.0) -> PetriNet:
    net = PetriNet(f"ring{n_places}x{n_tokens}")
    for k in range(n_places):
        net.place(f"p{k}", tokens=n_tokens if k == 0 else 0)
    for k in range(n_places):
        net.timed(f"t{k}", rate=rate, inputs={f"p{k}": 1}, outputs={f"p{(k + 1) % n_places}": 1})
    return net


def mm1k(K: int, inhibitor: bool = True) -> PetriNet:
    net = PetriNet("mm1k")
    net.place("q")
    if inhibitor:
        net.timed("arrive", rate=1.0, outputs={"q": 1}, inhibitors={"q": K})
    else:
        net.place("free", tokens=K)
        net.timed("arrive", rate=1.0, inputs={"free": 1}, outputs={"q": 1})
    net.timed("serve", rate=2.0, inputs={"q": 1}, outputs={} if inhibitor else {"free": 1})
    return net


# ---------------------------------------------------------------------------- counts
@pytest.mark.parametrize(("n", "k"), [(1, 1), (1, 4), (3, 3), (5, 4), (10, 3), (6, 6)])
def test_closed_ring_count_is_binomial(n, k):
    # N tokens over K places: C(N+K-1, K-1) markings (stars and bars)
    ss = state_space(ring(n, k))
    assert len(ss) == math.comb(n + k - 1, k - 1)
    assert (ss.markings.sum(axis=1) == n).all()
    assert len({tuple(r) for r in ss.markings}) == len(ss)
    assert ss.markings[0].tolist() == [n] + [0] * (k - 1)
    # every marking enables one transition per non-empty place
    assert ss.n_edges == int((ss.markings > 0).sum())


def test_hundred_thousand_markings():
    ss = state_space(ring(38, 5))
    assert len(ss) == math.comb(42, 4) == 111_930
    Q = ss.generator()
    assert abs(Q.sum(axis=1)).max() < 1e-12


@pytest.mark.parametrize("inhibitor", [True, False])
def test_mm1k_markings_and_generator(inhibitor):
    ss = mm1k(4, inhibitor).state_space()
    assert len(ss) == 5
    q = ss.markings[:, ss.place_names.index("q")]
    assert sorted(q.tolist()) == [0, 1, 2, 3, 4]
    Q = ss.generator().toarray()
    order = np.argsort(q)
    Q = Q[np.ix_(order, order)]
    expected = np.diag([1.0] * 4, 1) + np.diag([2.0] * 4, -1)
    expected -= np.diag(expected.sum(axis=1))
    np.testing.assert_array_equal(Q, expected)


def test_degree_single_multi_infinite_servers_and_arc_weights():
    net = PetriNet("deg")
    net.place("a", tokens=5)
    net.place("b", tokens=0)
    net.timed("one", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    net.timed("two", rate=1.0, inputs={"a": 1}, outputs={"b": 1}, servers=2)
    net.timed("inf", rate=1.0, inputs={"a": 1}, outputs={"b": 1}, servers="infinite")
    net.timed("pair", rate=1.0, inputs={"a": 2}, outputs={"b": 2}, servers="infinite")
    net.timed("back", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
    ss = net.state_space()
    s0 = ss.index({"a": 5, "b": 0})
    out = {ss.transition_names[t]: d for t, d in zip(ss.transition[ss.src == s0], ss.degree[ss.src == s0])}
    # enabling degree floor(5/1) = 5, floor(5/2) = 2; rate multiplier min(degree, servers)
    assert out == {"one": 1.0, "two": 2.0, "inf": 5.0, "pair": 2.0}
    s1 = ss.index({"a": 1, "b": 4})
    names = {ss.transition_names[t] for t in ss.transition[ss.src == s1]}
    assert names == {"one", "two", "inf", "back"}  # 'pair' needs 2 tokens


def test_edges_unique_and_generator_from_contract():
    ss = retry_loop().state_space()
    keys = list(zip(ss.src, ss.transition, ss.dst))
    assert len(keys) == len(set(keys))
    Q = ss.generator()
    assert Q.shape == (len(ss), len(ss))


# ---------------------------------------------------------------------------- vanishing
def test_branching_probabilities_are_weight_ratios():
    net = PetriNet("branch")
    net.place("src", tokens=1)
    net.place("choose")
    for name, w in (("a", 1.0), ("b", 2.0), ("c", 5.0)):
        net.place(name)
        net.immediate(f"go_{name}", inputs={"choose": 1}, outputs={name: 1}, weight=w)
        net.timed(f"back_{name}", rate=1.0, inputs={name: 1}, outputs={"src": 1})
    net.timed("start", rate=1.0, inputs={"src": 1}, outputs={"choose": 1})
    ss = net.state_space()
    assert len(ss) == 4
    start = ss.transition == net.transition_names.index("start")
    got = {
        ss.marking(int(d))["a"] * "a" + ss.marking(int(d))["b"] * "b" + ss.marking(int(d))["c"] * "c": p
        for d, p in zip(ss.dst[start], ss.prob[start])
    }
    assert got == pytest.approx({"a": 1 / 8, "b": 2 / 8, "c": 5 / 8}, abs=1e-15)
    F = ss.immediate_firings.toarray()
    for d, row in zip(ss.dst[start], F[start]):
        branch = next(p for p in "abc" if ss.marking(int(d))[p])
        assert row[net.transition_names.index(f"go_{branch}")] == 1.0
        assert row.sum() == 1.0


def test_vanishing_initial_marking_gives_initial_distribution():
    net = PetriNet("init")
    net.place("start", tokens=1)
    net.place("x")
    net.place("y")
    net.immediate("to_x", inputs={"start": 1}, outputs={"x": 1}, weight=1.0)
    net.immediate("to_y", inputs={"start": 1}, outputs={"y": 1}, weight=3.0)
    net.timed("xy", rate=1.0, inputs={"x": 1}, outputs={"y": 1})
    net.timed("yx", rate=1.0, inputs={"y": 1}, outputs={"x": 1})
    ss = net.state_space()
    assert len(ss) == 2
    init = {("x" if ss.marking(i)["x"] else "y"): ss.initial[i] for i in range(2)}
    assert init == pytest.approx({"x": 0.25, "y": 0.75})


def test_vanishing_loop_with_exit_is_eliminated_exactly():
    # From 'try': success w_ok/(w_ok+w_fail) per attempt, so 'bad' fires a geometric
    # number of times with mean w_fail/w_ok, 'again' as often, 'ok' exactly once.
    ss = retry_loop(w_fail=3.0, w_ok=1.0).state_space()
    assert len(ss) == 1 and ss.n_edges == 1
    assert ss.prob == pytest.approx([1.0], rel=1e-14)
    F = ss.immediate_firings.toarray()[0]
    names = ss.transition_names
    assert F[names.index("bad")] == pytest.approx(3.0, rel=1e-12)
    assert F[names.index("again")] == pytest.approx(3.0, rel=1e-12)
    assert F[names.index("ok")] == pytest.approx(1.0, rel=1e-12)
    assert F[names.index("start")] == 0.0


def test_vanishing_loop_with_two_exits_matches_hand_absorption():
    # 'try' -> fail (w=2) -> back to try; -> left (w=1); -> right (w=1).
    # Each attempt exits with prob 1/2, left/right equally: P(left) = P(right) = 1/2;
    # expected 'fail' firings given either exit = 2 (E[#fails] = 2/2 = 1... per attempt
    # ratio w_fail/(w_left + w_right) = 1, independent of the exit taken).
    net = PetriNet("two_exits")
    net.place("idle", tokens=1)
    net.place("try")
    net.place("fail")
    net.place("L")
    net.place("R")
    net.timed("start", rate=1.0, inputs={"idle": 1}, outputs={"try": 1})
    net.immediate("bad", inputs={"try": 1}, outputs={"fail": 1}, weight=2.0)
    net.immediate("left", inputs={"try": 1}, outputs={"L": 1}, weight=1.0)
    net.immediate("right", inputs={"try": 1}, outputs={"R": 1}, weight=1.0)
    net.immediate("again", inputs={"fail": 1}, outputs={"try": 1})
    net.timed("l_done", rate=1.0, inputs={"L": 1}, outputs={"idle": 1})
    net.timed("r_done", rate=1.0, inputs={"R": 1}, outputs={"idle": 1})
    ss = net.state_space()
    start = np.flatnonzero(ss.transition == net.transition_names.index("start"))
    assert ss.prob[start] == pytest.approx([0.5, 0.5], rel=1e-12)
    F = ss.immediate_firings.toarray()[start]
    assert F[:, net.transition_names.index("bad")] == pytest.approx([1.0, 1.0], rel=1e-12)


@pytest.mark.parametrize("extra", [-1, 0, 1, 16])
def test_long_vanishing_chain_uses_the_linear_solve(extra):
    # 'flush' moves n tokens one at a time: a vanishing chain about as long as _PATH_STEPS.
    n = PATH_STEPS + extra
    net = PetriNet("chain")
    net.place("a", tokens=0)
    net.place("b", tokens=n)
    net.place("c")
    net.timed("fill", rate=1.0, inputs={"b": n}, outputs={"a": n})
    net.immediate("flush", inputs={"a": 1}, outputs={"c": 1})
    net.timed("drain", rate=1.0, inputs={"c": n}, outputs={"b": n})
    ss = net.state_space()
    assert len(ss) == 2
    fill = np.flatnonzero(ss.transition == 0)
    assert ss.immediate_firings[fill[0], 1] == pytest.approx(n)
    assert ss.marking(int(ss.dst[fill[0]])) == {"a": 0, "b": 0, "c": n}


def test_higher_priority_preempts():
    net = PetriNet("prio")
    net.place("idle", tokens=1)
    net.place("ready")
    net.place("hi")
    net.place("lo")
    net.timed("start", rate=1.0, inputs={"idle": 1}, outputs={"ready": 1})
    net.immediate("urgent", inputs={"ready": 1}, outputs={"hi": 1}, priority=2)
    net.immediate("normal", inputs={"ready": 1}, outputs={"lo": 1}, priority=1)  # no weight needed
    net.timed("h", rate=1.0, inputs={"hi": 1}, outputs={"idle": 1})
    net.timed("l", rate=1.0, inputs={"lo": 1}, outputs={"idle": 1})
    ss = net.state_space()
    assert len(ss) == 2  # 'lo' is never marked
    assert ss.markings[:, net.place_names.index("lo")].max() == 0


def test_symbolic_weights_give_sympy_probabilities():
    a, b = sympy.symbols("a b", positive=True)
    net = symbolic_branch_net(a, b)
    ss = net.state_space()
    assert ss.prob.dtype == object
    start = np.flatnonzero(ss.transition == net.transition_names.index("start"))
    got = sorted(
        sympy.simplify(p - a / (a + b)) == 0 or sympy.simplify(p - b / (a + b)) == 0 for p in ss.prob[start]
    )
    assert got == [True, True]
    with pytest.raises(InvalidParameterError, match="symbolic"):
        ss.generator()


def test_symbolic_weights_through_a_vanishing_loop():
    f, s = sympy.symbols("f s", positive=True)
    ss = retry_loop(w_fail=f, w_ok=s).state_space()
    F = ss.immediate_firings
    names = ss.transition_names
    assert sympy.simplify(F[0, names.index("bad")] - f / s) == 0
    assert sympy.simplify(ss.prob[0] - 1) == 0


def test_generator_rates_override_and_symbolic_rates():
    lam = sympy.Symbol("lam", positive=True)
    net = PetriNet("symrate")
    net.place("q")
    net.timed("arrive", rate=lam, outputs={"q": 1}, inhibitors={"q": 1})
    net.timed("serve", rate=2.0, inputs={"q": 1})
    ss = net.state_space()
    with pytest.raises(InvalidParameterError, match="arrive"):
        ss.generator()
    Q = ss.generator({"arrive": 3.0}).toarray()
    assert Q.tolist() == [[-3.0, 3.0], [2.0, -2.0]]
    with pytest.raises(UnknownNameError):
        ss.generator({"nope": 1.0})


def test_hash_collision_is_detected_and_generation_restarts(monkeypatch):
    calls = []
    real = ssmod._constants

    def weak(P, seed):
        calls.append(seed)
        return np.ones(P, dtype=np.uint64) if seed == 0 else real(P, seed)  # seed 0: sum of tokens only

    monkeypatch.setattr(ssmod, "_constants", weak)
    monkeypatch.setattr(ssmod, "generate_timed", lambda *args: None)  # the hashed (general) path
    ss = state_space(ring(4, 3))
    assert calls[:2] == [0, 1]
    assert len(ss) == math.comb(6, 2)
    assert len({tuple(r) for r in ss.markings}) == len(ss)


def _pipeline(b: int) -> PetriNet:
    """Inhibitor arcs, batch arcs, two servers: arrivals into a buffer of b, pairs on, served out."""
    net = PetriNet(f"pipeline-{b}")
    for p in ("buffer", "stage2", "done"):
        net.place(p)
    net.timed("arrive", rate=1.0, outputs={"buffer": 1}, inhibitors={"buffer": b})
    net.timed("pair", rate=2.0, inputs={"buffer": 2}, outputs={"stage2": 2}, inhibitors={"stage2": b - 1})
    net.timed("serve", rate=1.5, inputs={"stage2": 1}, outputs={"done": 1}, inhibitors={"done": b}, servers=2)
    net.timed("leave", rate=3.0, inputs={"done": 1})
    return net


def _batches() -> PetriNet:
    """Not token-conserving, tokens grow level by level (the packed keys widen), k and infinite servers."""
    net = PetriNet("batches")
    net.place("q")
    net.place("r", tokens=2)
    net.timed("arrive", rate=1.0, outputs={"q": 3}, inhibitors={"q": 200})
    net.timed("serve", rate=2.0, inputs={"q": 2, "r": 1}, outputs={"r": 1}, servers=3)
    net.timed("drop", rate=0.5, inputs={"q": 1}, servers="infinite")
    return net


@pytest.mark.parametrize(
    "net",
    [ring(10, 6), ring(30, 3), ring(1, 70), ring(20, 7), _pipeline(12), _batches(), mm1k(5), mm1k(5, False)],
    ids=lambda n: n.name,
)
def test_timed_fast_path_equals_general_path(net):
    # Nets without immediate transitions take the packed-key path (exact keys, a table or sorted keys,
    # or a fallback when keys would pass 62 bits as in the 70-place ring); the hashed general path is the
    # independent reference: the same markings in the same order, the same edges.
    fast = state_space(net)
    ref = ssmod._generate(net, 2_000_000, 100_000, 0)
    for f in ("markings", "initial", "src", "dst", "transition", "degree", "prob"):
        a, b = getattr(fast, f), getattr(ref, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f
    assert fast.immediate_firings.shape == ref.immediate_firings.shape
    assert fast.immediate_firings.nnz == 0 == ref.immediate_firings.nnz


def test_marking_and_index():
    ss = mm1k(3).state_space()
    assert ss.marking(ss.index({"q": 2})) == {"q": 2}
    assert repr(ss) == "StateSpace('mm1k', markings=4, edges=6, places=1)"
    with pytest.raises(UnknownNameError):
        ss.index({"q": 1, "zz": 0})
    with pytest.raises(InvalidParameterError, match="reachable"):
        ss.index({"q": 9})
    with pytest.raises(InvalidParameterError, match="missing"):
        state_space(ring(1, 2)).index({"p0": 1})
    with pytest.raises(InvalidParameterError):
        ss.marking(4)


# ---------------------------------------------------------------------------- errors
def test_unknown_place_in_arc():
    net = PetriNet("bad")
    net.place("a")
    with pytest.raises(UnknownNameError, match="'b'"):
        net.timed("t", rate=1.0, inputs={"b": 1})


def test_conflicting_immediates_without_weights():
    net = PetriNet("conflict")
    net.place("src", tokens=1)
    net.place("choose")
    net.place("x")
    net.timed("start", rate=1.0, inputs={"src": 1}, outputs={"choose": 1})
    net.immediate("gx", inputs={"choose": 1}, outputs={"x": 1}, weight=1.0)
    net.immediate("gy", inputs={"choose": 1}, outputs={"src": 1})
    net.timed("back", rate=1.0, inputs={"x": 1}, outputs={"src": 1})
    with pytest.raises(InvalidParameterError) as exc:
        net.state_space()
    msg = str(exc.value)
    assert "'gy'" in msg and "'gx'" in msg and "weight=" in msg and "'choose': 1" in msg


def test_timeless_trap():
    net = PetriNet("trap")
    net.place("idle", tokens=1)
    net.place("a")
    net.place("b")
    net.timed("go", rate=1.0, inputs={"idle": 1}, outputs={"a": 1})
    net.immediate("ab", inputs={"a": 1}, outputs={"b": 1})
    net.immediate("ba", inputs={"b": 1}, outputs={"a": 1})
    with pytest.raises(TimelessTrapError, match="'ab', 'ba'"):
        net.state_space()


def test_unbounded_source_place_is_named():
    net = PetriNet("open")
    net.place("q")
    net.place("other", tokens=1)
    net.timed("arrive", rate=1.0, outputs={"q": 1})
    net.timed("serve", rate=2.0, inputs={"q": 1})
    net.timed("spin", rate=1.0, inputs={"other": 1}, outputs={"other": 1})
    with pytest.raises(UnboundedNetError, match="place\\(s\\) 'q' grow without bound") as exc:
        net.state_space()
    assert isinstance(exc.value, StateSpaceTooLargeError)


def test_unbounded_behind_an_inhibitor_reported_by_token_bound():
    # 'q' is tested by an inhibitor arc on another transition, so the dominance proof does not
    # apply; the token bound (no P-invariant covers 'q') reports it.
    net = PetriNet("open2")
    net.place("q")
    net.place("x")
    net.timed("arrive", rate=1.0, outputs={"q": 1})
    net.timed("serve", rate=2.0, inputs={"q": 1})
    net.timed("idle_only", rate=1.0, outputs={"x": 1}, inhibitors={"q": 1, "x": 1})
    net.timed("x_back", rate=1.0, inputs={"x": 1})
    with pytest.raises(UnboundedNetError, match="'q'.*max_tokens=50"):
        state_space(net, max_tokens=50)


def test_endless_immediate_is_reported():
    net = PetriNet("burst")
    net.place("on", tokens=0)
    net.place("off", tokens=1)
    net.place("pile")
    net.timed("switch", rate=1.0, inputs={"off": 1}, outputs={"on": 1})
    net.immediate("spray", inputs={"on": 1}, outputs={"on": 1, "pile": 1}, weight=1.0)
    net.immediate("stop", inputs={"on": 1}, outputs={"off": 1}, weight=1.0)
    with pytest.raises(UnboundedNetError, match="'spray'.*'pile'"):
        net.state_space()


def test_max_states_overflow_of_a_bounded_net():
    with pytest.raises(StateSpaceTooLargeError) as exc:
        state_space(ring(10, 4), max_states=100)
    msg = str(exc.value)
    assert not isinstance(exc.value, UnboundedNetError)
    assert "max_states=100" in msg and "simulat" in msg


def test_max_states_overflow_names_uncovered_places():
    net = mm1k(1000)  # bounded by its inhibitor, but no P-invariant covers 'q'
    with pytest.raises(UnboundedNetError, match="max_states=50.*'q'.*unbounded or larger"):
        state_space(net, max_states=50)


def test_bad_arguments():
    with pytest.raises(InvalidParameterError, match="max_states"):
        state_space(ring(1, 2), max_states=0)
    with pytest.raises(InvalidParameterError, match="net"):
        state_space("not a net")
