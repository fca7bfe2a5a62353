"""Reachability graph: queuesgd ``net.state_space()`` against SNAKES' ``StateGraph``, same run.

The same timed-only P/T nets (so SNAKES' markings are exactly queuesgd's
tangible markings) are built once in queuesgd and exported with
``net.to_snakes()``; both tools then enumerate every reachable marking.

1. A closed cycle: N tokens over K places, infinite-server transitions;
   C(N+K-1, K-1) markings (N = 15, K = 5: 3,876).
2. A bounded pipeline with inhibitor arcs and batch (multiplicity-2) arcs:
   arrivals blocked by an inhibitor once the buffer holds b tokens, pairs
   moved to a second stage, served by two servers into an output place of
   capacity b (b = 12: a few thousand markings, counted by both tools).

Both counts are checked against each other (and the cycle against its closed
form). Times: best of ``--repeat`` runs for queuesgd, one run for SNAKES
(it takes seconds). Target (issue #3): queuesgd at least 100x faster.

Run:  python benchmarks/bench_snakes.py [--tokens 15] [--places 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
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


def time_queuesgd(net: PetriNet, repeat: int) -> tuple[float, int]:
    best, n = float("inf"), -1
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = len(net.state_space())
        best = min(best, time.perf_counter() - t0)
    return best, n


def time_snakes(net: PetriNet) -> tuple[float, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from snakes.nets import StateGraph

        snet = net.to_snakes()
        t0 = time.perf_counter()
        g = StateGraph(snet)
        g.build()
        n = len(g)
        return time.perf_counter() - t0, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=15)
    ap.add_argument("--places", type=int, default=5)
    ap.add_argument("--buffer", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import snakes

    print(f"queuesgd state_space vs SNAKES {snakes.version} StateGraph (timed-only nets)")
    ok = True
    cases = [
        (cycle(args.tokens, args.places), comb(args.tokens + args.places - 1, args.places - 1)),
        (pipeline(args.buffer), None),
    ]
    for i, (net, expected) in enumerate(cases, 1):
        tq, nq = time_queuesgd(net, args.repeat)
        ts, ns = time_snakes(net)
        ratio = ts / tq
        same = nq == ns and (expected is None or nq == expected)
        ok &= same and ratio >= 100
        print(
            f"[{i}] {net.name}: {nq} markings (SNAKES {ns}"
            + (f", closed form {expected})" if expected else ")")
        )
        label = f"queuesgd state_space, best of {args.repeat}"
        print(f"    {label:37s}: {tq * 1e3:10.1f} ms")
        print(f"    SNAKES StateGraph.build              : {ts * 1e3:10.1f} ms")
        print(f"    ratio SNAKES / queuesgd              : {ratio:10.0f}x   (target >= 100x)")
        print(f"    counts agree                         : {same}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
