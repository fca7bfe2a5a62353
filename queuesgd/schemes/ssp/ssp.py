"""Stale synchronous parallel (SSP) SGD: workers may run ahead of the slowest by a bounded number of clocks.

Source: Ho, Cipar, Cui, Kim, Lee, Gibbons, Gibson, Ganger and Xing, "More
effective distributed ML via a stale synchronous parallel parameter server",
NIPS 2013 (see ``docs/schemes/stale-synchronous.md``). Each worker repeats
compute then communicate (push its gradient, pull the parameters); its clock
counts completed iterations. With staleness bound ``s`` a worker whose clock
is ``c`` may start its next iteration only if every worker's clock is at
least ``c - s``: ``s = 0`` is bulk-synchronous (a barrier every iteration),
``s = inf`` is asynchronous (no waiting at all).

Three roads: the barrier's order statistic for ``s = 0`` and the
no-blocking sum for ``s = inf`` (``closed_form``), the CTMC of the worker
counts per clock offset and phase (``ctmc``, :mod:`~.ssp_chain`), and a vectorized Monte Carlo
recursion over iterations with the actual compute law (``simulate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb, prod
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import (
    BATCHES,
    check_iterations,
    check_tail,
    count_rate_interval,
    half_width,
    little_interval,
)
from queuesgd.distributions import Convolution, Deterministic, Distribution, Exponential, Shifted
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.orderstats import expected_max
from queuesgd.rng import as_generator
from queuesgd.schemes.barrier.ps_arrivals import (
    barrier_link_costs,
    check_send_buffer,
    shared_why,
    simulate_ps_ssp,
)
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.laws import ctmc_law, sample_compute
from queuesgd.schemes.ssp.ssp_chain import clock_offset_chain
from queuesgd.workload import Cluster, Workload

__all__ = ["StaleSynchronous"]

#: The PS link models: every worker's own uncontended transfers (default), or one shared PS link.
LINKS: tuple[str, ...] = ("dedicated", "shared")

#: Largest CTMC state count ``StaleSynchronous.state_count`` forms exactly; past it, ``math.inf``.
STATE_COUNT_CAP = 10**18


def _states(count: float) -> str:
    """A state count for a message: ``3,003``, or ``more than 10**18``."""
    return f"{count:,}" if math.isfinite(count) else f"more than {STATE_COUNT_CAP:.0e}"


@dataclass(frozen=True)
class StaleSynchronous(Scheme):
    """Stale synchronous parallel SGD (Ho et al., NIPS 2013) with staleness bound ``staleness``.

    Each worker repeats: compute a gradient (``workload.compute`` divided by
    its speed), then communicate -- push the gradient and pull the
    parameters, an exponential time of mean
    ``2 latency + (gradient_bytes + parameter_bytes) / bandwidth + update_time``
    per worker, with **no contention at the parameter server** (contention
    on the PS links is what :class:`~queuesgd.schemes.ps.async_ps.AsyncPS`
    models). A worker's clock counts its completed iterations; a worker at
    clock ``c`` may start the next iteration only when the slowest worker's
    clock is at least ``c - staleness``, else it blocks. Every completed
    iteration applies one gradient.

    Parameters
    ----------
    staleness : int or math.inf
        The bound ``s >= 0``: 0 is bulk-synchronous (a barrier every
        iteration), ``math.inf`` asynchronous.
    link : {"dedicated", "shared"}
        ``"dedicated"`` (the default): the model above, no contention.
        ``"shared"``: pushes and replies contend on the PS's one full-duplex
        link (:func:`~queuesgd.schemes.barrier.ps_arrivals.simulate_ps_ssp`: pushes
        FIFO on the incoming link, ``G/B`` each; the PS thread applies
        (``update_time``) and sends the replies (``P/B`` each) one at a
        time on its outgoing link; ``latency`` as a delay; deterministic
        transfers); method ``"simulate"`` only.
    send_buffer : float or str
        ``link="shared"``: bytes of each reply the PS host's socket buffer
        takes at once (0, the default: a send blocks the PS until the reply
        has left). The live PS's send returns when the rest fits in the
        buffer, so it applies the next gradient while the reply still goes;
        measure it (:func:`queuesgd.harness.duplex.measure_send_buffer`).
        As :class:`~queuesgd.schemes.barrier.backup.BackupWorkers`.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> p = predict(StaleSynchronous(staleness=2), w, Cluster(workers=1, bandwidth="1Gbit/s"))
    >>> round(p.iteration_rate, 6)          # alone: 1 / (0.1 + 2 x 10 MB / 125 MB/s)
    3.846154
    >>> StaleSynchronous(2, link="shared", send_buffer="1MB")
    StaleSynchronous(staleness=2, link='shared', send_buffer=1000000.0)
    """

    staleness: int | float = 1
    link: str = "dedicated"
    send_buffer: float = 0.0

    key: ClassVar[str] = "stale-synchronous"
    parameter_units: ClassVar[dict[str, str]] = {"send_buffer": "B"}
    #: Largest CTMC ``method="auto"`` builds; beyond it auto simulates.
    max_states: ClassVar[int] = 200_000

    def __post_init__(self) -> None:
        _checks.choice("StaleSynchronous.link", self.link, LINKS)
        held = check_send_buffer("StaleSynchronous.send_buffer", self.send_buffer, self.link)
        object.__setattr__(self, "send_buffer", held)
        s = self.staleness
        accepted = f"an integer >= 0, at most {_checks.MAX_COUNT:,}, or math.inf (asynchronous)"
        if isinstance(s, float) and math.isinf(s) and s > 0:
            return
        try:
            value = _checks.integer("StaleSynchronous.staleness", s, minimum=0, maximum=_checks.MAX_COUNT)
        except InvalidParameterError:
            raise InvalidParameterError("StaleSynchronous.staleness", s, accepted) from None
        object.__setattr__(self, "staleness", value)

    # ---- shared pieces ---------------------------------------------------------------
    @staticmethod
    def communication_time(workload: Workload, cluster: Cluster) -> tuple[float, float]:
        """``(communication, update)`` mean seconds of one worker's communicate phase.

        ``communication = 2 latency + (G + P) / B``; the phase lasts
        ``communication + update`` (exponential in every method).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", update_time="5ms")
        >>> StaleSynchronous.communication_time(w, Cluster(4, "1Gbit/s", latency="1ms"))
        (0.162, 0.005)
        """
        comm = (
            2.0 * cluster.latency + (workload.gradient_bytes + workload.parameter_bytes) / cluster.bandwidth
        )
        return float(comm), float(workload.update_time)

    @staticmethod
    def _groups(cluster: Cluster) -> dict[float, int]:
        groups: dict[float, int] = {}
        for s in cluster.speed_factors:
            groups[float(s)] = groups.get(float(s), 0) + 1
        return groups

    def state_count(self, workload: Workload, cluster: Cluster) -> int | float:
        """Number of CTMC states before removing the unreachable ones (no worker at offset 0).

        With ``k`` compute phases there are ``L = (s + 1)(k + 1) + k`` places
        per speed class (offset 0..s from the slowest worker x (k phases +
        communicating), plus blocked workers by the phase they will start
        in), so ``prod_c C(n_c + L - 1, L - 1)`` states: polynomial of degree
        ``L - 1`` in ``n``; e.g. exponential compute, s = 2, 8 workers:
        ``C(14, 6) = 3003``. Past :data:`STATE_COUNT_CAP` the count is not
        formed (a million workers at staleness 100 give a number of 440
        digits, at staleness ``10**6`` one of 600,000): ``math.inf``.

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> from queuesgd.distributions import Exponential
        >>> StaleSynchronous(2).state_count(Workload(Exponential(mean=0.1), 1e6), Cluster(8, "1GB/s"))
        3003
        """
        if math.isinf(self.staleness):
            raise NotRepresentable("StaleSynchronous(staleness=inf) has no finite clock-offset chain")
        k = ctmc_law(workload.compute)[0].phases
        L = (int(self.staleness) + 1) * (k + 1) + k
        groups = self._groups(cluster).values()
        # ln C(n + L - 1, L - 1) from lgamma first: the exact product is formed only where it is small
        log = sum(math.lgamma(n + L) - math.lgamma(L) - math.lgamma(n + 1) for n in groups)
        if log > math.log(STATE_COUNT_CAP) + 1e-6 * log + 1:
            return math.inf
        count = prod(comb(n + L - 1, L - 1) for n in groups)
        return count if count <= STATE_COUNT_CAP else math.inf

    # ---- method choice -----------------------------------------------------------------
    def caveats(self, cluster: Cluster, workload: Workload | None = None) -> tuple[str, ...]:
        """With ``link="dedicated"`` and several workers: no contention at the PS is modeled.

        Examples
        --------
        >>> from queuesgd import Cluster
        >>> StaleSynchronous(0).caveats(Cluster(8, "10Gbit/s"))  # doctest: +ELLIPSIS
        ("link='dedicated' assumes uncontended PS links: ...",)
        >>> StaleSynchronous(0, link="shared").caveats(Cluster(8, "10Gbit/s"))
        ()
        """
        return Scheme.caveats(self, cluster, workload) + self._caveats(cluster.workers)

    def _caveats(self, workers: int) -> tuple[str, ...]:
        if self.link != "dedicated" or workers == 1:
            return ()
        return (
            "link='dedicated' assumes uncontended PS links: the workers' pushes and replies never queue "
            "at the parameter server, so the throughput is an upper bound where they share its link "
            "(link='shared' models that contention)",
        )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        if self.link == "shared":
            return "simulate", "simulate: link='shared' follows every push and reply on the PS link"
        s = self.staleness
        if math.isinf(s):
            return "closed_form", "staleness=inf: no worker ever blocks, each runs at 1 / (compute + comm)"
        if cluster.stragglers is not None:
            return (
                "simulate",
                "RandomDelay stragglers: only the simulation draws the delayed workers per step",
            )
        if s == 0:
            return "closed_form", "staleness=0 is bulk-synchronous: E[max over workers] in closed form"
        count = self.state_count(workload, cluster)
        if count <= self.max_states:
            return "ctmc", f"exact CTMC of the clock offsets ({count:,} states at most)"
        return "simulate", f"the CTMC would have {_states(count)} states > {self.max_states:,}: Monte Carlo"

    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Staleness 0 (a barrier: order statistics) or infinite (independent workers).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> from queuesgd.distributions import Exponential
        >>> w = Workload(compute=Exponential(mean=0.1), gradient_bytes="1MB")
        >>> c = Cluster(workers=2, bandwidth="20MB/s")           # comm: exponential, mean 0.1 s
        >>> sol = StaleSynchronous(0).solve(w, c, "closed_form")
        >>> round(sol.iteration_rate, 9)      # 2 / E[max of two Erlang(2, mean 0.2)] = 2 / 0.275
        7.272727273
        """
        if self.link == "shared":
            raise NotRepresentable(shared_why("StaleSynchronous", "closed_form"))
        return self._closed_form(workload, cluster)

    def solve_ctmc(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """The exact CTMC of the workers' clock offsets (phase-type laws; a fit otherwise, stated)."""
        if self.link == "shared":
            raise NotRepresentable(shared_why("StaleSynchronous", "ctmc"))
        return self._ctmc(workload, cluster)

    def solve_simulate(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Monte Carlo of the clocks with the actual laws (``link="shared"``: of every message too)."""
        if self.link == "shared":
            return self._simulate_shared(workload, cluster, rng, iterations)
        return self._simulate(workload, cluster, rng, iterations)

    def _simulate_shared(
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        n = cluster.workers
        total = self.simulation_iterations if iterations is None else check_iterations(iterations)
        rounds = max(total // n, 2 * BATCHES + 10)
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        x = sample_compute(workload, cluster, gen, rounds)
        run = simulate_ps_ssp(
            x,
            self.staleness,
            **barrier_link_costs(workload, cluster, self.send_buffer),
            equal_rates=cluster.same_speeds,
        )
        comm = run.transfer
        waiting = max(run.cycle - run.compute - comm - run.update, 0.0)
        details = {"blocked_fraction": run.blocked_fraction, "updates": run.updates, "link": "shared"}
        reason = (
            f"Monte Carlo of {rounds} iterations per worker on a shared PS link: pushes FIFO on its incoming "
            "link, updates and replies one at a time on the PS, deterministic transfers"
        )
        if self.send_buffer:
            held = f"{self.send_buffer:.0f} B"
            reason += f"; a send returns once the rest of its reply fits in the socket buffer ({held})"
        return self._solution(
            run.rate,
            n,
            run.compute,
            comm,
            run.update,
            waiting,
            "simulate",
            reason,
            details,
            interval=run.interval,
            staleness=run.staleness,
        )

    # ---- closed forms ------------------------------------------------------------------
    def _closed_form(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        comm, upd = self.communication_time(workload, cluster)
        n = cluster.workers
        speeds = cluster.speed_factors
        mean_c = float(workload.compute.mean)
        if math.isinf(self.staleness):
            extra = 0.0
            if cluster.stragglers is not None:
                extra = cluster.stragglers.count * cluster.stragglers.delay / n
            cycles = mean_c / speeds + extra + comm + upd
            X = float(np.sum(1.0 / cycles))
            compute = float(np.sum((mean_c / speeds + extra) / cycles) / X)
            return self._solution(
                X,
                n,
                compute,
                comm,
                upd,
                0.0,
                "closed_form",
                "no blocking: X = sum_i 1 / (E[C_i] + comm)",
                {"blocked_fraction": 0.0},
            )
        if self.staleness != 0:
            raise NotRepresentable(
                f"StaleSynchronous(staleness={self.staleness}) has no closed form (only 0 and inf); "
                "use method='ctmc' or 'simulate'"
            )
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "StaleSynchronous with RandomDelay stragglers: the delayed set changes every step; "
                "use method='simulate'"
            )
        laws, note = self._sum_laws(workload, cluster)
        period = float(laws[0].mean) if n == 1 else expected_max(laws)
        X = n / period
        compute = float(np.mean(mean_c / speeds))
        waiting = period - compute - comm - upd
        reason = "bulk-synchronous barrier: X = n / E[max_i (C_i + comm_i)] (order statistics)"
        details: dict[str, Any] = {"blocked_fraction": waiting / period}
        if note:
            reason += f"; {note}"
            details["phase_type"] = note
        return self._solution(X, n, compute, comm, upd, waiting, "closed_form", reason, details)

    def _sum_laws(self, workload: Workload, cluster: Cluster) -> tuple[list[Distribution], str]:
        """Per-worker law of compute + exponential communicate (exact where possible)."""
        comm, upd = self.communication_time(workload, cluster)
        rate = 1.0 / (comm + upd)
        law = workload.compute
        note = ""
        cache: dict[float, Distribution] = {}
        for s in self._groups(cluster):
            if isinstance(law, Deterministic):
                cache[s] = Shifted(Exponential(rate), float(law.value) / s)
                continue
            ph, note = ctmc_law(law)
            ph = ph if s == 1.0 else ph.scaled(1.0 / s)
            cache[s] = Convolution(ph, Exponential(rate)).to_phase_type()
        return [cache[float(s)] for s in cluster.speed_factors], note

    # ---- CTMC --------------------------------------------------------------------------
    def _ctmc(self, workload: Workload, cluster: Cluster) -> SchemeSolution:
        if math.isinf(self.staleness):
            raise NotRepresentable(
                "StaleSynchronous(staleness=inf): no clock-offset chain; use method='closed_form'"
            )
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "StaleSynchronous with RandomDelay stragglers in a CTMC; use method='simulate'"
            )
        count = self.state_count(workload, cluster)
        if count > 2_000_000:
            raise StateSpaceTooLargeError(
                f"StaleSynchronous CTMC: {_states(count)} states > 2,000,000; use method='simulate'"
            )
        comm, upd = self.communication_time(workload, cluster)
        gamma = 1.0 / (comm + upd)
        ph, note = ctmc_law(workload.compute)
        groups = self._groups(cluster)
        laws = [ph if s == 1.0 else ph.scaled(1.0 / s) for s in groups]
        pops = list(groups.values())
        pi, nstate = clock_offset_chain(int(self.staleness), laws, pops, gamma)
        k = ph.phases
        s = int(self.staleness)
        L = (s + 1) * (k + 1) + k
        slot = np.arange(L)
        is_comm = (slot < (s + 1) * (k + 1)) & (slot % (k + 1) == k)
        is_blocked = slot >= (s + 1) * (k + 1)
        is_run = ~is_comm & ~is_blocked
        tot = nstate.sum(axis=1).astype(float)  # (S, L): all classes together
        mean = pi @ tot
        X = gamma * float(mean[is_comm].sum())
        n = cluster.workers
        computing, communicating, blocked = (float(mean[m].sum()) for m in (is_run, is_comm, is_blocked))
        reason = f"exact CTMC of the clock offsets ({len(pi):,} states)"
        details: dict[str, Any] = {"blocked_fraction": blocked / n, "states": len(pi)}
        if note:
            reason += f"; {note}"
            details["phase_type"] = note
        share = upd / (comm + upd)
        return self._solution(
            X,
            n,
            computing / X,
            communicating * (1 - share) / X,
            communicating * share / X,
            blocked / X,
            "ctmc",
            reason,
            details,
        )

    # ---- simulation --------------------------------------------------------------------
    def _simulate(
        self, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
    ) -> SchemeSolution:
        n = cluster.workers
        total = self.simulation_iterations if iterations is None else check_iterations(iterations)
        rounds = max(total // n, 50)
        # warm-up: a tenth of the iterations (above batchmeans.WARMUP): every worker starts at clock 0
        warm = max(rounds // 10, 5)
        gen = as_generator(np.random.default_rng() if rng is None else rng)
        comm, upd = self.communication_time(workload, cluster)
        C = sample_compute(workload, cluster, gen, rounds)
        M = gen.exponential(comm + upd, size=(rounds, n))
        s = self.staleness
        E = np.zeros((rounds + 1, n))  # E[k] = completion of iteration k (E[0] = 0)
        start = np.zeros((rounds, n))
        Bmax = np.zeros(rounds + 1)  # Bmax[k] = time every worker has completed k iterations
        lag = None if math.isinf(s) else int(s) + 1
        for r in range(1, rounds + 1):  # one vectorized step per iteration index, over all workers
            gate = Bmax[r - lag] if lag is not None and r - lag >= 0 else 0.0
            st = np.maximum(E[r - 1], gate)
            start[r - 1] = st
            E[r] = st + C[r - 1] + M[r - 1]
            Bmax[r] = E[r].max()
        t0, t1 = float(E[warm].max()), float(E[rounds].min())
        if not t1 > t0:
            raise InvalidParameterError("iterations", iterations, "more iterations (the run is too short)")
        times = E[1:]  # (rounds, n)
        flat = np.sort(times.ravel())
        in_win = (times > t0) & (times <= t1)
        nb = BATCHES
        rows = slice(warm, rounds)
        elapsed = (E[1:] - E[:-1])[rows]
        X, interval = count_rate_interval(times[in_win], t0, t1, nb)
        # Little's law, X = n / E[cycle], pools every worker's cycles alike: right where the workers'
        # rates are equal (a staleness bound) or their laws are (one speed).
        pooled = math.isfinite(s) or cluster.same_speeds
        what = f"StaleSynchronous simulation of {elapsed.size:,} worker cycles"
        if check_tail(elapsed, what, repaired=pooled) and pooled:
            interval = little_interval(elapsed.ravel(), n, X, nb)
        # staleness: other workers' updates between a worker's previous update (its read) and this one
        prev = E[:-1]
        stale = np.searchsorted(flat, times, side="left") - np.searchsorted(flat, prev, side="right")
        sel = in_win.copy()
        sel[0] = False
        order = np.argsort(times[sel])
        st_w = stale[sel][order]
        values, freq = np.unique(st_w, return_counts=True)
        batches = np.array([g.mean() for g in np.array_split(st_w, nb)])
        s_half = half_width(batches)
        blocked = (start - E[:-1])[rows]
        share = upd / (comm + upd)
        details = {
            "blocked_fraction": float(blocked.sum() / elapsed.sum()),
            "staleness_distribution": {int(v): float(f / st_w.size) for v, f in zip(values, freq)},
            "staleness_interval": (float(batches.mean() - s_half), float(batches.mean() + s_half)),
            "updates": int(in_win.sum()),
        }
        sol = self._solution(
            X,
            n,
            float(C[rows].mean()),
            float(M[rows].mean()) * (1 - share),
            float(M[rows].mean()) * share,
            float(blocked.mean()),
            "simulate",
            f"Monte Carlo of {rounds} iterations per worker ({warm} warm-up): actual compute law, "
            "exponential communicate",
            details,
            interval=interval,
            staleness=float(st_w.mean()),
        )
        return sol

    def _solution(
        self,
        X: float,
        n: int,
        compute: float,
        comm: float,
        update: float,
        waiting: float,
        method: str,
        reason: str,
        details: dict[str, Any],
        interval: tuple[float, float] | None = None,
        staleness: float | None = None,
    ) -> SchemeSolution:
        breakdown = {"compute": compute, "communication": comm, "update": update, "waiting": waiting}
        reason = "; ".join((reason, *self._caveats(n)))
        return SchemeSolution(
            iteration_rate=float(X),
            gradients_per_update=1.0,
            iteration_time=float(sum(breakdown.values())),
            breakdown=breakdown,
            method=method,
            reason=reason,
            # a worker reads right after its own update; counting per window or per update,
            # every other worker's open window holds each update once: mean n - 1 (docs).
            staleness=float(n - 1) if staleness is None else staleness,
            details=details,
            interval=interval,
            bottleneck="compute" if compute >= comm + update else "communication",
            model=None,
        )
