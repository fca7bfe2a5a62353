"""Cutoff schemes: a synchronous parameter server that stops waiting for stragglers.

Sources: Teng and Wood, *Bayesian Distributed SGD* (NeurIPS 2018) -- the
cutoff that maximizes gradients per second, predicted anew each iteration;
Chen et al., *Revisiting Distributed Synchronous SGD* (2016) -- the static
prior art (wait for the first ``c`` of ``n``). See ``docs/schemes/cutoffs.md``.

Every iteration all ``n`` workers compute a gradient on the current
parameters; the parameter server (PS) stops waiting at the *cutoff*,
aggregates the ``K`` gradients that arrived (one synchronous PS round,
:func:`~queuesgd.schemes.costs.ps_round`) and starts the next iteration.

- :class:`StaticCutoff` -- a fixed timeout ``T`` after the iteration starts
  (or when all ``n`` are done, if earlier; at least one gradient).
- :class:`OptimalCutoff` -- the count ``c`` (or timeout ``T``) that
  maximizes gradients per second.
- :class:`AdaptiveCutoff` -- Teng and Wood's per-iteration choice of ``c``
  from a predictor of the next run-times (simulation only).

``stragglers`` says what a late worker does: ``"cancel"`` -- it aborts and
starts afresh with everyone at the next iteration (iterations are then
independent, and renewal-reward gives exact closed forms); ``"finish"`` --
what real systems do: it finishes its stale computation (the gradient is
dropped) and then restarts on the current parameters, or waits for the
communication phase in progress to end.

Examples
--------
>>> from queuesgd import Workload, Cluster
>>> from queuesgd.distributions import Exponential
>>> w = Workload(Exponential(mean=1.0), gradient_bytes=1e6, batch_size=1)
>>> c = Cluster(4, bandwidth=1e12)
>>> sol = StaticCutoff(1e9, stragglers="cancel").solve(w, c, "closed_form")
>>> round(sol.iteration_time, 6)      # T = oo: wait for all, H_4 = 25/12 (+ 8 us of transfers)
2.083341
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import integrate, stats
from scipy import optimize as sopt

from queuesgd import _checks
from queuesgd.batchmeans import ratio_interval
from queuesgd.distributions import Deterministic, Distribution, Exponential, Shifted
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.orderstats import expected_from_cdf, exponential_order_statistic, group_laws, integration_range
from queuesgd.rng import as_generator
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.costs import ps_round
from queuesgd.schemes.laws import add_phase_type_stage, ctmc_law, sample_compute, worker_laws
from queuesgd.schemes.predictors import EmpiricalPredictor
from queuesgd.units import parse_seconds
from queuesgd.workload import Cluster, Workload

__all__ = ["AdaptiveCutoff", "EmpiricalPredictor", "OptimalCutoff", "StaticCutoff"]

_MODES = ("cancel", "finish")
_ITERATIONS = 20_000  # default simulation length (iterations)
_ADAPTIVE_ITERATIONS = 4_000
_BATCHES = 20  # batch means for confidence intervals
_WARMUP = 0.05  # fraction of a finish-mode run discarded (it starts with every worker free)

_FINISH_WHY = (
    "stragglers='finish': a late worker's stale computation carries over into the next iteration, so "
    "iterations are not independent and the deterministic timer has no exact CTMC; Monte Carlo with the "
    "actual laws is exact in law"
)


# ---- laws and their integrals -----------------------------------------------------------------------
def _iteration_laws(workload: Workload, cluster: Cluster, who: str) -> list[Distribution]:
    """One law per worker for one iteration, random stragglers included (closed forms only)."""
    laws = worker_laws(workload, cluster)
    if any(law.is_symbolic for law in laws):
        raise NotRepresentable(f"{who}: a closed form needs a numeric compute law")
    st = cluster.stragglers
    if st is None:
        return laws
    if cluster.speeds is not None and len(set(cluster.speeds)) > 1:
        raise NotRepresentable(
            f"{who}: the closed form with RandomDelay stragglers needs identical worker speeds (the delayed "
            "workers change every step); use method='simulate'"
        )
    base = laws[0]
    return [Shifted(base, st.delay)] * st.count + [base] * (cluster.workers - st.count)


def _closed_form_ok(workload: Workload, cluster: Cluster) -> tuple[bool, str]:
    try:
        _iteration_laws(workload, cluster, "")
    except NotRepresentable as err:
        return False, str(err).lstrip(": ")
    return True, ""


def _cdf_matrix(groups: list[tuple[Distribution, int]], x: np.ndarray) -> np.ndarray:
    """F_g(x) for every group, shape (groups, len(x))."""
    return np.stack([np.clip(np.asarray(law.cdf(x), dtype=float).reshape(-1), 0.0, 1.0) for law, _ in groups])


def _static_moments(groups: list[tuple[Distribution, int]], T: float) -> tuple[float, float, float]:
    """``(E[D], E[K], compute)`` of one cancel-mode iteration with timeout ``T``.

    ``D = max(min(X_(n), T), X_(1))``: ``P(D <= x) = P(X_(n) <= x)`` below ``T``
    and ``P(X_(1) <= x)`` above. ``E[K] = sum_i F_i(T) + prod_i S_i(T)``.
    ``compute = (1/n) sum_i E[min(X_i, D)]``, from ``P(X_i > x, D > x)``:
    ``S_i(x)`` below ``T`` (``X_i > x`` implies ``X_(n) > x``) and
    ``prod_j S_j(x)`` above.
    """
    m = np.array([k for _, k in groups], dtype=float)[:, None]
    n = float(m.sum())

    def parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        F = _cdf_matrix(groups, x)
        fmax = np.prod(F**m, axis=0)
        smin = np.prod((1.0 - F) ** m, axis=0)
        smean = (m * (1.0 - F)).sum(axis=0) / n
        return fmax, smin, smean

    def cdf_d(x: np.ndarray) -> np.ndarray:
        fmax, smin, _ = parts(x)
        return np.where(x < T, fmax, 1.0 - smin)

    def cdf_c(x: np.ndarray) -> np.ndarray:
        _, smin, smean = parts(x)
        return np.where(x < T, 1.0 - smean, 1.0 - smin)

    # D <= X_(n), so the laws' range holds D's mass whatever T is.
    lo, hi, pts = integration_range([law for law, _ in groups])
    pts = [*pts, T]
    ED = expected_from_cdf(cdf_d, lo, hi, pts)
    comp = expected_from_cdf(cdf_c, lo, hi, pts)
    FT = _cdf_matrix(groups, np.array([T]))[:, 0]
    EK = float((m[:, 0] * FT).sum() + np.prod((1.0 - FT) ** m[:, 0]))
    return ED, EK, comp


def _order_stat_means(groups: list[tuple[Distribution, int]]) -> np.ndarray:
    """``E[X_(c:n)]`` for every ``c = 1..n`` at once (vector-valued adaptive quadrature)."""
    n = sum(k for _, k in groups)
    c = np.arange(1, n + 1)
    if len(groups) == 1:
        law = groups[0][0]
        if isinstance(law, Exponential):
            return np.asarray(exponential_order_statistic(float(law.rate), n, c), dtype=float)
        if isinstance(law, Deterministic):
            return np.full(n, float(law.value))
    ms = [k for _, k in groups]

    def survival(x: float) -> np.ndarray:
        # P(X_(c) > x) = P(fewer than c are done by x): the count is a sum of binomials.
        F = _cdf_matrix(groups, np.array([x]))[:, 0]
        pmf = np.ones(1)
        for p, k in zip(F, ms):
            pmf = np.convolve(pmf, stats.binom.pmf(np.arange(k + 1), k, p))
        return np.cumsum(pmf)[:n]

    lo, hi, pts = integration_range([law for law, _ in groups])
    pts = sorted({p for p in pts if lo < p < hi})
    scale = max(abs(lo), abs(hi), 1e-300)
    val, _ = integrate.quad_vec(survival, lo, hi, epsabs=1e-13 * scale, epsrel=1e-11, points=pts or None)
    return lo + np.asarray(val, dtype=float)


def _round(
    workload: Workload, cluster: Cluster, K: Any, pulls: Any, bandwidth: Any = None, latency: Any = None
):
    """``(communication, update)`` seconds of one PS round with ``K`` gradients and ``pulls`` downloads."""
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


# ---- Monte Carlo ------------------------------------------------------------------------------------------
def _sample(workload: Workload, cluster: Cluster, rng: Any, iterations: int) -> np.ndarray:
    # Compute times below zero (a normal law's far left tail) are taken as zero.
    return np.maximum(sample_compute(workload, cluster, rng, iterations), 0.0)


def _simulate_cancel(x: np.ndarray, timer: Any) -> dict[str, np.ndarray]:
    """Per-iteration ``K``, ``D``, ``compute`` of cancel-mode iterations (independent; vectorized)."""
    T = np.broadcast_to(np.asarray(timer, dtype=float), x.shape[:1])
    xmax, xmin = x.max(axis=1), x.min(axis=1)
    D = np.maximum(np.minimum(xmax, T), xmin)
    K = np.maximum((x <= T[:, None]).sum(axis=1), 1).astype(float)
    comp = np.minimum(x, D[:, None]).mean(axis=1)
    return {"K": K, "D": D, "compute": comp}


def _simulate_finish(
    x: np.ndarray,
    timers: np.ndarray,
    round_cost: Any,
    phase_scale: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Finish-mode iterations for ``G`` timeouts at once (common random numbers), loop over iterations.

    ``timers``: shape (G,) or (iterations, G). ``round_cost(K) -> (comm, update)``
    for arrays ``K``. ``phase_scale`` (iterations,): a factor multiplying each
    iteration's communication phase (a random phase length, for cross-checks).
    Returns arrays of shape (iterations, G): ``K``, ``D``, ``compute``,
    ``comm``, ``update``, ``tau`` (the iteration's length).
    """
    iters, n = x.shape
    timers = np.asarray(timers, dtype=float)
    G = timers.shape[-1]
    if timers.ndim == 1:
        timers = np.broadcast_to(timers, (iters, G))
    out = {k: np.empty((iters, G)) for k in ("K", "D", "compute", "comm", "update", "tau")}
    s = np.zeros(G)
    b = np.full((G, n), -np.inf)  # when each worker's stale computation ends
    for j in range(iters):
        a = np.maximum(s[:, None], b)
        e = a + x[j]
        C = np.maximum(np.minimum(e.max(axis=1), s + timers[j]), e.min(axis=1))
        Cc = C[:, None]
        arrived = e <= Cc
        K = arrived.sum(axis=1).astype(float)
        busy = np.clip(np.minimum(b, Cc) - s[:, None], 0.0, None) + np.clip(np.minimum(e, Cc) - a, 0.0, None)
        comm, upd = round_cost(K)
        phase = comm + upd
        if phase_scale is not None:
            phase = phase * phase_scale[j]
        out["K"][j], out["D"][j], out["compute"][j] = K, C - s, busy.mean(axis=1)
        out["comm"][j], out["update"][j], out["tau"][j] = comm, upd, C - s + phase
        b = np.where(arrived, -np.inf, np.where(a < Cc, e, b))
        s = C + phase
    return out


def _ratio_ci(K: np.ndarray, tau: np.ndarray, warmup: int = 0) -> tuple[float, tuple[float, float]]:
    """Gradients per second ``sum K / sum tau`` and its 95% batch-means confidence interval."""
    return ratio_interval(K[warmup:], tau[warmup:], _BATCHES)


# ---- building a solution ------------------------------------------------------------------------------
def _solution(
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
    tau = D + comm + update
    breakdown = {
        "compute": compute,
        "communication": comm,
        "update": update,
        "waiting": max(D - compute, 0.0),
    }
    breakdown["compute"] = D - breakdown["waiting"]
    return SchemeSolution(
        iteration_rate=1.0 / tau,
        gradients_per_update=K,
        iteration_time=tau,
        breakdown=breakdown,
        method=method,
        reason=reason,
        details=details,
        interval=interval,
        bottleneck=max(breakdown, key=breakdown.get),  # type: ignore[arg-type]
        model=model,
    )


def _from_runs(
    run: dict[str, np.ndarray], method: str, reason: str, details: dict[str, Any], warmup: int = 0
) -> SchemeSolution:
    """A solution from per-iteration arrays ``K, D, compute, comm, update, tau`` (1-D)."""
    rate, ci = _ratio_ci(run["K"], run["tau"], warmup)
    sl = slice(warmup, None)
    iters = run["K"][sl].size
    tau = float(run["tau"][sl].mean())
    K = float(run["K"][sl].mean())
    comm, upd, comp = (float(run[k][sl].mean()) for k in ("comm", "update", "compute"))
    D = tau - comm - upd
    details = {**details, "participation": K / run.get("n", 1.0), "iterations": iters}
    return _solution(D, K, min(comp, D), comm, upd, method, reason, details, ci)


def _cancel_run(x: np.ndarray, timer: Any, workload: Workload, cluster: Cluster) -> dict[str, np.ndarray]:
    run = _simulate_cancel(x, timer)
    run["comm"], run["update"] = (
        np.broadcast_to(v, run["K"].shape) for v in _round(workload, cluster, run["K"], cluster.workers)
    )
    run["tau"] = run["D"] + run["comm"] + run["update"]
    return run


# ---- the Petri net with a phase-type timer ---------------------------------------------------------
def _cutoff_net(
    workload: Workload, cluster: Cluster, timeout: float, mode: str
) -> tuple[Any, dict[str, Any]]:
    """GSPN of the timeout cutoff; the timer and the communication phase are Erlang fits."""
    from queuesgd.petri import PetriNet

    if cluster.stragglers is not None:
        raise NotRepresentable("the cutoff's Petri net has no RandomDelay stragglers; use method='simulate'")
    if cluster.speeds is not None and len(set(cluster.speeds)) > 1:
        raise NotRepresentable(
            "the cutoff's Petri net lumps identical workers; heterogeneous speeds need simulate"
        )
    n = cluster.workers
    law = worker_laws(workload, cluster)[0]
    ph, note = ctmc_law(law)
    tph, tnote = ctmc_law(Deterministic(timeout))
    net = PetriNet(f"{mode}-cutoff")
    for p, tokens in (
        ("ctl.compute", 1), ("ctl.cut", 0), ("ctl.comm", 0), ("ready", n), ("arrived", 0), ("waiting", 0),
        ("expired", 0), ("timer.src", 1), ("stale.src", 0), ("stale.done", 0),
    ):  # fmt: skip
        net.place(p, tokens)
    fresh = add_phase_type_stage(net, "fresh", ph, "ready", "arrived", priority=7)
    stale = (
        add_phase_type_stage(net, "stale", ph, "stale.src", "stale.done", priority=7)
        if mode == "finish"
        else []
    )
    timer = add_phase_type_stage(net, "timer", tph, "timer.src", "expired", priority=6)
    net.immediate("release", {"ctl.compute": 1, "waiting": 1}, {"ctl.compute": 1, "ready": 1}, priority=9)
    if mode == "finish":
        net.immediate(
            "stale.restart", {"stale.done": 1, "ctl.compute": 1}, {"ctl.compute": 1, "ready": 1}, priority=8
        )
        net.immediate(
            "stale.park", {"stale.done": 1, "ctl.comm": 1}, {"ctl.comm": 1, "waiting": 1}, priority=8
        )
    net.immediate("end.all", {"ctl.compute": 1, "arrived": n}, {"ctl.cut": 1, "arrived": n}, priority=5)
    net.immediate(
        "end.timer", {"ctl.compute": 1, "expired": 1, "arrived": 1}, {"ctl.cut": 1, "arrived": 1}, priority=4
    )
    # The cut: late workers' phases move to their stale copies (finish) or back to waiting (cancel);
    # the timer is cleared. Order does not matter, hence equal weights.
    for i, p in enumerate(fresh):
        target = {stale[i]: 1} if mode == "finish" else {"waiting": 1}
        net.immediate(
            f"cut.move[{i}]", {"ctl.cut": 1, p: 1}, {"ctl.cut": 1, **target}, weight=1.0, priority=3
        )
    for p in [*timer, "expired"]:
        net.immediate(f"cut.clear[{p}]", {"ctl.cut": 1, p: 1}, {"ctl.cut": 1}, weight=1.0, priority=3)
    # The communication phase (push K gradients, update, pull): an Erlang fit of its deterministic
    # length comm(K) + update(K), K = the gradients that arrived (read arcs on "arrived").
    pulls = (lambda K: n) if mode == "cancel" else (lambda K: K)
    costs = {K: _round(workload, cluster, K, pulls(K)) for K in range(1, n + 1)}
    cph, cnote = ctmc_law(Deterministic(sum(costs[1])))
    m = cph.phases
    phases = [f"comm[{j}]" for j in range(m)]
    for p in phases:
        net.place(p)
    net.immediate(
        "cut.done", {"ctl.cut": 1}, {"ctl.comm": 1, phases[0]: 1},
        inhibitors={p: 1 for p in [*fresh, *timer, "expired"]}, priority=2,
    )  # fmt: skip
    ends = {}
    for K in range(1, n + 1):
        rate = m / float(sum(costs[K]))
        inhib = {"arrived": K + 1} if K < n else None
        for j in range(m - 1):
            net.timed(
                f"comm[{K}].step[{j}]", rate, {phases[j]: 1, "arrived": K}, {phases[j + 1]: 1, "arrived": K},
                inhibitors=inhib,
            )  # fmt: skip
        ends[K] = f"comm[{K}].end"
        net.timed(
            ends[K], rate, {phases[-1]: 1, "arrived": K, "ctl.comm": 1},
            {"ctl.compute": 1, "ready": K, "timer.src": 1}, inhibitors=inhib,
        )  # fmt: skip
    notes = [t for t in (note, tnote.replace(repr(Deterministic(timeout)), "the deterministic timeout")) if t]
    notes.append(f"the deterministic communication phase by an Erlang-{m}")
    info = {
        "ends": ends,
        "costs": costs,
        "busy": [*fresh, *stale],
        "n": n,
        "notes": notes,
        "compute_note": note,
    }
    return net, info


def _solve_net(net: Any, info: dict[str, Any], timeout: float) -> SchemeSolution:
    sol = net.solve()
    thr = {K: float(sol.throughput(t)) for K, t in info["ends"].items()}
    X = sum(thr.values())
    EK = sum(K * v for K, v in thr.items()) / X
    comm = sum(v * info["costs"][K][0] for K, v in thr.items()) / X
    upd = sum(v * info["costs"][K][1] for K, v in thr.items()) / X
    space = sol.space
    names = list(space.place_names)
    M = space.markings
    busy = M[:, [names.index(p) for p in info["busy"]]].sum(axis=1) * (M[:, names.index("ctl.compute")] > 0)
    compute = float((sol.probabilities * busy).sum()) / X / info["n"]
    D = 1.0 / X - comm - upd
    reason = "CTMC of the Petri net; " + "; ".join(info["notes"])
    details = {
        "cutoff": timeout,
        "participation": EK / info["n"],
        "states": len(space),
        "phase_type": info["compute_note"] or "exact",
    }
    return _solution(D, EK, min(compute, D), comm, upd, "ctmc", reason, details, model=net)


# ---- the schemes -------------------------------------------------------------------------------------------
def _timeout(value: Any) -> float:
    return _checks.positive("StaticCutoff.timeout", parse_seconds(value, "StaticCutoff.timeout"))


def _unknown_method(scheme: Scheme, method: str) -> NotRepresentable:
    return NotRepresentable(
        f"{type(scheme).__name__} cannot be solved with method {method!r}; "
        f"methods: {', '.join(scheme.methods)}"
    )


@dataclass(frozen=True)
class StaticCutoff(Scheme):
    """Synchronous PS that stops waiting ``timeout`` seconds after each iteration starts.

    The computing phase ends at ``T`` after the iteration's start, or when
    all ``n`` gradients are in if earlier; if none is in by ``T`` the PS
    waits for the first one. With run-times ``X_i``:
    ``D = max(min(X_(n), T), X_(1))`` and ``K = max(1, #{X_i <= T})``.

    Parameters
    ----------
    timeout : float or str
        ``T`` in seconds (``"80ms"`` accepted), ``> 0``.
    stragglers : {"finish", "cancel"}
        ``"finish"`` (what real systems do): a late worker finishes its stale
        computation, which is dropped, then restarts on the current
        parameters. ``"cancel"``: late workers abort; iterations are
        independent and renewal-reward gives the exact throughput
        ``E[K] / (E[D] + E[comm(K)] + E[update(K)])`` for any law.

    Methods: ``closed_form`` (cancel; quadrature of the laws' CDFs), ``ctmc``
    (the Petri net with the timer and the communication phase replaced by
    Erlang fits -- an approximation, the reason says so) and ``simulate``
    (NumPy Monte Carlo, exact in law; the default for ``"finish"``).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(1.0), gradient_bytes=1e6)
    >>> s = StaticCutoff("1.5s", stragglers="cancel")
    >>> sol = s.solve(w, Cluster(4, bandwidth=1e12), "closed_form")
    >>> round(sol.gradients_per_update, 6)     # E[K] = 4 (1 - e^-1.5) + e^-6
    3.109958
    >>> s.auto_method(w, Cluster(4, 1e12))[0], StaticCutoff(1.5).auto_method(w, Cluster(4, 1e12))[0]
    ('closed_form', 'simulate')
    """

    timeout: float
    stragglers: str = "finish"

    key: ClassVar[str] = "static-cutoff"

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", _timeout(self.timeout))
        object.__setattr__(
            self, "stragglers", _checks.choice("StaticCutoff.stragglers", self.stragglers, _MODES)
        )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.stragglers == "finish":
            return "simulate", _FINISH_WHY
        ok, why = _closed_form_ok(workload, cluster)
        if ok:
            return "closed_form", "cancel: independent iterations, exact renewal-reward closed form"
        return "simulate", f"no closed form ({why}): Monte Carlo"

    def _legacy_solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: Any = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        T = self.timeout
        n = cluster.workers
        if method == "closed_form":
            if self.stragglers == "finish":
                raise NotRepresentable(f"StaticCutoff has no closed form with {_FINISH_WHY}")
            groups = group_laws(_iteration_laws(workload, cluster, "StaticCutoff"))
            D, K, comp = _static_moments(groups, T)
            comm, upd = _round(workload, cluster, K, n)
            details = {"cutoff": T, "participation": K / n}
            reason = "renewal-reward: E[K] / (E[D] + E[comm(K)]), exact for any law (cancel)"
            return _solution(D, K, comp, comm, upd, "closed_form", reason, details)
        if method == "ctmc":
            net, info = _cutoff_net(workload, cluster, T, self.stragglers)
            return _solve_net(net, info, T)
        if method == "simulate":
            iters = _checks.integer("iterations", iterations or _ITERATIONS, minimum=2 * _BATCHES)
            x = _sample(workload, cluster, rng, iters)
            return self._simulate(x, workload, cluster)
        raise _unknown_method(self, method)

    def _simulate(self, x: np.ndarray, workload: Workload, cluster: Cluster) -> SchemeSolution:
        n = cluster.workers
        details: dict[str, Any] = {"cutoff": self.timeout}
        if self.stragglers == "cancel":
            run = _cancel_run(x, self.timeout, workload, cluster)
            warmup = 0
        else:
            res = _simulate_finish(x, np.array([self.timeout]), lambda K: _round(workload, cluster, K, K))
            run = {k: v[:, 0] for k, v in res.items()}
            warmup = int(_WARMUP * x.shape[0])
        run["n"] = n  # type: ignore[assignment]
        reason = f"Monte Carlo of {x.shape[0]} iterations ({self.stragglers}), 95% batch-means interval"
        return _from_runs(run, "simulate", reason, details, warmup)

    def petri_net(self, workload: Workload, cluster: Cluster) -> Any:
        """The GSPN of the scheme: timer and communication phase as Erlang fits, workers lumped.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> net = StaticCutoff(0.5).petri_net(Workload(0.4, 1e6), Cluster(2, 1e9))
        >>> "stale.restart" in net.transition_names
        True
        """
        return _cutoff_net(workload, cluster, self.timeout, self.stragglers)[0]

    def _legacy_batch(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> dict[str, Any]:
        if self.stragglers == "finish":
            raise NotRepresentable(f"StaticCutoff has no closed form with {_FINISH_WHY}")
        workers = np.asarray(workers, dtype=int)
        D = np.empty(workers.shape)
        K = np.empty(workers.shape)
        for n in np.unique(workers):
            sub = cluster if n == cluster.workers else cluster.with_workers(int(n))
            d, k, _ = _static_moments(
                group_laws(_iteration_laws(workload, sub, "StaticCutoff")), self.timeout
            )
            D[workers == n], K[workers == n] = d, k
        comm, upd = _round(workload, cluster, K, workers, bandwidth, latency)
        return {"iteration_rate": 1.0 / (D + comm + upd), "gradients_per_update": K, "method": "closed_form"}

    def formula(self, compute: str = "exponential", *, workers: int | None = None) -> Any:
        """Throughput (samples/s) with cancelled stragglers, as a SymPy formula.

        Exponential compute (rate ``mu``), ``Y = 1 - exp(-mu T)``:
        ``E[K] = n Y + exp(-n mu T)`` and
        ``E[D] = (1/mu) sum_{j=1}^n Y^j / j + exp(-n mu T) / (n mu)`` (the
        integral of ``1 - (1 - e^{-mu x})^n`` from 0 to ``T``, substituting
        ``y = 1 - e^{-mu x}``, plus the wait for the first gradient). With
        ``workers=None`` the sum is a SymPy ``Sum`` over a symbolic ``n``
        (substitute ``n`` before :meth:`~queuesgd.formula.Formula.evaluate`);
        ``workers=10`` gives the expanded expression for 10 workers.
        Deterministic compute (time ``t``): all ``n`` if ``t <= T``, else the
        first one.

        Examples
        --------
        >>> f = StaticCutoff(1.0, stragglers="cancel").formula(workers=2)
        >>> v = f.evaluate(mu=1.0, T=1e9, m=1, G=1.0, P=1.0, B=1e300, alpha=0.0, u=0.0, s=1)
        >>> round(float(v), 12)                       # 2 / H_2
        1.333333333333
        """
        import sympy

        if self.stragglers == "finish":
            raise NotRepresentable(f"StaticCutoff has no closed form with {_FINISH_WHY}")
        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        names = ("n", "mu", "t", "T", "m", "G", "P", "B", "alpha", "u", "s")
        sym = {k: sympy.Symbol(k, positive=True) for k in names}
        n = sym["n"] if workers is None else _checks.integer("workers", workers)
        mu, t, T, m = sym["mu"], sym["t"], sym["T"], sym["m"]

        def rnd(K: Any) -> Any:
            c, u = ps_round(K, n, sym["G"], sym["P"], sym["B"], sym["alpha"], sym["u"], sym["s"])
            return c + u

        if compute == "exponential":
            j = sympy.Symbol("j", integer=True, positive=True)
            Y = 1 - sympy.exp(-mu * T)
            EK = n * Y + sympy.exp(-n * mu * T)
            total = sympy.Sum(Y**j / j, (j, 1, n))
            if workers is not None:
                total = total.doit()
            ED = total / mu + sympy.exp(-n * mu * T) / (n * mu)
            expr = m * EK / (ED + rnd(EK))
            del sym["t"]
            what = "exponential compute of rate mu"
        else:
            expr = sympy.Piecewise((m * n / (t + rnd(n)), t <= T), (m / (t + rnd(1)), True))
            del sym["mu"]
            what = "deterministic compute time t"
        if workers is not None:
            del sym["n"]
        return _formula(
            expr,
            sym,
            f"static-cutoff (cancel) throughput, {what}",
            "independent workers; late workers cancelled; the PS waits until T, all n, or the first gradient",
        )

    def solve_closed_form(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "closed_form", rng=rng, iterations=iterations)

    def solve_ctmc(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "ctmc", rng=rng, iterations=iterations)

    def solve_simulate(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "simulate", rng=rng, iterations=iterations)

    def batch_closed_form(self, workload: Workload, cluster: Cluster, workers: Any, bandwidth: Any, latency: Any) -> Any:
        from queuesgd.schemes.base import BatchSolution

        d = self._legacy_batch(workload, cluster, workers, bandwidth, latency)
        if d["method"] != "closed_form":
            raise NotRepresentable("legacy batch")
        return BatchSolution(d["iteration_rate"], d["gradients_per_update"], d.get("bottleneck", ""), d["method"])



def _formula(expr: Any, sym: dict[str, Any], name: str, assumptions: str) -> Any:
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
    free = {s.name for s in expr.free_symbols}
    sym = {k: v for k, v in sym.items() if k in free}
    return Formula(expr, sym, {k: meaning[k] for k in sym}, name, assumptions)


@dataclass(frozen=True)
class OptimalCutoff(Scheme):
    """The static cutoff that maximizes gradients per second (Teng and Wood's static optimum).

    ``by="count"``: wait for the first ``c`` of ``n`` gradients, with
    ``c* = argmax_c c / (E[X_(c:n)] + comm(c) + update(c))`` for
    ``"cancel"`` (every ``c = 1..n`` evaluated at once); for ``"finish"``
    each ``c`` is :class:`~queuesgd.schemes.backup.BackupWorkers`
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
            self, "stragglers", _checks.choice("OptimalCutoff.stragglers", self.stragglers, _MODES)
        )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.stragglers == "finish":
            if self.by == "count":
                from queuesgd.schemes.backup import BackupWorkers

                method, why = BackupWorkers(min(1, cluster.workers - 1), stragglers="finish").auto_method(
                    workload, cluster
                )
                return method, f"every cutoff c is BackupWorkers(n - c, stragglers='finish'): {why}"
            return "simulate", _FINISH_WHY
        ok, why = _closed_form_ok(workload, cluster)
        if ok:
            return (
                "closed_form",
                "cancel: independent iterations, exact renewal-reward closed form, optimized",
            )
        return "simulate", f"no closed form ({why}): Monte Carlo with common random numbers"

    def _legacy_solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: Any = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        if method not in self.methods:
            raise _unknown_method(self, method)
        if self.stragglers == "finish":
            if self.by == "count":
                return self._count_finish(workload, cluster, method, rng, iterations)
            if method == "closed_form":
                raise NotRepresentable(f"OptimalCutoff has no closed form with {_FINISH_WHY}")
            if method == "ctmc":
                raise NotRepresentable("OptimalCutoff(by='time') has no CTMC (the timer is deterministic)")
            return self._time_finish(workload, cluster, rng, iterations)
        if method == "ctmc":
            raise NotRepresentable(
                "OptimalCutoff with stragglers='cancel' has an exact closed form; no CTMC is built"
            )
        if self.by == "count":
            if method == "closed_form":
                return self._count_cancel_closed(workload, cluster)
            return self._count_cancel_sim(workload, cluster, rng, iterations)
        if method == "closed_form":
            return self._time_cancel_closed(workload, cluster)
        return self._time_cancel_sim(workload, cluster, rng, iterations)

    # ---- count, cancel ----------------------------------------------------------------------------------
    @staticmethod
    def _count_curve(means: np.ndarray, workload: Workload, cluster: Cluster, bandwidth=None, latency=None):
        n = means.shape[-1]
        c = np.arange(1, n + 1, dtype=float)
        comm, upd = _round(workload, cluster, c, n, bandwidth, latency)
        return c / (means + comm + upd), comm, upd

    def _count_cancel_closed(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        n = cluster.workers
        means = _order_stat_means(group_laws(_iteration_laws(workload, cluster, "OptimalCutoff")))
        curve, comm, upd = self._count_curve(means, workload, cluster)
        i = int(np.argmax(curve))
        c = i + 1
        # Mean over workers of min(X_i, X_(c)): the c fastest compute to the end, the others are cancelled.
        comp = (means[:c].sum() + (n - c) * means[i]) / n
        details = {
            "cutoff": c,
            "curve": {k + 1: float(v) for k, v in enumerate(curve)},
            "participation": c / n,
        }
        reason = "c* = argmax_c c / (E[X_(c:n)] + comm(c)); order statistics by quadrature (exact)"
        return _solution(
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
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        n = cluster.workers
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = _checks.integer("iterations", iterations or _ITERATIONS, minimum=2 * _BATCHES)
        xs = np.sort(_sample(workload, cluster, gen, iters), axis=1)
        curve, _, _ = self._count_curve(xs.mean(axis=0), workload, cluster)
        c = int(np.argmax(curve)) + 1
        # An independent run at c*: the curve's maximum is biased upward by the selection.
        x = np.sort(_sample(workload, cluster, gen, iters), axis=1)
        D = x[:, c - 1]
        comm, upd = _round(workload, cluster, float(c), n)
        run = {
            "K": np.full(iters, float(c)),
            "D": D,
            "compute": (x[:, :c].sum(axis=1) + (n - c) * D) / n,
            "comm": np.full(iters, comm),
            "update": np.full(iters, upd),
            "tau": D + comm + upd,
            "n": n,
        }
        details = {"cutoff": c, "curve": {k + 1: float(v) for k, v in enumerate(curve)}}
        reason = (
            f"Monte Carlo ({iters} iterations): c* from all c on common random numbers, "
            "then an independent run"
        )
        return _from_runs(run, "simulate", reason, details)  # type: ignore[arg-type]

    # ---- count, finish: delegated to BackupWorkers -------------------------------------------------------
    def _count_finish(
        self, workload: Workload, cluster: Cluster, method: str, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        from queuesgd.schemes.backup import BackupWorkers

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
        means = _order_stat_means(groups)
        lo = max(means[0] / 4.0, 1e-12)
        hi = max(3.0 * means[-1], 2.0 * lo)
        return np.geomspace(lo, hi, points)

    def _time_cancel_closed(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        n = cluster.workers
        groups = group_laws(_iteration_laws(workload, cluster, "OptimalCutoff"))

        def rate(T: float) -> float:
            D, K, _ = _static_moments(groups, T)
            comm, upd = _round(workload, cluster, K, n)
            return K / (D + comm + upd)

        grid = self._grid(groups)
        vals = np.array([rate(T) for T in grid])
        i = int(np.argmax(vals))
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        res = sopt.minimize_scalar(
            lambda T: -rate(T), bounds=(a, b), method="bounded", options={"xatol": 1e-9 * b}
        )
        T = float(res.x) if -res.fun >= vals[i] else float(grid[i])
        D, K, comp = _static_moments(groups, T)
        comm, upd = _round(workload, cluster, K, n)
        details = {"cutoff": T, "curve": dict(zip(grid.tolist(), vals.tolist())), "participation": K / n}
        reason = "T* by a grid then a bounded scalar search on the exact renewal-reward closed form (cancel)"
        return _solution(D, K, comp, comm, upd, "closed_form", reason, details)

    def _time_search(
        self, workload: Workload, cluster: Cluster, gen: np.random.Generator, iters: int, evaluate
    ):
        """Two grid passes on common random numbers; ``evaluate(x, grid) -> gradients/s per T``."""
        x = _sample(workload, cluster, gen, iters)
        s = np.sort(x, axis=1).mean(axis=0)
        grid = np.geomspace(max(s[0] / 4.0, 1e-12), max(3.0 * s[-1], 1e-11), 24)
        vals = evaluate(x, grid)
        i = int(np.argmax(vals))
        fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)], 17)
        fvals = evaluate(x, fine)
        curve = dict(zip(np.concatenate([grid, fine]).tolist(), np.concatenate([vals, fvals]).tolist()))
        return float(fine[int(np.argmax(fvals))]), dict(sorted(curve.items()))

    def _time_cancel_sim(
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = _checks.integer("iterations", iterations or _ITERATIONS, minimum=2 * _BATCHES)

        def evaluate(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
            out = []
            for T in grid:
                r = _cancel_run(x, T, workload, cluster)
                out.append(r["K"].sum() / r["tau"].sum())
            return np.array(out)

        T, curve = self._time_search(workload, cluster, gen, iters, evaluate)
        sol = StaticCutoff(T, "cancel")._simulate(_sample(workload, cluster, gen, iters), workload, cluster)
        return _with(sol, T, curve, "grid search on common random numbers, then an independent run at T*")

    def _time_finish(
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = _checks.integer("iterations", iterations or _ITERATIONS, minimum=2 * _BATCHES)
        warm = int(_WARMUP * iters)

        def evaluate(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
            r = _simulate_finish(x, grid, lambda K: _round(workload, cluster, K, K))
            return r["K"][warm:].sum(axis=0) / r["tau"][warm:].sum(axis=0)

        T, curve = self._time_search(workload, cluster, gen, iters, evaluate)
        sol = StaticCutoff(T, "finish")._simulate(_sample(workload, cluster, gen, iters), workload, cluster)
        return _with(sol, T, curve, "grid search on common random numbers, then an independent run at T*")

    # ---- vectorized sweep and formula ----------------------------------------------------------------
    def _legacy_batch(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> dict[str, Any]:
        if self.stragglers == "finish" or self.by == "time":
            raise NotRepresentable(
                "only OptimalCutoff(by='count', stragglers='cancel') has a vectorized closed form"
            )
        workers = np.asarray(workers, dtype=int)
        bandwidth = np.asarray(bandwidth, dtype=float)
        latency = np.asarray(latency, dtype=float)
        rate = np.empty(workers.shape)
        grads = np.empty(workers.shape)
        for n in np.unique(workers):
            rows = workers == n
            sub = cluster if n == cluster.workers else cluster.with_workers(int(n))
            means = _order_stat_means(group_laws(_iteration_laws(workload, sub, "OptimalCutoff")))
            curve, comm, upd = self._count_curve(
                means[None, :], workload, sub, bandwidth[rows, None], latency[rows, None]
            )
            i = np.argmax(curve, axis=1)
            grads[rows] = i + 1
            rate[rows] = 1.0 / (means[i] + np.take_along_axis(comm + upd, i[:, None], axis=1)[:, 0])
        return {"iteration_rate": rate, "gradients_per_update": grads, "method": "closed_form"}

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
        >>> f.optimize("c", upper=10, n=10, mu=1.0, m=1, G=1.0, P=1.0, B=1e300, alpha=0.25, u=0.0, s=1)
        6
        """
        import sympy

        if self.stragglers == "finish":
            raise NotRepresentable(f"OptimalCutoff has no closed form with {_FINISH_WHY}")
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
        return _formula(expr, sym, name, assume)

    def solve_closed_form(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "closed_form", rng=rng, iterations=iterations)

    def solve_ctmc(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "ctmc", rng=rng, iterations=iterations)

    def solve_simulate(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "simulate", rng=rng, iterations=iterations)

    def batch_closed_form(self, workload: Workload, cluster: Cluster, workers: Any, bandwidth: Any, latency: Any) -> Any:
        from queuesgd.schemes.base import BatchSolution

        d = self._legacy_batch(workload, cluster, workers, bandwidth, latency)
        if d["method"] != "closed_form":
            raise NotRepresentable("legacy batch")
        return BatchSolution(d["iteration_rate"], d["gradients_per_update"], d.get("bottleneck", ""), d["method"])



def _with(sol: SchemeSolution, T: float, curve: dict[float, float], how: str) -> SchemeSolution:
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


@dataclass(frozen=True)
class AdaptiveCutoff(Scheme):
    """Teng and Wood's cutoff: each iteration, wait for the ``c`` gradients a predictor says pay best.

    Every iteration the PS asks ``predictor`` for ``samples`` joint samples
    of the workers' next run-times, picks
    ``c = argmax_c c / (mean_samples[x_(c:n)] + comm(c) + update(c))``, and
    waits for the first ``c`` real arrivals (drawn from the true laws,
    :func:`~queuesgd.schemes.laws.sample_compute`). The first iteration
    waits for every worker (there is no history yet); the first ``window``
    iterations are discarded from the estimate as warm-up.

    Predictor protocol: any object with
    ``sample(history, censored, rng, size) -> ndarray (size, n)`` where
    ``history`` (t, n) holds the observed run-times of the last
    ``t <= window`` iterations (NaN where not observed) and ``censored``
    (t, n) the time a cut-off worker had run when it was cut off (its
    run-time exceeds it; NaN elsewhere). See
    :mod:`queuesgd.schemes.predictors`.

    With ``stragglers="finish"`` a cut-off worker's run-time is observed
    once its stale computation ends; at planning time a still-running
    computation is censored at its elapsed time, and its end is predicted
    as ``max(elapsed, y)`` with ``y`` a further predictor sample (a
    heuristic: the remaining time is not conditioned on the elapsed one).

    Parameters
    ----------
    predictor : object with ``sample``, or None
        ``None`` means ``EmpiricalPredictor(window)``.
    stragglers : {"cancel", "finish"}
    window : int
        History rows passed to the predictor (``>= 1``).
    samples : int
        Joint samples drawn per iteration (``>= 1``).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(1.0), gradient_bytes=1.0)
    >>> c = Cluster(10, bandwidth=1e300, latency=0.25)
    >>> sol = AdaptiveCutoff().solve(w, c, "simulate", rng=1, iterations=400)
    >>> 3 < sol.gradients_per_update < 9
    True
    """

    predictor: Any = None
    stragglers: str = "cancel"
    window: int = 50
    samples: int = 200

    key: ClassVar[str] = "adaptive-cutoff"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "stragglers", _checks.choice("AdaptiveCutoff.stragglers", self.stragglers, _MODES)
        )
        object.__setattr__(self, "window", _checks.integer("AdaptiveCutoff.window", self.window))
        object.__setattr__(self, "samples", _checks.integer("AdaptiveCutoff.samples", self.samples))
        if self.predictor is not None and not callable(getattr(self.predictor, "sample", None)):
            raise InvalidParameterError(
                "AdaptiveCutoff.predictor",
                self.predictor,
                "None or an object with a method sample(history, censored, rng, size) -> array (size, n)",
            )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        return (
            "simulate",
            "the cutoff is chosen anew each iteration from predicted run-times: simulation only",
        )

    def _legacy_solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: Any = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        if method != "simulate":
            raise _unknown_method(self, method)
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        iters = _checks.integer("iterations", iterations or _ADAPTIVE_ITERATIONS, minimum=2 * _BATCHES)
        n = cluster.workers
        predictor = self.predictor if self.predictor is not None else EmpiricalPredictor(self.window)
        finish = self.stragglers == "finish"
        x = _sample(workload, cluster, gen, iters)
        cs = np.arange(1, n + 1, dtype=float)
        comm_c, upd_c = _round(workload, cluster, cs, cs if finish else n)
        cost_c = np.broadcast_to(comm_c + upd_c, cs.shape)
        xs = np.full((iters, n), np.nan)  # real run-times of computations that started
        start = np.full((iters, n), np.inf)
        end = np.full((iters, n), np.inf)
        cut_at = np.full(iters, np.inf)  # cancel: when the cutoff stopped the late ones
        rec = {k: np.empty(iters) for k in ("K", "D", "compute", "comm", "update", "tau")}
        chosen = np.empty(iters, dtype=int)
        s = 0.0
        b = np.full(n, -np.inf)
        W, S = self.window, self.samples
        for j in range(iters):
            a = np.maximum(s, b)
            if j == 0:
                c = n
            else:
                lo = max(0, j - W)
                if finish:
                    st, en = start[lo:j], end[lo:j]
                    hist = np.where(en <= s, xs[lo:j], np.nan)
                    cens = np.where((st < s) & (en > s), s - st, np.nan)
                else:
                    hist = np.where(end[lo:j] <= cut_at[lo:j, None], xs[lo:j], np.nan)
                    cens = np.where(np.isnan(hist), (cut_at[lo:j, None] - start[lo:j]), np.nan)
                draw = self._draw(predictor, hist, cens, gen, 2 * S if finish else S, n)
                if finish:
                    busy = b > s
                    elapsed = s - self._running_start(start[lo:j], end[lo:j], s, n)
                    rest = np.where(busy, np.maximum(draw[S:], elapsed) - elapsed, 0.0)
                    draw = draw[:S] + rest
                draw.sort(axis=1)
                c = int(np.argmax(cs / (draw.mean(axis=0) + cost_c))) + 1
            e = a + x[j]
            C = float(np.partition(e, c - 1)[c - 1])
            arrived = e <= C
            started = a < C
            K = float(arrived.sum())
            busy_t = np.clip(np.minimum(b, C) - s, 0.0, None) + np.clip(np.minimum(e, C) - a, 0.0, None)
            comm, upd = _round(workload, cluster, K, K if finish else n)
            xs[j] = np.where(started, x[j], np.nan)
            start[j] = np.where(started, a, np.inf)
            end[j] = np.where(started, e, np.inf)
            cut_at[j] = C
            rec["K"][j], rec["D"][j], rec["compute"][j] = K, C - s, busy_t.mean()
            rec["comm"][j], rec["update"][j], rec["tau"][j] = comm, upd, C - s + comm + upd
            chosen[j] = c
            if finish:
                b = np.where(arrived, -np.inf, np.where(started, e, b))
            s = C + comm + upd
        warm = min(W, iters // 4)
        rec["n"] = n  # type: ignore[assignment]
        freq = np.bincount(chosen[warm:], minlength=n + 1)[1:] / (iters - warm)
        details = {
            "cutoff": float(chosen[warm:].mean()),
            "cutoffs": {c + 1: float(f) for c, f in enumerate(freq) if f},
        }
        reason = (
            f"Monte Carlo of {iters} iterations ({self.stragglers}; predictor {type(predictor).__name__}, "
            f"{S} samples per iteration; first {warm} iterations discarded), 95% batch-means interval"
        )
        return _from_runs(rec, "simulate", reason, details, warm)

    @staticmethod
    def _running_start(start: np.ndarray, end: np.ndarray, s: float, n: int) -> np.ndarray:
        """Start time of each worker's computation still running at ``s`` (``s`` if none)."""
        running = (start < s) & (end > s)
        return np.where(running.any(axis=0), np.where(running, start, -np.inf).max(axis=0), s)

    @staticmethod
    def _draw(
        predictor: Any, hist: np.ndarray, cens: np.ndarray, gen: np.random.Generator, size: int, n: int
    ) -> np.ndarray:
        out = np.array(predictor.sample(hist, cens, gen, size), dtype=float)
        if out.shape != (size, n) or not np.all(np.isfinite(out)):
            raise InvalidParameterError(
                "AdaptiveCutoff.predictor",
                predictor,
                f"sample() returning finite run-times of shape (size, n) = ({size}, {n}); "
                f"got shape {out.shape}",
            )
        return out

    def solve_simulate(self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: Any = None) -> Any:
        return self._legacy_solve(workload, cluster, "simulate", rng=rng, iterations=iterations)


