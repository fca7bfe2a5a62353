"""Task-graph engine (``queuesgd.dag``) against a SimPy discrete-event simulation, same run.

Two measurements, each printed with the ratio SimPy time / queuesgd time:

1. Monte Carlo of the fine-grained ring all-reduce graph of ResNet50 (161
   gradient tensors) on 64 workers, with lognormal compute noise (SCV 0.01,
   one random factor per worker): the full 64-worker graph, 10,444 tasks.
   queuesgd: ``simulate(graph, 10_000, rng=0)``, median of 3. SimPy: the DES of
   ``tests/peers/simpy_dag.py`` (one iteration per call) on a few iterations
   whose durations are sampled the same way (per-worker factors drawn from the
   graph's own factor laws, multiplied into the scaled tasks); its time per
   iteration is extrapolated to 10,000 (said in the output). On those sampled
   rows the SimPy makespans are compared with ``schedule(graph, rows)``.
2. The what-if grid of Zhang et al. (NetAI 2020): 5 worker counts x 5
   bandwidths x 4 compression ratios, deterministic. queuesgd: one ``whatif``
   call, median of 5. SimPy: one DES per configuration on the same symmetric
   graph (``fuse`` + ``allreduce_graph``, as ``whatif`` builds it) with the
   message costs of ``ring_message_costs`` (the bandwidth multiplied by the
   compression ratio divides only the bytes on the wire, as in ``whatif``);
   every SimPy iteration time is compared with ``whatif``'s ``iteration_time``,
   which proves both run the same model. Only the 100 DES runs are timed
   (median of 3), not building the graph or the durations (in SimPy's favour).

Targets (issue): 10,000 Monte Carlo iterations of the 64-worker ResNet50 graph
in <= 5 s; the 100-configuration what-if grid in <= 1 s.

Run:  python benchmarks/bench_dag_vs_simpy.py [--simpy-iterations 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import queuesgd as q
from queuesgd.dag import TaskGraph, schedule, simulate
from queuesgd.distributions import LogNormal
from queuesgd.schemes.fine.fine import allreduce_graph, fuse, ring_message_costs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

ITERATIONS = 10_000
WORKERS = [8, 16, 32, 64, 128]
BANDWIDTH = ["1Gbit/s", "10Gbit/s", "25Gbit/s", "40Gbit/s", "100Gbit/s"]
COMPRESSION = [1, 2, 5, 10]
TOLERANCE = 1e-9  # seconds: SimPy and the max-plus engine must agree to rounding


def line(label: str, value: str) -> None:
    print(f"    {label:<42} : {value}")


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def sampled_durations(graph: TaskGraph, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` iterations of durations: constants times one draw per factor per row (shape (rows, T))."""
    base = np.array([float(t.duration) for t in graph.tasks])  # every duration of this graph is a number
    draws = {f: law.sample(rng, rows) for f, law in graph.factors.items()}
    out = np.tile(base, (rows, 1))
    for i, t in enumerate(graph.tasks):
        if t.scale is not None:
            out[:, i] *= draws[t.scale]
    return out


def bench_monte_carlo(simpy_iterations: int) -> tuple[bool, float]:
    from peers.simpy_dag import simulate_with_simpy

    w = q.load_workload("resnet50")
    noisy = dataclasses.replace(w, compute=LogNormal.from_mean_scv(w.compute_time, 0.01))
    t0 = time.perf_counter()
    graph = q.RingAllReduce().fine_model(noisy, q.Cluster(64, "10Gbit/s")).graph
    t_build = time.perf_counter() - t0
    t_ours, sim = timed(lambda: simulate(graph, ITERATIONS, rng=0), repeat=3)

    rows = sampled_durations(graph, simpy_iterations, np.random.default_rng(20261122))
    simpy_times, simpy_makespans = [], []
    for row in rows:
        t0 = time.perf_counter()
        finish = simulate_with_simpy(graph, row)
        simpy_times.append(time.perf_counter() - t0)
        simpy_makespans.append(float(finish.max()))
    per_iter = statistics.median(simpy_times)
    t_simpy = per_iter * ITERATIONS
    ours = schedule(graph, rows, critical_path=False).makespan
    diff = float(np.max(np.abs(np.array(simpy_makespans) - ours)))
    ok = diff <= TOLERANCE and t_ours <= 5.0
    print(
        f"[1] ResNet50, ring all-reduce, 64 workers, lognormal compute (SCV 0.01): {len(graph):,} tasks, "
        f"{len(graph.factors)} factors, {len(w.layers)} tensors"
    )
    lo, hi = sim.interval
    line("build the graph (fine_model)", f"{t_build:9.2f} s")
    line(f"queuesgd simulate, {ITERATIONS:,} iterations", f"{t_ours:9.2f} s   (median of 3; target <= 5 s)")
    line("  mean makespan", f"{sim.mean * 1e3:9.3f} ms, 95% CI [{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms")
    line(
        "SimPy DES, one iteration per run",
        f"{per_iter * 1e3:9.1f} ms per iteration (median of {simpy_iterations}), "
        f"{t_simpy:,.0f} s extrapolated to {ITERATIONS:,}",
    )
    line("ratio SimPy / queuesgd", f"{t_simpy / t_ours:9.0f}x")
    line(
        f"SimPy vs schedule(graph, rows), {simpy_iterations} rows",
        f"max |makespan diff| {diff:.1e} s (their mean {np.mean(simpy_makespans) * 1e3:.3f} ms)",
    )
    return ok, t_ours


def bench_whatif() -> tuple[bool, float]:
    from peers.simpy_dag import simulate_with_simpy

    t_ours, r = timed(
        lambda: q.whatif("resnet50", workers=WORKERS, bandwidth=BANDWIDTH, compression=COMPRESSION),
        repeat=5,
    )
    # The same model, built with whatif's own building blocks: one symmetric graph, costs per message.
    wl = q.load_workload("resnet50")
    buckets = fuse(wl)
    sizes = np.array([b.nbytes for b in buckets])
    model = allreduce_graph(wl, q.Cluster(1, 1.0), buckets, np.zeros(len(buckets)), update_time=0.0)
    bandwidths = [q.units.parse_bandwidth(b, "bandwidth") for b in BANDWIDTH]
    rows = []
    for n, bw, comp in itertools.product(WORKERS, bandwidths, COMPRESSION):
        d = np.array(model.graph.mean_durations)
        # compression divides the bytes on the wire only: bandwidth * comp, additions on S/n uncompressed
        d[list(model.comm_tasks)] = ring_message_costs(n, sizes, bw * comp, 0.0, wl.reduction_time)
        rows.append(d)
    t_simpy, finishes = timed(lambda: [simulate_with_simpy(model.graph, d) for d in rows], repeat=3)
    end_backward = np.array([f[model.backward_ends[0]] for f in finishes])
    overhead = np.maximum(np.array([f.max() for f in finishes]) - end_backward, 0.0)
    iteration = wl.compute_time + overhead
    diff = float(np.max(np.abs(iteration - r.columns["iteration_time"])))
    ok = diff <= TOLERANCE and t_ours <= 1.0 and len(r) == len(rows)
    print(
        f"[2] what-if grid, ResNet50: {len(WORKERS)} workers x {len(BANDWIDTH)} bandwidths x "
        f"{len(COMPRESSION)} compressions = {len(r)} configurations, {len(model.graph)} tasks, "
        f"{len(buckets)} messages"
    )
    line("queuesgd whatif, one call", f"{t_ours * 1e3:9.1f} ms  (median of 5; target <= 1000 ms)")
    line("SimPy DES, one run per configuration", f"{t_simpy * 1e3:9.1f} ms for all {len(rows)} (median of 3)")
    line("ratio SimPy / queuesgd", f"{t_simpy / t_ours:9.1f}x")
    line("SimPy iteration time vs whatif's", f"max |diff| {diff:.1e} s")
    sf = r.scaling_factor
    line(
        "scaling factor",
        f"{sf.min():.3f} .. {sf.max():.3f}; 64 workers, 10 Gbit/s, no compression: "
        f"{sf[WORKERS.index(64), 1, 0]:.3f}",
    )
    return ok, t_ours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simpy-iterations", type=int, default=20, help="SimPy runs of the 64-worker graph")
    args = parser.parse_args()
    try:
        import simpy
    except ImportError:
        print('simpy is not installed: pip install -e ".[peers]" in the queuesgd checkout')
        return 1
    print(
        f"machine: {os.cpu_count()} CPUs (nproc), {platform.machine()}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}, SimPy {simpy.__version__}"
    )
    ok1, t1 = bench_monte_carlo(args.simpy_iterations)
    ok2, t2 = bench_whatif()
    print("summary")
    print(f"    {'target':<62} {'measured':>9}  result")
    for target, t, ok in (
        ("10,000 Monte Carlo iterations, ResNet50, 64 workers: <= 5 s", t1, ok1),
        ("5 x 5 x 4 what-if grid, deterministic: <= 1 s", t2, ok2),
    ):
        print(f"    {target:<62} {t:>7.3f} s  {'PASS' if ok else 'FAIL'}")
    print("PASS" if ok1 and ok2 else "FAIL: a target was missed (see above)")
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
