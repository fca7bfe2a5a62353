"""Alpha-beta calibration: the fit against hand-computed lines and numpy.polyfit; live runs with a Shaper."""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.harness.calibrate import AlphaBeta, calibrate_allreduce, calibrate_p2p, fit_alpha_beta

SIZES = [4096, 1 << 20, 8 << 20]


@pytest.mark.parametrize("n", [2, 3, 8])
def test_fit_inverts_the_ring_formula(n):
    # Ring all-reduce (Patarasuk & Yuan): t = 2(n-1) alpha + 2(n-1)/n M/B, written out here.
    alpha, bandwidth = 250e-6, 40e6
    times = [2 * (n - 1) * alpha + 2 * (n - 1) / n * m / bandwidth for m in SIZES]
    fit = fit_alpha_beta(SIZES, times, kind="allreduce", world_size=n)
    assert fit.alpha == pytest.approx(alpha, rel=1e-9)
    assert fit.bandwidth == pytest.approx(bandwidth, rel=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)
    assert (fit.kind, fit.world_size) == ("allreduce", n)
    assert [m for m, _ in fit.samples] == SIZES


def test_fit_inverts_one_message():
    # 2 ms + M / (5 MB/s): hand values 2.8192 ms, 211.7152 ms, 1679.7216 ms.
    times = [0.0028192, 0.2117152, 1.6797216]
    fit = fit_alpha_beta(SIZES, times, kind="p2p")
    assert fit.alpha == pytest.approx(0.002, rel=1e-9)
    assert fit.bandwidth == pytest.approx(5e6, rel=1e-9)
    assert fit.world_size == 2


def test_medians_per_size_are_what_is_fitted():
    # Medians by hand: size 1000 -> median(3, 1, 2) = 2 ms; size 3000 -> median(4, 6) = 5 ms.
    sizes = [1000, 1000, 1000, 3000, 3000]
    times = [0.003, 0.001, 0.002, 0.004, 0.006]
    fit = fit_alpha_beta(sizes, times, kind="p2p")
    assert fit.samples == ((1000.0, 0.002), (3000.0, 0.005))
    # Two points: the line goes through both: b = 3 ms / 2000 B, a = 2 ms - 1000 b = 0.5 ms.
    assert fit.alpha == pytest.approx(0.0005, rel=1e-9)
    assert fit.bandwidth == pytest.approx(2000 / 0.003, rel=1e-9)


def test_relative_least_squares_matches_numpy_polyfit():
    # np.polyfit with w = 1/t minimizes sum(((a + b M - t) / t)^2): an independent solver of the same problem.
    rng = np.random.default_rng(7)
    sizes = np.array([4096, 65536, 1 << 20, 4 << 20, 16 << 20], dtype=float)
    times = (3e-4 + sizes / 1e8) * rng.lognormal(0.0, 0.05, sizes.size)
    fit = fit_alpha_beta(sizes, times, kind="p2p")
    slope, intercept = np.polyfit(sizes, times, 1, w=1 / times)
    assert intercept > 0 and slope > 0  # the constraint is not active here
    assert fit.alpha == pytest.approx(intercept, rel=1e-8)
    assert fit.bandwidth == pytest.approx(1 / slope, rel=1e-8)
    # r2 of the fitted line, computed from the samples by the textbook formula.
    t = np.array([s for _, s in fit.samples])
    pred = intercept + slope * sizes
    assert fit.r2 == pytest.approx(1 - np.sum((t - pred) ** 2) / np.sum((t - t.mean()) ** 2), rel=1e-9)


def test_negative_intercept_falls_back_to_the_large_message_slope():
    # Medians measured through a 100 Mbit/s tbf (ping-pong, docs/harness-network.md): 4 KB fits in the
    # bucket's burst and goes faster than M / B, so the free relative fit has a < 0 (checked with polyfit).
    # The fit then takes a = 0 and b = sum(M t) / sum(M^2), computed here by hand.
    sizes = [4096.0, 1048576.0, 8388608.0]
    times = [0.00019, 0.0872, 0.70223]
    slope_free, intercept_free = np.polyfit(sizes, times, 1, w=1 / np.array(times))
    assert intercept_free < 0 < slope_free
    b = (4096 * 0.00019 + 1048576 * 0.0872 + 8388608 * 0.70223) / (4096**2 + 1048576**2 + 8388608**2)
    fit = fit_alpha_beta(sizes, times, kind="p2p")
    assert fit.alpha == 0.0
    assert fit.bandwidth == pytest.approx(1 / b, rel=1e-12)
    assert fit.bandwidth == pytest.approx(11.95e6, rel=0.01)  # 95.6 % of 12.5 MB/s: the TCP goodput


def test_times_falling_with_size_give_no_bandwidth_term():
    # b < 0 is refused: b = 0 and a minimizes sum((a - t)/t)^2, so a = sum(1/t) / sum(1/t^2); by hand
    # for t = (0.002, 0.004): sum(1/t) = 750, sum(1/t^2) = 312500 -> a = 0.0024.
    fit = fit_alpha_beta([1000, 2000], [0.004, 0.002], kind="p2p")
    assert fit.alpha == pytest.approx(0.0024, rel=1e-12)
    assert math.isinf(fit.bandwidth)


def test_flat_times_give_infinite_bandwidth():
    # Same time at every size: t = a, b = 0 -> B = inf; the ring's alpha is a / (2 (n - 1)).
    fit = fit_alpha_beta([1000, 2000, 3000], [0.004, 0.004, 0.004], world_size=3)
    assert fit.alpha == pytest.approx(0.001, rel=1e-12)
    assert math.isinf(fit.bandwidth)
    assert fit.r2 == 1.0
    assert fit.time(1e9) == pytest.approx(0.004, rel=1e-12)


def test_alphabeta_time_is_the_model():
    ab = AlphaBeta(alpha=2e-4, bandwidth=1e8, samples=(), r2=1.0, kind="allreduce", world_size=5)
    # 8 alpha + 8/5 M/B at M = 1e7: 1.6 ms + 0.16 s.
    assert ab.time(1e7) == pytest.approx(0.1616, rel=1e-12)
    assert AlphaBeta(2e-4, 1e8, (), 1.0, kind="p2p").time(1e7) == pytest.approx(0.1002, rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nbytes": [1000, 1000], "seconds": [0.1, 0.2]}, "nbytes"),
        ({"nbytes": [1000, 2000], "seconds": [0.1, 0.0]}, "seconds"),
        ({"nbytes": [1000, 2000], "seconds": [0.1]}, "seconds"),
        ({"nbytes": [-1, 2000], "seconds": [0.1, 0.2]}, "nbytes"),
        ({"nbytes": [1000, 2000], "seconds": [0.1, 0.2], "world_size": 1}, "world_size"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError) as err:
        fit_alpha_beta(**kwargs)
    assert err.value.field == field


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(UnknownNameError, match="'allreduce', 'p2p'"):
        fit_alpha_beta([1, 2], [1, 2], kind="tree")


def test_live_calibration_checks_arguments_before_launching():
    with pytest.raises(InvalidParameterError, match="sizes"):
        calibrate_allreduce(2, sizes=(4096, 4093))  # both round up to 1024 float32 elements
    with pytest.raises(InvalidParameterError, match="world_size"):
        calibrate_allreduce(1)
    with pytest.raises(InvalidParameterError, match="repeats"):
        calibrate_p2p(repeats=0)


# -- live runs (torch) -----------------------------------------------------------------------------


def _require_live():
    pytest.importorskip("torch")  # an optional extra; the harness's own modules must import
    from queuesgd.harness.shaping import Shaper

    return Shaper


@pytest.mark.timing
@pytest.mark.parametrize(("n", "bandwidth", "latency"), [(2, 50e6, 0.002), (3, 40e6, 0.003)])
def test_allreduce_fit_recovers_the_shaper(n, bandwidth, latency):
    # The shaper makes every all-reduce take the ring model time (it is set much slower than loopback:
    # 4 KB takes 0.4-5 ms real, 8-12 ms shaped; 4 MB takes ~3 ms real, 84-140 ms shaped).
    Shaper = _require_live()
    fit = calibrate_allreduce(
        n, sizes=(4096, 1 << 20, 4 << 20), repeats=7, shaper=Shaper(bandwidth, latency), timeout=120
    )
    # Medians of 7: a few repeats delayed by other processes on the 2 cores do not move them.
    assert fit.alpha == pytest.approx(latency, rel=0.10), fit
    assert fit.bandwidth == pytest.approx(bandwidth, rel=0.10), fit
    assert fit.r2 > 0.99, fit


@pytest.mark.timing
def test_p2p_fit_recovers_the_shaper():
    Shaper = _require_live()
    # Ping-pong through the shaper: half a round trip is one shaped message, 2 ms + M / (50 MB/s).
    fit = calibrate_p2p(sizes=(4096, 1 << 20, 4 << 20), repeats=7, shaper=Shaper(50e6, 0.002), timeout=120)
    assert fit.alpha == pytest.approx(0.002, rel=0.10), fit
    assert fit.bandwidth == pytest.approx(50e6, rel=0.10), fit
    assert fit.kind == "p2p"
