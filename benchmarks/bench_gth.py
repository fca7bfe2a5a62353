"""Stiff chains: GTH against sparse LU and Krylov, in accuracy and in time.

[1] Accuracy. For each span of the off-diagonal rates (10^4 .. 10^14), 150
    random irreducible chains of 3 to 30 states (a random path both ways plus
    random extra rates, ``tests/test_markov_gth.random_stiff_chain``), solved
    by ``method="direct"``, ``"iterative"`` and ``"gth"``; the worst absolute
    error of a probability, and GTH's worst *relative* error of an entry,
    against the exact rational solution (``steady_state_symbolic``, fraction
    free, no GTH). Targets: GTH relative <= 1e-13 on every row; the table in
    ``docs/markov.md`` is this output.
[2] Time. GTH against sparse LU (the peer: the same chain, same run), non
    stiff chains where both are accurate (equal to 1e-12): a 10,000-state
    birth-death chain, a 100 x 100 grid, a 25^3 lattice, a 6^5 lattice (the
    band of the stale-synchronous chain of 10 workers). Printed as GTH / LU,
    and GTH's seconds scaled to ``GTH_WORK_LIMIT`` (``gth_work``'s cost
    model; documented as "about 0.8 s").

Run: python benchmarks/bench_gth.py [--chains 150]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_markov import birth_death  # noqa: E402
from test_markov_gth import exact_pi, max_relative_error, random_stiff_chain  # noqa: E402

from queuesgd.errors import AccuracyWarning, ConvergenceError  # noqa: E402
from queuesgd.markov import GTH_WORK_LIMIT, steady_state  # noqa: E402
from queuesgd.markov.gth import band_ordering, gth_work  # noqa: E402


def accuracy(chains: int) -> None:
    print("[1] worst error against exact rationals, per span of the rates")
    print(f"{'span':>7} {'LU abs':>9} {'Krylov abs':>11} {'GTH abs':>9} {'GTH rel':>9} {'raised LU/Kr':>13}")
    rng = np.random.default_rng(2026_11_27)
    for decades in (2, 3, 4, 5, 6, 7, 8, 10, 12, 14):
        worst = {"direct": 0.0, "iterative": 0.0, "gth": 0.0}
        raised = {"direct": 0, "iterative": 0}
        rel = 0.0
        for _ in range(chains):
            Q = random_stiff_chain(rng, int(rng.integers(3, 31)), decades)
            ref = exact_pi(Q)
            ref_f = np.array([float(r) for r in ref])
            for method in worst:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", AccuracyWarning)
                        x = steady_state(Q, method=method)
                except ConvergenceError:
                    raised[method] += 1
                    continue
                worst[method] = max(worst[method], float(np.max(np.abs(x - ref_f))))
                if method == "gth":
                    rel = max(rel, max_relative_error(x, ref))
        print(
            f"  1e{decades:<4} {worst['direct']:9.2g} {worst['iterative']:11.2g} {worst['gth']:9.2g} "
            f"{rel:9.2g} {raised['direct']:>6}/{raised['iterative']}"
        )
        assert rel <= 1e-13, rel


def lattice(side: int, dims: int, rng: np.random.Generator) -> sp.csr_matrix:
    """Nearest-neighbour moves on a ``side^dims`` lattice, rates uniform in [0.5, 2]."""
    n = side**dims
    rows, cols = [], []
    for s, idx in enumerate(itertools.product(range(side), repeat=dims)):
        for d, step in itertools.product(range(dims), (1, -1)):
            j = list(idx)
            j[d] += step
            if 0 <= j[d] < side:
                rows.append(s)
                cols.append(int(np.ravel_multi_index(j, [side] * dims)))
    G = sp.csr_matrix((rng.uniform(0.5, 2.0, len(rows)), (rows, cols)), shape=(n, n))
    return (G - sp.diags(np.asarray(G.sum(axis=1)).ravel())).tocsr()


def timing() -> None:
    print("[2] GTH / sparse LU, same chain, same run (median of 3)")
    rng = np.random.default_rng(5)
    cases = {
        "birth-death, 10,000 states": birth_death(np.full(9_999, 1.0), np.full(9_999, 1.05)),
        "100 x 100 grid": lattice(100, 2, rng),
        "25^3 lattice": lattice(25, 3, rng),
        "6^5 lattice": lattice(6, 5, rng),
    }
    for name, Q in cases.items():
        b = band_ordering(Q)[1]
        seconds = {}
        for method in ("gth", "direct"):
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                pi = steady_state(Q, method=method)
                runs.append(time.perf_counter() - t0)
            seconds[method] = (float(np.median(runs)), pi)
        diff = float(np.max(np.abs(seconds["gth"][1] - seconds["direct"][1])))
        work = gth_work(Q.shape[0], b)
        print(
            f"  {name:28} n={Q.shape[0]:>6} b={b:>4} work={work:8.2g}  "
            f"GTH {seconds['gth'][0]:7.3f} s  LU {seconds['direct'][0]:7.3f} s  "
            f"ratio {seconds['gth'][0] / seconds['direct'][0]:6.1f}  |diff| {diff:.1e}  "
            f"GTH at the limit {seconds['gth'][0] * GTH_WORK_LIMIT / work:5.2f} s"
        )
        assert diff <= 1e-12, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=150)
    args = parser.parse_args()
    accuracy(args.chains)
    timing()


if __name__ == "__main__":
    main()
