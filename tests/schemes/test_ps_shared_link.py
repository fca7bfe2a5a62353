"""link="shared" (arrival times on one PS link) of BackupWorkers, StaticCutoff and StaleSynchronous.

Independent sources: hand-computed deterministic rounds; a SimPy peer of the
live loops written from their description (``tests/peers/simpy_ps.py``),
pathwise on the same compute times and within confidence intervals on its
own draws; the limit of free links (today's phase model, exactly).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import queuesgd as q
from queuesgd.batchmeans import warmup_cut
from queuesgd.distributions import LogNormal
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.barrier.kofn_sim import simulate_rounds
from queuesgd.schemes.barrier.ps_arrivals import simulate_ps_barrier, simulate_ps_ssp
from queuesgd.schemes.laws import sample_compute

MS = 1e-3


def barrier_ps(*args, **kwargs):
    """The SimPy peer of the barrier loops (``pip install -e ".[peers]"``); skips without SimPy."""
    pytest.importorskip("simpy")
    from peers.simpy_ps import barrier_ps as peer

    return peer(*args, **kwargs)


def ssp_ps(*args, **kwargs):
    """The SimPy peer of the SSP loop (``pip install -e ".[peers]"``); skips without SimPy."""
    pytest.importorskip("simpy")
    from peers.simpy_ps import ssp_ps as peer

    return peer(*args, **kwargs)


#: 1 MB gradients on 1 Gbit/s (8 ms a push or a reply), lognormal compute of median 50 ms, cv ~0.3.
W = q.Workload(LogNormal(math.log(0.05), 0.3), "1MB", batch_size=32, update_time="1ms")
C = q.Cluster(4, "1Gbit/s", latency="0.5ms")


def _interval(values: np.ndarray, weights: np.ndarray, batches: int = 20) -> tuple[float, float]:
    """sum(values) / sum(weights) and the half-width of its batch-means 95% interval (written here)."""
    m = values.size // batches
    v = values[: m * batches].reshape(batches, m).sum(axis=1)
    w = weights[: m * batches].reshape(batches, m).sum(axis=1)
    r = v / w
    return float(values.sum() / weights.sum()), float(
        stats.t.ppf(0.975, batches - 1) * r.std(ddof=1) / 20**0.5
    )


# ---------------------------------------------------------------- hand-computed rounds
def test_replies_of_a_round_share_the_link_and_leave_together():
    """The live PS starts every contributor's isend at once and waits for all: no early restart.

    n = k = 3, compute 10 ms each, G/B = P/B = 8 ms. Round 0: pushes arrive at 18, 26, 34 (the
    barrier); the three replies share the link and all leave at 34 + 24 = 58. Round 1: the three
    computations end at 68, the pushes arrive at 76, 84, 92, and the replies leave at 116: every
    round lasts 58 ms (replies one after another, in worker order, would let worker 0 restart at
    42 and give 42 ms rounds after the first).
    """
    x = np.full((6, 3), 10 * MS)
    r = simulate_ps_barrier(x, 3, push=8 * MS, pull=8 * MS)
    assert r.duration[:4] == pytest.approx([58 * MS] * 4, abs=1e-9)
    peer = barrier_ps(x, 3, push=8 * MS, pull=8 * MS)
    assert (peer.end - peer.start)[:4] == pytest.approx([58 * MS] * 4, abs=1e-9)


def test_buffered_replies_free_the_ps_before_they_have_left():
    """A send returns once the socket buffer holds the rest: the next round starts, the replies still go.

    The same three workers with each reply wholly buffered (buffered = pull): round 0's barrier is at
    34 and the PS is free at once (S_1 = 34), while the replies leave together at 58. Round 1: the
    pushes arrive at 76, 84, 92, so its barrier falls 58 ms after its start and the PS is free at 92:
    the period stays 58 ms (the link is the bottleneck), but the round's clock -- what a cutoff is
    measured from -- starts 24 ms earlier. Half buffered: the PS waits 3 x 4 ms, S_1 = 46.
    """
    x = np.full((6, 3), 10 * MS)
    full = simulate_ps_barrier(x, 3, push=8 * MS, pull=8 * MS, buffered=8 * MS)
    assert full.barrier[:3] == pytest.approx([34 * MS, 58 * MS, 58 * MS], abs=1e-9)
    assert full.duration[1:3] == pytest.approx([58 * MS] * 2, abs=1e-9) and full.duration[0] == pytest.approx(
        34 * MS, abs=1e-9
    )
    half = simulate_ps_barrier(x, 3, push=8 * MS, pull=8 * MS, buffered=4 * MS)
    assert half.duration[0] == pytest.approx(46 * MS, abs=1e-9)
    with pytest.raises(InvalidParameterError, match="buffered"):
        simulate_ps_barrier(x, 3, push=8 * MS, pull=8 * MS, buffered=9 * MS)


@pytest.mark.parametrize(("n", "k", "cutoff"), [(4, 3, None), (4, 4, 0.06), (8, 8, 0.06)])
def test_buffered_barrier_engine_equals_the_peer_pathwise(n, k, cutoff):
    x = np.random.default_rng(n + k + 1).lognormal(math.log(0.05), 0.3, (801, n))
    kw = {"push": 8 * MS, "pull": 8 * MS, "update": 1 * MS, "buffered": 6 * MS}
    r = simulate_ps_barrier(x, k, math.inf if cutoff is None else cutoff, latency=0.5 * MS, **kw)
    peer = barrier_ps(x, k, cutoff, alpha=0.5 * MS, **kw)
    np.testing.assert_allclose(r.duration, peer.end - peer.start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.gradients, peer.applied, rtol=0, atol=0)


def test_backup_workers_three_deterministic_workers_by_hand():
    # n = 3, compute 10, 20, 30 ms, G/B = P/B = 8 ms, b = 1 (k = 2), no latency, no update.
    # Round 0: pushes issued at 10, 20, 30 arrive at 18, 28, 38 (FIFO: 20 + 8, then 30 + 8).
    # The barrier is the 2nd arrival, 28; the replies to workers 0 and 1 share the link and both leave
    # at 28 + 2 x 8 = 44: S_1 = 44. Worker 2's push (38) is stale; the PS answers it at 44 (44-52).
    # Round 1: w0 (got 44) pushes at 54 -> 62; w1 (got 44) at 64 -> 72 = the barrier (S_1 + 28);
    # replies 72-88 together: S_2 = 88. w2 (got 52) pushes at 82 -> 90: stale again, answered 90-98.
    # Round 2: w0 (got 88) pushes at 98 -> 106; w1 (got 88) 108 -> 116, the barrier (S_2 + 28);
    # S_3 = 132. Every round: 20 ms compute + 8 ms push + 2 replies of 8 ms sharing the link.
    x = np.tile([10 * MS, 20 * MS, 30 * MS], (6, 1))
    r = simulate_ps_barrier(x, 2, push=8 * MS, pull=8 * MS)
    assert r.duration[:3] == pytest.approx([44 * MS] * 3, abs=1e-9)
    assert r.barrier[:3] == pytest.approx([28 * MS] * 3, abs=1e-9)
    assert r.gradients[:3].tolist() == [2.0, 2.0, 2.0]
    peer = barrier_ps(x, 2, push=8 * MS, pull=8 * MS)
    assert (peer.end - peer.start)[:3] == pytest.approx([44 * MS] * 3, abs=1e-9)
    # the same through the scheme: worker speeds give 10, 20, 30 ms from a 60 ms step
    w = q.Workload(0.06, "1MB", batch_size=1)
    c = q.Cluster(3, 1e6 / (8 * MS), speeds=(6.0, 3.0, 2.0))
    x = sample_compute(w, c, 0, 4)
    assert x[0] == pytest.approx([10 * MS, 20 * MS, 30 * MS], abs=1e-15)
    p = q.predict(q.BackupWorkers(1, link="shared"), w, c, rng=0, iterations=400)
    # later, w2's drifting pushes (a 46 ms cycle) delay w1's now and then: the long run is the peer's
    peer = barrier_ps(np.tile([10 * MS, 20 * MS, 30 * MS], (401, 1)), 2, push=8 * MS, pull=8 * MS)
    cut = warmup_cut(400)
    assert p.iteration_time == pytest.approx(float((peer.end - peer.start)[cut:].mean()), abs=1e-9)


def test_static_cutoff_three_deterministic_workers_by_hand():
    # n = 3, compute 10, 20, 30 ms, 8 ms per push and per reply, cutoff T = 25 ms, no latency.
    # Round 0: arrivals 18, 28, 38; only worker 0's is in by 25: barrier 25, K = 1, reply 25-33, S_1 = 33.
    # w1's push (28) and w2's (38) are stale: answered at 33 (33-41) and 41 (41-49).
    # Round 1 (deadline 58): w0 (got 33) pushes 43 -> 51; w1 (got 41) 61 -> 69 > 58: barrier 58,
    # K = 1, reply 58-66, S_2 = 66.
    # Round 2 (deadline 91): w0 (got 66) 76 -> 84; w1's stale push arrives 69 (answered 69-77);
    # w2 (got 49) 79 -> 92 (FIFO behind w0's push, 84 + 8) > 91: barrier 91, K = 1, S_3 = 99.
    x = np.tile([10 * MS, 20 * MS, 30 * MS], (6, 1))
    r = simulate_ps_barrier(x, timer=25 * MS, push=8 * MS, pull=8 * MS)
    assert r.duration[:3] == pytest.approx([33 * MS] * 3, abs=1e-9)
    assert r.gradients[:3].tolist() == [1.0, 1.0, 1.0]
    peer = barrier_ps(x, 3, 25 * MS, push=8 * MS, pull=8 * MS)
    assert (peer.end - peer.start)[:3] == pytest.approx([33 * MS] * 3, abs=1e-9)


def test_ssp_one_worker_by_hand():
    # alone: compute 10 ms, alpha 1 ms, push 2 ms, update 1 ms, reply 3 ms, alpha 1 ms: an 18 ms cycle
    x = np.full((400, 1), 10 * MS)
    run = simulate_ps_ssp(x, 1, push=2 * MS, pull=3 * MS, latency=1 * MS, update=1 * MS)
    assert run.cycle == pytest.approx(18 * MS, rel=2e-3)
    times = ssp_ps(x, 1, push=2 * MS, pull=3 * MS, alpha=1 * MS, update=1 * MS)
    assert np.diff(times) == pytest.approx(np.full(times.size - 1, 18 * MS), abs=1e-9)


def test_ssp_two_workers_with_buffered_sends_by_hand():
    """A send returns once the socket buffer holds the rest: the PS applies while the reply still goes.

    n = 2, s = 1, compute 2 ms (w0) and 30 ms (w1), alpha 1, G/B 2, u 1, P/B 8, buffered 6 (ms).
    w0: computes 0-2, its push arrives 2 + 1 + 2 = 5; applied 5-6 (update at 6), clocks (1, 0): w0 may
        go (0 >= 1 - 1): its reply takes the downlink 6-14, the PS is free at 14 - 6 = 8, w0 has it at 15.
    w0: computes 15-17, arrives 20, applied 20-21 (update at 21), clocks (2, 0): w0 waits (0 < 2 - 1).
    w1: computes 0-30, arrives 33, applied 33-34 (update at 34), clocks (2, 1): both may go, in worker
        order: w0's reply 34-42 (PS free at 36), w1's sent at 36 but the downlink is busy until 42:
        42-50 (PS free at 44); w0 has it at 43, w1 at 51.
    w0: computes 43-45, arrives 48, applied 48-49 (update at 49; the PS has been free since 44),
        clocks (3, 1): waits.
    w1: computes 51-81, arrives 84, applied 84-85 (update at 85), clocks (3, 2): w0's reply 85-93 (PS
        free 87), w1's 93-101 (PS free 95); w0 has it at 94, w1 at 102.
    w0: computes 94-96, arrives 99, applied 99-100 (update at 100). From here a 51 ms period (w1's
        cycle: 30 + 1 + 2 + 1 + 8 of w0's reply + 8 of its own + 1): 136, 151, ...
    Unbuffered (today's sends): the PS is busy until each reply has left, 34-42 then 42-50, so w0's
    push arriving at 48 is applied 50-51 (update at 51), and the one arriving at 99 waits for the
    reply ending at 101: 101-102; every other time is the same (the replies leave at the same times).
    """
    x = np.tile([2 * MS, 30 * MS], (40, 1))
    kw = {"push": 2 * MS, "pull": 8 * MS, "update": 1 * MS}
    buffered = [6, 21, 34, 49, 85, 100, 136, 151]
    today = [6, 21, 34, 51, 85, 102, 136, 153]
    for beta, expected in ((6 * MS, buffered), (0.0, today)):
        run = simulate_ps_ssp(x, 1, latency=1 * MS, buffered=beta, **kw)
        assert run.update_times[:8] == pytest.approx(np.array(expected) * MS, abs=1e-12)
        peer = ssp_ps(x, 1, alpha=1 * MS, buffered=beta, **kw)
        assert peer[:8] == pytest.approx(np.array(expected) * MS, abs=1e-12)
    # the rate is w1's: two updates per 51 ms either way (the window is not a whole number of periods)
    assert run.rate == pytest.approx(2 / (51 * MS), rel=0.02)


def test_ssp_buffered_is_validated():
    x = np.full((100, 2), 10 * MS)
    for bad in (-1 * MS, 9 * MS, math.nan, math.inf):  # negative, more than the reply, not a number
        with pytest.raises(InvalidParameterError, match="buffered"):
            simulate_ps_ssp(x, 1, push=8 * MS, pull=8 * MS, buffered=bad)
    with pytest.raises(InvalidParameterError, match="buffered"):  # no reply time: nothing to buffer
        simulate_ps_ssp(x, 1, buffered=1 * MS)


# ---------------------------------------------------------------- the SimPy peer
@pytest.mark.parametrize(
    "n, s, beta",
    [(2, 1, 6.0), (4, 2, 6.0), (8, 1, 3.0), (3, math.inf, 8.0), (4, 0, 8.0), (5, 3, 0.0)],
)
def test_ssp_engine_equals_the_peer_pathwise(n, s, beta):
    """Every update time, on the same compute times, until the first worker has used its last sample."""
    x = np.random.default_rng(10 * n + int(beta)).lognormal(math.log(0.03), 0.5, (301, n))
    kw = {"push": 8 * MS, "pull": 8 * MS, "update": 1 * MS, "buffered": beta * MS}
    run = simulate_ps_ssp(x, s, latency=0.5 * MS, **kw)
    # the engine stops a worker at clock 300 (rows 0..299), the peer after x.shape[0] = 300 iterations
    peer = ssp_ps(x[:-1], s, alpha=0.5 * MS, **kw)
    assert peer.size > 0.9 * 300 * n
    np.testing.assert_allclose(run.update_times[: peer.size], peer, rtol=0, atol=1e-9)
    assert int((run.update_times <= peer[-1]).sum()) == peer.size
    if beta and 0 < s < math.inf:  # the buffer changes the path (not a vacuous comparison)
        today = simulate_ps_ssp(x, s, latency=0.5 * MS, **{**kw, "buffered": 0.0})
        assert np.abs(today.update_times[: peer.size] - peer).max() > 1e-4


@pytest.mark.parametrize(
    "n, k, cutoff",
    [(4, 3, None), (8, 7, None), (4, 4, 0.06), (8, 8, 0.06), (6, 6, 0.03)],
)
def test_barrier_engine_equals_the_peer_pathwise(n, k, cutoff):
    x = np.random.default_rng(n + k).lognormal(math.log(0.05), 0.3, (1501, n))
    kw = {"push": 8 * MS, "pull": 8 * MS, "update": 1 * MS}
    r = simulate_ps_barrier(x, k, math.inf if cutoff is None else cutoff, latency=0.5 * MS, **kw)
    peer = barrier_ps(x, k, cutoff, alpha=0.5 * MS, **kw)
    np.testing.assert_allclose(r.duration, peer.end - peer.start, rtol=0, atol=1e-9)
    np.testing.assert_allclose(r.barrier, peer.barrier - peer.start, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(r.gradients, peer.applied)


@pytest.mark.parametrize("scheme", [q.BackupWorkers(1, link="shared"), q.StaticCutoff(0.06, link="shared")])
@pytest.mark.parametrize("n", [4, 8])
def test_scheme_within_the_peer_interval(scheme, n):
    c = C.with_workers(n)
    p = q.predict(scheme, W, c, rng=3, iterations=8_000)
    assert p.method == "simulate"
    x = np.random.default_rng(100 + n).lognormal(math.log(0.05), 0.3, (4001, n))
    k = scheme.gradients(n) if isinstance(scheme, q.BackupWorkers) else n
    cutoff = getattr(scheme, "timeout", None)
    peer = barrier_ps(x, k, cutoff, push=8 * MS, pull=8 * MS, alpha=0.5 * MS, update=1 * MS)
    keep = slice(200, None)
    rate, half = _interval(peer.applied[keep], (peer.end - peer.start)[keep])
    lo, hi = p.interval  # samples per second
    model = p.throughput / W.batch_size
    model_half = (hi - lo) / 2 / W.batch_size
    assert abs(model - rate) <= half + model_half, (model, rate, half, model_half)


@pytest.mark.parametrize("n, s, held", [(4, 2, 0.0), (8, 2, 0.0), (3, 0, 0.0), (8, 2, 750_000.0)])
def test_ssp_within_the_peer_interval(n, s, held):
    # held bytes of each 1 MB reply in the socket buffer: 6 ms of its 8 ms at 1 Gbit/s
    scheme = q.StaleSynchronous(s, link="shared", send_buffer=held)
    p = q.predict(scheme, W, C.with_workers(n), rng=4, iterations=16_000)
    x = np.random.default_rng(200 + n).lognormal(math.log(0.05), 0.3, (16_000 // n, n))
    beta = held / 125e6
    times = ssp_ps(x, s, push=8 * MS, pull=8 * MS, alpha=0.5 * MS, update=1 * MS, buffered=beta)
    t0, t1 = 0.1 * times[-1], times[-1] - (s + 2) * 0.2  # leave the workers' last steps out
    edges = np.linspace(t0, t1, 21)
    counts = np.histogram(times, bins=edges)[0].astype(float)
    rate, half = _interval(counts, np.diff(edges))
    lo, hi = p.interval
    model = p.throughput / W.batch_size
    assert abs(model - rate) <= half + (hi - lo) / 2 / W.batch_size, (model, rate, half)


# ---------------------------------------------------------------- limits
@pytest.mark.parametrize("k, timer", [(3, math.inf), (4, math.inf), (4, 0.05), (4, 0.02)])
def test_free_links_give_the_phase_model_exactly(k, timer):
    # B -> oo, alpha = 0: every round is today's (kofn_sim.simulate_rounds, "finish"), on the same samples
    x = np.random.default_rng(k).lognormal(math.log(0.05), 0.3, (2001, 4))
    r = simulate_ps_barrier(x, k, timer, update=1 * MS)
    old = simulate_rounds(x[:-1], k, timer, phase=lambda K: (0.0 * K, K * 1 * MS), stragglers="finish")
    np.testing.assert_allclose(r.duration, old.duration, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(r.gradients, old.gradients)


def test_free_links_schemes_agree_with_their_phase_model():
    w = dataclasses.replace(W, update_time=0.0)
    c = q.Cluster(4, 1e18)  # B -> oo
    for shared, phase in [
        (q.BackupWorkers(1, link="shared"), q.BackupWorkers(1)),
        (q.StaticCutoff(0.05, link="shared"), q.StaticCutoff(0.05)),
        (q.StaleSynchronous(2, link="shared"), q.StaleSynchronous(2)),
    ]:
        a = q.predict(shared, w, c, rng=5, iterations=8_000)
        b = q.predict(phase, w, c, "simulate", rng=6, iterations=8_000)
        half = (a.interval[1] - a.interval[0] + b.interval[1] - b.interval[0]) / 2
        assert abs(a.throughput - b.throughput) <= half, (shared, a.throughput, b.throughput)


# ---------------------------------------------------------------- the option and the contract
def test_defaults_are_unchanged_and_the_option_is_validated():
    assert q.BackupWorkers().link == "phase" and q.StaticCutoff(0.1).link == "phase"
    assert q.StaleSynchronous().link == "dedicated" and q.StaleSynchronous().send_buffer == 0.0
    with pytest.raises(InvalidParameterError, match="link"):
        q.BackupWorkers(link="nope")
    with pytest.raises(InvalidParameterError, match="finish"):
        q.StaticCutoff(0.1, stragglers="cancel", link="shared")
    with pytest.raises(InvalidParameterError, match="finish"):
        q.BackupWorkers(1, stragglers="cancel", link="shared")
    for s in (q.BackupWorkers(1, link="shared"), q.StaticCutoff(0.1, link="shared")):
        for m in ("closed_form", "ctmc"):
            with pytest.raises(NotRepresentable, match="simulate"):
                s.solve(W, C, m)
    with pytest.raises(NotRepresentable, match="simulate"):
        q.StaleSynchronous(2, link="shared").solve(W, C, "ctmc")


@pytest.mark.parametrize(
    "scheme",
    [
        q.BackupWorkers(1, link="shared"),
        q.StaticCutoff(0.06, link="shared"),
        q.StaleSynchronous(1, link="shared"),
        q.StaleSynchronous(1, link="shared", send_buffer="600kB"),
    ],
    ids=lambda s: s.key,
)
def test_shared_variants_keep_the_contract(scheme):
    assert scheme.auto_method(W, C)[0] == "simulate"
    sol = scheme.solve(W, C, "simulate", rng=2, iterations=2_000)
    assert sum(sol.breakdown.values()) == pytest.approx(sol.iteration_time, rel=1e-9)
    assert all(v >= -1e-12 for v in sol.breakdown.values())
    workers, bw = np.array([2, 3]), np.array([1.25e8, 1.25e9])
    batch = scheme.solve_batch(W, C, workers, bw, np.zeros(2), rng=3, iterations=600)
    for i in range(2):
        c = dataclasses.replace(C, workers=int(workers[i]), bandwidth=bw[i], latency=0.0)
        p = q.predict(scheme, W, c, rng=3, iterations=600)
        assert batch.iteration_rate[i] == pytest.approx(p.iteration_rate, rel=1e-12)
