"""Event-driven coordinators: the async-ps / stale-synchronous PS and the eager-SGD coordinator.

Rank 0 coordinates, ranks ``1 .. n`` run :func:`~queuesgd.harness.ps_loops.ps_worker`;
see :mod:`~queuesgd.harness.runners` for the semantics each emulates.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from typing import Any

import numpy as np

from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.plumbing import Clock, Msg, PSState, base_record
from queuesgd.harness.shaping import Shaper

__all__ = ["eager_ps", "event_ps"]


def event_ps(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    down: Any,
    *,
    staleness: float,
    contention: bool,
) -> None:
    """The parameter server of async-ps and stale-synchronous (rank 0): an update per gradient, as it arrives.

    The workers run :func:`~queuesgd.harness.ps_loops.ps_worker` with
    ``stop_by_version=False``. Each gradient is applied on its own; under an
    active shaper it is applied after ``alpha`` plus its transfer (queued
    behind the uplink's earlier transfers when ``contention``), and its
    reply leaves after the transfer back plus ``alpha`` (the downlink queued
    likewise). A worker at clock ``c`` gets its reply only when every
    worker's clock is at least ``c - staleness`` (``math.inf``: asynchronous).

    Parameters
    ----------
    ctx : WorkerContext
        This process's place in the group (rank 0) and its record sink.
    key : str
        The live scheme (``"async-ps"``, ``"stale-synchronous"``), written into the records.
    live : EmulatedCompute or RealModel
        The workload: the PS's replica of the model (:class:`~queuesgd.harness.plumbing.PSState`).
    steps, warmup : int
        Steps per worker; the updates of gradients from a worker's first ``warmup`` steps are marked warm-up.
    shaper : Shaper
        The emulated network (inactive: none).
    seed : int
        Seed of the PS's replica.
    down : process group
        The PS's group for its replies (:func:`~queuesgd.harness.plumbing.reply_group`).
    staleness : float
        The largest clock difference a reply may open (stale-synchronous's ``s``; ``math.inf``: async-ps).
    contention : bool
        Queue the transfers on the PS's uplink and downlink (async-ps) or give each its own (SSP).

    Reports one ``role="ps"`` record per update (``sender``, ``worker_step``,
    ``staleness``, ``t_apply``, ...: :mod:`~queuesgd.harness.runners`) and
    returns after every worker's goodbye.
    """
    ps = PSState(ctx, live, seed, down)
    n = ps.n
    clock = Clock()
    version = 0
    read = [0] * (n + 1)  # version each worker last read (index = rank)
    clocks = [0.0] * (n + 1)  # completed iterations per worker
    clocks[0] = math.inf
    blocked: set[int] = set()
    events: list[tuple[float, int, str, Any]] = []
    seq = itertools.count()
    up_free = down_free = -math.inf
    transfer = shaper.transfer(ps.nbytes)
    alpha = shaper.latency if shaper.active else 0.0
    done = 0
    updates = 0

    def release(rank: int) -> None:
        read[rank] = version
        ps.send([rank], version)

    def ready_to_start(rank: int) -> bool:
        c = clocks[rank]
        return c >= steps or min(clocks[1:]) >= c - staleness

    while done < n or events:
        timeout = None if not events else max(events[0][0] - time.perf_counter(), 0.0)
        m = ps.inbox.get(timeout)
        if m is not None:
            if m.tag < 0:
                done += 1
                clocks[m.src] = math.inf
            else:
                if not shaper.active:
                    t_apply = m.t
                elif contention:
                    t_apply = max(m.t + alpha, up_free) + transfer
                    up_free = t_apply
                else:
                    t_apply = m.t + alpha + transfer
                heapq.heappush(events, (t_apply, next(seq), "apply", m))
        while events and events[0][0] <= time.perf_counter():
            _, _, kind, item = heapq.heappop(events)
            if kind == "apply":
                m = item
                t_update = ps.apply_mean([m.buf])
                now = time.perf_counter()
                rec = base_record(key, "ps", updates, int(m.tag) < warmup, shaper)
                rec.update(
                    t0=clock.wall(m.t),
                    t_apply=clock.wall(now - t_update),
                    t_end=clock.wall(now),
                    sender=m.src - 1,
                    worker_step=int(m.tag),
                    staleness=version - read[m.src],
                    applied=1,
                    t_update=t_update,
                    version=version + 1,
                )
                version += 1
                updates += 1
                ctx.report(rec)
                if not shaper.active:
                    t_reply = now
                elif contention:
                    down_free = max(now, down_free) + transfer
                    t_reply = down_free + alpha
                else:
                    t_reply = now + transfer + alpha
                heapq.heappush(events, (t_reply, next(seq), "reply", m.src))
            else:
                rank = item
                clocks[rank] += 1
                blocked.add(rank)
            for rank in sorted(blocked):
                if ready_to_start(rank):
                    blocked.discard(rank)
                    release(rank)
    ps.inbox.join()


def eager_ps(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    down: Any,
    *,
    mode: str,
    max_stale: int,
) -> None:
    """eager-SGD's coordinator (rank 0): rounds of a partial all-reduce, emulated on the gradients sent to it.

    The workers run :func:`~queuesgd.harness.ps_loops.ps_worker` with
    ``stop_by_version=True``. A round starts when the first gradient is in
    (``mode="solo"``), when a random initiator's is in (``"majority"``), or
    when all are in (every ``max_stale + 1``-th round, a synchronous one); it
    averages the gradients in by its start with those buffered during the
    previous round, lasts the ring all-reduce's model time plus the update
    under an active shaper. Gradients arriving during it are buffered into
    the next round; the new parameters go to the workers that took part and
    to those buffered, which restart with them.

    Parameters
    ----------
    ctx, key, live, steps, shaper, warmup, seed, down
        As :func:`event_ps` takes them; ``steps`` is the number of rounds, the first ``warmup`` marked.
    mode : str
        ``"solo"`` or ``"majority"`` (:class:`~queuesgd.schemes.eager.eager.EagerSGD`).
    max_stale : int
        Partial rounds in a row before a synchronous one.

    Reports one ``role="ps"`` record per round (``t_trigger``, ``round_end``,
    ``sync``, ``initiator``, ``fresh``, ``buffered``, ...) and returns after
    every worker's goodbye.
    """
    ps = PSState(ctx, live, seed, down)
    n = ps.n
    clock = Clock()
    rng = np.random.default_rng([int(seed), 0xEA6E5])
    ready: dict[int, Msg] = {}
    buffered: dict[int, Msg] = {}
    version, partial = 0, 0
    prev_end = time.perf_counter()

    def take(m: Msg) -> None:
        if m.tag < 0:
            raise RuntimeError(f"worker rank {m.src} stopped before the last round")
        ready[m.src] = m

    def drain() -> None:
        while (m := ps.inbox.get(0)) is not None:
            take(m)

    for r in range(steps):
        sync = partial >= max_stale
        initiator = int(rng.integers(1, n + 1)) if mode == "majority" else None
        while True:
            drain()
            if sync:
                trigger = max(m.t for m in ready.values()) if len(ready) == n else None
            elif initiator is not None:
                trigger = ready[initiator].t if initiator in ready else None
            else:
                trigger = min(m.t for m in ready.values()) if ready else None
            if trigger is not None:
                break
            take(ps.inbox.get())
        trigger = max(trigger, prev_end)
        drain()
        part = {s: m for s, m in ready.items() if m.t <= trigger}
        rest = {s: m for s, m in ready.items() if m.t > trigger}
        contrib = [m.buf for m in part.values()] + [m.buf for m in buffered.values()]
        t_update = ps.apply_mean(contrib)
        shaped = 0.0
        if shaper.active:
            end_at = trigger + shaper.model_time("allreduce", ps.nbytes, n) + t_update
            shaped = shaper.wait_until(end_at)
        else:
            end_at = time.perf_counter()
        ready = rest
        drain()
        new_buffer = {s: m for s, m in ready.items() if m.t <= end_at}
        ready = {s: m for s, m in ready.items() if m.t > end_at}
        version += 1
        ps.send(sorted(set(part) | set(new_buffer)), version)
        end = time.perf_counter()
        rec = base_record(key, "ps", r, r < warmup, shaper)
        rec.update(
            t0=clock.wall(prev_end),
            t_trigger=clock.wall(trigger),
            t_end=clock.wall(end),
            round_end=clock.wall(end_at),
            sync=sync,
            initiator=None if initiator is None else initiator - 1,
            fresh=len(part),
            buffered=len(buffered),
            applied=len(contrib),
            contributors=sorted(s - 1 for s in part),
            staleness=[version - 1 - int(m.tag) for m in part.values()]
            + [version - 1 - int(m.tag) for m in buffered.values()],
            t_update=t_update,
            t_shaped=shaped,
            version=version,
        )
        if r == steps - 1:
            rec["params_sum"] = ps.params_sum()
        ctx.report(rec)
        buffered = new_buffer
        partial = 0 if sync else partial + 1
        prev_end = end_at
    # Workers waiting now get the stop; the others get it when their gradient comes in.
    ps.send(sorted(ready), version)
    ps.drain_until_done(lambda m: ps.send([m.src], version))
