"""GSPN state-space generation and steady state at a million tangible markings.

[1] Generation rate: a ring of 6 single-server queues holding 39 tokens,
    C(44, 5) = 1,086,008 tangible markings (a 5-dimensional state space).
[2] Generate + solve: a ring of 3 single-server queues holding 1,413 tokens,
    C(1415, 2) = 1,000,405 markings, solved with ``net.solve()`` (method
    "auto": iterative above 200,000 markings) and checked against exact MVA
    (product form: the GSPN's CTMC and MVA must agree).
[3] Vanishing markings: a fork-join of 16 exponential tasks behind an immediate
    barrier (2^16 - 1 = 65,535 tangible markings), throughput mu / H_16.

Targets (issue 3): >= 10^6 tangible markings per minute; 10^6 markings
generated and solved within 2 minutes.

Run: python benchmarks/bench_statespace.py
"""

from __future__ import annotations

import math
import time

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


def main() -> int:
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

    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
