"""How often do the simulations' 95% intervals hold the exact value under heavy tails, before and after?

    python validation/measure_heavy_tail_coverage.py                 # every part, as recorded (about 2 min)
    python validation/measure_heavy_tail_coverage.py --part rule --reps 100

Three parts, in this order:

1. ``rule`` chooses the subsampling window of
   :func:`queuesgd.subsampling.subsampling_interval` on i.i.d. laws that are not
   any scheme's rounds: Pareto of index 1.5 and 1.8, lognormal of sigma 2 and
   2.5, 2,000 and 20,000 values, the rate ``1 / E[X]`` (exact) against three
   window rules (``2 sqrt(n)``, ``n^(2/3)``, ``n / 20``) and the Student-t
   interval of 20 batch ratios. Chosen: ``n / 20``, the batch length (the
   narrowest, 90.0-98.0%; it also spans the dependence the batch means assume).
2. ``schemes`` then runs the simulations that take the repaired interval, each
   against an exact value from another method, the same runs read both ways:
   barrier rounds of 8 workers with a 0.5 s phase (``Rounds.rate``, the ratio
   the backup-worker and cutoff schemes report, and ``simulate_barrier``'s
   inverted mean) against ``8 / (E[max of 8] + 0.5)`` by mpmath; the
   task-graph Monte Carlo of a fork-join of 8 tasks against ``E[max of 8]``.
   Lognormal compute of mean 1, sigma 2 and 3, 20,000 iterations a run.

3. ``counting`` (added after parts 1-2 were recorded, the window rule unchanged): the simulations
   that count updates in time, SSP without a bound against its closed form, the asynchronous PS
   against exact MVA and SSP without a bound on a shared link with 1-byte messages against the renewal
   rate ``n / (E[C] + its 1 ns transfers)`` (4 workers, lognormal compute of mean 0.1 s, sigma 2 and 3,
   20,000 iterations; the shared link was added last, after the other two were recorded),
   whose repaired interval is Little's law's (:func:`queuesgd.batchmeans.little_interval`); each run
   read both ways, the Student-t one by telling the scheme's module that no repair is due.

Not blind: the barrier rounds of sigma 2 and 3 were run with four window
lengths (``1, 2, 4, 8 x sqrt(n)``) while the method was being chosen, before
part 1 was written; the task-graph runs were not.

Writes ``validation/tails/coverage.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.batchmeans import BATCHES, _batch_ratios, half_width  # noqa: E402
from queuesgd.harness.provenance import code_version, stamp  # noqa: E402
from queuesgd.subsampling import subsampling_interval  # noqa: E402

LAWS = {
    "pareto 1.5": (lambda r, n: r.pareto(1.5, n) + 1.0, 3.0),
    "pareto 1.8": (lambda r, n: r.pareto(1.8, n) + 1.0, 1.8 / 0.8),
    "lognormal 2": (lambda r, n: r.lognormal(0.0, 2.0, n), math.exp(2.0**2 / 2)),
    "lognormal 2.5": (lambda r, n: r.lognormal(0.0, 2.5, n), math.exp(2.5**2 / 2)),
}
RULES = {
    "2 sqrt(n)": lambda n: math.ceil(2 * math.sqrt(n)),
    "n^(2/3)": lambda n: math.ceil(n ** (2 / 3)),
    "n / 20": lambda n: math.ceil(n / BATCHES),
}


def t_ratio(rewards: np.ndarray, durations: np.ndarray) -> tuple[float, float]:
    """The Student-t interval of 20 batch ratios (the interval before the repair)."""
    point = float(rewards.sum() / durations.sum())
    half = half_width(_batch_ratios(rewards, durations, BATCHES))
    return point - half, point + half


def t_mean(values: np.ndarray) -> tuple[float, float]:
    """The Student-t interval of 20 batch means (the interval before the repair)."""
    m = values.size // BATCHES
    half = half_width(values[: m * BATCHES].reshape(BATCHES, m).mean(axis=1))
    return float(values.mean()) - half, float(values.mean()) + half


def _tally(hits: dict, widths: dict, key: str, interval: tuple[float, float], exact: float, point: float):
    lo, hi = interval
    hits[key] = hits.get(key, 0) + int(lo <= exact <= hi)
    widths.setdefault(key, []).append((hi - lo) / point)


def _summary(hits: dict, widths: dict, runs: int) -> dict:
    return {
        k: {"held": hits[k], "runs": runs, "median_relative_width": float(np.median(widths[k]))} for k in hits
    }


def rule_part(reps: int) -> list[dict]:
    rows = []
    for name, (draw, mean) in LAWS.items():
        for n in (2_000, 20_000):
            rng = np.random.default_rng(7)
            hits: dict = {}
            widths: dict = {}
            for _ in range(reps):
                d = draw(rng, n)
                r = np.ones(n)
                point = float(n / d.sum())
                _tally(hits, widths, "student-t", t_ratio(r, d), 1 / mean, point)
                for rule, size in RULES.items():
                    _tally(hits, widths, rule, subsampling_interval(r, d, block=size(n))[1], 1 / mean, point)
            rows.append({"law": name, "n": n, "exact": 1 / mean} | _summary(hits, widths, reps))
            print(name, n, {k: hits[k] for k in hits}, flush=True)
    return rows


def _expected_max_lognormal(sigma: float, n: int) -> float:
    """``E[max of n]`` of the lognormal of mean 1 by mpmath (30 digits), split at decades."""
    import mpmath as mp

    mp.mp.dps = 30
    mu = -(mp.mpf(sigma) ** 2) / 2
    pts = [0] + [mp.e ** (mu + j * sigma) for j in range(-6, 9)] + [mp.inf]
    return float(mp.quad(lambda x: 1 - mp.ncdf((mp.log(x) - mu) / sigma) ** n if x > 0 else 1, pts))


def scheme_part(seeds: int, dag_seeds: int) -> list[dict]:
    from queuesgd.dag import Task, TaskGraph, simulate
    from queuesgd.distributions import LogNormal
    from queuesgd.schemes.barrier.kofn_sim import simulate_barrier, simulate_rounds

    rows = []
    for sigma in (2.0, 3.0):
        law = LogNormal(-(sigma**2) / 2, sigma)
        emax = _expected_max_lognormal(sigma, 8)
        exact = 8 / (emax + 0.5)
        hits: dict = {}
        widths: dict = {}
        for seed in range(seeds):
            x = law.sample(np.random.default_rng(seed), (20_000, 8))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rounds = simulate_rounds(x, phase=0.5)
                point, new = rounds.rate()
                barrier = simulate_barrier(x, 8, 0.5, stragglers="cancel")
            _tally(
                hits, widths, "rounds: student-t", t_ratio(rounds.gradients, rounds.duration), exact, point
            )
            _tally(hits, widths, "rounds: repaired", new, exact, point)
            lo, hi = t_mean(rounds.duration)
            _tally(
                hits,
                widths,
                "simulate_barrier: student-t",
                (8 / hi, 8 / lo if lo > 0 else math.inf),
                exact,
                point,
            )
            _tally(hits, widths, "simulate_barrier: repaired", barrier.interval, exact, point)
        rows.append({"simulation": "barrier rounds, 8 workers", "sigma": sigma, "exact": exact}
                    | _summary(hits, widths, seeds))  # fmt: skip
        print("barrier", sigma, {k: hits[k] for k in hits}, flush=True)
        graph = TaskGraph([Task(f"w{i}", law) for i in range(8)])
        hits, widths = {}, {}
        for seed in range(dag_seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sim = simulate(graph, 20_000, rng=seed, critical_path=False)
            _tally(hits, widths, "task graph: repaired", sim.interval, emax, sim.mean)
        rows.append({"simulation": "task-graph fork-join of 8", "sigma": sigma, "exact": emax}
                    | _summary(hits, widths, dag_seeds))  # fmt: skip
        print("task graph", sigma, {k: hits[k] for k in hits}, flush=True)
    return rows


def _lognormal(mean: float, sigma: float):
    from queuesgd.distributions import LogNormal

    return LogNormal(math.log(mean) - sigma**2 / 2, sigma)


def counting_part(ssp_seeds: int, async_seeds: int) -> list[dict]:
    """SSP without a bound (closed form: a renewal process per worker) and the asynchronous PS (exact MVA),
    the first audit's setups; each run read both ways: the repaired interval (Little's law), and the
    Student-t one (the scheme's module told that no repair is due, the same seed)."""
    import queuesgd as q
    import queuesgd.schemes.barrier.ps_arrivals as shared_sim
    import queuesgd.schemes.ps.async_ps_sim as async_sim
    import queuesgd.schemes.ssp.ssp as ssp_mod

    w0 = {"gradient_bytes": "1MB", "parameter_bytes": "1MB", "batch_size": 8}
    setups = [
        ("StaleSynchronous(inf), 4 workers", q.StaleSynchronous(math.inf), w0, "20MB/s", "closed_form",
         ssp_mod, ssp_seeds),
        ("AsyncPS, 4 workers", q.AsyncPS(), {"gradient_bytes": "1MB", "batch_size": 8}, "40MB/s", "mva",
         async_sim, async_seeds),
        ("StaleSynchronous(inf, link='shared'), 4 workers, 1-byte messages",
         q.StaleSynchronous(math.inf, link="shared"), {"gradient_bytes": "1B", "parameter_bytes": "1B",
         "batch_size": 8}, "1GB/s", "renewal", shared_sim, async_seeds),
    ]  # fmt: skip
    rows = []
    for name, scheme, fields, bandwidth, exact_method, module, seeds in setups:
        cluster = q.Cluster(workers=4, bandwidth=bandwidth)
        for sigma in (2.0, 3.0):
            w = q.Workload(compute=_lognormal(0.1, sigma), **fields)
            if exact_method == "renewal":  # transfers of 1 ns: each worker a renewal process of C + costs
                costs = shared_sim.barrier_link_costs(w, cluster, 0.0)
                spent = costs["push"] + costs["pull"] + costs["update"] + 2 * costs["latency"]
                exact = 4 / (0.1 + spent)
            else:
                exact = scheme.solve(w, cluster, exact_method).iteration_rate
            hits: dict = {}
            widths: dict = {}
            real = module.check_tail
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    new = scheme.solve(w, cluster, "simulate", rng=seed, iterations=20_000)
                    module.check_tail = lambda values, what, repaired=False: False  # no repair due
                    try:
                        old = scheme.solve(w, cluster, "simulate", rng=seed, iterations=20_000)
                    finally:
                        module.check_tail = real
                point = new.iteration_rate
                _tally(hits, widths, "student-t", tuple(old.interval), exact, point)
                _tally(hits, widths, "repaired", tuple(new.interval), exact, point)
            rows.append({"simulation": name, "sigma": sigma, "exact": exact} | _summary(hits, widths, seeds))
            print(name, sigma, {k: hits[k] for k in hits}, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("rule", "schemes", "counting", "all"), default="all")
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--dag-seeds", type=int, default=200)
    parser.add_argument("--ssp-seeds", type=int, default=500)
    parser.add_argument("--async-seeds", type=int, default=300)
    parser.add_argument("--out", type=Path, default=HERE / "tails" / "coverage.json")
    args = parser.parse_args()
    began = time.time()
    doc: dict = {"measured": stamp(), "commit": code_version(), "confidence": 0.95}
    if args.part in ("rule", "all"):
        doc["rule"] = rule_part(args.reps)
    if args.part in ("schemes", "all"):
        doc["schemes"] = scheme_part(args.seeds, args.dag_seeds)
    if args.part in ("counting", "all"):
        doc["counting"] = counting_part(args.ssp_seeds, args.async_seeds)
    doc["seconds"] = round(time.time() - began, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
