"""Order statistics against a high-precision reference: mpmath at 30 digits, heavy tails included (issue 25).

``E[X_(k:n)] = integral_0^inf (1 - F_(k:n)(x)) dx`` with ``F_(k:n) = I_F(k, n - k + 1)``, the regularized
incomplete beta of the law's CDF (``F^n`` for the maximum), each law's CDF written out here from its
textbook form (lognormal: Phi((ln x - mu) / sigma); gamma and Erlang: the regularized lower incomplete
gamma; balanced-means hyperexponential: 1 - p e^(-mu1 x) - (1 - p) e^(-mu2 x); a phase-type law:
1 - alpha exp(T x) 1; normal: Phi), and integrated by mpmath's tanh-sinh quadrature split at the law's
points a factor 4 apart up to infinity.

The documentation promises a relative error of at most 1e-6 or a ``ConvergenceError``
(``docs/order-statistics.md``); the suite holds every case to :data:`ACHIEVED`, the accuracy the docs
report as achieved. Before the quadrature integrated the tail to infinity, a lognormal of scv 10 was
1.5e-3 low at n = 1 and 6.2e-3 low at n = 64.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mp_laws import gamma_cdf, h2_cdf, lognormal_cdf

from queuesgd.distributions import (
    Convolution,
    Deterministic,
    Empirical,
    Erlang,
    Exponential,
    Gamma,
    HyperExponential,
    LogNormal,
    Normal,
    PhaseType,
    Shifted,
)
from queuesgd.orderstats import expected_max, expected_order_statistic, expected_order_statistics

mp.mp.dps = 30
#: The relative accuracy every case reaches (docs/order-statistics.md states it; the promise is 1e-6).
ACHIEVED = 1e-9
MEAN = 0.072  # seconds: the step of the table


def _reference(cdf, n: int, k: int, scale: float, lo: float = 0.0) -> mp.mpf:
    """``E[X_(k:n)]`` for i.i.d. draws of ``cdf``, by mpmath, split at ``scale * 4^j`` up to infinity."""
    if k == n:
        tail = lambda x: 1 - cdf(x) ** n  # noqa: E731
    else:
        tail = lambda x: 1 - mp.betainc(k, n - k + 1, 0, cdf(x), regularized=True)  # noqa: E731
    pts = [mp.mpf(lo)] + [mp.mpf(scale) * mp.mpf(4) ** j for j in range(-6, 20)] + [mp.inf]
    pts = sorted({p for p in pts if p >= lo})
    return mp.mpf(lo) + mp.quad(tail, pts)


def _close(value: float, ref: mp.mpf) -> float:
    return float(abs((mp.mpf(value) - ref) / ref))


SCVS = (0.01, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
NS = (1, 8, 64, 1024)


@pytest.mark.parametrize("scv", SCVS)
@pytest.mark.parametrize("n", NS)
def test_lognormal_maximum(scv, n):
    cdf, median, _ = lognormal_cdf(MEAN, scv)
    ref = _reference(cdf, n, n, float(median))
    assert _close(expected_max(LogNormal.from_mean_scv(MEAN, scv), n), ref) <= ACHIEVED


@pytest.mark.parametrize("scv", SCVS)
@pytest.mark.parametrize("n", NS)
def test_gamma_maximum(scv, n):
    shape = 1 / scv
    ref = _reference(gamma_cdf(shape, shape / MEAN), n, n, MEAN)
    assert _close(expected_max(Gamma.from_mean_scv(MEAN, scv), n), ref) <= ACHIEVED


@pytest.mark.parametrize("scv", (1.5, 2.0, 5.0, 10.0, 20.0))
@pytest.mark.parametrize("n", NS)
def test_hyperexponential_maximum(scv, n):
    cdf, (p, mu1, mu2) = h2_cdf(MEAN, scv)
    ref = _reference(cdf, n, n, MEAN)
    law = HyperExponential([p, 1 - p], [mu1, mu2])
    assert _close(expected_max(law, n), ref) <= ACHIEVED


@pytest.mark.parametrize("k", (2, 10, 100))
@pytest.mark.parametrize("n", NS)
def test_erlang_maximum(k, n):
    ref = _reference(gamma_cdf(k, k / MEAN), n, n, MEAN)
    assert _close(expected_max(Erlang(k, mean=MEAN), n), ref) <= ACHIEVED


@pytest.mark.parametrize("scv", (0.01, 0.09))
@pytest.mark.parametrize("n", NS)
def test_normal_maximum(scv, n):
    """A normal law puts a little mass below 0: the reference integrates from -infinity."""
    m, s = mp.mpf(MEAN), mp.sqrt(mp.mpf(scv)) * MEAN
    ref = mp.quad(lambda x: 1 - mp.ncdf((x - m) / s) ** n, [0, m, m + 5 * s, m + 20 * s, mp.inf])
    ref -= mp.quad(lambda x: mp.ncdf((x - m) / s) ** n, [-mp.inf, m - 20 * s, 0])
    assert _close(expected_max(Normal(MEAN, float(s)), n), ref) <= ACHIEVED


def test_phase_type_maximum():
    """A three-phase Coxian law: F(x) = 1 - alpha exp(T x) 1, with mpmath's matrix exponential."""
    alpha = [1.0, 0.0, 0.0]
    T = [[-30.0, 20.0, 0.0], [0.0, -12.0, 6.0], [0.0, 0.0, -4.0]]
    a, t = mp.matrix([alpha]), mp.matrix(T)
    ones = mp.matrix([[1.0], [1.0], [1.0]])
    # exp(T x) = V diag(e^(lambda x)) V^-1 (T has distinct eigenvalues): F(x) = 1 - sum_i c_i e^(lambda_i x)
    lam, vecs = mp.eig(t)
    left, right = a * vecs, mp.inverse(vecs) * ones
    coef = [left[0, i] * right[i, 0] for i in range(3)]
    assert abs(1 - (a * mp.expm(t * mp.mpf("0.05")) * ones)[0] - _ph(coef, lam, mp.mpf("0.05"))) < 1e-25

    def cdf(x):
        return _ph(coef, lam, x)

    law = PhaseType(alpha, T)
    for n in (1, 8, 64):
        assert _close(expected_max(law, n), _reference(cdf, n, n, float(law.mean))) <= ACHIEVED


def _ph(coef, lam, x):
    return 1 - mp.re(mp.fsum(c * mp.e ** (v * x) for c, v in zip(coef, lam)))


@pytest.mark.parametrize("n, k", [(8, 1), (8, 7), (64, 32), (64, 63), (1024, 1000)])
@pytest.mark.parametrize("scv", (0.5, 5.0, 20.0))
def test_kth_order_statistic_of_a_heavy_tail(n, k, scv):
    """Backup workers and cutoffs read the (n - b)-th fastest: every k, not only the maximum."""
    cdf, median, _ = lognormal_cdf(MEAN, scv)
    ref = _reference(cdf, n, k, float(median))
    law = LogNormal.from_mean_scv(MEAN, scv)
    assert _close(expected_order_statistic(law, k=k, n=n), ref) <= ACHIEVED


def test_all_order_statistics_at_once_of_a_heavy_tail():
    law = LogNormal.from_mean_scv(MEAN, 10.0)
    cdf, median, _ = lognormal_cdf(MEAN, 10.0)
    every = expected_order_statistics(law, n=16)
    for k in (1, 4, 12, 15, 16):
        assert _close(float(every[k - 1]), _reference(cdf, 16, k, float(median))) <= ACHIEVED


def test_shifted_and_non_identical_heavy_tails():
    """Two of eight workers delayed by 20 ms: E[max] of independent laws, the CDF the product of theirs."""
    base = LogNormal.from_mean_scv(MEAN, 5.0)
    cdf, median, _ = lognormal_cdf(MEAN, 5.0)
    laws = [Shifted(base, 0.02)] * 2 + [base] * 6

    def product(x):
        return cdf(x - mp.mpf("0.02")) ** 2 * cdf(x) ** 6

    ref = _reference(product, 1, 1, float(median))  # k = n = 1 of the product law
    assert _close(expected_max(laws), ref) <= ACHIEVED


def test_exponential_kth_against_the_closed_form():
    law = Exponential(mean=MEAN)
    for n, k in ((1024, 1), (1024, 1000), (1024, 1024)):
        ref = MEAN * (mp.harmonic(n) - mp.harmonic(n - k))
        assert _close(expected_order_statistic(law, k=k, n=n), ref) <= 1e-14


@settings(max_examples=8, deadline=None)
@given(
    scv=st.floats(0.01, 20.0),
    n=st.integers(1, 1024),
    mean=st.floats(1e-3, 10.0),
)
def test_lognormal_maximum_property(scv, n, mean):
    cdf, median, _ = lognormal_cdf(mean, scv)
    ref = _reference(cdf, n, n, float(median))
    assert _close(expected_max(LogNormal.from_mean_scv(mean, scv), n), ref) <= ACHIEVED


def test_no_integration_warning_reaches_the_user():
    with np.errstate(all="raise"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            expected_max(LogNormal.from_mean_scv(MEAN, 20.0), 512)


@pytest.mark.parametrize("n", (8, 64))
def test_a_barrier_closed_form_end_to_end(n):
    """Ring all-reduce's closed form, E[max] + 2 (n - 1) / n G / B + u, with a heavy-tailed step (scv 10)."""
    import queuesgd as q

    law = LogNormal.from_mean_scv(MEAN, 10.0)
    w = q.Workload(law, "100MB", batch_size=32, update_time="2ms")
    c = q.Cluster(n, "10Gbit/s")
    p = q.predict(q.RingAllReduce(), w, c, method="closed_form")
    cdf, median, _ = lognormal_cdf(MEAN, 10.0)
    ring = mp.mpf(2 * (n - 1)) / n * mp.mpf(1e8) / mp.mpf(1.25e9)  # 100 MB at 10 Gbit/s
    ref = _reference(cdf, n, n, float(median)) + ring + mp.mpf("0.002")
    assert _close(p.iteration_time, ref) <= ACHIEVED


@pytest.mark.parametrize("n", NS)
def test_empirical_order_statistics_are_the_exact_finite_sum(n):
    """A measured law of m samples (heavy-tailed: drawn from a lognormal of scv 20, ties included):
    ``E[X_(k:n)] = sum_j v_j (I_{j/m}(k, n - k + 1) - I_{(j-1)/m}(k, n - k + 1))`` over the sorted samples."""
    rng = np.random.default_rng(25)
    raw = LogNormal.from_mean_scv(MEAN, 20.0).sample(rng, 200)
    samples = np.concatenate([raw, raw[:7]])  # ties
    law = Empirical(samples)
    v = sorted(mp.mpf(float(x)) for x in samples)
    m = len(v)

    def ref(k: int) -> mp.mpf:
        if k == n:
            return mp.fsum(v[j] * ((mp.mpf(j + 1) / m) ** n - (mp.mpf(j) / m) ** n) for j in range(m))
        cdf = [mp.betainc(k, n - k + 1, 0, mp.mpf(j) / m, regularized=True) for j in range(m + 1)]
        return mp.fsum(v[j] * (cdf[j + 1] - cdf[j]) for j in range(m))

    assert _close(expected_max(law, n), ref(n)) <= ACHIEVED
    for k in sorted({1, max(1, n // 2), n}):
        assert _close(expected_order_statistic(law, k=k, n=n), ref(k)) <= ACHIEVED


@pytest.mark.parametrize("n", NS)
def test_convolution_maximum(n):
    """Exponential(rate 50) + Exponential(rate 20) + 10 ms: a shifted hypoexponential,
    ``F(x) = 1 - (b e^(-a y) - a e^(-b y)) / (b - a)`` at ``y = x - 0.01``."""
    a, b, shift = mp.mpf(50), mp.mpf(20), mp.mpf("0.01")
    law = Convolution(Exponential(50.0), Exponential(20.0), Deterministic(0.01))

    def cdf(x):
        y = x - shift
        return mp.mpf(0) if y <= 0 else 1 - (b * mp.e ** (-a * y) - a * mp.e ** (-b * y)) / (b - a)

    ref = _reference(cdf, n, n, MEAN, lo=0.01)
    assert _close(expected_max(law, n), ref) <= ACHIEVED
