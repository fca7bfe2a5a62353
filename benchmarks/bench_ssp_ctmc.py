"""The stale-synchronous clock-offset CTMC: the solver ``auto`` now picks against sparse LU, same chain.

The chain of ``StaleSynchronous(s)`` lives on a lattice of dimension
``classes x (L - 1)`` (``L = (s + 1)(k + 1) + k`` places for ``k`` compute
phases): 6 for exponential workers at ``s = 2``. Sparse LU fills in on such
lattices. Before this benchmark's change the chain was always factored (the
generic ``auto`` of :func:`queuesgd.markov.steady_state` knows nothing of the
lattice), and ``predict``'s ``auto`` picks the CTMC up to
``StaleSynchronous.max_states`` (200,000) states, so a prediction could run
for minutes (116,280 states of 7 Erlang-3 workers: about two minutes on this
machine). Now the chain's solver is chosen with its dimension
(:func:`queuesgd.markov.choose_method`): the Gauss-Seidel-preconditioned
Krylov solve.

[1] For n = 10, 12, 14 exponential workers at s = 2 (8,008 to 38,760 states):
    the CTMC's solve time as ``predict`` runs it now, and the sparse LU of the
    same generator (the peer, the code before), their ratio, and the
    throughputs' relative difference (target <= 1e-9).
[2] The largest chains ``auto`` solves: 19 exponential workers at s = 2
    (177,100 states) and 7 Erlang-3 workers (116,280): seconds, target <= 30 s.

Run: python benchmarks/bench_ssp_ctmc.py
"""

from __future__ import annotations

import time

from queuesgd.distributions import Erlang, Exponential
from queuesgd.prediction import predict
from queuesgd.schemes.ssp import ssp_chain
from queuesgd.schemes.ssp.ssp import StaleSynchronous
from queuesgd.workload import Cluster, Workload

EXP = Workload(Exponential(rate=5.0), 3e5, batch_size=32)
ERL = Workload(Erlang(3, rate=15.0), 3e5, batch_size=32)


def timed(workload: Workload, n: int, *, lu: bool = False) -> tuple[float, float]:
    """Seconds of ``predict(..., "ctmc")`` and its throughput; ``lu``: the chain by sparse LU."""
    auto, solved = ssp_chain.markov.solve_auto, ssp_chain.markov.steady_state
    if lu:
        ssp_chain.markov.solve_auto = lambda Q, dimension=None: (solved(Q, method="direct"), "direct")
    try:
        t0 = time.perf_counter()
        p = predict(StaleSynchronous(2), workload, Cluster(n, "20GB/s"), "ctmc")
        return time.perf_counter() - t0, p.throughput
    finally:
        ssp_chain.markov.solve_auto = auto


def main() -> int:
    ok = True
    print("[1] StaleSynchronous(2), exponential workers: the chain's solve now against sparse LU")
    print(f"{'n':>4} {'states':>8} {'now s':>8} {'LU s':>8} {'LU / now':>9} {'|now/LU - 1|':>13}")
    for n in (10, 12, 14):
        states = StaleSynchronous(2).state_count(EXP, Cluster(n, "20GB/s"))
        now, x = timed(EXP, n)
        old, y = timed(EXP, n, lu=True)
        rel = abs(x / y - 1)
        ok &= rel <= 1e-9
        print(f"{n:>4} {states:>8,} {now:>8.2f} {old:>8.2f} {old / now:>9.1f} {rel:>13.1e}")
    print("\n[2] the largest chains predict's auto solves as a CTMC (max_states 200,000)")
    for label, w, n in (("exponential", EXP, 19), ("Erlang-3", ERL, 7)):
        states = StaleSynchronous(2).state_count(w, Cluster(n, "20GB/s"))
        now, x = timed(w, n)
        ok &= now <= 30.0
        print(f"{label:>12} n={n:<3} {states:>8,} states {now:>7.2f} s  {x:.6f} samples/s")
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
