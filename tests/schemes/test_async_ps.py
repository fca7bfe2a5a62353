"""AsyncPS against independent sources: the product-form normalization constant
computed by brute force in the test, the one-worker closed form, the asymptotic
limit, the CTMC of the same network, and the machine-repairman formula."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import queuesgd as q
from queuesgd.distributions import Deterministic, Erlang, Exponential
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.queueing.ctmc import ctmc_solve
from queuesgd.schemes.ps.async_ps import AsyncPS


def normalization_throughput(delays: list[float], queues: list[float], n: int) -> float:
    """X(n) = G(n-1)/G(n) for delays + single-server queues (product form, by enumeration)."""
    z = sum(delays)

    def G(m: int) -> float:
        total = 0.0
        for counts in itertools.product(range(m + 1), repeat=len(queues)):
            k = sum(counts)
            if k > m:
                continue
            term = math.prod(d**c for d, c in zip(queues, counts))
            total += term * z ** (m - k) / math.factorial(m - k)
        return total

    return G(n - 1) / G(n)


W = q.Workload(compute=0.05, gradient_bytes="20MB", parameter_bytes="20MB", batch_size=16, update_time="4ms")
C = q.Cluster(workers=1, bandwidth="1Gbit/s", latency="1ms")


def test_stations_and_demands_by_hand():
    net = q.AsyncPS().queueing_network(W, C)
    assert net.station_names == ("compute", "latency", "uplink", "update", "downlink")
    # 20 MB at 1 Gbit/s = 20e6 / 125e6 = 0.16 s
    assert net.demands[:, 0].tolist() == pytest.approx([0.05, 0.002, 0.16, 0.004, 0.16], rel=1e-15)


def test_one_worker_is_sum_of_phases():
    p = q.predict(q.AsyncPS(), W, C)
    assert p.iteration_rate == pytest.approx(1 / (0.05 + 0.002 + 0.16 + 0.004 + 0.16), rel=1e-12)
    assert p.throughput == pytest.approx(16 * p.iteration_rate, rel=1e-15)
    assert p.breakdown["waiting"] == pytest.approx(0.0, abs=1e-15)
    assert p.breakdown["communication"] == pytest.approx(0.002 + 0.32, rel=1e-12)


@pytest.mark.parametrize("workers", [2, 3, 5, 8])
def test_matches_normalization_constant(workers):
    p = q.predict(q.AsyncPS(), W, C.with_workers(workers))
    expected = normalization_throughput([0.05, 0.002], [0.16, 0.004, 0.16], workers)
    assert p.iteration_rate == pytest.approx(expected, rel=1e-12)


def test_saturates_at_bottleneck():
    # one clear bottleneck (uplink 0.16 s, downlink 0.08 s): X -> 1/0.16 geometrically fast
    w = q.Workload(
        compute=0.05, gradient_bytes="20MB", parameter_bytes="10MB", batch_size=16, update_time="4ms"
    )
    p = q.predict(q.AsyncPS(), w, C.with_workers(400))
    assert p.iteration_rate == pytest.approx(1 / 0.16, rel=1e-9)
    assert p.bottleneck == "uplink"
    assert p.stations["uplink"].utilization == pytest.approx(1.0, rel=1e-6)


def test_sharding_raises_the_ceiling():
    c = q.Cluster(workers=400, bandwidth="1Gbit/s", latency="1ms", ps_shards=4)
    w = q.Workload(
        compute=0.05, gradient_bytes="20MB", parameter_bytes="10MB", batch_size=16, update_time="4ms"
    )
    p = q.predict(q.AsyncPS(), w, c)
    # four uplink shards of 0.04 s each share the bottleneck: X(N) -> 4/0.16 like N/(N+3)
    assert p.iteration_rate == pytest.approx(4 / 0.16, rel=2e-2)
    assert p.iteration_rate < 4 / 0.16
    # one worker alone still moves all its bytes over its own link
    p1 = q.predict(q.AsyncPS(), W, c.with_workers(1))
    assert p1.iteration_rate == pytest.approx(1 / 0.376, rel=1e-12)


def test_repairman_special_case():
    # no latency, no update, tiny parameters: compute delay + one uplink queue
    w = q.Workload(compute=0.3, gradient_bytes=125e6, parameter_bytes=1, batch_size=1)
    c = q.Cluster(workers=1, bandwidth=125e6)
    for n in (1, 2, 7, 30):
        x = q.predict(q.AsyncPS(), w, c.with_workers(n)).iteration_rate
        D, Z = 1.0 + 1 / 125e6, 0.3
        expected = normalization_throughput([Z], [1.0, 1 / 125e6], n)
        assert x == pytest.approx(expected, rel=1e-10)
        # and the closed form X = (1 - p0)/D with p0 Erlang-B (the downlink is negligible)
        r = Z / 1.0
        p0 = (r**n / math.factorial(n)) / sum(r**j / math.factorial(j) for j in range(n + 1))
        assert x == pytest.approx((1 - p0) / D, rel=1e-6)


@pytest.mark.parametrize("workers", [1, 3, 6])
def test_ctmc_agrees_with_mva(workers):
    c = q.Cluster(workers=workers, bandwidth="1Gbit/s", latency="1ms", ps_shards=2)
    a = q.predict(q.AsyncPS(), W, c, method="mva")
    b = q.predict(q.AsyncPS(), W, c, method="ctmc")
    assert b.method == "ctmc"
    assert a.iteration_rate == pytest.approx(b.iteration_rate, rel=1e-9)
    for s in a.stations:
        assert a.stations[s].queue_length == pytest.approx(b.stations[s].queue_length, rel=1e-8, abs=1e-12)


def test_heterogeneous_speeds_exact_vs_ctmc():
    c = q.Cluster(workers=4, bandwidth="1Gbit/s", speeds=[1, 1, 2, 4])
    a = q.predict(q.AsyncPS(), W, c)
    b = q.predict(q.AsyncPS(), W, c, method="ctmc")
    assert a.model.classes == ("speed=1", "speed=2", "speed=4")
    assert a.iteration_rate == pytest.approx(b.iteration_rate, rel=1e-9)


def test_equal_speeds_scale_compute():
    fast = q.predict(q.AsyncPS(), W, q.Cluster(workers=5, bandwidth="1Gbit/s", latency="1ms", speeds=[2] * 5))
    w2 = q.Workload(compute=0.025, gradient_bytes="20MB", batch_size=16, update_time="4ms")
    ref = normalization_throughput([0.025, 0.002], [0.16, 0.004, 0.16], 5)
    assert fast.iteration_rate == pytest.approx(ref, rel=1e-12)
    assert q.predict(q.AsyncPS(), w2, C.with_workers(5)).iteration_rate == pytest.approx(ref, rel=1e-12)


def test_sweep_rows_match_normalization_constant():
    t = q.sweep(q.AsyncPS(), W, C, workers=[1, 2, 4], bandwidth=["1Gbit/s", "10Gbit/s"], latency=["1ms", 0])
    assert len(t) == 12
    for row in t.rows():
        g = 20e6 / row["bandwidth"]
        delays = [0.05, 2 * row["latency"]]
        x = normalization_throughput(delays, [g, 0.004, g], row["workers"])
        assert row["iteration_rate"] == pytest.approx(x, rel=1e-12)
        assert row["throughput"] == pytest.approx(16 * x, rel=1e-12)
        # scaling factor against one worker computing alone (Zhang et al.): 1 / 0.05 s per step
        assert row["scaling_factor"] == pytest.approx(x * 0.05 / row["workers"], rel=1e-12)


def test_sweep_is_predict_row_by_row_on_catalog_workload():
    t = q.sweep(q.AsyncPS(), "resnet50", q.Cluster(workers=1, bandwidth="10Gbit/s"), workers=[1, 16, 64])
    for row in t.rows():
        p = q.predict(q.AsyncPS(), "resnet50", q.Cluster(workers=row["workers"], bandwidth="10Gbit/s"))
        assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
        assert row["bottleneck"] == p.bottleneck


@pytest.mark.parametrize("shards", [1, 3])
def test_batch_mva_equals_the_mva_road_row_by_row(shards):
    # the vectorized form (mva_batch) against AsyncPS.solve row by row: rate, method label and
    # bottleneck, up to 3,000 workers (identical workers are one class: exact MVA never falls back)
    c = q.Cluster(4, "1Gbit/s", latency="1ms", ps_shards=shards)
    n = np.array([1, 2, 7, 64, 500, 3000])
    bw = np.array([1.25e8, 1e9, 2.5e8, 1.25e8, 1e10, 1e8])
    lat = np.array([0.0, 1e-3, 5e-5, 0.0, 1e-4, 1e-3])
    batch = AsyncPS().batch_mva(W, c, n, bw, lat)
    for i in range(len(n)):
        row = q.Cluster(int(n[i]), float(bw[i]), latency=float(lat[i]), ps_shards=shards)
        sol = AsyncPS().solve(W, row, "mva")
        assert batch.iteration_rate[i] == pytest.approx(sol.iteration_rate, rel=1e-12)
        assert batch.method[i] == sol.method == "mva"
        assert batch.bottleneck[i] == sol.bottleneck
        assert batch.gradients_per_update[i] == sol.gradients_per_update == 1.0
    with pytest.raises(NotRepresentable):
        AsyncPS().batch_mva(W, q.Cluster(2, "1Gbit/s", speeds=(1.0, 2.0)), n[:1], bw[:1], lat[:1])


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="scheme"):
        q.predict("async", W, C)
    with pytest.raises(InvalidParameterError, match="method"):
        q.predict(q.AsyncPS(), W, C, method="magic")
    with pytest.raises(InvalidParameterError, match="workers"):
        q.sweep(q.AsyncPS(), W, C, workers=[0, 2])
    with pytest.raises(InvalidParameterError, match="bandwidth"):
        q.sweep(q.AsyncPS(), W, C, bandwidth=["fast"])
    with pytest.raises(InvalidParameterError, match="workload"):
        q.predict(q.AsyncPS(), "resnet9000", C)
    with pytest.raises(InvalidParameterError, match="column"):
        q.sweep(q.AsyncPS(), W, C)["nope"]


def test_vectorized_sweep_large_grid_consistent():
    workers = np.arange(1, 101)
    bw = np.geomspace(1e8, 1e10, 100)
    t = q.sweep(q.AsyncPS(), W, C, workers=workers, bandwidth=bw)
    assert len(t) == 10_000
    x = t["iteration_rate"].reshape(100, 100, 1)[..., 0]
    # throughput never falls as workers are added or bandwidth grows
    assert np.all(np.diff(x, axis=0) >= -1e-12)
    assert np.all(np.diff(x, axis=1) >= -1e-12)
    assert np.all(t["scaling_factor"] <= 1 + 1e-12)


# ---- the Petri net, staleness, simulation, formula (issue 4) ---------------------------------

WE = q.Workload(
    compute=Exponential(mean=0.05),
    gradient_bytes="20MB",
    parameter_bytes="20MB",
    batch_size=16,
    update_time="4ms",
)


@pytest.mark.parametrize("workers", [1, 2, 5])
@pytest.mark.parametrize("shards", [1, 2])
def test_gspn_ctmc_agrees_with_mva_and_network_ctmc(workers, shards):
    c = q.Cluster(workers=workers, bandwidth="1Gbit/s", latency="1ms", ps_shards=shards)
    a = AsyncPS().solve(WE, c, "mva")
    b = AsyncPS().solve(WE, c, "ctmc")
    ref = ctmc_solve(AsyncPS().queueing_network(WE, c))
    assert b.model.name == "async-ps"  # the Petri net was solved, not the network
    assert b.iteration_rate == pytest.approx(a.iteration_rate, rel=1e-9)
    assert b.iteration_rate == pytest.approx(ref.throughput, rel=1e-9)
    for s in a.stations:
        assert b.stations[s].queue_length == pytest.approx(ref.queue_length[s], rel=1e-8, abs=1e-12)
    # staleness: arrival theorem (MVA at W-1) against the CTMC's Palm average over update firings
    assert b.staleness == pytest.approx(a.staleness, rel=1e-9, abs=1e-12)


def test_staleness_heterogeneous_speeds_mva_vs_ctmc():
    c = q.Cluster(workers=4, bandwidth="1Gbit/s", latency="1ms", speeds=[1, 1, 2, 4])
    a = AsyncPS().solve(WE, c, "mva")
    b = AsyncPS().solve(WE, c, "ctmc")
    assert b.iteration_rate == pytest.approx(a.iteration_rate, rel=1e-9)
    assert b.staleness == pytest.approx(a.staleness, rel=1e-9)


def test_staleness_one_and_two_workers():
    for method in ("mva", "ctmc"):
        assert AsyncPS().solve(WE, C.with_workers(1), method).staleness == 0.0
        # alone, the other worker never waits for the downlink: it is always inside the window
        assert AsyncPS().solve(WE, C.with_workers(2), method).staleness == pytest.approx(1.0, rel=1e-12)


def test_staleness_three_workers_by_hand():
    # compute Z, uplink U, downlink D; at a write the 2 others see the N=2 network (arrival theorem)
    # and are outside the window only when both sit at the downlink, one waiting:
    # staleness = 2 - P2(d = 2) = 2 - D^2 / G(2), G(2) = Z^2/2 + U^2 + D^2 + ZU + ZD + UD.
    w = q.Workload(compute=Exponential(mean=0.05), gradient_bytes="20MB", parameter_bytes="10MB")
    c = q.Cluster(workers=3, bandwidth="1Gbit/s")
    Z, U, D = 0.05, 0.16, 0.08
    G2 = Z**2 / 2 + U**2 + D**2 + Z * U + Z * D + U * D
    expected = 2 - D**2 / G2
    for method in ("mva", "ctmc"):
        assert AsyncPS().solve(w, c, method).staleness == pytest.approx(expected, rel=1e-12)


def test_staleness_approaches_w_minus_one_with_a_slow_ps():
    w = q.Workload(compute=0.05, gradient_bytes="1MB", update_time="1s")
    for n in (10, 40):
        p = q.predict(AsyncPS(), w, q.Cluster(workers=n, bandwidth="10Gbit/s"))
        assert p.staleness == pytest.approx(n - 1, rel=1e-6)
    # and it never exceeds W - 1
    p = q.predict(AsyncPS(), W, C.with_workers(12))
    assert 0 < p.staleness <= 11


@pytest.mark.parametrize("workers", [3, 5])
def test_erlang_compute_ctmc_is_insensitive(workers):
    # the CTMC with the exact Erlang-3 phases equals MVA (which only sees the mean)
    w = q.Workload(compute=Erlang(3, mean=0.05), gradient_bytes="20MB", batch_size=16, update_time="4ms")
    c = q.Cluster(workers=workers, bandwidth="1Gbit/s", latency="1ms")
    a = AsyncPS().solve(w, c, "mva")
    b = AsyncPS().solve(w, c, "ctmc")
    assert "replaced" not in b.reason
    assert b.details["states"] > AsyncPS().solve(WE, c, "ctmc").details["states"]
    assert b.iteration_rate == pytest.approx(a.iteration_rate, rel=1e-9)
    assert b.staleness == pytest.approx(a.staleness, rel=1e-9)


def test_ctmc_with_deterministic_compute_says_what_it_did():
    b = AsyncPS().solve(W, C.with_workers(3), "ctmc")
    assert "insensitive" in b.reason and "phase_type" in b.details


@pytest.mark.parametrize("compute", [Exponential(mean=0.05), Deterministic(0.05)])
def test_simulation_matches_mva_within_ci(compute):
    # exponential PS service: the simulation is the product-form network with the actual compute law;
    # MVA only sees the compute mean (insensitivity of the delay station)
    w = q.Workload(compute=compute, gradient_bytes="20MB", batch_size=16, update_time="4ms")
    c = q.Cluster(workers=5, bandwidth="1Gbit/s", latency="1ms", ps_shards=2)
    a = q.predict(AsyncPS(), w, c)
    s = q.predict(AsyncPS(), w, c, method="simulate", rng=7, iterations=40_000)
    assert s.method == "simulate"
    assert s.interval[0] <= a.throughput <= s.interval[1]
    lo, hi = s.details["staleness_interval"]
    assert lo <= a.staleness <= hi
    dist = s.details["staleness_distribution"]
    assert sum(dist.values()) == pytest.approx(1.0, rel=1e-12)
    assert sum(k * v for k, v in dist.items()) == pytest.approx(s.staleness, rel=1e-12)
    assert max(dist) >= 4  # five workers: up to 4 other updates fit in one window


def test_simulation_one_worker_is_exact_in_staleness():
    s = q.predict(AsyncPS(), WE, C, method="simulate", rng=3, iterations=2000)
    assert s.staleness == 0.0 and s.details["staleness_distribution"] == {0: 1.0}
    x = 1 / (0.05 + 0.002 + 0.16 + 0.004 + 0.16)
    assert s.interval[0] / 16 <= x <= s.interval[1] / 16


def test_stragglers_only_by_simulation():
    c = q.Cluster(workers=4, bandwidth="1Gbit/s", stragglers=q.RandomDelay(1, 0.5))
    with pytest.raises(NotRepresentable, match="simulate"):
        q.predict(AsyncPS(), W, c)
    s = q.predict(AsyncPS(), W, c, method="simulate", rng=0, iterations=2000)
    fast = q.predict(AsyncPS(), W, q.Cluster(workers=4, bandwidth="1Gbit/s"))
    assert s.throughput < fast.throughput


@pytest.mark.parametrize("compute", ["exponential", "deterministic"])
@pytest.mark.parametrize("workers", [1, 3])
def test_formula_equals_numeric_mva(compute, workers):
    f = AsyncPS().formula(compute, workers=workers)
    values = dict(m=16, G=20e6, P=10e6, B=125e6, alpha=1e-3, u=4e-3)
    values.update(mu=20.0) if compute == "exponential" else values.update(t=0.05)
    w = q.Workload(compute=0.05, gradient_bytes=20e6, parameter_bytes=10e6, batch_size=16, update_time=4e-3)
    c = q.Cluster(workers=workers, bandwidth=125e6, latency=1e-3)
    assert f.evaluate(**values) == pytest.approx(q.predict(AsyncPS(), w, c).throughput, rel=1e-12)
    # and against the brute-force normalization constant
    x = normalization_throughput([0.05, 2e-3], [0.16, 4e-3, 0.08], workers)
    assert f.evaluate(**values) == pytest.approx(16 * x, rel=1e-12)


def test_formula_needs_a_population():
    with pytest.raises(NotRepresentable, match="workers=N"):
        AsyncPS().formula()
    with pytest.raises(InvalidParameterError, match="AsyncPS.formula.workers"):
        AsyncPS().formula(workers=0)
    with pytest.raises(InvalidParameterError, match="compute"):
        AsyncPS().formula("weibull", workers=2)


def test_petri_net_layout():
    net = AsyncPS().petri_net(W, q.Cluster(workers=3, bandwidth="1Gbit/s", ps_shards=2, speeds=[1, 2, 2]))
    names = set(net.place_names)
    assert {"uplink[0].idle", "uplink[1].wait[speed=2]", "downlink[1].busy[speed=1]"} <= names
    assert "latency" not in " ".join(names)  # no latency: no latency stage


def test_deterministic_service_times_by_hand():
    from queuesgd import AsyncPS, Cluster, Workload, predict
    from queuesgd.errors import NotRepresentable

    w = Workload(0.02, 1e6, batch_size=32)
    scheme = AsyncPS(service="deterministic")
    # Deterministic compute and transfers: n workers that never meet at a queue cycle in 20 + 8 + 8 ms
    # as long as each queue is busy less than the cycle (n x 8 ms <= 36 ms).
    for n in (1, 2, 4):
        p = predict(scheme, w, Cluster(n, 125e6), rng=0)
        assert p.method == "simulate"
        assert p.throughput == pytest.approx(32 * n / 0.036, rel=1e-9)
    # Saturated: the uplink serves one 8 ms transfer after another.
    assert predict(scheme, w, Cluster(16, 125e6), rng=0).throughput == pytest.approx(32 / 0.008, rel=1e-6)
    with pytest.raises(NotRepresentable, match="exponential"):
        predict(scheme, w, Cluster(2, 125e6), method="mva")


# ---- a PS link whose two directions slow each other (duplex < 1) ----------------------------------
def test_coupled_link_event_loop_at_full_duplex_is_the_fcfs_tandem():
    """The coupled event loop with duplex = 1 and the order-preserving tandem recursion agree exactly."""
    from queuesgd.schemes.ps.async_ps_sim import _run_coupled, _run_tandem

    S = np.random.default_rng(7).exponential([0.006, 0.0004, 0.005], size=(3000, 3))
    out = []
    for run in (lambda d: _run_tandem(d, S, 3, 0.001, 2), lambda d: _run_coupled(d, S, 3, 0.001, 1.0)):
        rng = np.random.default_rng(1)
        out.append(run(lambda k, g=rng: g.exponential(0.01, (k, 3))))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_half_duplex_two_workers_by_hand():
    """Two workers, compute 10 ms, transfers 6 ms, no update, each direction at half rate when both send.

    By hand: W0 pushes 10-16; then W0's reply and W1's push share the link and both end at 28; W1's
    reply runs alone 28-34 while W0 computes until 38; W0 pushes alone 38-44, when W1 (computing 34-44)
    pushes and W0's reply starts: both end at 56, as at 28 -- a period of 28 ms with two updates
    (full duplex: 22 ms).
    """
    w = q.Workload(compute=Deterministic(0.010), gradient_bytes=6000, batch_size=1)
    c = q.Cluster(2, 1e6)
    half = q.predict(AsyncPS(service="deterministic", duplex=0.5), w, c, "simulate", rng=0, iterations=2000)
    assert half.iteration_rate == pytest.approx(2 / 0.028, rel=1e-9)
    full = q.predict(AsyncPS(service="deterministic"), w, c, "simulate", rng=0, iterations=2000)
    assert full.iteration_rate == pytest.approx(2 / 0.022, rel=1e-9)
    assert "0.5 of the rate" in half.reason


def test_one_worker_never_overlaps_its_own_push_and_reply():
    """With one worker the link is never busy both ways: any duplex gives 1 / (c + up + u + down)."""
    w = q.Workload(compute=Deterministic(0.010), gradient_bytes=6000, batch_size=1, update_time=0.001)
    sol = q.predict(AsyncPS(service="deterministic", duplex=0.3), w, q.Cluster(1, 1e6), "simulate", rng=0)
    assert sol.iteration_rate == pytest.approx(1 / (0.010 + 0.006 + 0.001 + 0.006), rel=1e-9)


def test_duplex_is_checked_and_refused_by_the_product_form_roads():
    w = q.Workload(compute=0.01, gradient_bytes=6000, batch_size=1)
    for bad in (0, -0.5, 1.5, float("nan")):
        with pytest.raises(InvalidParameterError, match="duplex"):
            AsyncPS(duplex=bad)
    s = AsyncPS(duplex=0.8)
    assert s.auto_method(w, q.Cluster(2, 1e6))[0] == "simulate"
    for method in ("mva", "ctmc"):
        with pytest.raises(NotRepresentable, match="duplex"):
            s.solve(w, q.Cluster(2, 1e6), method)
    with pytest.raises(NotRepresentable, match="duplex"):
        s.formula(workers=2)
    with pytest.raises(NotRepresentable, match="one PS shard"):
        s.solve(w, q.Cluster(2, 1e6, ps_shards=2), "simulate", iterations=200)


def test_staleness_on_whole_nodes_by_enumeration():
    # 4 workers on 2 nodes of 2: the W - 1 = 3 others at a write are not a whole-node cluster, but
    # the PS model reads only the per-worker link. Staleness = 3 - (Q_dl(3) - U_dl(3)), with the
    # population-3 product form P(u, d) ~ U^u D^d Z^(3-u-d) / (3-u-d)! enumerated here.
    w = q.Workload(compute=Exponential(mean=0.05), gradient_bytes="20MB", parameter_bytes="10MB")
    c = q.Cluster(4, "1Gbit/s", gpus_per_node=2, node_bandwidth="200Gbit/s")
    Z, U, D = 0.05, 0.16, 0.08
    states = [(u, d) for u in range(4) for d in range(4 - u)]
    p = [U**u * D**d * Z ** (3 - u - d) / math.factorial(3 - u - d) for u, d in states]
    q_dl = sum(pi * d for pi, (u, d) in zip(p, states)) / sum(p)
    u_dl = sum(pi for pi, (u, d) in zip(p, states) if d > 0) / sum(p)
    for method in ("mva", "ctmc"):
        assert AsyncPS().solve(w, c, method).staleness == pytest.approx(3 - (q_dl - u_dl), rel=1e-12)
    # and the throughput, on whole nodes, is the flat product form's; sweep gives the same rows
    rows = q.sweep(AsyncPS(), w, c, workers=[2, 4, 8])["throughput"]
    for n, x in zip((2, 4, 8), rows):
        expected = normalization_throughput([Z], [U, D], n) * w.batch_size
        assert q.predict(AsyncPS(), w, c.with_workers(n)).throughput == pytest.approx(expected, rel=1e-12)
        assert x == pytest.approx(expected, rel=1e-12)
    # several speeds on whole nodes: the arrival theorem per class against the CTMC's write firings
    c = q.Cluster(4, "1Gbit/s", gpus_per_node=2, node_bandwidth="200Gbit/s", speeds=[1, 1, 2, 4])
    a, b = AsyncPS().solve(w, c, "mva"), AsyncPS().solve(w, c, "ctmc")
    assert b.staleness == pytest.approx(a.staleness, rel=1e-9)
