"""Bad input to queuesgd.orderstats: refused naming the field, before any work; good input keeps its value.

Found by an input-fuzzing audit (findings 2, 8, 17 part): ``expected_order_statistics(Exponential(1.0),
n=10**8)`` ran past 30 s and could not be interrupted; ``blom(0, 1, 10**18)`` was inf and ``blom(nan, -1,
5)`` nan; ``exponential_order_statistic(-1.0, 3)`` was -1.83 and ``(2.0, True)`` 0.5; ``harmonic`` truncated
1.5 to 1 and clamped -1 to 0 (``None`` and NaN raised IndexError); ``n = 10**400`` raised OverflowError
and ``n = 2**63`` gave ``[]``; ``order_statistic_cdf(law, "3", n=2)`` read 3; ``expected_from_cdf``,
``integration_range`` and ``group_laws`` checked no types. The good inputs are compared with closed
forms: harmonic numbers as exact fractions, the exponential order statistics' ``sum 1 / (lambda (n - i +
1))``, mpmath's inverse normal CDF for Blom's formula.
"""

import math
from fractions import Fraction
from itertools import accumulate

import mpmath as mp
import numpy as np
import pytest
import sympy

from queuesgd._checks import MAX_COUNT
from queuesgd.distributions import Exponential, Normal
from queuesgd.errors import InvalidParameterError
from queuesgd.orderstats import (
    MAX_N,
    blom,
    expected_from_cdf,
    expected_max,
    expected_order_statistic,
    expected_order_statistics,
    exponential_order_statistic,
    group_laws,
    harmonic,
    integration_range,
    order_statistic_cdf,
)

MU, NS = sympy.symbols("mu n", positive=True)
E1 = Exponential(1.0)


def _uniform(y):
    return np.clip(y, 0.0, 1.0)


BAD = [
    # (call, field)
    (lambda: harmonic(1.5), "harmonic.n"),
    (lambda: harmonic(-1), "harmonic.n"),
    (lambda: harmonic(np.array([1.5, -1.0])), "harmonic.n"),
    (lambda: harmonic(None), "harmonic.n"),
    (lambda: harmonic(float("nan")), "harmonic.n"),
    (lambda: harmonic(10**400), "harmonic.n"),
    (lambda: harmonic("3"), "harmonic.n"),
    (lambda: harmonic(True), "harmonic.n"),
    (lambda: harmonic([1, "2"]), "harmonic.n"),
    (lambda: exponential_order_statistic(-1.0, 3), "rate"),
    (lambda: exponential_order_statistic(0, 3), "rate"),
    (lambda: exponential_order_statistic(None, 3), "rate"),
    (lambda: exponential_order_statistic(float("inf"), 3), "rate"),
    (lambda: exponential_order_statistic("abc", 3), "rate"),
    (lambda: exponential_order_statistic(2.0, True), "n"),
    (lambda: exponential_order_statistic(2.0, 4.5), "n"),
    (lambda: exponential_order_statistic(2.0, 10**400), "n"),
    (lambda: exponential_order_statistic(2.0, MAX_N + 2), "n"),
    (lambda: exponential_order_statistic(2.0, 3, 2.5), "k"),
    (lambda: exponential_order_statistic(2.0, np.array([3, 4]), np.array([1, 2, 3])), "k"),
    (lambda: exponential_order_statistic(MU, -3), "n"),
    (lambda: exponential_order_statistic(MU, 4, 5), "k"),
    (lambda: exponential_order_statistic(-1.0, NS), "rate"),
    (lambda: blom(0.0, 1.0, 10**18), "n"),
    (lambda: blom(0.0, 1.0, 10**400), "n"),
    (lambda: blom(float("nan"), 1.0, 5), "mean"),
    (lambda: blom(float("inf"), 1.0, 5), "mean"),
    (lambda: blom("a", 1.0, 5), "mean"),
    (lambda: blom(0.0, -1.0, 5), "std"),
    (lambda: blom(0.0, None, 5), "std"),
    (lambda: blom(0.0, [1.0], 5), "std"),
    (lambda: blom(0.0, 1.0 + 2j, 5), "std"),
    (lambda: expected_max(E1, 10**400), "n"),
    (lambda: expected_max(Normal(0.0, 1.0), 10**400), "n"),
    (lambda: expected_max(E1, 2**63), "n"),
    (lambda: expected_order_statistic(E1, k=1, n=2**63), "n"),
    (lambda: expected_order_statistics(E1, n=2**63), "n"),
    (lambda: expected_order_statistics(E1, n=MAX_COUNT + 1), "n"),
    (lambda: expected_order_statistics([E1] * (MAX_COUNT + 1)), "laws"),
    (lambda: order_statistic_cdf(E1, "3", n=2), "x"),
    (lambda: order_statistic_cdf(E1, True, n=2), "x"),
    (lambda: order_statistic_cdf(E1, [1.0, "2"], n=2), "x"),
    (lambda: order_statistic_cdf(E1, 10**400, n=2), "x"),
    (lambda: order_statistic_cdf(E1, 1.0, n=10**400), "n"),
    (lambda: order_statistic_cdf(E1, 1.0, n=2**63), "n"),
    (lambda: expected_from_cdf(None, 0.0, 1.0), "cdf"),
    (lambda: expected_from_cdf(3.0, 0.0, 1.0), "cdf"),
    (lambda: expected_from_cdf(_uniform, True, 1.0), "lo"),
    (lambda: expected_from_cdf(_uniform, "0", 1.0), "lo"),
    (lambda: expected_from_cdf(_uniform, 10**400, 1.0), "lo"),
    (lambda: expected_from_cdf(_uniform, 0.0, np.array([3.0])), "hi"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, None), "points"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, 3.0), "points"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, "abc"), "points"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, ""), "points"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, {}), "points"),
    (lambda: expected_from_cdf(_uniform, 0.0, 1.0, [float("nan")]), "points"),
    (lambda: integration_range("abc"), "laws"),
    (lambda: integration_range(None), "laws"),
    (lambda: integration_range(3), "laws"),
    (lambda: integration_range([]), "laws"),
    (lambda: integration_range([E1, "x"]), "laws[1]"),
    (lambda: integration_range([Exponential(MU)]), "Exponential.rate"),
    (lambda: group_laws(None), "laws"),
    (lambda: group_laws(3), "laws"),
    (lambda: group_laws("abc"), "laws"),
    (lambda: group_laws(E1), "laws"),
    (lambda: group_laws({E1}), "laws"),
]


@pytest.mark.parametrize(("call", "field"), BAD)
def test_bad_input_is_refused_naming_the_field(call, field):
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: got ")


# ---- the same numbers as before for the good inputs -------------------------------------------------------
def _h(n: int) -> Fraction:
    return sum((Fraction(1, i) for i in range(1, n + 1)), Fraction(0))


def test_harmonic_numbers_are_the_exact_sums():
    ns = [0, 1, 2, 3, 10, 63, 64, 65, 100, 1000]
    assert [harmonic(n) for n in ns] == pytest.approx([float(_h(n)) for n in ns], rel=1e-14, abs=0)
    assert harmonic(np.array(ns)).tolist() == [harmonic(n) for n in ns]
    assert harmonic(4.0) == harmonic(np.int64(4)) == harmonic(np.float32(4.0)) == pytest.approx(25 / 12)
    assert harmonic(10**7) == pytest.approx(float(mp.harmonic(10**7)), rel=1e-15)
    assert harmonic(2**63) == pytest.approx(float(mp.harmonic(mp.mpf(2) ** 63)), rel=1e-15)
    assert harmonic(NS) == sympy.harmonic(NS)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1024])
def test_exponential_order_statistics_are_sums_of_exponential_gaps(n):
    # Renyi: E[X_(k:n)] = sum_{i=1}^{k} 1 / (lambda (n - i + 1))
    lam = 2.5
    exact = [float(s) for s in accumulate(Fraction(1, n - i + 1) / Fraction(lam) for i in range(1, n + 1))]
    assert expected_order_statistics(Exponential(lam), n=n) == pytest.approx(exact, rel=1e-14)
    assert exponential_order_statistic(lam, n, np.arange(1, n + 1)) == pytest.approx(exact, rel=1e-14)
    assert exponential_order_statistic(lam, float(n)) == pytest.approx(exact[-1], rel=1e-14)
    assert expected_max(Exponential(lam), n) == pytest.approx(exact[-1], rel=1e-14)


def test_the_largest_accepted_counts_keep_their_closed_forms():
    every = expected_order_statistics(E1, n=MAX_COUNT)  # the cap itself is accepted
    assert every.shape == (MAX_COUNT,)
    assert every[0] == pytest.approx(1 / MAX_COUNT, rel=1e-14)
    assert every[-1] == pytest.approx(float(mp.harmonic(MAX_COUNT)), rel=1e-14)
    with mp.workdps(40):  # the closed form at n = MAX_N and at the documented n = 1e15, k > 1e5
        for n, k in [(MAX_N, MAX_N), (MAX_N, 1), (10**15, 10**5 + 1)]:
            ref = (mp.harmonic(n) - mp.harmonic(n - k)) / 2
            assert exponential_order_statistic(2.0, n, k) == pytest.approx(float(ref), rel=1e-14)
    assert exponential_order_statistic(MU, NS) == sympy.harmonic(NS) / MU
    assert sympy.simplify(exponential_order_statistic(MU, 4, 2) - sympy.Rational(7, 12) / MU) == 0


@pytest.mark.parametrize("n", [1, 2, 5, 10, 100, 1024, 10**6, 10**12, MAX_N])
def test_blom_is_the_inverse_normal_cdf_of_its_plotting_position(n):
    # Phi^-1((k - 3/8) / (n + 1/4)) in mpmath at 40 digits; the upper tail, once 1.7e-6 off at n = 1e12
    # and inf at 2**53, is taken from the lower one.
    with mp.workdps(40):
        for k in sorted({1, max(1, n // 2), n}):
            p = (mp.mpf(k) - mp.mpf(3) / 8) / (mp.mpf(n) + mp.mpf(1) / 4)
            ref = float(3.0 + 0.5 * mp.sqrt(2) * mp.erfinv(2 * p - 1))
            assert blom(3.0, 0.5, n, k) == pytest.approx(ref, rel=1e-15, abs=1e-15)
    assert blom(2.0, 0.0, n) == 2.0


def test_order_statistic_cdf_and_expected_from_cdf_keep_their_values():
    x = np.array([0.0, 0.5, 1.0, 3.0, np.inf])
    assert order_statistic_cdf(E1, x, n=2) == pytest.approx((1 - np.exp(-x)) ** 2, rel=1e-14, abs=0)
    assert float(order_statistic_cdf(E1, np.int64(1), n=2.0)) == pytest.approx((1 - math.exp(-1)) ** 2)
    assert order_statistic_cdf(E1, [], n=2).shape == (0,)
    for points in ((), [0.5], np.array([0.25, 0.75]), (0.5, math.inf)[:1]):
        assert expected_from_cdf(_uniform, 0.0, 1.0, points) == pytest.approx(0.5, rel=1e-12)
    assert expected_from_cdf(lambda y: np.clip((y - 2) / 3, 0, 1), 2, np.int64(5)) == pytest.approx(3.5)


def test_group_laws_and_integration_range_keep_their_results():
    assert group_laws(Exponential(r) for r in (1.0, 2.0, 1.0)) == [(E1, 2), (Exponential(2.0), 1)]
    assert group_laws((E1, E1)) == [(E1, 2)]
    assert integration_range([E1]) == (0.0, 61.0, [1.0, 0.0, 2.0, 6.0])  # mean +- 60 std, split points
