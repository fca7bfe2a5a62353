"""StaleSynchronous against independent sources: the exact E[max] of hypoexponential laws (a
finite sum in rational arithmetic), c + H_n / rate for a shifted exponential, the one-worker cycle,
the no-blocking limit, monotonicity in the bound, a labelled two-worker chain built separately, and
simulation within its confidence interval."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import queuesgd as q
from queuesgd.distributions import Deterministic, Erlang, Exponential
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.ssp.ssp import StaleSynchronous

# compute exponential of mean 0.05 (rate 20); communicate 2 MB at 20 MB/s: exponential of mean 0.1 (rate 10)
W = q.Workload(compute=Exponential(mean=0.05), gradient_bytes="1MB", parameter_bytes="1MB", batch_size=8)
C = q.Cluster(workers=1, bandwidth="20MB/s")


def hypoexponential_expected_max(a: float, b: float, n: int) -> float:
    """E[max of n i.i.d. Exp(a) + Exp(b)], a != b, exactly.

    Survival S(x) = (b e^{-ax} - a e^{-bx}) / (b - a); E[max] = sum_k (-1)^{k+1} C(n,k) int S^k,
    and int S^k = sum_j C(k,j) (b/(b-a))^j (-a/(b-a))^{k-j} / (j a + (k-j) b).
    """
    a, b = Fraction(a), Fraction(b)
    total = Fraction(0)
    for k in range(1, n + 1):
        inner = sum(
            math.comb(k, j) * (b / (b - a)) ** j * (-a / (b - a)) ** (k - j) / (j * a + (k - j) * b)
            for j in range(k + 1)
        )
        total += (-1) ** (k + 1) * math.comb(n, k) * inner
    return float(total)


def two_labelled_workers_rate(s: int, mu: float, gamma: float) -> float:
    """Iteration rate of two SSP workers, exponential compute (mu) and communication (gamma), bound s.

    A second construction of the chain: labelled workers (not counts per offset), the state
    (A's clock - B's clock, A's activity, B's activity) explored breadth-first from both computing,
    solved densely with NumPy (not markov.steady_state).
    """

    def moves(state):
        D, acts = state[0], state[1:]
        for who in (0, 1):
            lead = D if who == 0 else -D  # this worker's clock minus the other's
            new = list(acts)
            if acts[who] == "compute":
                new[who] = "comm"
                yield (D, *new), mu, 0.0
            elif acts[who] == "comm":  # completes an iteration; may block, may release the other
                lead += 1
                new[who] = "compute" if lead <= s else "blocked"
                if acts[1 - who] == "blocked" and -lead <= s:
                    new[1 - who] = "compute"
                yield (lead if who == 0 else -lead, *new), gamma, gamma

    start = (0, "compute", "compute")
    index, frontier, edges = {start: 0}, [start], []
    while frontier:
        x = frontier.pop()
        for y, rate, done in moves(x):
            if y not in index:
                index[y] = len(index)
                frontier.append(y)
            edges.append((index[x], index[y], rate, done))
    n = len(index)
    Q, completions = np.zeros((n, n)), np.zeros(n)
    for i, j, rate, done in edges:
        Q[i, j] += rate
        completions[i] += done
    np.fill_diagonal(Q, -Q.sum(axis=1))
    pi = np.linalg.lstsq(np.vstack([Q.T, np.ones(n)]), np.r_[np.zeros(n), 1.0], rcond=None)[0]
    return float(pi @ completions)


@pytest.mark.parametrize(("staleness", "mu", "gamma"), [(1, 1.0, 1.0), (2, 2.0, 3.0), (3, 5.0, 1.0)])
def test_ctmc_equals_labelled_two_worker_chain(staleness, mu, gamma):
    # communicate (0.5 + 0.5) bytes at gamma bytes/s: exponential of rate gamma
    w = q.Workload(compute=Exponential(mu), gradient_bytes=0.5, parameter_bytes=0.5)
    chain = StaleSynchronous(staleness).solve(w, q.Cluster(2, gamma), "ctmc")
    assert chain.iteration_rate == pytest.approx(two_labelled_workers_rate(staleness, mu, gamma), rel=1e-12)
    if (staleness, mu, gamma) == (1, 1.0, 1.0):
        assert chain.iteration_rate == pytest.approx(112 / 129, rel=1e-12)


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_bulk_synchronous_ctmc_equals_barrier_closed_form(workers):
    c = C.with_workers(workers)
    closed = StaleSynchronous(0).solve(W, c, "closed_form")
    chain = StaleSynchronous(0).solve(W, c, "ctmc")
    exact = workers / hypoexponential_expected_max(20.0, 10.0, workers)
    assert closed.iteration_rate == pytest.approx(exact, rel=1e-9)
    assert chain.iteration_rate == pytest.approx(exact, rel=1e-9)
    assert chain.details["blocked_fraction"] == pytest.approx(closed.details["blocked_fraction"], rel=1e-8)


def test_bulk_synchronous_deterministic_compute_is_shifted_exponential():
    # E[max_i (c + Exp(10))] = c + H_n / 10
    w = q.Workload(compute=Deterministic(0.05), gradient_bytes="1MB", parameter_bytes="1MB")
    p = q.predict(StaleSynchronous(0), w, C.with_workers(4))
    assert p.method == "closed_form"
    assert p.iteration_rate == pytest.approx(4 / (0.05 + (1 + 1 / 2 + 1 / 3 + 1 / 4) / 10), rel=1e-9)


def test_bulk_synchronous_erlang_and_speeds_ctmc_vs_closed_form():
    w = q.Workload(compute=Erlang(2, mean=0.05), gradient_bytes="1MB", parameter_bytes="1MB")
    c = q.Cluster(workers=3, bandwidth="20MB/s", speeds=[1, 2, 2])
    a = StaleSynchronous(0).solve(w, c, "closed_form")
    b = StaleSynchronous(0).solve(w, c, "ctmc")
    assert b.iteration_rate == pytest.approx(a.iteration_rate, rel=1e-9)


@pytest.mark.parametrize("staleness", [0, 1, 3, math.inf])
def test_one_worker_never_waits(staleness):
    p = q.predict(StaleSynchronous(staleness), W, C)
    assert p.iteration_rate == pytest.approx(1 / (0.05 + 0.1), rel=1e-12)
    assert p.throughput == pytest.approx(8 / 0.15, rel=1e-12)
    assert p.staleness == 0.0
    assert p.breakdown["waiting"] == pytest.approx(0.0, abs=1e-12)


def test_throughput_grows_with_the_bound_towards_no_blocking():
    c = C.with_workers(2)
    limit = 2 / (0.05 + 0.1)
    assert q.predict(StaleSynchronous(math.inf), W, c).iteration_rate == pytest.approx(limit, rel=1e-15)
    rates = [q.predict(StaleSynchronous(s), W, c, method="ctmc").iteration_rate for s in (0, 1, 2, 5, 10, 40)]
    assert all(x < y for x, y in zip(rates, rates[1:]))
    assert rates[-1] < limit
    assert 1 - rates[-1] / limit < 0.01  # the blocked share shrinks like 1 / (s + 1)


def test_throughput_non_decreasing_in_bound_three_workers():
    c = C.with_workers(3)
    rates = [StaleSynchronous(s).solve(W, c, "ctmc").iteration_rate for s in range(5)]
    assert all(y >= x for x, y in zip(rates, rates[1:]))
    blocked = [StaleSynchronous(s).solve(W, c, "ctmc").details["blocked_fraction"] for s in range(5)]
    assert all(y <= x for x, y in zip(blocked, blocked[1:]))


@pytest.mark.parametrize("staleness", [1, 2])
def test_ctmc_agrees_with_simulation(staleness):
    c = C.with_workers(3)
    chain = q.predict(StaleSynchronous(staleness), W, c, method="ctmc")
    sim = q.predict(StaleSynchronous(staleness), W, c, method="simulate", rng=11, iterations=60_000)
    assert sim.interval[0] <= chain.throughput <= sim.interval[1]
    # breakdown adds up to the worker's cycle: n / X by Little's law
    assert chain.iteration_time == pytest.approx(3 / chain.iteration_rate, rel=1e-9)


def test_simulated_staleness_mean_is_n_minus_one():
    # a worker reads right after its own update: every update lies in exactly one open window of each
    # other worker, so the mean over updates is n - 1 whatever the bound; the bound shapes the spread
    c = C.with_workers(4)
    tight = q.predict(StaleSynchronous(0), W, c, method="simulate", rng=5, iterations=20_000)
    loose = q.predict(StaleSynchronous(4), W, c, method="simulate", rng=5, iterations=20_000)
    for p in (tight, loose):
        lo, hi = p.details["staleness_interval"]
        assert lo <= 3 <= hi
        assert sum(p.details["staleness_distribution"].values()) == pytest.approx(1.0, rel=1e-12)
    # with a barrier another worker updates at most twice in a window: staleness <= 2 (n - 1)
    assert max(tight.details["staleness_distribution"]) <= 6
    assert max(loose.details["staleness_distribution"]) > 6


def test_infinite_bound_simulation_matches_closed_form():
    c = q.Cluster(workers=3, bandwidth="20MB/s", speeds=[1, 1, 2])
    exact = q.predict(StaleSynchronous(math.inf), W, c)
    assert exact.iteration_rate == pytest.approx(2 / 0.15 + 1 / 0.125, rel=1e-12)
    sim = q.predict(StaleSynchronous(math.inf), W, c, method="simulate", rng=3, iterations=30_000)
    assert sim.interval[0] <= exact.throughput <= sim.interval[1]
    assert sim.details["blocked_fraction"] == 0.0


def test_auto_method_and_reasons():
    assert q.predict(StaleSynchronous(0), W, C.with_workers(3)).method == "closed_form"
    assert q.predict(StaleSynchronous(2), W, C.with_workers(3)).method == "ctmc"
    big = q.Workload(compute=Deterministic(0.05), gradient_bytes="1MB")
    p = q.predict(StaleSynchronous(3), big, C.with_workers(16), rng=0, iterations=2000)
    assert p.method == "simulate" and "states" in p.reason
    with pytest.raises(NotRepresentable, match="closed form"):
        StaleSynchronous(2).solve(W, C.with_workers(2), "closed_form")


def test_bad_input():
    for bad in (-1, 1.5, "two", True, -math.inf):
        with pytest.raises(InvalidParameterError, match=r"StaleSynchronous\.staleness"):
            StaleSynchronous(bad)
    assert StaleSynchronous(2.0).staleness == 2


def test_send_buffer_is_validated_and_shown():
    # the same rules as BackupWorkers.send_buffer (ps_arrivals.check_send_buffer): bytes >= 0, units
    # accepted, and only with link="shared" (the dedicated model has no sends)
    s = StaleSynchronous(2, link="shared", send_buffer="1.5MB")
    assert s.send_buffer == 1.5e6
    assert repr(s) == "StaleSynchronous(staleness=2, link='shared', send_buffer=1500000.0)"
    assert StaleSynchronous(2).send_buffer == 0.0
    for bad in (-1.0, math.nan, math.inf, "lots"):
        with pytest.raises(InvalidParameterError, match=r"StaleSynchronous\.send_buffer"):
            StaleSynchronous(2, link="shared", send_buffer=bad)
    with pytest.raises(InvalidParameterError, match=r"StaleSynchronous\.send_buffer.*link='shared'"):
        StaleSynchronous(2, send_buffer="1MB")


def test_send_buffer_frees_a_saturated_ps_by_its_buffered_seconds():
    """A saturated PS: per update, its thread applies (u) and sends until the reply has beta left.

    8 workers of 1 ms compute, staleness inf, 1 kB gradients (8 us pushes), 1 MB replies at 1 Gbit/s
    (pull = 8 ms), u = 4 ms: the PS always has a gradient waiting. Per update the PS thread is busy
    u + pull - beta and the downlink pull, so X = 1 / max(pull, u + pull - beta) (beta = buffer / B,
    at most pull): beta = 0 (today): 1 / 12 ms; 250 kB = 2 ms: 1 / 10 ms; 500 kB = 4 ms and 2 MB
    (beta = pull): 1 / 8 ms, the downlink's own limit.
    """
    from queuesgd.schemes.barrier.ps_arrivals import barrier_link_costs

    w = q.Workload(Deterministic(0.001), 1000, "1MB", batch_size=1, update_time="4ms")
    c = q.Cluster(8, "1Gbit/s")
    assert barrier_link_costs(w, c, 2e6)["buffered"] == pytest.approx(0.008, rel=1e-12)  # at most pull
    for held, period in ((0.0, 0.012), (250_000.0, 0.010), (500_000.0, 0.008), (2e6, 0.008)):
        scheme = StaleSynchronous(math.inf, link="shared", send_buffer=held)
        p = q.predict(scheme, w, c, rng=0, iterations=8_000)
        assert p.iteration_rate == pytest.approx(1 / period, rel=1e-3), held
        assert ("socket buffer" in p.reason) == (held > 0)


def test_live_harness_models_ssp_with_the_calibrated_send_buffer():
    # campaign._model: on a real (tc tbf) network SSP is the shared-link model with the measured buffer;
    # the application shaper keeps the dedicated model (it has no sends)
    from queuesgd.harness.campaign import _model

    scheme, method = _model("stale-synchronous", {"staleness": 2}, "netns-tbf", send_buffer=3000.0)
    assert (scheme, method) == (StaleSynchronous(2, link="shared", send_buffer=3000.0), "simulate")
    scheme, method = _model("stale-synchronous", {"staleness": 2}, "app-shaper", send_buffer=0.0)
    assert (scheme, method) == (StaleSynchronous(2), "auto")


def test_a_chain_on_a_high_dimensional_lattice_is_solved_by_gth_and_equals_lu_and_krylov(monkeypatch):
    # s = 2, exponential compute, 10 workers: 8,008 states on a 6-dimensional lattice, where sparse LU fills
    # in (116,280 states of Erlang-3 workers took two minutes to factor). Within GTH's budget since its
    # blocked elimination (band 736: 4.2e9 multiply-adds, about 0.5 s; it was solved by Krylov before);
    # the preconditioned Krylov method and the sparse LU of the same generator are the second and third
    # solutions
    from queuesgd.schemes.ssp import ssp_chain

    w, c = W, C.with_workers(10)
    auto, solved = ssp_chain.markov.solve_auto, ssp_chain.markov.steady_state
    used: list[str] = []

    def spy(Q, dimension=None):
        pi, ran = auto(Q, dimension)
        used.append(ran)
        return pi, ran

    monkeypatch.setattr(ssp_chain.markov, "solve_auto", spy)
    gth = StaleSynchronous(2).solve(w, c, "ctmc")
    for method in ("direct", "iterative"):
        forced = lambda Q, dimension=None, method=method: (solved(Q, method=method), method)  # noqa: E731
        monkeypatch.setattr(ssp_chain.markov, "solve_auto", forced)
        other = StaleSynchronous(2).solve(w, c, "ctmc")
        assert other.iteration_rate == pytest.approx(gth.iteration_rate, rel=1e-9)
        assert other.details["blocked_fraction"] == pytest.approx(gth.details["blocked_fraction"], rel=1e-8)
    assert used == ["gth"] and StaleSynchronous(2).state_count(w, c) == math.comb(16, 6)


def test_state_counts_past_the_cap_are_not_formed():
    # audit 2026-11-28: a million workers at staleness 100 (a count of 440 digits) raised "Exceeds the limit
    # (4300 digits)" formatting it, and staleness 10**6 spent minutes forming a count of 600,000 digits.
    # Exponential compute, s = 5: L = 2 (s + 1) + 1 = 13 places, C(n + 12, 12) states
    w = q.Workload(Exponential(mean=0.1), "1MB")
    below = StaleSynchronous(5).state_count(w, q.Cluster(160, "1GB/s"))
    assert below == math.comb(172, 12) == 945_177_440_546_658_501  # under 10**18: exact
    assert StaleSynchronous(5).state_count(w, q.Cluster(161, "1GB/s")) == math.inf  # C(173, 12) > 10**18
    for s, n in ((100, 10**6), (10**6, 10**6)):
        scheme = StaleSynchronous(s)
        assert scheme.state_count(w, q.Cluster(n, "1GB/s")) == math.inf
        method, why = scheme.auto_method(w, q.Cluster(n, "1GB/s"))
        assert method == "simulate" and "more than 1e+18 states" in why
    with pytest.raises(q.errors.StateSpaceTooLargeError, match="more than 1e\\+18 states > 2,000,000"):
        StaleSynchronous(100).solve(w, q.Cluster(10**6, "1GB/s"), "ctmc")
