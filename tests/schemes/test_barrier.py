"""The "k of n" barrier engine against independent sources: a renewal argument
by hand for two workers, order statistics (closed forms and quadrature) for the
i.i.d. iterations of "cancel", simulation of the same model within its
confidence interval for "finish", a pathwise coupling (finish never beats
cancel), and marking counts derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd.distributions import Erlang, Exponential, HyperExponential
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.orderstats import expected_order_statistic
from queuesgd.schemes.barrier.kofn import (
    barrier_net,
    compute_laws,
    simulate_barrier,
    solve_barrier_ctmc,
    time_to_barrier,
)
from queuesgd.schemes.barrier.kofn_sim import simulate_rounds
from queuesgd.workload import Cluster, RandomDelay, Workload


def two_workers_one_backup(mu: float, gamma: float) -> float:
    """Iteration rate of n = 2, k = 1, stale workers finish; exp(mu) compute, exp(gamma) exchange.

    Four situations: A both fresh; B one fresh and one stale, no exchange;
    C exchange running, the other worker stale; D exchange running, the other
    waiting. A -> C at 2 mu; B -> C at mu (fresh done), B -> A at mu (stale
    done, restarts); C -> B at gamma, C -> D at mu; D -> A at gamma. Balance
    (mu = 1, g = gamma): pB = g pC / 2, pD = pC / g, pA = pC (1 + g/2) / 2, and
    the exchange ends at rate g (pC + pD). Normalizing gives
    X = 4 g (g + 1) / (3 g^2 + 6 g + 4); time scales as 1/mu.
    """
    g = gamma / mu
    return mu * 4 * g * (g + 1) / (3 * g * g + 6 * g + 4)


@pytest.mark.parametrize("mu, gamma", [(1.0, 1.0), (1.0, 0.25), (2.0, 7.0), (0.5, 3.0)])
def test_two_workers_finish_matches_renewal_argument(mu, gamma):
    res = solve_barrier_ctmc([Exponential(mu)] * 2, 1, 1.0 / gamma, stragglers="finish")
    assert res.states == 4
    assert res.rate == pytest.approx(two_workers_one_backup(mu, gamma), rel=1e-12)


CANCEL_LAWS = {
    "exponential": [Exponential(1.0)] * 5,
    "two speeds": [Exponential(1.0)] * 3 + [Exponential(2.5)] * 2,
    "hyperexponential": [HyperExponential([0.3, 0.7], [0.5, 3.0])] * 4,
    "erlang": [Erlang(3, mean=1.0)] * 4,
}


@pytest.mark.parametrize("name", list(CANCEL_LAWS))
@pytest.mark.parametrize("late", [0, 1, 2])
@pytest.mark.parametrize("comm", [0.0, 0.7])
def test_cancel_ctmc_equals_order_statistic(name, late, comm):
    laws = CANCEL_LAWS[name]
    k = len(laws) - late
    res = solve_barrier_ctmc(laws, k, comm, stragglers="cancel")
    expected = expected_order_statistic(laws, k=k) + comm  # quadrature or the harmonic closed form
    assert 1 / res.rate == pytest.approx(expected, rel=1e-9)
    assert res.notes == ()


def test_exponential_order_statistic_by_hand():
    # Renyi: gaps of rates 5, 4, 3 -> the third smallest of 5 is 1/5 + 1/4 + 1/3
    assert time_to_barrier([Exponential(1.0)] * 5, 3) == pytest.approx(1 / 5 + 1 / 4 + 1 / 3, rel=1e-14)


@pytest.mark.parametrize("n, k", [(4, 3), (4, 2), (6, 5)])
def test_finish_ctmc_equals_simulation_of_the_same_model(n, k):
    # exponential exchange in both: the same stochastic model
    rng = np.random.default_rng(12)
    iters = 60_000
    res = solve_barrier_ctmc([Exponential(1.0)] * n, k, 0.5, stragglers="finish")
    x = rng.exponential(1.0, (iters, n))
    sim = simulate_barrier(x, k, rng.exponential(0.5, iters), stragglers="finish")
    assert sim.interval[0] <= k * res.rate <= sim.interval[1]


def test_finish_with_erlang_exchange_equals_simulation():
    rng = np.random.default_rng(5)
    iters = 60_000
    res = solve_barrier_ctmc([Exponential(1.0)] * 5, 4, 0.4, stragglers="finish", comm_phases=20)
    comm = Erlang(20, mean=0.4).sample(rng, iters)
    sim = simulate_barrier(rng.exponential(1.0, (iters, 5)), 4, comm, stragglers="finish")
    assert sim.interval[0] <= 4 * res.rate <= sim.interval[1]


def test_finish_never_faster_than_cancel_pathwise():
    # Same compute times: each finish iteration starts every worker no earlier,
    # so each barrier comes no sooner (and strictly later on average here).
    x = np.random.default_rng(3).exponential(1.0, (5000, 6))
    fin = simulate_barrier(x, 4, 0.3, stragglers="finish", warmup=0.0)
    can = simulate_barrier(x, 4, 0.3, stragglers="cancel")
    assert fin.barrier_time > can.barrier_time
    ctmc_f = solve_barrier_ctmc([Exponential(1.0)] * 6, 4, 0.3, stragglers="finish")
    ctmc_c = solve_barrier_ctmc([Exponential(1.0)] * 6, 4, 0.3, stragglers="cancel")
    assert ctmc_f.rate < ctmc_c.rate


def test_deterministic_simulation_is_exact():
    sim = simulate_barrier(np.full((600, 5), 0.2), 3, 0.05, stragglers="finish")
    assert sim.iteration_time == pytest.approx(0.25, rel=1e-13)
    assert sim.interval == pytest.approx((12.0, 12.0), rel=1e-12)


@pytest.mark.parametrize("n, k", [(3, 3), (7, 7), (5, 3), (9, 8)])
def test_marking_counts(n, k):
    ph = Exponential(1.0).to_phase_type()
    b = n - k
    # k = n or cancel: k done-counts (0..k-1) without exchange + 1 with it.
    assert len(barrier_net([(ph, n)], k, 1.0, stragglers="cancel").state_space()) == k + 1
    # finish: (done count < k) x (stale 0..b) without exchange, (stale 0..b) x r phases with it
    for r in (1, 3):
        space = barrier_net([(ph, n)], k, 1.0, stragglers="finish", comm_phases=r).state_space()
        assert len(space) == (k + r) * (b + 1)


def test_random_delay_laws_by_symmetry():
    w = Workload(Exponential(1.0), 1e6)
    c = Cluster(4, "1GB/s", stragglers=RandomDelay(2, 0.5))
    laws = compute_laws(w, c)
    x = np.random.default_rng(9).exponential(1.0, (200_000, 4))
    x[:, :2] += 0.5  # which two are delayed does not matter to the order statistic
    m = np.sort(x, axis=1)[:, 2]
    se = m.std() / math.sqrt(m.size)
    assert abs(time_to_barrier(laws, 3) - m.mean()) < 4 * se
    with pytest.raises(NotRepresentable):
        compute_laws(w, Cluster(4, "1GB/s", speeds=[1, 1, 2, 2], stragglers=RandomDelay(1, 0.5)))


def test_bad_arguments():
    ph = Exponential(1.0).to_phase_type()
    with pytest.raises(InvalidParameterError, match="k"):
        barrier_net([(ph, 2)], 3, 1.0)
    with pytest.raises(InvalidParameterError, match="stragglers"):
        barrier_net([(ph, 2)], 1, 1.0, stragglers="ignore")
    with pytest.raises(InvalidParameterError, match="samples"):
        simulate_barrier(np.ones((10, 2)), 1, 0.0)


@pytest.mark.parametrize(
    "laws, k, comm",
    [
        ([Exponential(1.0)] * 3 + [Exponential(3.0)] * 2, 3, 0.4),  # two groups: four ways to the barrier
        ([HyperExponential([0.2, 0.8], [0.4, 2.0])] * 4, 3, 0.3),  # random initial phase
        ([Erlang(2, mean=1.0)] * 4, 2, 0.0),  # no exchange at all
    ],
    ids=["two-speeds", "hyperexponential", "erlang-no-comm"],
)
def test_finish_ctmc_equals_simulation_general_laws(laws, k, comm):
    rng = np.random.default_rng(31)
    iters = 60_000
    res = solve_barrier_ctmc(laws, k, comm, stragglers="finish")
    x = np.column_stack([law.sample(rng, iters) for law in laws])
    d = rng.exponential(comm, iters) if comm > 0 else 0.0
    sim = simulate_barrier(x, k, d, stragglers="finish")
    assert sim.interval[0] <= k * res.rate <= sim.interval[1]


def test_round_engine_timer_grid_equals_single_runs_and_a_hand_case():
    # One engine for barriers and timers: a grid of timers on common samples equals one run per timer,
    # and an infinite timer is the plain k-of-n barrier.
    x = np.random.default_rng(4).exponential(1.0, (3000, 5))
    grid = np.array([0.3, 1.0, np.inf])
    for mode in ("cancel", "finish"):
        many = simulate_rounds(x, 4, grid, 0.2, stragglers=mode)
        for g, T in enumerate(grid):
            one = simulate_rounds(x, 4, T, 0.2, stragglers=mode)
            assert np.array_equal(many.column(g).barrier, one.barrier)
            assert np.array_equal(many.column(g).gradients, one.gradients)
        bar = simulate_barrier(x, 4, 0.2, stragglers=mode, warmup=0.0)
        assert bar.barrier_time == pytest.approx(many.column(2).barrier.mean(), rel=1e-12)
    # Hand case, finish: workers of 1 s and 3 s, timer 2 s, phase 0.5 s. Round 1 ends at 2 with the
    # fast gradient; the slow worker is stale until 3 = 0.5 s into round 2, then restarts: round 2's
    # timer fires at 2 again with one gradient; its fresh computation (0.5 -> 3.5) is stale until 1 s
    # into round 3, and so on: every round is 2 + 0.5 s with one gradient.
    r = simulate_rounds(np.tile([1.0, 3.0], (50, 1)), timer=2.0, phase=0.5, stragglers="finish")
    assert r.rate() == (1 / 2.5, (1 / 2.5, 1 / 2.5))
    # busy time before the barrier: fast 1 s; slow 2 s in round 1, then 0.5 (stale) + 1.5 (fresh)
    assert r.compute.tolist() == [1.5] * 50
