"""The "k of n" barrier engine shared by every synchronous scheme.

Every iteration all ``n`` workers compute a gradient; the barrier waits for
the first ``k`` of them; then one communication phase (push, update, pull, or
an all-reduce and the local optimizer step) runs; then the next iteration
starts. ``k = n`` for synchronous SGD (parameter server or all-reduce),
``k = n - b`` with ``b`` backup workers (Chen et al. 2016). The ``n - k``
workers still computing at the barrier either

- ``"cancel"``: abort, and restart with everybody after the communication
  phase. Iterations are then i.i.d. and the mean iteration time is exactly
  ``E[X_(k:n)] + comm`` for any compute laws (:func:`time_to_barrier`);
- ``"finish"``: complete their now useless computation (TensorFlow's
  ``SyncReplicasOptimizer``). Such a *stale* worker drops its gradient and
  starts a fresh computation at once if no communication phase is running,
  else when it ends; it may then be one of the first ``k`` of the current
  iteration. No closed form: :func:`barrier_net` is the exact GSPN (counting
  places, so identical workers are lumped) and :func:`simulate_barrier` a
  NumPy Monte Carlo with the actual laws.

Three roads, one model:

- :func:`time_to_barrier` -- ``E[X_(k:n)]`` from :mod:`queuesgd.orderstats`
  (random straggler delays by symmetry: ``c`` shifted laws and ``n - c``
  plain ones).
- :func:`barrier_net` / :func:`solve_barrier_ctmc` -- the GSPN and its CTMC.
- :func:`simulate_barrier` -- Monte Carlo over a matrix of compute times
  (:func:`~queuesgd.schemes.laws.sample_compute`), on the one round engine
  :func:`~queuesgd.schemes.barrier.kofn_sim.simulate_rounds` that the cutoffs' timers
  also run on.

:class:`~queuesgd.schemes.barrier.barrier.BarrierScheme` turns these into a
:class:`~queuesgd.schemes.base.Scheme`; :class:`~queuesgd.schemes.ps.sync_ps.SyncPS`,
the all-reduces, :class:`~queuesgd.schemes.barrier.backup.BackupWorkers` and
:class:`~queuesgd.schemes.allreduce.local_sgd.LocalSGD` only say what ``k``, the laws
of a round and the communication phase are.

Examples
--------
Four exponential workers of mean 1 s, wait for all, a 0.5 s exchange:
``H_4 + 0.5`` seconds per iteration, by all three roads.

>>> from queuesgd.distributions import Exponential
>>> law = Exponential(1.0)
>>> round(time_to_barrier([law] * 4, 4) + 0.5, 12)           # H_4 = 25/12
2.583333333333
>>> round(1 / solve_barrier_ctmc([law] * 4, 4, 0.5).rate, 12)
2.583333333333
>>> sim = simulate_barrier(law.sample(1, (20_000, 4)), 4, 0.5)
>>> sim.interval[0] < 4 / 2.583333 < sim.interval[1]          # gradients per second
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import (
    Distribution,
    Erlang,
    Exponential,
    HyperExponential,
    PhaseType,
    Shifted,
)
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.orderstats import expected_order_statistic, group_laws
from queuesgd.petri import PetriNet
from queuesgd.schemes.barrier.kofn_sim import STRAGGLERS, BarrierSimulation, simulate_barrier
from queuesgd.schemes.laws import add_phase_transitions, ctmc_law, worker_laws
from queuesgd.workload import Cluster, Workload

__all__ = [
    "AUTO_CTMC_STATES",
    "COMM_PHASES",
    "EXACT_PHASE_TYPE",
    "STRAGGLERS",
    "BarrierCTMC",
    "BarrierSimulation",
    "estimate_states",
    "barrier_net",
    "compute_laws",
    "mean_compute",
    "simulate_barrier",
    "solve_barrier_ctmc",
    "time_to_barrier",
]

#: Laws whose phase-type representation is exact (no fit in a CTMC).
EXACT_PHASE_TYPE: tuple[type, ...] = (Exponential, Erlang, HyperExponential, PhaseType)

#: Erlang phases standing for the (deterministic) communication phase in the
#: CTMC of "finish", where its law matters (stale workers finish during it or not).
COMM_PHASES = 20

_MAX_COMPOSITIONS = 20_000
#: ``auto`` runs the CTMC of "finish" only up to about this many markings (estimate).
AUTO_CTMC_STATES = 300_000


# ----------------------------------------------------------------------------- laws
def compute_laws(workload: Workload, cluster: Cluster) -> list[Distribution]:
    """Each worker's compute law for one iteration, random straggler delays included by symmetry.

    Without ``cluster.stragglers`` these are :func:`~queuesgd.schemes.laws.worker_laws`.
    With ``RandomDelay(c, d)`` and identical workers, which ``c`` workers are
    delayed does not matter to any order statistic, so the laws are ``c``
    copies of ``Shifted(C, d)`` and ``n - c`` of ``C``. Heterogeneous speeds
    together with random delays have no such representation
    (:class:`~queuesgd.errors.NotRepresentable`; simulate instead).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, RandomDelay
    >>> c = Cluster(3, "1GB/s", stragglers=RandomDelay(1, 0.5))
    >>> [law.mean for law in compute_laws(Workload(0.1, 1e6), c)]
    [0.6, 0.1, 0.1]
    """
    laws = worker_laws(workload, cluster)
    st = cluster.stragglers
    if st is None:
        return laws
    if not cluster.same_speeds:
        raise NotRepresentable(
            "random straggler delays (RandomDelay) on workers of different speeds: which workers are "
            "delayed changes the order statistic; use method='simulate'"
        )
    base = laws[0]
    return [Shifted(base, st.delay)] * st.count + [base] * (cluster.workers - st.count)


def mean_compute(workload: Workload, cluster: Cluster) -> float:
    """Mean own compute time of a worker (speeds and random delays included), seconds.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> mean_compute(Workload(0.1, 1e6), Cluster(2, "1GB/s", speeds=[1, 0.5]))   # (0.1 + 0.2) / 2
    0.15000000000000002
    """
    laws = worker_laws(workload, cluster)
    out = float(np.mean([float(law.mean) for law in laws]))
    if cluster.stragglers is not None:
        out += cluster.stragglers.count * cluster.stragglers.delay / cluster.workers
    return out


def time_to_barrier(laws: Sequence[Distribution], k: int) -> float:
    """``E[X_(k:n)]``: mean time until ``k`` of the independent computations are done.

    Exact for any laws (closed form for i.i.d. exponentials, quadrature
    otherwise; see :func:`~queuesgd.orderstats.expected_order_statistic`).

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> round(time_to_barrier([Exponential(1.0)] * 3, 2), 12)     # 1/3 + 1/2
    0.833333333333
    """
    laws = list(laws)
    if laws and all(law is laws[0] for law in laws):  # identical workers: one i.i.d. group, no hashing
        return float(expected_order_statistic(laws[0], k=k, n=len(laws)))
    return float(expected_order_statistic(laws, k=k))


# ----------------------------------------------------------------------------- the GSPN
def _compositions(counts: Sequence[int], k: int) -> list[tuple[int, ...]]:
    """Every ``(k_1, ..., k_G)`` with ``0 <= k_g <= counts[g]`` and ``sum = k``."""
    if len(counts) == 1:
        return [(k,)]
    total = math.prod(c + 1 for c in counts)
    if total > 50 * _MAX_COMPOSITIONS:
        raise NotRepresentable(
            f"a barrier over {len(counts)} groups of workers has too many ways of being reached "
            "(one immediate transition each); use method='simulate'"
        )
    out = [c for c in product(*(range(c + 1) for c in counts)) if sum(c) == k]
    if len(out) > _MAX_COMPOSITIONS:
        raise NotRepresentable(
            f"{len(out)} ways of reaching the barrier (one immediate transition each); use method='simulate'"
        )
    return out


def _stage(
    net: PetriNet, prefix: str, ph: PhaseType, target: str, tokens: int, *, ready: str | None
) -> tuple[list[str], str]:
    """Counting places for the phases of ``ph`` (infinite-server), exits into ``target``.

    Returns the phase places and the entry place: the initial phase when
    ``alpha`` is a unit vector, else ``ready`` with one weighted immediate
    start transition per initial phase. ``tokens`` start in the entry place.
    """
    alpha = np.asarray(ph.alpha, dtype=float)
    k = alpha.size
    if not np.isclose(alpha.sum(), 1.0, rtol=0, atol=1e-12):
        raise NotRepresentable("a phase-type compute law with an atom at zero (sum(alpha) < 1)")
    phases = [f"{prefix}[{i}]" for i in range(k)] if k > 1 else [prefix]
    first = np.flatnonzero(alpha > 0)
    unit = ready is None or first.size == 1
    for i, p in enumerate(phases):
        net.place(p, tokens if unit and i == first[0] else 0)
    entry = phases[int(first[0])]
    if not unit:
        entry = ready
        net.place(ready, tokens)
        for i in first:
            net.immediate(
                f"{prefix}.start[{i}]",
                inputs={ready: 1},
                outputs={phases[i]: 1},
                weight=float(alpha[i]),
                priority=1,
            )
    add_phase_transitions(net, prefix, ph, phases, target)
    return phases, entry


def barrier_net(
    groups: Sequence[tuple[PhaseType, int]],
    k: int,
    comm_mean: float,
    *,
    stragglers: str = "finish",
    comm_phases: int = 1,
    name: str = "barrier",
) -> PetriNet:
    """The GSPN of a "k of n" barrier with counting places (identical workers lumped).

    Parameters
    ----------
    groups : sequence of (PhaseType, int)
        Compute law and number of workers of each group of identical workers.
    k : int
        Gradients the barrier waits for (``1 <= k <= n``).
    comm_mean : float
        Mean duration of the communication phase after the barrier (``0``:
        none; the barrier then releases the workers at once).
    stragglers : {"cancel", "finish"}
        What the ``n - k`` workers still computing at the barrier do.
    comm_phases : int
        The communication phase is an Erlang of this many phases (1:
        exponential). Only its mean matters for "cancel" and for ``k = n``.
    name : str

    Returns
    -------
    PetriNet
        Per group ``w{g}`` (``w`` with one group): counting places
        ``w.fresh[i]`` (computing a fresh gradient, phase ``i``), ``w.done``,
        ``w.synced`` (in the communication phase), and for ``k < n``
        ``w.waiting`` (idle until the phase ends) and, for "finish",
        ``w.stale[i]`` and ``w.stale_done``; ``busy`` is marked during the
        phase, ``comm[j]`` are its phases. The iteration rate is the summed
        throughput of the transitions named ``comm.end...``.

    Notes
    -----
    Immediate transitions, highest priority first: the barrier (one per way
    ``(k_1, ..., k_G)`` of splitting the ``k`` gradients among the groups)
    moves ``k`` done workers to ``synced`` and marks ``busy``; while ``busy``
    is marked every fresh computation is turned stale (finish) or aborted
    into ``waiting`` (cancel), one token at a time; a stale worker that
    finishes waits if ``busy`` is marked and restarts fresh otherwise; at the
    end of the phase the synced workers restart and the waiting ones follow.

    Markings (exponential compute, one group): ``k = n``: ``n + comm_phases``;
    cancel: ``k + comm_phases``; finish: ``O(k (n - k + 1))``.

    Examples
    --------
    Two exponential workers (rate 1), wait for one, exponential exchange of
    mean 1, stale workers finish: 4 markings, ``4 g (g+1) / (3 g^2 + 6 g + 4)
    = 8/13`` iterations per second at ``g = 1`` (see the tests' renewal argument).

    >>> from queuesgd.distributions import Exponential
    >>> net = barrier_net([(Exponential(1.0).to_phase_type(), 2)], 1, 1.0)
    >>> sol = net.solve()
    >>> len(sol.space), round(sol.throughput("comm.end"), 12)
    (4, 0.615384615385)
    """
    stragglers = _checks.choice("stragglers", stragglers, STRAGGLERS)
    comm_phases = _checks.integer("comm_phases", comm_phases)
    counts = [int(c) for _, c in groups]
    n = sum(counts)
    k = _checks.integer("k", k)
    if k > n:
        raise InvalidParameterError("k", k, f"an integer 1 <= k <= n (= {n})")
    comm_mean = _checks.positive("comm_mean", comm_mean, allow_zero=True)
    late = k < n
    finish = late and stragglers == "finish"
    net = PetriNet(name)
    net.place("busy")
    tags = [f"w{g}" if len(groups) > 1 else "w" for g in range(len(groups))]
    fresh: list[list[str]] = []
    entry: list[str] = []
    for tag, (ph, count) in zip(tags, groups):
        net.place(f"{tag}.done")
        net.place(f"{tag}.synced")
        phases, ent = _stage(net, f"{tag}.fresh", ph, f"{tag}.done", count, ready=f"{tag}.ready")
        fresh.append(phases)
        entry.append(ent)
        if late:
            net.place(f"{tag}.waiting")
    comps = _compositions(counts, k)
    comm = [f"comm[{j}]" for j in range(comm_phases)] if comm_phases > 1 else ["comm"]
    if comm_mean > 0:
        for c in comm:
            net.place(c)
    # the barrier
    for idx, comp in enumerate(comps):
        ins = {f"{t}.done": kg for t, kg in zip(tags, comp) if kg}
        outs = {f"{t}.synced": kg for t, kg in zip(tags, comp) if kg}
        outs["busy"] = 1
        if comm_mean > 0:
            outs[comm[0]] = 1
        net.immediate("barrier" if len(comps) == 1 else f"barrier[{idx}]", ins, outs, weight=1.0, priority=6)
    if late:
        for g, (tag, (ph, _)) in enumerate(zip(tags, groups)):
            _late_workers(net, tag, ph, fresh[g], entry[g], finish)
    _communication_phase(net, tags, entry, comps, comm, comm_mean)
    return net


def _late_workers(net: PetriNet, tag: str, ph: PhaseType, fresh: list[str], entry: str, finish: bool) -> None:
    """What the workers of one group still computing at the barrier do ("finish" or "cancel")."""
    if finish:
        net.place(f"{tag}.stale_done")
        targets, _ = _stage(net, f"{tag}.stale", ph, f"{tag}.stale_done", 0, ready=None)
        net.immediate(
            f"{tag}.wait_stale",
            {f"{tag}.stale_done": 1, "busy": 1},
            {f"{tag}.waiting": 1, "busy": 1},
            weight=1.0,
            priority=4,
        )
        net.immediate(
            f"{tag}.restart_stale",
            {f"{tag}.stale_done": 1},
            {entry: 1},
            weight=1.0,
            priority=4,
            inhibitors={"busy": 1},
        )
    else:
        targets = [f"{tag}.waiting"] * len(fresh)
    for i, (src, dst) in enumerate(zip(fresh, targets)):
        net.immediate(
            f"{tag}.{'abandon' if finish else 'cancel'}[{i}]",
            {src: 1, "busy": 1},
            {dst: 1, "busy": 1},
            weight=1.0,
            priority=5,
        )
    net.immediate(
        f"{tag}.release",
        {f"{tag}.waiting": 1},
        {entry: 1},
        weight=1.0,
        priority=2,
        inhibitors={"busy": 1},
    )


def _communication_phase(
    net: PetriNet,
    tags: list[str],
    entry: list[str],
    comps: list[tuple[int, ...]],
    comm: list[str],
    comm_mean: float,
) -> None:
    """The Erlang communication phase after the barrier, and its end releasing the synced workers."""
    rate = len(comm) / comm_mean if comm_mean > 0 else 0.0
    if comm_mean > 0:
        for j in range(len(comm) - 1):
            net.timed(f"comm.{j}->{j + 1}", rate, {comm[j]: 1}, {comm[j + 1]: 1})
    for idx, comp in enumerate(comps):
        ins = {f"{t}.synced": kg for t, kg in zip(tags, comp) if kg}
        ins["busy"] = 1
        outs: dict[str, int] = {}
        for e, kg in zip(entry, comp):
            if kg:
                outs[e] = outs.get(e, 0) + kg
        tname = "comm.end" if len(comps) == 1 else f"comm.end[{idx}]"
        if comm_mean > 0:
            ins[comm[-1]] = 1
            net.timed(tname, rate, ins, outs)
        else:
            net.immediate(tname, ins, outs, weight=1.0, priority=3)


@dataclass(frozen=True)
class BarrierCTMC:
    """The CTMC solution of :func:`barrier_net`.

    Attributes
    ----------
    rate : float
        Iterations per second.
    states : int
        Tangible markings of the GSPN.
    notes : tuple of str
        Phase-type fits made (empty when every law was used as it is).
    net : PetriNet
    """

    rate: float
    states: int
    notes: tuple[str, ...]
    net: PetriNet


def solve_barrier_ctmc(
    laws: Sequence[Distribution],
    k: int,
    comm_mean: float,
    *,
    stragglers: str = "finish",
    comm_phases: int = 1,
    max_states: int = 2_000_000,
) -> BarrierCTMC:
    """Iteration rate of the barrier from the CTMC of :func:`barrier_net`.

    Each distinct law is one group of identical workers; a law that is not
    phase-type is replaced by its fit (:func:`~queuesgd.schemes.laws.ctmc_law`)
    and ``notes`` says so.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> from queuesgd.orderstats import exponential_order_statistic
    >>> res = solve_barrier_ctmc([Exponential(2.0)] * 1000, 1000, 0.0)
    >>> res.states, round(res.rate * exponential_order_statistic(2.0, 1000), 9)   # 1 / (H_n / mu)
    (1000, 1.0)
    """
    groups, notes = [], []
    for law, count in group_laws(laws):
        ph, note = ctmc_law(law)
        if note:
            notes.append(note)
        groups.append((ph, count))
    net = barrier_net(groups, k, comm_mean, stragglers=stragglers, comm_phases=comm_phases)
    sol = net.solve(max_states=max_states)
    rate = sum(float(sol.throughput(t)) for t in net.transition_names if t.startswith("comm.end"))
    return BarrierCTMC(rate=rate, states=len(sol.space), notes=tuple(notes), net=net)


def estimate_states(laws: Sequence[Distribution], late: int) -> float:
    """Rough number of tangible markings of the "finish" GSPN (for ``auto``)."""
    est = 1.0
    total_phases = 0
    for law, count in group_laws(laws):
        p = ctmc_law(law)[0].phases
        total_phases += p
        est *= math.comb(count + p, p)
    est *= math.comb(late + total_phases, total_phases)
    return est * (1 + COMM_PHASES)
