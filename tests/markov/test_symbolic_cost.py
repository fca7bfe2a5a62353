"""The exact steady state refuses, at once, chains whose symbolic solve would take too long (issue 13)."""

import math
import time
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
import sympy

from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.markov import (
    MAX_SYMBOLIC_CTMC_WORK,
    check_symbolic_ctmc,
    steady_state,
    steady_state_symbolic,
    symbolic_ctmc_work,
)
from queuesgd.petri.net import PetriNet

lam, mu = sympy.symbols("lambda mu", positive=True)


def birth_death(states, up, down):
    """M/M/1/K with K = states - 1: births ``up``, deaths ``down``."""
    entries = {}
    for i in range(states - 1):
        entries[(i, i + 1)] = up
        entries[(i + 1, i)] = down
    return entries


def mm1k_by_hand(rho: Fraction, states: int) -> list[Fraction]:
    # pi_j = rho^j (1 - rho) / (1 - rho^states), j = 0..states-1
    return [rho**j * (1 - rho) / (1 - rho**states) for j in range(states)]


def test_work_estimate_and_limit_by_hand():
    assert MAX_SYMBOLIC_CTMC_WORK == 500_000_000
    assert symbolic_ctmc_work(32, 2) == 31**4 * math.comb(33, 2) == 487_619_088  # allowed
    assert symbolic_ctmc_work(33, 2) == 32**4 * math.comb(34, 2) == 588_251_136  # refused
    assert symbolic_ctmc_work(150, 0) == 149**4  # rational rates: 492,884,401
    assert symbolic_ctmc_work(151, 0) == 150**4  # 506,250,000
    assert symbolic_ctmc_work(1, 7) == 0
    check_symbolic_ctmc(32, 2)
    check_symbolic_ctmc(150, 0)
    with pytest.raises(StateSpaceTooLargeError, match="at most 32 states with 2 symbols"):
        check_symbolic_ctmc(33, 2)
    with pytest.raises(StateSpaceTooLargeError, match="at most 150 states with 0 symbols"):
        check_symbolic_ctmc(151, 0)
    check_symbolic_ctmc(10**6, 5, max_work=None)
    with pytest.raises(InvalidParameterError, match="max_work"):
        check_symbolic_ctmc(3, 1, max_work=-1)


def test_just_under_the_limit_solves_and_matches_the_mm1k_closed_form():
    pi = steady_state_symbolic(birth_death(32, lam, mu), 32)  # work 487,619,088 <= 5e8
    # pi_j / pi_0 = (lambda / mu)^j, exactly
    assert all(sympy.cancel(p / pi[0] - (lam / mu) ** j) == 0 for j, p in enumerate(pi))
    subs = {lam: sympy.Rational(3, 2), mu: sympy.Rational(7, 3)}
    want = mm1k_by_hand(Fraction(9, 14), 32)
    assert [p.subs(subs) for p in pi] == [sympy.Rational(w.numerator, w.denominator) for w in want]


def test_just_over_the_limit_is_refused_at_once_with_the_numeric_road():
    entries = birth_death(33, lam, mu)  # work 588,251,136 > 5e8
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match="33-state chain in 2 symbols") as err:
        steady_state_symbolic(entries, 33)
    assert time.perf_counter() - start < 1.0  # generous: the estimate needs no symbolic work
    msg = str(err.value)
    assert "at most 32 states with 2 symbols" in msg
    assert "queuesgd.markov.steady_state" in msg and "max_work=None" in msg
    # the road it names: the numeric solver at lambda = 3/2, mu = 7/3 gives the closed form
    Q = sp.lil_matrix((33, 33))
    for (i, j), v in birth_death(33, 1.5, 7 / 3).items():
        Q[i, j] = v
        Q[i, i] -= v
    want = [float(w) for w in mm1k_by_hand(Fraction(9, 14), 33)]
    np.testing.assert_allclose(steady_state(Q.tocsr()), want, rtol=1e-10, atol=0)


def test_rational_rates_have_their_own_limit():
    rates = birth_death(151, sympy.Rational(3, 2), sympy.Rational(7, 3))
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match="151-state chain in 0 symbols.*at most 150 states"):
        steady_state_symbolic(rates, 151)
    assert time.perf_counter() - start < 1.0


def test_huge_chains_are_refused_before_their_entries_are_read():
    class Exploding(dict):
        def items(self):
            raise AssertionError("entries were read")

    with pytest.raises(StateSpaceTooLargeError, match="1,000,000-state chain"):
        steady_state_symbolic(Exploding(), 10**6)


def test_max_work_none_tries_anyway():
    pi = steady_state_symbolic(birth_death(33, lam, mu), 33, max_work=None)
    rho = sympy.Rational(9, 14)
    got = pi[32].subs({lam: sympy.Rational(3, 2), mu: sympy.Rational(7, 3)})
    assert got == rho**32 * (1 - rho) / (1 - rho**33)


def test_petri_net_symbolic_solve_is_guarded():
    def mm1k(capacity):
        net = PetriNet("mm1k")
        net.place("queue")
        net.timed("arrive", rate=lam, outputs={"queue": 1}, inhibitors={"queue": capacity})
        net.timed("serve", rate=mu, inputs={"queue": 1})
        return net

    with pytest.raises(StateSpaceTooLargeError, match="40-state chain in 2 symbols.*at most 32 states"):
        mm1k(39).solve(symbolic=True)
    # 4 markings: throughput of serve = mu (1 - pi_0), pi_0 = (1 - rho) / (1 - rho^4)
    x = mm1k(3).solve(symbolic=True).throughput("serve")
    rho = lam / mu
    assert sympy.cancel(x - mu * (1 - (1 - rho) / (1 - rho**4))) == 0
