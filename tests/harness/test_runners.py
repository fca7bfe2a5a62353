"""Scheme runners, live: each checked against a hand computation, the compute draws, or a second model.

The emulated compute times are reproducible: worker ``w`` draws its step times
from ``numpy.random.default_rng([seed, w])`` and its (constant) gradient from
``default_rng([seed, w, 1])``; the tests recompute both independently and
compare the live run's barriers, counts and parameters with them. Timing
checks use medians and bounds that allow the sub-millisecond message costs of
loopback on a loaded 2-core machine.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from queuesgd import Cluster, Workload  # noqa: E402
from queuesgd.distributions import Deterministic, Exponential  # noqa: E402
from queuesgd.errors import InvalidParameterError, UnknownNameError  # noqa: E402
from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.live import EmulatedCompute  # noqa: E402
from queuesgd.harness.runners import check_params, run, world_size  # noqa: E402
from queuesgd.harness.shaping import Shaper  # noqa: E402
from queuesgd.schemes.eager.eager import EagerSGD  # noqa: E402

SEED = 11
LR = 0.01


def _grad_sums(workers: int, gradient_bytes: int, seed: int = SEED) -> np.ndarray:
    """Sum of each worker's emulated gradient, recomputed from its seed (float64)."""
    numel = math.ceil(gradient_bytes / 4)
    return np.array(
        [
            float(
                (
                    np.random.default_rng([seed, w, 1]).standard_normal(numel).astype(np.float32)
                    * np.float32(1e-3)
                )
                .astype(np.float64)
                .sum()
            )
            for w in range(workers)
        ]
    )


def _draws(law, workers: int, count: int, seed: int = SEED) -> np.ndarray:
    """``draws[w, i]``: worker w's i-th compute time."""
    return np.array(
        [
            [law.sample(g) for _ in range(count)]
            for g in [np.random.default_rng([seed, w]) for w in range(workers)]
        ]
    )


def _by(records, **match):
    return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def _worker_cycles(records, workers: int, skip: int = 3) -> list[float]:
    """Median time between consecutive step starts, per worker."""
    out = []
    for w in range(workers):
        rs = sorted(_by(records, role="worker", worker=w), key=lambda r: r["step"])[skip:]
        out.append(statistics.median(b["t0"] - a["t0"] for a, b in zip(rs, rs[1:])))
    return out


def _loopback_allreduce(n: int, numel: int, repeats: int = 30) -> float:
    """Median seconds of one all_reduce of numel floats on n ranks, timed on its own (independent)."""

    def fn(ctx):
        import time

        import torch.distributed as dist

        t = torch.zeros(numel)
        times = []
        for _ in range(repeats):
            dist.barrier()
            s = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - s)
        ctx.report({"median": statistics.median(times)})

    return max(r["median"] for r in run_workers(fn, n, timeout=60))


# ---- ring all-reduce ---------------------------------------------------------------------------


@pytest.mark.timing
def test_ring_allreduce_step_time_and_average():
    n, steps, nbytes = 3, 30, 4000
    a = _loopback_allreduce(n, nbytes // 4)
    recs = run(
        "ring-allreduce", EmulatedCompute("20ms", nbytes, lr=LR), n, steps, seed=SEED, warmup=3, timeout=60
    )
    assert len(recs) == n * steps
    assert {r["applied"] for r in recs} == {n}
    assert sum(r["warmup"] for r in recs) == 3 * n
    # Step time: 20 ms of compute plus one loopback all-reduce (measured separately) and the harness's
    # own per-step time: bookkeeping, and three processes waking on two cores. On a calm 2-core
    # machine that came to 2.3-2.7 ms beyond 20 ms + 2a, with this session's tree and with the tree
    # before it alike (a 2 ms slack failed there now and then), so the slack is 4 ms.
    cycle = statistics.median(_worker_cycles(recs, n))
    assert 0.020 <= cycle <= 0.020 + 2 * a + 0.004
    # Every worker applied the average of the n gradients at every step: params = -lr * steps * mean.
    expected = -LR * steps * _grad_sums(n, nbytes).mean()
    for r in _by(recs, step=steps - 1):
        assert r["params_sum"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.timing
def test_local_sgd_averages_every_period():
    # H = 4 local steps of each worker's own (constant) gradient, then the models are averaged: after
    # every round params = prev - lr H mean(g), so after 20 steps -lr * 20 * mean, as the ring's.
    n, steps, period, nbytes = 2, 20, 4, 4000
    a = _loopback_allreduce(n, nbytes // 4)
    live = EmulatedCompute("20ms", nbytes, lr=LR)
    recs = run("local-sgd", live, n, steps, params={"period": period}, seed=SEED, warmup=5, timeout=60)
    assert len(recs) == n * steps and {r["applied"] for r in recs} == {n}
    # Whole rounds are warm-up: the rounds starting at steps 0 and 4 (< 5).
    assert sorted({r["step"] for r in recs if r["warmup"]}) == list(range(8))
    assert [r["version"] for r in _by(recs, worker=0)] == [i // period for i in range(steps)]
    expected = -LR * steps * _grad_sums(n, nbytes).mean()
    for r in _by(recs, step=steps - 1):
        assert r["params_sum"] == pytest.approx(expected, rel=1e-4)
    # Between averagings a worker does not wait: a round is 4 x 20 ms plus one loopback all-reduce,
    # with the ring test's 2 ms of per-step bookkeeping slack for each of the 4 steps (a fresh-clone
    # CI run measured 83.6 and 87.0 ms against the old 84.6 ms bound of 4 ms per round).
    ends = [r["t_end"] for r in sorted(_by(recs, worker=0), key=lambda r: r["step"])]
    rounds = np.diff(ends[period - 1 :: period])
    assert 4 * 0.020 <= statistics.median(rounds) <= 4 * (0.020 + 0.002) + 2 * a + 0.002
    assert check_params("local-sgd", None, 2) == {"period": 8}  # LocalSGD's default H


def test_ring_allreduce_real_model_keeps_replicas_identical():
    # Real MLP on each worker's own synthetic data: the averaged gradient keeps the replicas equal,
    # and they moved away from the (shared) initial parameters.
    from queuesgd.harness.live import RealModel

    spec = RealModel("mlp", batch_size=16, hidden=32, inputs=64, classes=4, lr=0.05)
    initial = float(spec.make(0, seed=SEED).params.double().sum())
    recs = run("ring-allreduce", spec, 2, 6, seed=SEED, timeout=60)
    final = [r["params_sum"] for r in _by(recs, step=5)]
    assert len(final) == 2
    assert final[0] == pytest.approx(final[1], rel=1e-6, abs=1e-6)
    assert abs(final[0] - initial) > 1e-4
    assert all(r["t_compute"] > 0 for r in recs)


@pytest.mark.timing
def test_shaped_ring_allreduce_counts_from_the_last_arrival():
    # n = 2, 40 kB at 1 MB/s, 1 ms latency: 2*(1/2)*40 ms + 2*1 ms = 42 ms per all-reduce.
    # Rank 1 computes 10 + 20 ms (injected), so a step lasts 30 + 42 = 72 ms.
    shaper = Shaper(1e6, 1e-3)
    assert shaper.model_time("allreduce", 40_000, 2) == pytest.approx(0.042)
    live = EmulatedCompute("10ms", 40_000, delays={1: Deterministic(0.02)})
    recs = run("ring-allreduce", live, 2, 20, shaper=shaper, timeout=60)
    cycle = _worker_cycles(recs, 2)
    assert all(0.072 <= c < 0.075 for c in cycle)
    assert {r["emulation"] for r in recs} == {"app-shaper"}
    # The fast rank waited for the slow one's arrival (20 ms) before the 42 ms began.
    fast = _by(recs, worker=0)[5:]
    assert 0.019 < statistics.median(r["t_barrier"] for r in fast) < 0.022


# ---- synchronous parameter server --------------------------------------------------------------


@pytest.mark.timing
def test_sync_ps_barrier_is_the_slowest_draw():
    n, steps, nbytes = 3, 30, 4000
    law = Exponential(mean=0.015)
    recs = run("sync-ps", EmulatedCompute(law, nbytes, lr=LR), n, steps, seed=SEED, timeout=60)
    ps = sorted(_by(recs, role="ps"), key=lambda r: r["step"])
    assert [r["applied"] for r in ps] == [n] * steps
    assert all(r["contributors"] == [0, 1, 2] for r in ps)
    # Iteration i's barrier comes max_w x[w, i] after it starts (plus message costs).
    x = _draws(law, n, steps)
    late = np.array([r["t_barrier"] - r["t0"] for r in ps]) - x.max(axis=0)
    assert np.median(late) >= 0.0
    assert np.median(late) < 0.003
    expected = -LR * steps * _grad_sums(n, nbytes).mean()
    assert ps[-1]["params_sum"] == pytest.approx(expected, rel=1e-4)
    # Workers: one step per iteration, computing on the version the PS was at.
    for w in range(n):
        assert [r["version"] for r in sorted(_by(recs, worker=w), key=lambda r: r["step"])] == list(
            range(steps)
        )


@pytest.mark.timing
def test_shaped_sync_ps_round():
    # 3 workers, 40 kB each way at 4 MB/s: 6 transfers of 10 ms + 2 x 1 ms latency = 62 ms; + 20 ms compute.
    shaper = Shaper(4e6, 1e-3)
    assert shaper.ps_round(3, 3, 40_000, 40_000) == pytest.approx(0.062)
    recs = run("sync-ps", EmulatedCompute("20ms", 40_000), 3, 20, shaper=shaper, timeout=60)
    ps = sorted(_by(recs, role="ps"), key=lambda r: r["step"])
    cycle = statistics.median(b["t_end"] - a["t_end"] for a, b in zip(ps[3:], ps[4:]))
    assert 0.082 <= cycle < 0.082 * 1.08


# ---- asynchronous parameter server -------------------------------------------------------------


@pytest.mark.timing
def test_async_ps_rate_and_staleness():
    # Deterministic 40 ms compute, 20 ms uplink and 20 ms downlink (80 kB at 4 MB/s), 3 workers:
    # the uplink is busy 60 of every 80 ms, so no queueing: each worker cycles in 80 ms, 37.5 updates/s.
    n, steps = 3, 25
    recs = run("async-ps", EmulatedCompute("40ms", 80_000), n, steps, shaper=Shaper(4e6, 0.0), timeout=60)
    ps = _by(recs, role="ps")
    assert len(ps) == n * steps
    rate = sum(1 / c for c in _worker_cycles(recs, n))
    assert 0.88 * 37.5 <= rate <= 37.5 * 1.01
    # Round robin: between a worker's read and its next update the other two update once each.
    steady = [r["staleness"] for r in ps if r["worker_step"] >= 3]
    assert statistics.median(steady) == n - 1


@pytest.mark.timing
def test_async_ps_uplink_contention():
    # 4 workers, 10 ms compute, 10 ms per transfer: the PS uplink saturates at 1 / 10 ms = 100 updates/s
    # (without contention it would be 4 / 30 ms = 133/s).
    n, steps = 4, 25
    recs = run("async-ps", EmulatedCompute("10ms", 40_000), n, steps, shaper=Shaper(4e6, 0.0), timeout=60)
    rate = sum(1 / c for c in _worker_cycles(recs, n))
    assert 95 <= rate <= 101


@pytest.mark.timing
def test_async_ps_unshaped_rate():
    # Loopback: each worker cycles in 20 ms of compute plus a round trip to the PS; rate ~ n / (20 ms + c).
    n = 3
    recs = run("async-ps", EmulatedCompute("20ms", 4000), n, 30, timeout=60)
    waits = statistics.median(r["t_wait"] for r in _by(recs, role="worker"))
    rate = sum(1 / c for c in _worker_cycles(recs, n))
    assert n / (0.020 + waits + 0.002) <= rate <= n / 0.020


# ---- backup workers and cutoffs ----------------------------------------------------------------


@pytest.mark.timing
def test_backup_workers_cancel_takes_the_first_n_minus_b():
    n, b, steps, nbytes = 3, 1, 30, 4000
    law = Exponential(mean=0.03)
    live = EmulatedCompute(law, nbytes, lr=LR)
    recs = run(
        "backup-workers", live, n, steps, params={"backups": b, "stragglers": "cancel"}, seed=SEED, timeout=60
    )
    ps = sorted(_by(recs, role="ps"), key=lambda r: r["step"])
    assert [r["applied"] for r in ps] == [n - b] * steps
    # Cancel: every worker computes exactly once per iteration (finishing or aborted), so iteration i uses
    # draws x[:, i]; its barrier is the (n-b)-th smallest, and the contributors are the n-b fastest.
    x = _draws(law, n, steps)
    order = np.sort(x, axis=0)
    late = np.array([r["t_barrier"] - r["t0"] for r in ps]) - order[n - b - 1]
    assert 0.0 <= np.median(late) < 0.006
    fastest = [sorted(np.argsort(x[:, i])[: n - b].tolist()) for i in range(steps)]
    agree = sum(r["contributors"] == f for r, f in zip(ps, fastest))
    assert agree >= 0.75 * steps
    aborted = sum(r["aborted"] for r in _by(recs, role="worker"))
    assert aborted >= 0.75 * b * steps
    # The parameters moved by the mean of the contributors' gradients, iteration by iteration.
    g = _grad_sums(n, nbytes)
    expected = -LR * sum(g[r["contributors"]].mean() for r in ps)
    assert ps[-1]["params_sum"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.timing
def test_backup_workers_finish_accounts_for_every_gradient():
    n, b, steps = 4, 1, 30
    recs = run(
        "backup-workers",
        EmulatedCompute(Exponential(mean=0.01), 4000),
        n,
        steps,
        params={"backups": b},
        timeout=60,
    )
    ps = _by(recs, role="ps")
    assert [r["applied"] for r in ps] == [n - b] * steps
    sent = len([r for r in _by(recs, role="worker") if not r["aborted"]])
    handled = sum(r["applied"] + r["dropped"] for r in ps)
    # Every gradient sent was applied or dropped; at most one per worker arrives after the last update.
    assert handled <= sent <= handled + n
    assert sum(r["dropped"] for r in ps) >= 0.5 * b * (steps - 1)


@pytest.mark.timing
def test_static_cutoff_cancel_counts_the_draws_before_the_cutoff():
    n, steps, T = 3, 30, 0.03
    law = Exponential(mean=0.03)
    recs = run(
        "static-cutoff",
        EmulatedCompute(law, 4000),
        n,
        steps,
        params={"cutoff": T, "stragglers": "cancel"},
        seed=SEED,
        timeout=60,
    )
    ps = sorted(_by(recs, role="ps"), key=lambda r: r["step"])
    x = _draws(law, n, steps)
    # K = max(1, #{x <= T}); the wait D = max(min(x_(n), T), x_(1)) (StaticCutoff's definitions).
    K = np.maximum(1, (x <= T).sum(axis=0))
    D = np.maximum(np.minimum(x.max(axis=0), T), x.min(axis=0))
    agree = sum(r["applied"] == k for r, k in zip(ps, K))
    assert agree >= 0.75 * steps
    late = np.array([r["t_barrier"] - r["t0"] for r in ps]) - D
    assert (
        -1e-6 <= np.median(late) < 0.006
    )  # a cutoff barrier is t0 + T exactly (1e-6: float rounding of wall times)


# ---- eager-SGD and stale-synchronous -----------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["solo", "majority"])
def test_eager_sgd_matches_the_model_simulation(mode):
    # Deterministic 40 ms compute at speeds (1, 0.45, 0.7), rounds of 2*(2/3)*40 kB / 2 MB/s = 26.7 ms: the
    # live round rate and gradients per round agree with EagerSGD's event simulation (a second
    # implementation). Message costs only slow the live run down, so the bound is mostly one-sided.
    speeds = (1.0, 0.45, 0.7)
    law = Deterministic(0.04)
    live = EmulatedCompute(law, 40_000, speeds=speeds)
    steps, warm = 50, 8
    recs = run(
        "eager-sgd",
        live,
        3,
        steps,
        shaper=Shaper(2e6),
        params={"mode": mode, "max_stale": 4},
        seed=SEED,
        timeout=60,
    )
    ps = sorted(_by(recs, role="ps"), key=lambda r: r["step"])
    assert len(ps) == steps
    assert sum(r["sync"] for r in ps) == steps // 5  # every 5th round waits for everyone
    assert all(r["fresh"] == 3 for r in ps if r["sync"])
    rate = (steps - warm - 1) / (ps[-1]["round_end"] - ps[warm]["round_end"])
    per_round = statistics.mean(r["applied"] for r in ps[warm + 1 :])
    sol = EagerSGD(mode, 4).solve(
        Workload(law, 40_000, batch_size=1),
        Cluster(3, 2e6, speeds=speeds),
        "simulate",
        rng=1,
        iterations=5000,
    )
    # (Quiet: within 4 %; both cores saturated by other processes: down to -16 %.)
    assert 0.8 * sol.iteration_rate <= rate <= 1.03 * sol.iteration_rate
    assert per_round == pytest.approx(sol.gradients_per_update, rel=0.1)



@pytest.mark.timing
def test_eager_sgd_ring_matches_the_model_closed_form():
    # collective="ring": the rounds are real all-reduces among the workers, activated by rank 0. Three
    # workers with exponential compute of mean 30 ms on loopback (a 4 kB all-reduce is well under a
    # millisecond): every round end regenerates, so EagerSGD's closed form (a hand formula, see
    # tests/schemes/test_eager.py) gives the round rate and the gradients per round, with the loop's own
    # activation (trigger to start, measured from its records) as the round's length.
    from queuesgd.harness.eager_profile import eager_loop_times

    law = Exponential(mean=0.03)
    live = EmulatedCompute(law, 4000)
    steps, warm = 160, 10
    recs = run(
        "eager-sgd",
        live,
        3,
        steps,
        params={"mode": "solo", "max_stale": 4, "collective": "ring"},
        seed=SEED,
        timeout=60,
    )
    rounds = sorted(_by(recs, role="round"), key=lambda r: r["step"])
    act = sorted(_by(recs, role="activator"), key=lambda r: r["step"])
    assert [r["step"] for r in rounds] == [r["step"] for r in act] == list(range(steps))
    assert [r["sync"] for r in rounds] == [r["sync"] for r in act]
    assert sum(r["sync"] for r in rounds) == steps // 5  # every 5th round waits for everyone
    assert all(r["applied"] >= 3 for r in rounds if r["sync"])
    rate = (steps - warm - 1) / (rounds[-1]["t_end"] - rounds[warm]["t_end"])
    per_round = statistics.mean(r["applied"] for r in rounds[warm + 1 :])
    # The round: from its trigger to its end (the activation, the all-reduce and the update), as run.
    A = float(np.mean(eager_loop_times(recs)["round"]))
    sol = EagerSGD("solo", 4, activation=A).solve(
        Workload(law, 4000, batch_size=1), Cluster(3, 1e15), "closed_form"
    )
    # (Quiet: within 5 %; the idle periods are exponential, 150 rounds: a few percent of noise.)
    assert sol.iteration_rate * 0.85 <= rate <= sol.iteration_rate * 1.1, (rate, sol.iteration_rate, A)
    assert per_round == pytest.approx(sol.gradients_per_update, rel=0.1), (per_round, A)
    # Every gradient a worker handed in is applied in a round, but those still held when the run stopped.
    handed = len(_by(recs, role="worker"))
    assert handed - 2 * 3 <= sum(r["applied"] for r in rounds) <= handed


@pytest.mark.timing
def test_eager_sgd_ring_majority_waits_for_its_initiator():
    # Majority: a partial round starts at its initiator's notification (the initiators drawn from the shared
    # seed), a synchronous one once every worker has notified; every worker's gradients are applied.
    live = EmulatedCompute(Deterministic(0.02), 4000, speeds=(1.0, 0.45, 0.7))
    steps = 30
    recs = run(
        "eager-sgd",
        live,
        3,
        steps,
        params={"mode": "majority", "max_stale": 4, "collective": "ring"},
        seed=SEED,
        timeout=60,
    )
    act = sorted(_by(recs, role="activator"), key=lambda r: r["step"])
    assert len(act) == steps and sum(r["sync"] for r in act) == steps // 5
    assert all(r["initiator"] in r["notified"] for r in act if not r["sync"])
    assert all(r["notified"] == [0, 1, 2] for r in act if r["sync"])
    assert len({r["initiator"] for r in act if not r["sync"]}) == 3  # the draw reaches every worker
    rounds = _by(recs, role="round")
    handed = len(_by(recs, role="worker"))
    assert handed - 2 * 3 <= sum(r["applied"] for r in rounds) <= handed


@pytest.mark.timing
def test_eager_sgd_ring_synchronous_is_the_ring_allreduce():
    # max_stale = 0: every round waits for every worker, i.e. synchronous SGD. On a real model the
    # parameters after 6 rounds equal those of the ring all-reduce loop after 6 steps (the same data,
    # the same mean), computed by a second loop.
    from queuesgd.harness.live import RealModel

    spec = RealModel("mlp", batch_size=16, hidden=32, inputs=64, classes=4, lr=0.05)
    ring = run("ring-allreduce", spec, 2, 6, seed=SEED, timeout=60)
    eager = run(
        "eager-sgd", spec, 2, 6, params={"max_stale": 0, "collective": "ring"}, seed=SEED, timeout=60
    )
    rounds = sorted(_by(eager, role="round"), key=lambda r: r["step"])
    assert [r["applied"] for r in rounds] == [2] * 6 and all(r["sync"] for r in rounds)
    want = _by(ring, step=5)[0]["params_sum"]
    assert rounds[-1]["params_sum"] == pytest.approx(want, rel=1e-6, abs=1e-6)

@pytest.mark.timing
def test_stale_synchronous_bound_holds():
    # Worker 1 is twice as slow. With staleness s a worker starts step i only when every worker's clock
    # is >= i - s, i.e. the PS has applied (and then answered) worker 1's step i - s - 1: causally, that
    # update comes before worker 0's step i starts.
    s, steps = 1, 16
    live = EmulatedCompute("20ms", 4000, speeds=(1.0, 0.5))
    recs = run("stale-synchronous", live, 2, steps, params={"staleness": s}, timeout=60)
    applied = {r["worker_step"]: r["t_apply"] for r in _by(recs, role="ps", sender=1)}
    starts = {r["step"]: r["t0"] for r in _by(recs, role="worker", worker=0)}
    assert sorted(applied) == sorted(starts) == list(range(steps))
    checked = [i for i in range(s + 1, steps)]
    assert all(applied[i - s - 1] < starts[i] for i in checked)
    # Without the bound worker 0 would run 2x ahead; with it, it is held to the slow one's pace.
    ahead = max(i - sum(t <= starts[i] for t in applied.values()) for i in checked)
    assert ahead <= s + 1
    fast, slow = _worker_cycles(recs, 2)
    assert fast == pytest.approx(slow, rel=0.15)
    assert 0.040 <= slow < 0.040 * 1.15


@pytest.mark.timing
def test_stale_synchronous_zero_is_a_barrier():
    # s = 0, 3 workers, 40 ms compute, 20 ms each way per worker without contention (80 kB at 4 MB/s):
    # 80 ms per iteration, 37.5 updates/s; the three updates of an iteration have staleness 0, 1, 2.
    n, steps = 3, 16
    recs = run(
        "stale-synchronous",
        EmulatedCompute("40ms", 80_000),
        n,
        steps,
        shaper=Shaper(4e6),
        params={"staleness": 0},
        timeout=60,
    )
    rate = sum(1 / c for c in _worker_cycles(recs, n))
    assert 0.88 * 37.5 <= rate <= 37.5 * 1.01
    steady = [r["staleness"] for r in _by(recs, role="ps") if r["worker_step"] >= 3]
    assert statistics.mean(steady) == pytest.approx(1.0, abs=0.15)


def test_a_failing_worker_ends_the_run_with_worker_failure():
    # Two speed factors for three workers: every worker's make() raises; the run fails at once, naming it.
    import time

    from queuesgd.errors import WorkerFailure

    t = time.monotonic()
    with pytest.raises(WorkerFailure) as info:
        run("sync-ps", EmulatedCompute("1ms", 40, speeds=(1.0, 2.0)), 3, 5, timeout=60)
    assert "speeds: got (1.0, 2.0); accepted: one speed factor per worker (3)" in info.value.reason
    assert time.monotonic() - t < 20


# ---- parameters --------------------------------------------------------------------------------


def test_params_and_layout():
    assert world_size("sync-ps", 3) == 4 and world_size("ring-allreduce", 3) == 3
    assert check_params("eager-sgd", None, 3) == {
        "mode": "solo",
        "max_stale": 32,
        "collective": "coordinator",
    }
    assert check_params("stale-synchronous", {"staleness": math.inf}, 3) == {"staleness": math.inf}
    assert check_params("static-cutoff", {"timeout": "20ms"}, 3)["cutoff"] == pytest.approx(0.02)
    with pytest.raises(InvalidParameterError, match="params"):
        check_params("sync-ps", {"backups": 1}, 3)
    with pytest.raises(InvalidParameterError, match="cutoff"):
        check_params("static-cutoff", {}, 3)
    with pytest.raises(UnknownNameError, match="stragglers"):
        check_params("backup-workers", {"stragglers": "ignore"}, 3)
    with pytest.raises(UnknownNameError, match="scheme"):
        world_size("tree-allreduce", 3)
