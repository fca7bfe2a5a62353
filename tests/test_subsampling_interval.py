"""The studentized subsampling interval that replaces batch means under heavy tails (queuesgd.subsampling).

Each number is checked by a second route: the windows' statistic by brute force over every window
(``sliding_window_view``), the interval's ends by putting them back into the self-normalized statistic
they must solve, the switch by the Student-t interval the light-tailed path still gives, and the coverage
against an exact value by mpmath.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from mp_laws import expected_max_lognormal
from numpy.lib.stride_tricks import sliding_window_view
from scipy import stats

from queuesgd.batchmeans import (
    BATCHES,
    batch_means,
    count_rate_interval,
    half_width,
    heavy_tailed,
    little_interval,
    ratio_interval,
)
from queuesgd.errors import InvalidParameterError
from queuesgd.subsampling import _window_sums, subsampling_interval


def _q_by_brute_force(z: np.ndarray, b: int, confidence: float) -> float:
    """The windows' ``sqrt(b) |mean| / sd`` quantile, every window summed on its own."""
    w = sliding_window_view(z, b)
    t = math.sqrt(b) * np.abs(w.mean(axis=1)) / w.std(axis=1, ddof=1)
    return float(np.quantile(t, confidence))


def _t_stat(x: np.ndarray, d: np.ndarray, theta: float) -> float:
    """``sqrt(n) mean(z) / sd(z)`` with ``z = x - theta d``, directly."""
    z = x - theta * d
    return math.sqrt(z.size) * z.mean() / z.std(ddof=1)


def test_mean_interval_is_the_symmetric_studentized_one():
    x = np.random.default_rng(3).pareto(1.5, 4_000) + 1.0
    m, (lo, hi) = subsampling_interval(x, block=200, confidence=0.9)
    q = _q_by_brute_force(x - x.mean(), 200, 0.9)
    half = q * x.std(ddof=1) / math.sqrt(x.size)
    assert m == pytest.approx(x.mean(), rel=1e-15)
    assert lo == pytest.approx(m - half, rel=1e-11) and hi == pytest.approx(m + half, rel=1e-11)


def test_ratio_interval_ends_solve_the_self_normalized_statistic():
    """Fieller's inversion: at each end ``|T(theta)| = q``, and the point estimate lies between them."""
    rng = np.random.default_rng(5)
    d = rng.lognormal(0.0, 2.0, 6_000)
    x = rng.integers(1, 5, 6_000).astype(float)
    theta, (lo, hi) = subsampling_interval(x, d, block=300)
    q = _q_by_brute_force(x - theta * d - (x - theta * d).mean(), 300, 0.95)
    assert theta == pytest.approx(x.sum() / d.sum(), rel=1e-15)
    assert lo < theta < hi
    assert abs(_t_stat(x, d, lo)) == pytest.approx(q, rel=1e-9)
    assert abs(_t_stat(x, d, hi)) == pytest.approx(q, rel=1e-9)


def test_window_sums_are_each_windows_own_beside_a_huge_value():
    """One value of 1e12 among values of 1e-3: every window without it is summed to 1e-12 of its own
    size. A difference of running sums (the naive way) is off by more than 1e-6 after the huge value."""
    x = np.random.default_rng(1).uniform(0, 1e-3, 5_000)
    x[100] = 1e12
    b = 250
    got = _window_sums(x, b)
    direct = np.array([math.fsum(x[j : j + b]) for j in range(x.size - b + 1)])
    clear = np.arange(got.size) > 100
    assert np.max(np.abs(got[clear] - direct[clear]) / direct[clear]) < 1e-12
    assert got[50] == pytest.approx(direct[50], rel=1e-15)
    c = np.concatenate([[0.0], np.cumsum(x)])
    naive = c[b:] - c[:-b]
    assert np.max(np.abs(naive[clear] - direct[clear]) / direct[clear]) > 1e-6


def test_light_tails_keep_the_student_t_interval_and_heavy_ones_switch():
    rng = np.random.default_rng(2)
    light = rng.exponential(size=10_000)
    assert not heavy_tailed(light)
    m, (lo, hi) = batch_means(light)
    half = half_width(light.reshape(BATCHES, -1).mean(axis=1))
    assert (lo, hi) == (m - half, m + half)
    heavy = rng.pareto(1.2, 10_000) + 1.0
    assert heavy_tailed(heavy)
    assert batch_means(heavy) == subsampling_interval(heavy, block=10_000 // BATCHES)
    ones = np.ones(10_000)
    assert ratio_interval(ones, heavy) == subsampling_interval(ones, heavy, block=10_000 // BATCHES)


def test_an_undecided_mean_duration_leaves_the_rate_without_an_upper_end():
    """Where ``q`` exceeds the durations' own t statistic, no upper end exists; the lower is at least 0."""
    d = np.random.default_rng(4).uniform(1e-3, 2e-3, 3_000)
    d[[500, 1_500, 2_500]] = 1e3  # nearly every window misses them: its statistic is large
    x = np.ones(d.size)
    theta, (lo, hi) = subsampling_interval(x, d, block=100)
    assert hi == math.inf and 0.0 <= lo <= theta
    assert math.sqrt(d.size) * d.mean() / d.std(ddof=1) < _q_by_brute_force(x - theta * d, 100, 0.95)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"block": 1}, "block"),
        ({"block": 300}, "block"),
        ({"block": 2.5}, "block"),
        ({"block": 10, "confidence": 95}, "confidence"),
        ({"block": 10, "confidence": 0.0}, "confidence"),
        ({"block": 10, "durations": np.ones(7)}, "durations"),
    ],
)
def test_bad_arguments_are_named(kwargs, field):
    with pytest.raises(InvalidParameterError, match=f"^{field}: "):
        subsampling_interval(np.ones(300), **kwargs)


def test_barrier_rounds_of_sigma_3_are_covered_as_asked_where_student_t_was_not():
    """200 seeds of 20,000 rounds of 8 workers of lognormal compute (sigma 3) and a 0.5 s phase, against
    ``8 / (E[max of 8] + 0.5)`` (mpmath). The Student-t interval of 20 batch ratios of the same rounds
    holds it far less often than 95% (a binomial tail below 1e-4); the repaired one plausibly 95% (above
    1e-3)."""
    from queuesgd.batchmeans import _batch_ratios
    from queuesgd.distributions import LogNormal
    from queuesgd.schemes.barrier.kofn_sim import simulate_rounds

    law = LogNormal(-4.5, 3.0)
    exact = 8 / (expected_max_lognormal(3.0, 8) + 0.5)
    old = new = 0
    for seed in range(200):
        rounds = simulate_rounds(law.sample(np.random.default_rng(seed), (20_000, 8)), phase=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            point, (lo, hi) = rounds.rate()
        new += lo <= exact <= hi
        half = half_width(_batch_ratios(rounds.gradients, rounds.duration, BATCHES))
        old += point - half <= exact <= point + half
    assert stats.binom.cdf(old, 200, 0.95) < 1e-4, old
    assert stats.binom.cdf(new, 200, 0.95) > 1e-3, new


def test_little_interval_is_the_customers_over_the_mean_cycles_interval_widened_to_the_rate():
    """``N / (the ends of the mean cycle's interval)``, reversed; a measured rate outside widens it."""
    cycles = np.random.default_rng(8).pareto(1.4, 8_000) + 1.0
    _, (lo_c, hi_c) = subsampling_interval(cycles, block=8_000 // BATCHES)
    lo, hi = little_interval(cycles, 4, 4 / cycles.mean())
    assert (lo, hi) == pytest.approx((4 / hi_c, 4 / lo_c), rel=1e-15)
    assert little_interval(cycles, 4, 10 * hi)[1] == 10 * hi
    assert little_interval(cycles, 4, lo / 10)[0] == lo / 10


def test_a_narrow_interval_far_from_zero_keeps_its_width():
    """Values of 1e8 plus a heavy tail: the interval is 1e-9 of the mean wide. Solving Fieller's quadratic
    about 0 would subtract two numbers of 1e32 to find one of 1e14; about the point estimate its
    half-width is ``q s / sqrt(n)`` to 1e-6 (doubles near 1e8 are 1.5e-8 apart)."""
    x = 1e8 + np.random.default_rng(6).pareto(1.5, 4_000)
    m, (lo, hi) = subsampling_interval(x, block=200)
    half = _q_by_brute_force(x - x.mean(), 200, 0.95) * x.std(ddof=1) / math.sqrt(x.size)
    assert hi - m == pytest.approx(half, rel=1e-6) and m - lo == pytest.approx(half, rel=1e-6)


@pytest.mark.parametrize(
    ("function", "args", "field"),
    [
        (little_interval, (np.ones(2), 4, 1.0), "cycles"),
        (little_interval, (np.ones(30), 0, 1.0), "customers"),
        (count_rate_interval, ([0.5, 2.0], 0.0, 1.0), "times"),
        (count_rate_interval, ([0.5], 1.0, 1.0), "t1"),
        (count_rate_interval, ([0.5], 0.0, 1.0, 1), "batches"),
    ],
)
def test_the_interval_helpers_name_a_bad_argument(function, args, field):
    with pytest.raises(InvalidParameterError, match=f"^{field}: "):
        function(*args)


def test_values_that_are_batches_already_keep_the_student_t_interval():
    """One value a batch (the Petri-net simulation passes its batches so): no windows to take, so the
    heavy path is not taken, whatever the tail; before this guard it refused ``block=1``."""
    heavy = np.random.default_rng(9).pareto(1.2, 400) + 1.0
    assert heavy_tailed(heavy)
    ones = np.ones(400)
    point, (lo, hi) = ratio_interval(ones, heavy, batches=400)
    half = half_width(ones / heavy)
    assert (lo, hi) == pytest.approx((point - half, point + half), rel=1e-12)
    m, (lo, hi) = batch_means(heavy, batches=400)
    assert (lo, hi) == pytest.approx((m - half_width(heavy), m + half_width(heavy)), rel=1e-12)


def test_segments_keep_every_window_inside_one_run():
    """Two runs laid end to end: the quantile is the brute-force one over each run's own windows."""
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.pareto(1.5, 1_500) + 1.0, rng.pareto(1.5, 2_500) + 1.0])
    m, (lo, hi) = subsampling_interval(x, block=100, segments=[1_500, 2_500])
    z = x - x.mean()
    w = np.concatenate([sliding_window_view(z[:1_500], 100), sliding_window_view(z[1_500:], 100)])
    q = float(np.quantile(math.sqrt(100) * np.abs(w.mean(axis=1)) / w.std(axis=1, ddof=1), 0.95))
    assert hi - m == pytest.approx(q * x.std(ddof=1) / math.sqrt(x.size), rel=1e-9)
    with pytest.raises(InvalidParameterError, match="^segments: "):
        subsampling_interval(x, block=100, segments=[1_000, 2_000])
    with pytest.raises(InvalidParameterError, match="^segments: "):
        subsampling_interval(x, block=100, segments=[50] * 80)


def test_several_heavy_tailed_runs_are_covered_and_order_free():
    """Three runs (3,000, 5,000 and 12,000 values of a Pareto of index 1.5, rate 1/3), 200 seeds: the
    repaired interval of ``ratio_interval_of_runs`` holds 1/3 in a count plausible for the 90-98% measured
    on one run (binomial tail above 1e-3 under 90%); the batch ratios of the same runs far below 95%
    (below 1e-4). The runs' order does not matter."""
    import queuesgd.batchmeans as bm

    def held(seeds):
        hits = 0
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            runs = [rng.pareto(1.5, k) + 1.0 for k in (3_000, 5_000, 12_000)]
            _, (lo, hi) = bm.ratio_interval_of_runs([np.ones(r.size) for r in runs], runs)
            hits += lo <= 1 / 3 <= hi
        return hits

    new = held(200)
    assert stats.binom.cdf(new, 200, 0.90) > 1e-3, new
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bm, "heavy_tailed", lambda values: False)
        old = held(200)
    assert stats.binom.cdf(old, 200, 0.95) < 1e-4, old
    rng = np.random.default_rng(1)
    runs = [rng.pareto(1.5, k) + 1.0 for k in (3_000, 5_000)]
    a = bm.ratio_interval_of_runs([np.ones(r.size) for r in runs], runs)
    b = bm.ratio_interval_of_runs([np.ones(r.size) for r in runs[::-1]], runs[::-1])
    assert a[0] == pytest.approx(b[0], rel=1e-14) and a[1] == pytest.approx(b[1], rel=1e-9)
