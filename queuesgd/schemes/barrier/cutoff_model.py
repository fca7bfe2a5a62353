"""The cutoff model shared by the three cutoff schemes (:mod:`queuesgd.schemes.barrier.cutoff`).

One iteration: all ``n`` workers compute; the parameter server stops waiting
at the cutoff (a timeout ``T`` after the iteration starts, or the ``c``-th
gradient), aggregates the ``K`` gradients in and runs one PS round
(:func:`round_costs`). This module holds what the three schemes share: the
laws of one iteration (:func:`iteration_laws`), the renewal-reward moments of
a timeout with cancelled stragglers (:func:`static_moments`), the PS round,
and the assembly of a :class:`~queuesgd.schemes.base.SchemeSolution` from
moments (:func:`solution`) or from simulated rounds (:func:`from_rounds`,
rounds of :func:`~queuesgd.schemes.barrier.kofn_sim.simulate_rounds`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Distribution, Shifted
from queuesgd.errors import NotRepresentable
from queuesgd.orderstats import integration_range
from queuesgd.orderstats_numerics import count_tail, integrate_mean, law_tails
from queuesgd.schemes.barrier.kofn_sim import STRAGGLERS, Rounds
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.costs import ps_round
from queuesgd.schemes.laws import sample_compute, worker_laws
from queuesgd.schemes.solution import PARTS, bottleneck
from queuesgd.workload import Cluster, Workload

__all__ = [
    "FINISH_WHY",
    "PARTS",
    "STRAGGLERS",
    "bottleneck",
    "check_timeout",
    "closed_form_ok",
    "cutoff_formula",
    "from_rounds",
    "iteration_laws",
    "phase_of",
    "round_costs",
    "sample_times",
    "solution",
    "static_moments",
    "with_cutoff",
]

#: Why stragglers="finish" has no closed form (said by every road that refuses it).
FINISH_WHY = (
    "stragglers='finish': a late worker's stale computation carries over into the next iteration, so "
    "iterations are not independent and the deterministic timer has no exact CTMC; Monte Carlo with the "
    "actual laws is exact in law"
)



def check_timeout(value: Any) -> float:
    """``StaticCutoff.timeout`` in seconds (``"80ms"`` accepted), ``> 0``.

    Examples
    --------
    >>> check_timeout("80ms")
    0.08
    """
    return _checks.duration("StaticCutoff.timeout", value, allow_zero=False)


# ---- laws and their integrals -----------------------------------------------------------------------
def iteration_laws(workload: Workload, cluster: Cluster, who: str) -> list[Distribution]:
    """One law per worker for one iteration, random stragglers included (closed forms only).

    Raises :class:`~queuesgd.errors.NotRepresentable` for a symbolic law, or
    for ``RandomDelay`` stragglers on workers of different speeds.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, RandomDelay
    >>> c = Cluster(3, 1e9, stragglers=RandomDelay(1, 0.5))
    >>> [law.mean for law in iteration_laws(Workload(0.1, 1e6), c, "StaticCutoff")]
    [0.6, 0.1, 0.1]
    """
    laws = worker_laws(workload, cluster)
    if any(law.is_symbolic for law in laws):
        raise NotRepresentable(f"{who}: a closed form needs a numeric compute law")
    st = cluster.stragglers
    if st is None:
        return laws
    if not cluster.same_speeds:
        raise NotRepresentable(
            f"{who}: the closed form with RandomDelay stragglers needs identical worker speeds (the delayed "
            "workers change every step); use method='simulate'"
        )
    base = laws[0]
    return [Shifted(base, st.delay)] * st.count + [base] * (cluster.workers - st.count)


def closed_form_ok(workload: Workload, cluster: Cluster) -> tuple[bool, str]:
    """Whether :func:`iteration_laws` applies, and why not."""
    try:
        iteration_laws(workload, cluster, "")
    except NotRepresentable as err:
        return False, str(err).lstrip(": ")
    return True, ""


def _cdf_matrix(groups: list[tuple[Distribution, int]], x: np.ndarray) -> np.ndarray:
    """F_g(x) for every group, shape (groups, len(x))."""
    return np.stack([np.clip(np.asarray(law.cdf(x), dtype=float).reshape(-1), 0.0, 1.0) for law, _ in groups])


def static_moments(groups: list[tuple[Distribution, int]], T: float) -> tuple[float, float, float]:
    """``(E[D], E[K], compute)`` of one cancel-mode iteration with timeout ``T``.

    ``D = max(min(X_(n), T), X_(1))``: ``P(D <= x) = P(X_(n) <= x)`` below ``T``
    and ``P(X_(1) <= x)`` above. ``E[K] = sum_i F_i(T) + prod_i S_i(T)``.
    ``compute = (1/n) sum_i E[min(X_i, D)]``, from ``P(X_i > x, D > x)``:
    ``S_i(x)`` below ``T`` (``X_i > x`` implies ``X_(n) > x``) and
    ``prod_j S_j(x)`` above.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> D, K, comp = static_moments([(Exponential(1.0), 2)], 1e9)   # wait for both: H_2
    >>> round(D, 9), round(K, 9), round(comp, 9)
    (1.5, 2.0, 1.0)
    """
    m = np.array([k for _, k in groups], dtype=float)[:, None]
    n = float(m.sum())

    def survivals(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # the survivals of X_(n) and X_(1) as the order statistics have them (count_tail: products,
        # never 1 - F): past T the minimum's falls to 1e-16 and below, which 1 - (1 - S) rounded
        # away (n mu T near 36 raised ConvergenceError, audit 2026-11-28)
        S = np.stack([law_tails(law, x)[1] for law, _ in groups])
        return count_tail(groups, int(n), x), count_tail(groups, 1, x), (m * S).sum(axis=0) / n

    def survival_d(x: np.ndarray) -> np.ndarray:  # D = X_(n) below T, X_(1) above
        smax, smin, _ = survivals(x)
        return np.where(x < T, smax, smin)

    def survival_c(x: np.ndarray) -> np.ndarray:  # a worker's min(X_i, D)
        _, smin, smean = survivals(x)
        return np.where(x < T, smean, smin)

    def cdfs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # the CDFs themselves, for the part below 0 of a normal law (not 1 - S, which would cancel)
        F = np.stack([law_tails(law, x)[0] for law, _ in groups])
        done = [count_tail(groups, k, x, done=True) for k in (int(n), 1)]
        return done[0], done[1], (m * F).sum(axis=0) / n

    def cdf_d(x: np.ndarray) -> np.ndarray:
        fmax, fmin, _ = cdfs(x)
        return np.where(x < T, fmax, fmin)

    def cdf_c(x: np.ndarray) -> np.ndarray:
        _, fmin, fmean = cdfs(x)
        return np.where(x < T, fmean, fmin)

    # D <= X_(n), so the laws' range holds D's mass whatever T is.
    lo, hi, pts = integration_range([law for law, _ in groups])
    pts = [*pts, T]
    ED = float(integrate_mean(survival_d, cdf_d, lo, hi, pts)[0])
    comp = float(integrate_mean(survival_c, cdf_c, lo, hi, pts)[0])
    FT = _cdf_matrix(groups, np.array([T]))[:, 0]
    EK = float((m[:, 0] * FT).sum() + np.prod((1.0 - FT) ** m[:, 0]))
    return ED, EK, comp


def round_costs(
    workload: Workload, cluster: Cluster, K: Any, pulls: Any, bandwidth: Any = None, latency: Any = None
) -> tuple[Any, Any]:
    """``(communication, update)`` seconds of one PS round with ``K`` gradients and ``pulls`` downloads.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> round_costs(Workload(0.1, 1e6, 1e6, update_time=0.01), Cluster(4, 1e8), 2, 4)   # 6 MB at 100 MB/s
    (0.06, 0.02)
    """
    return ps_round(
        K,
        pulls,
        workload.gradient_bytes,
        workload.parameter_bytes,
        cluster.bandwidth if bandwidth is None else bandwidth,
        cluster.latency if latency is None else latency,
        workload.update_time,
        cluster.ps_shards,
    )


def phase_of(
    workload: Workload, cluster: Cluster, stragglers: str
) -> Callable[[np.ndarray], tuple[Any, Any]]:
    """``K -> (communication, update)`` of the PS round: ``n`` pulls with cancel, ``K`` with finish."""
    n = cluster.workers
    if stragglers == "cancel":
        return lambda K: round_costs(workload, cluster, K, n)
    return lambda K: round_costs(workload, cluster, K, K)


def sample_times(workload: Workload, cluster: Cluster, rng: Any, iterations: int) -> np.ndarray:
    """Compute times ``(iterations, n)``; times below zero (a normal law's left tail) are taken as zero."""
    return np.maximum(sample_compute(workload, cluster, rng, iterations), 0.0)


# ---- building a solution ------------------------------------------------------------------------------
def solution(
    D: float,
    K: float,
    compute: float,
    comm: float,
    update: float,
    method: str,
    reason: str,
    details: dict[str, Any],
    interval: tuple[float, float] | None = None,
    model: Any = None,
) -> SchemeSolution:
    """A solution from the iteration's means: computing phase ``D``, gradients ``K``, mean ``compute``."""
    tau = D + comm + update
    waiting = max(D - compute, 0.0)
    breakdown = {"compute": D - waiting, "communication": comm, "update": update, "waiting": waiting}
    return SchemeSolution(
        iteration_rate=1.0 / tau,
        gradients_per_update=K,
        iteration_time=tau,
        breakdown=breakdown,
        method=method,
        reason=reason,
        details=details,
        interval=interval,
        bottleneck=bottleneck(D, compute, comm, update),
        model=model,
    )


def from_rounds(
    rounds: Rounds, n: int, method: str, reason: str, details: dict[str, Any], warmup: int = 0
) -> SchemeSolution:
    """A solution from simulated rounds (1-D), the first ``warmup`` dropped; a batch-means interval."""
    rate, ci = rounds.rate(warmup)
    sl = slice(warmup, None)
    K = float(rounds.gradients[sl].mean())
    tau = float(rounds.duration[sl].mean())
    comm, upd, comp = (float(v[sl].mean()) for v in (rounds.communication, rounds.update, rounds.compute))
    D = tau - comm - upd
    details = {**details, "participation": K / n, "iterations": int(rounds.gradients[sl].size)}
    return solution(D, K, min(comp, D), comm, upd, method, reason, details, ci)


def with_cutoff(sol: SchemeSolution, T: float, curve: dict[float, float], how: str) -> SchemeSolution:
    """``sol`` with the chosen timeout ``T`` and the searched ``curve`` in its details and reason."""
    return SchemeSolution(
        iteration_rate=sol.iteration_rate,
        gradients_per_update=sol.gradients_per_update,
        iteration_time=sol.iteration_time,
        breakdown=sol.breakdown,
        method=sol.method,
        reason=f"T* = {T:.6g} s by {how}; {sol.reason}",
        details={**dict(sol.details), "cutoff": T, "curve": curve},
        interval=sol.interval,
        bottleneck=sol.bottleneck,
    )


def cutoff_formula(expr: Any, sym: dict[str, Any], name: str, assumptions: str) -> Any:
    """A :class:`~queuesgd.formula.Formula` over the symbols of ``sym`` that ``expr`` uses."""
    from queuesgd.formula import Formula

    meaning = {
        "n": "workers",
        "mu": "compute rate (1/s)",
        "t": "compute time (s)",
        "T": "timeout (s)",
        "c": "gradients awaited",
        "m": "batch size (samples per worker step)",
        "G": "gradient bytes",
        "P": "parameter bytes",
        "B": "bandwidth (bytes/s)",
        "alpha": "one-way latency (s)",
        "u": "PS update time per gradient (s)",
        "s": "PS shards",
    }
    return Formula.pruned(expr, sym, meaning, name, assumptions)
