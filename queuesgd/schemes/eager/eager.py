"""eager-SGD: decentralized SGD with partial (solo or majority) all-reduce.

Source: Li, Ben-Nun, Di Girolamo, Alistarh, Hoefler, "Taming unbalanced
training workloads in deep learning with partial collective operations",
PPoPP 2020 (see ``docs/schemes/eager-sgd.md``). Processes compute a gradient
and call a *partial* all-reduce: in solo mode the first process to arrive
starts the collective, in majority mode a random initiator (one shared seed)
does. Gradients of processes that are not ready are folded into a later
round; after ``max_stale`` partial rounds a synchronous round is forced.

The model is coarse-grained: a round is one ring all-reduce of the gradient
plus the local update, of deterministic duration ``A``; rounds follow one
another. Three solution methods:

- ``closed_form`` -- identical exponential (or deterministic) compute: every
  round end is a regeneration point, so the throughput is a ratio of
  per-cycle expectations (a cycle is ``max_stale`` partial rounds and one
  synchronous round).
- ``ctmc`` -- phase-type compute: the Markov chain of the phase counts of the
  computing processes, embedded at round ends (a Markov regenerative
  process: exponential-phase computation between rounds, the exact
  deterministic round time ``A`` through ``expm``).
- ``simulate`` -- a direct event simulation with the actual laws, speeds
  and random straggler delays, with a batch-means confidence interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import (
    BATCHES,
    check_iterations,
    check_simulation_size,
    check_tail,
    ratio_interval,
)
from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.rng import as_generator
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.costs import ring_allreduce
from queuesgd.schemes.eager.eager_chain import EmbeddedChain
from queuesgd.schemes.laws import ctmc_law, sample_compute, worker_laws
from queuesgd.workload import Cluster, Workload

if TYPE_CHECKING:
    from queuesgd.formula import Formula

__all__ = ["EagerSGD"]

#: Largest embedded chain (states of its largest space) that ``auto`` solves with ``ctmc``.
MAX_CTMC_STATES = 200_000


@dataclass(frozen=True)
class EagerSGD(Scheme):
    """eager-SGD: partial all-reduce (solo or majority) with bounded staleness.

    Every process repeats: compute a gradient, then contribute it to the next
    round of the partial all-reduce. Rounds run one after another, each a
    ring all-reduce of the gradient plus the local update
    (``A = ring_allreduce(P, G, B, latency) + update_time``):

    * a round starts when its trigger holds -- ``"solo"``: as soon as one
      process has a gradient ready; ``"majority"``: as soon as a designated
      initiator, drawn uniformly among the ``P`` processes for every round,
      has its gradient ready (on average ``(P + 1) / 2`` fresh contributors
      when compute times are i.i.d. exponential);
    * the processes ready at that instant contribute (the participants),
      together with the gradients buffered during the previous round;
    * at the end of the round every waiting process restarts on the new model;
      the others keep computing and their gradients become stale;
    * a process that finishes while a round runs waits for it to end and its
      gradient is buffered into the next round;
    * after ``max_stale`` consecutive partial rounds the next round is
      synchronous (it waits for all ``P`` processes); ``max_stale = 0`` is
      synchronous all-reduce SGD.

    No gradient is dropped, so the throughput is the rate at which gradients
    are computed times the batch size; ``iteration_rate`` is rounds per
    second and ``gradients_per_update`` the mean contributions per round.

    Parameters
    ----------
    mode : {"solo", "majority"}
        The partial collective.
    max_stale : int
        Partial rounds between two synchronous ones (``>= 0``; eager-SGD uses 32).
    activation : float or str
        Seconds from a round's trigger until its all-reduce starts on every
        process: the partial collective's activation phase (the initiator's
        activation messages; ``"0.4ms"`` accepted). Counted in the round:
        ``A = activation + ring_allreduce(P, G, B, latency) + update_time``.
        A process that finishes during the activation waits for the round's
        end, as it would during the all-reduce (counted as buffered rather
        than as a participant, which changes the staleness split, not the
        throughput). 0 by default.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(mean=0.1), "4MB", batch_size=32)
    >>> p = predict(EagerSGD("majority"), w, Cluster(4, "10Gbit/s"))
    >>> p.method, round(p.throughput, 3), round(p.details["participation"], 6)
    ('closed_form', 773.814, 0.636364)
    """

    mode: str = "solo"
    max_stale: int = 32
    activation: float = 0.0

    key: ClassVar[str] = "eager-sgd"
    parameter_units: ClassVar[dict[str, str]] = {"activation": "s"}

    def __post_init__(self) -> None:
        _checks.choice("EagerSGD.mode", self.mode, ("solo", "majority"))
        object.__setattr__(
            self,
            "max_stale",
            _checks.integer("EagerSGD.max_stale", self.max_stale, minimum=0, maximum=_checks.MAX_COUNT),
        )
        object.__setattr__(self, "activation", _checks.duration("EagerSGD.activation", self.activation))

    # ---- checks and method choice ---------------------------------------------------
    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Majority needs an initiator other than the process itself: at least 2 workers.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> EagerSGD("majority").check(Workload(0.1, 1e6), Cluster(1, "1GB/s"))
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: EagerSGD.mode: got 'majority'; accepted: 'solo' for a single \
worker (majority all-reduce needs Cluster.workers >= 2)
        """
        if self.mode == "majority" and cluster.workers < 2:
            raise InvalidParameterError(
                "EagerSGD.mode",
                self.mode,
                "'solo' for a single worker (majority all-reduce needs Cluster.workers >= 2)",
            )

    def round_time(self, workload: Workload, cluster: Cluster) -> float:
        """Seconds of one round: the activation, ring all-reduce of the gradient and the local update.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> EagerSGD().round_time(Workload(0.1, 1e6, update_time=0.001), Cluster(2, 1e9))
        0.002
        >>> w = Workload(0.1, 1e6, update_time=0.001)
        >>> round(EagerSGD(activation="0.5ms").round_time(w, Cluster(2, 1e9)), 12)
        0.0025
        """
        P = cluster.workers
        ring = float(ring_allreduce(P, workload.gradient_bytes, cluster.bandwidth, cluster.latency))
        return self.activation + ring + float(workload.update_time)

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        law = _identical_law(workload, cluster)
        if law is None:
            why = "stragglers" if cluster.stragglers is not None else "unequal speeds"
            return "simulate", f"simulate: {why} break the identical-process chain"
        if isinstance(law, (Exponential, Deterministic)):
            return "closed_form", (
                f"closed_form: identical {type(law).__name__.lower()} compute, rounds regenerate at every end"
            )
        try:
            ph = law.to_phase_type()
        except NotRepresentable:
            return "simulate", f"simulate: {law!r} is not phase-type (an exact CTMC would need a fit)"
        size = self._chain_size(cluster.workers, ph.phases)
        if size >= MAX_CTMC_STATES:
            return "simulate", f"simulate: the embedded chain would have {size} states (>= {MAX_CTMC_STATES})"
        return "ctmc", f"ctmc: phase-type compute, embedded chain of {size} states"

    def _chain_size(self, P: int, k: int) -> int:
        nX = math.comb(P + k - 1, k - 1)
        nR = math.comb(P - 1 + k + 1, k + 1)
        nZ = math.comb(P + k, k)
        nY = math.comb(P - 1 + k, k) * k if self.mode == "majority" else 0
        return max(nX, nR, nZ, nY)

    # ---- solvers ---------------------------------------------------------------------
    def _identical(self, workload: Workload, cluster: Cluster, method: str) -> Distribution:
        """The one compute law of identical processes, or the reason ``method`` needs them."""
        law = _identical_law(workload, cluster)
        if law is None:
            raise NotRepresentable(
                f"EagerSGD with method {method!r} needs identical processes "
                "(equal speeds, no RandomDelay stragglers); use method='simulate'"
            )
        return law

    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Identical exponential or deterministic processes: round ends regenerate (see :meth:`formula`)."""
        law = self._identical(workload, cluster, "closed_form")
        A = self.round_time(workload, cluster)
        P = cluster.workers
        if isinstance(law, Exponential):
            cycle = _exponential_cycle(self.mode, self.max_stale, P, float(law.rate), A)
        elif isinstance(law, Deterministic):
            cycle = _deterministic_cycle(self.max_stale, P, float(law.value))
        else:
            raise NotRepresentable(
                f"EagerSGD has a closed form for exponential or deterministic compute, not {law!r}; "
                "use method='ctmc' or 'simulate'"
            )
        reason = "closed form: identical processes, every round end is a regeneration point"
        return _solution(cycle, P, A, workload.update_time, float(law.mean), "closed_form", reason)

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The embedded Markov chain of the processes' phase counts at round ends (phase-type compute)."""
        law = self._identical(workload, cluster, "ctmc")
        A = self.round_time(workload, cluster)
        P = cluster.workers
        ph, note = ctmc_law(law)
        size = self._chain_size(P, ph.phases)
        if size > 5 * MAX_CTMC_STATES:
            raise StateSpaceTooLargeError(
                f"the EagerSGD embedded chain would have {size} states ({ph.phases} phases, {P} "
                "processes); use method='simulate'"
            )
        chain = EmbeddedChain(self.mode, P, ph)
        cycle = chain.cycle(self.max_stale, A)
        reason = (
            "embedded Markov chain of the computing processes' phase counts at round ends "
            f"({chain.size} states; deterministic round time via expm)"
        )
        if note:
            reason += f"; {note}"
        sol = _solution(cycle, P, A, workload.update_time, float(law.mean), "ctmc", reason)
        extra = {"states": chain.size}
        if note:
            extra["phase_type"] = note
        return _with_details(sol, extra)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo of the rounds with the actual laws (speeds and ``RandomDelay`` stragglers included).

        The 95% interval is of batch ratios; round durations with a tail too heavy for it get the
        subsampling interval (:func:`queuesgd.batchmeans.ratio_interval`) and a warning
        (:func:`queuesgd.batchmeans.check_tail`)."""
        return self._simulate(workload, cluster, rng, iterations)

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """The closed form on arrays of configurations (identical exponential or deterministic compute).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> r = EagerSGD(max_stale=0).solve_batch(
        ...     Workload(0.1, 1e6), Cluster(2, 1e9), np.array([1, 2]), np.array([1e9, 1e9]), np.zeros(2)
        ... )
        >>> r.iteration_rate.tolist(), r.gradients_per_update.tolist()   # 1/0.1, 1/(0.1 + 1 ms)
        ([10.0, 9.900990099009901], [1.0, 2.0])
        """
        if cluster.speeds is not None or cluster.stragglers is not None:
            raise NotRepresentable("the vectorized EagerSGD solution needs identical processes")
        law = workload.compute
        P = np.asarray(workers, dtype=float)
        A = ring_allreduce(P, workload.gradient_bytes, np.asarray(bandwidth, dtype=float), latency)
        A = np.asarray(A, dtype=float) + float(workload.update_time) + self.activation
        if isinstance(law, Deterministic):
            rate = 1.0 / (float(law.value) + A)
            return BatchSolution(rate, P.copy(), "", "closed_form")
        if not isinstance(law, Exponential):
            raise NotRepresentable(f"no vectorized EagerSGD solution for {law!r}")
        from queuesgd.orderstats import harmonic

        mu, K = float(law.rate), self.max_stale
        qd = -np.expm1(-mu * A)
        if self.mode == "solo":
            idle, grads = 1.0 / (P * mu), 1.0 + (P - 1) * qd
        else:
            idle, grads = np.full_like(P, 1.0 / mu), (P + 1) / 2 + (P - 1) / 2 * qd
        time = K * (idle + A) + harmonic(P) / mu + A
        total = K * grads + P
        return BatchSolution((K + 1) / time, total / (K + 1), "", "closed_form")

    # ---- models ----------------------------------------------------------------------
    def formula(self, compute: str = "exponential") -> Formula:
        """Throughput (samples/s) for identical processes, exponential or deterministic compute.

        Exponential compute of rate ``mu``: at every round end all processes
        compute with memoryless residuals, so each round is an independent
        cycle. A solo round waits ``1/(n mu)`` for the first gradient and
        applies ``1 + (n-1)(1 - exp(-mu A))`` gradients (the trigger plus
        those finished during the round); a majority round waits ``1/mu``
        for its initiator and applies ``(n+1)/2 + (n-1)/2 (1 - exp(-mu A))``;
        a synchronous round waits ``H_n / mu`` and applies ``n``. With
        ``K = max_stale`` partial rounds per synchronous one,
        ``X = m (K g_p + n) / (K t_p + H_n/mu + A)`` with ``t_p = 1/(n mu) + A``
        (solo) or ``1/mu + A`` (majority). Deterministic compute ``t``:
        everyone arrives together, ``X = m n / (t + A)``. Here
        ``A = 2 (n-1)/n S/B + 2 (n-1) alpha + u``.

        Examples
        --------
        >>> f = EagerSGD(max_stale=0).formula()
        >>> round(f.evaluate(n=2, mu=10.0, m=1, S=1e6, B=1e9, alpha=0.0, u=0.0), 6)  # 2 / (1.5/10 + 1 ms)
        13.245033
        >>> EagerSGD().formula("deterministic").expr
        m*n/(alpha*(2*n - 2) + t + u + S*(2*n - 2)/(B*n))
        """
        import sympy

        from queuesgd.formula import Formula

        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        sym = {name: sympy.Symbol(name, positive=True) for name in ("n", "m", "S", "B", "alpha", "u")}
        meaning = {
            "n": "processes (workers)",
            "m": "samples per process step (batch size)",
            "S": "all-reduce message bytes (the gradient)",
            "B": "link bandwidth, bytes/s",
            "alpha": "one-way latency per message, s",
            "u": "local update time, s",
        }
        n, m = sym["n"], sym["m"]
        A = ring_allreduce(n, sym["S"], sym["B"], sym["alpha"]) + sym["u"]
        if self.activation > 0:
            sym["a"] = sympy.Symbol("a", positive=True)
            meaning["a"] = "activation of a round (trigger to all-reduce), s"
            A = A + sym["a"]
        if compute == "deterministic":
            t = sym["t"] = sympy.Symbol("t", positive=True)
            meaning["t"] = "compute time of one step, s"
            expr = m * n / (t + A)
            assumptions = "identical deterministic compute: every process arrives together (synchronous)"
        else:
            mu = sym["mu"] = sympy.Symbol("mu", positive=True)
            meaning["mu"] = "compute rate of one process, 1/s"
            q = 1 - sympy.exp(-mu * A)
            if self.mode == "solo":
                gp, tp = 1 + (n - 1) * q, 1 / (n * mu) + A
            else:
                gp, tp = (n + 1) / 2 + (n - 1) / 2 * q, 1 / mu + A
            K = sympy.Integer(self.max_stale)
            expr = m * (K * gp + n) / (K * tp + sympy.harmonic(n) / mu + A)
            assumptions = (
                "identical processes with exponential compute; deterministic round "
                f"(ring all-reduce + update); {self.max_stale} partial rounds per synchronous one"
            )
        return Formula(
            expr, sym, meaning, f"eager-sgd ({self.mode}, max_stale={self.max_stale}) throughput", assumptions
        )

    # ---- simulation ------------------------------------------------------------------
    def _simulate(
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        """Rounds of the event simulation (default ``simulation_iterations``), measured after a warm-up."""
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        rounds = self.simulation_iterations if iterations is None else check_iterations(iterations)
        # Warm-up: a tenth more rounds (above batchmeans.WARMUP): all processes start in step at time 0.
        warm = max(rounds // 10, 1)
        P = cluster.workers
        # Per round: 4 values and up to P staleness records; the loop costs about 20 us + 0.2 us per
        # worker a round here.
        check_simulation_size(
            rounds + warm,
            P + 4,
            unit="values a round (workers + 4)",
            what="values",
            seconds_per_iteration=2e-5 + 2e-7 * P,
            instead="method='ctmc' or 'closed_form'",
        )
        A = self.round_time(workload, cluster)
        durations, idle, contrib, fresh, stale = self._run_rounds(
            workload, cluster, gen, rounds + warm, warm, A
        )
        durations, idle, contrib, fresh = durations[warm:], idle[warm:], contrib[warm:], fresh[warm:]
        total_time = float(durations.sum())
        # A tail too heavy for the CLT: the interval is the subsampling one, and the user is told.
        heavy = check_tail(durations, f"EagerSGD simulation of {rounds:,} rounds", repaired=True)
        rate, (lo, hi) = ratio_interval(contrib, durations, BATCHES)
        sdist = np.bincount(stale) / stale.size
        kdist = np.bincount(fresh, minlength=P + 1) / fresh.size
        mean_step = float(np.mean([float(law.mean) for law in worker_laws(workload, cluster)]))
        if cluster.stragglers is not None:
            mean_step += cluster.stragglers.count * cluster.stragglers.delay / P
        cycle = {
            "time": total_time / rounds,
            "idle": float(idle.mean()),
            "gradients": float(contrib.mean()),
            "fresh": float(fresh.mean()),
            "rounds": 1.0,
            "kdist": kdist,
        }
        reason = (
            f"event simulation of {rounds} rounds (after {warm} warm-up rounds) with the actual "
            f"compute laws; 95% batch-means interval ({BATCHES} batches"
            + ("; subsampling: the rounds' tail is heavy)" if heavy else ")")
        )
        sol = _solution(cycle, P, A, workload.update_time, mean_step, "simulate", reason)
        return _with_details(
            sol,
            {
                "staleness_distribution": {int(k): float(p) for k, p in enumerate(sdist) if p > 0},
                "rounds": rounds,
            },
            staleness=float(stale.mean()),
            interval=(float(lo), float(hi)),
        )

    def _run_rounds(
        self,
        workload: Workload,
        cluster: Cluster,
        gen: np.random.Generator,
        total_rounds: int,
        warm: int,
        A: float,
    ) -> tuple[np.ndarray, ...]:
        """Play ``total_rounds`` rounds.

        Returns per round its duration, idle time, contributions and fresh
        participants, and the staleness of every gradient applied after the
        first ``warm`` rounds.
        """
        P = cluster.workers
        chunk = 2048
        draws = sample_compute(workload, cluster, gen, chunk + 1)
        finish = draws[0].copy()
        row = 1
        version = np.zeros(P, dtype=np.int64)
        buffered_versions = np.zeros(0, dtype=np.int64)
        initiators = gen.integers(P, size=total_rounds) if self.mode == "majority" else None
        durations = np.empty(total_rounds)
        idle = np.empty(total_rounds)
        contrib = np.empty(total_rounds, dtype=np.int64)
        fresh = np.empty(total_rounds, dtype=np.int64)
        stale_parts: list[np.ndarray] = []
        end = 0.0
        partial = 0
        for r in range(1, total_rounds + 1):
            sync = partial >= self.max_stale
            if sync:
                trigger = finish.max()
            elif initiators is None:
                trigger = finish.min()
            else:
                trigger = finish[initiators[r - 1]]
            part = finish <= trigger
            new_end = trigger + A
            buf = (finish <= new_end) & ~part
            i = r - 1
            durations[i] = new_end - end
            idle[i] = trigger - end
            fresh[i] = np.count_nonzero(part)
            contrib[i] = fresh[i] + buffered_versions.size
            if r > warm:
                stale_parts.append(r - 1 - version[part])
                stale_parts.append(r - 1 - buffered_versions)
            buffered_versions = version[buf]
            restart = part | buf
            if row > chunk:
                draws = sample_compute(workload, cluster, gen, chunk + 1)
                row = 0
            version[restart] = r
            finish[restart] = new_end + draws[row, restart]
            row += 1
            end = new_end
            partial = 0 if sync else partial + 1
        return durations, idle, contrib, fresh, np.concatenate(stale_parts)


# ---- helpers ---------------------------------------------------------------------------------------


def _identical_law(workload: Workload, cluster: Cluster) -> Distribution | None:
    """The common compute law of all processes, or None (unequal speeds or stragglers)."""
    if cluster.stragglers is not None:
        return None
    laws = worker_laws(workload, cluster)
    speeds = cluster.speed_factors
    if np.any(speeds != speeds[0]):
        return None
    return laws[0]


def _exponential_cycle(mode: str, K: int, P: int, mu: float, A: float) -> dict[str, Any]:
    """Per-cycle expectations (K partial rounds + 1 synchronous) for i.i.d. exponential compute."""
    q = -math.expm1(-mu * A)
    kdist = np.zeros(P + 1)
    if mode == "solo":
        idle_p, fresh_p, done_p = 1.0 / (P * mu), 1.0, (P - 1) * q
        kdist[1] += K
    else:
        # The initiator's rank among P i.i.d. exponential residuals is uniform on 1..P.
        idle_p, fresh_p, done_p = 1.0 / mu, (P + 1) / 2.0, (P - 1) / 2.0 * q
        kdist[1:] += K / P
    kdist[P] += 1.0
    idle_s = float(np.sum(1.0 / np.arange(1, P + 1))) / mu
    return {
        "idle": K * idle_p + idle_s,
        "gradients": K * (fresh_p + done_p) + P,
        "fresh": K * fresh_p + P,
        "rounds": K + 1.0,
        "kdist": kdist,
    }


def _deterministic_cycle(K: int, P: int, t: float) -> dict[str, Any]:
    """Identical deterministic compute: every process finishes at the same instant, every round."""
    kdist = np.zeros(P + 1)
    kdist[P] = K + 1.0
    return {
        "idle": (K + 1) * t,
        "gradients": (K + 1.0) * P,
        "fresh": (K + 1.0) * P,
        "rounds": K + 1.0,
        "kdist": kdist,
    }


def _solution(
    cycle: dict[str, Any], P: int, A: float, update: float, mean_step: float, method: str, reason: str
) -> SchemeSolution:
    rounds = cycle["rounds"]
    idle = cycle["idle"] / rounds
    time = idle + A
    grads = cycle["gradients"] / rounds
    fresh = cycle["fresh"] / rounds
    kdist = np.asarray(cycle["kdist"], dtype=float)
    kdist = kdist / kdist.sum()
    compute = min(idle, mean_step)
    breakdown = {"compute": compute, "communication": A - update, "update": update, "waiting": idle - compute}
    return SchemeSolution(
        iteration_rate=1.0 / time,
        gradients_per_update=grads,
        iteration_time=time,
        breakdown=breakdown,
        method=method,
        reason=reason,
        staleness=(P - fresh) / grads,
        details={
            "participation": fresh / P,
            "participation_distribution": {int(k): float(p) for k, p in enumerate(kdist) if p > 0},
            "synchronous_fraction": 1.0 / rounds if method != "simulate" else None,
        },
    )


def _with_details(sol: SchemeSolution, extra: dict[str, Any], **changes: Any) -> SchemeSolution:
    import dataclasses

    details = {k: v for k, v in {**sol.details, **extra}.items() if v is not None}
    return dataclasses.replace(sol, details=details, **changes)
