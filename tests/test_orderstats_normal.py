"""Order statistics of laws with mass below 0 (normal): relative to the result, not to the range (2026-11-28).

The quadrature integrated from ``lo = mean - 60 std`` and returned ``lo + value``, its error measured against
``|lo| + |value|``: a result near 0 beside the spread came out with the relative accuracy of the range, with
no error (the median of three ``Normal(1e-6, 1)``, 1e-6 by symmetry: 9.99998981e-07). I.i.d. normal laws are
now ``mu + sigma E[Z_(k:n)]`` with ``E[Z_(k:n)]`` a positive integral (``queuesgd/orderstats_normal.py``);
other laws with mass below 0 are integrated as a positive part and a negative part apart, judged against
their difference. The references: symmetry (the median of an odd number of i.i.d. normals, or of
independent normals of mean 0, is their mean) and mpmath at 30 digits (``Phi`` written out, the order
statistic's CDF a regularized incomplete beta or a sum over which laws are done, tanh-sinh quadrature of
``int_0^inf S - int_-inf^0 F``).
"""

from __future__ import annotations

import functools
import itertools

import mpmath as mp
import numpy as np
import pytest

from queuesgd.distributions import Normal, Shifted
from queuesgd.errors import ConvergenceError
from queuesgd.orderstats import expected_from_cdf, expected_order_statistic, expected_order_statistics
from queuesgd.schemes.barrier.cutoff_model import static_moments

mp.mp.dps = 30
ACHIEVED = 1e-9  # docs/order-statistics.md: 1e-9 of the result, or ConvergenceError


def _rel(value: float, ref) -> float:
    return float(abs((mp.mpf(value) - ref) / ref))


def _phi(mu, sigma):
    mu, sigma = mp.mpf(mu), mp.mpf(sigma)
    return lambda x: mp.ncdf((x - mu) / sigma)


def _mean(S, F, scale: float) -> mp.mpf:
    """``int_0^inf S - int_-inf^0 F`` split at ``scale * 2^j``."""
    pts = [mp.mpf(scale) * mp.mpf(2) ** j for j in range(-30, 8)]
    pos = mp.quad(S, [mp.mpf(0), *pts, mp.inf])
    neg = mp.quad(F, [-mp.inf, *[-p for p in reversed(pts)], mp.mpf(0)])
    return pos - neg


@functools.cache
def _iid(mu: float, sigma: float, n: int, k: int) -> mp.mpf:
    F = _phi(mu, sigma)

    def done(x):  # P(X_(k:n) <= x) = I_F(k, n - k + 1)
        return mp.betainc(k, n - k + 1, 0, F(x), regularized=True)

    return _mean(lambda x: 1 - done(x), done, max(abs(mu), sigma))


def _independent(laws: list[tuple[float, float]], k: int) -> mp.mpf:
    """``E[X_(k:n)]`` of independent normals: P(at least k done) summed over which are done."""
    cdfs = [_phi(m, s) for m, s in laws]
    n = len(laws)

    def done(x):
        F = [c(x) for c in cdfs]
        return mp.fsum(
            mp.fprod(F[i] if i in who else 1 - F[i] for i in range(n))
            for j in range(k, n + 1)
            for who in itertools.combinations(range(n), j)
        )

    return _mean(lambda x: 1 - done(x), done, max(s for _, s in laws))


@pytest.mark.parametrize("mu", (1e-6, 1e-3, -1e-9, 1e-12))
def test_the_median_of_three_iid_normals_is_their_mean(mu):
    """The audit's case: 9.99998981e-07 for 1e-6 (1.02e-6 off), 1.02e-9 off for 1e-3."""
    got = expected_order_statistic(Normal(mu, 1.0), k=2, n=3)
    assert abs(got - mu) <= ACHIEVED * abs(mu)
    assert abs(float(expected_order_statistics(Normal(mu, 1.0), n=3)[1]) - mu) <= ACHIEVED * abs(mu)


@pytest.mark.parametrize("near", (1e-4, 1e-5))
def test_iid_normal_order_statistic_near_zero_against_mpmath(near):
    """``Normal(mu, 1)``, ``mu = near - E[Z_(6:10)]`` (0.12267, Harter): ``E[X_(6:10)]`` is ``near``, which
    came out 6.2e-9 and 6.2e-8 off."""
    mu = float(near - _iid(0.0, 1.0, 10, 6))
    ref = _iid(mu, 1.0, 10, 6)
    assert _rel(expected_order_statistic(Normal(mu, 1.0), k=6, n=10), ref) <= ACHIEVED
    assert _rel(float(expected_order_statistics(Normal(mu, 1.0), n=10)[5]), ref) <= ACHIEVED


#: Three different normal laws, shifted by a common ``c`` (which shifts every order statistic by ``c``).
LAWS = [(0.02, 1.0), (-0.01, 2.0), (0.0, 1.5)]
#: Their median's mean, by ``_independent(LAWS, 2)``.
MEDIAN = 0.005942009649719662


def test_independent_normals_near_zero_against_mpmath():
    """Shifted so that the median's mean is 1e-3 (2.1e-9 off before): positive and negative parts apart,
    judged against their difference. Every k, single and all at once, and a shifted normal law."""
    laws = [(m + 1e-3 - MEDIAN, s) for m, s in LAWS]
    objs = [Normal(m, s) for m, s in laws]
    every = expected_order_statistics(objs)
    for k in (1, 2, 3):
        ref = _independent(laws, k)
        assert _rel(expected_order_statistic(objs, k=k), ref) <= ACHIEVED, k
        assert _rel(float(every[k - 1]), ref) <= ACHIEVED, k
    mixed = [Shifted(Normal(laws[0][0] - 0.01, 1.0), 0.01), *objs[1:]]  # the first law, as a shifted one
    assert _rel(expected_order_statistic(mixed, k=2), _independent(laws, 2)) <= ACHIEVED


def test_independent_normals_nearer_zero_are_accurate_or_raise():
    """The median's mean at 1e-4, 4e3 times below the parts (0.38 each): 2.3e-8 off before, with no error.
    The parts' error estimates do not make 1e-9 of it: ConvergenceError, or a number within 1e-9."""
    laws = [(m + 1e-4 - MEDIAN, s) for m, s in LAWS]
    try:
        got = expected_order_statistic([Normal(m, s) for m, s in laws], k=2)
    except ConvergenceError as err:
        assert "negative part" in str(err)
    else:
        assert _rel(got, _independent(laws, 2)) <= ACHIEVED


def test_a_mean_that_cancels_to_zero_raises():
    """The median of independent normals of mean 0 is 0 (its law is symmetric): no relative accuracy can be
    had, so it raises rather than return rounding (it returned 4e-15 before)."""
    with pytest.raises(ConvergenceError, match="negative part"):
        expected_order_statistic([Normal(0.0, 1.0), Normal(0.0, 2.0), Normal(0.0, 3.0)], k=2)


def test_iid_mu_cancelling_sigma_e_raises():
    """``mu + sigma E[Z]`` with ``mu = -sigma E[Z]`` to 7 digits: the sum's error bound is above 1e-9 of it
    (``E[Z_(7:10)]`` = 0.37576, Harter)."""
    e = float(_iid(0.0, 1.0, 10, 7))
    with pytest.raises(ConvergenceError, match="cancel"):
        expected_order_statistic(Normal(-e * (1 + 1e-7), 1.0), k=7, n=10)


def test_expected_from_cdf_below_zero():
    """A normal CDF given as a function, from lo = -40: its mean 1e-4, the range 4e5 times that."""
    got = expected_from_cdf(lambda y: np.asarray(Normal(1e-4, 1.0).cdf(y)), -40.0, 40.0)
    assert abs(got - 1e-4) <= ACHIEVED * 1e-4


@pytest.mark.parametrize("mu", (-0.6829, 0.01))
def test_static_cutoff_moments_with_a_normal_law(mu):
    """``static_moments`` of a normal law with mass below 0 (n = 3, T = 0.5): ``E[D] = int_0^inf S_D -
    int_-inf^0 F^n`` with ``S_D = 1 - F^n`` below T and ``S^n`` above; a worker's ``min(X, D)``: ``S``
    below T, ``S^n`` above. At mu = -0.6829, E[D] = 2.9e-4 (3.0e-9 off before); at 0.01, 0.36."""
    sigma, n, T = 1.0, 3, 0.5
    F = _phi(mu, sigma)
    pts = [mp.mpf(2) ** j for j in range(-20, 6)]
    below = [mp.mpf(0), *[p for p in pts if p < T], mp.mpf(T)]
    above = [mp.mpf(T), *[p for p in pts if p > T], mp.inf]
    neg = [-mp.inf, *[-p for p in reversed(pts)], mp.mpf(0)]
    tail = mp.quad(lambda x: (1 - F(x)) ** n, above)
    ED = mp.quad(lambda x: 1 - F(x) ** n, below) + tail - mp.quad(lambda x: F(x) ** n, neg)
    comp = mp.quad(lambda x: 1 - F(x), below) + tail - mp.quad(F, neg)
    got = static_moments([(Normal(mu, sigma), n)], T)
    assert _rel(got[0], ED) <= ACHIEVED
    assert _rel(got[2], comp) <= ACHIEVED


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((Shifted(Normal(0.0, 1.0), 1.0), 3, [1]), "law"),
        ((Normal(0.0, 1.0), 0, [1]), "n"),
        ((Normal(0.0, 1.0), 2.5, [1]), "n"),
        ((Normal(0.0, 1.0), 3, [4]), "ks"),
        ((Normal(0.0, 1.0), 3, [1.0]), "ks"),
        ((Normal(0.0, 1.0), 3, []), "ks"),
    ],
)
def test_normal_order_statistics_names_a_bad_argument(args, field):
    from queuesgd.errors import InvalidParameterError
    from queuesgd.orderstats_normal import normal_order_statistics

    with pytest.raises(InvalidParameterError, match=f"^{field}: got"):
        normal_order_statistics(*args)
