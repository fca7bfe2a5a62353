"""Monte Carlo of a 16-stage, 256-micro-batch pipeline task graph against the SimPy peer, same run.

The model: ``Pipeline(stages=16, microbatches=256, schedule=...)`` (GPipe and
1F1B) on 16 workers, a synthetic 32-layer model split 2 layers per stage
(every stage: forward 1 ms, backward 2 ms per micro-batch), 4 MB of
activations per boundary on 100 Gbit/s links with 5 us latency; the step's
compute law is lognormal with SCV 0.1, so every forward and backward task is
an independent lognormal draw with that SCV scaled to its mean.

queuesgd: ``queuesgd.predict(Pipeline(...), workload, cluster, method="fine",
iterations=10_000)`` (graph build + 10,000 iterations; median of 3), and
``queuesgd.dag.simulate(task_graph, 10_000)`` alone. Target: <= 5 s.

SimPy: the process-based DES of ``tests/peers/simpy_pipeline.py`` (one process
per stage worker, one per link direction), one iteration per run, durations
drawn the same way; it runs for about ``--simpy-seconds`` (default 20 s), its
median time per iteration is extrapolated to 10,000 iterations. Both means
must agree within their 95% confidence intervals (the intervals overlap).

Run:  python benchmarks/bench_pipeline.py [--simpy-seconds 20]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

import queuesgd as q
from queuesgd.dag import simulate
from queuesgd.distributions import LogNormal
from queuesgd.workload import Layer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

ITERATIONS = 10_000
S, M, LAYERS = 16, 256, 32
T_F, T_B = 1e-3, 2e-3  # per stage and micro-batch
SCV = 0.1
ACT, BANDWIDTH, LATENCY = 4e6, "100Gbit/s", 5e-6


def line(label: str, value: str) -> None:
    print(f"    {label:<44} : {value}")


def workload_cluster() -> tuple[q.Workload, q.Cluster]:
    per = LAYERS // S  # equal layers in backward order; each gets its share of a stage's times
    layers = [Layer(f"l{i}", 8e6, T_B / per, T_F / per) for i in reversed(range(LAYERS))]
    w = q.Workload(LogNormal.from_mean_scv(S * (T_F + T_B), SCV), None, batch_size=8, layers=layers)
    return w, q.Cluster(S, BANDWIDTH, latency=LATENCY)


def bench(sched: str, simpy_seconds: float) -> tuple[bool, float]:
    from peers.simpy_pipeline import simulate_pipeline

    from queuesgd.schemes.parallel.pipeline import Pipeline

    w, c = workload_cluster()
    scheme = Pipeline(stages=S, microbatches=M, schedule=sched, activation_bytes=ACT)
    t0 = time.perf_counter()
    graph = scheme.task_graph(w, c)
    t_build = time.perf_counter() - t0
    times, cpu = [], []
    pred = None
    for seed in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        pred = q.predict(scheme, w, c, method="fine", iterations=ITERATIONS, rng=seed)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    t_predict = statistics.median(times)
    t0, c0 = time.perf_counter(), time.process_time()
    sim = simulate(graph, ITERATIONS, rng=0)
    t_sim, c_sim = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    simulate(graph, ITERATIONS, rng=0, critical_path=False)
    t_nocp, c_nocp = time.perf_counter() - t0, time.process_time() - c0

    # The peer: same laws, drawn here, one run per iteration, for about simpy_seconds.
    send = LATENCY + ACT / c.bandwidth
    rng = np.random.default_rng(20261125)
    laws = {"F": LogNormal.from_mean_scv(T_F, SCV), "B": LogNormal.from_mean_scv(T_B, SCV)}
    keys = list(itertools.product(range(S), "FB", range(M)))
    per_iter, makespans = [], []
    t_end = time.perf_counter() + simpy_seconds
    while time.perf_counter() < t_end or len(makespans) < 5:
        draws = {k: laws[k].sample(rng, S * M) for k in "FB"}
        durations = {(0, s, k, m): float(draws[k][s * M + m]) for s, k, m in keys}
        t0 = time.perf_counter()
        run = simulate_pipeline(
            [T_F] * S, [T_B] * S, schedule=sched, microbatches=M, send=send, durations=durations
        )
        per_iter.append(time.perf_counter() - t0)
        makespans.append(run.makespan)
    n = len(makespans)
    t_simpy = statistics.median(per_iter) * ITERATIONS
    peer_mean = float(np.mean(makespans))
    half = float(stats.t.ppf(0.975, n - 1) * np.std(makespans, ddof=1) / np.sqrt(n))
    lo, hi = sim.interval
    agree = max(lo, peer_mean - half) <= min(hi, peer_mean + half)
    pm = 1.0 / pred.iteration_rate
    ok = t_predict <= 5.0 and agree

    print(f"[{sched}] S = {S}, M = {M}, lognormal F/B (SCV {SCV}): {len(graph):,} tasks")
    line("build the task graph", f"{t_build:9.2f} s")
    line(
        f"predict(method='fine'), {ITERATIONS:,} iterations",
        f"{t_predict:9.2f} s   (median of 3; target <= 5 s); CPU {statistics.median(cpu):.2f} s",
    )
    line(f"dag.simulate alone, {ITERATIONS:,} iterations", f"{t_sim:9.2f} s   CPU {c_sim:.2f} s")
    line("  the same, critical_path=False", f"{t_nocp:9.2f} s   CPU {c_nocp:.2f} s")
    line(
        "  mean makespan (simulate)", f"{sim.mean * 1e3:9.3f} ms, 95% CI [{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms"
    )
    line("  1 / iteration_rate (predict)", f"{pm * 1e3:9.3f} ms")
    line(
        "SimPy DES, one iteration per run",
        f"{statistics.median(per_iter) * 1e3:9.1f} ms per iteration (median of {n}), "
        f"{t_simpy:,.0f} s extrapolated to {ITERATIONS:,}",
    )
    line(
        "  SimPy mean makespan",
        f"{peer_mean * 1e3:9.3f} ms, 95% CI [{(peer_mean - half) * 1e3:.3f}, "
        f"{(peer_mean + half) * 1e3:.3f}] ms ({n} iterations)",
    )
    line("  confidence intervals overlap", str(agree))
    line("ratio SimPy / queuesgd predict", f"{t_simpy / t_predict:9.0f}x")
    return ok, t_predict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simpy-seconds", type=float, default=20.0, help="SimPy run time per schedule")
    args = parser.parse_args()
    try:
        import simpy
    except ImportError:
        print('simpy is not installed: pip install -e ".[peers]" in the queuesgd checkout')
        return 1
    print(
        f"machine: {os.cpu_count()} CPUs (nproc), {platform.machine()}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, SimPy {simpy.__version__}; load average {os.getloadavg()[0]:.2f}"
    )
    results = [(sched, *bench(sched, args.simpy_seconds)) for sched in ("1f1b", "gpipe")]
    print("summary")
    print(f"    {'target':<62} {'measured':>9}  result")
    for sched, ok, t in results:
        target = f"{sched}: S = 16, M = 256, 10,000 iterations <= 5 s, means agree"
        print(f"    {target:<62} {t:>7.3f} s  {'PASS' if ok else 'FAIL'}")
    good = all(ok for _, ok, _ in results)
    print("PASS" if good else "FAIL: a target was missed (see above)")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
