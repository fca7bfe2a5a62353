"""Textbook CDFs in mpmath for the high-precision reference suites (issue 25).

Shared by ``tests/test_orderstats_reference.py`` and ``tests/schemes/test_cutoff_reference.py``: each law's
CDF written out from its textbook form, independent of ``queuesgd.distributions``; and the exact
``E[max of n]`` of lognormal draws that the heavy-tail coverage tests hold simulations to
(``tests/schemes/test_simulation_tails.py``, ``tests/test_subsampling_interval.py``).
"""

from __future__ import annotations

import math

import mpmath as mp


def lognormal_cdf(mean: float, scv: float):
    """``(F, median, sigma)`` of the lognormal of ``mean`` and ``scv``: ``F(x) = Phi((ln x - mu) / s)``."""
    s2 = mp.log(1 + mp.mpf(scv))
    s, mu = mp.sqrt(s2), mp.log(mp.mpf(mean)) - s2 / 2
    return (lambda x: mp.ncdf((mp.log(x) - mu) / s) if x > 0 else mp.mpf(0)), mp.e**mu, s


def gamma_cdf(shape: float, rate: float):
    """The gamma (and Erlang) CDF: the regularized lower incomplete gamma of ``rate x``."""
    a, b = mp.mpf(shape), mp.mpf(rate)
    return lambda x: mp.gammainc(a, 0, b * x, regularized=True) if x > 0 else mp.mpf(0)


def _h2(mean: float, scv: float) -> tuple[float, float, float]:
    """``(p, mu1, mu2)`` of the balanced-means H2 (Whitt 1982): p / mu1 = (1 - p) / mu2 = mean / 2."""
    p = (1 + math.sqrt((scv - 1) / (scv + 1))) / 2
    return p, 2 * p / mean, 2 * (1 - p) / mean


def h2_cdf(mean: float, scv: float):
    """The balanced-means H2's CDF ``1 - p e^(-mu1 x) - (1 - p) e^(-mu2 x)``, and its ``(p, mu1, mu2)``."""
    p, mu1, mu2 = _h2(mean, scv)
    return (lambda x: 1 - p * mp.e ** (-mu1 * x) - (1 - p) * mp.e ** (-mu2 * x)), (p, mu1, mu2)


def expected_max_lognormal(sigma: float, n: int) -> float:
    """``E[max of n]`` of the lognormal of mean 1: ``integral_0^inf 1 - Phi((ln x - mu) / sigma)^n dx``
    by mpmath at 30 digits, split at decades around the median (``mu = -sigma^2 / 2``)."""
    mp.mp.dps = 30
    mu = -(mp.mpf(sigma) ** 2) / 2
    pts = [0] + [mp.e ** (mu + j * sigma) for j in range(-6, 9)] + [mp.inf]
    return float(mp.quad(lambda x: 1 - mp.ncdf((mp.log(x) - mu) / sigma) ** n if x > 0 else 1, pts))
