"""Reachability graph: queuesgd ``net.state_space()`` against SNAKES' ``StateGraph``, same run.

The same timed-only P/T nets (so SNAKES' markings are exactly queuesgd's
tangible markings) are built once in queuesgd and exported with
``net.to_snakes()``; both tools then enumerate every reachable marking.

1. A closed cycle: N tokens over K places, infinite-server transitions;
   C(N+K-1, K-1) markings (N = 10, K = 6: 3,003, the size of issue 13; and
   N = 15, K = 5: 3,876, issue 3's).
2. A bounded pipeline with inhibitor arcs and batch (multiplicity-2) arcs:
   arrivals blocked by an inhibitor once the buffer holds b tokens, pairs
   moved to a second stage, served by two servers into an output place of
   capacity b (b = 12: a few thousand markings, counted by both tools).

Both counts are checked against each other (and the cycle against its closed
form). Times are medians: of ``--repeat`` runs for queuesgd, of
``--snakes-repeat`` runs for SNAKES (it takes seconds). The same nets are also
generated, in the same run, by the package as of ``--baseline`` (default
``8e320b6~``, before issue 13's packed-key path; extracted with ``git archive``
and run in a subprocess, ``benchmarks/_baseline.py``) for a before/after
ratio; ``--no-baseline`` skips it. Targets: queuesgd at least 300x faster than
SNAKES on the 3,003-marking cycle (issue 13), at least 100x on the others
(issue 3).

Run:  python benchmarks/bench_snakes.py [--repeat 21] [--snakes-repeat 3] [--baseline REV | --no-baseline]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
import warnings
from math import comb

from queuesgd.petri import PetriNet


def cycle(n: int, k: int) -> PetriNet:
    net = PetriNet(f"cycle-{n}x{k}")
    for i in range(k):
        net.place(f"p{i}", tokens=n if i == 0 else 0)
    for i in range(k):
        net.timed(
            f"t{i}", rate=1.0 + i, inputs={f"p{i}": 1}, outputs={f"p{(i + 1) % k}": 1}, servers="infinite"
        )
    return net


def pipeline(b: int) -> PetriNet:
    """Arrivals into a buffer of b, pairs to stage 2 (< b - 1 there), 2 servers into an output of b."""
    net = PetriNet(f"pipeline-{b}")
    for p in ("buffer", "stage2", "done"):
        net.place(p)
    net.timed("arrive", rate=1.0, outputs={"buffer": 1}, inhibitors={"buffer": b})
    net.timed("pair", rate=2.0, inputs={"buffer": 2}, outputs={"stage2": 2}, inhibitors={"stage2": b - 1})
    net.timed("serve", rate=1.5, inputs={"stage2": 1}, outputs={"done": 1}, inhibitors={"done": b}, servers=2)
    net.timed("leave", rate=3.0, inputs={"done": 1})
    return net


def time_queuesgd(net: PetriNet, repeat: int) -> tuple[float, float, int]:
    """Median and best time of ``net.state_space()`` over ``repeat`` runs, and the marking count."""
    times, n = [], -1
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = len(net.state_space())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), n


def time_snakes(net: PetriNet, repeat: int) -> tuple[float, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from snakes.nets import StateGraph

        times, n = [], -1
        for _ in range(repeat):
            snet = net.to_snakes()
            t0 = time.perf_counter()
            g = StateGraph(snet)
            g.build()
            n = len(g)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), n


def time_baseline(rev: str, cases: list[tuple[str, str]], repeat: int) -> list[float]:
    """Median ``state_space`` time of each case (``(constructor call, its source)``) with ``rev``'s code."""
    import _baseline

    code = "\n".join(
        [
            "import json, statistics, time",
            "from queuesgd.petri import PetriNet",
            inspect.getsource(cycle),
            inspect.getsource(pipeline),
            "out = []",
            f"for call in {[c for c, _ in cases]!r}:",
            "    net = eval(call)",
            "    times = []",
            f"    for _ in range({repeat}):",
            "        t0 = time.perf_counter()",
            "        net.state_space()",
            "        times.append(time.perf_counter() - t0)",
            "    out.append(statistics.median(times))",
            "print(json.dumps(out))",
        ]
    )
    return _baseline.run_at(rev, code)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--snakes-repeat", type=int, default=3)
    ap.add_argument("--buffer", type=int, default=12)
    ap.add_argument("--baseline", default="8e320b6~", help="git revision timed for the before/after ratio")
    ap.add_argument("--no-baseline", action="store_true")
    args = ap.parse_args(argv)
    import snakes

    print(f"queuesgd state_space vs SNAKES {snakes.version} StateGraph (timed-only nets); medians")
    ok = True
    # (constructor call, net, closed-form count, target ratio against SNAKES)
    cases = [
        ("cycle(10, 6)", cycle(10, 6), comb(15, 5), 300),
        ("cycle(15, 5)", cycle(15, 5), comb(19, 4), 100),
        (f"pipeline({args.buffer})", pipeline(args.buffer), None, 100),
    ]
    before = None
    if not args.no_baseline:
        before = time_baseline(args.baseline, [(c, "") for c, *_ in cases], args.repeat)
    for i, (_, net, expected, target) in enumerate(cases, 1):
        tq, best, nq = time_queuesgd(net, args.repeat)
        ts, ns = time_snakes(net, args.snakes_repeat)
        ratio = ts / tq
        same = nq == ns and (expected is None or nq == expected)
        ok &= same and ratio >= target
        print(
            f"[{i}] {net.name}: {nq} markings (SNAKES {ns}"
            + (f", closed form {expected})" if expected else ")")
        )
        rows = [
            (
                f"queuesgd state_space, median of {args.repeat}",
                f"{tq * 1e3:10.2f} ms   (best {best * 1e3:.2f})",
            )
        ]
        if before is not None:
            t0 = before[i - 1]
            rows.append((f"before ({args.baseline}), median of {args.repeat}", f"{t0 * 1e3:10.2f} ms"))
            rows.append(("ratio before / queuesgd", f"{t0 / tq:10.1f}x"))
        rows.append((f"SNAKES StateGraph.build, median of {args.snakes_repeat}", f"{ts * 1e3:10.1f} ms"))
        rows.append(("ratio SNAKES / queuesgd", f"{ratio:10.0f}x   (target >= {target}x)"))
        if before is not None:
            rows.append(("ratio SNAKES / before", f"{ts / before[i - 1]:10.0f}x"))
        for label, value in rows:
            print(f"    {label:40s}: {value}")
        print(f"    {'counts agree':40s}: {same}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
