"""GSPN state-space generation and steady state at a million tangible markings.

[1] Generation rate: a ring of 6 single-server queues holding 39 tokens,
    C(44, 5) = 1,086,008 tangible markings (a 5-dimensional state space).
[2] Generate + solve: a ring of 3 single-server queues holding 1,413 tokens,
    C(1415, 2) = 1,000,405 markings, solved with ``net.solve()`` (method
    "auto": iterative above 200,000 markings) and checked against exact MVA
    (product form: the GSPN's CTMC and MVA must agree).
[3] Vanishing markings: a fork-join of 16 exponential tasks behind an immediate
    barrier (2^16 - 1 = 65,535 tangible markings), throughput mu / H_16.

[4] Generate + solve a 5-dimensional space: a ring of 6 single-server queues
    holding 40 tokens, C(45, 5) = 1,221,759 markings (issue 13), solved with
    ``steady_state(method="iterative")``, median of ``--repeat`` runs; the same
    code run once against the package as of ``--baseline`` (default
    ``8e320b6~``, the commit before issue 13's solver: plain Gauss-Seidel
    sweeps, hashed keys), extracted with ``git archive`` and run in a
    subprocess (``benchmarks/_baseline.py``), for the ratio. Both are checked
    against exact MVA (throughput, mean tokens: 1e-9 relative) and the product
    form per marking. ``--no-baseline`` skips the old run (about 7 minutes).

Targets (issue 3): >= 10^6 tangible markings per minute; 10^6 markings
generated and solved within 2 minutes (issue 13: also on [4]).

Run: python benchmarks/bench_statespace.py [--repeat 3] [--baseline REV | --no-baseline]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from queuesgd import ClosedNetwork, PetriNet, Queue, mva
from queuesgd.petri.statespace import state_space


def ring(demands: list[float], n_tokens: int) -> PetriNet:
    K = len(demands)
    net = PetriNet(f"ring{K}x{n_tokens}")
    for k in range(K):
        net.place(f"q{k}", tokens=n_tokens if k == 0 else 0)
    for k in range(K):
        net.timed(f"s{k}", rate=1.0 / demands[k], inputs={f"q{k}": 1}, outputs={f"q{(k + 1) % K}": 1})
    return net


def fork_join(n: int, mu: float) -> PetriNet:
    net = PetriNet(f"forkjoin{n}")
    for i in range(n):
        net.place(f"run{i}", tokens=1)
        net.place(f"done{i}")
        net.timed(f"task{i}", rate=mu, inputs={f"run{i}": 1}, outputs={f"done{i}": 1})
    net.immediate(
        "barrier", inputs={f"done{i}": 1 for i in range(n)}, outputs={f"run{i}": 1 for i in range(n)}
    )
    return net


# [4] runs this same source here and against the baseline commit (benchmarks/_baseline.py)
MEASURE = """
import time
import numpy as np
from queuesgd import PetriNet
from queuesgd.markov import steady_state
from queuesgd.petri.statespace import state_space


def ring6(demands, n_tokens):
    K = len(demands)
    net = PetriNet(f"ring{K}x{n_tokens}")
    for k in range(K):
        net.place(f"q{k}", tokens=n_tokens if k == 0 else 0)
    for k in range(K):
        net.timed(f"s{k}", rate=1.0 / demands[k], inputs={f"q{k}": 1}, outputs={f"q{(k + 1) % K}": 1})
    return net


def measure(demands, n_tokens):
    net = ring6(demands, n_tokens)
    t0 = time.perf_counter()
    ss = state_space(net)
    t1 = time.perf_counter()
    pi = steady_state(ss.generator(), method="iterative")
    t2 = time.perf_counter()
    # product form: pi(m) proportional to prod_k D_k^m_k
    logw = ss.markings @ np.log(np.asarray(demands))
    ref = np.exp(logw - logw.max())
    ref /= ref.sum()
    return {
        "states": len(ss),
        "gen": t1 - t0,
        "solve": t2 - t1,
        "X": float(pi[ss.markings[:, 0] > 0].sum()) / demands[0],
        "L": (pi @ ss.markings).tolist(),
        "pf": float(np.max(np.abs(pi - ref) / ref)),
    }
"""


def big_ring(repeat: int, baseline: str | None) -> bool:
    demands, N = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5], 40
    K = len(demands)
    expected = math.comb(N + K - 1, K - 1)
    ns: dict = {}
    exec(MEASURE, ns)
    runs = [ns["measure"](demands, N) for _ in range(repeat)]
    old = None
    if baseline:
        import _baseline

        code = MEASURE + f"\nimport json\nprint(json.dumps(measure({demands!r}, {N})))\n"
        old = _baseline.run_at(baseline, code)
    ref = mva(ClosedNetwork([Queue(f"q{k}", d) for k, d in enumerate(demands)], population=N))
    Lref = np.array([ref.queue_length[f"q{k}"] for k in range(K)])

    def errors(r: dict) -> tuple[float, float]:
        dX = abs(r["X"] - ref.throughput) / ref.throughput
        dL = float(np.max(np.abs(np.array(r["L"]) - Lref) / Lref))
        return dX, dL

    med = {k: statistics.median(r[k] for r in runs) for k in ("gen", "solve")}
    med["total"] = statistics.median(r["gen"] + r["solve"] for r in runs)
    print(f"[4] ring of {K} queues, {N} tokens: {runs[0]['states']:,} markings (expected {expected:,})")
    print(
        f"                                  queuesgd now (median of {repeat})   before"
        + (f" ({baseline})" if old else "")
    )
    ok = all(r["states"] == expected for r in runs)
    for key, label in (("gen", "generation"), ("solve", "solve (iterative)"), ("total", "generate + solve")):
        now = med[key]
        if old:
            then = old["gen"] + old["solve"] if key == "total" else old[key]
            print(f"    {label:36s}: {now:8.2f} s   {then:8.2f} s   ratio {then / now:6.1f}x")
        else:
            print(f"    {label:36s}: {now:8.2f} s")
    print("    (target: generate + solve <= 120 s)")
    for name, r in [("now", runs[0])] + ([("before", old)] if old else []):
        dX, dL = errors(r)
        print(
            f"    {name:6s} vs exact MVA                : throughput {dX:.1e}, mean tokens {dL:.1e} "
            f"(<= 1e-9); product form per marking {r['pf']:.1e}"
        )
    dX, dL = errors(runs[0])
    ok &= med["total"] <= 120 and dX <= 1e-9 and dL <= 1e-9
    if old:
        ok &= old["states"] == expected
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of [4] with the current code (median)")
    ap.add_argument("--baseline", default="8e320b6~", help="git revision timed for [4]'s ratio")
    ap.add_argument("--no-baseline", action="store_true", help="skip the baseline run of [4]")
    ap.add_argument("--only-big", action="store_true", help="run [4] only")
    args = ap.parse_args(argv)
    if args.only_big:
        ok = big_ring(args.repeat, None if args.no_baseline else args.baseline)
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    ok = True

    # [1] generation rate, 5-dimensional space
    K, N = 6, 39
    net = ring([1.0, 0.9, 0.8, 0.7, 0.6, 0.5], N)
    t0 = time.perf_counter()
    ss = state_space(net)
    dt = time.perf_counter() - t0
    expected = math.comb(N + K - 1, K - 1)
    rate = len(ss) / dt * 60
    print(
        f"[1] ring of {K} queues, {N} tokens: {len(ss):,} tangible markings (expected {expected:,}), "
        f"{ss.n_edges:,} edges"
    )
    print(f"    generation                              : {dt:8.2f} s")
    print(
        f"    rate                                    : {rate / 1e6:8.2f} million markings per minute "
        "(target >= 1)"
    )
    ok &= len(ss) == expected and rate >= 1e6

    # [2] generate + solve 10^6 markings, checked against MVA
    demands, N = [1.0, 0.95, 0.9], 1413
    net = ring(demands, N)
    t0 = time.perf_counter()
    sol = net.solve()
    dt = time.perf_counter() - t0
    expected = math.comb(N + 2, 2)
    ref = mva(ClosedNetwork([Queue(f"q{k}", d) for k, d in enumerate(demands)], population=N))
    dX = abs(sol.throughput("s1") - ref.throughput) / ref.throughput
    dQ = max(abs(sol.mean_tokens(f"q{k}") - ref.queue_length[f"q{k}"]) / N for k in range(3))
    print(
        f"[2] ring of 3 queues, {N} tokens: {len(sol.space):,} markings (expected {expected:,}), "
        f"method {sol.method!r}"
    )
    print(f"    generate + solve                        : {dt:8.2f} s (target <= 120)")
    print(f"    throughput vs exact MVA                 : rel. diff {dX:.1e}; mean tokens: {dQ:.1e} of N")
    ok &= len(sol.space) == expected and dt <= 120 and dX < 1e-6 and dQ < 1e-6

    # [3] vanishing markings eliminated on the fly
    n, mu = 16, 1.0
    net = fork_join(n, mu)
    t0 = time.perf_counter()
    sol = net.solve()
    dt = time.perf_counter() - t0
    H = sum(1 / k for k in range(1, n + 1))
    dX = abs(sol.throughput("barrier") - mu / H) / (mu / H)
    print(f"[3] fork-join of {n} tasks: {len(sol.space):,} markings (expected {2**n - 1:,})")
    print(f"    generate + solve                        : {dt:8.2f} s")
    print(f"    barrier throughput vs mu / H_n          : rel. diff {dX:.1e}")
    ok &= len(sol.space) == 2**n - 1 and dX < 1e-9

    ok &= big_ring(args.repeat, None if args.no_baseline else args.baseline)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
