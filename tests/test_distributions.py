"""Distributions: moments and CDFs against closed forms and scipy.stats; sampling within standard errors."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import queuesgd
from queuesgd.distributions import (
    Deterministic,
    Distribution,
    Empirical,
    Erlang,
    Exponential,
    Gamma,
    HyperExponential,
    LogNormal,
    Normal,
    PhaseType,
    fit_phase_type,
)
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnitError
from queuesgd.rng import as_generator

# Each case: the distribution and the frozen scipy.stats law it must equal.
SCIPY_CASES = [
    (Exponential(2.0), stats.expon(scale=0.5)),
    (Exponential(mean=0.25), stats.expon(scale=0.25)),
    (Erlang(4, 8.0), stats.erlang(4, scale=1 / 8.0)),
    (Erlang(3, mean=1.5), stats.erlang(3, scale=0.5)),
    (Gamma(2.5, 5.0), stats.gamma(2.5, scale=0.2)),
    (Gamma(0.3, mean=2.0), stats.gamma(0.3, scale=2.0 / 0.3)),
    (Normal(10.0, 2.0), stats.norm(10.0, 2.0)),
    (LogNormal(-1.0, 0.5), stats.lognorm(s=0.5, scale=math.exp(-1.0))),
]
IDS = [repr(d) for d, _ in SCIPY_CASES]


@pytest.mark.parametrize(("dist", "ref"), SCIPY_CASES, ids=IDS)
def test_moments_match_scipy(dist, ref):
    assert dist.mean == pytest.approx(ref.mean(), rel=1e-12)
    assert dist.variance == pytest.approx(ref.var(), rel=1e-12, abs=1e-15)
    assert dist.std == pytest.approx(ref.std(), rel=1e-12, abs=1e-15)
    assert dist.scv == pytest.approx(ref.var() / ref.mean() ** 2, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("dist", "ref"), SCIPY_CASES, ids=IDS)
def test_cdf_matches_scipy(dist, ref):
    x = np.concatenate([[-1.0, 0.0], ref.ppf(np.linspace(0.01, 0.99, 25))])
    np.testing.assert_allclose(dist.cdf(x), ref.cdf(x), rtol=1e-10, atol=1e-14)
    assert isinstance(dist.cdf(float(ref.median())), float)
    assert dist.cdf(float(ref.median())) == pytest.approx(0.5, rel=1e-10)


ALL_NUMERIC = [d for d, _ in SCIPY_CASES] + [
    Deterministic(0.7),
    HyperExponential([0.2, 0.8], [0.5, 4.0]),
    Empirical([0.5, 1.0, 1.0, 3.0, 7.5]),
    PhaseType([0.6, 0.3], [[-3.0, 1.0], [0.5, -2.0]]),
    fit_phase_type(1.0, 0.3),
]


@pytest.mark.parametrize("dist", ALL_NUMERIC, ids=repr)
def test_sample_mean_within_standard_errors(dist):
    n = 100_000
    x = dist.sample(np.random.default_rng(12345), size=n)
    assert x.shape == (n,)
    se = math.sqrt(dist.variance / n)
    assert abs(x.mean() - dist.mean) <= 4 * se + 1e-12
    if dist.variance > 0:
        # Variance of the sample variance needs the 4th moment; 5% is many standard errors here.
        assert x.var() == pytest.approx(dist.variance, rel=0.05)


@pytest.mark.parametrize("dist", ALL_NUMERIC, ids=repr)
def test_sample_is_reproducible_and_shaped(dist):
    a = dist.sample(7, size=(3, 4))
    b = dist.sample(np.random.default_rng(7), size=(3, 4))
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    assert isinstance(dist.sample(1), float)
    assert dist.sample(1, size=0).shape == (0,)


@pytest.mark.parametrize("dist", ALL_NUMERIC, ids=repr)
def test_scaled_moments(dist):
    f = 3.5
    s = dist.scaled(f)
    assert type(s) is type(dist)
    assert s.mean == pytest.approx(f * dist.mean, rel=1e-12)
    assert s.variance == pytest.approx(f**2 * dist.variance, rel=1e-12, abs=1e-15)
    x = np.array([0.1, 0.7, 2.0, 5.0])
    np.testing.assert_allclose(s.cdf(f * x), dist.cdf(x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dist", ALL_NUMERIC, ids=repr)
def test_repr_round_trips(dist):
    rebuilt = eval(repr(dist), vars(queuesgd.distributions))  # our own repr, read back
    assert rebuilt == dist
    assert hash(rebuilt) == hash(dist)
    assert repr(dist).startswith(type(dist).__name__ + "(")
    assert pickle.loads(pickle.dumps(dist)) == dist


def test_reprs_are_readable():
    assert repr(Exponential(2.0)) == "Exponential(rate=2.0)"
    assert repr(Erlang(3, mean=1.5)) == "Erlang(k=3, rate=2.0)"
    assert (
        repr(HyperExponential([0.5, 0.5], [1, 2])) == "HyperExponential(probs=[0.5, 0.5], rates=[1.0, 2.0])"
    )
    assert repr(Empirical(np.arange(100.0))).startswith("<Empirical: 100 samples, mean=49.5")


def test_immutable():
    d = Exponential(2.0)
    with pytest.raises(AttributeError):
        d.rate = 3.0
    with pytest.raises(AttributeError):
        d._rate = 3.0
    h = HyperExponential([0.5, 0.5], [1.0, 2.0])
    with pytest.raises(ValueError):
        h.rates[0] = 5.0


# ----------------------------------------------------------------------------- closed forms


def test_hyperexponential_closed_form():
    p, r = np.array([0.3, 0.7]), np.array([1.0, 5.0])
    h = HyperExponential(p, r)
    mean = 0.3 / 1 + 0.7 / 5
    m2 = 2 * (0.3 / 1 + 0.7 / 25)
    assert h.mean == pytest.approx(mean, rel=1e-14)
    assert h.variance == pytest.approx(m2 - mean**2, rel=1e-14)
    x = np.array([0.0, 0.3, 2.0])
    np.testing.assert_allclose(h.cdf(x), 1 - 0.3 * np.exp(-x) - 0.7 * np.exp(-5 * x), rtol=1e-14)


def test_empirical_is_population_moments_and_ecdf():
    data = [4.0, 1.0, 2.0, 2.0, 9.0]
    e = Empirical(data)
    assert e.mean == pytest.approx(3.6)
    assert e.variance == pytest.approx(np.var(data, ddof=0))
    np.testing.assert_array_equal(e.cdf([0.5, 1.0, 2.0, 3.0, 9.0, 10.0]), [0, 0.2, 0.6, 0.6, 1.0, 1.0])
    assert set(np.unique(e.sample(0, size=1000))) <= set(data)
    assert Empirical([0.0, 0.0]).scv == 0.0


def test_deterministic_is_a_step():
    d = Deterministic("2ms")
    assert d.mean == 0.002 and d.variance == 0.0 and d.scv == 0.0
    np.testing.assert_array_equal(d.cdf([0.0, 0.0019, 0.002, 1.0]), [0, 0, 1, 1])
    np.testing.assert_array_equal(d.sample(0, size=3), [0.002] * 3)
    assert Deterministic(0).mean == 0.0


def test_lognormal_constructors():
    ln = LogNormal.from_mean_scv(2.0, 0.5)
    assert ln.mean == pytest.approx(2.0, rel=1e-14)
    assert ln.scv == pytest.approx(0.5, rel=1e-14)
    ln2 = LogNormal.from_mean_std("2s", "500ms")
    assert ln2.mean == pytest.approx(2.0, rel=1e-14)
    assert ln2.std == pytest.approx(0.5, rel=1e-13)
    ref = stats.lognorm(s=ln.sigma, scale=math.exp(ln.mu))
    assert ref.mean() == pytest.approx(2.0, rel=1e-12)


def test_gamma_constructors():
    g = Gamma.from_mean_std(3.0, 1.5)
    assert (g.mean, g.scv) == pytest.approx((3.0, 0.25), rel=1e-14)
    assert g == Gamma(4.0, mean=3.0)


def test_normal_allows_negative_mean_and_samples():
    n = Normal(-1.0, 1.0)
    assert n.cdf(-1.0) == pytest.approx(0.5)
    assert (n.sample(0, size=100) < 0).any()
    assert Normal(0.0, 1.0).scv == math.inf


# ----------------------------------------------------------------------------- phase-type


def test_phase_type_of_erlang_matches_closed_form():
    k, rate = 5, 3.0
    ph = Erlang(k, rate).to_phase_type()
    assert ph.phases == k
    assert ph.mean == pytest.approx(k / rate, rel=1e-13)
    assert ph.variance == pytest.approx(k / rate**2, rel=1e-13)
    # E[X^3] of Erlang = k (k+1) (k+2) / rate^3.
    assert ph.moment(3) == pytest.approx(k * (k + 1) * (k + 2) / rate**3, rel=1e-12)
    x = np.linspace(0, 5, 11)
    np.testing.assert_allclose(ph.cdf(x), stats.erlang(k, scale=1 / rate).cdf(x), rtol=1e-10, atol=1e-13)


def test_phase_type_of_hyperexponential_matches_closed_form():
    h = HyperExponential([0.25, 0.75], [0.5, 6.0])
    ph = h.to_phase_type()
    assert ph.mean == pytest.approx(0.25 / 0.5 + 0.75 / 6.0, rel=1e-13)
    assert ph.moment(2) == pytest.approx(2 * (0.25 / 0.25 + 0.75 / 36.0), rel=1e-13)
    assert ph.moment(0) == pytest.approx(1.0)
    x = np.array([[0.1, 1.0], [3.0, 10.0]])
    np.testing.assert_allclose(ph.cdf(x), h.cdf(x), rtol=1e-10)


def test_phase_type_exponential_and_atom_at_zero():
    assert Exponential(4.0).to_phase_type() == PhaseType([1.0], [[-4.0]])
    ph = PhaseType([0.5], [[-2.0]])  # half the mass at 0
    assert ph.mean == pytest.approx(0.25)
    assert ph.cdf(0.0) == pytest.approx(0.5)
    x = ph.sample(0, size=100_000)
    assert np.mean(x == 0) == pytest.approx(0.5, abs=4 * math.sqrt(0.25 / 100_000))


def test_phase_type_to_phase_type_is_identity():
    ph = PhaseType([1.0], [[-1.0]])
    assert ph.to_phase_type() is ph


@pytest.mark.parametrize(
    "dist", [Deterministic(1.0), Normal(1, 0.1), LogNormal(0, 1), Gamma(2, 1), Empirical([1.0])]
)
def test_to_phase_type_refuses_non_phase_type(dist):
    with pytest.raises(NotRepresentable, match="fit_phase_type"):
        dist.to_phase_type()


# ----------------------------------------------------------------------------- fitting


@pytest.mark.parametrize("scv", [0.2, 0.5, 1.0, 2.0, 5.0])
def test_fit_reproduces_mean_and_scv(scv):
    ph = fit_phase_type(0.4, scv)
    assert ph.mean == pytest.approx(0.4, rel=1e-9)
    assert ph.scv == pytest.approx(scv, rel=1e-9)


@pytest.mark.parametrize(
    "scv", [0.0101, 0.3, 1.0 - 1e-7, 1.0 + 1e-7, 20.0, 100.0, 1e4, 3.5e7, 1e8, 1e12, 1e13]
)
def test_fit_moments_at_30_digits(scv):
    """The fit's own (alpha, T) give mean -alpha T^-1 1 and E[X^2] = 2 alpha T^-2 1, here in mpmath: the
    promised 1e-9 holds near scv 1, for heavy tails and (for scv >= 1/k_max) below 1 (issue 25)."""
    import mpmath as mp

    mp.mp.dps = 30
    ph = fit_phase_type(0.4, scv)
    a, inv = mp.matrix([list(ph.alpha)]), mp.inverse(mp.matrix(ph.T.tolist()))
    ones = mp.matrix([[1.0]] * ph.phases)
    m1 = -(a * inv * ones)[0]
    m2 = 2 * (a * inv * inv * ones)[0]
    assert abs(m1 / mp.mpf(0.4) - 1) <= 1e-9
    assert abs((m2 / m1**2 - 1) / mp.mpf(scv) - 1) <= 1e-9


@pytest.mark.parametrize("scv", [1e14, 1e300])
def test_fit_refuses_an_scv_no_two_phase_generator_holds(scv):
    # the second phase's rate would be 1 / scv of the first's: PhaseType refuses such a T as singular
    with pytest.raises(InvalidParameterError, match=r"fit_phase_type.scv: .*at most 1e\+13"):
        fit_phase_type(0.4, scv)


def test_fit_structure():
    assert fit_phase_type(1.0, 1.0) == PhaseType([1.0], [[-1.0]])
    assert fit_phase_type(1.0, 0.5).phases == 2  # exactly Erlang(2)
    assert fit_phase_type(1.0, 0.3).phases == 4  # ceil(1/0.3)
    assert fit_phase_type(1.0, 5.0).phases == 2
    # Whitt's balanced means: p1/mu1 == p2/mu2 == mean/2.
    h = fit_phase_type(2.0, 5.0)
    np.testing.assert_allclose(h.alpha / -np.diag(h.T), [1.0, 1.0], rtol=1e-12)


def test_fit_small_scv_uses_k_max_erlang():
    ph = fit_phase_type(Deterministic(3.0), k_max=20)
    assert ph.phases == 20
    assert ph.mean == pytest.approx(3.0, rel=1e-12)
    assert ph.scv == pytest.approx(1 / 20, rel=1e-12)
    assert fit_phase_type(1.0, 0.001).scv == pytest.approx(0.01, rel=1e-12)


def test_fit_from_distribution():
    ln = LogNormal.from_mean_scv(2.0, 3.0)
    ph = fit_phase_type(ln)
    assert (ph.mean, ph.scv) == pytest.approx((2.0, 3.0), rel=1e-9)
    assert fit_phase_type("5ms", 1.0).mean == pytest.approx(0.005)


@settings(max_examples=60, deadline=None)
@given(
    mean=st.floats(min_value=1e-4, max_value=1e4),
    scv=st.floats(min_value=0.0101, max_value=50.0),
)
def test_fit_property(mean, scv):
    ph = fit_phase_type(mean, scv)
    assert ph.mean == pytest.approx(mean, rel=1e-9)
    assert ph.scv == pytest.approx(scv, rel=1e-9)


# ----------------------------------------------------------------------------- symbolic


def test_symbolic_exponential():
    lam = sympy.Symbol("lambda", positive=True)
    e = Exponential(lam)
    assert sympy.simplify(e.mean - 1 / lam) == 0
    assert sympy.simplify(e.variance - 1 / lam**2) == 0
    assert e.scv == 1
    assert e.is_symbolic
    m = sympy.Symbol("m", positive=True)
    assert Exponential(mean=m).mean == m
    assert e.scaled(2).mean == 2 / lam
    assert e.subs({lam: 4}) == Exponential(4.0)
    assert str(e) == "Exponential(rate=lambda)"
    with pytest.raises(InvalidParameterError, match=r"Exponential\.rate.*numeric parameters"):
        e.sample(0)
    with pytest.raises(InvalidParameterError, match="numeric parameters"):
        e.cdf(1.0)


def test_symbolic_erlang_and_deterministic():
    mu, d = sympy.symbols("mu d", positive=True)
    er = Erlang(3, mu)
    assert sympy.simplify(er.mean - 3 / mu) == 0
    assert sympy.simplify(er.variance - 3 / mu**2) == 0
    assert er.scv == sympy.Rational(1, 3)
    det = Deterministic(d)
    assert det.mean == d and det.variance == 0
    assert Exponential(sympy.Rational(1, 3)).mean == 3


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Exponential(-1.0), "Exponential.rate"),
        (lambda: Exponential(0.0), "Exponential.rate"),
        (lambda: Exponential(), "Exponential.rate"),
        (lambda: Exponential(1.0, mean=1.0), "Exponential.rate"),
        (lambda: Exponential("2ms"), "Exponential.rate"),
        (lambda: Exponential(mean="2 parsecs"), "Exponential.mean"),
        (lambda: Exponential(float("nan")), "Exponential.rate"),
        (lambda: Exponential(True), "Exponential.rate"),
        (lambda: Deterministic(-1.0), "Deterministic.value"),
        (lambda: Erlang(0, 1.0), "Erlang.k"),
        (lambda: Erlang(2.5, 1.0), "Erlang.k"),
        (lambda: Erlang(2), "Erlang.rate"),
        (lambda: Erlang(2, -1.0), "Erlang.rate"),
        (lambda: HyperExponential([0.5, 0.6], [1, 2]), "HyperExponential.probs"),
        (lambda: HyperExponential([0.5, 0.5], [1]), "HyperExponential.rates"),
        (lambda: HyperExponential([0.5, 0.5], [1, 0]), "HyperExponential.rates"),
        (lambda: HyperExponential("ab", [1]), "HyperExponential.probs"),
        (lambda: Normal(1.0, 0.0), "Normal.std"),
        (lambda: Normal(float("inf"), 1.0), "Normal.mean"),
        (lambda: LogNormal(0.0, -1.0), "LogNormal.sigma"),
        (lambda: LogNormal.from_mean_scv(-1.0, 1.0), "LogNormal.mean"),
        (lambda: Gamma(0.0, 1.0), "Gamma.shape"),
        (lambda: Gamma(1.0), "Gamma.rate"),
        (lambda: Gamma.from_mean_scv(1.0, 0.0), "Gamma.scv"),
        (lambda: Empirical([]), "Empirical.samples"),
        (lambda: Empirical([1.0, -2.0]), "Empirical.samples"),
        (lambda: Empirical([1.0, float("nan")]), "Empirical.samples"),
        (lambda: PhaseType([0.5, 0.6], [[-1, 0], [0, -1]]), "PhaseType.alpha"),
        (lambda: PhaseType([-0.1, 1.0], [[-1, 0], [0, -1]]), "PhaseType.alpha"),
        (lambda: PhaseType([1.0], [[-1, 0], [0, -1]]), "PhaseType.T"),
        (lambda: PhaseType([1.0, 0.0], [[-1, -1], [0, -1]]), "PhaseType.T"),
        (lambda: PhaseType([1.0, 0.0], [[-1, 2], [0, -1]]), "PhaseType.T"),
        (lambda: PhaseType([1.0, 0.0], [[-1, 1], [1, -1]]), "PhaseType.T"),
        (lambda: PhaseType([1.0], "x"), "PhaseType.T"),
        (lambda: fit_phase_type(1.0), "fit_phase_type.scv"),
        (lambda: fit_phase_type(1.0, -0.5), "fit_phase_type.scv"),
        (lambda: fit_phase_type(Exponential(1.0), 2.0), "fit_phase_type.scv"),
        (lambda: fit_phase_type(0.0, 1.0), "fit_phase_type.mean"),
        (lambda: fit_phase_type(1.0, 0.5, k_max=0), "fit_phase_type.k_max"),
        (lambda: fit_phase_type(Exponential(sympy.Symbol("a"))), "Exponential.rate"),
        (lambda: Exponential(1.0).scaled(0.0), "Exponential.scaled.factor"),
        (lambda: Normal(1.0, 1.0).scaled(sympy.Symbol("f")), "Normal.scaled.factor"),
    ],
)
def test_bad_parameters_name_the_field(build, field):
    with pytest.raises(InvalidParameterError) as info:
        build()
    assert info.value.field == field
    assert str(info.value).startswith(field + ": got ")


def test_unit_strings_errors_are_unit_errors():
    with pytest.raises(UnitError, match=r"^Deterministic\.value"):
        Deterministic("10MB")


@pytest.mark.parametrize("rng", [None, 1.5, True, -1, "seed", np.random.RandomState(0)])
def test_rng_must_be_generator_or_seed(rng):
    with pytest.raises(InvalidParameterError, match="Generator"):
        Exponential(1.0).sample(rng)
    with pytest.raises(InvalidParameterError) as info:
        as_generator(rng)
    assert info.value.field == "rng"


@pytest.mark.parametrize("size", [-1, 1.5, (2, -1), "3"])
def test_bad_size(size):
    with pytest.raises(InvalidParameterError, match="^size"):
        Exponential(1.0).sample(0, size=size)


def test_bad_cdf_argument():
    with pytest.raises(InvalidParameterError, match="^x"):
        Exponential(1.0).cdf("abc")
    with pytest.raises(InvalidParameterError, match="^x"):
        Exponential(1.0).cdf([1.0, float("nan")])


def test_all_public_names_exported():
    for name in [
        "Distribution",
        "Exponential",
        "Deterministic",
        "Erlang",
        "HyperExponential",
        "Normal",
        "LogNormal",
        "Gamma",
        "Empirical",
        "PhaseType",
        "fit_phase_type",
    ]:
        assert getattr(queuesgd, name) is getattr(queuesgd.distributions, name)
    assert issubclass(Exponential, Distribution)


@pytest.mark.parametrize(
    ("law", "x", "reference"),
    [
        # far in the tail, where 1 - cdf(x) rounds to 0; references in mpmath at 30 digits
        (Exponential(1.0), 50.0, lambda mp: mp.exp(-50)),
        (Erlang(3, 2.0), 40.0, lambda mp: mp.gammainc(3, 80, mp.inf, regularized=True)),
        (Gamma(0.5, 1.0), 45.0, lambda mp: mp.gammainc(0.5, 45, mp.inf, regularized=True)),
        (LogNormal(0.0, 1.0), 1e15, lambda mp: mp.erfc(mp.log(mp.mpf(10) ** 15) / mp.sqrt(2)) / 2),
        (Normal(1.0, 0.1), 3.0, lambda mp: mp.erfc(20 / mp.sqrt(2)) / 2),
        (HyperExponential([0.25, 0.75], [1.0, 4.0]), 40.0, lambda mp: mp.exp(-40) / 4 + 3 * mp.exp(-160) / 4),
        (Empirical([1.0, 2.0, 3.0, 3.0]), 2.5, lambda mp: mp.mpf(1) / 2),
        (Deterministic(2.0), 1.999, lambda mp: mp.mpf(1)),
    ],
    ids=["exp", "erlang", "gamma", "lognormal", "normal", "hyperexp", "empirical", "deterministic"],
)
def test_sf_is_exact_in_the_tail(law, x, reference):
    import mpmath as mp

    mp.mp.dps = 30
    want = float(reference(mp))
    assert law.exact_sf and law.sf(x) == pytest.approx(want, rel=1e-12)
    body = np.linspace(0.0, 2.0 * law.mean, 9)
    np.testing.assert_allclose(law.cdf(body) + law.sf(body), 1.0, rtol=0, atol=1e-14)  # each to its own 1e-15


def test_sf_of_laws_without_a_formula_is_one_minus_cdf():
    ph = fit_phase_type(1.0, 0.5)
    x = np.array([0.1, 1.0, 5.0])
    assert not ph.exact_sf
    np.testing.assert_array_equal(ph.sf(x), 1.0 - ph.cdf(x))
    from queuesgd.distributions import Shifted

    assert Shifted(LogNormal(0.0, 1.0), 0.5).exact_sf and not Shifted(ph, 0.5).exact_sf
    assert Shifted(Exponential(1.0), 1.0).sf(51.0) == pytest.approx(math.exp(-50.0), rel=1e-14)
