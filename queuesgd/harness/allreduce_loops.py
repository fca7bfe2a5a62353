"""The all-reduce worker loops (ranks ``0 .. n-1`` are the workers): ring all-reduce and local SGD.

See :mod:`~queuesgd.harness.runners` for the records.
"""

from __future__ import annotations

import math
import time
from typing import Any

from queuesgd.harness._torch import require_torch
from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.plumbing import Clock, base_record
from queuesgd.harness.shaping import Shaper

__all__ = ["local_sgd", "ring_allreduce"]


class _ShapedAllReduce:
    """One ``all_reduce`` (sum) of a flat tensor, plus the shaper's ring time from the last rank's arrival.

    With an active shaper, every rank puts its arrival time in two extra slots
    of the reduced buffer (seconds and fraction since the run's epoch), so all
    ranks learn the last arrival from the sum itself.
    """

    def __init__(self, ctx: WorkerContext, numel: int, nbytes: int, shaper: Shaper) -> None:
        torch = require_torch()
        self.ctx, self.G, self.nbytes, self.shaper = ctx, numel, nbytes, shaper
        self.n = ctx.world_size
        self.extra = 2 * self.n if shaper.active else 0
        self.buf = torch.zeros(numel + self.extra, dtype=torch.float32)

    def mean(self, flat: Any) -> dict[str, float]:
        """Average ``flat`` over the ranks into ``self.buf[:G]``; return the times of the operation."""
        import torch.distributed as dist

        G, n, r, buf = self.G, self.n, self.ctx.rank, self.buf
        buf[:G].copy_(flat)
        arrive = time.perf_counter()
        if self.extra:
            rel = arrive - self.ctx.epoch
            buf[G:].zero_()
            buf[G + 2 * r] = math.floor(rel)
            buf[G + 2 * r + 1] = rel - math.floor(rel)
        dist.all_reduce(buf)
        done = time.perf_counter()
        shaped, last = 0.0, arrive
        if self.extra:
            arrivals = buf[G:].double().view(n, 2).sum(dim=1)
            last = float(arrivals.max()) + self.ctx.epoch
            shaped = self.shaper.after("allreduce", self.nbytes, n, last)
        buf[:G].div_(n)
        return {"arrive": arrive, "t_comm": done - arrive, "t_barrier": last - arrive, "t_shaped": shaped}


def ring_allreduce(
    ctx: WorkerContext, key: str, live: Any, steps: int, shaper: Shaper, warmup: int, seed: int
) -> None:
    """Synchronous SGD: compute, average the gradients by ``all_reduce``, apply; one record per step.

    ``key`` is the live scheme's, written in every record's ``scheme``.
    """
    n, r = ctx.world_size, ctx.rank
    clock = Clock()
    step = live.make(r, seed, workers=n)
    G = step.grad.numel()
    reduce = _ShapedAllReduce(ctx, G, step.nbytes, shaper)
    for i in range(steps):
        t0 = time.perf_counter()
        t_compute = step.compute()
        times = reduce.mean(step.grad)
        tu = time.perf_counter()
        step.apply(reduce.buf[:G])
        end = time.perf_counter()
        rec = base_record(key, "worker", i, i < warmup, shaper)
        _report(ctx, rec, clock, step, times, t0, end, t_compute, end - tu, version=i, last=i == steps - 1)


def local_sgd(
    ctx: WorkerContext,
    key: str,
    live: Any,
    steps: int,
    shaper: Shaper,
    warmup: int,
    seed: int,
    *,
    period: int,
) -> None:
    """Local SGD: ``period`` local steps (compute, apply the own gradient), then average the models.

    One record per local step. ``applied`` is ``n`` on every step (the ``n``
    gradients of that step all end up in the next average), so the measured
    samples per second is ``n H m`` per round, as :class:`~queuesgd.LocalSGD`
    counts it. The averaging's times (``t_comm``, ``t_barrier``,
    ``t_shaped``) are on the round's last step; ``t_update`` is the local
    optimizer step. A round is warm-up when its first step is (whole rounds
    are measured). A last round shorter than ``period`` is averaged too.
    """
    n, r = ctx.world_size, ctx.rank
    clock = Clock()
    step = live.make(r, seed, workers=n)
    G = step.grad.numel()
    reduce = _ShapedAllReduce(ctx, G, step.nbytes, shaper)
    idle = {"t_comm": 0.0, "t_barrier": 0.0, "t_shaped": 0.0}
    for i in range(steps):
        first = i - i % period
        t0 = time.perf_counter()
        t_compute = step.compute()
        tu = time.perf_counter()
        step.apply(step.grad)
        t_update = time.perf_counter() - tu
        times = idle
        if (i + 1) % period == 0 or i == steps - 1:
            times = reduce.mean(step.params)
            step.load(reduce.buf[:G])
        end = time.perf_counter()
        rec = base_record(key, "worker", i, first < warmup, shaper)
        _report(
            ctx,
            rec,
            clock,
            step,
            times,
            t0,
            end,
            t_compute,
            t_update,
            version=i // period,
            last=i == steps - 1,
        )


def _report(
    ctx: WorkerContext,
    rec: dict[str, Any],
    clock: Clock,
    step: Any,
    times: dict[str, float],
    t0: float,
    end: float,
    t_compute: float,
    t_update: float,
    *,
    version: int,
    last: bool,
) -> None:
    """Complete a worker's step record (every worker applies all ``n`` gradients) and report it."""
    rec.update(
        worker=ctx.rank,
        t0=clock.wall(t0),
        t_end=clock.wall(end),
        t_compute=t_compute,
        delay=step.last_delay,
        t_comm=times["t_comm"],
        t_barrier=times["t_barrier"],
        t_shaped=times["t_shaped"],
        t_update=t_update,
        applied=ctx.world_size,
        version=version,
        aborted=False,
    )
    if last:
        rec["params_sum"] = float(step.params.double().sum())
    ctx.report(rec)
