"""Cutoff closed forms against a high-precision reference: mpmath at 30 digits, heavy tails (issue 25).

The cancel-mode renewal-reward closed form of ``docs/schemes/cutoffs.md`` integrates, for ``n`` i.i.d. draws
``X_i`` of a law with CDF ``F`` and survival ``S = 1 - F`` and a timeout ``T``:

- ``E[D] = integral_0^T (1 - F^n) dx + integral_T^inf S^n dx`` (``D = max(min(X_(n), T), X_(1))``);
- ``E[K] = n F(T) + S(T)^n``;
- the mean computing time per worker, ``E[min(X_i, D)] = integral_0^T S dx + integral_T^inf S^n dx``.

Here each is computed by mpmath's tanh-sinh quadrature on the law's textbook CDF (lognormal: Phi((ln x - mu) /
sigma); gamma: the regularized lower incomplete gamma; balanced-means hyperexponential), split at ``T`` and at
the law's mean times powers of four up to infinity. The schemes' quadrature must meet the accuracy the order
statistics reach (``docs/order-statistics.md``: 1e-9 relative), scv up to 20 and n up to 1024, end to end
through ``StaticCutoff`` and ``OptimalCutoff``.
"""

from __future__ import annotations

import mpmath as mp
import pytest
from mp_laws import gamma_cdf, h2_cdf, lognormal_cdf

from queuesgd import Cluster, Workload
from queuesgd.distributions import Gamma, HyperExponential, LogNormal
from queuesgd.schemes.barrier.cutoff import OptimalCutoff, StaticCutoff
from queuesgd.schemes.barrier.cutoff_model import static_moments

mp.mp.dps = 30
ACHIEVED = 1e-9  # the relative accuracy docs/order-statistics.md reports for the quadrature
MEAN = 0.072
ROUND = 0.5  # seconds: bandwidth 1e300 and latency 0.25, a fixed PS round (docs/schemes/cutoffs.md)


def _lognormal(scv: float):
    cdf, _, _ = lognormal_cdf(MEAN, scv)
    return cdf, LogNormal.from_mean_scv(MEAN, scv)


def _gamma(scv: float):
    shape = 1 / scv
    return gamma_cdf(shape, shape / MEAN), Gamma.from_mean_scv(MEAN, scv)


def _hyper(scv: float):
    cdf, (p, mu1, mu2) = h2_cdf(MEAN, scv)
    return cdf, HyperExponential([p, 1 - p], [mu1, mu2])


LAWS = {"lognormal": _lognormal, "gamma": _gamma, "hyperexponential": _hyper}


def _points(T: float, lo: float = 0.0, hi: float = mp.inf) -> list:
    pts = {mp.mpf(lo), mp.mpf(hi), mp.mpf(T)} | {mp.mpf(MEAN) * mp.mpf(4) ** j for j in range(-7, 22)}
    return sorted(p for p in pts if lo <= p <= hi)


def _moments(cdf, n: int, T: float) -> tuple[mp.mpf, mp.mpf, mp.mpf]:
    """``(E[D], E[K], E[min(X_i, D)])`` of one cancel-mode iteration, at 30 digits."""
    tail = mp.quad(lambda x: (1 - cdf(x)) ** n, _points(T, T))
    ED = mp.quad(lambda x: 1 - cdf(x) ** n, _points(T, 0, T)) + tail
    comp = mp.quad(lambda x: 1 - cdf(x), _points(T, 0, T)) + tail
    FT = cdf(mp.mpf(T))
    return ED, n * FT + (1 - FT) ** n, comp


def _rel(value: float, ref: mp.mpf) -> float:
    return float(abs((mp.mpf(value) - ref) / ref))


CASES = [
    ("lognormal", 1.0),
    ("lognormal", 5.0),
    ("lognormal", 10.0),
    ("lognormal", 20.0),
    ("gamma", 0.01),
    ("gamma", 5.0),
    ("hyperexponential", 20.0),
]


@pytest.mark.parametrize(("family", "scv"), CASES)
@pytest.mark.parametrize("n", (1, 64, 1024))
@pytest.mark.parametrize("factor", (0.5, 20.0))
def test_static_cancel_moments(family, scv, n, factor):
    cdf, law = LAWS[family](scv)
    T = factor * MEAN
    ED, EK, comp = static_moments([(law, n)], T)
    rED, rEK, rcomp = _moments(cdf, n, T)
    assert _rel(ED, rED) <= ACHIEVED
    assert _rel(EK, rEK) <= ACHIEVED
    assert _rel(comp, rcomp) <= ACHIEVED


HEAVY = [("lognormal", 10.0), ("lognormal", 20.0), ("hyperexponential", 20.0)]


@pytest.mark.parametrize(("family", "scv"), HEAVY)
def test_static_cutoff_throughput_end_to_end(family, scv):
    n, T = 64, 3 * MEAN
    cdf, law = LAWS[family](scv)
    w = Workload(compute=law, gradient_bytes=1.0, parameter_bytes=1.0)
    c = Cluster(n, bandwidth=1e300, latency=0.25)
    sol = StaticCutoff(T, stragglers="cancel").solve(w, c, "closed_form")
    ED, EK, _ = _moments(cdf, n, T)
    assert _rel(sol.iteration_rate * sol.gradients_per_update, EK / (ED + ROUND)) <= ACHIEVED


def _kth(cdf, n: int, k: int) -> mp.mpf:
    tail = lambda x: 1 - mp.betainc(k, n - k + 1, 0, cdf(x), regularized=True)  # noqa: E731
    return mp.quad(tail, _points(MEAN))


def test_optimal_count_cutoff_on_a_heavy_tail():
    """c* = argmax_c c / (E[X_(c:n)] + round); its rate to the reference's accuracy, and no c beats it."""
    n = 8
    cdf, law = _lognormal(10.0)
    w = Workload(compute=law, gradient_bytes=1.0, parameter_bytes=1.0)
    c = Cluster(n, bandwidth=1e300, latency=0.25)
    sol = OptimalCutoff(stragglers="cancel").solve(w, c, "closed_form")
    rates = {k: k / (_kth(cdf, n, k) + ROUND) for k in range(1, n + 1)}
    best = max(rates, key=rates.get)
    assert sol.details["cutoff"] == best
    assert _rel(sol.iteration_rate * sol.gradients_per_update, rates[best]) <= ACHIEVED


def test_optimal_time_cutoff_is_a_maximum_of_the_reference():
    """T*'s rate equals the reference's at T*, and the reference is no higher 0.1% either side of it."""
    n = 16
    cdf, law = _lognormal(10.0)
    w = Workload(compute=law, gradient_bytes=1.0, parameter_bytes=1.0)
    c = Cluster(n, bandwidth=1e300, latency=0.25)
    sol = OptimalCutoff(by="time", stragglers="cancel").solve(w, c, "closed_form")
    T = sol.details["cutoff"]

    def rate(t: float) -> mp.mpf:
        ED, EK, _ = _moments(cdf, n, t)
        return EK / (ED + ROUND)

    at = rate(T)
    assert _rel(sol.iteration_rate * sol.gradients_per_update, at) <= ACHIEVED
    assert rate(T * 0.999) <= at * (1 + ACHIEVED) and rate(T * 1.001) <= at * (1 + ACHIEVED)


@pytest.mark.parametrize("T", (0.1, 0.5, 1.0, 5.0))
def test_exponential_cancel_moments_where_the_minimums_survival_passes_1e_16(T):
    # audit 2026-11-28: where exp(-n mu T) is near 1e-16 (n = 65..74 at T = 0.5 x mean, 350..365 at
    # 0.1) the survival of D past T, read as 1 - (1 - S), rounded away and the quadrature raised
    # ConvergenceError. Closed forms (docs/schemes/cutoffs.md), Y = 1 - exp(-mu T), mu = 1 / MEAN:
    # E[D] = sum_j Y^j / j / mu + exp(-n mu T) / (n mu), E[K] = n Y + exp(-n mu T), and a worker's
    # min(X, D) survives as exp(-mu x) below T, exp(-n mu x) above: Y / mu + exp(-n mu T) / (n mu)
    from queuesgd.distributions import Exponential

    mp.mp.dps = 30
    mu = 1 / mp.mpf(MEAN)
    band = [n for n in range(1, 1025) if 30 <= float(n * mu * T * MEAN) <= 42]  # exp(-n mu T) ~ 1e-16
    for n in sorted({1, 2, 7, 64, 1024, *band[:: max(len(band) // 12, 1)]}):
        ED, EK, comp = static_moments([(Exponential(mean=MEAN), n)], T * MEAN)
        Y = 1 - mp.exp(-mu * T * MEAN)
        atom = mp.exp(-n * mu * T * MEAN)
        assert _rel(ED, mp.fsum(Y**j / j for j in range(1, n + 1)) / mu + atom / (n * mu)) <= ACHIEVED
        assert _rel(EK, n * Y + atom) <= ACHIEVED
        assert _rel(comp, Y / mu + atom / (n * mu)) <= ACHIEVED
