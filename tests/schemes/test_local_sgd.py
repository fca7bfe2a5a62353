"""LocalSGD: H local steps, then a ring all-reduce of the model (Lin et al., ICLR 2020).

Independent sources: the ring all-reduce scheme (H = 1), hand-computed order
statistics of Erlang sums, numerical integration with SciPy's gamma law, the
CTMC of the barrier's GSPN, the Monte Carlo, and the symbolic formula.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

import queuesgd as q
from queuesgd.distributions import Deterministic, Erlang, Exponential, HyperExponential, LogNormal
from queuesgd.errors import InvalidParameterError, NotRepresentable

MU = 10.0
W = q.Workload(Exponential(MU), "20MB", batch_size=32, update_time="2ms")
C = q.Cluster(4, "1Gbit/s", latency="20us")


def _ring(n: int, size: float, bw: float, lat: float) -> float:
    return 2 * (n - 1) / n * size / bw + 2 * (n - 1) * lat


@pytest.mark.parametrize("method", ["closed_form", "ctmc", "simulate"])
def test_period_one_is_the_ring_allreduce_by_every_method(method):
    a = q.predict(q.LocalSGD(period=1), W, C, method=method, rng=5, iterations=3_000)
    b = q.predict(q.RingAllReduce(), W, C, method=method, rng=5, iterations=3_000)
    assert a.throughput == pytest.approx(b.throughput, rel=1e-12)
    assert a.iteration_rate == pytest.approx(b.iteration_rate, rel=1e-12)
    assert a.gradients_per_update == b.gradients_per_update == 4


def test_two_workers_two_steps_by_hand():
    # E[min of two Erlang(2, mu)] = int (1 + mu x)^2 e^{-2 mu x} dx = 1.25 / mu; E[max] = 2 x 2/mu - 1.25/mu.
    c = q.Cluster(2, "1Gbit/s")
    p = q.predict(q.LocalSGD(period=2), W, c)
    comm = _ring(2, 20e6, 1.25e8, 0.0)
    assert p.iteration_time == pytest.approx(2.75 / MU + comm + 2 * 0.002, rel=1e-10)
    assert p.throughput == pytest.approx(2 * 2 * 32 / p.iteration_time, rel=1e-12)
    assert p.gradients_per_update == 4


@pytest.mark.parametrize("n,H", [(3, 4), (8, 3)])
def test_closed_form_is_the_order_statistic_of_gamma_sums(n, H):
    def integrand(x: float) -> float:
        return 1.0 - stats.gamma.cdf(x, H, scale=1 / MU) ** n

    emax = integrate.quad(integrand, 0, np.inf, epsabs=1e-13, epsrel=1e-12)[0]
    c = C.with_workers(n)
    p = q.predict(q.LocalSGD(period=H), W, c)
    expected = emax + _ring(n, 20e6, 1.25e8, 20e-6) + H * 0.002
    assert p.iteration_time == pytest.approx(expected, rel=1e-8)
    assert p.breakdown["compute"] == pytest.approx(H / MU, rel=1e-12)
    assert p.breakdown["waiting"] == pytest.approx(emax - H / MU, rel=1e-7)


def test_ctmc_of_erlang_phases_equals_the_closed_form():
    s = q.LocalSGD(period=3)
    exact = q.predict(s, W, C, method="closed_form")
    ctmc = q.predict(s, W, C, method="ctmc")
    assert ctmc.throughput == pytest.approx(exact.throughput, rel=1e-9)
    assert "phase_type" not in ctmc.details  # Erlang-3 sums are phase-type: no fit


@pytest.mark.parametrize("period", [3, 4])
def test_hyperexponential_steps_ctmc_equals_the_closed_form(period):
    # Steps of SCV 50 (a two-branch hyperexponential): their sum over 3 steps or more raised in
    # PhaseType before (its chained exit rates cancelled below 0; audit 2026-11-27), by both methods.
    w = q.Workload(HyperExponential([0.99, 0.01], [1.0, 0.01]), "1MB", batch_size=32, update_time="0.1ms")
    s = q.LocalSGD(period=period)
    exact = q.predict(s, w, C, method="closed_form")
    assert q.predict(s, w, C, method="ctmc").throughput == pytest.approx(exact.throughput, rel=1e-9)


def test_simulation_agrees_within_its_interval():
    s = q.LocalSGD(period=4)
    exact = q.predict(s, W, C)
    sim = q.predict(s, W, C, method="simulate", rng=7, iterations=20_000)
    lo, hi = sim.interval
    assert lo <= exact.throughput <= hi
    assert sim.throughput == pytest.approx(exact.throughput, rel=0.01)


def test_lognormal_steps_have_no_exact_sum_so_auto_simulates():
    w = q.Workload(LogNormal.from_mean_scv(0.1, 0.5), "20MB", batch_size=32)
    p = q.predict(q.LocalSGD(period=2), w, C, rng=3, iterations=4_000)
    assert p.method == "simulate" and "no closed form" in p.reason
    # the simulation sees the actual laws: H steps of mean 0.1 s each, the max of n sums above that
    assert p.iteration_time > 0.2 + _ring(4, 20e6, 1.25e8, 20e-6)


def test_random_delays_simulate_and_one_step_keeps_its_closed_form():
    c = q.Cluster(4, "1Gbit/s", stragglers=q.RandomDelay(1, "50ms"))
    assert q.predict(q.LocalSGD(period=2), W, c, rng=1, iterations=2_000).method == "simulate"
    one = q.predict(q.LocalSGD(period=1), W, c)
    assert one.method == "closed_form"
    assert one.throughput == pytest.approx(q.predict(q.RingAllReduce(), W, c).throughput, rel=1e-12)


def test_deterministic_formula_and_prediction_agree():
    w = q.Workload(Deterministic(0.1), "100MB", batch_size=32, update_time="1ms")
    f = q.derive(q.LocalSGD(), compute="deterministic")
    assert {"n", "H", "m", "t", "S", "B", "alpha", "u"} == set(f.symbols)
    for n, H in [(2, 1), (4, 4), (16, 8)]:
        p = q.predict(q.LocalSGD(period=H), w, q.Cluster(n, "10Gbit/s", latency="5us"))
        value = f.evaluate(n=n, H=H, m=32, t=0.1, S=1e8, B=1.25e9, alpha=5e-6, u=1e-3)
        assert value == pytest.approx(p.throughput, rel=1e-12)
    with pytest.raises(NotRepresentable, match="deterministic"):
        q.derive("local-sgd")


def test_formula_at_h_equal_one_is_the_ring_formula():
    import sympy

    f = q.derive(q.LocalSGD(), compute="deterministic")
    ring = q.derive(q.RingAllReduce(), compute="deterministic")
    H = f.symbols["H"]
    assert sympy.simplify(f.expr.subs(H, 1) - ring.expr) == 0


def test_sweep_over_periods_equals_predict():
    t = q.sweep(q.LocalSGD(), W, C, workers=[2, 8], period=[1, 4, 16])
    for row in t.rows():
        p = q.predict(q.LocalSGD(period=row["period"]), W, C.with_workers(row["workers"]))
        assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    # longer periods amortize the all-reduce: throughput grows with H at fixed n
    eight = t["throughput"][t["workers"] == 8]
    assert np.all(np.diff(eight) > 0)


def test_bad_period_names_the_field():
    with pytest.raises(InvalidParameterError, match="LocalSGD.period"):
        q.LocalSGD(period=0)
    with pytest.raises(InvalidParameterError, match="LocalSGD.period"):
        q.LocalSGD(period=2.5)


def test_erlang_sum_is_the_round_law():
    laws = q.LocalSGD(period=5).round_laws(W, C)
    assert laws == [Erlang(5, MU)] * 4
