"""A SimPy discrete-event peer of the live parameter-server loops on one shared PS link.

An independent peer for :mod:`queuesgd.schemes.barrier.ps_arrivals`, written from the
loops' description (``queuesgd/harness/runners.py``, ``ps_loops.barrier_ps``,
``ps_worker``, ``event_loops.event_ps``), process by process:

- a *worker* computes on the version it holds, then its push waits ``alpha``
  and takes the PS's incoming link (a ``simpy.Resource``: FIFO by request)
  for ``G/B``; the message lands in the PS's inbox (a ``simpy.Store``)
  stamped with its arrival time; the worker waits for a reply in its own
  mailbox. With ``cancel`` a reply arriving during a computation aborts it.
- the *barrier PS* (sync, backup workers, static cutoff) is the loop of
  ``barrier_ps``: take messages until it has ``need`` fresh ones, or the
  cutoff passed with at least one; a stale message is dropped and
  (finish) answered at once; messages past the cutoff wait for the next
  round; apply (``K u``); send the new version to the contributors (finish)
  or to all (cancel). A send to ``K`` workers starts their ``isend``s
  together and waits for all: the replies queue for the PS's downlink
  (a ``simpy.Resource``), share it, and all leave after ``K P/B``; the PS
  is held until each has only its buffered part left (``buffered``; 0:
  until they have left); each reaches its worker ``alpha`` later.
- the *SSP PS* is the loop of ``event_ps`` on a real network: for each
  message in arrival order, apply (``u``), count the sender's clock, and
  release every blocked worker whose clock ``c`` satisfies
  ``min(clocks) >= c - s`` (in rank order), sending it the parameters: the
  reply queues for the PS's downlink (its own ``simpy.Resource``), holds it
  for ``P/B``, and the PS is held until the reply has only its buffered
  part left (``buffered``; 0: until it has left); the worker has it
  ``alpha`` after it has left.

Compute times come from a given array: ``x[v, i]`` is worker ``i``'s
computation on version ``v`` (barrier PS) or its ``v``-th computation (SSP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

simpy = pytest.importorskip("simpy")  # the `peers` extra: without it, tests using this peer skip


@dataclass
class _Msg:
    src: int
    tag: int
    t: float


@dataclass
class PeerRounds:
    """Per round of the barrier PS: start, barrier and end times, gradients applied."""

    start: np.ndarray
    barrier: np.ndarray
    end: np.ndarray
    applied: np.ndarray


def barrier_ps(
    x: np.ndarray,
    need: int,
    cutoff: float | None = None,
    *,
    push: float,
    pull: float,
    alpha: float = 0.0,
    update: float = 0.0,
    cancel: bool = False,
    buffered: float = 0.0,
) -> PeerRounds:
    """Run ``x.shape[0] - 1`` rounds of the barrier PS; return its per-round times.

    ``buffered``: seconds of each reply the socket buffer takes at once; the PS's
    send returns when every reply of it has only that much left to leave.
    """
    env = simpy.Environment()
    rounds, n = x.shape[0] - 1, x.shape[1]
    uplink = simpy.Resource(env, capacity=1)
    downlink = simpy.Resource(env, capacity=1)
    inbox = simpy.Store(env)
    mailbox = [simpy.Store(env) for _ in range(n)]
    rec: dict[str, list[float]] = {"start": [], "barrier": [], "end": [], "applied": []}

    def deliver(w: int, version: int):
        yield env.timeout(alpha)
        yield mailbox[w].put(version)

    def transmit(ranks, version: int, returned):
        with downlink.request() as req:  # the replies of one send share the link and leave together
            yield req
            hold = pull * len(ranks)
            returned_at = len(ranks) * (pull - buffered)
            yield env.timeout(returned_at)
            returned.succeed()
            yield env.timeout(hold - returned_at)
        for w in ranks:
            env.process(deliver(w, version))

    def send(ranks, version: int):
        returned = env.event()
        env.process(transmit(sorted(ranks), version, returned))
        yield returned  # isend + wait: back when only the buffered part of each reply is left

    def worker(i: int):
        version = 0
        while version < rounds:
            got = mailbox[i].get()
            done = env.timeout(float(x[version, i]))
            if cancel:
                yield done | got
                if got.triggered:  # new parameters during the computation: abort
                    version = got.value
                    continue
            else:
                yield done
            yield env.timeout(alpha)
            with uplink.request() as req:
                yield req
                yield env.timeout(push)
            yield inbox.put(_Msg(i, version, env.now))
            version = yield got

    def ps():
        version = 0
        start = env.now
        pending: list[_Msg] = []
        for _ in range(rounds):
            fresh: dict[int, _Msg] = {}
            deadline = math.inf if cutoff is None else start + cutoff
            barrier = None
            while barrier is None:
                if fresh and env.now >= deadline:
                    barrier = deadline
                    break
                if pending:
                    m = pending.pop(0)
                else:
                    get = inbox.get()
                    if fresh and math.isfinite(deadline):
                        yield get | env.timeout(deadline - env.now)
                        if not get.triggered:
                            get.cancel()
                            continue
                    else:
                        yield get
                    m = get.value
                if m.tag == version and m.src not in fresh:
                    if fresh and m.t > deadline:
                        pending.append(m)
                        barrier = deadline
                        break
                    fresh[m.src] = m
                    if len(fresh) >= need:
                        barrier = m.t
                    elif m.t >= deadline:
                        barrier = m.t
                elif not cancel:
                    yield from send([m.src], version)
            if cutoff is not None and barrier == deadline:
                while inbox.items:
                    m = yield inbox.get()
                    if m.tag == version and m.src not in fresh and m.t <= deadline:
                        fresh[m.src] = m
                    else:
                        pending.append(m)
            k = len(fresh)
            yield env.timeout(k * update)
            version += 1
            yield from send(range(n) if cancel else fresh, version)
            rec["start"].append(start)
            rec["barrier"].append(barrier)
            rec["end"].append(env.now)
            rec["applied"].append(k)
            start = env.now

    for i in range(n):
        env.process(worker(i))
    done = env.process(ps())
    env.run(until=done)
    return PeerRounds(*(np.array(rec[f], dtype=float) for f in ("start", "barrier", "end", "applied")))


def ssp_ps(
    x: np.ndarray,
    staleness: float,
    *,
    push: float,
    pull: float,
    alpha: float = 0.0,
    update: float = 0.0,
    buffered: float = 0.0,
) -> np.ndarray:
    """Run the stale-synchronous PS; the times of every update until a worker's last one is applied.

    Worker ``i`` computes ``x[c, i]`` for its ``c``-th iteration; the run stops at the update that
    completes some worker's ``x.shape[0]``-th iteration (that update included). ``buffered``: seconds
    of each reply the socket buffer takes at once; a send returns when the reply has only that much
    left to leave.
    """
    env = simpy.Environment()
    steps, n = x.shape
    uplink = simpy.Resource(env, capacity=1)
    downlink = simpy.Resource(env, capacity=1)
    inbox = simpy.Store(env)
    mailbox = [simpy.Store(env) for _ in range(n)]
    applied: list[float] = []
    over = env.event()

    def transmit(w: int, returned):
        with downlink.request() as req:  # replies leave one after another, in the order sent
            yield req
            yield env.timeout(pull - buffered)
            returned.succeed()  # only the buffered part is left: the send returns
            yield env.timeout(buffered)
        yield env.timeout(alpha)
        yield mailbox[w].put(True)

    def worker(i: int):
        for c in range(steps):
            yield env.timeout(float(x[c, i]))
            yield env.timeout(alpha)
            with uplink.request() as req:
                yield req
                yield env.timeout(push)
            yield inbox.put(_Msg(i, c, env.now))
            yield mailbox[i].get()

    def ps():
        clocks = [0] * n
        blocked: set[int] = set()
        while True:
            m = yield inbox.get()
            yield env.timeout(update)
            applied.append(env.now)
            clocks[m.src] += 1
            if clocks[m.src] >= steps:  # a worker has used its last sample
                over.succeed()
                return
            blocked.add(m.src)
            for w in sorted(blocked):
                if min(clocks) >= clocks[w] - staleness:
                    blocked.discard(w)
                    returned = env.event()
                    env.process(transmit(w, returned))
                    yield returned

    for i in range(n):
        env.process(worker(i))
    env.process(ps())
    env.run(until=over)
    return np.array(applied)
