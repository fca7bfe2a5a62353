"""Sums of independent laws: ``Convolution`` and ``sum_of``, against SciPy's closed forms and sampling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

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
    sum_of,
)
from queuesgd.errors import InvalidParameterError, NotRepresentable

X = np.linspace(0.0, 6.0, 61)


def test_two_exponentials_of_one_rate_are_an_erlang_2_by_scipy():
    c = Convolution(Exponential(1.5), Exponential(1.5))
    np.testing.assert_allclose(c.cdf(X), stats.gamma.cdf(X, 2, scale=1 / 1.5), rtol=1e-10, atol=1e-13)


def test_two_exponentials_of_different_rates_are_hypoexponential():
    a, b = 1.0, 3.0
    c = Convolution(Exponential(a), Exponential(b))
    # P(X + Y <= x) = 1 - (b e^{-a x} - a e^{-b x}) / (b - a)
    exact = 1 - (b * np.exp(-a * X) - a * np.exp(-b * X)) / (b - a)
    np.testing.assert_allclose(c.cdf(X), exact, rtol=1e-10, atol=1e-13)
    assert c.mean == pytest.approx(1 / a + 1 / b, rel=1e-15)
    assert c.variance == pytest.approx(1 / a**2 + 1 / b**2, rel=1e-15)


def test_chained_phase_type_moments_match_the_sum():
    h = HyperExponential([0.3, 0.7], [0.5, 4.0])
    e = Erlang(3, 2.0)
    ph = Convolution(h, e).to_phase_type()
    assert isinstance(ph, PhaseType)
    assert ph.mean == pytest.approx(h.mean + e.mean, rel=1e-12)
    assert ph.variance == pytest.approx(h.variance + e.variance, rel=1e-12)


def test_deterministic_parts_shift_the_cdf():
    c = Convolution(Exponential(2.0), Deterministic(0.5), Shifted(Exponential(2.0), 0.25))
    shifted = stats.gamma.cdf(X - 0.75, 2, scale=0.5)
    np.testing.assert_allclose(c.cdf(X), np.where(X < 0.75, 0.0, shifted), rtol=1e-10, atol=1e-13)
    with pytest.raises(NotRepresentable, match="deterministic"):
        c.to_phase_type()
    only = Convolution(Deterministic(0.5), Deterministic(0.25))
    assert only.cdf([0.7, 0.75, 0.8]).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("law", [LogNormal.from_mean_scv(1.0, 0.5), Empirical([0.1, 0.2, 0.4])])
def test_a_law_with_no_exact_sum_is_refused(law):
    with pytest.raises(NotRepresentable, match="fit_phase_type"):
        Convolution(Exponential(1.0), law)
    with pytest.raises(NotRepresentable):
        sum_of(law, 2)


@pytest.mark.parametrize("law", [Gamma(2.0, 1.0), Normal(1.0, 0.1)])
def test_gamma_and_normal_parts_are_refused_in_a_mixed_sum(law):
    # sum_of keeps their own family; a Convolution with a phase-type part has no exact law
    with pytest.raises(NotRepresentable, match="fit_phase_type"):
        Convolution(Exponential(1.0), law)


def test_samples_are_sums_of_samples():
    c = Convolution(Exponential(1.0), Erlang(2, 4.0), Deterministic(0.2))
    x = c.sample(np.random.default_rng(3), 200_000)
    se = np.sqrt(c.variance / x.size)
    assert abs(x.mean() - c.mean) < 4 * se
    assert x.min() >= 0.2


def test_bad_parts_name_the_field():
    with pytest.raises(InvalidParameterError, match="Convolution.parts"):
        Convolution()
    with pytest.raises(InvalidParameterError, match=r"Convolution.parts\[1\]"):
        Convolution(Exponential(1.0), 3.0)
    with pytest.raises(InvalidParameterError, match="sum_of.count"):
        sum_of(Exponential(1.0), 0)


def test_pickle_and_equality_round_trip():
    c = Convolution(Exponential(1.0), Deterministic(0.5))
    back = pickle.loads(pickle.dumps(c))
    assert back == c and hash(back) == hash(c)
    np.testing.assert_allclose(back.cdf(X), c.cdf(X), rtol=0, atol=0)
    assert repr(c) == "Convolution(Exponential(rate=1.0), Deterministic(value=0.5))"


def test_scaled_sum_is_the_sum_of_scaled_parts():
    c = Convolution(Exponential(1.0), Erlang(2, 3.0)).scaled(2.0)
    ref = Convolution(Exponential(0.5), Erlang(2, 1.5))
    np.testing.assert_allclose(c.cdf(X), ref.cdf(X), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------- sum_of: closed families
def test_sum_of_exponentials_and_erlangs_is_erlang_by_scipy():
    s = sum_of(Exponential(2.0), 4)
    assert s == Erlang(4, 2.0)
    np.testing.assert_allclose(s.cdf(X), stats.gamma.cdf(X, 4, scale=0.5), rtol=1e-10, atol=1e-13)
    assert sum_of(Erlang(3, 2.0), 2) == Erlang(6, 2.0)


def test_sum_of_gammas_is_gamma_by_scipy():
    g = Gamma.from_mean_scv(0.5, 0.4)
    s = sum_of(g, 3)
    np.testing.assert_allclose(s.cdf(X), stats.gamma.cdf(X, 3 * g.shape, scale=1 / g.rate), rtol=1e-10)


def test_sum_of_normals_is_normal_by_scipy():
    s = sum_of(Normal(1.0, 0.2), 5)
    np.testing.assert_allclose(s.cdf(X), stats.norm.cdf(X, 5.0, 0.2 * np.sqrt(5)), rtol=1e-10, atol=1e-13)


def test_sum_of_shifted_and_deterministic():
    assert sum_of(Deterministic(0.1), 3).mean == pytest.approx(0.3, rel=1e-15)
    s = sum_of(Shifted(Exponential(1.0), 0.5), 2)
    assert isinstance(s, Shifted) and s.shift == pytest.approx(1.0) and s.base == Erlang(2, 1.0)


def test_sum_of_phase_type_equals_the_convolution():
    h = HyperExponential([0.4, 0.6], [1.0, 5.0])
    np.testing.assert_allclose(sum_of(h, 3).cdf(X), Convolution(h, h, h).cdf(X), rtol=1e-12, atol=1e-14)
    assert sum_of(h, 1) is h


@pytest.mark.parametrize("count", [3, 4, 8])
@pytest.mark.parametrize(("probs", "rates"), [([0.99, 0.01], [1.0, 0.01]), ([0.9, 0.1], [20.0, 1.0])])
def test_sums_of_hyperexponentials_chained_three_times_and_more(probs, rates, count):
    # The chain's exit rates, read back from its row sums, cancelled to -6e-19 and PhaseType refused
    # them (audit 2026-11-27): sum_of(law, 3) raised, and with it LocalSGD(3). Mean and variance of
    # a sum of independent copies: count times the law's, the law's from its closed form.
    p, r = np.array(probs), np.array(rates)
    mean = float(p @ (1 / r))
    var = float(2 * p @ (1 / r**2)) - mean**2
    s = sum_of(HyperExponential(probs, rates), count)
    assert s.mean == pytest.approx(count * mean, rel=1e-12)
    assert s.variance == pytest.approx(count * var, rel=1e-11)


def test_a_chained_law_absorbs_from_its_last_part_only():
    # The sum of `count` copies of a two-branch law absorbs only from the last copy's two phases, at
    # that copy's rates; the others' row sums round to about +-1e-16 of their rates (41% of random
    # laws gave +4e-16), which exit_rates read as absorption rates and a Petri net as exit transitions.
    from queuesgd import PetriNet
    from queuesgd.schemes.laws import add_phase_transitions

    rng = np.random.default_rng(0)
    for _ in range(200):
        p, rates = rng.uniform(0.01, 0.99), rng.uniform(0.1, 10.0, 2)
        count = int(rng.integers(2, 6))
        law = sum_of(HyperExponential([p, 1 - p], rates), count).to_phase_type()
        np.testing.assert_array_equal(law.exit_rates[:-2], 0.0)
        np.testing.assert_allclose(law.exit_rates[-2:], rates, rtol=1e-15)
    net = PetriNet("chain")
    phases = [net.place(f"w[{i}]", int(i == 0)).name for i in range(law.phases)]
    net.place("done")
    add_phase_transitions(net, "w", law, phases, "done")
    ends = sorted(t for t in net.transitions if ".end" in t)
    assert ends == [f"w.end[{law.phases - 2}]", f"w.end[{law.phases - 1}]"]
