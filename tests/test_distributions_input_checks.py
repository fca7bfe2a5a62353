"""Bad input to the laws of queuesgd.distributions: refused naming the field, or flagged, never raw.

Found by an input-fuzzing audit (findings 4, 10, 15, 16): ``sample(0, size=10**10)`` raised NumPy's
``_ArrayMemoryError`` (74.5 GiB); ``cdf(10**400)`` raised ``OverflowError`` and ``cdf("3")`` read 3;
``check_phases(-1, "x")`` returned -1; ``LogNormal(1000, 0.5).mean``, ``Normal(1, 1e300).variance`` and
a phase-type law's variance raised ``OverflowError``. The good inputs beside them are checked against
closed forms (they must keep their values and raise no warning).
"""

import math
import warnings

import numpy as np
import pytest

from queuesgd.distributions import (
    MAX_PHASES,
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
    check_phases,
)
from queuesgd.errors import AccuracyWarning, InvalidParameterError, StateSpaceTooLargeError


# ---- sample(size): at most MAX_SAMPLES draws, refused before anything is allocated -------------------------
@pytest.mark.parametrize("size", [10**10, (10**5, 10**5), (0, 10**30), (10**12,), (3, 10**20)])
def test_a_sample_larger_than_max_samples_is_refused_naming_size(size):
    with pytest.raises(InvalidParameterError, match=r"^size: got .*at most 134,217,728 draws") as info:
        Exponential(1.0).sample(0, size=size)
    assert info.value.field == "size"


def test_sample_sizes_below_the_cap_keep_their_shapes_and_values():
    assert Exponential(1.0).sample(0, size=(2, 0)).shape == (2, 0)
    draws = Deterministic(0.25).sample(0, size=(3, 4))
    assert draws.shape == (3, 4) and np.all(draws == 0.25)
    x = Exponential(2.0).sample(1, size=200_000)  # the sample mean of Exp(2): 1/2 within 5 standard errors
    assert abs(x.mean() - 0.5) < 5 * 0.5 / math.sqrt(x.size)


# ---- cdf(x), sf(x): real numbers only ---------------------------------------------------------------------
@pytest.mark.parametrize("x", [10**400, "3", True, [1.0, "2"], [10**400], np.bool_(False), b"1"])
@pytest.mark.parametrize("method", ["cdf", "sf"])
def test_cdf_and_sf_refuse_what_is_not_a_real_number_naming_x(method, x):
    with pytest.raises(InvalidParameterError, match=r"^x: got ") as info:
        getattr(Exponential(1.0), method)(x)
    assert info.value.field == "x"


def test_cdf_and_sf_of_numbers_keep_their_values():
    x = np.array([0.0, 0.5, 2.0, np.inf])
    assert Exponential(2.0).cdf(x) == pytest.approx(1 - np.exp(-2 * x), rel=1e-15, abs=0)
    assert Exponential(2.0).sf(x).tolist() == np.exp(-2 * x).tolist()
    assert Exponential(2.0).cdf(np.int64(1)) == pytest.approx(1 - math.exp(-2.0), rel=1e-15)
    assert Exponential(2.0).cdf(-np.inf) == 0.0


# ---- moments beyond the double range: inf and an AccuracyWarning, never a raw exception ----------------
OVERFLOWING = [
    (LogNormal(1000.0, 0.5), "mean"),  # e^1000.125
    (LogNormal(1000.0, 0.5), "variance"),
    (LogNormal(0.0, 30.0), "variance"),  # e^1800 (its mean e^450 is finite)
    (LogNormal(0.0, 30.0), "scv"),  # e^900 - 1
    (LogNormal(0.0, 40.0), "std"),
    (Normal(1.0, 1e300), "variance"),  # 1e600
    (Normal(1e-200, 1.0), "scv"),  # 1e400
    (PhaseType([1.0], [[-1e-300]]), "variance"),  # 1e600
    (PhaseType([0.5, 0.5], np.eye(2) * -1e-310), "mean"),  # 1e310
    (Exponential(1e-200), "variance"),  # rate**2 underflows to 0
    (Gamma(2.0, 1e-200), "variance"),
    (Erlang(3, 1e-200), "std"),
    (HyperExponential([0.5, 0.5], [1e-200, 1.0]), "variance"),
    (Empirical([1e308, 1e308, 1e308]), "mean"),
    (Shifted(Exponential(1e-300), 1e300), "variance"),
]


@pytest.mark.parametrize(
    ("law", "moment"), OVERFLOWING, ids=lambda v: v if isinstance(v, str) else type(v).__name__
)
def test_a_moment_beyond_the_double_range_is_inf_with_an_accuracy_warning(law, moment):
    with pytest.warns(AccuracyWarning) as seen:
        assert getattr(law, moment) == math.inf
    assert any(f".{moment} overflows the range of a double" in str(w.message) for w in seen)


def test_a_phase_type_moment_beyond_the_double_range_is_inf_with_a_warning():
    with pytest.warns(AccuracyWarning, match="moment overflows"):
        assert PhaseType([1.0], [[-1e-300]]).moment(2) == math.inf


@pytest.mark.parametrize("k", [171, 1000])
def test_phase_type_moment_orders_are_bounded(k):
    accepted = r"accepted: an integer >= 0, at most 170"
    with pytest.raises(InvalidParameterError, match=rf"^PhaseType.moment.k: got .*{accepted}"):
        Exponential(1.0).to_phase_type().moment(k)


FINITE = [
    # (law, moment, closed form)
    (LogNormal(0.0, 26.0), "mean", math.exp(26.0**2 / 2)),
    (LogNormal(0.0, 30.0), "mean", math.exp(30.0**2 / 2)),
    (LogNormal(0.0, 1.0), "variance", math.expm1(1.0) * math.exp(1.0)),
    (Normal(1e300, 1e300), "scv", 1.0),  # (std / mean)**2: the variance overflows, the scv does not
    (Normal(2.0, 3.0), "scv", 9.0 / 4.0),
    (Normal(0.0, 1.0), "scv", math.inf),  # mean 0: inf by definition, not an overflow
    (Exponential(1e-150), "variance", 1e300),
    (Erlang(3, 2.0).to_phase_type(), "variance", 3 / 4),
    (PhaseType([1.0], [[-1e-150]]), "variance", 1e300),
    (Gamma(2.0, 4.0), "scv", 0.5),
    (HyperExponential([0.5, 0.5], [1.0, 2.0]), "variance", 0.6875),
]


@pytest.mark.parametrize(("law", "moment", "exact"), FINITE, ids=lambda v: str(v)[:30])
def test_moments_within_the_double_range_keep_their_values_without_a_warning(law, moment, exact):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(law, moment) == pytest.approx(exact, rel=1e-12)


def test_phase_type_moments_keep_their_closed_forms():
    ph = Erlang(3, 2.0).to_phase_type()  # E[X^k] = k (k + 1) ... (k + j - 1) / rate^j
    assert [ph.moment(j) for j in range(4)] == pytest.approx([1.0, 1.5, 3.0, 7.5], rel=1e-13)


def test_symbolic_moments_are_untouched():
    import sympy

    lam = sympy.Symbol("lambda", positive=True)
    assert Exponential(lam).variance == lam**-2
    assert Erlang(3, lam).scv == sympy.Rational(1, 3)
    assert Deterministic(sympy.Rational(1, 3)).mean == sympy.Rational(1, 3)


# ---- check_phases ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((-1, "x"), {}, "count"),
        ((0, "x"), {}, "count"),
        ((float("nan"), "x"), {}, "count"),
        ((2.5, "x"), {}, "count"),
        ((True, "x"), {}, "count"),
        (("3", "x"), {}, "count"),
        ((None, "x"), {}, "count"),
        ((3, ""), {}, "what"),
        ((3, None), {}, "what"),
        ((3, "x"), {"scv": -1.0}, "scv"),
        ((3, "x"), {"scv": float("nan")}, "scv"),
    ],
)
def test_check_phases_refuses_what_is_not_a_count_naming_the_field(args, kwargs, field):
    with pytest.raises(InvalidParameterError, match=rf"^{field}: got ") as info:
        check_phases(*args, **kwargs)
    assert info.value.field == field


def test_check_phases_keeps_its_counts_and_its_refusal_above_max_phases():
    assert check_phases(20, "Erlang(k=20)") == 20
    assert check_phases(np.int64(MAX_PHASES), "x") == MAX_PHASES
    assert check_phases(4.0, "x", scv=0.25) == 4
    with pytest.raises(StateSpaceTooLargeError, match=r"1,001 phases.*nearly constant"):
        check_phases(MAX_PHASES + 1, "x", scv=1e-3)
