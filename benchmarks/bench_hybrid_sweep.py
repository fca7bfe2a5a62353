"""A sweep of 10,000 hybrid (data x pipeline parallel) configurations, checked against predict and SimPy.

The grid: workers in {8, 16, 32, 64} x stages S in {1, 2, 4, 8} (D = workers / S
pipeline replicas, each stage's gradients all-reduced across the D replicas)
x 25 micro-batch counts M in 8..32 x 25 bandwidths from 1 to 400 Gbit/s
(log-spaced), 1F1B and then GPipe, on a synthetic model of 32 equal layers (forward 1 ms
and backward 2 ms per micro-batch for the whole model, 8 MB of gradients per
layer, optimizer step 4 ms for the whole model), 2 MB of activations per
boundary, 5 us latency, ``overlap=True`` (each stage's all-reduce starts
when its own backwards end).

queuesgd: one ``queuesgd.sweep(Pipeline(...), ..., workers=..., bandwidth=...,
stages=[...], microbatches=[...])`` call (method ``"auto"``: the closed form
where it is exact, else the task graph), median of 3. Target: seconds.

Checks on a seeded random sample of rows: each row equals
``queuesgd.predict`` of the same configuration (relative difference <= 1e-12),
and the SimPy peer of ``tests/peers/simpy_pipeline.py`` (its inputs computed
here with the alpha-beta costs) gives the same throughput to 1e-9.

Run:  python benchmarks/bench_hybrid_sweep.py [--sample 40]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import queuesgd as q
from queuesgd.workload import Layer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

WORKERS = [8, 16, 32, 64]
STAGES = [1, 2, 4, 8]
MICROBATCHES = list(range(8, 33))
BANDWIDTHS = np.geomspace(1e9 / 8, 400e9 / 8, 25)  # 1 .. 400 Gbit/s in bytes/s
LAYERS, T_F, T_B, LAYER_BYTES = 32, 1e-3, 2e-3, 8e6  # whole model per micro-batch
ACT, LATENCY, UPDATE, BATCH = 2e6, 5e-6, 4e-3, 8
TOLERANCE = 1e-9


def line(label: str, value: str) -> None:
    print(f"    {label:<44} : {value}")


def workload() -> q.Workload:
    layers = [Layer(f"l{i}", LAYER_BYTES, T_B / LAYERS, T_F / LAYERS) for i in reversed(range(LAYERS))]
    return q.Workload(T_F + T_B, None, batch_size=BATCH, update_time=UPDATE, layers=layers)


def peer_throughput(schedule: str, workers: int, S: int, M: int, bandwidth: float) -> float:
    """The same configuration in the SimPy peer; costs by hand (alpha-beta)."""
    from peers.simpy_pipeline import simulate_pipeline

    D = workers // S
    P = LAYERS // S * LAYER_BYTES  # bytes of one stage (balanced: S divides the 32 equal layers)
    ring = 2 * (D - 1) / D * P / bandwidth + 2 * (D - 1) * LATENCY  # Patarasuk and Yuan (2009)
    run = simulate_pipeline(
        [T_F / S] * S,
        [T_B / S] * S,
        schedule=schedule,
        microbatches=M,
        send=LATENCY + ACT / bandwidth,
        replicas=D,
        allreduce=ring,
        update=UPDATE / S,
    )
    return D * M * BATCH / run.makespan


def bench(schedule: str, sample: int, label: str) -> tuple[bool, float]:
    from queuesgd.schemes.parallel.pipeline import Pipeline

    w = workload()
    c = q.Cluster(8, "10Gbit/s", latency=LATENCY)
    scheme = Pipeline(stages=1, microbatches=8, schedule=schedule, activation_bytes=ACT)
    kw = dict(workers=WORKERS, bandwidth=list(BANDWIDTHS), stages=STAGES, microbatches=MICROBATCHES)
    times, table = [], None
    for _ in range(3):
        t0 = time.perf_counter()
        table = q.sweep(scheme, w, c, **kw)
        times.append(time.perf_counter() - t0)
    t_sweep = statistics.median(times)
    n = len(table)
    cols = table.columns
    used = dict(zip(*np.unique(cols["method"].astype(str), return_counts=True)))
    print(
        f"{label} hybrid sweep, {schedule}: {len(WORKERS)} worker counts x {len(STAGES)} stage counts x "
        f"{len(MICROBATCHES)} micro-batch counts x {len(BANDWIDTHS)} bandwidths = {n:,} configurations"
    )
    line("queuesgd sweep, one call", f"{t_sweep:9.3f} s  (median of 3; target: seconds)")
    line("rows per second", f"{n / t_sweep:12,.0f}")
    line("methods used (rows)", ", ".join(f"{k} {int(v):,}" for k, v in used.items()))

    rng = np.random.default_rng(20261125)
    rows = rng.choice(n, size=min(sample, n), replace=False)
    worst_predict = worst_peer = 0.0
    t_pred, t_peer = [], []
    for i in rows:
        W, S, M, B = (
            int(cols["workers"][i]),
            int(cols["stages"][i]),
            int(cols["microbatches"][i]),
            float(cols["bandwidth"][i]),
        )
        t0 = time.perf_counter()
        one = q.predict(scheme.replace(stages=S, microbatches=M), w, q.Cluster(W, B, latency=LATENCY))
        t_pred.append(time.perf_counter() - t0)
        worst_predict = max(worst_predict, abs(one.throughput / cols["throughput"][i] - 1.0))
        t0 = time.perf_counter()
        x = peer_throughput(schedule, W, S, M, B)
        t_peer.append(time.perf_counter() - t0)
        worst_peer = max(worst_peer, abs(x / cols["throughput"][i] - 1.0))
    line(
        f"predict one by one, {len(rows)} sampled rows",
        f"{statistics.median(t_pred) * 1e3:9.2f} ms per row "
        f"(median), {statistics.median(t_pred) * n:,.1f} s extrapolated to {n:,}",
    )
    line("  largest relative difference", f"{worst_predict:.1e}   (target <= 1e-12)")
    line(
        f"SimPy peer, same {len(rows)} rows",
        f"{statistics.median(t_peer) * 1e3:9.2f} ms per row (median), "
        f"{statistics.median(t_peer) * n:,.1f} s extrapolated to {n:,}",
    )
    line("  largest relative difference", f"{worst_peer:.1e}   (target <= {TOLERANCE:g})")
    line("ratio SimPy / queuesgd sweep", f"{statistics.median(t_peer) * n / t_sweep:9.0f}x")
    return worst_predict <= 1e-12 and worst_peer <= TOLERANCE, t_sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=40, help="rows checked one by one")
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
    results = [(s, *bench(s, args.sample, f"[{k}]")) for k, s in enumerate(("1f1b", "gpipe"), start=1)]
    print("summary")
    for sched, ok, t in results:
        target = f"{sched}: 10,000 configurations in seconds, rows = predict = SimPy"
        print(f"    {target:<62} {t:>7.3f} s  {'PASS' if ok else 'FAIL'}")
    good = all(ok for _, ok, _ in results)
    print("PASS" if good else "FAIL: a row differs (see above)")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
