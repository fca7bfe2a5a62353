"""Parameter-server loops: the PS-scheme worker and the barrier PS (sync-ps, backup-workers, static-cutoff).

Rank 0 is the PS, ranks ``1 .. n`` the workers; see :mod:`~queuesgd.harness.runners` for the messages.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

from queuesgd.harness._torch import require_torch
from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.plumbing import Clock, Inbox, Msg, PSState, base_record
from queuesgd.harness.shaping import Shaper

__all__ = ["barrier_ps", "ps_worker"]


def ps_worker(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    down: Any,
    *,
    stop_by_version: bool,
    cancel: bool = False,
) -> None:
    """A PS-scheme worker: compute, push ``[grad, version]``, pull ``[params, version]``.

    ``stop_by_version``: run until the PS sends version ``>= steps`` (PS-driven
    schemes); else run ``steps`` local steps (async, SSP). ``cancel``: a
    message arriving during the computation aborts it.
    """
    torch = require_torch()
    import torch.distributed as dist

    n = ctx.world_size - 1
    me = ctx.rank - 1
    clock = Clock()
    step = live.make(me, seed, workers=n)
    G = step.grad.numel()
    msg = torch.empty(G + 1, dtype=torch.float32)
    params = torch.empty(G + 1, dtype=torch.float32)
    inbox = Inbox(G + 1, lambda m: m.tag >= steps, src=0, group=down) if cancel else None
    version, i = 0, 0
    while (version < steps) if stop_by_version else (i < steps):
        t0 = time.perf_counter()
        event = inbox.arm() if inbox is not None else None
        t_compute = step.compute(event)
        rec = base_record(key, "worker", i, (version if stop_by_version else i) < warmup, shaper)
        rec.update(worker=me, t0=clock.wall(t0), t_compute=t_compute, delay=step.last_delay, version=version)
        if step.interrupted:
            m = inbox.get()
            step.load(m.buf[:G])
            version = int(m.tag)
            end = time.perf_counter()
            rec.update(t_end=clock.wall(end), t_wait=0.0, aborted=True)
            ctx.report(rec)
            i += 1
            continue
        msg[:G].copy_(step.grad)
        msg[G] = version if stop_by_version else i
        sent = time.perf_counter()
        dist.send(msg, dst=0)
        if inbox is not None:
            m = inbox.get()
            reply, tag = m.buf, m.tag
        else:
            dist.recv(params, src=0, group=down)
            reply, tag = params, float(params[G])
        step.load(reply[:G])
        end = time.perf_counter()
        rec.update(t_end=clock.wall(end), t_wait=end - sent, aborted=False)
        ctx.report(rec)
        version = int(tag)
        i += 1
    msg[G] = -1.0
    dist.send(msg, dst=0)
    if inbox is not None:
        inbox.join()


def barrier_ps(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    down: Any,
    *,
    need: int,
    cutoff: float | None,
    cancel: bool,
) -> None:
    """The barrier parameter server (rank 0) of sync-ps, backup-workers and static-cutoff.

    Each iteration takes fresh gradients (tagged with the current version)
    until it has ``need`` of them or, with a ``cutoff``, until ``cutoff``
    seconds after the iteration began (at least one gradient); stale ones are
    dropped. It applies their average, waits out the phase model's round
    under an active shaper, and sends version + 1 to the contributors
    (``cancel``: to every worker, aborting their computations). A dropped
    gradient's worker gets the current parameters back unless ``cancel``.

    Parameters
    ----------
    ctx, key, live, steps, shaper, warmup, seed, down
        As :func:`~queuesgd.harness.event_loops.event_ps` takes them; ``steps`` is the number of
        iterations (updates), the first ``warmup`` marked.
    need : int
        Fresh gradients that end an iteration: ``n`` (sync-ps), ``n - backups`` (backup-workers).
    cutoff : float or None
        Seconds after which an iteration ends with what arrived (static-cutoff); None: no cutoff.
    cancel : bool
        ``stragglers="cancel"``: every worker gets the new parameters at once.

    Reports one ``role="ps"`` record per iteration (``t_barrier``,
    ``dropped``, ``contributors``, ...: :mod:`~queuesgd.harness.runners`) and
    returns after every worker's goodbye. Raises RuntimeError if a worker
    stops before the last iteration.
    """
    ps = PSState(ctx, live, seed, down)
    n = ps.n
    clock = Clock()
    version = 0
    start = time.perf_counter()
    pending: deque[Msg] = deque()  # pulled from the inbox but belonging to the next iteration

    def next_msg(timeout: float | None) -> Msg | None:
        return pending.popleft() if pending else ps.inbox.get(timeout)

    for it in range(steps):
        fresh: dict[int, Msg] = {}
        dropped = 0
        deadline = math.inf if cutoff is None else start + cutoff
        barrier = None
        while barrier is None:
            now = time.perf_counter()
            if fresh and now >= deadline:
                barrier = deadline
                break
            m = next_msg(None if (not fresh or math.isinf(deadline)) else deadline - now)
            if m is None:
                continue
            if m.tag < 0:
                raise RuntimeError(f"worker rank {m.src} stopped before the last iteration")
            if int(m.tag) == version and m.src not in fresh:
                if fresh and m.t > deadline:
                    pending.append(m)  # in the queue, but it arrived after the cutoff: late
                    barrier = deadline
                    break
                fresh[m.src] = m
                if len(fresh) >= need:
                    barrier = m.t
                elif m.t >= deadline:
                    barrier = m.t  # nothing was in by the cutoff: the first one ends the wait
            else:
                dropped += 1
                if not cancel:
                    ps.send([m.src], version)  # finish: the late worker restarts on the current parameters
        if cutoff is not None and barrier == deadline:
            # Gradients that arrived by the cutoff but were still queued count; later ones wait.
            while (m := ps.inbox.get(0)) is not None:
                if int(m.tag) == version and m.src not in fresh and m.t <= deadline and m.tag >= 0:
                    fresh[m.src] = m
                else:
                    pending.append(m)
        t_update = ps.apply_mean([m.buf for m in fresh.values()])
        k = len(fresh)
        targets = range(1, n + 1) if cancel else sorted(fresh)
        shaped = 0.0
        if shaper.active:
            pulls = len(targets)
            shaped = shaper.wait_until(barrier + shaper.ps_round(k, pulls, ps.nbytes, ps.nbytes) + t_update)
        version += 1
        ps.send(targets, version)
        end = time.perf_counter()
        rec = base_record(key, "ps", it, it < warmup, shaper)
        rec.update(
            t0=clock.wall(start),
            t_barrier=clock.wall(barrier),
            t_end=clock.wall(end),
            applied=k,
            dropped=dropped,
            contributors=sorted(s - 1 for s in fresh),
            t_update=t_update,
            t_shaped=shaped,
            version=version,
        )
        if it == steps - 1:
            rec["params_sum"] = ps.params_sum()
        ctx.report(rec)
        start = end

    for m in pending:
        if m.tag < 0:
            raise RuntimeError(f"worker rank {m.src} stopped before the last iteration")
        if not cancel:
            ps.send([m.src], version)

    def reply(m: Msg) -> None:
        if not cancel:
            ps.send([m.src], version)

    ps.drain_until_done(reply)
