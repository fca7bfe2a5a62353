"""A pipeline stage's worker loop: ``torch.distributed.pipelining`` on gloo, one record per step.

:func:`pipeline_worker` runs in every one of the ``D x S`` processes of a
pipeline run (:func:`~queuesgd.harness.pipelining.run_pipeline`, or the
live table's row, :data:`queuesgd.harness.live_schemes.parallel.PIPELINE`):
rank ``r S + s`` holds stage ``s`` of replica ``r``. The records are those of
the package's docstring (:mod:`queuesgd.harness.pipelining`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd.harness.launch import WorkerContext
from queuesgd.harness.pipelining.profile import default_split
from queuesgd.harness.pipelining.units import check_split, model_units
from queuesgd.training_optimizer import default_optimizer

__all__ = ["agreed_split", "pipeline_worker"]


def agreed_split(
    ctx: WorkerContext,
    kind: str,
    stages: int,
    microbatch: int,
    model_options: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> list[int]:
    """In a worker process: rank 0's :func:`~queuesgd.harness.pipelining.default_split`, on every rank.

    Rank 0 profiles the units (a short :func:`~queuesgd.harness.pipelining.profile_stages`)
    and broadcasts the balanced split, so that every rank builds the same
    stages (a collective: every rank of the world calls it).
    """
    import torch.distributed as dist

    box: list[Any] = [None]
    if ctx.rank == 0:
        box[0] = default_split(kind, stages, microbatch, model_options, seed=seed)
    dist.broadcast_object_list(box, src=0)
    return [int(k) for k in box[0]]


def pipeline_worker(
    ctx: WorkerContext,
    kind: str,
    stages: int,
    microbatches: int,
    steps: int,
    *,
    schedule: str,
    batch_size: int,
    warmup: int,
    split: Sequence[int] | None,
    key: str,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
) -> None:
    """In a worker process: run stage ``rank mod S`` of replica ``rank div S`` for ``steps`` steps.

    ``split`` None: the ranks agree on rank 0's balanced split of a short
    profile (:func:`agreed_split`). ``key`` is the records' ``scheme``.
    """
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.models import build_seeded, classes_of, worker_batches

    torch = require_torch()
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    torch.set_num_threads(1)
    nn = torch.nn
    S, M = stages, microbatches
    D = ctx.world_size // S
    replica, s = divmod(ctx.rank, S)
    # Every rank makes every group, in the same order (new_group is collective over the world).
    pp_groups = [dist.new_group(list(range(q * S, q * S + S))) for q in range(D)] if D > 1 else [None]
    dp_groups = [dist.new_group([q * S + t for q in range(D)]) for t in range(S)] if D > 1 else []
    # The same whole model on every rank; each keeps its stage.
    net, shape = build_seeded(kind, seed, model_options)
    units = model_units(net)
    mb = batch_size // M
    if split is None:
        split = agreed_split(ctx, kind, S, mb, model_options, seed)
    split = check_split(split, S, len(units))
    bounds = np.concatenate([[0], np.cumsum(split)]).astype(int)
    mods = [m for _, ms in units[bounds[s] : bounds[s + 1]] for m in ms]
    sub = nn.Sequential(*mods)
    # Static shapes of one micro-batch: run the prefix in eval mode without gradients (batch norms keep
    # their running statistics untouched).
    with torch.no_grad():
        net.eval()
        probe = torch.zeros((mb, *shape))
        for _, ms in units[: bounds[s]]:
            for m in ms:
                probe = m(probe)
        example_out = sub(probe).clone()
        net.train()
    # The metadata carries requires_grad: a later stage's input needs its gradient (sent back upstream).
    example_in = probe.clone().requires_grad_(s > 0)
    example_out.requires_grad_(True)
    sub.train()
    sent: list[int] = []
    if s < S - 1:
        sub.register_forward_hook(lambda _m, _i, out: sent.append(int(out.numel() * out.element_size())))
    stage = PipelineStage(
        sub,
        s,
        S,
        torch.device("cpu"),
        input_args=example_in,
        output_args=example_out,
        group=pp_groups[replica],
    )
    loss_fn = nn.CrossEntropyLoss()
    sched_cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
    sched = sched_cls(stage, M, loss_fn=loss_fn)
    opt = default_optimizer(sub.parameters())
    data = worker_batches(seed, replica, batch_size, shape, classes_of(model_options))
    params = [p for p in sub.parameters()]
    for step in range(steps):
        x, y = data[step % len(data)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        losses: list[Any] = []
        if s == 0 and S == 1:
            sched.step(x, target=y, losses=losses)
        elif s == 0:
            sched.step(x)
        elif s == S - 1:
            sched.step(target=y, losses=losses)
        else:
            sched.step()
        t1 = time.perf_counter()
        if D > 1:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=dp_groups[s])
            flat /= D
            start = 0
            for p, g in zip(params, grads):
                p.grad = flat[start : start + g.numel()].view_as(g).clone()
                start += g.numel()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        rec = {
            "scheme": key,
            "role": "worker",
            "worker": ctx.rank,
            "stage": s,
            "replica": replica,
            "step": step,
            "warmup": step < warmup,
            "t0": t0,
            "t_backward": t1,
            "t_allreduce": t2,
            "t_end": t3,
            "t_update": t3 - t2,
            "applied": D * M,
        }
        if losses:
            rec["loss"] = float(torch.stack([torch.as_tensor(v).detach() for v in losses]).mean())
        ctx.report(rec)
    mine = {
        "stage": s,
        "replica": replica,
        "parameter_bytes": int(sum(p.numel() * p.element_size() for p in params)),
        "sent": sent[0] if sent else None,
    }
    everyone: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(everyone, mine)
    if ctx.rank == 0:
        first = [e for e in everyone if e["replica"] == 0]
        first.sort(key=lambda e: e["stage"])
        ctx.report(
            {
                "role": "stages",
                "stages": S,
                "replicas": D,
                "microbatches": M,
                "microbatch": mb,
                "schedule": schedule,
                "split": [int(k) for k in split],
                "unit_names": [name for name, _ in units],
                "stage_parameter_bytes": [e["parameter_bytes"] for e in first],
                "activation_bytes": [e["sent"] for e in first[:-1]],
            }
        )
    if report_parameters:
        flat = [v for p in params for v in p.detach().reshape(-1).tolist()]
        ctx.report({"role": "parameters", "stage": s, "replica": replica, "parameters": flat})
    del sched, stage, opt, sub, net
