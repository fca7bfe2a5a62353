"""StaticCutoff: a synchronous PS that stops waiting a fixed time after each iteration starts.

See :mod:`queuesgd.schemes.barrier.cutoff` and ``docs/schemes/cutoffs.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import check_iterations, warmup_cut
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.orderstats import group_laws
from queuesgd.schemes.barrier.cutoff_model import (
    FINISH_WHY,
    STRAGGLERS,
    bottleneck,
    check_timeout,
    closed_form_ok,
    cutoff_formula,
    from_rounds,
    iteration_laws,
    phase_of,
    round_costs,
    sample_times,
    solution,
    static_moments,
)
from queuesgd.schemes.barrier.cutoff_net import cutoff_net, solve_cutoff_net
from queuesgd.schemes.barrier.kofn_sim import simulate_rounds
from queuesgd.schemes.barrier.ps_arrivals import (
    barrier_link_costs,
    check_send_buffer,
    shared_why,
    simulate_ps_barrier,
)
from queuesgd.schemes.base import BatchSolution, Scheme, SchemeSolution
from queuesgd.schemes.costs import ps_round
from queuesgd.workload import Cluster, Workload

__all__ = ["StaticCutoff"]

#: The PS link models: the phase after the cutoff (default) or arrival times on a shared link.
LINKS: tuple[str, ...] = ("phase", "shared")


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
    link : {"phase", "shared"}
        ``"phase"`` (the default): a gradient counts when its computation
        ends by ``T``, and one PS round follows the cutoff. ``"shared"``: a
        gradient counts when its *push has arrived* by ``T``
        (:func:`~queuesgd.schemes.barrier.ps_arrivals.simulate_ps_barrier`: pushes
        FIFO on the PS's incoming link, ``G/B`` each and ``alpha`` of delay;
        late workers' dropped pushes still occupy it; a round's replies,
        ``P/B`` each, share the PS's link and leave together); method
        ``"simulate"`` only.
    send_buffer : float or str
        ``link="shared"``: bytes of each reply the PS host's socket buffer
        takes at once (0, the default: a send blocks the PS until its
        replies have left); see :class:`~queuesgd.schemes.barrier.backup.BackupWorkers`.

    Notes
    -----
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
    link: str = "phase"
    send_buffer: float = 0.0

    key: ClassVar[str] = "static-cutoff"
    parameter_units: ClassVar[dict[str, str]] = {"timeout": "s", "send_buffer": "B"}

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", check_timeout(self.timeout))
        object.__setattr__(
            self, "stragglers", _checks.choice("StaticCutoff.stragglers", self.stragglers, STRAGGLERS)
        )
        _checks.choice("StaticCutoff.link", self.link, LINKS)
        object.__setattr__(
            self, "send_buffer", check_send_buffer("StaticCutoff.send_buffer", self.send_buffer, self.link)
        )
        if self.link == "shared" and self.stragglers != "finish":
            raise InvalidParameterError(
                "StaticCutoff.link", self.link, "'phase' with stragglers='cancel' ('shared' models 'finish')"
            )

    def _refuse_shared(self, method: str) -> None:
        if self.link == "shared":
            raise NotRepresentable(shared_why("StaticCutoff", method))

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.link == "shared":
            return "simulate", (
                "simulate: link='shared' counts a gradient when its push has arrived (arrival times on the "
                "PS link; no closed form)"
            )
        if self.stragglers == "finish":
            return "simulate", FINISH_WHY
        ok, why = closed_form_ok(workload, cluster)
        if ok:
            return "closed_form", "cancel: independent iterations, exact renewal-reward closed form"
        return "simulate", f"no closed form ({why}): Monte Carlo"

    # ---- roads -----------------------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Renewal-reward ``E[K] / (E[D] + E[comm(K)] + E[update(K)])``: exact for any law (cancel only)."""
        self._refuse_shared("closed_form")
        if self.stragglers == "finish":
            raise NotRepresentable(f"StaticCutoff has no closed form with {FINISH_WHY}")
        n = cluster.workers
        groups = group_laws(iteration_laws(workload, cluster, "StaticCutoff"))
        D, K, comp = static_moments(groups, self.timeout)
        comm, upd = round_costs(workload, cluster, K, n)
        details = {"cutoff": self.timeout, "participation": K / n}
        reason = "renewal-reward: E[K] / (E[D] + E[comm(K)]), exact for any law (cancel)"
        return solution(D, K, comp, comm, upd, "closed_form", reason, details)

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The CTMC of :meth:`petri_net` (timer and PS round as Erlang fits; an approximation)."""
        self._refuse_shared("ctmc")
        net, info = cutoff_net(workload, cluster, self.timeout, self.stragglers)
        return solve_cutoff_net(net, info, self.timeout)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo with the actual laws (:func:`~queuesgd.schemes.barrier.kofn_sim.simulate_rounds`)."""
        iters = check_iterations(self.simulation_iterations if iterations is None else iterations)
        extra = 1 if self.link == "shared" else 0  # the shared engine reads the next round's samples
        return self.simulate_on(sample_times(workload, cluster, rng, iters + extra), workload, cluster)

    def simulate_on(self, x: np.ndarray, workload: Workload, cluster: Cluster) -> SchemeSolution:
        """The simulation on given compute times ``x`` (iterations, n); finish drops a warm-up.

        With ``link="shared"`` the rows are the computations on each
        parameter version, and ``x.shape[0] - 1`` rounds run.
        """
        if self.link == "shared":
            rounds = simulate_ps_barrier(
                x, timer=self.timeout, **barrier_link_costs(workload, cluster, self.send_buffer)
            )
            warmup = warmup_cut(rounds.gradients.size)
            reason = (
                f"Monte Carlo of {rounds.gradients.size} rounds on a shared PS link ({self.stragglers}): a "
                "gradient counts when its push has arrived by the cutoff; 95% batch-means interval"
            )
            details = {"cutoff": self.timeout, "link": "shared"}
            return from_rounds(rounds, cluster.workers, "simulate", reason, details, warmup)
        rounds = simulate_rounds(
            x,
            timer=self.timeout,
            phase=phase_of(workload, cluster, self.stragglers),
            stragglers=self.stragglers,
        )
        warmup = 0 if self.stragglers == "cancel" else warmup_cut(x.shape[0])
        reason = f"Monte Carlo of {x.shape[0]} iterations ({self.stragglers}), 95% batch-means interval"
        return from_rounds(rounds, cluster.workers, "simulate", reason, {"cutoff": self.timeout}, warmup)

    def petri_net(self, workload: Workload, cluster: Cluster) -> Any:
        """The GSPN of the scheme: timer and communication phase as Erlang fits, workers lumped.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> net = StaticCutoff(0.5).petri_net(Workload(0.4, 1e6), Cluster(2, 1e9))
        >>> "stale.restart" in net.transition_names
        True
        """
        return cutoff_net(workload, cluster, self.timeout, self.stragglers)[0]

    def batch_closed_form(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> BatchSolution:
        """:meth:`solve_closed_form` over arrays of workers, bandwidths and latencies (moments once per n)."""
        self._refuse_shared("closed_form")
        if self.stragglers == "finish":
            raise NotRepresentable(f"StaticCutoff has no closed form with {FINISH_WHY}")
        workers = np.asarray(workers, dtype=int)
        D, K, comp = (np.empty(workers.shape) for _ in range(3))
        for n in np.unique(workers):
            sub = cluster if n == cluster.workers else cluster.with_workers(int(n))
            rows = workers == n
            D[rows], K[rows], comp[rows] = static_moments(
                group_laws(iteration_laws(workload, sub, "StaticCutoff")), self.timeout
            )
        comm, upd = round_costs(workload, cluster, K, workers, bandwidth, latency)
        return BatchSolution(1.0 / (D + comm + upd), K, bottleneck(D, comp, comm, upd), "closed_form")

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

        self._refuse_shared("closed_form")
        if self.stragglers == "finish":
            raise NotRepresentable(f"StaticCutoff has no closed form with {FINISH_WHY}")
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
        return cutoff_formula(
            expr,
            sym,
            f"static-cutoff (cancel) throughput, {what}",
            "independent workers; late workers cancelled; the PS waits until T, all n, or the first gradient",
        )
