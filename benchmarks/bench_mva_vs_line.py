"""Exact MVA and AsyncPS sweeps: queuesgd against LINE (``line-solver``), same run.

Two measurements, each printed as a ratio (LINE time / queuesgd time):

1. A 20-station single-class network (1 delay + 19 queues, seeded random
   demands) for every population N = 1..10,000. queuesgd: one call
   ``mva(net, population=range(1, 10001))``. LINE: one exact-MVA solve at
   N = 10,000 (its recursion also passes through every smaller population,
   but it returns only the last one), plus solves at a few smaller N to
   check agreement.
2. A sweep of 10,000 AsyncPS configurations (100 worker counts x 100
   bandwidths) for ResNet50. queuesgd: one ``sweep`` call. LINE: a seeded
   random sample of the same configurations, each built and solved one by one
   as a LINE model; the per-configuration median is extrapolated to 10,000
   (said in the output). Every sampled configuration is compared.

Targets (issue #2): the sweep at least 100x faster than LINE one by one;
exact results equal to LINE's exact MVA to 1e-9 relative.

Run:  python benchmarks/bench_mva_vs_line.py [--sample 40]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time

import numpy as np

import queuesgd as q


def line_closed_network(delays: dict[str, float], queues: dict[str, float], population: int):
    """Build a LINE closed network: delays then queues in a cycle, exponential service."""
    from line_solver import ClosedClass, Delay, Exp, Network, Queue, SchedStrategy

    model = Network("bench")
    nodes = []
    for name in delays:
        nodes.append(Delay(model, name))
    for name in queues:
        nodes.append(Queue(model, name, SchedStrategy.FCFS))
    jc = ClosedClass(model, "workers", population, nodes[0])
    for node, demand in zip(nodes, list(delays.values()) + list(queues.values())):
        node.setService(jc, Exp(1.0 / demand))
    model.link(Network.serialRouting(*nodes))
    return model


def line_throughput(model) -> float:
    from line_solver import SolverMVA

    with contextlib.redirect_stdout(io.StringIO()):
        table = SolverMVA(model, method="exact").avgTable()
    return float(table["Tput"].iloc[0])


def timed(fn, repeat: int = 3):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench_population_range(n_max: int) -> bool:
    rng = np.random.default_rng(20261121)
    queue_demands = {f"q{i}": float(d) for i, d in enumerate(rng.uniform(0.01, 0.1, 19))}
    delay = {"think": 1.0}
    net = q.ClosedNetwork([q.Delay("think", 1.0)] + [q.Queue(k, v) for k, v in queue_demands.items()], 1)
    t_ours, series = timed(lambda: q.mva(net, population=range(1, n_max + 1)))
    t_line, x_line = timed(
        lambda: line_throughput(line_closed_network(delay, queue_demands, n_max)), repeat=1
    )
    ok = True
    print(f"[1] 20 stations, N = 1..{n_max:,}")
    print(f"    queuesgd, all {n_max:,} populations in one call : {t_ours * 1e3:9.1f} ms")
    print(f"    LINE exact MVA, N = {n_max:,} only              : {t_line * 1e3:9.1f} ms")
    print(f"    ratio LINE / queuesgd                          : {t_line / t_ours:9.1f}x")
    for n in sorted({1, 10, 100, 1000, n_max}):
        x_ref = x_line if n == n_max else line_throughput(line_closed_network(delay, queue_demands, n))
        x = series.throughput[n - 1]
        rel = abs(x - x_ref) / x_ref
        ok &= rel <= 1e-9
        print(f"    N = {n:>6,}: X = {x:.12g}  LINE {x_ref:.12g}  rel.diff {rel:.1e}")
    return ok


def bench_sweep(sample: int) -> bool:
    workload = q.load_workload("resnet50")
    cluster = q.Cluster(workers=1, bandwidth="10Gbit/s")
    workers = np.arange(1, 101)
    bandwidth = np.geomspace(125e6, 12.5e9, 100)  # 1 Gbit/s .. 100 Gbit/s
    t_ours, table = timed(
        lambda: q.sweep(q.AsyncPS(), workload, cluster, workers=workers, bandwidth=bandwidth)
    )
    rng = np.random.default_rng(7)
    rows = rng.choice(len(table), size=sample, replace=False)
    line_times, ok, worst = [], True, 0.0
    for i in rows:
        w, b = int(table["workers"][i]), float(table["bandwidth"][i])
        net = q.AsyncPS().queueing_network(workload, cluster.with_workers(w).with_bandwidth(b))
        delays = {s.name: float(s.demand) for s in net.stations if isinstance(s, q.Delay)}
        queues = {s.name: float(s.demand) for s in net.stations if isinstance(s, q.Queue)}
        t0 = time.perf_counter()
        x_ref = line_throughput(line_closed_network(delays, queues, w))
        line_times.append(time.perf_counter() - t0)
        rel = abs(table["iteration_rate"][i] - x_ref) / x_ref
        worst = max(worst, rel)
        ok &= rel <= 1e-9
    per_config = statistics.median(line_times)
    t_line = per_config * len(table)
    ratio = t_line / t_ours
    print(f"[2] AsyncPS sweep, ResNet50, {len(table):,} configurations (100 workers x 100 bandwidths)")
    print(f"    queuesgd sweep, one call                       : {t_ours * 1e3:9.1f} ms")
    print(
        f"    LINE, build + exact MVA one by one             : {per_config * 1e3:9.1f} ms per configuration"
        f" (median of {sample} sampled), {t_line:,.0f} s extrapolated to {len(table):,}"
    )
    print(f"    ratio LINE / queuesgd                          : {ratio:9.0f}x   (target >= 100x)")
    print(f"    largest relative difference on the sample      : {worst:.1e}   (target <= 1e-9)")
    return ok and ratio >= 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=40, help="LINE configurations to solve one by one")
    parser.add_argument("--n-max", type=int, default=10_000)
    args = parser.parse_args()
    try:
        import line_solver  # noqa: F401
    except ImportError:
        print('line-solver is not installed: pip install -e ".[peers]" in the queuesgd checkout')
        return 1
    ok1 = bench_population_range(args.n_max)
    ok2 = bench_sweep(args.sample)
    print("PASS" if ok1 and ok2 else "FAIL: a target was missed (see above)")
    return 0 if ok1 and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
