"""Arrival-time models of a parameter server on one shared full-duplex link (``link="shared"``).

The phase models of :class:`~queuesgd.schemes.barrier.backup.BackupWorkers`,
:class:`~queuesgd.schemes.barrier.cutoff.StaticCutoff` (communication after the
barrier, every push serialized) and
:class:`~queuesgd.schemes.ssp.ssp.StaleSynchronous` (no contention) leave out
what a real network does: a worker pushes as soon as it is done, while the
others still compute, and every push and every reply crosses the PS's one
link. These engines follow the messages, as the live loops of
:mod:`queuesgd.harness.ps_loops` and :mod:`queuesgd.harness.event_loops` do:

- **uplink** (into the PS): pushes in FIFO order of issue, ``push = G / B``
  seconds each; a push issued at ``t`` arrives at
  ``a = max(t + alpha, previous arrival) + G / B`` (the latency is a delay,
  not an occupancy);
- **the PS thread and its downlink**: the PS thread handles arrivals in
  order of arrival, applies updates (``u`` per gradient) and sends replies
  of ``pull = P / B`` seconds each on its downlink, in the order sent (a
  ``down_free`` clock); a send *blocks* the PS until each of its replies
  has only ``buffered`` seconds left to leave (``ps.send`` waits on every
  ``isend``, which returns once the kernel's socket buffer holds the rest;
  ``buffered = 0``: until the replies have left), and the worker gets a
  reply ``alpha`` after it has left. A send to ``K`` workers at once starts
  their ``isend``s together, so the replies share the link and all leave
  after ``K pull`` (no worker restarts before the last reply is out);
- a worker starts its next computation when it has the parameters.

With ``s`` PS shards every message is split over ``s`` identical links
(``G/(s B)``, ``P/(s B)``, ``u/s``).

:func:`simulate_ps_barrier` is one round of the synchronous PS (sync-ps,
backup workers, static cutoff) per loop pass; :func:`simulate_ps_ssp` is an
event loop of the stale-synchronous PS. Both are exact for their model in
law (Monte Carlo); see ``docs/schemes/backup-workers.md``,
``docs/schemes/cutoffs.md`` and ``docs/schemes/stale-synchronous.md``.

Examples
--------
Three workers of 10, 20 and 30 ms, the first two gradients (backups = 1),
8 ms per push and per reply: the second push arrives at 28 ms, the two
replies share the link and leave together at 44 ms, so the first round lasts
44 ms.

>>> x = np.tile([0.010, 0.020, 0.030], (50, 1))
>>> r = simulate_ps_barrier(x, 2, push=0.008, pull=0.008)
>>> round(float(r.barrier[0]), 12), round(float(r.duration[0]), 12), float(r.gradients[0])
(0.028, 0.044, 2.0)
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import BATCHES, check_tail, count_rate_interval, little_interval
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.barrier.kofn_sim import Rounds

__all__ = [
    "SSPRun",
    "barrier_link_costs",
    "check_send_buffer",
    "link_costs",
    "shared_why",
    "simulate_ps_barrier",
    "simulate_ps_ssp",
]


def link_costs(workload: Any, cluster: Any) -> dict[str, float]:
    """``push``, ``pull``, ``latency`` and ``update`` seconds of the shared-link engines for a cluster.

    ``s`` PS shards split every message over ``s`` identical links: ``G/(s B)``,
    ``P/(s B)``, ``u/s``.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> link_costs(Workload(0.1, "1MB", update_time="2ms"), Cluster(4, "1Gbit/s", latency="1ms"))
    {'push': 0.008, 'pull': 0.008, 'latency': 0.001, 'update': 0.002}
    """
    s = cluster.ps_shards
    return {
        "push": float(workload.gradient_bytes) / (s * cluster.bandwidth),
        "pull": float(workload.parameter_bytes) / (s * cluster.bandwidth),
        "latency": float(cluster.latency),
        "update": float(workload.update_time) / s,
    }


def check_send_buffer(name: str, value: Any, link: str) -> float:
    """A scheme's ``send_buffer`` in bytes (units accepted), ``>= 0``, and only with ``link="shared"``.

    Examples
    --------
    >>> check_send_buffer("BackupWorkers.send_buffer", "1MB", "shared")
    1000000.0
    """

    v = _checks.size(name, value)
    if v > 0 and link != "shared":
        raise InvalidParameterError(name, value, "0 unless link='shared' (the phase model has no sends)")
    return v


def barrier_link_costs(workload: Any, cluster: Any, send_buffer: float) -> dict[str, float]:
    """:func:`link_costs` and the ``buffered`` seconds of a reply for :func:`simulate_ps_barrier`.

    ``buffered`` is ``send_buffer / (s B)``, at most the reply's own time.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> barrier_link_costs(Workload(0.1, "1MB"), Cluster(4, "1Gbit/s"), 500_000)["buffered"]
    0.004
    """
    costs = link_costs(workload, cluster)
    costs["buffered"] = min(costs["pull"], float(send_buffer) / (cluster.ps_shards * cluster.bandwidth))
    return costs


def shared_why(name: str, method: str) -> str:
    """The refusal of a road that ``link="shared"`` does not have."""
    return (
        f"{name}(link='shared') has no {method.replace('_', ' ')} road: the arrival times of the pushes on "
        "the shared PS link are simulated (method='simulate'; no closed form, no CTMC)"
    )


def _nonneg(name: str, value: float) -> float:
    v = float(value)
    if not (v >= 0 and math.isfinite(v)):
        raise InvalidParameterError(name, value, "finite seconds >= 0")
    return v


def _link_seconds(
    push: float, pull: float, latency: float, update: float, buffered: float
) -> tuple[float, float, float, float, float]:
    """The simulations' ``(push, pull, latency, update, buffered)`` checked: finite seconds >= 0, ``buffered``
    at most ``pull``."""
    push, pull = _nonneg("push", push), _nonneg("pull", pull)
    alpha, u = _nonneg("latency", latency), _nonneg("update", update)
    beta = _nonneg("buffered", buffered)
    if beta > pull:
        raise InvalidParameterError("buffered", buffered, f"seconds between 0 and pull (= {pull})")
    return push, pull, alpha, u, beta


def simulate_ps_barrier(
    samples: np.ndarray,
    k: int | None = None,
    timer: float = math.inf,
    *,
    push: float = 0.0,
    pull: float = 0.0,
    latency: float = 0.0,
    update: float = 0.0,
    buffered: float = 0.0,
) -> Rounds:
    """Rounds of the synchronous PS on a shared link, with the arrival time of every push.

    Round ``j`` (parameter version ``j``) starts at ``S_j`` (``S_0 = 0``, every
    worker computing). The PS takes the pushes in order of arrival: a fresh
    one (computed on version ``j``) counts; a stale one is dropped and, with
    ``"finish"``, answered at once with version ``j`` (the worker then starts
    a fresh computation). The barrier falls at the arrival of the ``k``-th
    fresh push, or at ``S_j + timer`` if some fresh push arrived by then
    (every one that arrived by ``S_j + timer`` counts), or else at the first
    fresh arrival after it; the PS checks the cutoff before taking each
    message, so a reply that keeps it busy past the cutoff ends the wait.
    Then the PS applies the ``K`` gradients (``K update``, once its thread
    is free) and sends version ``j + 1`` to the ``K`` contributors at once:
    the replies share the link and all leave ``K pull`` later, when the
    round ends (``S_{j+1}``). Late
    workers finish (``stragglers="finish"``, what the live harness runs):
    their pushes still cross the uplink, are dropped and answered.
    Pushes that arrive during the update and the replies are handled at
    ``S_{j+1}`` (stale, answered with version ``j + 1``).

    Parameters
    ----------
    samples : ndarray, shape (rounds, n)
        ``samples[j, i]``: worker ``i``'s computation on version ``j`` (a
        worker computes at most once per version). ``rounds - 1`` rounds run.
    k : int, optional
        Fresh gradients the barrier waits for (``n``).
    timer : float
        The cutoff after the round's start (``inf``: none).
    push, pull : float
        Seconds a push occupies the uplink, a reply the PS (``G/B``, ``P/B``).
    latency : float
        One-way delay of every message (``alpha``).
    update : float
        PS seconds per gradient applied.
    buffered : float
        Seconds of a reply (at the link's rate) that the kernel's socket
        buffer takes at once (``send_buffer / B``, at most ``pull``): a send
        blocks the PS only until each of its replies has that much left to
        leave, and the replies still occupy the PS's downlink in the order
        they were sent (0: a send blocks until its replies have left).

    Returns
    -------
    Rounds
        Per round: ``gradients`` ``K``, ``barrier`` ``B_j - S_j``,
        ``compute`` (mean seconds of computation a worker started in the
        round), ``update`` (``K update``) and ``communication`` (the rest of
        the round: waiting for the PS thread, then the replies).

    Examples
    --------
    Free links: the phase model's rounds (here every round lasts the slowest of the first two).

    >>> r = simulate_ps_barrier(np.tile([1.0, 2.0, 3.0], (10, 1)), 2)
    >>> r.duration[:3].tolist(), r.gradients[:3].tolist()
    ([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise InvalidParameterError("samples", getattr(x, "shape", x), "a 2-D array (rounds >= 2, workers)")
    rounds, n = x.shape[0] - 1, x.shape[1]
    k = n if k is None else _checks.integer("k", k)
    if k > n:
        raise InvalidParameterError("k", k, f"an integer 1 <= k <= n (= {n})")
    T = float(timer)
    if not T > 0:
        raise InvalidParameterError("timer", timer, "seconds > 0 (inf: none)")
    push, pull, alpha, u, beta = _link_seconds(push, pull, latency, update, buffered)
    xs = x.tolist()

    cols = {f: np.zeros(rounds) for f in ("gradients", "barrier", "compute", "communication", "update")}
    started = np.zeros(rounds)  # computation time started per round (all workers)
    up_free = 0.0  # when the uplink has delivered its last push
    down_free = 0.0  # when the PS's downlink has sent every reply queued on it
    ps_free = 0.0  # when the PS thread (and the downlink it sends on) is free
    # computations running: (push time, seq, worker, version); in flight: (arrival, worker, version)
    issues: list[tuple[float, int, int, int]] = []
    flight: deque[tuple[float, int, int]] = deque()
    seq = 0
    for i in range(n):
        heapq.heappush(issues, (xs[0][i], seq, i, 0))
        seq += 1
        started[0] += xs[0][i]
    S = 0.0
    for j in range(rounds):
        deadline = S + T
        fresh: list[int] = []
        barrier = math.nan
        while True:
            # A push enters the uplink (FIFO in order of issue) once no push issued later can come
            # before it: new computations start only after an arrival the PS handles, or the cutoff.
            horizon = flight[0][0] if flight else math.inf
            if fresh:
                horizon = min(horizon, deadline)
            if issues and issues[0][0] <= horizon:
                t, _, i, v = heapq.heappop(issues)
                up_free = max(t + alpha, up_free) + push
                flight.append((up_free, i, v))
                continue
            if fresh and (not flight or flight[0][0] > deadline or ps_free >= deadline):
                barrier = deadline  # the cutoff passed (live: checked before taking the next message)
                # pushes in by the cutoff but not yet handled: the fresh ones count, the others wait
                while issues and issues[0][0] <= deadline:
                    t, _, w, vw = heapq.heappop(issues)
                    up_free = max(t + alpha, up_free) + push
                    flight.append((up_free, w, vw))
                keep: deque[tuple[float, int, int]] = deque()
                for m in flight:
                    if m[0] <= deadline and m[2] == j:
                        fresh.append(m[1])
                    else:
                        keep.append(m)
                flight = keep
                break
            if not flight:  # pragma: no cover - impossible by construction
                raise AssertionError("a round with no pending push")
            a, i, v = flight[0]
            flight.popleft()
            if v == j:
                fresh.append(i)
                if len(fresh) >= k or a >= deadline:
                    barrier = a
                    break
            else:  # stale: dropped, answered at once with version j
                start = max(a, ps_free, S)
                sent = max(start, down_free)
                down_free = sent + pull
                ps_free = down_free - beta  # the PS waits until only the buffered part is left
                c = xs[j][i]
                started[j] += c
                heapq.heappush(issues, (down_free + alpha + c, seq, i, j))
                seq += 1
        K = len(fresh)
        done_update = max(barrier, ps_free) + K * u
        targets = sorted(fresh)
        got = {}
        # The replies leave together (one isend per contributor, then a wait on all of them), so they
        # share the link and end together after K pulls.
        sent = max(done_update, down_free)
        down_free = sent + len(targets) * pull
        for i in targets:
            got[i] = down_free + alpha
        # each of the K replies progresses at 1/K of the rate: the PS waits until each has `beta` left
        ps_free = max(done_update, sent + len(targets) * (pull - beta))
        for i, g in got.items():
            c = xs[j + 1][i]
            if j + 1 < rounds:
                started[j + 1] += c
            heapq.heappush(issues, (g + c, seq, i, j + 1))
            seq += 1
        end = ps_free
        cols["gradients"][j] = K
        cols["barrier"][j] = barrier - S
        cols["update"][j] = K * u
        cols["communication"][j] = end - barrier - K * u
        S = end
    cols["compute"] = started / n
    return Rounds(**cols)


# ----------------------------------------------------------------------------- stale synchronous
@dataclass(frozen=True)
class SSPRun:
    """A run of :func:`simulate_ps_ssp` measured after its warm-up.

    Attributes
    ----------
    rate : float
        Updates per second (all workers).
    interval : tuple of float
        95% batch-means interval of ``rate`` (batches of equal time,
        :func:`queuesgd.batchmeans.count_rate_interval`). Where the workers' cycles have a tail too heavy
        for it and their rates are equal (a finite staleness, or ``equal_rates``), Little's law's
        (:func:`queuesgd.batchmeans.little_interval`); either way such cycles warn
        (:func:`queuesgd.batchmeans.check_tail`).
    cycle : float
        A worker's mean iteration (``n / rate``).
    compute, transfer, update : float
        Mean seconds per iteration a worker computes, its messages spend on
        the wire without queueing (``2 alpha + push + pull``), and the PS
        applies its gradient.
    staleness : float
        Mean updates applied between a worker's read of the parameters and
        its own update.
    blocked_fraction : float
        Fraction of the time a worker waits for the staleness bound (from
        its update until its reply starts to leave the PS).
    updates : int
        Updates counted.
    update_times : ndarray
        When every update of the whole run was applied (the end of its
        ``update`` on the PS thread), in order, warm-up and tail included.
    """

    rate: float
    interval: tuple[float, float]
    cycle: float
    compute: float
    transfer: float
    update: float
    staleness: float
    blocked_fraction: float
    updates: int
    update_times: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)


def _cycles_ending_in(times: np.ndarray, who: np.ndarray, inwin: np.ndarray) -> np.ndarray:
    """Each worker's iterations that end in the window (``inwin``), from its previous counted apply to
    this one, in order of their ends; a worker's first apply has no previous one and is left out."""
    cycles = np.full(times.size, np.nan)
    for w in np.unique(who):
        mine = np.flatnonzero(who == w)
        cycles[mine[1:]] = np.diff(times[mine])
    return cycles[inwin & ~np.isnan(cycles)]


def simulate_ps_ssp(
    samples: np.ndarray,
    staleness: float,
    *,
    push: float = 0.0,
    pull: float = 0.0,
    latency: float = 0.0,
    update: float = 0.0,
    buffered: float = 0.0,
    warmup: float = 0.1,
    batches: int = BATCHES,
    equal_rates: bool = False,
) -> SSPRun:
    """The stale-synchronous PS on a shared link: one event loop, every message on the wire.

    A worker computes (``samples[c, i]`` for its ``c``-th iteration), pushes
    (uplink FIFO), and the PS thread, in order of arrival, applies the
    gradient (``update``) and at once counts the worker's iteration: its
    clock ``c`` becomes ``c + 1`` and it may have the new parameters when
    every clock is ``>= c + 1 - staleness`` (else it waits; every clock
    change releases the waiting workers that may go, in worker order). A
    release sends the parameters, as :func:`simulate_ps_barrier` answers a
    stale push: the reply takes the PS's downlink for ``pull`` once the
    link has sent the replies before it (``down_free``), the send blocks
    the PS thread until the reply has ``buffered`` seconds left to leave
    (``down_free - buffered``), and the worker gets the parameters
    ``latency`` after the reply has left (``down_free + latency``) and
    computes again. With ``buffered = 0`` every send blocks the PS thread
    for its whole ``pull``.

    Parameters
    ----------
    samples : ndarray, shape (iterations, n)
    staleness : int or inf
    push, pull, latency, update, buffered : float
        As :func:`simulate_ps_barrier` (``0 <= buffered <= pull``).
    warmup : float
        Fraction of the run's time left out at its start.
    batches : int
        Batches of the interval.
    equal_rates : bool
        The workers' long-run rates are equal whatever the staleness (their compute laws are alike):
        Little's law may then pool their cycles for the interval where they are heavy-tailed.

    Returns
    -------
    SSPRun

    Examples
    --------
    One worker of 10 ms, 2 ms per push and per reply: a 14 ms cycle.

    >>> run = simulate_ps_ssp(np.full((2000, 1), 0.010), 1, push=0.002, pull=0.002)
    >>> round(run.cycle, 4)
    0.014
    >>> np.diff(run.update_times[:4]).round(6).tolist()
    [0.014, 0.014, 0.014]

    A buffered send frees the PS thread early, but the worker still waits
    for its reply to leave the link: alone, the cycle stays 14 ms.

    >>> run = simulate_ps_ssp(np.full((2000, 1), 0.010), 1, push=0.002, pull=0.002, buffered=0.002)
    >>> round(run.cycle, 4)
    0.014
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 * batches or x.shape[1] < 1:
        raise InvalidParameterError(
            "samples", getattr(x, "shape", x), f"a 2-D array (iterations >= {2 * batches}, workers)"
        )
    iters, n = x.shape
    s = float(staleness)
    push, pull, alpha, u, beta = _link_seconds(push, pull, latency, update, buffered)
    xs = x.tolist()
    clocks = [0] * n
    read = [0] * n  # version each worker read
    version = 0
    up_free = ps_free = 0.0
    down_free = 0.0  # when the PS's downlink has sent every reply queued on it
    blocked: list[int] = []
    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, worker)
    seq = 0
    t_apply: list[float] = []
    who: list[int] = []  # whose iteration each apply counted
    stale: list[int] = []
    blocked_time = 0.0
    t_reply = [0.0] * n  # when a worker's iteration was counted (its apply done)
    stops: list[float] = []  # when a worker ran out of samples
    for i in range(n):
        events.append((xs[0][i], seq, "push", i))
        seq += 1
    heapq.heapify(events)
    horizon = iters - 1  # a worker stops at this clock (the samples run out)
    while events:
        t, _, kind, i = heapq.heappop(events)
        if kind == "push":  # the computation ends: the push enters the uplink
            up_free = max(t + alpha, up_free) + push
            heapq.heappush(events, (up_free, seq, "apply", i))
        else:  # "apply", on the PS thread in order of arrival; then the clock advances at once
            start = max(t, ps_free)
            ps_free = start + u
            stale.append(version - read[i])
            version += 1
            t_apply.append(ps_free)
            who.append(i)
            t = ps_free
            clocks[i] += 1
            t_reply[i] = t
            blocked.append(i)
            low = min(clocks)
            for w in sorted(blocked):
                if clocks[w] >= horizon:
                    blocked.remove(w)
                    stops.append(t)
                elif low >= clocks[w] - s:
                    blocked.remove(w)
                    start = max(t, ps_free)
                    # as simulate_ps_barrier's answer to a stale push: the reply queues for the downlink,
                    # the PS waits until only its buffered part is left (beta = 0: until it has left, so
                    # down_free <= ps_free and sent == start)
                    sent = max(start, down_free)
                    blocked_time += sent - t_reply[w]
                    down_free = sent + pull
                    ps_free = down_free - beta
                    read[w] = version
                    c = xs[clocks[w]][w]
                    heapq.heappush(events, (down_free + alpha + c, seq, "push", w))
                    seq += 1
        seq += 1
    times = np.asarray(t_apply)
    t_end = float(times[-1]) if times.size else 0.0
    t1 = min(stops, default=t_end)  # measure while every worker still runs
    t0 = warmup * t1
    inwin = (times > t0) & (times <= t1)
    count = int(inwin.sum())
    if count < 2 * batches or not t1 > t0:
        raise InvalidParameterError("iterations", iters, "more iterations (the run is too short)")
    rate, interval = count_rate_interval(times[inwin], t0, t1, batches)
    cycles = _cycles_ending_in(times, np.asarray(who), inwin)
    # Little's law, X = n / E[cycle], pools every worker's cycles alike: right where their rates are equal
    # (a staleness bound, or workers alike); then cycles too heavy-tailed for the batches take it.
    pooled = (math.isfinite(s) or equal_rates) and cycles.size >= 2 * batches
    if (
        check_tail(cycles, f"the SSP simulation of {iters:,} iterations of {n} workers", repaired=pooled)
        and pooled
    ):
        interval = little_interval(cycles, n, rate, batches)
    cycle = n / rate
    return SSPRun(
        rate=rate,
        interval=interval,
        cycle=cycle,
        compute=float(x.mean()),
        transfer=2 * alpha + push + pull,
        update=u,
        staleness=float(np.asarray(stale)[inwin].mean()),
        blocked_fraction=min(blocked_time / (n * t_end), 1.0) if t_end > 0 else 0.0,
        updates=count,
        update_times=times,
    )
