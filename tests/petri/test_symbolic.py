"""Symbolic steady state (queuesgd.petri.symbolic) against closed forms and numeric solutions."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import sympy

from queuesgd.errors import InvalidParameterError
from queuesgd.markov import steady_state_symbolic
from queuesgd.petri.net import PetriNet
from queuesgd.petri.solve import solve as petri_solve
from queuesgd.petri.symbolic import (
    _dense_generator,
    symbolic_generator,
    symbolic_steady_state,
)

lam, mu = sympy.symbols("lambda mu", positive=True)
a, b, c = sympy.symbols("a b c", positive=True)


def _numeric_pi(entries, n, subs):
    """Independent numeric solution: dense numpy least squares on [Q^T; 1] pi = [0; 1]."""
    Q = np.array(_dense_generator(entries, n).subs(subs).evalf(), dtype=float)
    A = np.vstack([Q.T, np.ones(n)])
    rhs = np.zeros(n + 1)
    rhs[-1] = 1.0
    return np.linalg.lstsq(A, rhs, rcond=None)[0]


def _birth_death(K, up, down):
    entries = {}
    for i in range(K):
        entries[(i, i + 1)] = up
        entries[(i + 1, i)] = down
    return entries


def _closed_cycle(N):
    """Three exponential queues in a cycle with N customers: C(N+2, 2) states (21 for N=5)."""
    states = [s for s in itertools.product(range(N + 1), repeat=3) if sum(s) == N]
    idx = {s: i for i, s in enumerate(states)}
    entries = {}
    for s in states:
        for k, r in enumerate((a, b, c)):
            if s[k] > 0:
                t = list(s)
                t[k] -= 1
                t[(k + 1) % 3] += 1
                entries[(idx[s], idx[tuple(t)])] = r
    return states, entries


def _reset_chain(n):
    """Birth (a), death (b) and reset to 0 (c) on n states: not product form, full-size tree polynomials."""
    entries = {}
    for i in range(n - 1):
        entries[(i, i + 1)] = a
        entries[(i + 1, i)] = b
    for i in range(1, n):
        entries[(i, 0)] = entries.get((i, 0), 0) + c
    return entries


SUBS = {a: sympy.Rational(3, 2), b: sympy.Rational(7, 3), c: sympy.Rational(5, 4)}


@pytest.mark.parametrize("K", [1, 3, 5])
def test_mm1k_closed_form(K):
    pi = steady_state_symbolic(_birth_death(K, lam, mu), K + 1)
    rho = lam / mu
    for j, p in enumerate(pi):
        closed = rho**j * (1 - rho) / (1 - rho ** (K + 1))
        assert sympy.simplify(p - closed) == 0


def test_closed_cycle_21_states_matches_numpy_and_product_form():
    states, entries = _closed_cycle(5)
    assert len(states) == 21
    t0 = time.perf_counter()
    pi = steady_state_symbolic(entries, 21)
    elapsed = time.perf_counter() - t0
    assert elapsed < 60  # the target; it takes about a second
    assert {str(s) for s in set().union(*(p.free_symbols for p in pi))} == {"a", "b", "c"}
    assert sympy.cancel(sum(pi) - 1) == 0
    got = np.array([float(p.subs(SUBS)) for p in pi])
    np.testing.assert_allclose(got, _numeric_pi(entries, 21, SUBS), rtol=0, atol=1e-12)
    # Product form of a closed cyclic network: pi(n) proportional to prod (1/rate_k)^n_k.
    w = np.array(
        [float(SUBS[a]) ** -s[0] * float(SUBS[b]) ** -s[1] * float(SUBS[c]) ** -s[2] for s in states]
    )
    np.testing.assert_allclose(got, w / w.sum(), rtol=1e-12)
    # pi of (5, 0, 0) exactly: a^-5 / sum over states.
    exact = (1 / a**5) / sum(1 / (a ** s[0] * b ** s[1] * c ** s[2]) for s in states)
    assert sympy.cancel(pi[states.index((5, 0, 0))] - exact) == 0


def test_reset_chain_21_states_three_symbols_matches_numpy():
    entries = _reset_chain(21)
    pi = steady_state_symbolic(entries, 21)
    got = np.array([float(p.subs(SUBS)) for p in pi])
    np.testing.assert_allclose(got, _numeric_pi(entries, 21, SUBS), rtol=0, atol=1e-12)
    assert abs(got.sum() - 1) < 1e-14


def test_rational_rates_give_exact_rationals():
    entries = {(0, 1): sympy.Rational(1, 3), (1, 2): 2, (2, 0): 0.1, (1, 0): sympy.Rational(5, 7), (2, 1): 1}
    pi = steady_state_symbolic(entries, 3)
    assert all(isinstance(p, sympy.Rational) for p in pi)
    assert sum(pi) == 1
    # Independent exact solve: SymPy's generic linear solver on [Q^T; 1].
    Q = _dense_generator(
        {k: sympy.Rational(repr(v)) if isinstance(v, float) else v for k, v in entries.items()}, 3
    )
    x = sympy.symbols("x0:3")
    sol = sympy.solve(list(sympy.Matrix([x]) * Q) + [sum(x) - 1], x, dict=True)[0]
    assert list(pi) == [sol[xi] for xi in x]


def test_floats_read_as_their_decimal():
    pi = steady_state_symbolic({(0, 1): 0.1, (1, 0): 0.3}, 2)
    assert list(pi) == [sympy.Rational(3, 4), sympy.Rational(1, 4)]
    pi = steady_state_symbolic({(0, 1): 0.1 * a, (1, 0): a}, 2)
    assert list(pi) == [sympy.Rational(10, 11), sympy.Rational(1, 11)]


def test_symbolic_branching_probabilities_fraction_field():
    w1, w2 = sympy.symbols("w1 w2", positive=True)
    entries = {(0, 1): a * w1 / (w1 + w2), (0, 2): a * w2 / (w1 + w2), (1, 0): b, (2, 0): c}
    pi = steady_state_symbolic(entries, 3)
    # Renewal-reward: mean sojourns 1/a, 1/b, 1/c visited with probabilities 1, p, q.
    p, q = w1 / (w1 + w2), w2 / (w1 + w2)
    sojourn = [1 / a, p / b, q / c]
    for got, s in zip(pi, sojourn):
        assert sympy.simplify(got - s / sum(sojourn)) == 0


def test_forms_and_fallback_agree():
    entries = _reset_chain(6)
    base = steady_state_symbolic(entries, 6)
    for other in (
        steady_state_symbolic(entries, 6, form="factor"),
        steady_state_symbolic(entries, 6, method="field"),
    ):
        assert all(sympy.cancel(x - y) == 0 for x, y in zip(base, other))


def test_non_polynomial_expressions():
    pi = steady_state_symbolic({(0, 1): sympy.exp(a), (1, 0): sympy.sqrt(2) * b}, 2)
    assert sympy.simplify(pi[0] - sympy.sqrt(2) * b / (sympy.sqrt(2) * b + sympy.exp(a))) == 0


def test_single_state_and_bad_input():
    assert list(steady_state_symbolic({}, 1)) == [1]
    with pytest.raises(InvalidParameterError, match="absorbing states"):
        steady_state_symbolic({(0, 1): a}, 2)
    with pytest.raises(InvalidParameterError, match="no transitions"):
        steady_state_symbolic({}, 2)
    with pytest.raises(InvalidParameterError, match="state indices"):
        steady_state_symbolic({(0, 5): a}, 2)
    with pytest.raises(InvalidParameterError, match="form"):
        steady_state_symbolic({(0, 1): a, (1, 0): b}, 2, form="simplify")


# ---- with the state space of a PetriNet --------------------------------------------
def _mm1k_net(K, arrive, serve):
    net = PetriNet(f"mm1{K}")
    net.place("queue")
    net.timed("arrive", rate=arrive, outputs={"queue": 1}, inhibitors={"queue": K})
    net.timed("serve", rate=serve, inputs={"queue": 1})
    return net


def test_mm13_net_symbolic_closed_form():
    net = _mm1k_net(3, lam, mu)
    space = net.state_space()
    pi = symbolic_steady_state(space, net)
    rho = lam / mu
    for row, p in zip(space.markings.tolist(), pi):
        j = row[0]
        assert sympy.simplify(p - rho**j * (1 - rho) / (1 - rho**4)) == 0
    Q = symbolic_generator(space, net)
    assert Q.shape == (4, 4)
    assert all(sympy.expand(sum(Q.row(i))) == 0 for i in range(4))
    for s, row in enumerate(space.markings.tolist()):
        k = row[0]
        for t, row2 in enumerate(space.markings.tolist()):
            k2 = row2[0]
            if k2 == k + 1:
                assert Q[s, t] == lam
            elif k2 == k - 1:
                assert Q[s, t] == mu


def test_net_with_symbolic_weights():
    w1, w2, al, be = sympy.symbols("w1 w2 alpha beta", positive=True)
    net = PetriNet("branch")
    for p, k in [("idle", 1), ("choice", 0), ("pa", 0), ("pb", 0)]:
        net.place(p, tokens=k)
    net.timed("work", rate=mu, inputs={"idle": 1}, outputs={"choice": 1})
    net.immediate("a", inputs={"choice": 1}, outputs={"pa": 1}, weight=w1)
    net.immediate("b", inputs={"choice": 1}, outputs={"pb": 1}, weight=w2)
    net.timed("fa", rate=al, inputs={"pa": 1}, outputs={"idle": 1})
    net.timed("fb", rate=be, inputs={"pb": 1}, outputs={"idle": 1})
    space = net.state_space()
    pi = symbolic_steady_state(space, net)
    names = net.place_names
    p, q = w1 / (w1 + w2), w2 / (w1 + w2)
    sojourn = {"idle": 1 / mu, "pa": p / al, "pb": q / be}
    total = sum(sojourn.values())
    for row, got in zip(space.markings.tolist(), pi):
        (where,) = [names[i] for i, k in enumerate(row) if k]
        assert sympy.simplify(got - sojourn[where] / total) == 0


def test_net_rational_rates_exact():
    net = _mm1k_net(2, 0.5, sympy.Rational(1, 3))
    space = net.state_space()
    pi = symbolic_steady_state(space, net)
    by_k = {row[0]: p for row, p in zip(space.markings.tolist(), pi)}
    assert by_k == {0: sympy.Rational(4, 19), 1: sympy.Rational(6, 19), 2: sympy.Rational(9, 19)}


def test_solve_symbolic_path():
    net = _mm1k_net(3, lam, mu)
    sol = petri_solve(net, symbolic=True)
    rho = lam / mu
    p0 = (1 - rho) / (1 - rho**4)
    assert sympy.simplify(sol.throughput("serve") - mu * (1 - p0)) == 0
    mean = sum(j * rho**j for j in range(4)) * p0
    assert sympy.simplify(sol.mean_tokens("queue") - mean) == 0


def test_float_probabilities_from_numeric_weights_are_recovered():
    net = PetriNet("branch")
    for p, k in [("idle", 1), ("choice", 0), ("pa", 0), ("pb", 0)]:
        net.place(p, tokens=k)
    net.timed("work", rate=1.0, inputs={"idle": 1}, outputs={"choice": 1})
    net.immediate("a", inputs={"choice": 1}, outputs={"pa": 1}, weight=1.0)
    net.immediate("b", inputs={"choice": 1}, outputs={"pb": 1}, weight=2.0)
    net.timed("fa", rate=1.0, inputs={"pa": 1}, outputs={"idle": 1})
    net.timed("fb", rate=1.0, inputs={"pb": 1}, outputs={"idle": 1})
    space = net.state_space()
    pi = symbolic_steady_state(space, net)
    names = net.place_names
    # Sojourns 1, 1/3, 2/3 (renewal-reward): pi = (1/2, 1/6, 1/3) exactly.
    want = {"idle": sympy.Rational(1, 2), "pa": sympy.Rational(1, 6), "pb": sympy.Rational(1, 3)}
    for row, got in zip(space.markings.tolist(), pi):
        (where,) = [names[i] for i, k in enumerate(row) if k]
        assert got == want[where]
