"""Real synchronous data-parallel training with PyTorch's ``DistributedDataParallel`` on gloo.

This is the training users run: every worker process builds the same model
(:func:`queuesgd.harness.models.build`, same seed), wraps it in
``torch.nn.parallel.DistributedDataParallel`` and trains it on its own
synthetic mini-batches (random inputs, random labels, cross-entropy), with
SGD (learning rate 0.01, momentum 0.9: the optimizer :func:`queuesgd.profile`
times, :func:`~queuesgd.training_optimizer.default_optimizer`) and one thread
per process. DDP does its own gradient bucketing and overlaps each bucket's
all-reduce with the rest of the backward pass (wait-free back-propagation with
tensor fusion, done by PyTorch itself); nothing here emulates a network time.

Each worker reports one record per step: ``t0`` (step start), ``t_backward``
(end of ``loss.backward()``: the gradients are averaged, DDP waits for its
all-reduces there), ``t_end`` (after the optimizer step), ``applied = n``
(gradients per update) and ``warmup``. Rank 0 also reports the buckets DDP
used (``bucket_sizes``: after its rebuild in gradient-ready order, from
DDP's logging data ``rebuilt_bucket_sizes``; ``initial_bucket_sizes``: those
it was constructed with).

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> recs = run_ddp("mlp", 2, steps=6, warmup=2, batch_size=8, timeout=120)
>>> steps = sorted(r["step"] for r in recs if r.get("role") == "worker" and r["rank"] == 0)
>>> steps, all(r["applied"] == 2 for r in recs if r.get("role") == "worker")
([0, 1, 2, 3, 4, 5], True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.run_args import check_data_parallel
from queuesgd.training_optimizer import default_optimizer

__all__ = ["ddp_worker", "run_ddp", "train_steps"]


def train_steps(
    ctx: WorkerContext,
    scheme: str,
    model: Any,
    opt: Any,
    loss_fn: Any,
    data: list[tuple[Any, Any]],
    steps: int,
    warmup: int,
    applied: int,
    *,
    report_loss: bool = False,
    wait: Callable[[], None] | None = None,
) -> None:
    """In a worker process: ``steps`` training steps of ``model``, cycling through ``data``; a record each.

    A step is ``zero_grad``, forward, loss, ``backward`` (``t_backward``:
    the gradients are averaged, a data-parallel wrapper waits for its
    collectives there), then ``opt.step()`` (``t_end``). Each record has
    ``scheme``, ``role = "worker"``, ``worker``, ``step``, ``warmup``,
    ``t0``, ``t_backward``, ``t_end``, ``t_update`` and ``applied``
    (gradients per update), and the loss with ``report_loss``. ``wait`` (the
    device's synchronize, :func:`~queuesgd.harness._torch.use_device`) runs
    before each clock reading, so that a CUDA step is timed when the device
    has finished it, not when its kernels were launched. The data-parallel
    loop of DDP (:func:`ddp_worker`) and FSDP (:func:`queuesgd.harness.fsdp.fsdp_worker`).
    """
    sync = wait if wait is not None else (lambda: None)
    sync()
    for step in range(steps):
        x, y = data[step % len(data)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        sync()
        t1 = time.perf_counter()
        opt.step()
        sync()
        t2 = time.perf_counter()
        rec = {
            "scheme": scheme,
            "role": "worker",
            "worker": ctx.rank,
            "step": step,
            "warmup": step < warmup,
            "t0": t0,
            "t_backward": t1,
            "t_end": t2,
            "t_update": t2 - t1,
            "applied": applied,
        }
        if report_loss:
            rec["loss"] = float(loss.detach())
        ctx.report(rec)


def ddp_worker(
    ctx: WorkerContext,
    kind: str,
    steps: int,
    *,
    batch_size: int,
    warmup: int,
    seed: int = 0,
    bucket_cap_mb: float | None = None,
    model_options: Mapping[str, Any] | None = None,
    device: str = "cpu",
    key: str = "ddp",
) -> None:
    """In a worker process: train ``kind`` with DDP for ``steps`` steps, reporting one record per step.

    On a CUDA ``device`` the model and data live there and gloo all-reduces
    the CUDA buckets (through host copies); the step is timed after
    :func:`torch.cuda.synchronize`. ``key`` is the records' ``scheme`` (the
    live scheme's, :data:`queuesgd.harness.live_schemes.ddp.DDP`).
    """
    from queuesgd.harness._torch import ddp_device_ids, require_torch, use_device
    from queuesgd.harness.model_build import build_model_seeded
    from queuesgd.harness.models import classes_of, worker_batches

    torch = require_torch()
    torch.set_num_threads(1)
    nn = torch.nn
    dev, wait = use_device(device)
    net, shape = build_model_seeded(kind, seed, model_options)  # identical initial parameters on every worker
    net = net.to(dev)
    net.train()
    # bucket_cap_mb=None is DDP's default: a 1 MiB first bucket, then 25 MiB. In torch 2.13 an explicit
    # cap (even 25) makes the first bucket as large as the cap.
    ids = ddp_device_ids(dev)
    ddp = nn.parallel.DistributedDataParallel(net, device_ids=ids, bucket_cap_mb=bucket_cap_mb)
    opt = default_optimizer(ddp.parameters())
    loss_fn = nn.CrossEntropyLoss()
    data = worker_batches(seed, ctx.rank, batch_size, shape, classes_of(model_options), device=dev)
    train_steps(ctx, key, ddp, opt, loss_fn, data, steps, warmup, ctx.world_size, wait=wait)
    if ctx.rank == 0:
        data_ = ddp._get_ddp_logging_data()
        ctx.report(
            {
                "role": "buckets",
                # The buckets DDP trained with: rebuilt in gradient-ready order after the first step.
                "bucket_sizes": str(data_.get("rebuilt_bucket_sizes") or data_.get("bucket_sizes", "")),
                "initial_bucket_sizes": str(data_.get("bucket_sizes", "")),
            }
        )
    del ddp, opt, net


def run_ddp(
    kind: str,
    workers: int,
    steps: int,
    *,
    batch_size: int = 32,
    warmup: int = 5,
    seed: int = 0,
    bucket_cap_mb: float | None = None,
    model_options: Mapping[str, Any] | None = None,
    timeout: float = 600.0,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    on_record: Callable[[dict], None] | None = None,
    device: str = "cpu",
    force: bool = False,
) -> list[dict]:
    """Train ``kind`` with DDP on ``workers`` gloo processes; every record (see the module docstring).

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    workers, steps, batch_size, warmup : int
        Processes, training steps per worker (warm-up included), samples per
        step per worker, and the first steps marked ``warmup``.
    seed : int
        Initial parameters (shared) and each worker's data (seed and rank).
    bucket_cap_mb : float, optional
        DDP's ``bucket_cap_mb``. None (the default) leaves DDP's own default:
        a 1 MiB first bucket, then 25 MiB buckets (an explicit cap in PyTorch
        2.13 makes the first bucket as large as the cap too).
    model_options : mapping, optional
        Sizes passed to :func:`~queuesgd.harness.models.build` (``width``, ``hidden`` ...).
    timeout : float
        Wall-clock limit, seconds (the run is killed and reaped past it).
    setup, host, on_record
        As :func:`~queuesgd.harness.launch.run_workers` (network namespaces, progress).
    device : str
        ``"cpu"`` (the default), or ``"cuda"``/``"cuda:N"``: every worker
        computes on that one device (several processes share it; gloo moves
        the buckets through host memory, as it does for CUDA tensors).
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts.

    Returns
    -------
    list of dict
    """
    workers, steps, warmup, batch_size = check_data_parallel(
        kind, workers, steps, warmup, batch_size, force=force
    )
    cap = None if bucket_cap_mb is None else _checks.positive("bucket_cap_mb", bucket_cap_mb)
    device = _checks.device("device", device)

    def fn(ctx: WorkerContext) -> None:
        ddp_worker(
            ctx,
            kind,
            steps,
            batch_size=batch_size,
            warmup=warmup,
            seed=seed,
            bucket_cap_mb=cap,
            model_options=model_options,
            device=device,
        )

    return run_workers(fn, workers, timeout=timeout, setup=setup, on_record=on_record, host=host, force=force)
