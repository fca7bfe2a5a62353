"""One live worker loop per coordination scheme, run inside :func:`~queuesgd.harness.launch.run_workers`.

:func:`run_scheme` runs the loop of one scheme in the calling worker process
and reports one record per step (workers) and per update (parameter server).
:func:`run` is the whole thing from the parent: launch, run, collect.

World layout: all-reduce schemes use ranks ``0 .. n-1`` as the workers;
parameter-server (PS) schemes use rank 0 as the PS (or, for eager-SGD, as the
coordinator of the partial collectives, which gloo lacks) and ranks
``1 .. n`` as the workers, so ``world_size = n + 1`` (:func:`world_size`).

Messages (PS schemes). Workers send ``[gradient..., tag]`` on the default
group, the tag being the parameter version the gradient was computed on
(``-1``: "I am done", the worker's last message); the PS sends
``[parameters..., version]`` back on a second gloo group. The PS receives in
a thread (``recv`` from any source, time-stamped on arrival), so it can wait
for "the first ``k`` gradients", "until the cutoff" or "until the round
ends" without polling.

What each loop does (the semantics of the matching :mod:`queuesgd.schemes`
model, emulated network times from a :class:`~queuesgd.harness.shaping.Shaper`):

- ``"ring-allreduce"``: compute; ``all_reduce`` (sum) / n; shaper
  ``"allreduce"`` counted from the last rank's arrival (every rank puts its
  arrival time in two extra slots of the reduced buffer); apply.
- ``"sync-ps"``, ``"backup-workers"`` (``backups``, ``stragglers``),
  ``"static-cutoff"`` (``cutoff``, ``stragglers``): per iteration the PS takes
  fresh gradients (tag = current version) until it has all ``n`` / the first
  ``n - b`` / the cutoff passed (at least one), drops stale ones, applies
  the average, waits for the model round ``2 alpha + (k G + p P)/B`` plus the
  measured update after the barrier, and sends the new parameters.
  ``stragglers="finish"`` (the scheme default): late workers finish, their
  gradient is dropped and answered with the current parameters;
  ``"cancel"``: every worker gets the new parameters at once and aborts a
  computation in progress.
- ``"async-ps"``: the PS applies each gradient as it arrives and replies to
  its sender; shaped as the closed network of
  :class:`~queuesgd.schemes.async_ps.AsyncPS` (latency, then an FCFS uplink
  ``G/B``, the update, an FCFS downlink ``P/B``, latency).
- ``"stale-synchronous"`` (``staleness``): the same PS without link
  contention (``alpha + G/B`` and ``alpha + P/B`` per worker, as
  :class:`~queuesgd.schemes.ssp.StaleSynchronous` models), and a worker at
  clock ``c`` gets its reply only when every worker's clock is ``>= c - s``.
- ``"eager-sgd"`` (``mode``, ``max_stale``): rounds of a partial all-reduce
  emulated by the coordinator, as :class:`~queuesgd.schemes.eager.EagerSGD`
  models: a round starts when the first gradient is in (solo), when a
  random initiator's is in (majority), or when all are in (every
  ``max_stale + 1``-th round); it lasts the ring all-reduce model time plus
  the update; gradients arriving during a round are buffered into the next
  and their workers restart at its end with the others that took part.

Records: every record has ``scheme``, ``role`` (``"worker"`` or ``"ps"``),
``step``, ``warmup`` (``True`` for the first ``warmup`` steps / iterations /
rounds), ``t0`` and ``t_end`` (:func:`time.time`), ``emulation`` and
``rank``. Worker records add ``worker`` (index ``0 .. n-1``), ``t_compute``,
``delay`` (injected), ``t_wait`` (from sending to getting parameters) or
``t_comm`` / ``t_shaped`` / ``t_update`` (all-reduce), ``version``,
``aborted`` (a computation cancelled by new parameters: its ``t_compute`` is
partial, leave it out of compute-time profiles); the all-reduce and PS
records add ``applied`` (gradients in the update) and ``t_update`` (seconds
to apply it). The last step's record of every all-reduce worker, and the
last iteration's (round's) record of a synchronous PS or eager-SGD
coordinator, add ``params_sum``, a checksum of the parameters.

PS fields: synchronous PS schemes -- ``t_barrier``, ``dropped``,
``contributors`` (worker indices), ``t_shaped``, ``version``; async-ps and
stale-synchronous -- one record per update with ``sender``, ``worker_step``,
``staleness`` (updates since the sender last read the parameters),
``t_apply``; eager-sgd -- one record per round with ``t_trigger``,
``round_end``, ``sync``, ``initiator``, ``fresh``, ``buffered``,
``contributors`` and ``staleness`` (a list, one per gradient applied).
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness._torch import require_torch
from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.layout import LIVE_SCHEMES, live_key, world_size
from queuesgd.harness.shaping import Shaper
from queuesgd.units import parse_seconds

__all__ = ["LAYOUT", "check_params", "run", "run_scheme", "world_size"]

#: World layout of each scheme the harness runs (the registry's ``live`` column; see :mod:`.layout`).
LAYOUT = LIVE_SCHEMES
_STRAGGLERS = ("finish", "cancel")


def check_params(scheme_key: str, params: Mapping[str, Any] | None, workers: int) -> dict[str, Any]:
    """Validate a scheme's parameters; return them complete, with the scheme's defaults.

    Parameters (defaults as the :mod:`queuesgd.schemes` classes): backup-workers
    ``backups=1, stragglers="finish"``; static-cutoff ``cutoff`` (or
    ``timeout``) seconds, ``stragglers="finish"``; eager-sgd ``mode="solo",
    max_stale=32``; stale-synchronous ``staleness=1`` (``math.inf`` is
    asynchronous). The other schemes take none.

    Examples
    --------
    >>> check_params("backup-workers", {"backups": 2}, workers=4)
    {'backups': 2, 'stragglers': 'finish'}
    >>> check_params("static-cutoff", {"cutoff": "30ms"}, 4)
    {'cutoff': 0.03, 'stragglers': 'finish'}
    >>> check_params("backup-workers", {"backups": 4}, 4)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: backups: got 4; accepted: an integer 0 <= backups < workers (= 4)
    """
    key = live_key(scheme_key)
    n = _checks.integer("workers", workers)
    given = dict(params or {})
    out: dict[str, Any] = {}
    if key == "backup-workers":
        b = _checks.integer("backups", given.pop("backups", 1), minimum=0)
        if b >= n:
            raise InvalidParameterError("backups", b, f"an integer 0 <= backups < workers (= {n})")
        out["backups"] = b
    if key == "static-cutoff":
        if "cutoff" in given and "timeout" in given:
            raise InvalidParameterError("cutoff", given["cutoff"], "either cutoff or timeout, not both")
        if "cutoff" not in given and "timeout" not in given:
            raise InvalidParameterError("cutoff", None, "the cutoff in seconds after each iteration starts")
        raw = given.pop("cutoff") if "cutoff" in given else given.pop("timeout")
        out["cutoff"] = _checks.positive("cutoff", parse_seconds(raw, "cutoff"))
    if key in ("backup-workers", "static-cutoff"):
        out["stragglers"] = _checks.choice("stragglers", given.pop("stragglers", "finish"), _STRAGGLERS)
    if key == "eager-sgd":
        mode = _checks.choice("mode", given.pop("mode", "solo"), ("solo", "majority"))
        if mode == "majority" and n < 2:
            raise InvalidParameterError("mode", mode, "'solo' for a single worker")
        out["mode"] = mode
        out["max_stale"] = _checks.integer("max_stale", given.pop("max_stale", 32), minimum=0)
    if key == "stale-synchronous":
        s = given.pop("staleness", 1)
        if not (isinstance(s, float) and math.isinf(s) and s > 0):
            s = _checks.integer("staleness", s, minimum=0)
        out["staleness"] = s
    if given:
        raise InvalidParameterError(
            "params", sorted(given), f"the parameters of {key!r}: {sorted(out) or 'none'}"
        )
    return out


# ---- shared pieces ------------------------------------------------------------------------------
class _Clock:
    """perf_counter readings to time.time() values (records) for this process."""

    def __init__(self) -> None:
        self.offset = time.time() - time.perf_counter()

    def wall(self, t: float) -> float:
        return t + self.offset


@dataclass
class _Msg:
    src: int
    buf: Any
    t: float  # perf_counter at arrival
    tag: float


class _Inbox:
    """A thread that receives fixed-size messages and queues them, time-stamped on arrival.

    ``src=None`` receives from any sender (gloo ``recv_anysource``). The thread
    stops after a message for which ``done(msg)`` is true. ``event`` is set
    whenever a message is queued (used to interrupt a computation).
    """

    def __init__(self, numel: int, done: Callable[[_Msg], bool], *, src: int | None = None, group=None):
        self._torch = require_torch()
        self._numel, self._done, self._src, self._group = numel, done, src, group
        self.queue: queue.Queue = queue.Queue()
        self.event = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="queuesgd-inbox", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import torch.distributed as dist

        try:
            while True:
                buf = self._torch.empty(self._numel, dtype=self._torch.float32)
                if self._src is None:
                    src = dist.recv(buf, group=self._group)
                else:
                    dist.recv(buf, src=self._src, group=self._group)
                    src = self._src
                msg = _Msg(int(src), buf, time.perf_counter(), float(buf[-1]))
                self.queue.put(msg)
                self.event.set()
                if self._done(msg):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.queue.put(exc)
            self.event.set()

    def get(self, timeout: float | None = None) -> _Msg | None:
        """The next message (``None`` after ``timeout`` seconds, or at once with ``timeout=0``)."""
        try:
            item = self.queue.get(block=timeout != 0, timeout=timeout if timeout else None)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def arm(self) -> threading.Event:
        """Clear the event unless a message is already waiting; return it (no lost wake-up)."""
        self.event.clear()
        if not self.queue.empty():
            self.event.set()
        return self.event

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)


def _base(scheme: str, role: str, step: int, warmup: bool, shaper: Shaper) -> dict[str, Any]:
    return {"scheme": scheme, "role": role, "step": step, "warmup": warmup, "emulation": shaper.emulation}


# ---- ring all-reduce ----------------------------------------------------------------------------
def _ring_allreduce(ctx: WorkerContext, live: Any, steps: int, shaper: Shaper, warmup: int, seed: int):
    torch = require_torch()
    import torch.distributed as dist

    n, r = ctx.world_size, ctx.rank
    clock = _Clock()
    step = live.make(r, seed, workers=n)
    G = step.grad.numel()
    extra = 2 * n if shaper.active else 0
    buf = torch.zeros(G + extra, dtype=torch.float32)
    for i in range(steps):
        t0 = time.perf_counter()
        t_compute = step.compute()
        buf[:G].copy_(step.grad)
        arrive = time.perf_counter()
        if extra:
            # Arrival times ride along in the sum: rank r fills slots G+2r (seconds) and G+2r+1 (fraction).
            rel = arrive - ctx.epoch
            buf[G:].zero_()
            buf[G + 2 * r] = math.floor(rel)
            buf[G + 2 * r + 1] = rel - math.floor(rel)
        dist.all_reduce(buf)
        done = time.perf_counter()
        shaped, last = 0.0, arrive
        if extra:
            arrivals = buf[G:].double().view(n, 2).sum(dim=1)
            last = float(arrivals.max()) + ctx.epoch
            shaped = shaper.after("allreduce", step.nbytes, n, last)
        buf[:G].div_(n)
        tu = time.perf_counter()
        step.apply(buf[:G])
        end = time.perf_counter()
        rec = _base("ring-allreduce", "worker", i, i < warmup, shaper)
        rec.update(
            worker=r,
            t0=clock.wall(t0),
            t_end=clock.wall(end),
            t_compute=t_compute,
            delay=step.last_delay,
            t_comm=done - arrive,
            t_barrier=last - arrive,
            t_shaped=shaped,
            t_update=end - tu,
            applied=n,
            version=i,
            aborted=False,
        )
        if i == steps - 1:
            rec["params_sum"] = float(step.params.double().sum())
        ctx.report(rec)


# ---- PS workers ---------------------------------------------------------------------------------
def _ps_worker(
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
    clock = _Clock()
    step = live.make(me, seed, workers=n)
    G = step.grad.numel()
    msg = torch.empty(G + 1, dtype=torch.float32)
    params = torch.empty(G + 1, dtype=torch.float32)
    inbox = _Inbox(G + 1, lambda m: m.tag >= steps, src=0, group=down) if cancel else None
    version, i = 0, 0
    while (version < steps) if stop_by_version else (i < steps):
        t0 = time.perf_counter()
        event = inbox.arm() if inbox is not None else None
        t_compute = step.compute(event)
        rec = _base(key, "worker", i, (version if stop_by_version else i) < warmup, shaper)
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


class _PSState:
    """The PS's replica of the model and its outgoing buffer."""

    def __init__(self, ctx: WorkerContext, live: Any, seed: int, down: Any) -> None:
        torch = require_torch()
        self.n = ctx.world_size - 1
        self.model = live.make(0, seed, workers=self.n)
        self.G = self.model.grad.numel()
        self.nbytes = self.model.nbytes
        self.acc = torch.zeros(self.G, dtype=torch.float32)
        self.out = torch.empty(self.G + 1, dtype=torch.float32)
        self.down = down
        self.sentinels = 0
        self.inbox = _Inbox(self.G + 1, self._last)

    def _last(self, m: _Msg) -> bool:
        # Runs in the inbox thread: stop receiving after every worker said it is done.
        if m.tag < 0:
            self.sentinels += 1
        return self.sentinels >= self.n

    def send(self, ranks: Any, version: int) -> None:
        """Send the current parameters, tagged ``version``, to ``ranks`` (all at once)."""
        import torch.distributed as dist

        ranks = list(ranks)
        if not ranks:
            return
        self.out[: self.G].copy_(self.model.params)
        self.out[self.G] = version
        works = [dist.isend(self.out, dst=w, group=self.down) for w in ranks]
        for w in works:
            w.wait()

    def params_sum(self) -> float:
        """Sum of the parameters (a checksum for tests and reports)."""
        return float(self.model.params.double().sum())

    def apply_mean(self, bufs: list[Any]) -> float:
        """Apply the average of the gradients in ``bufs``; return the seconds it took."""
        t = time.perf_counter()
        self.acc.zero_()
        for b in bufs:
            self.acc.add_(b[: self.G])
        self.acc.div_(len(bufs))
        self.model.apply(self.acc)
        return time.perf_counter() - t

    def drain_until_done(self, reply: Callable[[_Msg], None] | None) -> None:
        """After the last update: answer what still comes (``reply``) until every worker is done."""
        done = 0
        while done < self.n:
            m = self.inbox.get()
            if m.tag < 0:
                done += 1
            elif reply is not None:
                reply(m)
        self.inbox.join()


# ---- barrier PS: sync-ps, backup-workers, static-cutoff -----------------------------------------
def _barrier_ps(
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
    ps = _PSState(ctx, live, seed, down)
    n = ps.n
    clock = _Clock()
    version = 0
    start = time.perf_counter()
    pending: deque[_Msg] = deque()  # pulled from the inbox but belonging to the next iteration

    def next_msg(timeout: float | None) -> _Msg | None:
        return pending.popleft() if pending else ps.inbox.get(timeout)

    for it in range(steps):
        fresh: dict[int, _Msg] = {}
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
        rec = _base(key, "ps", it, it < warmup, shaper)
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

    def reply(m: _Msg) -> None:
        if not cancel:
            ps.send([m.src], version)

    ps.drain_until_done(reply)


# ---- event-driven PS: async-ps and stale-synchronous --------------------------------------------
def _event_ps(
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
    ps = _PSState(ctx, live, seed, down)
    n = ps.n
    clock = _Clock()
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
                rec = _base(key, "ps", updates, int(m.tag) < warmup, shaper)
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


# ---- eager-SGD coordinator ----------------------------------------------------------------------
def _eager_ps(
    ctx: WorkerContext,
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
    ps = _PSState(ctx, live, seed, down)
    n = ps.n
    clock = _Clock()
    rng = np.random.default_rng([int(seed), 0xEA6E5])
    ready: dict[int, _Msg] = {}
    buffered: dict[int, _Msg] = {}
    version, partial = 0, 0
    prev_end = time.perf_counter()

    def take(m: _Msg) -> None:
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
        rec = _base("eager-sgd", "ps", r, r < warmup, shaper)
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


# ---- entry points -------------------------------------------------------------------------------
def run_scheme(
    ctx: WorkerContext,
    scheme_key: str,
    live: Any,
    steps: int,
    shaper: Shaper | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    warmup: int = 0,
    seed: int = 0,
) -> None:
    """Run this process's part of a scheme for ``steps`` steps, reporting one record per step.

    Call it from the function given to :func:`~queuesgd.harness.launch.run_workers`
    with ``world_size(scheme_key, n)`` processes (or use :func:`run`).

    Parameters
    ----------
    ctx : WorkerContext
        This process's context.
    scheme_key : str
        One of :data:`LAYOUT`.
    live : EmulatedCompute or RealModel
        The workload (:mod:`queuesgd.harness.live`).
    steps : int
        Steps per worker (async, SSP), iterations (synchronous PS schemes,
        all-reduce) or rounds (eager-SGD).
    shaper : Shaper, optional
        The emulated network (default: none, loopback speed).
    params : mapping, optional
        The scheme's parameters (:func:`check_params`).
    warmup : int
        Steps, iterations or rounds flagged ``"warmup": True`` in the records.
    seed : int
        Seed shared by all processes (compute times, random delays, initiators).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.live import EmulatedCompute
    >>> from queuesgd.harness.launch import run_workers
    >>> live = EmulatedCompute("5ms", "4KB")
    >>> recs = run_workers(lambda ctx: run_scheme(ctx, "sync-ps", live, 3), world_size("sync-ps", 2))
    >>> sorted((r["role"], r["step"]) for r in recs if r["role"] == "ps")
    [('ps', 0), ('ps', 1), ('ps', 2)]
    >>> [r["applied"] for r in recs if r["role"] == "ps"]
    [2, 2, 2]
    """
    key = live_key(scheme_key)
    steps = _checks.integer("steps", steps)
    warmup = _checks.integer("warmup", warmup, minimum=0)
    shaper = Shaper() if shaper is None else shaper
    if LAYOUT[key] == "allreduce":
        check_params(key, params, ctx.world_size)
        _ring_allreduce(ctx, live, steps, shaper, warmup, seed)
        return
    import torch.distributed as dist

    n = ctx.world_size - 1
    if n < 1:
        raise InvalidParameterError("world_size", ctx.world_size, "at least 2 (a PS and one worker)")
    p = check_params(key, params, n)
    down = dist.new_group(backend="gloo")  # PS -> workers; workers -> PS use the default group
    cancel = p.get("stragglers") == "cancel"
    if ctx.rank != 0:
        by_version = key in ("sync-ps", "backup-workers", "static-cutoff", "eager-sgd")
        _ps_worker(
            ctx, key, live, steps, shaper, warmup, seed, down, stop_by_version=by_version, cancel=cancel
        )
    elif key in ("sync-ps", "backup-workers", "static-cutoff"):
        need = n - p.get("backups", 0) if key != "static-cutoff" else n
        _barrier_ps(
            ctx,
            key,
            live,
            steps,
            shaper,
            warmup,
            seed,
            down,
            need=need,
            cutoff=p.get("cutoff"),
            cancel=cancel,
        )
    elif key == "eager-sgd":
        _eager_ps(ctx, live, steps, shaper, warmup, seed, down, mode=p["mode"], max_stale=p["max_stale"])
    else:
        ssp = key == "stale-synchronous"
        _event_ps(
            ctx,
            key,
            live,
            steps,
            shaper,
            warmup,
            seed,
            down,
            staleness=p["staleness"] if ssp else math.inf,
            contention=not ssp,
        )


def run(
    scheme_key: str,
    live: Any,
    workers: int,
    steps: int,
    *,
    shaper: Shaper | None = None,
    params: Mapping[str, Any] | None = None,
    warmup: int = 0,
    seed: int = 0,
    timeout: float = 120.0,
    progress_timeout: float | None = 60.0,
    setup: Callable[[int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
    host: str = "127.0.0.1",
) -> list[dict]:
    """Launch a scheme with ``workers`` workers for ``steps`` steps; return every record.

    The parameters are checked in the parent first (:func:`check_params`);
    the rest are those of :func:`run_scheme` and
    :func:`~queuesgd.harness.launch.run_workers`.

    Raises
    ------
    WorkerFailure
        A process crashed, raised, or the run timed out (records kept in ``.partial``).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.live import EmulatedCompute
    >>> recs = run("ring-allreduce", EmulatedCompute("5ms", "4KB"), workers=2, steps=3)
    >>> sorted((r["rank"], r["step"], r["applied"]) for r in recs)
    [(0, 0, 2), (0, 1, 2), (0, 2, 2), (1, 0, 2), (1, 1, 2), (1, 2, 2)]
    """
    key = live_key(scheme_key)
    checked = check_params(key, params, workers)
    size = world_size(key, workers)

    def fn(ctx: WorkerContext) -> None:
        run_scheme(ctx, key, live, steps, shaper, checked, warmup=warmup, seed=seed)

    return run_workers(
        fn,
        size,
        timeout=timeout,
        progress_timeout=progress_timeout,
        setup=setup,
        on_record=on_record,
        host=host,
    )
