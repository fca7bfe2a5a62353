"""SyncPS against independent sources: E[max of n exponentials] = H_n / mu
summed by hand, the CTMC of the GSPN, Harter's (1961) table of normal maxima,
deterministic compute (no randomness), simulation within its confidence
interval, and the PS round's cost computed by hand."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
import sympy

from queuesgd.distributions import Deterministic, Exponential, Normal
from queuesgd.errors import NotRepresentable
from queuesgd.prediction import predict, sweep
from queuesgd.schemes.ps.sync_ps import SyncPS
from queuesgd.workload import Cluster, RandomDelay, Workload

MU = 10.0
W = Workload(Exponential(MU), "10MB", "20MB", batch_size=32, update_time="2ms")
C = Cluster(1, "1GB/s", latency="1ms", ps_shards=2)


def comm_by_hand(n: int) -> tuple[float, float]:
    # 2 x 1 ms latency; n x (10 + 20) MB over 2 shards of 1 GB/s; n x 2 ms of updates over 2 shards
    return 0.002 + n * 30e6 / (2 * 1e9), n * 0.002 / 2


def harmonic(n: int) -> float:
    return float(sum(Fraction(1, i) for i in range(1, n + 1)))


@pytest.mark.parametrize("n", range(1, 9))
def test_exponential_closed_form_and_ctmc(n):
    c = C.with_workers(n)
    comm, upd = comm_by_hand(n)
    expected = harmonic(n) / MU + comm + upd
    cf = predict(SyncPS(), W, c)
    ct = predict(SyncPS(), W, c, "ctmc")
    assert cf.method == "closed_form"
    assert cf.iteration_time == pytest.approx(expected, rel=1e-12)
    assert ct.iteration_time == pytest.approx(expected, rel=1e-9)
    assert ct.details["states"] == n + 1
    assert cf.throughput == pytest.approx(n * 32 / expected, rel=1e-12)
    assert cf.breakdown["communication"] == pytest.approx(comm, rel=1e-12)
    assert cf.breakdown["update"] == pytest.approx(upd, rel=1e-12)
    assert sum(cf.breakdown.values()) == pytest.approx(expected, rel=1e-12)


def test_thousand_workers_ctmc_in_seconds():
    c = C.with_workers(1000)
    t0 = time.perf_counter()
    ct = predict(SyncPS(), W, c, "ctmc")
    elapsed = time.perf_counter() - t0
    comm, upd = comm_by_hand(1000)
    assert ct.iteration_time == pytest.approx(harmonic(1000) / MU + comm + upd, rel=1e-9)
    assert ct.details["states"] == 1001
    assert elapsed < 10.0


# Harter (1961), expected maximum of n standard normals
HARTER = {2: 0.5642, 3: 0.8463, 4: 1.0294, 5: 1.1630, 10: 1.5388}


@pytest.mark.parametrize("n", sorted(HARTER))
def test_normal_maximum_matches_harter(n):
    w = Workload(Normal(10.0, 1.0), "10MB")
    p = predict(SyncPS(), w, Cluster(n, "1GB/s"))
    assert p.details["order_statistic"] - 10.0 == pytest.approx(HARTER[n], abs=1e-4)


def test_deterministic_compute_simulation_equals_closed_form():
    w = Workload(Deterministic(0.1), "10MB", batch_size=8)
    c = Cluster(6, "1GB/s", latency="1ms")
    cf = predict(SyncPS(), w, c)
    sim = predict(SyncPS(), w, c, "simulate", rng=0, iterations=2000)
    assert cf.iteration_time == pytest.approx(0.1 + 0.002 + 12 * 0.01, rel=1e-12)
    assert sim.iteration_time == pytest.approx(cf.iteration_time, rel=1e-12)
    assert sim.interval == pytest.approx((cf.throughput, cf.throughput), rel=1e-12)


def test_heterogeneous_speeds():
    c = Cluster(5, "1GB/s", speeds=[1, 1, 1, 2.5, 2.5])
    cf = predict(SyncPS(), W, c)
    ct = predict(SyncPS(), W, c, "ctmc")  # two speed groups of exponential workers
    sim = predict(SyncPS(), W, c, "simulate", rng=4, iterations=40_000)
    assert ct.iteration_time == pytest.approx(cf.iteration_time, rel=1e-9)
    assert sim.interval[0] <= cf.throughput <= sim.interval[1]
    # inclusion-exclusion by hand: P(max <= x) = (1 - e^-10x)^3 (1 - e^-25x)^2
    x = sympy.Symbol("x", positive=True)
    F = (1 - sympy.exp(-10 * x)) ** 3 * (1 - sympy.exp(-25 * x)) ** 2
    emax = float(sympy.integrate(1 - sympy.expand(F), (x, 0, sympy.oo)))
    assert cf.details["order_statistic"] == pytest.approx(emax, rel=1e-10)


def test_random_delay_closed_form_vs_simulation():
    c = Cluster(6, "1GB/s", stragglers=RandomDelay(2, "50ms"))
    cf = predict(SyncPS(), W, c)
    sim = predict(SyncPS(), W, c, "simulate", rng=8, iterations=40_000)
    assert cf.method == "closed_form"
    assert sim.interval[0] <= cf.throughput <= sim.interval[1]
    with pytest.raises(NotRepresentable):
        predict(SyncPS(), W, c, "ctmc")
    # speeds and random delays together: no closed form, auto simulates
    c2 = Cluster(4, "1GB/s", speeds=[1, 1, 2, 2], stragglers=RandomDelay(1, "50ms"))
    p = predict(SyncPS(), W, c2, rng=1, iterations=2000)
    assert p.method == "simulate" and "RandomDelay" in p.reason
    with pytest.raises(NotRepresentable):
        predict(SyncPS(), W, c2, "closed_form")


def test_ctmc_of_a_non_phase_type_law_says_it_fitted():
    w = Workload(Deterministic(0.1), "10MB")
    p = predict(SyncPS(), w, Cluster(3, "1GB/s"), "ctmc")
    assert "phase-type fit" in p.reason and "phase-type fit" in p.details["phase_type"]


def test_formula_matches_closed_form():
    f = SyncPS().formula()
    for n in (1, 4, 50):
        p = predict(SyncPS(), W, C.with_workers(n))
        x = f.evaluate(n=n, mu=MU, m=32, G=10e6, P=20e6, B=1e9, alpha=1e-3, u=2e-3, s=2)
        assert x == pytest.approx(p.throughput, rel=1e-12)
    # many workers: the PS round (linear in n) dominates H_n/mu (logarithmic)
    G, P, B, u, s, m = (f.symbols[k] for k in ("G", "P", "B", "u", "s", "m"))
    assert sympy.simplify(f.limit("n") - m * s * B / (G + P + u * B)) == 0
    fd = SyncPS().formula("deterministic")
    x = fd.evaluate(n=3, t=0.1, m=8, G=10e6, P=10e6, B=1e9, alpha=1e-3, u=0.0, s=1)
    assert x == pytest.approx(3 * 8 / (0.1 + 0.002 + 6 * 0.01), rel=1e-12)


def test_sweep_equals_predict_row_by_row():
    t = sweep(SyncPS(), W, C, workers=[1, 3, 7], bandwidth=["1GB/s", "10Gbit/s"], latency=[0, "1ms"])
    assert set(t["method"]) == {"closed_form"}
    for row in t.rows():
        c = Cluster(row["workers"], row["bandwidth"], latency=row["latency"], ps_shards=2)
        assert row["throughput"] == pytest.approx(predict(SyncPS(), W, c).throughput, rel=1e-12)
    # a non-exponential law takes the per-n quadrature
    w = Workload(Normal(0.1, 0.01), "10MB")
    t = sweep(SyncPS(), w, Cluster(1, "1GB/s"), workers=[2, 5])
    for row in t.rows():
        p = predict(SyncPS(), w, Cluster(row["workers"], "1GB/s"))
        assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
