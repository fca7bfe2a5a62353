"""Where the quadrature of an order statistic starts: the law's support, not ``cdf(0) == 0`` (2026-11-28).

``fit_phase_type(1, 1000)`` built ``alpha`` with ``alpha.sum() = 1 - 1.1e-16``, so ``cdf(0) = 1.1e-16``; the
quadrature read that as mass below 0, started at ``mean - 60 std = -1896`` and returned ``lo + value``,
losing 8 digits to cancellation: the minimum of 1024 was 1.1e-8 off (the documented bound is 1e-9) with no
error. The references here are independent: the same law written out as a hyperexponential in mpmath at 30
digits, ``S(x) = sum_i alpha_i e^(-r_i x)`` (``r_i = -T_ii``; an atom at 0 of ``1 - sum(alpha)``, if any,
counts), the order statistic's survival a regularized incomplete beta, by tanh-sinh quadrature split at
every decade.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from queuesgd.distributions import Exponential, PhaseType, fit_phase_type
from queuesgd.orderstats import expected_order_statistic, expected_order_statistics, integration_range
from queuesgd.schemes.barrier.cutoff_model import static_moments

mp.mp.dps = 30
ACHIEVED = 1e-9  # docs/order-statistics.md: the result, to 1e-9 relative, or ConvergenceError

#: scvs whose balanced-means fit summed alpha to 1 - 1.1e-16 before 2026-11-28 (the audit's 12.04 and 1000; 54
#: and 954.16 from a scan of 400 scvs, 46 of which did so).
ROUNDED = (12.04, 54.0, 954.16, 1000.0)
#: And 1709, whose alpha did sum to 1 but whose all-k road raised ConvergenceError at n = 1024 (the rounding
#: of 1 - F over the maximum's whole range was charged to every k, 3e-9 beside E[X_(1021:1024)] = 3.2).
SCVS = (*ROUNDED, 1709.0)


def _survival(ph: PhaseType):
    """``P(X > x)`` of a diagonal phase-type law (a hyperexponential), from its ``alpha`` and ``diag(T)``."""
    assert np.count_nonzero(ph.T - np.diag(np.diag(ph.T))) == 0
    p = [mp.mpf(float(a)) for a in ph.alpha]
    r = [mp.mpf(float(-t)) for t in np.diag(ph.T)]
    return lambda x: mp.fsum(pi * mp.exp(-ri * x) for pi, ri in zip(p, r))


def _points(mean: float) -> list:
    return [mp.mpf(0)] + [mp.mpf(mean) * mp.mpf(10) ** j for j in range(-14, 9)] + [mp.inf]


def _expected(ph: PhaseType, n: int, k: int) -> mp.mpf:
    S = _survival(ph)

    def tail(x):  # P(X_(k:n) > x) = P(Bin(n, S(x)) > n - k) = I_S(n - k + 1, k)
        s = S(x)
        if k == 1:
            return s**n
        if k == n:
            return 1 - (1 - s) ** n
        return mp.betainc(n - k + 1, k, 0, s, regularized=True)

    with mp.workdps(20):  # 1e-20 is plenty beside 1e-9, and the median's incomplete beta is slow at 30
        return +mp.quad(tail, _points(ph.mean))


def _rel(value: float, ref: mp.mpf) -> float:
    return float(abs((mp.mpf(value) - ref) / ref))


@pytest.mark.parametrize("scv", ROUNDED)
def test_fit_phase_type_alpha_sums_to_one(scv):
    ph = fit_phase_type(1.0, scv)
    assert float(np.sum(ph.alpha)) == 1.0
    assert float(ph.cdf(0.0)) == 0.0


@pytest.mark.parametrize("scv", SCVS)
def test_phase_type_fit_minimum_and_maximum_of_1024(scv):
    ph = fit_phase_type(1.0, scv)
    every = expected_order_statistics(ph, n=1024)
    for k in (1, 1024):
        ref = _expected(ph, 1024, k)
        assert _rel(expected_order_statistic(ph, k=k, n=1024), ref) <= ACHIEVED, k
        assert _rel(float(every[k - 1]), ref) <= ACHIEVED, k


@pytest.mark.parametrize("scv", (12.04, 1000.0))
def test_phase_type_fit_median_of_1024(scv):
    """The 512th of 1024 (7.4e-9 off at scv 1000 before): its reference's incomplete beta takes seconds."""
    ph = fit_phase_type(1.0, scv)
    ref = _expected(ph, 1024, 512)
    assert _rel(expected_order_statistic(ph, k=512, n=1024), ref) <= ACHIEVED
    assert _rel(float(expected_order_statistics(ph, n=1024)[511]), ref) <= ACHIEVED


@pytest.mark.parametrize("mean", (1e-9, 1e6))
def test_phase_type_fit_in_any_time_unit(mean):
    ph = fit_phase_type(mean, 1000.0)
    for k in (1, 1024):
        assert _rel(expected_order_statistic(ph, k=k, n=1024), _expected(ph, 1024, k)) <= ACHIEVED


def test_an_atom_at_zero_is_mass_at_zero_not_below():
    """A phase-type law whose ``alpha`` sums to 1 - 1e-12 (an atom at 0, allowed) and one summing to
    1 - 1.1e-16 by rounding (``[0.7, 0.1, 0.1, 0.1]``): both are nonnegative, the range starts at 0."""
    for alpha in ([0.5, 0.5 - 1e-12], [0.7, 0.1, 0.1, 0.1]):
        ph = PhaseType(alpha, np.diag(-np.arange(1.0, len(alpha) + 1)))
        assert integration_range([ph])[0] == 0.0
        for k in (1, 64):
            assert _rel(expected_order_statistic(ph, k=k, n=64), _expected(ph, 64, k)) <= ACHIEVED


def test_convolution_of_a_law_whose_alpha_rounds_above_one():
    """``[0.56, 0.328, 0.112]`` sums to 1 + 2.2e-16: chaining it gave the next law a weight of -2.2e-16,
    which PhaseType refused as a negative entry. The chain: each exponential phase then Exponential(1)."""
    from queuesgd.distributions import Convolution

    ph = PhaseType([0.56, 0.328, 0.112], np.diag([-1.0, -2.0, -3.0]))
    law = Convolution(ph, Exponential(1.0))
    assert float(np.min(law.to_phase_type().alpha)) >= 0.0
    # E[X + Y] = sum_i p_i / r_i + 1
    assert law.to_phase_type().mean == pytest.approx(0.56 + 0.328 / 2 + 0.112 / 3 + 1.0, rel=1e-14)


def test_static_cutoff_moments_with_a_phase_type_law():
    """``static_moments`` at n = 1024, T = 1e-3 (the audit's case: E[D] and the mean compute time were
    4.8e-9 off): ``E[D] = int_0^T (1 - F^n) + int_T^inf S^n``, ``E[min(X, D)] = int_0^T S + int_T^inf S^n``,
    ``E[K] = n F(T) + S(T)^n``."""
    ph = fit_phase_type(1.0, 1000.0)
    n, T = 1024, 1e-3
    S = _survival(ph)
    pts = [p for p in _points(1.0) if p > T]
    below = [p for p in _points(1.0) if p < T] + [mp.mpf(T)]
    tail = mp.quad(lambda x: S(x) ** n, [mp.mpf(T), *pts])
    ED = mp.quad(lambda x: 1 - (1 - S(x)) ** n, below) + tail
    comp = mp.quad(S, below) + tail
    EK = n * (1 - S(mp.mpf(T))) + S(mp.mpf(T)) ** n
    got = static_moments([(ph, n)], T)
    assert _rel(got[0], ED) <= ACHIEVED
    assert _rel(got[1], EK) <= ACHIEVED
    assert _rel(got[2], comp) <= ACHIEVED
