"""OptimalCutoff: the static cutoff (a count or a timeout) that maximizes gradients per second.

See :mod:`queuesgd.schemes.barrier.cutoff` and ``docs/schemes/cutoffs.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import optimize as sopt

from queuesgd import _checks
from queuesgd.batchmeans import check_iterations, warmup_cut
from queuesgd.distributions import Distribution
from queuesgd.errors import NotRepresentable
from queuesgd.orderstats import expected_order_statistics, group_laws
from queuesgd.rng import as_generator
from queuesgd.schemes.barrier.cutoff_model import (
    FINISH_WHY,
    STRAGGLERS,
    bottleneck,
    closed_form_ok,
    cutoff_formula,
    from_rounds,
    iteration_laws,
    phase_of,
    round_costs,
    sample_times,
    solution,
    static_moments,
    with_cutoff,
)
from queuesgd.schemes.barrier.cutoff_static import StaticCutoff
from queuesgd.schemes.barrier.kofn_sim import simulate_rounds
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.costs import ps_round
from queuesgd.units import MAX_SECONDS
from queuesgd.workload import Cluster, Workload

__all__ = ["OptimalCutoff"]


@dataclass(frozen=True)
class OptimalCutoff(Scheme):
    """The static cutoff that maximizes gradients per second (Teng and Wood's static optimum).

    ``by="count"``: wait for the first ``c`` of ``n`` gradients, with
    ``c* = argmax_c c / (E[X_(c:n)] + comm(c) + update(c))`` for
    ``"cancel"`` (every ``c = 1..n`` evaluated at once); for ``"finish"``
    each ``c`` is :class:`~queuesgd.schemes.barrier.backup.BackupWorkers`
    ``(backups=n-c, stragglers="finish")`` and the best is kept.
    ``by="time"``: the timeout ``T`` maximizing :class:`StaticCutoff`'s
    gradients per second (cancel: a grid, then a bounded scalar search on
    the closed form; finish: a grid search on the simulation with common
    random numbers, then an independent run at the best ``T``).

    ``details["cutoff"]`` is the chosen ``c`` (or ``T``), ``details["curve"]``
    maps every ``c`` (or grid ``T``) to gradients per second.

    Parameters
    ----------
    by : {"count", "time"}
    stragglers : {"finish", "cancel"}

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(1.0), gradient_bytes=1.0)
    >>> c = Cluster(10, bandwidth=1e300, latency=0.25)        # a fixed 0.5 s per round
    >>> sol = OptimalCutoff(stragglers="cancel").solve(w, c, "closed_form")
    >>> sol.details["cutoff"], round(sol.details["curve"][6], 6)   # 6 / (H_10 - H_4 + 0.5)
    (6, 4.458862)
    """

    by: str = "count"
    stragglers: str = "finish"

    key: ClassVar[str] = "optimal-cutoff"

    def __post_init__(self) -> None:
        object.__setattr__(self, "by", _checks.choice("OptimalCutoff.by", self.by, ("count", "time")))
        object.__setattr__(
            self, "stragglers", _checks.choice("OptimalCutoff.stragglers", self.stragglers, STRAGGLERS)
        )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.stragglers == "finish":
            if self.by == "count":
                from queuesgd.schemes.barrier.backup import BackupWorkers

                method, why = BackupWorkers(min(1, cluster.workers - 1), stragglers="finish").auto_method(
                    workload, cluster
                )
                return method, f"every cutoff c is BackupWorkers(n - c, stragglers='finish'): {why}"
            return "simulate", FINISH_WHY
        ok, why = closed_form_ok(workload, cluster)
        if ok:
            return (
                "closed_form",
                "cancel: independent iterations, exact renewal-reward closed form, optimized",
            )
        return "simulate", f"no closed form ({why}): Monte Carlo with common random numbers"

    # ---- roads -----------------------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Cancel: the exact renewal-reward closed form, optimized over ``c`` (or ``T``)."""
        if self.stragglers == "finish":
            if self.by == "count":
                return self._count_finish(workload, cluster, "closed_form", rng, iterations)
            raise NotRepresentable(f"OptimalCutoff has no closed form with {FINISH_WHY}")
        if self.by == "count":
            return self._count_cancel_closed(workload, cluster)
        return self._time_cancel_closed(workload, cluster)

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Count with stragglers='finish' only: the best of the backup-worker CTMCs."""
        if self.stragglers == "cancel":
            raise NotRepresentable(
                "OptimalCutoff with stragglers='cancel' has an exact closed form; no CTMC is built"
            )
        if self.by == "time":
            raise NotRepresentable("OptimalCutoff(by='time') has no CTMC (the timer is deterministic)")
        return self._count_finish(workload, cluster, "ctmc", rng, iterations)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo: the best cutoff on common random numbers, then an independent run at it."""
        if self.stragglers == "finish" and self.by == "count":
            return self._count_finish(workload, cluster, "simulate", rng, iterations)
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = check_iterations(self.simulation_iterations if iterations is None else iterations)
        if self.by == "count":
            return self._count_cancel_sim(workload, cluster, gen, iters)
        return self._time_sim(workload, cluster, gen, iters)

    # ---- count, cancel ----------------------------------------------------------------------------------
    @staticmethod
    def _count_curve(means: np.ndarray, workload: Workload, cluster: Cluster, bandwidth=None, latency=None):
        n = means.shape[-1]
        c = np.arange(1, n + 1, dtype=float)
        comm, upd = round_costs(workload, cluster, c, n, bandwidth, latency)
        return c / (means + comm + upd), comm, upd

    def _count_cancel_closed(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        n = cluster.workers
        means = expected_order_statistics(iteration_laws(workload, cluster, "OptimalCutoff"))
        curve, comm, upd = self._count_curve(means, workload, cluster)
        i = int(np.argmax(curve))
        c = i + 1
        # Mean over workers of min(X_i, X_(c)): the c fastest compute to the end, the others are cancelled.
        comp = (np.cumsum(means)[i] + (n - c) * means[i]) / n  # as batch_closed_form
        details = {
            "cutoff": c,
            "curve": {k + 1: float(v) for k, v in enumerate(curve)},
            "participation": c / n,
        }
        reason = "c* = argmax_c c / (E[X_(c:n)] + comm(c)); order statistics by quadrature (exact)"
        return solution(
            float(means[i]),
            float(c),
            float(comp),
            float(comm[i]),
            float(upd[i]),
            "closed_form",
            reason,
            details,
        )

    def _count_cancel_sim(
        self, workload: Workload, cluster: Cluster, gen: np.random.Generator, iters: int
    ) -> SchemeSolution:
        n = cluster.workers
        xs = np.sort(sample_times(workload, cluster, gen, iters), axis=1)
        curve, _, _ = self._count_curve(xs.mean(axis=0), workload, cluster)
        c = int(np.argmax(curve)) + 1
        # An independent run at c*: the curve's maximum is biased upward by the selection.
        x = sample_times(workload, cluster, gen, iters)
        rounds = simulate_rounds(x, c, phase=phase_of(workload, cluster, "cancel"), stragglers="cancel")
        details = {"cutoff": c, "curve": {k + 1: float(v) for k, v in enumerate(curve)}}
        reason = (
            f"Monte Carlo ({iters} iterations): c* from all c on common random numbers, "
            "then an independent run"
        )
        return from_rounds(rounds, n, "simulate", reason, details)

    # ---- count, finish: delegated to BackupWorkers -------------------------------------------------------
    def _count_finish(
        self, workload: Workload, cluster: Cluster, method: str, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        from queuesgd.schemes.barrier.backup import BackupWorkers

        n = cluster.workers
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        seed = int(gen.integers(2**63 - 1))  # the same seed for every c: common random numbers
        sols: dict[int, SchemeSolution] = {}
        for c in range(1, n + 1):
            scheme = BackupWorkers(backups=n - c, stragglers="finish")
            scheme.check(workload, cluster)
            sols[c] = scheme.solve(workload, cluster, method, rng=seed, iterations=iterations)
        curve = {c: float(s.iteration_rate * s.gradients_per_update) for c, s in sols.items()}
        best = max(curve, key=curve.get)  # type: ignore[arg-type]
        s = sols[best]
        details = {**dict(s.details), "cutoff": best, "curve": curve}
        reason = (
            f"best of BackupWorkers(backups=n-c, stragglers='finish') for c = 1..{n} ({method}); " + s.reason
        )
        return SchemeSolution(
            iteration_rate=s.iteration_rate,
            gradients_per_update=s.gradients_per_update,
            iteration_time=s.iteration_time,
            breakdown=s.breakdown,
            method=s.method,
            reason=reason,
            staleness=s.staleness,
            details=details,
            interval=s.interval,
            stations=s.stations,
            bottleneck=s.bottleneck,
            model=s.model,
        )

    # ---- time ------------------------------------------------------------------------------------------
    @staticmethod
    def _grid(groups: list[tuple[Distribution, int]], points: int = 48) -> np.ndarray:
        means = expected_order_statistics([law for law, m in groups for _ in range(m)])
        lo = max(means[0] / 4.0, 1e-12)
        hi = max(3.0 * means[-1], 2.0 * lo)
        return np.geomspace(lo, hi, points)

    def _time_cancel_closed(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        n = cluster.workers
        groups = group_laws(iteration_laws(workload, cluster, "OptimalCutoff"))

        def rate(T: float) -> float:
            D, K, _ = static_moments(groups, T)
            comm, upd = round_costs(workload, cluster, K, n)
            return K / (D + comm + upd)

        grid = self._grid(groups)
        vals = np.array([rate(T) for T in grid])
        i = int(np.argmax(vals))
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        res = sopt.minimize_scalar(
            lambda T: -rate(T), bounds=(a, b), method="bounded", options={"xatol": 1e-9 * b}
        )
        T, best = (float(res.x), -res.fun) if -res.fun >= vals[i] else (float(grid[i]), vals[i])
        curve = dict(zip(grid.tolist(), vals.tolist()))
        # no timer at all: the grid ends at 3 E[X_(n)], and waiting for every worker can still be the
        # better (two workers behind a slow link)
        curve[math.inf] = rate(math.inf)
        if curve[math.inf] >= best:
            T = math.inf
        D, K, comp = static_moments(groups, T)
        comm, upd = round_costs(workload, cluster, K, n)
        details = {"cutoff": T, "curve": curve, "participation": K / n}
        reason = (
            "T* by a grid then a bounded scalar search on the exact renewal-reward closed form (cancel), "
            "compared with no timer (T = inf)"
        )
        return solution(D, K, comp, comm, upd, "closed_form", reason, details)

    @staticmethod
    def _time_search(
        x: np.ndarray, evaluate: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[float, dict[float, float]]:
        """Two grid passes on common random numbers ``x``; ``evaluate(grid) -> gradients/s per T``."""
        s = np.sort(x, axis=1).mean(axis=0)
        grid = np.geomspace(max(s[0] / 4.0, 1e-12), max(3.0 * s[-1], 1e-11), 24)
        grid = np.append(grid, max(MAX_SECONDS, 2.0 * grid[-1]))  # (almost) no timer: waiting for all
        vals = evaluate(grid)
        i = int(np.argmax(vals))
        fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)], 17)
        fvals = evaluate(fine)
        curve = dict(zip(np.concatenate([grid, fine]).tolist(), np.concatenate([vals, fvals]).tolist()))
        return float(fine[int(np.argmax(fvals))]), dict(sorted(curve.items()))

    def _time_sim(
        self, workload: Workload, cluster: Cluster, gen: np.random.Generator, iters: int
    ) -> SchemeSolution:
        mode = self.stragglers
        warm = 0 if mode == "cancel" else warmup_cut(iters)
        phase = phase_of(workload, cluster, mode)
        x = sample_times(workload, cluster, gen, iters)

        def evaluate(grid: np.ndarray) -> np.ndarray:
            r = simulate_rounds(x, timer=grid, phase=phase, stragglers=mode)
            return r.gradients[warm:].sum(axis=0) / r.duration[warm:].sum(axis=0)

        T, curve = self._time_search(x, evaluate)
        sol = StaticCutoff(T, mode).simulate_on(
            sample_times(workload, cluster, gen, iters), workload, cluster
        )
        return with_cutoff(
            sol, T, curve, "grid search on common random numbers, then an independent run at T*"
        )

    # ---- vectorized sweep and formula ----------------------------------------------------------------
    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` for ``by="count"``, cancel, over arrays (order statistics once per n)."""
        if self.stragglers == "finish" or self.by == "time":
            raise NotRepresentable(
                "only OptimalCutoff(by='count', stragglers='cancel') has a vectorized closed form"
            )
        workers = np.asarray(workers, dtype=int)
        bandwidth = np.asarray(bandwidth, dtype=float)
        latency = np.asarray(latency, dtype=float)
        rate, grads, D, comp, comm, upd = (np.empty(workers.shape) for _ in range(6))
        for n in np.unique(workers):
            rows = workers == n
            sub = cluster if n == cluster.workers else cluster.with_workers(int(n))
            means = expected_order_statistics(iteration_laws(workload, sub, "OptimalCutoff"))
            curve, cm, up = self._count_curve(
                means[None, :], workload, sub, bandwidth[rows, None], latency[rows, None]
            )
            i = np.argmax(curve, axis=1)
            cm = np.take_along_axis(np.broadcast_to(cm, curve.shape), i[:, None], axis=1)[:, 0]
            up = np.take_along_axis(np.broadcast_to(up, curve.shape), i[:, None], axis=1)[:, 0]
            grads[rows], D[rows], comm[rows], upd[rows] = i + 1, means[i], cm, up
            comp[rows] = (np.cumsum(means)[i] + (n - i - 1) * means[i]) / n
        return BatchSolution(1.0 / (D + comm + upd), grads, bottleneck(D, comp, comm, upd), "closed_form")

    def formula(self, compute: str = "exponential") -> Any:
        """Throughput (samples/s) as a function of the cutoff; the scheme's value is its maximum.

        ``by="count"``, exponential compute: ``m c / ((H_n - H_{n-c})/mu + comm(c))``,
        to maximize over ``c = 1..n`` (``formula.optimize("c", upper=n, ...)``);
        deterministic compute: ``c* = n`` (every gradient arrives at ``t``),
        so the formula is the synchronous one. ``by="time"``: the
        :class:`StaticCutoff` formula in ``T``.

        Examples
        --------
        >>> f = OptimalCutoff(stragglers="cancel").formula()
        >>> f.optimize("c", upper=10, n=10, mu=1.0, m=1, G=1.0, P=1.0, B=1e300, alpha=0.25, u=0.0, s=1).argmax
        6
        """
        import sympy

        if self.stragglers == "finish":
            raise NotRepresentable(f"OptimalCutoff has no closed form with {FINISH_WHY}")
        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        if self.by == "time" and compute == "exponential":
            return StaticCutoff(1.0, "cancel").formula(compute)
        names = ("n", "c", "mu", "t", "m", "G", "P", "B", "alpha", "u", "s")
        sym = {k: sympy.Symbol(k, positive=True) for k in names}
        n, c = sym["n"], sym["c"]
        if compute == "deterministic":
            c = n  # every gradient arrives at t: waiting for all costs nothing more
        comm, upd = ps_round(c, n, sym["G"], sym["P"], sym["B"], sym["alpha"], sym["u"], sym["s"])
        if compute == "exponential":
            wait = (sympy.harmonic(n) - sympy.harmonic(n - c)) / sym["mu"]
            name, assume = "optimal-cutoff (cancel) throughput at cutoff c; maximize over c = 1..n", ""
        else:
            wait = sym["t"]
            name = "optimal-cutoff (cancel) throughput, deterministic compute: c* = n"
        expr = sym["m"] * c / (wait + comm + upd)
        assume = "independent workers; the PS waits for the first c gradients, late workers cancelled"
        return cutoff_formula(expr, sym, name, assume)
