"""The barrier family: synchronous schemes with a "k of n" barrier, then one communication phase.

:class:`BarrierScheme` turns the engine of :mod:`queuesgd.schemes.barrier.kofn`
(order statistics, the GSPN and its CTMC, the Monte Carlo) into a
:class:`~queuesgd.schemes.base.Scheme`. A member of the family overrides
hooks, never ``solve``: what ``k`` is (:meth:`BarrierScheme.gradients`), the
laws of one round's computation (:meth:`BarrierScheme.round_laws`,
:meth:`BarrierScheme.sample_round`), the gradients one update folds in
(:meth:`BarrierScheme.gradients_per_update`), what the late workers do
(:meth:`BarrierScheme.straggler_mode`) and the communication phase
(:meth:`BarrierScheme.costs`). Both :meth:`~queuesgd.schemes.base.Scheme.solve`
and the vectorized sweep read the same hooks.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import check_iterations
from queuesgd.distributions import Distribution, Exponential
from queuesgd.errors import NotRepresentable
from queuesgd.orderstats import exponential_order_statistic
from queuesgd.schemes.barrier.kofn import (
    AUTO_CTMC_STATES,
    COMM_PHASES,
    EXACT_PHASE_TYPE,
    compute_laws,
    estimate_states,
    mean_compute,
    simulate_barrier,
    solve_barrier_ctmc,
    time_to_barrier,
)
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.laws import sample_compute
from queuesgd.workload import Cluster, Workload

__all__ = ["BarrierScheme", "SymbolicWorkload"]


# ----------------------------------------------------------------------------- the scheme
class BarrierScheme(Scheme):
    """A synchronous scheme: a "k of n" barrier, then one communication phase.

    Hooks (override these, never ``solve``):

    - :meth:`gradients` -- ``k``, the computations the barrier waits for;
    - :meth:`round_laws` / :meth:`sample_round` / :meth:`mean_round_compute`
      -- one round's computation per worker (one step by default);
    - :meth:`gradients_per_update` -- gradients one update folds in (``k``);
    - :meth:`straggler_mode` -- ``"cancel"`` or ``"finish"`` for ``k < n``;
    - :meth:`costs` -- ``(communication, update)`` seconds after the barrier,
      for numbers, NumPy arrays or SymPy symbols.

    Roads: ``closed_form`` (``E[X_(k:n)] + communication``, exact when
    iterations are i.i.d.), ``ctmc`` (the GSPN of
    :func:`~queuesgd.schemes.barrier.kofn.barrier_net`) and ``simulate``; the closed
    form is vectorized for :func:`queuesgd.sweep`.
    """

    #: Symbol of the bytes each worker sends in :meth:`formula` (``G``, or ``S`` for all-reduce).
    _message_symbol: ClassVar[str] = "G"

    # ---- hooks -----------------------------------------------------------------------
    def gradients(self, n: Any) -> Any:
        """``k``: computations the barrier waits for with ``n`` workers (numbers or arrays)."""
        return n

    def gradients_per_update(self, k: Any) -> Any:
        """Gradients one update folds in when the barrier took ``k`` computations (``k``)."""
        return k

    def straggler_mode(self) -> str:
        """``"cancel"`` or ``"finish"`` (matters only when ``k < n``)."""
        return "cancel"

    def round_laws(self, workload: Workload, cluster: Cluster) -> list[Distribution]:
        """Each worker's law of one round's computation (one step: :func:`~.kofn.compute_laws`)."""
        return compute_laws(workload, cluster)

    def sample_round(self, workload: Workload, cluster: Cluster, rng: Any, rounds: int) -> np.ndarray:
        """Computation times of ``rounds`` rounds, shape ``(rounds, n)`` (one step per round by default)."""
        return sample_compute(workload, cluster, rng, rounds)

    def mean_round_compute(self, workload: Workload, cluster: Cluster) -> float:
        """Mean own computation of a worker in one round, seconds (stragglers' delays included)."""
        return mean_compute(workload, cluster)

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``(communication, update)`` seconds of the phase after the barrier, for ``k`` of ``n`` gradients.

        Arguments are numbers, NumPy arrays, or SymPy symbols (then
        ``workload`` is a :class:`SymbolicWorkload` whose ``syms`` holds every
        symbol of :meth:`formula`).
        """
        raise NotImplementedError

    def _formula_k(self, syms: dict[str, Any]) -> Any:
        """``k`` in :meth:`formula` (``n``; ``n - b`` with backup workers)."""
        return syms["n"]

    def _formula_gradients(self, syms: dict[str, Any], k: Any) -> Any:
        """Gradients per update in :meth:`formula` (``k``)."""
        return k

    def _formula_wait(self, syms: dict[str, Any], compute: str, k: Any) -> Any:
        """``E[X_(k:n)]`` of one round in :meth:`formula`; adds its compute symbol to ``syms``."""
        import sympy

        n = syms["n"]
        if compute == "exponential":
            mu = syms.setdefault("mu", sympy.Symbol("mu", positive=True))
            return sympy.harmonic(n) / mu if k == n else (sympy.harmonic(n) - sympy.harmonic(n - k)) / mu
        return syms.setdefault("t", sympy.Symbol("t", positive=True))

    def _symbols(self) -> dict[str, Any]:
        """Extra symbols of :meth:`formula` (beyond n, mu/t, m, G, P, B, alpha, u, s)."""
        return {}

    def _meanings(self) -> dict[str, str]:
        """What the extra symbols of :meth:`_symbols` mean (for :class:`~queuesgd.formula.Formula`)."""
        return {}

    def _conditions(self, syms: dict[str, Any]) -> tuple[tuple[Any, str], ...]:
        """Where :meth:`formula`'s expression holds (``Formula.conditions``): everywhere by default."""
        return ()

    # ---- pieces ----------------------------------------------------------------------------
    def _phase(self, workload: Workload, cluster: Cluster) -> tuple[int, float, float]:
        n = cluster.workers
        k = int(self.gradients(n))
        comm, upd = self.costs(n, k, workload, cluster.bandwidth, cluster.latency, cluster.ps_shards)
        return k, float(comm), float(upd)

    def _finish_late(self, cluster: Cluster) -> bool:
        return self.straggler_mode() == "finish" and int(self.gradients(cluster.workers)) < cluster.workers

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        name = type(self).__name__
        if not self._finish_late(cluster):
            try:
                self.round_laws(workload, cluster)
            except NotRepresentable as err:
                return "simulate", f"simulate: no closed form ({err})"
            return "closed_form", (
                f"closed_form: {name} iterations are i.i.d., so the mean iteration time is exactly "
                "E[X_(k:n)] + communication"
            )
        if cluster.stragglers is not None:
            return "simulate", "simulate: stale workers with random straggler delays have no exact CTMC here"
        laws = self.round_laws(workload, cluster)
        inexact = sorted({type(law).__name__ for law in laws if not isinstance(law, EXACT_PHASE_TYPE)})
        if inexact:
            return "simulate", (
                f"simulate: stragglers='finish' has no closed form, and the {', '.join(inexact)} compute "
                "law is not phase-type (a CTMC would use a fit)"
            )
        est = estimate_states(laws, cluster.workers - int(self.gradients(cluster.workers)))
        if est > AUTO_CTMC_STATES:
            return "simulate", (
                f"simulate: stragglers='finish' has no closed form and its CTMC would have about {est:.3g} "
                "markings"
            )
        return "ctmc", (
            "ctmc: stragglers='finish' has no closed form; the CTMC of its GSPN is exact for phase-type "
            f"compute laws (the deterministic communication phase is an Erlang-{COMM_PHASES} there)"
        )

    # ---- roads -----------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """``E[X_(k:n)] + communication + update``: exact when iterations are i.i.d. (``k = n`` or cancel)."""
        k, comm, upd = self._phase(workload, cluster)
        if self._finish_late(cluster):
            raise NotRepresentable(
                f"{type(self).__name__} with stragglers='finish': late workers delay the next iterations, so "
                "iterations are not independent and there is no closed form (use 'ctmc' or 'simulate')"
            )
        to_barrier = time_to_barrier(self.round_laws(workload, cluster), k)
        reason = "E[X_(k:n)] (order statistics) + communication + update"
        return self._solution(workload, cluster, "closed_form", k, to_barrier, comm, upd, reason, {})

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The exact CTMC of the barrier's GSPN (phase-type fits of other laws, stated in the reason)."""
        k, comm, upd = self._phase(workload, cluster)
        mode = self.straggler_mode() if k < cluster.workers else "cancel"
        if cluster.stragglers is not None:
            raise NotRepresentable(
                f"{type(self).__name__} CTMC with RandomDelay stragglers (a random set of workers delayed by "
                "a constant each step); use 'closed_form' or 'simulate'"
            )
        phases = COMM_PHASES if mode == "finish" and comm + upd > 0 else 1
        res = solve_barrier_ctmc(
            self.round_laws(workload, cluster), k, comm + upd, stragglers=mode, comm_phases=phases
        )
        notes = list(res.notes)
        if phases > 1:
            notes.append(
                f"the deterministic communication phase is an Erlang-{phases} of the same mean "
                "(its law matters with stragglers='finish')"
            )
        details: dict[str, Any] = {"states": res.states}
        if res.notes:
            details["phase_type"] = "; ".join(res.notes)
        reason = "; ".join(["exact CTMC of the barrier's GSPN", *notes])
        to_barrier = 1.0 / res.rate - comm - upd
        return self._solution(
            workload, cluster, "ctmc", k, to_barrier, comm, upd, reason, details, model=res.net
        )

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo of the barrier with the actual laws (batch means; :mod:`queuesgd.batchmeans`)."""
        k, comm, upd = self._phase(workload, cluster)
        mode = self.straggler_mode() if k < cluster.workers else "cancel"
        iters = check_iterations(self.simulation_iterations if iterations is None else iterations)
        x = self.sample_round(workload, cluster, rng, iters)
        sim = simulate_barrier(x, k, comm + upd, stragglers=mode)
        reason = f"Monte Carlo of {sim.iterations} iterations with the actual laws (batch means)"
        gpu = float(self.gradients_per_update(k))
        interval = (sim.interval[0] * gpu / k, sim.interval[1] * gpu / k)
        details = {"iterations": sim.iterations}
        return self._solution(
            workload,
            cluster,
            "simulate",
            k,
            sim.barrier_time,
            comm,
            upd,
            reason,
            details,
            interval=interval,
            iteration_time=sim.iteration_time,
        )

    def _solution(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        k: int,
        to_barrier: float,
        comm: float,
        upd: float,
        reason: str,
        details: dict[str, Any],
        *,
        model: Any = None,
        interval: tuple[float, float] | None = None,
        iteration_time: float | None = None,
    ) -> SchemeSolution:
        it = to_barrier + comm + upd if iteration_time is None else iteration_time
        if k < cluster.workers:
            details = {"stragglers": self.straggler_mode(), **details}
        details["order_statistic"] = to_barrier
        compute = min(self.mean_round_compute(workload, cluster), to_barrier)
        breakdown = {
            "compute": compute,
            "communication": comm,
            "update": upd,
            "waiting": to_barrier - compute,
        }
        return SchemeSolution(
            iteration_rate=1.0 / it,
            gradients_per_update=float(self.gradients_per_update(k)),
            iteration_time=it,
            breakdown=breakdown,
            method=method,
            reason=reason,
            details=details,
            interval=interval,
            bottleneck=_bottleneck(to_barrier, comm, upd),
            model=model,
        )

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` over arrays of workers, bandwidths and latencies (one evaluation)."""
        n = np.asarray(workers).astype(int)
        k = np.broadcast_to(np.asarray(self.gradients(n)), n.shape).astype(int)
        if self.straggler_mode() == "finish" and np.any(k < n):
            raise NotRepresentable("stragglers='finish' has no closed form")
        rate = self._exponential_rate(workload, cluster)
        if rate is not None:
            to_barrier = np.asarray(exponential_order_statistic(rate, n, k), dtype=float)
        else:
            pairs, inv = np.unique(np.stack([n, k], axis=1), axis=0, return_inverse=True)
            vals = np.array(
                [
                    time_to_barrier(self.round_laws(workload, _with_workers(cluster, nn)), kk)
                    for nn, kk in pairs.tolist()
                ]
            )
            to_barrier = vals[np.asarray(inv).ravel()]
        bw, lat = np.asarray(bandwidth, dtype=float), np.asarray(latency, dtype=float)
        comm, upd = self.costs(n, k, workload, bw, lat, cluster.ps_shards)
        comm = np.broadcast_to(np.asarray(comm, dtype=float), n.shape)
        upd = np.broadcast_to(np.asarray(upd, dtype=float), n.shape)
        which = np.argmax(np.stack([to_barrier, comm, upd]), axis=0)
        return BatchSolution(
            1.0 / (to_barrier + comm + upd),
            np.asarray(self.gradients_per_update(k), dtype=float),
            np.array(["compute", "communication", "update"], dtype=object)[which],
            "closed_form",
        )

    def _exponential_rate(self, workload: Workload, cluster: Cluster) -> float | None:
        """The common rate where one round is one i.i.d. exponential step (closed-form order statistics)."""
        law = workload.compute
        plain = cluster.stragglers is None and cluster.same_speeds
        if plain and isinstance(law, Exponential) and type(self).round_laws is BarrierScheme.round_laws:
            return float(law.rate) * (1.0 if cluster.speeds is None else float(cluster.speeds[0]))
        return None

    # ---- formula ---------------------------------------------------------------------
    def formula(self, compute: str = "exponential") -> Any:
        """Throughput in samples per second as a :class:`~queuesgd.formula.Formula`.

        ``compute="exponential"``: i.i.d. exponential compute of rate ``mu``,
        the barrier's mean is ``(H_n - H_{n-k}) / mu``; ``"deterministic"``:
        every worker takes ``t``. Symbols: ``n`` workers, ``m`` batch size,
        ``G``/``P`` gradient/parameter bytes (``S`` the all-reduce message),
        ``B`` bandwidth, ``alpha`` latency, ``u`` update time, ``s`` PS shards.
        """
        import sympy

        from queuesgd.formula import Formula

        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        pos = {"positive": True}
        syms = {
            "n": sympy.Symbol("n", integer=True, **pos),
            "m": sympy.Symbol("m", integer=True, **pos),
            "G": sympy.Symbol(self._message_symbol, **pos),
            "P": sympy.Symbol("P", **pos),
            "B": sympy.Symbol("B", **pos),
            "alpha": sympy.Symbol("alpha", **pos),
            "u": sympy.Symbol("u", **pos),
            "s": sympy.Symbol("s", integer=True, **pos),
            **self._symbols(),
        }
        meaning = {
            "n": "workers",
            "m": "batch size (samples per worker step)",
            self._message_symbol: (
                "all-reduce message bytes (the gradient)" if self._message_symbol == "S" else "gradient bytes"
            ),
            "P": "parameter bytes",
            "B": "link bandwidth, bytes/s",
            "alpha": "one-way latency, s",
            "u": "update time per gradient, s",
            "s": "parameter-server shards",
            "mu": "compute rate, 1/s (exponential compute)",
            "t": "compute time, s (deterministic compute)",
            "b": "backup workers",
            "g": "workers per node",
            "B_intra": "intra-node bandwidth, bytes/s",
            "alpha_intra": "intra-node latency, s",
            **self._meanings(),
        }
        n = syms["n"]
        k = self._formula_k(syms)
        wait = self._formula_wait(syms, compute, k)
        comm, upd = self.costs(n, k, SymbolicWorkload(syms), syms["B"], syms["alpha"], syms["s"])
        expr = self._formula_gradients(syms, k) * syms["m"] / (wait + comm + upd)
        return Formula.pruned(
            expr,
            syms,
            meaning,
            f"{self.key} throughput, {compute} compute",
            self._assumptions(),
            self._conditions(syms),
        )

    def _assumptions(self) -> str:
        return (
            "n workers compute independently; the barrier waits for the first k gradients; then one "
            "communication phase (no overlap of computation and communication)"
        )


class SymbolicWorkload:
    """The workload fields the cost hooks read, as SymPy symbols (``syms`` holds every symbol).

    Examples
    --------
    >>> import sympy
    >>> w = SymbolicWorkload({"G": sympy.Symbol("G"), "P": sympy.Symbol("P"), "u": sympy.Symbol("u")})
    >>> w.gradient_bytes + w.parameter_bytes
    G + P
    """

    def __init__(self, syms: dict[str, Any]) -> None:
        self.gradient_bytes = syms["G"]
        self.parameter_bytes = syms["P"]
        self.update_time = syms["u"]
        self.syms = syms


def _with_workers(cluster: Cluster, n: int) -> Cluster:
    return cluster if n == cluster.workers else cluster.with_workers(n)


def _bottleneck(to_barrier: float, comm: float, update: float) -> str:
    return ("compute", "communication", "update")[int(np.argmax([to_barrier, comm, update]))]
