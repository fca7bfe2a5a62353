"""Closed network solved as a CTMC: queuesgd's GSPN engine against LINE's SolverCTMC.

The same closed network (a delay and three single-server queues in a cycle,
exponential service) is built as a GSPN in queuesgd (``net.solve()``: state
space, sparse generator, steady state) and as a LINE model solved by
``SolverCTMC``. Both are timed in the same run (median of repeats, model
construction included on both sides) and the throughputs are compared with
exact MVA. Target (issue #3): queuesgd at least 20x faster than LINE, judged
on chains of 100 states or more; the smallest chain is printed too, where
fixed per-call overheads dominate both sides.

Run:  python benchmarks/bench_ctmc_vs_line.py
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import time

import queuesgd as q

DEMANDS = {"think": 2.0, "cpu": 0.5, "disk": 0.3, "net": 0.4}


def gspn(population: int) -> q.PetriNet:
    net = q.PetriNet("cqn")
    names = list(DEMANDS)
    for i, name in enumerate(names):
        net.place(name, tokens=population if i == 0 else 0)
    for i, (name, demand) in enumerate(DEMANDS.items()):
        net.timed(
            f"leave_{name}",
            rate=1.0 / demand,
            inputs={name: 1},
            outputs={names[(i + 1) % len(names)]: 1},
            servers="infinite" if i == 0 else 1,
        )
    return net


def ours(population: int) -> tuple[float, int]:
    sol = gspn(population).solve()
    return sol.throughput("leave_think"), len(sol.space)


def line(population: int) -> float:
    from line_solver import ClosedClass, Delay, Exp, Network, Queue, SchedStrategy, SolverCTMC

    model = Network("cqn")
    nodes = [Delay(model, "think")] + [Queue(model, n, SchedStrategy.FCFS) for n in list(DEMANDS)[1:]]
    jc = ClosedClass(model, "jobs", population, nodes[0])
    for node, demand in zip(nodes, DEMANDS.values()):
        node.setService(jc, Exp(1.0 / demand))
    model.link(q_serial(nodes))
    with contextlib.redirect_stdout(io.StringIO()):
        table = SolverCTMC(model).avgTable()
    return float(table["Tput"].iloc[0])


def q_serial(nodes):
    from line_solver import Network

    return Network.serialRouting(*nodes)


def median_time(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> int:
    try:
        import line_solver  # noqa: F401
    except ImportError:
        print('line-solver is not installed: pip install -e ".[peers]" in the queuesgd checkout')
        return 1
    ours(2)  # warm up imports on both sides
    line(2)
    ok = True
    print(
        f"{'N':>4} {'states':>7} {'queuesgd ms':>12} {'LINE ms':>10} {'ratio':>7}  "
        f"{'X (ours)':>14} {'X (LINE)':>14} {'X (MVA)':>14}"
    )
    for population in (5, 10, 15, 20):
        t_ours, (x, states) = median_time(lambda n=population: ours(n), 5)
        t_line, x_line = median_time(lambda n=population: line(n), 3)
        x_mva = q.mva(
            q.ClosedNetwork(
                [q.Delay("think", 2.0)] + [q.Queue(n, d) for n, d in list(DEMANDS.items())[1:]], population
            )
        ).throughput
        ratio = t_line / t_ours
        ok &= abs(x - x_mva) <= 1e-9 * x_mva and (states < 100 or ratio >= 20)
        print(
            f"{population:>4} {states:>7} {t_ours * 1e3:>12.1f} {t_line * 1e3:>10.1f} {ratio:>6.0f}x"
            f"  {x:>14.10f} {x_line:>14.10f} {x_mva:>14.10f}"
            + ("  (not judged: < 100 states)" if states < 100 else "")
        )
    print("PASS (>= 20x, equal to exact MVA to 1e-9)" if ok else "FAIL: a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
