"""EagerSGD against independent sources: hand formulas (synchronous all-reduce,
one process, identical deterministic compute, the regenerative cycle of
exponential compute), a 3-state embedded chain written out by hand, the
event simulation (its confidence interval) against the embedded chain, and
the uniform rank of the majority initiator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import queuesgd as q
from queuesgd.distributions import Erlang, Exponential, HyperExponential
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.eager.eager import EagerSGD

G = 4e6  # gradient bytes
BW = 1.25e9  # 10 Gbit/s
LAT = 2e-5
BATCH = 32


def ring(P: int, latency: float = LAT) -> float:
    """Ring all-reduce by hand: 2 (P-1)/P G/B + 2 (P-1) latency."""
    return 2 * (P - 1) / P * G / BW + 2 * (P - 1) * latency


def H(n: int) -> float:
    return sum(1.0 / i for i in range(1, n + 1))


def cluster(P: int, **kw) -> q.Cluster:
    return q.Cluster(P, BW, latency=LAT, **kw)


def workload(law, update: float = 0.0) -> q.Workload:
    return q.Workload(law, G, batch_size=BATCH, update_time=update)


def gradients_per_second(sol) -> float:
    return sol.iteration_rate * sol.gradients_per_update


def assert_in_interval(value: float, sol, widen: float = 4.0 / 2.093) -> None:
    """``value`` inside the simulation's 95% interval widened to 4 standard errors.

    (The interval is t_{19, 0.975} = 2.093 standard errors wide on each side;
    many comparisons per file, so 4 standard errors keep false alarms rare.)
    """
    lo, hi = sol.interval
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    assert abs(value - mid) <= widen * half, (value, sol.interval)


# ---- identical deterministic compute: everyone arrives together ---------------------------------------


@pytest.mark.parametrize("mode", ["solo", "majority"])
@pytest.mark.parametrize("P", [2, 5, 8])
def test_deterministic_compute_is_synchronous(mode, P):
    t = 0.1
    expected = P * BATCH / (t + ring(P))  # samples/s of synchronous all-reduce, by hand
    w, c = workload(t), cluster(P)
    sim = q.predict(EagerSGD(mode), w, c, method="simulate", rng=0, iterations=400)
    assert sim.throughput == pytest.approx(expected, rel=1e-9)
    assert sim.details["participation"] == 1.0
    assert sim.staleness == 0.0
    closed = q.predict(EagerSGD(mode), w, c)
    assert closed.method == "closed_form"
    assert closed.throughput == pytest.approx(expected, rel=1e-12)


# ---- max_stale = 0: synchronous all-reduce with exponential compute -----------------------------------


@pytest.mark.parametrize("mode", ["solo", "majority"])
@pytest.mark.parametrize("P", [2, 4, 8])
def test_max_stale_zero_is_synchronous_allreduce(mode, P):
    mu = 10.0
    w, c = workload(Exponential(mu), update=0.003), cluster(P)
    rate = 1.0 / (H(P) / mu + ring(P) + 0.003)  # rounds per second: E[max] + A, by hand
    scheme = EagerSGD(mode, max_stale=0)
    for method in ("ctmc", "closed_form"):
        p = q.predict(scheme, w, c, method=method)
        assert p.iteration_rate == pytest.approx(rate, rel=1e-9)
        assert p.throughput == pytest.approx(P * BATCH * rate, rel=1e-9)
        assert p.staleness == pytest.approx(0.0, abs=1e-12)
    sim = q.predict(scheme, w, c, method="simulate", rng=P, iterations=4000)
    assert_in_interval(P * BATCH * rate, sim)


# ---- one process -------------------------------------------------------------------------------------


@pytest.mark.parametrize("law", [Exponential(mean=0.1), Erlang(3, mean=0.1)])
def test_one_process(law):
    w, c = workload(law, update=0.01), cluster(1)
    expected = BATCH / (0.1 + 0.01)  # 1 / (E[C] + A); a ring of one costs nothing
    p = q.predict(EagerSGD(), w, c, method="ctmc")
    assert p.throughput == pytest.approx(expected, rel=1e-9)
    assert p.gradients_per_update == pytest.approx(1.0, rel=1e-12)
    sim = q.predict(EagerSGD(), w, c, method="simulate", rng=1, iterations=4000)
    assert_in_interval(expected, sim)


# ---- exponential compute: the regenerative cycle by hand ----------------------------------------------


def exponential_cycle(mode: str, K: int, P: int, mu: float, A: float) -> tuple[float, float, float]:
    """(gradients/s, participation, staleness) for i.i.d. exponential compute, derived here.

    At every round end all P processes compute with memoryless residuals.
    Solo: the idle time is the minimum of P exponentials, 1/(P mu); one
    participant; each of the P-1 others finishes during the round with
    probability 1 - exp(-mu A) and is buffered. Majority: the initiator's
    residual is exponential(mu); its rank among the P residuals is uniform,
    so (P+1)/2 participants on average. Synchronous round: H_P/mu, P
    participants, nobody computes during it. Staleness: every round end is
    crossed by the gradients of the P - K_r processes that did not
    participate, so mean staleness = sum (P - K_r) / sum gradients.
    """
    qd = 1 - math.exp(-mu * A)
    if mode == "solo":
        idle, fresh, done = 1 / (P * mu), 1.0, (P - 1) * qd
    else:
        idle, fresh, done = 1 / mu, (P + 1) / 2, (P - (P + 1) / 2) * qd
    time = K * (idle + A) + H(P) / mu + A
    grads = K * (fresh + done) + P
    return grads / time, (K * fresh + P) / ((K + 1) * P), K * (P - fresh) / grads


@pytest.mark.parametrize("mode", ["solo", "majority"])
@pytest.mark.parametrize("P", [2, 4, 8])
@pytest.mark.parametrize("K", [2, 32])
def test_ctmc_matches_exponential_cycle(mode, P, K):
    mu, A = 12.0, ring(P)
    rate, part, stale = exponential_cycle(mode, K, P, mu, A)
    w, c = workload(Exponential(mu)), cluster(P)
    for method in ("ctmc", "closed_form"):
        p = q.predict(EagerSGD(mode, K), w, c, method=method)
        assert p.throughput == pytest.approx(BATCH * rate, rel=1e-9)
        assert p.details["participation"] == pytest.approx(part, rel=1e-9)
        assert p.staleness == pytest.approx(stale, rel=1e-9)
    f = EagerSGD(mode, K).formula()
    value = f.evaluate(n=P, mu=mu, m=BATCH, S=G, B=BW, alpha=LAT, u=0.0)
    assert value == pytest.approx(BATCH * rate, rel=1e-9)


def test_majority_initiator_rank_is_uniform():
    # At every round end all P processes compute with i.i.d. exponential residuals,
    # so the initiator's rank (the number ready when it finishes) is uniform on 1..P
    # for every partial round, whatever A; synchronous rounds have P participants.
    P, K = 6, 4
    w, c = workload(Exponential(5.0)), cluster(P)
    p = q.predict(EagerSGD("majority", K), w, c, method="ctmc")
    dist = p.details["participation_distribution"]
    for k in range(1, P):
        assert dist[k] == pytest.approx(K / (K + 1) / P, rel=1e-9)
    assert dist[P] == pytest.approx(K / (K + 1) / P + 1 / (K + 1), rel=1e-9)
    expected = (K * (P + 1) / 2 + P) / ((K + 1) * P)  # near (P+1)/(2P) for large K
    assert p.details["participation"] == pytest.approx(expected, rel=1e-9)
    sim = q.predict(EagerSGD("majority", K), w, c, method="simulate", rng=7, iterations=20000)
    # Per-round participation K_r/P has variance <= 1/4; 20000 nearly independent rounds.
    assert sim.details["participation"] == pytest.approx(expected, abs=4 * math.sqrt(0.25 / 20000))


# ---- a 3-state embedded chain written by hand ----------------------------------------------------------


def test_hand_embedded_chain_erlang2_two_processes():
    """Solo, P = 2, Erlang-2 compute (rate lam per phase), deterministic round A, max_stale K.

    States at a round end (both computing): s0 = both in phase 1, s1 = one in
    each phase, s2 = both in phase 2. Idle period (first exit triggers): from
    s0 -> s1 at rate 2 lam; from s1 at rate 2 lam: half move to s2, half
    trigger with the other in phase 1; from s2 the trigger leaves the other in
    phase 2. During A the other one (phase 1) stays w.p. e, moves to phase 2
    w.p. lam A e, finishes otherwise (e = exp(-lam A)); from phase 2 it stays
    w.p. e. At the round end the waiting ones restart in phase 1.
    """
    lam, A, K = 20.0, 0.02, 3
    e = math.exp(-lam * A)
    idle = np.zeros(3)
    idle[2] = 1 / (2 * lam)
    idle[1] = 1 / (2 * lam) + 0.5 * idle[2]
    idle[0] = 1 / (2 * lam) + idle[1]
    other = np.array([[0.5, 0.5], [0.5, 0.5], [0.0, 1.0]])  # P(other in phase 1, 2) at the trigger
    # From the other's phase at the trigger to (next state, P(it finished during A)).
    to_state = np.array([[e + (1 - e - lam * A * e), lam * A * e, 0.0], [1 - e, e, 0.0]])
    done = np.array([1 - e - lam * A * e, 1 - e])
    M = other @ to_state  # embedded kernel of a partial round
    grads = 1 + other @ done
    residual = np.array([4 / lam, 3 / lam, 2 / lam])  # sum of the two residual means
    x = np.array([1.0, 0.0, 0.0])  # after a synchronous round everyone restarts in phase 1
    time = gradients = fresh = 0.0
    for _ in range(K):
        time += x @ idle + A
        gradients += x @ grads
        fresh += 1
        x = x @ M
    time += x @ (residual - idle) + A  # E[max] = sum of residuals - E[min]
    gradients += 2
    fresh += 2
    law = Erlang(2, rate=lam)
    w = q.Workload(law, 1.0, batch_size=1, update_time=A)
    c = q.Cluster(2, 1e30)  # the round is the update time alone
    p = q.predict(EagerSGD("solo", K), w, c, method="ctmc")
    assert p.throughput == pytest.approx(gradients / time, rel=1e-9)
    assert p.iteration_rate == pytest.approx((K + 1) / time, rel=1e-9)
    assert p.staleness == pytest.approx((2 * (K + 1) - fresh) / gradients, rel=1e-9)


# ---- embedded chain against simulation ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["solo", "majority"])
@pytest.mark.parametrize("P", [2, 4, 8])
@pytest.mark.parametrize("K", [2, 32])
def test_ctmc_matches_simulation_exponential(mode, P, K):
    w, c = workload(Exponential(10.0)), cluster(P)
    exact = q.predict(EagerSGD(mode, K), w, c, method="ctmc")
    sim = q.predict(EagerSGD(mode, K), w, c, method="simulate", rng=100 + P + K, iterations=6000)
    assert_in_interval(exact.throughput, sim)


@pytest.mark.parametrize(
    "law", [Erlang(2, mean=0.1), Erlang(4, mean=0.1), HyperExponential([0.6, 0.4], [20.0, 4.0])]
)
@pytest.mark.parametrize("mode", ["solo", "majority"])
def test_ctmc_matches_simulation_phase_type(law, mode):
    w, c = workload(law, update=0.002), cluster(4)
    exact = q.predict(EagerSGD(mode, 3), w, c, method="ctmc")
    assert exact.details["states"] > 1
    sim = q.predict(EagerSGD(mode, 3), w, c, method="simulate", rng=5, iterations=8000)
    assert_in_interval(exact.throughput, sim)
    # Mean staleness: per-gradient version bookkeeping (simulation) against the
    # crossing identity sum (P - K_r) / sum gradients (chain).
    assert sim.staleness == pytest.approx(exact.staleness, rel=0.04)
    assert sum(sim.details["staleness_distribution"].values()) == pytest.approx(1.0, rel=1e-12)


# ---- eager-SGD's straggler recipe ------------------------------------------------------------------------


def test_solo_beats_synchronous_under_random_delay():
    # Deterministic compute t, RandomDelay(2, d): every synchronous step waits for a
    # delayed process, so synchronous all-reduce runs at P m / (t + d + A) exactly.
    P, t, d = 8, 0.1, 0.32
    w = workload(t)
    c = cluster(P, stragglers=q.RandomDelay(2, d))
    sync = P * BATCH / (t + d + ring(P))
    forced = q.predict(EagerSGD(max_stale=0), w, c, method="simulate", rng=2, iterations=1000)
    assert forced.throughput == pytest.approx(sync, rel=1e-9)
    solo = q.predict(EagerSGD("solo"), w, c, rng=2, iterations=4000)
    assert solo.method == "simulate"
    assert solo.interval[0] > 1.5 * sync
    assert solo.details["participation"] < 1.0
    majority = q.predict(EagerSGD("majority"), w, c, rng=2, iterations=4000)
    assert sync < majority.throughput < solo.throughput


# ---- method choice and bad input ------------------------------------------------------------------------


def test_auto_method():
    c = cluster(4)
    assert q.predict(EagerSGD(), workload(Exponential(10.0)), c).method == "closed_form"
    assert q.predict(EagerSGD(), workload(Erlang(2, mean=0.1)), c).method == "ctmc"
    assert EagerSGD().auto_method(workload(q.LogNormal(math.log(0.1), 0.5)), c)[0] == "simulate"
    assert EagerSGD().auto_method(workload(Erlang(2, mean=0.1)), cluster(600))[0] == "simulate"
    assert EagerSGD().auto_method(workload(0.1), cluster(4, speeds=[1, 1, 1, 2]))[0] == "simulate"


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="EagerSGD.mode"):
        EagerSGD("all")
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InvalidParameterError, match="EagerSGD.max_stale"):
            EagerSGD(max_stale=bad)
    with pytest.raises(InvalidParameterError, match="EagerSGD.mode.*workers >= 2"):
        q.predict(EagerSGD("majority"), workload(0.1), cluster(1))
    c = cluster(4, stragglers=q.RandomDelay(1, 0.1))
    with pytest.raises(NotRepresentable, match="simulate"):
        q.predict(EagerSGD(), workload(Exponential(10.0)), c, method="ctmc")
    with pytest.raises(NotRepresentable):
        q.predict(EagerSGD(), workload(Erlang(2, mean=0.1)), cluster(4), method="closed_form")
    with pytest.raises(InvalidParameterError, match="compute"):
        EagerSGD().formula("lognormal")


@pytest.mark.parametrize("mode", ["solo", "majority"])
def test_sweep_matches_embedded_chain_per_row(mode):
    w = workload(Exponential(10.0), update=0.001)
    res = q.sweep(
        EagerSGD(mode, 5), w, cluster(2), workers=[2, 3, 8], bandwidth=[1e9, 1e10], latency=[0.0, LAT]
    )
    cols = res.columns
    assert set(cols["method"]) == {"closed_form"}
    for P, B, L, X in zip(cols["workers"], cols["bandwidth"], cols["latency"], cols["throughput"]):
        c = q.Cluster(int(P), float(B), latency=float(L))
        assert X == pytest.approx(q.predict(EagerSGD(mode, 5), w, c, method="ctmc").throughput, rel=1e-9)


def test_sweep_deterministic_is_synchronous():
    res = q.sweep(EagerSGD("solo"), workload(0.1), cluster(2), workers=[2, 4, 16])
    P = np.array([2, 4, 16])
    expected = P * BATCH / (0.1 + np.array([ring(int(p)) for p in P]))
    assert res.columns["throughput"] == pytest.approx(expected, rel=1e-12)


def test_activation_lengthens_every_round_by_hand():
    # Identical deterministic compute t: everyone arrives together, so a round is t + a + ring + u and
    # X = m P / (t + a + ring(P) + u), by hand; the simulation (speeds make it simulate) and the
    # formula agree.
    t, a, u, P = 0.05, 0.004, 0.001, 4
    want = BATCH * P / (t + a + ring(P) + u)
    s = EagerSGD("solo", activation="4ms")
    assert s.activation == pytest.approx(0.004, rel=1e-12)
    closed = q.predict(s, workload(q.distributions.Deterministic(t), u), cluster(P))
    assert closed.throughput == pytest.approx(want, rel=1e-12)
    sim = q.predict(
        s, workload(q.distributions.Deterministic(t), u), cluster(P, speeds=[1.0] * P), "simulate", rng=0
    )
    assert sim.throughput == pytest.approx(want, rel=1e-9)
    f = s.formula("deterministic")
    got = f.evaluate(n=P, m=BATCH, S=G, B=BW, alpha=LAT, u=u, t=t, a=a)
    assert got == pytest.approx(want, rel=1e-12)
    # Exponential compute: the round time enters as A; the regenerative cycle by hand with A = a + ring + u.
    mu, K = 10.0, 32
    A = a + ring(P) + u
    qd = 1 - math.exp(-mu * A)
    cycle_time = K * (1 / (P * mu) + A) + H(P) / mu + A
    grads = K * (1 + (P - 1) * qd) + P
    exp = q.predict(s, workload(Exponential(mu), u), cluster(P))
    assert exp.throughput == pytest.approx(BATCH * grads / cycle_time, rel=1e-9)
    with pytest.raises(InvalidParameterError, match="activation"):
        EagerSGD(activation=-1.0)


@pytest.mark.parametrize("mu", [1e4, 1e7, 1e9])
def test_a_round_much_longer_than_a_step(mu):
    # mu A from 1e2 to 1e7: the round chain's transient solution took time in proportion (33 s at
    # mu A = 3e4 on 8 processes, no end at 1e9); the dense exponential is immediate and still equals
    # the regenerative cycle.
    P, K = 8, 4
    rate, _, stale = exponential_cycle("solo", K, P, mu, ring(P))
    p = q.predict(EagerSGD("solo", K), workload(Exponential(mu)), cluster(P), method="ctmc")
    assert p.throughput == pytest.approx(BATCH * rate, rel=1e-9)
    assert p.staleness == pytest.approx(stale, rel=1e-9)


def test_a_long_round_on_a_large_chain_is_refused(monkeypatch):
    from queuesgd.errors import StateSpaceTooLargeError
    from queuesgd.schemes.eager import eager_chain

    monkeypatch.setattr(eager_chain, "DENSE_ROUND", 0)
    with pytest.raises(StateSpaceTooLargeError, match=r"\|G\| A = .* > 100000.*closed_form"):
        q.predict(EagerSGD("solo", 4), workload(Exponential(1e9)), cluster(8), method="ctmc")
    # a short round still takes the sparse exponential
    p = q.predict(EagerSGD("solo", 4), workload(Exponential(12.0)), cluster(8), method="ctmc")
    assert p.throughput == pytest.approx(BATCH * exponential_cycle("solo", 4, 8, 12.0, ring(8))[0], rel=1e-9)
