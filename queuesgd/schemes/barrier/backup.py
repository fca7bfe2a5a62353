"""Synchronous SGD with backup workers (Chen, Pan, Monga, Bengio, Jozefowicz 2016).

``n`` workers compute; the parameter server applies the first ``n - b``
gradients of each iteration and drops the others. The ``b`` late workers
either abort (``stragglers="cancel"``: iterations are i.i.d., closed form
``E[X_(n-b:n)] + communication``) or finish their now useless computation
(``"finish"``, what TensorFlow's ``SyncReplicasOptimizer`` does: exact CTMC
of the GSPN, or Monte Carlo). See ``docs/schemes/backup-workers.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import check_iterations, warmup_cut
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.barrier.barrier import BarrierScheme
from queuesgd.schemes.barrier.kofn import STRAGGLERS
from queuesgd.schemes.barrier.ps_arrivals import (
    barrier_link_costs,
    check_send_buffer,
    shared_why,
    simulate_ps_barrier,
)
from queuesgd.schemes.base import BatchSolution, SchemeSolution
from queuesgd.schemes.costs import ps_round
from queuesgd.workload import Cluster, Workload

#: The PS link models: the phase after the barrier (default) or arrival times on a shared link.
LINKS: tuple[str, ...] = ("phase", "shared")

__all__ = ["BackupWorkers"]


@dataclass(frozen=True)
class BackupWorkers(BarrierScheme):
    """Synchronous parameter server that waits for the first ``n - b`` of ``n`` gradients.

    Parameters
    ----------
    backups : int
        ``b``, gradients dropped per iteration (``0 <= b < n``; 0 is plain
        synchronous SGD).
    stragglers : {"finish", "cancel"}
        What the ``b`` workers still computing at the barrier do: ``"finish"``
        their computation (the gradient is dropped; the worker starts afresh
        when it is done, or when the running PS round ends), or ``"cancel"``
        it and restart with everybody after the round.
    link : {"phase", "shared"}
        ``"phase"`` (the default): the communication is one phase after the
        barrier, as below. ``"shared"``: the arrival-time model of a real
        network (:func:`~queuesgd.schemes.barrier.ps_arrivals.simulate_ps_barrier`):
        each worker pushes as soon as it is done (FIFO on the PS's incoming
        link, ``G/B`` each, ``alpha`` of delay), the barrier is the arrival of
        the ``(n - b)``-th fresh push, late pushes still occupy the link, and
        a round's replies (``P/B`` each) share the PS's link and leave
        together; method ``"simulate"`` only.
    send_buffer : float or str
        ``link="shared"``: bytes of each reply the PS host's socket buffer
        takes at once (0, the default: a send blocks the PS until its
        replies have left). The live PS's send returns when the rest fits in
        the buffer, so the next round starts while the replies still go;
        measure it (:func:`queuesgd.harness.duplex.measure_send_buffer`).

    Notes
    -----
    After the barrier the PS receives and applies ``n - b`` gradients and
    ``n`` workers ("cancel") or the ``n - b`` synced ones ("finish") pull the
    parameters (:func:`~queuesgd.schemes.costs.ps_round`); with "finish" the
    late workers' pull happens later on the idle PS link and is not modeled.
    Cancel's mean iteration time is ``E[X_(n-b:n)] + communication`` for any
    law; "finish" is never faster (each iteration's barrier comes no sooner
    than with cancel on the same compute times), equal for ``b = 0``.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(1.0), "10MB", batch_size=1)
    >>> c = Cluster(workers=3, bandwidth="1GB/s")
    >>> p = predict(BackupWorkers(1, stragglers="cancel"), w, c)
    >>> round(p.details["order_statistic"], 12)        # (H_3 - H_1) / 1 = 1/3 + 1/2
    0.833333333333
    >>> p.gradients_per_update
    2.0
    >>> predict(BackupWorkers(1), w, c).method         # finish: no closed form
    'ctmc'
    >>> predict(BackupWorkers(1, link="shared"), w, c, rng=1, iterations=2000).method
    'simulate'
    """

    key: ClassVar[str] = "backup-workers"
    parameter_units: ClassVar[dict[str, str]] = {"send_buffer": "B"}

    backups: int = 1
    stragglers: str = "finish"
    link: str = "phase"
    send_buffer: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "backups",
            _checks.integer("BackupWorkers.backups", self.backups, minimum=0, maximum=_checks.MAX_COUNT),
        )
        _checks.choice("BackupWorkers.stragglers", self.stragglers, STRAGGLERS)
        _checks.choice("BackupWorkers.link", self.link, LINKS)
        object.__setattr__(
            self, "send_buffer", check_send_buffer("BackupWorkers.send_buffer", self.send_buffer, self.link)
        )
        if self.link == "shared" and self.stragglers != "finish":
            raise InvalidParameterError(
                "BackupWorkers.link", self.link, "'phase' with stragglers='cancel' ('shared' models 'finish')"
            )

    # ---- the shared link: arrival times ----------------------------------------------------
    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.link == "shared":
            return "simulate", (
                "simulate: link='shared' follows every push's arrival time on the PS link (no closed form)"
            )
        return super().auto_method(workload, cluster)

    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The phase model's ``E[X_(n-b:n)] + communication`` (cancel, ``link="phase"`` only)."""
        if self.link == "shared":
            raise NotRepresentable(shared_why("BackupWorkers", "closed_form"))
        return super().solve_closed_form(workload, cluster, rng=rng, iterations=iterations)

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` over arrays (the barrier family's vectorized form)."""
        if self.link == "shared":
            raise NotRepresentable(shared_why("BackupWorkers", "closed_form"))
        return super().batch_closed_form(workload, cluster, workers, bandwidth, latency)

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The CTMC of the barrier's GSPN (``link="phase"`` only)."""
        if self.link == "shared":
            raise NotRepresentable(shared_why("BackupWorkers", "ctmc"))
        return super().solve_ctmc(workload, cluster, rng=rng, iterations=iterations)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo: of the phase model, or (``link="shared"``) of every push's arrival time."""
        if self.link != "shared":
            return super().solve_simulate(workload, cluster, rng=rng, iterations=iterations)
        n = cluster.workers
        k = int(self.gradients(n))
        iters = check_iterations(self.simulation_iterations if iterations is None else iterations)
        x = self.sample_round(workload, cluster, rng, iters + 1)
        r = simulate_ps_barrier(x, k, **barrier_link_costs(workload, cluster, self.send_buffer))
        cut = warmup_cut(iters)
        rate, ci = r.rate(cut)
        sl = slice(cut, None)
        tau = float(r.duration[sl].mean())
        comm, upd = float(r.communication[sl].mean()), float(r.update[sl].mean())
        reason = (
            f"Monte Carlo of {iters} rounds on a shared PS link: pushes FIFO as they are done, the barrier "
            f"at the arrival of the {k}-th fresh one, the replies sharing the link (batch means)"
        )
        sol = self._solution(
            workload,
            cluster,
            "simulate",
            k,
            float(r.barrier[sl].mean()),
            comm,
            upd,
            reason,
            {"iterations": iters - cut, "link": "shared"},
            interval=ci,
            iteration_time=tau,
        )
        return sol

    def check(self, workload: Workload, cluster: Cluster) -> None:
        if self.backups >= cluster.workers:
            raise InvalidParameterError(
                "BackupWorkers.backups",
                self.backups,
                f"an integer 0 <= backups < workers (= {cluster.workers})",
            )

    def gradients(self, n: Any) -> Any:
        """``n - b``.

        Examples
        --------
        >>> BackupWorkers(2).gradients(8)
        6
        """
        return n - self.backups

    def straggler_mode(self) -> str:
        return self.stragglers

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``ps_round(k, n)`` for cancel, ``ps_round(k, k)`` for finish (``k = n - b`` gradients).

        Examples
        --------
        >>> from queuesgd import Workload
        >>> BackupWorkers(1, "cancel").costs(3, 2, Workload(0.1, "10MB"), 1e9, 0.0, 1)
        (0.05, 0.0)
        """
        pulls = n if self.stragglers == "cancel" else k
        return ps_round(
            k,
            pulls,
            workload.gradient_bytes,
            workload.parameter_bytes,
            bandwidth,
            latency,
            workload.update_time,
            shards,
        )

    def _symbols(self) -> dict[str, Any]:
        import sympy

        return {"b": sympy.Symbol("b", integer=True, nonnegative=True)}

    def _formula_k(self, syms: dict[str, Any]) -> Any:
        return syms["n"] - syms["b"]

    def formula(self, compute: str = "exponential") -> Any:
        """Throughput with ``b`` backups (stragglers="cancel" only).

        ``X = (n - b) m / ((H_n - H_b)/mu + 2 alpha + ((n-b) G + n P)/(s B) + (n-b) u/s)``
        for exponential compute (``t`` instead of ``(H_n - H_b)/mu`` for
        deterministic compute).

        Examples
        --------
        >>> f = BackupWorkers(stragglers="cancel").formula()
        >>> round(f.evaluate(n=3, b=1, m=1, mu=1.0, G=1e7, P=1e7, B=1e9, alpha=0.0, u=0.0, s=1), 9)
        2.264150943
        >>> round(2 / (1/2 + 1/3 + (2 * 1e7 + 3 * 1e7) / 1e9), 9)
        2.264150943
        """
        if self.link == "shared":
            raise NotRepresentable(shared_why("BackupWorkers", "closed_form"))
        if self.stragglers == "finish":
            raise NotRepresentable(
                "BackupWorkers with stragglers='finish' has no closed form: late workers delay the next "
                "iterations (use predict with method='ctmc' or 'simulate', or stragglers='cancel')"
            )
        return super().formula(compute)

    def _assumptions(self) -> str:
        return (
            "n i.i.d. compute times; the PS waits for the first n - b gradients; the b late workers "
            "cancel and restart with everybody; then n - b gradients pushed and applied, n pulls, one "
            "transfer at a time per shard link; no overlap"
        )
