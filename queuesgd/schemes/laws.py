"""Per-worker compute laws for the schemes' three solution roads.

- :func:`worker_laws` -- each worker's compute-time law (speed factors
  applied), for closed forms and order statistics.
- :func:`symmetric_workers`, :func:`resolve_symmetric` and
  :func:`worker_stretches` -- for the task graphs: whether one drawn worker
  stands for all, and how each drawn worker's tasks are stretched or scaled
  by its compute law.
- :func:`sample_compute` -- a NumPy array (iterations x workers) of compute
  times with the actual laws, speeds and random straggler delays, for
  Monte Carlo simulation.
- :func:`ctmc_law` -- the phase-type law a CTMC uses for a compute law: the
  exact one where the law is phase-type, else a two-moment fit, with a note
  that says so.
- :func:`add_phase_type_stage` -- adds a phase-type activity to a Petri net
  as counting places (one per phase) with infinite-server transitions, so
  that identical workers are lumped: ``n`` workers in a stage of ``k``
  phases cost ``C(n + k - 1, k - 1)`` markings, not ``k**n``.

Examples
--------
>>> from queuesgd import Workload, Cluster
>>> sample_compute(Workload(0.1, 1e6), Cluster(3, "1GB/s"), rng=0, iterations=2).shape
(2, 3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd.batchmeans import MAX_SAMPLES, check_simulation_size
from queuesgd.distributions import Deterministic, Distribution, PhaseType, fit_phase_type
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.rng import as_generator
from queuesgd.workload import Cluster, Workload

__all__ = [
    "MAX_SAMPLES",
    "add_phase_transitions",
    "add_phase_type_stage",
    "check_sample_size",
    "ctmc_law",
    "resolve_symmetric",
    "sample_compute",
    "symmetric_workers",
    "worker_laws",
    "worker_stretches",
]


def worker_laws(workload: Workload, cluster: Cluster) -> list[Distribution]:
    """Each worker's compute-time law: ``workload.compute`` scaled by ``1 / speeds[i]``.

    Random straggler delays (``cluster.stragglers``) are *not* included:
    they hit a random set of workers every step.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> laws = worker_laws(Workload(0.1, 1e6), Cluster(2, "1GB/s", speeds=[1, 2]))
    >>> [law.mean for law in laws]
    [0.1, 0.05]
    """
    base = workload.compute
    if cluster.speeds is None:
        return [base] * cluster.workers
    cache: dict[float, Distribution] = {}
    out = []
    for s in cluster.speeds:
        if s not in cache:
            cache[s] = base if s == 1.0 else base.scaled(1.0 / s)
        out.append(cache[s])
    return out


def symmetric_workers(workload: Workload, cluster: Cluster) -> bool:
    """True when every worker is identical and deterministic (one drawn worker stands for all).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> symmetric_workers(Workload(0.1, "1MB"), Cluster(4, "1GB/s", speeds=[1, 1, 1, 0.5]))
    False
    """
    return isinstance(workload.compute, Deterministic) and cluster.same_speeds and cluster.stragglers is None


def resolve_symmetric(workload: Workload, cluster: Cluster, symmetric: bool | None) -> bool:
    """Whether a task graph draws one worker for all: ``symmetric``, else :func:`symmetric_workers`.

    Raises
    ------
    InvalidParameterError
        ``symmetric=True`` where the workers are not identical and deterministic.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> w, c = Workload(0.1, "1MB"), Cluster(4, "1GB/s")
    >>> resolve_symmetric(w, c, None), resolve_symmetric(w, c, False)
    (True, False)
    >>> resolve_symmetric(w, Cluster(2, "1GB/s", speeds=[1, 2]), True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: symmetric: got True; accepted: False or None: one drawn worker ...
    """
    exact = symmetric_workers(workload, cluster)
    if symmetric is None:
        return exact
    if symmetric and not exact:
        raise InvalidParameterError(
            "symmetric",
            symmetric,
            "False or None: one drawn worker stands for all only when they are identical and deterministic",
        )
    return bool(symmetric)


def worker_stretches(
    workload: Workload, cluster: Cluster, drawn: int
) -> tuple[list[tuple[float, str | None]], dict[str, Distribution]]:
    """How the compute tasks of each of the first ``drawn`` workers are timed in a task graph.

    A worker whose law (:func:`worker_laws`) is deterministic gets
    ``(mean_i / E[X], None)``: its tasks stretched by that factor. Any other
    gets ``(1.0, "x{w}")``: its tasks scaled by the random factor named
    ``"x{w}"``, its law divided by ``E[X]`` (``workload.compute_time``), which
    the returned mapping holds.

    Returns
    -------
    stretches : list of (float, str or None)
        One ``(stretch, scale)`` per drawn worker.
    factors : dict of str to Distribution
        The random factors, by name.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> from queuesgd.distributions import Exponential
    >>> worker_stretches(Workload(0.1, 1e6), Cluster(2, "1GB/s", speeds=[1, 2]), 2)[0]
    [(1.0, None), (0.5, None)]
    >>> s, f = worker_stretches(Workload(Exponential(10.0), 1e6), Cluster(2, "1GB/s"), 2)
    >>> s, [round(float(law.mean), 12) for law in f.values()]
    ([(1.0, 'x0'), (1.0, 'x1')], [1.0, 1.0])
    """
    laws = worker_laws(workload, cluster)
    mean = workload.compute_time
    stretches: list[tuple[float, str | None]] = []
    factors: dict[str, Distribution] = {}
    for w in range(drawn):
        law = laws[w]
        if isinstance(law, Deterministic):
            stretches.append((float(law.mean) / mean, None))
        else:
            scale = f"x{w}"
            factors[scale] = law.scaled(1.0 / mean)
            stretches.append((1.0, scale))
    return stretches, factors


def check_sample_size(iterations: int, workers: int) -> None:
    """Refuse a simulation whose ``iterations x workers`` compute times would exceed :data:`MAX_SAMPLES`.

    :func:`~queuesgd.batchmeans.check_simulation_size` with one value per worker.

    Raises
    ------
    StateSpaceTooLargeError
        With the memory it would need and what to lower.

    Examples
    --------
    >>> check_sample_size(20_000, 1_000_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: simulating 20,000 iterations of 1,000,000 workers draws ...
    """
    check_simulation_size(iterations, workers)


def sample_compute(
    workload: Workload, cluster: Cluster, rng: np.random.Generator | int | None, iterations: int
) -> np.ndarray:
    """Compute times of every worker in every iteration, shape ``(iterations, workers)``.

    Worker ``i`` draws from ``workload.compute`` divided by its speed; with
    ``cluster.stragglers = RandomDelay(k, d)``, ``k`` workers chosen
    uniformly anew each iteration get ``d`` seconds more.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, RandomDelay
    >>> c = Cluster(4, "1GB/s", stragglers=RandomDelay(1, 1.0))
    >>> x = sample_compute(Workload(0.1, 1e6), c, rng=1, iterations=5)
    >>> ((x - 0.1) > 0.5).sum(axis=1).tolist()        # one delayed worker per step
    [1, 1, 1, 1, 1]
    """
    n = cluster.workers
    check_sample_size(iterations, n)
    gen = as_generator(np.random.default_rng() if rng is None else rng)
    x = np.asarray(workload.compute.sample(gen, (iterations, n)), dtype=float)
    x = x / cluster.speed_factors[None, :]
    st = cluster.stragglers
    if st is not None:
        # k distinct workers per row: the k smallest of n uniform keys.
        keys = gen.random((iterations, n))
        chosen = np.argpartition(keys, st.count - 1, axis=1)[:, : st.count]
        np.put_along_axis(x, chosen, np.take_along_axis(x, chosen, axis=1) + st.delay, axis=1)
    return x


def ctmc_law(law: Distribution, *, k_max: int = 20) -> tuple[PhaseType, str]:
    """The phase-type law a CTMC uses for ``law``, and a note ('' when exact).

    Exponential, Erlang, hyperexponential and phase-type laws are used as
    they are; any other law is replaced by :func:`~queuesgd.distributions.fit_phase_type`
    (same mean and scv; at most ``k_max`` phases, so a deterministic law
    becomes an Erlang-``k_max``), and the note says so.

    Examples
    --------
    >>> from queuesgd.distributions import Deterministic, Exponential
    >>> ctmc_law(Exponential(2.0))[1]
    ''
    >>> ph, note = ctmc_law(Deterministic(0.1), k_max=10)
    >>> ph.phases
    10
    >>> note
    'Deterministic(value=0.1) replaced by its phase-type fit (10 phases, same mean, scv 0.1 instead of 0)'
    """
    try:
        return law.to_phase_type(), ""
    except NotRepresentable:
        pass
    ph = fit_phase_type(law, k_max=k_max)
    return ph, (
        f"{law!r} replaced by its phase-type fit ({ph.phases} phases, same mean, "
        f"scv {ph.scv:.3g} instead of {float(law.scv):.3g})"
    )


def add_phase_type_stage(
    net: Any,
    prefix: str,
    law: PhaseType,
    source: str,
    target: str,
    *,
    test: dict[str, int] | None = None,
    inhibitors: dict[str, int] | None = None,
    priority: int = 1,
) -> list[str]:
    """Add a phase-type activity from place ``source`` to place ``target`` for any number of tokens.

    Each token in ``source`` enters phase ``i`` with probability
    ``alpha[i]`` (immediate transitions ``{prefix}.start[i]``), moves
    between the counting places ``{prefix}[i]`` at the sub-generator's rates
    and leaves into ``target`` at the exit rates, all infinite-server, so
    tokens progress independently. A one-phase law skips the start
    transition's choice. ``test`` places must be marked for the activity to
    start (read arcs); ``inhibitors`` block the start.

    Returns the names of the phase places.

    Examples
    --------
    Two tokens, each an Erlang-2 of mean 1: the cycle rate is 2 / 1.

    >>> from queuesgd import PetriNet
    >>> from queuesgd.distributions import Erlang
    >>> net = PetriNet("erl")
    >>> _ = net.place("idle", 2); _ = net.place("done")
    >>> phases = add_phase_type_stage(net, "work", Erlang(2, mean=1.0).to_phase_type(), "idle", "done")
    >>> _ = net.immediate("back", inputs={"done": 1}, outputs={"idle": 1})
    >>> round(net.solve().throughput("back"), 12)
    2.0
    """
    alpha = np.asarray(law.alpha, dtype=float)
    k = alpha.size
    if not np.isclose(alpha.sum(), 1.0, rtol=0, atol=1e-12):
        raise NotRepresentable("a phase-type law with an atom at zero (sum(alpha) < 1) in a Petri net stage")
    phases = [f"{prefix}[{i}]" for i in range(k)] if k > 1 else [prefix]
    for p in phases:
        net.place(p)
    test = dict(test or {})
    for i in range(k):
        if alpha[i] <= 0:
            continue
        name = f"{prefix}.start[{i}]" if k > 1 else f"{prefix}.start"
        net.immediate(
            name,
            inputs={source: 1, **test},
            outputs={phases[i]: 1, **test},
            weight=float(alpha[i]) if np.count_nonzero(alpha) > 1 else None,
            priority=priority,
            inhibitors=inhibitors,
        )
    add_phase_transitions(net, prefix, law, phases, target)
    return phases


def add_phase_transitions(net: Any, prefix: str, law: PhaseType, phases: list[str], target: str) -> None:
    """The timed transitions of a phase-type activity over existing counting places ``phases``.

    Infinite-server moves ``{prefix}.i->j`` at the sub-generator's rates and
    exits ``{prefix}.end[i]`` into ``target`` at the exit rates; used by
    :func:`add_phase_type_stage` and by stages whose tokens start inside a
    phase.

    Examples
    --------
    >>> from queuesgd import PetriNet
    >>> from queuesgd.distributions import Erlang
    >>> net = PetriNet("e")
    >>> _ = net.place("w[0]", 1); _ = net.place("w[1]"); _ = net.place("done")
    >>> add_phase_transitions(net, "w", Erlang(2, 4.0).to_phase_type(), ["w[0]", "w[1]"], "done")
    >>> sorted(net.transitions)
    ['w.0->1', 'w.end[1]']
    """
    T = np.asarray(law.T, dtype=float)
    k = T.shape[0]
    exit_rates = law.exit_rates
    for i in range(k):
        for j in range(k):
            if i != j and T[i, j] > 0:
                net.timed(
                    f"{prefix}.{i}->{j}",
                    float(T[i, j]),
                    inputs={phases[i]: 1},
                    outputs={phases[j]: 1},
                    servers="infinite",
                )
        if exit_rates[i] > 1e-300:
            name = f"{prefix}.end[{i}]" if k > 1 else f"{prefix}.end"
            net.timed(
                name, float(exit_rates[i]), inputs={phases[i]: 1}, outputs={target: 1}, servers="infinite"
            )
