"""BackupWorkers against independent sources: the exponential order statistic
(H_n - H_b)/mu summed by hand, the CTMC of the GSPN, simulation within its
confidence interval, a two-worker renewal argument, plain SyncPS for b = 0,
and a pathwise coupling for the direction finish < cancel."""

from __future__ import annotations

from fractions import Fraction

import pytest

from queuesgd.distributions import Deterministic, Exponential, LogNormal
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.prediction import predict, sweep
from queuesgd.schemes.barrier.backup import BackupWorkers
from queuesgd.schemes.ps.sync_ps import SyncPS
from queuesgd.workload import Cluster, RandomDelay, Workload

MU = 10.0
W = Workload(Exponential(MU), "4MB", batch_size=16, update_time="1ms")
C = Cluster(6, "1GB/s", latency="1ms")


def H(n: int) -> float:
    return float(sum(Fraction(1, i) for i in range(1, n + 1)))


def cancel_by_hand(n: int, b: int) -> float:
    # (H_n - H_b)/mu, then (n-b) pushes + n pulls of 4 MB at 1 GB/s, 2 x 1 ms, (n-b) x 1 ms updates
    return (H(n) - H(b)) / MU + 0.002 + (2 * n - b) * 0.004 + (n - b) * 0.001


@pytest.mark.parametrize("n, b", [(2, 1), (6, 0), (6, 1), (6, 3), (9, 8)])
def test_cancel_closed_form_and_ctmc(n, b):
    s = BackupWorkers(b, stragglers="cancel")
    c = C.with_workers(n)
    cf = predict(s, W, c)
    ct = predict(s, W, c, "ctmc")
    expected = cancel_by_hand(n, b)
    assert cf.method == "closed_form"
    assert cf.details["order_statistic"] == pytest.approx((H(n) - H(b)) / MU, rel=1e-12)
    assert cf.iteration_time == pytest.approx(expected, rel=1e-12)
    assert ct.iteration_time == pytest.approx(expected, rel=1e-9)
    assert cf.gradients_per_update == n - b
    assert cf.throughput == pytest.approx((n - b) * 16 / expected, rel=1e-12)


def test_cancel_simulation_within_ci():
    s = BackupWorkers(2, stragglers="cancel")
    cf = predict(s, W, C)
    sim = predict(s, W, C, "simulate", rng=21, iterations=30_000)
    assert sim.interval[0] <= cf.throughput <= sim.interval[1]
    # a non-exponential law too (quadrature against simulation)
    w = Workload(LogNormal(-2.5, 0.6), "4MB", batch_size=16)
    cf = predict(s, w, C)
    sim = predict(s, w, C, "simulate", rng=22, iterations=30_000)
    assert sim.interval[0] <= cf.throughput <= sim.interval[1]


def test_cancel_random_delay_closed_form_vs_simulation():
    s = BackupWorkers(1, stragglers="cancel")
    c = Cluster(6, "1GB/s", latency="1ms", stragglers=RandomDelay(2, "80ms"))
    cf = predict(s, W, c)
    sim = predict(s, W, c, "simulate", rng=5, iterations=30_000)
    assert sim.interval[0] <= cf.throughput <= sim.interval[1]


def test_two_workers_finish_ctmc_vs_simulation():
    # n = 2, b = 1 (the renewal argument of tests/schemes/test_barrier.py has an exponential
    # exchange; the scheme's is deterministic, an Erlang-20 in the CTMC): (1 + 20) x 2 markings.
    s = BackupWorkers(1)
    c = C.with_workers(2)
    ct = predict(s, W, c, "ctmc")
    sim = predict(s, W, c, "simulate", rng=2, iterations=40_000)
    assert ct.details["states"] == (1 + 20) * 2
    assert sim.interval[0] <= ct.throughput <= sim.interval[1]


@pytest.mark.parametrize("n, b", [(4, 1), (8, 2)])
def test_finish_ctmc_vs_simulation(n, b):
    c = C.with_workers(n)
    ct = predict(BackupWorkers(b), W, c, "ctmc")
    sim = predict(BackupWorkers(b), W, c, "simulate", rng=n, iterations=40_000)
    assert ct.method == "ctmc" and "Erlang-20" in ct.reason
    assert sim.interval[0] <= ct.throughput <= sim.interval[1]


def test_finish_without_backups_is_sync_ps():
    for n in (1, 3, 5):
        c = C.with_workers(n)
        sync = predict(SyncPS(), W, c)
        fin = predict(BackupWorkers(0), W, c)
        assert fin.method == "closed_form"  # k = n: nobody is late
        assert fin.throughput == pytest.approx(sync.throughput, rel=1e-12)
        fin_ctmc = predict(BackupWorkers(0), W, c, "ctmc")
        assert fin_ctmc.throughput == pytest.approx(sync.throughput, rel=1e-9)


def test_finish_is_slower_than_cancel():
    # Same compute times: a finishing straggler starts its next fresh gradient no earlier than a
    # cancelled one (it restarts when its stale work ends, not at the end of the round), so every
    # barrier comes no sooner; strictly later on average with random compute times. The PS round of
    # finish moves fewer bytes (n - b pulls), so compare the barrier times, not the throughput.
    c = C.with_workers(6)
    fin = predict(BackupWorkers(2), W, c, "ctmc")
    can = predict(BackupWorkers(2, stragglers="cancel"), W, c)
    assert fin.details["order_statistic"] > can.details["order_statistic"] * 1.05


def test_deterministic_compute_simulation_equals_closed_form():
    w = Workload(Deterministic(0.1), "4MB", batch_size=16)
    for s in (BackupWorkers(2, "cancel"), BackupWorkers(2, "finish")):
        sim = predict(s, w, C, "simulate", rng=0, iterations=1000)
        # every worker is done at 0.1 s: the finishing ones are never late for the next round
        pulls = 6 if s.stragglers == "cancel" else 4
        expected = 0.1 + 0.002 + (4 + pulls) * 0.004
        assert sim.iteration_time == pytest.approx(expected, rel=1e-12)
    assert predict(BackupWorkers(2, "cancel"), w, C).iteration_time == pytest.approx(0.142, rel=1e-12)


def test_auto_method_and_reasons():
    assert predict(BackupWorkers(1), W, C).method == "ctmc"
    p = predict(BackupWorkers(1), Workload(LogNormal(-2.5, 0.6), "4MB"), C, rng=1, iterations=2000)
    assert p.method == "simulate" and "LogNormal" in p.reason
    with pytest.raises(NotRepresentable, match="finish"):
        predict(BackupWorkers(1), W, C, "closed_form")
    with pytest.raises(NotRepresentable, match="finish"):
        BackupWorkers(1).formula()


def test_formula_cancel_matches_closed_form():
    f = BackupWorkers(stragglers="cancel").formula()
    for n, b in [(6, 1), (6, 3), (2, 1)]:
        p = predict(BackupWorkers(b, "cancel"), W, C.with_workers(n))
        x = f.evaluate(n=n, b=b, mu=MU, m=16, G=4e6, P=4e6, B=1e9, alpha=1e-3, u=1e-3, s=1)
        assert x == pytest.approx(p.throughput, rel=1e-12)


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="BackupWorkers.backups") as err:
        predict(BackupWorkers(6), W, C)
    assert "an integer 0 <= backups < workers (= 6)" in str(err.value)
    with pytest.raises(InvalidParameterError, match="BackupWorkers.backups"):
        BackupWorkers(-1)
    with pytest.raises(InvalidParameterError, match="BackupWorkers.backups"):
        BackupWorkers(1.5)
    with pytest.raises(InvalidParameterError, match="BackupWorkers.stragglers"):
        BackupWorkers(1, stragglers="ignore")


def test_sweep_backups_equals_predict():
    for mode in ("cancel", "finish"):
        t = sweep(BackupWorkers(stragglers=mode), W, C, workers=[4, 6], backups=[0, 1, 2])
        assert len(t) == 6
        for row in t.rows():
            c = C.with_workers(row["workers"])
            p = predict(BackupWorkers(row["backups"], mode), W, c)
            assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
            assert row["gradients_per_update"] == row["workers"] - row["backups"]
