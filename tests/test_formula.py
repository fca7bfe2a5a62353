"""Formula: printing, substitution, vectorized evaluation, limits and optima against calculus by hand."""

import math

import numpy as np
import pytest
import sympy

from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError
from queuesgd.formula import Formula

n, t, B, G, mu = sympy.symbols("n t B G mu", positive=True)


def ring_like() -> Formula:
    # n workers of step t, ring all-reduce of G bytes at B (no latency): X = n / (t + 2 (n-1)/n G/B)
    expr = n / (t + 2 * (n - 1) / n * G / B)
    return Formula(expr, {"n": n, "t": t, "B": B, "G": G}, {"n": "workers", "t": "s"}, "ring")


def test_evaluate_broadcasts_and_matches_direct_arithmetic():
    f = ring_like()
    ns = np.array([1, 2, 8, 64])
    got = f.evaluate(n=ns, t=0.1, B="10Gbit/s", G="100MB")
    want = ns / (0.1 + 2 * (ns - 1) / ns * 100e6 / 1.25e9)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    grid = f.evaluate(n=ns[:, None], t=0.1, B=np.array([1.25e9, 1.25e10])[None, :], G=100e6)
    assert grid.shape == (4, 2)


def test_harmonic_evaluates_exactly():
    f = Formula(n * mu / sympy.harmonic(n), {"n": n, "mu": mu}, {}, "sync")
    for k in (1, 5, 100, 1000):
        assert f.evaluate(n=k, mu=2.0) == pytest.approx(k * 2.0 / math.fsum(1 / i for i in range(1, k + 1)))


def test_limit_and_symbolic_optimum_by_hand():
    f = ring_like()
    # n -> oo: n / (t + 2G/B) grows without bound
    assert f.limit("n") == sympy.oo
    # a cost growing like n^2 gives a finite optimum: d/dn [n / (t + a n^2)] = 0 at n = sqrt(t/a)
    a = sympy.Symbol("a", positive=True)
    g = Formula(n / (t + a * n**2), {"n": n, "t": t, "a": a}, {}, "quad")
    best = g.optimize("n")
    assert sympy.simplify(best.argmax - sympy.sqrt(t / a)) == 0 and best.interior
    # X'' at sqrt(t/a), by hand: -sqrt(a) / (2 t^(3/2)) < 0; X there: sqrt(t/a) / (2 t)
    assert sympy.simplify(best.maximum - sympy.sqrt(t / a) / (2 * t)) == 0
    assert g.optimize("n", t=1.0, a=0.01).argmax == 10


def test_numeric_optimum_over_a_continuous_symbol():
    T = sympy.Symbol("T", positive=True)
    f = Formula(T * sympy.exp(-T), {"T": T}, {}, "x")  # max at T = 1
    best = f.optimize("T", upper=50)
    assert best.argmax == pytest.approx(1.0, abs=1e-6) and best.maximum == pytest.approx(
        math.exp(-1), rel=1e-12
    )
    assert best.interior and best.lower == 0 and best.upper == 50


def test_subs_latex_and_str():
    f = ring_like().subs(t="100ms", G=1e8)
    assert set(f.free_names) == {"B", "n"}
    assert f.latex().startswith("X = ")
    assert "workers" in str(f)


def test_errors_name_the_symbol():
    f = ring_like()
    with pytest.raises(UnknownNameError, match="symbol"):
        f.subs(q=1)
    with pytest.raises(InvalidParameterError, match="evaluate"):
        f.evaluate(n=2)
    with pytest.raises(InvalidParameterError, match="n"):
        f.subs(n="10ms")  # no unit strings for a count
    with pytest.raises(InvalidParameterError, match="Formula.symbols"):
        Formula(n * t, {"n": n}, {}, "bad")
    h = Formula(n * sympy.exp(-n) + sympy.harmonic(n), {"n": n}, {}, "x")
    # dX/dn = 0 is not polynomial in n: no symbolic road; n is the only symbol, so every integer is tried
    best = h.optimize("n")
    assert "numeric search, not symbolic: dX/dn = 0 is not a polynomial equation in n" in best.evidence
    # X(k + 1) - X(k) = 1/(k+1) - k e^-k + (k+1) e^-(k+1) > 0: increasing, the largest at the search bound
    assert (best.argmax, best.interior, best.monotone) == (100_000, False, "increasing")
    assert best.maximum == pytest.approx(math.fsum(1 / k for k in range(1, 100_001)), rel=1e-12)


def test_a_minimum_is_not_reported_as_the_optimum():
    # X = (n - 2)^2 + 1 has one stationary point, n = 2, a minimum: no interior maximum
    f = Formula((n - 2) ** 2 + 1, {"n": n}, {}, "bowl")
    with pytest.raises(NotRepresentable, match="interior maximum"):
        f.optimize("n")


def test_finite_sum_with_a_symbolic_bound_evaluates_elementwise():
    j, x = sympy.symbols("j x", positive=True)
    f = Formula(sympy.Sum(x**j / j, (j, 1, n)), {"n": n, "x": x, "j": j}, {}, "partial log series")
    got = f.evaluate(n=np.array([1, 2, 3]), x=0.5)
    np.testing.assert_allclose(got, [0.5, 0.625, 0.625 + 0.125 / 3], rtol=1e-15)
