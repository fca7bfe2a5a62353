"""Formula hardening (issue 13): verified optima, symbol domains, a limit target that is never evaluated.

Every number is computed by hand here from the formula written out in plain Python.
"""

import math
import os
import time

import numpy as np
import pytest
import sympy

import queuesgd as q
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.formula import Formula

n, a, t = sympy.symbols("n a t", positive=True)

# The ring: t = 0.128 s, S = 100 MB, B = 10 Gbit/s, no latency, 32 samples per step.
RING = {"t": 0.128, "S": 1e8, "B": 1.25e9, "alpha": 0.0, "u": 0.0, "m": 32}


def ring_by_hand(k: float) -> float:
    # X(n) = m n / (t + u + 2 (n-1)/n S/B + 2 (n-1) alpha)
    return 32 * k / (0.128 + 2 * (k - 1) / k * 1e8 / 1.25e9)


# ---- optimize: never a minimum, never a silent search bound ----------------------------------------
def test_ring_stationary_point_is_a_minimum_and_is_refused():
    # the issue: X(1) = 250 but X(1.11) = 246.9 -- the stationary point n* = 4S/B / (t + 2S/B) is a minimum
    n_star = 4 * 1e8 / 1.25e9 / (0.128 + 2 * 1e8 / 1.25e9)
    assert ring_by_hand(1) == pytest.approx(250.0)
    assert ring_by_hand(n_star) == pytest.approx(246.9, abs=0.05)
    assert ring_by_hand(n_star) < min(ring_by_hand(n_star - 0.05), ring_by_hand(n_star + 0.05))
    g = q.derive(q.RingAllReduce(), compute="deterministic")
    with pytest.raises(NotRepresentable, match="not proved to be a maximum") as err:
        g.optimize("n")
    assert "a minimum, not a maximum" in str(err.value)


def test_ring_numeric_optimum_says_the_bound_is_not_an_optimum():
    g = q.derive(q.RingAllReduce(), compute="deterministic")
    best = g.optimize("n", **RING)
    # X(1) = 250 < X(2) = 64 / 0.208 = 307.7 and X rises from there on: monotone over the integers
    assert ring_by_hand(2) == pytest.approx(64 / 0.208)
    assert (best.argmax, best.interior, best.monotone) == (100_000, False, "increasing")
    assert best.maximum == pytest.approx(ring_by_hand(100_000), rel=1e-12)
    assert str(best).startswith("no interior maximum on [1, 100000] (X is increasing)")
    smaller = g.optimize("n", upper=50, **RING)
    assert (smaller.argmax, smaller.interior) == (50, False)


def test_sync_ps_optimum_over_n_is_the_bound_and_says_so():
    f = q.derive(q.SyncPS())
    vals = dict(mu=10, m=32, G=1e8, P=1e8, B=1.25e9, alpha=0, u=0, s=1)
    best = f.optimize("n", **vals)
    h = math.fsum(1 / k for k in range(1, 100_001))
    by_hand = 32 * 100_000 / (h / 10 + 100_000 * 2e8 / 1.25e9)  # X = m n / (H_n/mu + n (G+P)/(B s))
    assert (best.argmax, best.interior, best.monotone) == (100_000, False, "increasing")
    assert best.maximum == pytest.approx(by_hand, rel=1e-12)
    assert best.maximum < 32 * 1.25e9 / 2e8  # below the link cap m B s / (G + P) = 200


def test_interior_integer_maximum_with_its_neighbours():
    f = Formula(n / (1 + a * n**2), {"n": n, "a": a}, {}, "x")
    best = f.optimize("n", a=0.01)
    # X(9) = 9/1.81, X(10) = 10/2, X(11) = 11/2.21
    assert (best.argmax, best.maximum, best.interior) == (10, 5.0, True)
    assert "X(9) = 4.972 <= X(10) = 5 >= X(11) = 4.977" in best.evidence
    assert 9 / 1.81 < 5.0 > 11 / 2.21


def test_continuous_monotone_interval_is_not_an_interior_maximum():
    T = sympy.Symbol("T", positive=True)
    f = Formula(T * sympy.exp(-T), {"T": T}, {}, "x")  # d/dT = (1 - T) e^-T < 0 for T > 1
    best = f.optimize("T", lower=2, upper=50)
    assert (best.argmax, best.interior, best.monotone) == (2.0, False, "decreasing")
    assert best.maximum == pytest.approx(2 * math.exp(-2), rel=1e-14)


def test_symbolic_maximum_is_proved_and_two_maxima_are_refused():
    f = Formula(n / (1 + a * n**2), {"n": n, "a": a}, {}, "x")
    best = f.optimize("n")
    # by hand: X' = (1 - a n^2)/(1 + a n^2)^2 = 0 at 1/sqrt(a); X'' there = -sqrt(a)/2 < 0; X = 1/(2 sqrt(a))
    assert sympy.simplify(best.argmax - 1 / sympy.sqrt(a)) == 0
    assert sympy.simplify(best.maximum - 1 / (2 * sympy.sqrt(a))) == 0
    assert "-sqrt(a)/2 < 0" in best.evidence
    # -((n-1)(n-3))^2 has maxima at n = 1 and n = 3 (X'' = -8 at both) and a minimum at n = 2
    two = Formula(-(((n - 1) * (n - 3)) ** 2) * t, {"n": n, "t": t}, {}, "w")
    with pytest.raises(NotRepresentable, match="which is the largest depends"):
        two.optimize("n")


def test_a_local_maximum_beside_a_minimum_is_not_the_maximum():
    # audit 2026-11-28: X = n^3/3 - 5n^2/2 + 4n + 10 has X' = (n - 1)(n - 4): a maximum at 1 (X = 71/6)
    # and a minimum at 4, past which X grows without bound (X(10) = 400/3 by hand); optimize returned
    # n = 1 as "the only stationary point"
    cubic = Formula(n**3 / 3 - sympy.Rational(5, 2) * n**2 + 4 * n + 10, {"n": n}, {}, "x")
    assert 1000 / 3 - 250 + 40 + 10 == pytest.approx(400 / 3) and 400 / 3 > 71 / 6
    why = r"n = 1 is a local maximum .* not the only stationary point \(n = 4"
    with pytest.raises(NotRepresentable, match=why):
        cubic.optimize("n")
    best = cubic.optimize("n", upper=10)  # the numeric road says where the largest value is
    assert (best.argmax, best.interior) == (10, False)


def test_a_stationary_maximum_past_a_pole_is_not_the_maximum():
    # X = -(n - 5)^2 - 1/(n - 1): X' = 0 only near n = 5.03 (2 (5 - n)(n - 1)^2 + 1 = 0 has one real root),
    # a maximum there, but X -> +inf as n -> 1 from below
    f = Formula(-((n - 5) ** 2) - 1 / (n - 1), {"n": n}, {}, "x")
    assert len(sympy.Poly(2 * (5 - n) * (n - 1) ** 2 + 1, n).real_roots()) == 1
    with pytest.raises(NotRepresentable, match="denominator vanishes at n = 1 > 0"):
        f.optimize("n")


# ---- optimize: the symbolic road is bounded in time -------------------------------------------------
def test_hierarchical_stationary_point_is_judged_in_bounded_time():
    # simplify of d2X/dn2 at n* ran for minutes before the bound. By hand, with
    # A = -2 alpha + 2 alpha_i (g - 1) + t + u + 2 S (g - 1)/(B_i g): X = m n / D(n), D = A + 2 S/B +
    # 2 alpha n/g - 2 S g/(B n), and D - n D' = A + 2 S/B - 4 S g/(B n) vanishes at n* = 4 S g/(B A + 2 S),
    # rising through 0 there: X' = (D - n D')/D^2 goes from - to +, a minimum.
    f = q.derive(q.HierarchicalAllReduce(), compute="deterministic")
    start = time.perf_counter()
    with pytest.raises(NotRepresentable, match="the only stationary point n = ") as err:
        f.optimize("n")
    assert time.perf_counter() - start < 30.0  # about 0.5 s; minutes before the bound
    assert "a minimum, not a maximum" in str(err.value)
    text = str(err.value).split("stationary point n = ")[1].split(" is not proved")[0]
    root = sympy.sympify(text, locals=dict(f.symbols))
    vals = dict(S=1e8, B=1.25e9, B_intra=1e10, alpha=1e-4, alpha_intra=1e-6, g=4, t=0.1, u=0.01)
    A = -2e-4 + 2e-6 * 3 + 0.1 + 0.01 + 2e8 * 3 / (1e10 * 4)
    n_star = 4 * 1e8 * 4 / (1.25e9 * A + 2e8)
    assert float(root.subs({f.symbols[k]: v for k, v in vals.items()})) == pytest.approx(n_star, rel=1e-12)


def test_large_formula_is_refused_at_once_and_the_numeric_road_works():
    f = q.derive("async-ps", workers=4)  # a rational function of degree 4 in the demands: 805 operations
    start = time.perf_counter()
    with pytest.raises(NotRepresentable, match=r"no symbolic optimum attempted: the throughput has 805 op"):
        f.optimize("mu")
    assert time.perf_counter() - start < 2.0  # the size is counted, nothing is solved
    # the numeric road it names: a closed network's throughput never falls when a station gets faster
    best = f.optimize("mu", lower=1, upper=100, m=32, G=1e7, P=1e7, B=1.25e9, alpha=0, u=0)
    assert (best.argmax, best.interior, best.monotone) == (100.0, False, "increasing")


def test_non_polynomial_equation_is_not_solved():
    f = q.derive(q.SyncPS())  # H_n / mu in the round time: dX/dn involves H_n and its derivative
    start = time.perf_counter()
    with pytest.raises(NotRepresentable, match=r"not a polynomial equation in n \(it involves harmonic\(n\)"):
        f.optimize("n")
    assert time.perf_counter() - start < 2.0
    # a factor SymPy proves positive does not count: d/dT T e^-T = (1 - T) e^-T, X''(1) = -1/e
    T = sympy.Symbol("T", positive=True)
    best = Formula(T * sympy.exp(-T), {"T": T}, {}, "x").optimize("T")
    assert (best.argmax, best.interior) == (1, True) and best.maximum == sympy.exp(-1)
    assert "d2X/dT2 = -exp(-1) < 0" in best.evidence


def test_high_degree_falls_back_to_the_numeric_search_when_it_is_complete():
    T, c = sympy.symbols("T c", positive=True)
    # d/dT T/(c + T^6) = (c - 5 T^6)/(c + T^6)^2: degree 6, no formula; with c free it is refused
    with pytest.raises(NotRepresentable, match="degree 6 in T.*pass values for the other symbols \\(c\\)"):
        Formula(T / (c + T**6), {"T": T, "c": c}, {}, "x").optimize("T")
    # with T alone the numeric search covers everything: T* = 5^(-1/6), X* = T*/(1 + T*^6) = 5/6 T*
    best = Formula(T / (1 + T**6), {"T": T}, {}, "x").optimize("T")
    t_star = 5 ** (-1 / 6)
    assert best.interior and best.argmax == pytest.approx(t_star, rel=1e-6)
    assert best.maximum == pytest.approx(5 / 6 * t_star, rel=1e-12)
    assert "numeric search, not symbolic: dX/dT = 0 is a polynomial equation of degree 6" in best.evidence
    assert (best.lower, best.upper) == (0.0, 100_000.0)


def test_numeric_search_over_a_rate_starts_above_zero():
    mu_ = sympy.Symbol("mu", positive=True)
    f = Formula(mu_ * sympy.exp(-mu_) * n, {"mu": mu_, "n": n}, {}, "x")  # mu > 0: X(0) is not a value
    best = f.optimize("mu", n=2)  # d/dmu = (1 - mu) e^-mu n: the maximum 2/e at mu = 1
    assert best.lower == pytest.approx(1e-4) and best.interior
    assert best.argmax == pytest.approx(1.0, abs=1e-6)
    assert best.maximum == pytest.approx(2 / math.e, rel=1e-12)


def test_optimize_bounds_are_checked():
    f = Formula(n / (1 + a * n**2), {"n": n, "a": a}, {}, "x")
    with pytest.raises(InvalidParameterError, match="^upper: got 1; accepted: a finite number > lower = 1"):
        f.optimize("n", a=0.01, upper=1)
    with pytest.raises(InvalidParameterError, match="^upper: got 10.5; accepted: an integer >= 1"):
        f.optimize("n", a=0.01, upper=10.5)
    with pytest.raises(InvalidParameterError, match="^lower: got 0; accepted: an integer >= 1"):
        f.optimize("n", a=0.01, lower=0)
    with pytest.raises(InvalidParameterError, match=r"^optimize: got \[\]; accepted: values for \['a'\]"):
        f.optimize("n", upper=10)
    with pytest.raises(InvalidParameterError, match="^upper: .*at most 10,000,000 integers"):
        f.optimize("n", a=0.01, upper=10**8)


def test_cli_derive_optimize_never_prints_a_minimum(capsys):
    assert main(["derive", "ring-allreduce", "--compute", "deterministic", "--optimize", "n"]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("optimal n: none verified: the only stationary point n = 4*S/")
    assert "a minimum, not a maximum" in last


# ---- evaluate: domains ------------------------------------------------------------------------------
SYNC = dict(mu=10, m=32, G=1e8, P=1e8, B=1.25e9, alpha=0, u=0, s=1)


@pytest.mark.parametrize("bad", [-4, 0, 2.5, math.nan, math.inf, True])
def test_workers_must_be_a_positive_integer(bad):
    f = q.derive(q.SyncPS())
    with pytest.raises(InvalidParameterError, match=r"^n: got .*; accepted: an integer >= 1 \(workers\)"):
        f.evaluate(n=bad, **SYNC)


def test_a_bad_element_of_an_array_is_named():
    f = q.derive(q.SyncPS())
    with pytest.raises(InvalidParameterError, match=r"^n: got -4.0; accepted: an integer >= 1"):
        f.evaluate(n=np.array([1, 2, -4, 8]), **SYNC)
    with pytest.raises(
        InvalidParameterError, match=r"^G: got -1.0; accepted: a number >= 0 \(gradient bytes\)"
    ):
        f.evaluate(n=8, **{**SYNC, "G": np.array([1e6, -1.0])})


@pytest.mark.parametrize(("name", "bad", "accepted"), [
    ("mu", 0, "a number > 0"), ("B", -1.25e9, "a number > 0"), ("P", -1, "a number >= 0"),
    ("alpha", -1e-3, "a number >= 0"), ("s", 0, "an integer >= 1"), ("m", 1.5, "an integer >= 1"),
])  # fmt: skip
def test_sizes_rates_and_counts_outside_their_domain(name, bad, accepted):
    f = q.derive(q.SyncPS())
    with pytest.raises(InvalidParameterError, match=rf"^{name}: got {bad!r}; accepted: {accepted}"):
        f.evaluate(n=8, **{**SYNC, name: bad})


def test_values_on_the_domain_edge_are_accepted_and_exact():
    f = q.derive(q.SyncPS())
    # alpha = u = 0: X(8) = 256 / (H_8/10 + 8 * 2e8 / 1.25e9)
    h8 = math.fsum(1 / k for k in range(1, 9))
    assert f.evaluate(n=8, **SYNC) == pytest.approx(256 / (h8 / 10 + 8 * 2e8 / 1.25e9), rel=1e-14)
    backup = q.derive(q.BackupWorkers(backups=1, stragglers="cancel"), compute="deterministic")
    vals = dict(n=4, t=0.1, m=32, G=0, P=0, B=1.25e9, alpha=0, u=0, s=1)
    # b = 0 backups, no communication: every round takes t, 4 gradients of 32 samples: 1280 samples/s
    assert backup.evaluate(b=0, **vals) == pytest.approx(1280.0, rel=1e-14)
    with pytest.raises(InvalidParameterError, match=r"^b: got -1; accepted: an integer >= 0"):
        backup.evaluate(b=-1, **vals)


def test_subs_checks_numbers_and_keeps_expressions():
    f = q.derive(q.SyncPS())
    with pytest.raises(InvalidParameterError, match="^n: got -1"):
        f.subs(n=-1)
    s = f.symbols["s"]  # an expression is kept as it is: n = 2 s workers
    assert f.subs(n=2 * s).expr.has(s) and not f.subs(n=2 * s).expr.has(f.symbols["n"])


# ---- limit: the target string is parsed, never evaluated --------------------------------------------
@pytest.mark.parametrize("code", [
    "exec(\"open('{p}', 'w').write('x')\")",
    "__import__('os').system('touch {p}')",
    "open('{p}', 'w')",
    "Symbol('x').__class__",
    "1 + 1",
])  # fmt: skip
def test_limit_target_is_never_evaluated(tmp_path, code):
    path = tmp_path / "written"
    f = Formula(n / (t + n), {"n": n, "t": t}, {}, "x")
    with pytest.raises(InvalidParameterError, match="^limit.to: .*accepted: 'oo', '-oo', a number"):
        f.limit("n", to=code.format(p=path))
    assert not path.exists()
    assert not os.listdir(tmp_path)


def test_limit_targets_by_hand():
    f = Formula(n / (t + n), {"n": n, "t": t}, {}, "x")
    assert f.limit("n") == 1 and f.limit("n", to="oo") == 1 and f.limit("n", to=math.inf) == 1
    assert f.limit("n", to="-oo") == 1
    assert f.limit("n", to="t") == sympy.Rational(1, 2)  # t / 2t
    assert f.limit("n", to="2") == 2 / (t + 2)
    assert f.limit("n", to="0.5") == sympy.Rational(1, 2) / (t + sympy.Rational(1, 2))
    assert f.limit("n", to=3) == 3 / (t + 3)
    for bad in ("t + 1", "nan", "", math.nan, [1]):
        with pytest.raises(InvalidParameterError, match="^limit.to"):
            f.limit("n", to=bad)


# ---- cost guards: fail fast, say the limit and the numeric road ------------------------------------
@pytest.mark.parametrize("workers", [17, 60, 500])
def test_async_ps_formula_refuses_large_populations_fast(workers):
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match=f"workers={workers}.*at most 16 workers") as err:
        q.AsyncPS().formula(workers=workers)
    assert time.perf_counter() - start < 1.0
    assert f"{2 * math.comb(workers + 3, 3):,} terms" in str(err.value)  # C(N+3, 3) monomials, twice
    assert "queuesgd.predict(AsyncPS()" in str(err.value)
    with pytest.raises(StateSpaceTooLargeError, match="at most 16 workers"):
        q.derive("async-ps", workers=workers)


def test_cli_derive_async_ps_at_500_workers_is_one_error_line(capsys):
    start = time.perf_counter()
    assert main(["derive", "async-ps", "--workers", "500"]) == 2
    assert time.perf_counter() - start < 2.0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("queuesgd: error: AsyncPS.formula(workers=500)")


def test_the_public_searches_refuse_an_empty_or_unreadable_interval():
    # audit 2026-11-28: integer_search(fn, "n", 5, 1) raised IndexError; continuous_search accepted
    # reversed and NaN bounds
    from queuesgd.optimum import continuous_search, integer_search

    with pytest.raises(InvalidParameterError, match=r"^upper: got 1; accepted: an integer >= 6"):
        integer_search(lambda k: k, "n", 5, 1)
    with pytest.raises(InvalidParameterError, match=r"^lower: got 2.5"):
        integer_search(lambda k: k, "n", 2.5, 10)
    with pytest.raises(InvalidParameterError, match=r"^upper: got 1.0; accepted: a finite number > lower"):
        continuous_search(lambda x: x, "T", 5.0, 1.0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError, match=r"^lower: got"):
            continuous_search(lambda x: x, "T", bad, 1.0)


def test_integers_past_the_float_range_are_refused_naming_the_symbol():
    # audit 2026-11-28: evaluate(n=10**400) raised OverflowError; Erlang(10**400) was built, then its mean
    # raised OverflowError
    from queuesgd.distributions import Erlang

    f = Formula(n / t, {"n": n, "t": t}, {}, "x")
    with pytest.raises(InvalidParameterError, match=r"^n: got an integer of 401 digits"):
        f.evaluate(n=10**400, t=1.0)
    with pytest.raises(InvalidParameterError, match=r"^Erlang.k: got an integer of 401 digits"):
        Erlang(10**400, rate=1.0)
    assert Erlang(2**53, rate=2.0).mean == 2.0**52
