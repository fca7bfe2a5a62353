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
