"""eager-SGD with its gradients in a real ring all-reduce: the workers' partial collectives on gloo.

gloo has no partial collectives. The coordinator loop of
:mod:`~queuesgd.harness.event_loops` (``collective="coordinator"``) carries every
gradient through rank 0, which a ring does not; it serves the application
shaper. This loop (``collective="ring"``) moves the data the way eager-SGD
does: every round is one ``all_reduce`` among the workers (ranks ``1 .. n``,
a group of their own), run by a communication thread in each worker, which
joins it with whatever gradients it holds (none: zeros). Rank 0 only
*activates* rounds, with messages of a few bytes: the activation phase of
the paper's partial collective, done by one process instead of the
initiator's tree, so that a round's start is decided once.

The semantics are those of :class:`~queuesgd.schemes.eager.eager.EagerSGD`:

- a worker that finishes a gradient while no round runs (as its
  communication thread sees it) holds it as *fresh* and notifies rank 0,
  with the number of rounds it has seen start;
- rank 0 starts round ``r`` at the first valid notification (``"solo"``),
  at its initiator's, drawn from a shared seed (``"majority"``), or at all
  ``n`` (every ``max_stale + 1``-th round, synchronous); a notification
  from a worker that had not yet seen the last start is already in that
  round and does not count;
- every worker's thread takes the start, joins the round with the sum and
  count of the gradients it holds (fresh, and buffered from the previous
  round), applies the mean of all of them to its own copy of the latest
  parameters, and releases its worker if it waits;
- a worker that finishes while a round runs holds its gradient for the next
  round (buffered) and waits for the round to end; every waiting worker
  restarts from the latest parameters at the end of a round.

Records: workers ``role="worker"`` (``t_compute``, ``delay``, ``t_wait``,
``buffered``), worker 0's thread one ``role="round"`` record per round
(``applied``: gradients in the round, all workers; ``t_start``, ``t_comm``,
``t_update``), rank 0 one ``role="activator"`` record per round
(``t_trigger``, the arrival of the notification that started it, from
``trigger_worker``; ``sync``, ``initiator``, ``notified``), and every worker
one ``role="starts"`` record at the end (``rounds``, ``t_start``: when its
thread took each round's start). The last round's record adds ``params_sum``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from queuesgd.harness._torch import require_torch
from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.plumbing import Clock, Inbox, after_goodbyes, base_record
from queuesgd.harness.shaping import Shaper

__all__ = ["eager_activator", "eager_ring_worker"]

#: A start message: ``[round, synchronous]`` (round ``-1``: stop).
_CTL = 2
#: A notification: ``[rounds seen]`` (``-1``: the worker's goodbye); the inbox reads it as the tag.
_NOTE = 1


def eager_activator(
    ctx: WorkerContext,
    key: str,
    steps: int,
    warmup: int,
    seed: int,
    down: Any,
    shaper: Shaper,
    *,
    mode: str,
    max_stale: int,
) -> None:
    """Rank 0: decide when each of ``steps`` rounds starts; then tell every worker to stop."""
    torch = require_torch()
    import torch.distributed as dist

    n = ctx.world_size - 1
    clock = Clock()
    rng = np.random.default_rng([int(seed), 0xEA6E5])
    inbox = Inbox(_NOTE, after_goodbyes(n))
    start = torch.zeros(_CTL)
    valid: dict[int, float] = {}
    byes, partial = 0, 0
    for r in range(steps):
        sync = partial >= max_stale
        initiator = int(rng.integers(1, n + 1)) if mode == "majority" else None
        while True:
            if sync:
                go = len(valid) == n
            elif initiator is not None:
                go = initiator in valid
            else:
                go = bool(valid)
            if go:
                break
            m = inbox.get()
            if m.tag < 0:
                raise RuntimeError(f"worker rank {m.src} stopped before the last round")
            if int(m.tag) == r:  # it had seen every start so far: its gradient waits for this round
                valid[m.src] = m.t
        if sync:
            who = max(valid, key=valid.__getitem__)
        else:
            who = initiator if initiator is not None else min(valid, key=valid.__getitem__)
        trigger = valid[who]
        start[0], start[1] = r, float(sync)
        for w in [dist.isend(start, dst=k, group=down) for k in range(1, n + 1)]:
            w.wait()
        sent = time.perf_counter()
        rec = base_record(key, "activator", r, r < warmup, shaper)
        rec.update(
            t_trigger=clock.wall(trigger),
            t0=clock.wall(trigger),
            t_end=clock.wall(sent),
            sync=sync,
            initiator=None if initiator is None else initiator - 1,
            trigger_worker=who - 1,
            notified=sorted(k - 1 for k in valid),
        )
        ctx.report(rec)
        valid = {}
        partial = 0 if sync else partial + 1
    start[0] = -1.0
    for w in [dist.isend(start, dst=k, group=down) for k in range(1, n + 1)]:
        w.wait()
    while byes < n:  # late notifications, then every worker's goodbye
        if inbox.get().tag < 0:
            byes += 1
    inbox.join()


class _Rounds:
    """A worker's side of the partial collective: its communication thread and what it holds."""

    def __init__(self, ctx: WorkerContext, live: Any, seed: int, down: Any, ring: Any) -> None:
        torch = require_torch()
        self.ctx, self.down, self.ring = ctx, down, ring
        self.n = ctx.world_size - 1
        self.me = ctx.rank - 1
        # The latest parameters (every worker starts from the same ones, seeded by ``seed``).
        self.latest = live.make(self.me, seed, workers=self.n)
        self.G = self.latest.grad.numel()
        self.buf = torch.zeros(self.G + 1, dtype=torch.float32)
        self.fresh: list[Any] = []
        self.held: list[Any] = []  # buffered during a round: joins the next one
        self.lock = threading.Condition()
        self.in_round = False
        self.seen = 0  # starts received
        self.ended = 0  # rounds finished
        self.stopped = False
        self.error: BaseException | None = None
        self.records: list[dict] = []
        self.starts: list[tuple[int, float]] = []  # (round, when this worker's thread took its start)
        self.thread = threading.Thread(target=self._loop, name="queuesgd-eager", daemon=True)
        self.thread.start()

    def hand(self, grad: Any) -> tuple[int, bool, int]:
        """Hold a finished gradient; return ``(rounds ended, buffered, rounds seen)`` at that instant."""
        with self.lock:
            if self.in_round:
                self.held.append(grad)
                return self.ended, True, self.seen
            self.fresh.append(grad)
            return self.ended, False, self.seen

    def wait_past(self, ended: int) -> bool:
        """Wait until a round ends after ``ended`` rounds had; False if the run stopped instead."""
        with self.lock:
            while self.ended <= ended and not self.stopped and self.error is None:
                self.lock.wait()
            if self.error is not None:
                raise RuntimeError("the eager-SGD communication thread failed") from self.error
            return self.ended > ended

    def load_latest(self, step: Any) -> None:
        with self.lock:
            step.load(self.latest.params)

    def _loop(self) -> None:
        import torch.distributed as dist

        clock = Clock()
        torch = require_torch()
        ctl = torch.zeros(_CTL)
        try:
            while True:
                dist.recv(ctl, src=0, group=self.down)
                got = time.perf_counter()
                r = int(ctl[0])
                if r < 0:
                    break
                self.starts.append((r, clock.wall(got)))
                with self.lock:
                    self.in_round = True
                    self.seen += 1
                    grads = self.fresh + self.held
                    fresh = len(self.fresh)
                    self.fresh, self.held = [], []
                self.buf.zero_()
                for g in grads:
                    self.buf[: self.G].add_(g)
                self.buf[self.G] = len(grads)
                t_comm = time.perf_counter()
                dist.all_reduce(self.buf, group=self.ring)
                t_upd = time.perf_counter()
                applied = int(round(float(self.buf[self.G])))
                with self.lock:
                    if applied:
                        self.latest.apply(self.buf[: self.G] / applied)
                    end = time.perf_counter()
                    self.in_round = False
                    self.ended += 1
                    self.lock.notify_all()
                if self.me == 0:
                    self.records.append(
                        {
                            "step": r,
                            "worker": 0,
                            "t0": clock.wall(got),
                            "t_start": clock.wall(got),
                            "t_end": clock.wall(end),
                            "t_comm": t_upd - t_comm,
                            "t_update": end - t_upd,
                            "applied": applied,
                            "fresh_here": fresh,
                            "sync": bool(ctl[1]),
                        }
                    )
        except BaseException as exc:  # noqa: BLE001 - handed to the worker's main thread
            self.error = exc
        with self.lock:
            self.stopped = True
            self.lock.notify_all()


def eager_ring_worker(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    down: Any,
    ring: Any,
) -> None:
    """Ranks ``1 .. n``: compute, hold the gradient for the partial all-reduce, wait as eager-SGD does."""
    import torch.distributed as dist

    torch = require_torch()
    clock = Clock()
    rounds = _Rounds(ctx, live, seed, down, ring)
    me = rounds.me
    step = live.make(me, seed, workers=rounds.n)
    note = torch.zeros(_NOTE)
    i = 0
    while not rounds.stopped:
        t0 = time.perf_counter()
        t_compute = step.compute()
        ended, buffered, seen = rounds.hand(step.grad.clone())
        sent = time.perf_counter()
        if not buffered:
            note[0] = seen
            dist.send(note, dst=0)
        went_on = rounds.wait_past(ended)
        if went_on:
            rounds.load_latest(step)
        end = time.perf_counter()
        rec = base_record(key, "worker", i, rounds.ended <= warmup, shaper)
        rec.update(
            worker=me,
            t0=clock.wall(t0),
            t_end=clock.wall(end),
            t_compute=t_compute,
            delay=step.last_delay,
            t_wait=end - sent,
            buffered=buffered,
            version=rounds.ended,
            aborted=False,
        )
        ctx.report(rec)
        i += 1
    rounds.thread.join(60.0)
    if rounds.error is not None:
        raise RuntimeError("the eager-SGD communication thread failed") from rounds.error
    for k, rec in enumerate(rounds.records):
        full = base_record(key, "round", rec["step"], rec["step"] < warmup, shaper)
        full.update(rec)
        if k == len(rounds.records) - 1:
            full["params_sum"] = float(rounds.latest.params.double().sum())
        ctx.report(full)
    starts = base_record(key, "starts", 0, False, shaper)
    starts.update(worker=me, rounds=[r for r, _ in rounds.starts], t_start=[t for _, t in rounds.starts])
    ctx.report(starts)
    note[0] = -1.0
    dist.send(note, dst=0)
