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
from queuesgd.batchmeans import BATCHES, check_iterations, ratio_interval
from queuesgd.distributions import Deterministic, Distribution, Exponential, PhaseType
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.markov import compositions
from queuesgd.rng import as_generator
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.costs import ring_allreduce
from queuesgd.schemes.laws import ctmc_law, sample_compute, worker_laws
from queuesgd.workload import Cluster, Workload

if TYPE_CHECKING:
    from queuesgd.formula import Formula

__all__ = ["EagerSGD"]

#: Largest embedded chain (states of its largest space) that ``auto`` solves with ``ctmc``.
MAX_CTMC_STATES = 200_000
#: Rounds simulated by default (after a warm-up of a tenth more).


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

    key: ClassVar[str] = "eager-sgd"

    def __post_init__(self) -> None:
        _checks.choice("EagerSGD.mode", self.mode, ("solo", "majority"))
        object.__setattr__(
            self, "max_stale", _checks.integer("EagerSGD.max_stale", self.max_stale, minimum=0)
        )

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
        """Seconds of one round: ring all-reduce of the gradient plus the local update.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> EagerSGD().round_time(Workload(0.1, 1e6, update_time=0.001), Cluster(2, 1e9))
        0.002
        """
        P = cluster.workers
        return float(ring_allreduce(P, workload.gradient_bytes, cluster.bandwidth, cluster.latency)) + float(
            workload.update_time
        )

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
        chain = _EmbeddedChain(self.mode, P, ph)
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
        """Monte Carlo of the rounds with the actual laws (speeds and ``RandomDelay`` stragglers included)."""
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
        A = np.asarray(A, dtype=float) + float(workload.update_time)
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
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        rounds = self.simulation_iterations if iterations is None else check_iterations(iterations)
        warm = max(rounds // 10, 1)
        total_rounds = rounds + warm
        P = cluster.workers
        A = self.round_time(workload, cluster)
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
        durations, idle, contrib, fresh = durations[warm:], idle[warm:], contrib[warm:], fresh[warm:]
        total_time = float(durations.sum())
        rate, (lo, hi) = ratio_interval(contrib, durations, BATCHES)
        half = (hi - lo) / 2
        stale = np.concatenate(stale_parts)
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
            f"compute laws; 95% batch-means interval ({BATCHES} batches)"
        )
        sol = _solution(cycle, P, A, workload.update_time, mean_step, "simulate", reason)
        return _with_details(
            sol,
            {
                "staleness_distribution": {int(k): float(p) for k, p in enumerate(sdist) if p > 0},
                "rounds": rounds,
            },
            staleness=float(stale.mean()),
            interval=(float(rate - half), float(rate + half)),
        )


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


# ---- the embedded chain ----------------------------------------------------------------------------


class _Index:
    """Vectorized lookup of integer vectors (entries <= top) in a state array."""

    def __init__(self, states: np.ndarray, top: int) -> None:
        d = states.shape[1]
        if (top + 1) ** d >= 2**62:
            raise NotRepresentable("EagerSGD embedded chain: too many phases for the state encoding")
        self.weights = (top + 1) ** np.arange(d, dtype=np.int64)
        keys = states @ self.weights
        self.order = np.argsort(keys)
        self.sorted = keys[self.order]

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        keys = vectors @ self.weights
        pos = np.searchsorted(self.sorted, keys)
        return self.order[pos]


def _sparse(rows: list, cols: list, vals: list, shape: tuple[int, int]) -> Any:
    from scipy import sparse

    if rows:
        r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    else:
        r = c = np.zeros(0, dtype=np.int64)
        v = np.zeros(0)
    return sparse.csr_matrix((v, (r, c)), shape=shape)


class _EmbeddedChain:
    """Phase counts of the computing processes, embedded at round ends (phase-type compute).

    Spaces: ``X`` all ``P`` computing (a round end); ``R`` during a round,
    (computing phase counts, buffered count) with at most ``P - 1``
    non-participants; ``Y`` (majority) before the trigger, (non-initiator
    phase counts, ready non-initiators, initiator phase); ``Z`` before a
    synchronous round, (phase counts, ready count).
    """

    def __init__(self, mode: str, P: int, ph: PhaseType) -> None:
        from scipy import sparse
        from scipy.sparse.linalg import splu

        self.mode, self.P = mode, P
        alpha = np.asarray(ph.alpha, dtype=float)
        T = np.asarray(ph.T, dtype=float)
        k = alpha.size
        self.k = k
        exit_rates = -T.sum(axis=1)
        moves = [(i, j, T[i, j]) for i in range(k) for j in range(k) if i != j and T[i, j] > 0]
        eye = np.eye(k, dtype=np.int64)

        X = compositions(P, k)
        ix = _Index(X, P)
        R = compositions(P - 1, k + 2)[:, : k + 1]  # (c, d), slack dropped
        ir = _Index(R, P)
        self.X, self.R = X, R
        nX, nR = len(X), len(R)

        # Round generator on R: phase moves and exits (exits add to the buffered count d).
        rows: list = []
        cols: list = []
        vals: list = []
        for i, j, rate in moves:
            s = np.nonzero(R[:, i] > 0)[0]
            tgt = R[s].copy()
            tgt[:, i] -= 1
            tgt[:, j] += 1
            rows.append(s), cols.append(ir(tgt)), vals.append(R[s, i] * rate)
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(R[:, i] > 0)[0]
            tgt = R[s].copy()
            tgt[:, i] -= 1
            tgt[:, k] += 1
            rows.append(s), cols.append(ir(tgt)), vals.append(R[s, i] * exit_rates[i])
        G = _sparse(rows, cols, vals, (nR, nR))
        self.G = (G - sparse.diags(np.asarray(G.sum(axis=1)).ravel())).tocsr()
        self.buffered = R[:, k].astype(float)
        self.fresh = P - R[:, :k].sum(axis=1)  # participants at the trigger (d = 0)

        # Restart at a round end: the P - |c| waiting processes start with phases ~ Multinomial(alpha).
        self.restart = self._restart_matrix(R[:, :k], ix, alpha)
        # After a synchronous round everyone restarts.
        self.nu0 = np.asarray(self._restart_matrix(np.zeros((1, k), dtype=np.int64), ix, alpha).todense())[0]

        # Idle period before a partial round: transient generator and exits into R (d = 0).
        if mode == "solo":
            S = X
            si = ix
            entry = sparse.identity(nX, format="csr")
            pop = slice(0, k)
        else:
            base = compositions(P - 1, k + 1)  # (c', r)
            S = np.concatenate([np.column_stack([base, np.full(len(base), j)]) for j in range(k)])
            si = _Index(S, max(P, k))
            pop = slice(0, k)
            er, ec, ev = [], [], []
            for j in range(k):
                s = np.nonzero(X[:, j] > 0)[0]
                tgt = np.column_stack([X[s] - eye[j], np.zeros(len(s), dtype=np.int64), np.full(len(s), j)])
                er.append(s), ec.append(si(tgt)), ev.append(X[s, j] / P)
            entry = _sparse(er, ec, ev, (nX, len(S)))
        nS = len(S)
        rows, cols, vals = [], [], []
        erows, ecols, evals = [], [], []
        for i, j, rate in moves:
            s = np.nonzero(S[:, pop][:, i] > 0)[0]
            tgt = S[s].copy()
            tgt[:, i] -= 1
            tgt[:, j] += 1
            rows.append(s), cols.append(si(tgt)), vals.append(S[s, i] * rate)
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(S[:, i] > 0)[0]
            if mode == "solo":  # the first exit triggers the round
                tgt = np.column_stack([S[s] - eye[i], np.zeros(len(s), dtype=np.int64)])
                erows.append(s), ecols.append(ir(tgt)), evals.append(S[s, i] * exit_rates[i])
            else:  # a non-initiator becomes ready
                tgt = S[s].copy()
                tgt[:, i] -= 1
                tgt[:, k] += 1
                rows.append(s), cols.append(si(tgt)), vals.append(S[s, i] * exit_rates[i])
        if mode == "majority":
            for j in range(k):
                s = np.nonzero(S[:, k + 1] == j)[0]
                for jj in range(k):
                    if jj != j and T[j, jj] > 0:
                        tgt = S[s].copy()
                        tgt[:, k + 1] = jj
                        rows.append(s), cols.append(si(tgt)), vals.append(np.full(len(s), T[j, jj]))
                if exit_rates[j] > 0:  # the initiator's gradient triggers the round
                    tgt = np.column_stack([S[s, :k], np.zeros(len(s), dtype=np.int64)])
                    erows.append(s), ecols.append(ir(tgt)), evals.append(np.full(len(s), exit_rates[j]))
        Q = _sparse(rows, cols, vals, (nS, nS))
        exits = _sparse(erows, ecols, evals, (nS, nR))
        out = np.asarray(Q.sum(axis=1)).ravel() + np.asarray(exits.sum(axis=1)).ravel()
        self.idle_lu = splu((sparse.diags(out) - Q).T.tocsc())
        self.exits_T = exits.T.tocsr()
        self.entry_T = entry.T.tocsr()

        # Idle period before a synchronous round: absorbed when nobody computes.
        Z = compositions(P, k + 1)[:, :k]  # phase counts with |c| <= P (the rest ready)
        iz = _Index(Z, P)
        active = Z.sum(axis=1) > 0
        rows, cols, vals = [], [], []
        for i, j, rate in moves:
            s = np.nonzero(Z[:, i] > 0)[0]
            tgt = Z[s].copy()
            tgt[:, i] -= 1
            tgt[:, j] += 1
            rows.append(s), cols.append(iz(tgt)), vals.append(Z[s, i] * rate)
        out = np.zeros(len(Z))
        for i in range(k):
            if exit_rates[i] <= 0:
                continue
            s = np.nonzero(Z[:, i] > 0)[0]
            tgt = Z[s].copy()
            tgt[:, i] -= 1
            rows.append(s), cols.append(iz(tgt)), vals.append(Z[s, i] * exit_rates[i])
        Qz = _sparse(rows, cols, vals, (len(Z), len(Z)))
        out = np.asarray(Qz.sum(axis=1)).ravel()
        keep = np.nonzero(active)[0]
        Qt = (sparse.diags(out) - Qz)[keep][:, keep]
        self.sync_lu = splu(Qt.T.tocsc())
        self.sync_entry = iz(X)  # positions of X in Z
        pos = np.full(len(Z), -1)
        pos[keep] = np.arange(len(keep))
        self.sync_entry = pos[self.sync_entry]
        self.n_sync = len(keep)
        self.size = max(nX, nR, nS, len(Z))

    def _restart_matrix(self, c: np.ndarray, ix: _Index, alpha: np.ndarray) -> Any:
        """Sparse matrix: rows of ``c`` (computing phase counts) -> X after the others restart."""
        P, k = self.P, self.k
        n_restart = P - c.sum(axis=1)
        rows, cols, vals = [], [], []
        logf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, P + 1)))])
        loga = np.log(np.where(alpha > 0, alpha, 1.0))
        for n in np.unique(n_restart):
            s = np.nonzero(n_restart == n)[0]
            outcomes = compositions(int(n), k)
            ok = np.all((outcomes == 0) | (alpha[None, :] > 0), axis=1)
            outcomes = outcomes[ok]
            logp = (
                logf[n]
                - logf[outcomes].sum(axis=1)
                + np.where(outcomes > 0, outcomes * loga, 0.0).sum(axis=1)
            )
            p = np.exp(logp)
            tgt = (c[s][:, None, :] + outcomes[None, :, :]).reshape(-1, k)
            rows.append(np.repeat(s, len(outcomes))), cols.append(ix(tgt)), vals.append(np.tile(p, len(s)))
        return _sparse(rows, cols, vals, (len(c), len(self.X)))

    def partial_round(self, x: np.ndarray, A: float) -> tuple[dict[str, Any], np.ndarray]:
        from scipy.sparse.linalg import expm_multiply

        start = self.entry_T @ x
        u = self.idle_lu.solve(start)
        y = self.exits_T @ u
        z = expm_multiply(self.G.T * A, y) if A > 0 else y
        kdist = np.bincount(self.fresh, weights=y, minlength=self.P + 1)
        reward = {
            "idle": float(u.sum()),
            "fresh": float(y @ self.fresh),
            "gradients": float(y @ self.fresh + z @ self.buffered),
            "kdist": kdist,
        }
        return reward, self.restart.T @ z

    def sync_idle(self, x: np.ndarray) -> float:
        start = np.zeros(self.n_sync)
        np.add.at(start, self.sync_entry, x)
        return float(self.sync_lu.solve(start).sum())

    def cycle(self, K: int, A: float) -> dict[str, Any]:
        """Expectations over ``K`` partial rounds then one synchronous round (after a synchronous one)."""
        P = self.P
        total = {"idle": 0.0, "fresh": 0.0, "gradients": 0.0, "kdist": np.zeros(P + 1)}

        def add(reward: dict[str, Any], times: float) -> None:
            for key in total:
                total[key] = total[key] + times * reward[key]

        x = self.nu0
        done = 0
        while done < K:
            reward, nxt = self.partial_round(x, A)
            add(reward, 1.0)
            done += 1
            converged = float(np.abs(nxt - x).sum()) < 1e-14
            x = nxt
            if converged and done < K:
                reward, x = self.partial_round(x, A)
                add(reward, float(K - done))
                done = K
        add({"idle": self.sync_idle(x), "fresh": P, "gradients": P, "kdist": np.eye(P + 1)[P]}, 1.0)
        return {**total, "rounds": K + 1.0}
