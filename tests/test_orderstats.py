"""Order statistics against textbook values and closed forms."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from queuesgd.distributions import (
    Deterministic,
    Empirical,
    Erlang,
    Exponential,
    Gamma,
    LogNormal,
    Normal,
    Shifted,
)
from queuesgd.errors import InvalidParameterError
from queuesgd.orderstats import (
    blom,
    expected_from_cdf,
    expected_max,
    expected_order_statistic,
    expected_order_statistics,
    exponential_order_statistic,
    harmonic,
    integration_range,
    order_statistic_cdf,
)

# Harter (1961), expected values of normal order statistics: E[X_(i:n)] for the standard normal.
HARTER_MAX = {
    2: 0.56419,
    3: 0.84628,
    4: 1.02938,
    5: 1.16296,
    10: 1.53875,
    20: 1.86748,
    50: 2.24907,
    100: 2.50759,
}
HARTER_10 = {10: 1.53875, 9: 1.00136, 8: 0.65606, 7: 0.37576, 6: 0.12267}


@pytest.mark.parametrize("n", sorted(HARTER_MAX))
def test_normal_maximum_matches_harter(n):
    assert expected_max(Normal(0.0, 1.0), n) == pytest.approx(HARTER_MAX[n], abs=1e-5)


@pytest.mark.parametrize("i", sorted(HARTER_10))
def test_normal_order_statistics_n10_match_harter_and_symmetry(i):
    e = expected_order_statistic(Normal(0.0, 1.0), k=i, n=10)
    assert e == pytest.approx(HARTER_10[i], abs=1e-5)
    lower = expected_order_statistic(Normal(0.0, 1.0), k=11 - i, n=10)
    assert lower == pytest.approx(-HARTER_10[i], abs=1e-5)
    # location and scale: E[mu + sigma Z]_(i) = mu + sigma E[Z_(i)]
    assert expected_order_statistic(Normal(3.0, 0.5), k=i, n=10) == pytest.approx(
        3 + 0.5 * HARTER_10[i], abs=1e-5
    )


def test_blom_is_close_to_harter():
    for n, v in HARTER_MAX.items():
        assert blom(0.0, 1.0, n) == pytest.approx(v, abs=0.03)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50, 1000])
def test_exponential_maximum_is_harmonic_over_rate(n):
    h = math.fsum(1.0 / i for i in range(1, n + 1))
    assert expected_max(Exponential(2.5), n) == pytest.approx(h / 2.5, rel=1e-14)
    assert harmonic(n) == pytest.approx(h, rel=1e-14)


def test_harmonic_large_n_uses_digamma():
    n = 100_000
    assert harmonic(n) == pytest.approx(math.fsum(1.0 / i for i in range(1, n + 1)), rel=1e-13)


@pytest.mark.parametrize(("n", "k"), [(5, 1), (5, 3), (5, 5), (12, 7)])
def test_exponential_order_statistic_renyi_and_quadrature_agree(n, k):
    rate = 0.7
    renyi = math.fsum(1.0 / (rate * (n - j)) for j in range(k))  # gaps of rates n, n-1, ... (times rate)
    assert exponential_order_statistic(rate, n, k) == pytest.approx(renyi, rel=1e-14)
    # the general quadrature path, forced by a law that is not flagged Exponential
    as_erlang = Erlang(1, rate)
    assert expected_order_statistic(as_erlang, k=k, n=n) == pytest.approx(renyi, rel=1e-9)


def test_max_of_two_different_exponentials_closed_form():
    a, b = 1.0, 3.0
    exact = 1 / a + 1 / b - 1 / (a + b)
    assert expected_max([Exponential(a), Exponential(b)]) == pytest.approx(exact, rel=1e-10)
    # the minimum of independent exponentials is exponential with the summed rate
    assert expected_order_statistic([Exponential(a), Exponential(b)], k=1) == pytest.approx(
        1 / (a + b), rel=1e-10
    )


def test_shifted_maximum_closed_form():
    # max(d + X1, X2), X ~ Exp(1): E = d + 1 + e^{-d}/2 (integrate P(max > x))
    d = 0.5
    laws = [Shifted(Exponential(1.0), d), Exponential(1.0)]
    assert expected_max(laws) == pytest.approx(d + 1 + math.exp(-d) / 2, rel=1e-10)


def test_deterministic_and_mixed_atoms():
    assert expected_max(Deterministic(0.2), 9) == 0.2
    # max(0.5, Exp(1)) = 0.5 + e^{-0.5}
    assert expected_max([Deterministic(0.5), Exponential(1.0)]) == pytest.approx(
        0.5 + math.exp(-0.5), rel=1e-9
    )


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 12), shape=st.floats(0.5, 6.0), data=st.data())
def test_gamma_order_statistics_against_monte_carlo(n, shape, data):
    k = data.draw(st.integers(1, n))
    law = Gamma(shape, mean=1.0)
    x = np.sort(law.sample(np.random.default_rng(n * 100 + k), (40_000, n)), axis=1)[:, k - 1]
    se = x.std() / math.sqrt(x.size)
    assert abs(expected_order_statistic(law, k=k, n=n) - x.mean()) < 5 * se


def test_grouped_laws_equal_explicit_list():
    laws = [LogNormal.from_mean_scv(1.0, 0.3)] * 3 + [LogNormal.from_mean_scv(2.0, 0.3)] * 2
    for k in range(1, 6):
        xs = np.array([0.5, 1.0, 1.5, 3.0])
        grouped = order_statistic_cdf(laws, xs, k=k)
        # brute force: sum over all 2^5 subsets of "done by x"
        p = np.array([law.cdf(xs) for law in laws])
        brute = np.zeros_like(xs)
        for mask in range(32):
            done = [(mask >> i) & 1 for i in range(5)]
            if sum(done) >= k:
                term = np.ones_like(xs)
                for i, dn in enumerate(done):
                    term *= p[i] if dn else 1 - p[i]
                brute += term
        np.testing.assert_allclose(grouped, brute, rtol=1e-12, atol=1e-14)


def test_large_identical_population_is_cheap_and_right():
    law = Gamma(2.0, mean=1.0)
    # against Monte Carlo: 4,000 maxima of 1,000 draws
    x = law.sample(np.random.default_rng(7), (4_000, 1_000)).max(axis=1)
    assert abs(expected_max(law, 1000) - x.mean()) < 5 * x.std() / math.sqrt(x.size)
    # and against the trapezoid rule on the same CDF (quadrature accuracy)
    g = np.linspace(0, 30, 300_001)
    F = order_statistic_cdf(law, g, n=1000)
    assert expected_max(law, 1000) == pytest.approx(np.trapezoid(1 - F, g), rel=1e-8)


def test_expected_from_cdf_uniform_and_errors():
    assert expected_from_cdf(lambda y: np.clip((y - 2) / 3, 0, 1), 2.0, 5.0) == pytest.approx(3.5, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="integration range"):
        expected_from_cdf(lambda y: y, 1.0, float("inf"))


def test_symbolic_exponential_order_statistic():
    import sympy

    n, mu = sympy.symbols("n mu", positive=True)
    expr = exponential_order_statistic(mu, n)
    assert sympy.simplify(expr.subs({n: 4, mu: 2}) - sympy.Rational(25, 24)) == 0


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="k"):
        expected_order_statistic(Exponential(1.0), k=5, n=4)
    with pytest.raises(InvalidParameterError, match="n"):
        expected_order_statistic(Exponential(1.0))
    with pytest.raises(InvalidParameterError, match="laws"):
        expected_max([])
    with pytest.raises(InvalidParameterError, match=r"laws\[1\]"):
        expected_max([Exponential(1.0), 3.0])
    with pytest.raises(InvalidParameterError, match="n"):
        expected_max([Exponential(1.0)] * 2, n=3)
    with pytest.raises(InvalidParameterError, match="k"):
        blom(0, 1, 3, 4)


def test_gamma_minimum_near_a_singular_density_at_zero():
    # Gamma(1.25): the density's derivative is infinite at 0; E[min of 3] = int_0^oo (1 - F)^3
    # (scipy's own gamma CDF and quad, independent of queuesgd's Gamma). The integration range
    # used to start far below 0 without a breakpoint there and missed this by 2%.
    from scipy import integrate, stats

    g = stats.gamma(1.25, scale=1 / 1.25)
    exact, _ = integrate.quad(lambda x: (1 - g.cdf(x)) ** 3, 0, np.inf, limit=500)
    assert expected_order_statistic(Gamma(1.25, mean=1.0), k=1, n=3) == pytest.approx(exact, rel=1e-9)


def test_empirical_order_statistics_equal_brute_force_enumeration():
    import itertools

    from queuesgd.distributions import Empirical, Shifted

    samples = [0.5, 1.0, 1.0, 2.5]
    law = Empirical(samples)
    for n, k in ((2, 2), (3, 2), (3, 1), (4, 4)):
        brute = np.mean([sorted(t)[k - 1] for t in itertools.product(samples, repeat=n)])
        assert expected_order_statistic(law, k=k, n=n) == pytest.approx(brute, rel=1e-12)
    # a shifted copy (a delayed worker) mixed with plain ones
    mixed = [Shifted(law, 0.7), law, law]
    brute = np.mean([max(a + 0.7, b, c) for a, b, c in itertools.product(samples, repeat=3)])
    assert expected_order_statistic(mixed) == pytest.approx(brute, rel=1e-12)


# ---- every k at once -------------------------------------------------------------------------------------
def brute_force_order_means(samples: list[np.ndarray]) -> np.ndarray:
    """E[X_(k:n)] for every k by enumerating every combination of equally likely samples."""
    grids = np.meshgrid(*samples, indexing="ij")
    combos = np.sort(np.stack([g.ravel() for g in grids], axis=1), axis=1)
    return combos.mean(axis=0)


def test_all_k_empirical_equals_brute_force_enumeration():
    # A 200-sample measured law: the former cutoff copy (quadrature) was off by 1.3e-7 here.
    rng = np.random.default_rng(0)
    a = rng.lognormal(0.0, 0.5, 200)
    b = rng.gamma(2.0, 0.3, 40)
    got = expected_order_statistics([Empirical(a)] * 2)
    assert got == pytest.approx(brute_force_order_means([a, a]), rel=1e-9)
    laws = [Empirical(b), Empirical(b), Shifted(Empirical(b), 0.25)]
    got = expected_order_statistics(laws)
    assert got == pytest.approx(brute_force_order_means([b, b, b + 0.25]), rel=1e-9)


def test_all_k_equals_single_k_exact_path():
    rng = np.random.default_rng(0)
    emp = Empirical(rng.lognormal(0.0, 0.5, 200))
    for laws in ([emp] * 8, [emp] * 5 + [Shifted(emp, 0.3)] * 3, [Deterministic(0.5), emp]):
        one = [expected_order_statistic(laws, k=k) for k in range(1, len(laws) + 1)]
        assert expected_order_statistics(laws) == pytest.approx(one, rel=1e-9)


@pytest.mark.parametrize(
    "laws",
    [
        [Exponential(1.0)] * 3 + [Exponential(2.0)] * 4,
        [Normal(1.0, 0.2)] * 10,
        [LogNormal.from_mean_scv(1.0, 1.0)] * 8,
        [Shifted(Exponential(1.0), 0.5), Exponential(1.0), Erlang(3, mean=1.0)],
    ],
    ids=["two-rates", "normal", "lognormal", "mixed"],
)
def test_all_k_continuous_equals_single_k(laws):
    one = [expected_order_statistic(laws, k=k) for k in range(1, len(laws) + 1)]
    assert expected_order_statistics(laws) == pytest.approx(one, rel=1e-9)


def test_all_k_closed_forms():
    h = np.cumsum(1.0 / np.arange(5, 0, -1))  # Renyi: 1/5, 1/5 + 1/4, ...
    assert expected_order_statistics(Exponential(2.0), n=5) == pytest.approx(h / 2, rel=1e-14)
    assert expected_order_statistics(Deterministic(0.3), n=4).tolist() == [0.3] * 4


def test_expected_from_cdf_accepts_a_negligible_tail_segment():
    # Regression: the minimum of 8 LogNormal(mean 1, scv 1) split at 0.8 (a cutoff's timer); the
    # segment [2, 6] integrates to 2e-9 and quad's error estimate (5e-12) exceeded the old per-segment
    # bound (4e-12), so a ConvergenceError was raised although the total is accurate to 1e-11.
    law = LogNormal.from_mean_scv(1.0, 1.0)
    lo, hi, pts = integration_range([law])
    got = expected_from_cdf(lambda x: order_statistic_cdf(law, x, k=1, n=8), lo, hi, [*pts, 0.8])
    # Independent: E[min] = integral of S(x)^8 dx, integrated in log-space (x = e^u).
    ref = integrate.quad(
        lambda u: (1 - float(law.cdf(np.array([math.exp(u)]))[0])) ** 8 * math.exp(u),
        -40,
        5,
        epsabs=0,
        epsrel=1e-13,
        limit=500,
    )[0]
    assert got == pytest.approx(ref, rel=1e-10)
