"""How a training step slows down when ``k`` workers share the machine's cores: measured, not fitted.

On a machine with fewer cores than workers (two cores here, up to eight
workers), every worker's step is slower than on its own: the processes share
the cores, the memory bandwidth and the caches. An a-priori prediction needs
that slowdown *before* the run, so it is measured in the profiling step:
:func:`measure_concurrency` starts ``k`` processes (one thread each) that
each profile the same model at the same time with :func:`queuesgd.profile`
(no communication between them), for every ``k`` asked, and keeps each
copy's measured step times. Synchronous training keeps its workers in step,
so ``k`` copies computing together is what ``k`` training workers do between
two all-reduces; the prediction of an ``n``-worker run then uses the law
measured with ``k = n`` copies (:meth:`queuesgd.harness.apriori.Profile.workload_at`).

Independent copies are what an *asynchronous* worker sees. A *synchronous*
step is different: all ``n`` workers start it together (when the all-reduce
ends) and the step's compute phase ends when the last of them ends. When
workers outnumber cores the OS time-shares the cores among them, so they all
end at about the same time, near the work-conserving ``n x (one step) / cores``,
and *not* at the maximum of ``n`` independent draws of a copy's step time
(which is what a model drawing each worker's compute independently would
take). :func:`measure_synchronized` measures that phase directly: ``k``
processes run the training step in lock step (a barrier before each step)
and each step's span, from the common start to the last copy's end of
backward, is recorded. With ``ddp=True`` each copy trains through
``DistributedDataParallel`` over a process group of its own (one rank), so
the span includes DDP's own per-step costs (its hooks, copying gradients
into buckets and back, the one-rank all-reduce call) and only the
communication between workers is left to the model. With ``local=True``
too, a DDP communication hook hands each bucket back unreduced, so the span
has DDP's hooks and bucket copies but no collective call at all: on a CUDA
device even a one-rank gloo all-reduce copies each bucket to host memory
and back, which the calibrated all-reduce of ``n`` ranks counts again.

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> m = measure_concurrency("mlp", (1, 2), batch_size=8, repetitions=5, warmup=1,
...                         model_options={"inputs": 16, "hidden": 8})
>>> sorted(m), m[2]["compute"].size        # two copies, 5 - 5 // 2 timed steps each (queuesgd.profile)
([1, 2], 6)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.process_limit import check_processes
from queuesgd.training_optimizer import default_optimizer

__all__ = ["lock_step_spans", "measure_concurrency", "measure_synchronized", "synchronized_step"]


def _checked(
    kind: str,
    copies: Iterable[int],
    model_options: Any,
    batch_size: int,
    repetitions: int,
    warmup: int,
    device: str,
    force: bool,
) -> tuple[list[int], dict[str, Any], int, int, int, str]:
    """The arguments both measurements share, checked: copies (within the process limit unless
    ``force``), model options, batch, repetitions, warm-up, device."""
    from queuesgd.harness.models import check_model

    check_model(kind)
    counts = sorted({_checks.integer("copies", k) for k in copies})
    if not counts:
        from queuesgd.errors import InvalidParameterError

        raise InvalidParameterError("copies", copies, "one or more integers >= 1")
    check_processes("copies", counts, counts[-1], force=force)  # the largest: before any run
    return (
        counts,
        dict(model_options or {}),
        _checks.integer("batch_size", batch_size),
        _checks.integer("repetitions", repetitions, minimum=2),
        _checks.integer("warmup", warmup, minimum=0),
        _checks.device("device", device),
    )


def _per_count(
    counts: list[int],
    fn: Callable[[WorkerContext], None],
    summary: Callable[[list[dict]], dict[str, Any]],
    *,
    timeout: float,
    force: bool,
) -> dict[int, dict[str, Any]]:
    """Run ``fn`` on ``k`` processes for each ``k`` in ``counts``, one run after another; each run's summary.

    Both measurements' loop: ``{k: summary(records of the k-process run)}``, each run
    bounded by ``timeout`` seconds (:func:`~queuesgd.harness.launch.run_workers`).
    """
    return {k: summary(run_workers(fn, k, timeout=timeout, force=force)) for k in counts}


def _copy(
    ctx: WorkerContext,
    kind: str,
    batch_size: int,
    repetitions: int,
    warmup: int,
    seed: int,
    model_options: Mapping[str, Any],
    device: str = "cpu",
) -> None:
    """One copy: profile the model after a barrier (all copies start together); report the steps."""
    import torch.distributed as dist

    from queuesgd.harness._torch import use_device
    from queuesgd.harness.model_build import build_model
    from queuesgd.profiler import profile

    def factory() -> Any:
        return build_model(kind, **model_options)[0]

    dev, _ = use_device(device)
    shape = build_model(kind, **model_options)[1]
    dist.barrier()
    work = profile(
        factory,
        batch_size=batch_size,
        input_shape=shape,
        device=str(dev),
        threads=1,
        warmup=warmup,
        repetitions=repetitions,
        seed=seed,
        name=kind,
    )
    ctx.report(
        {
            "compute": [float(v) for v in work.compute.samples],
            "update": float(work.update_time),
            "workload": work if ctx.rank == 0 else None,
        }
    )


def measure_concurrency(
    kind: str,
    copies: Iterable[int] = (1, 2, 4, 8),
    *,
    batch_size: int,
    repetitions: int = 20,
    warmup: int = 3,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    timeout: float = 600.0,
    device: str = "cpu",
    force: bool = False,
) -> dict[int, dict[str, Any]]:
    """Profile ``k`` concurrent copies of a harness model's training step, for each ``k`` in ``copies``.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    copies : iterable of int
        Numbers of concurrent processes (one thread each).
    batch_size, repetitions, warmup, seed
        As :func:`queuesgd.profile` (each copy measures ``repetitions`` steps).
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    timeout : float
        Wall-clock limit of each ``k``'s run, seconds.
    device : str
        Where every copy computes: ``"cpu"`` or one CUDA device that all ``k`` share.
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any run starts.

    Returns
    -------
    dict
        ``{k: {"compute": array of every copy's forward + backward times,
        "update": array of each copy's median optimizer step,
        "workload": copy 0's layer-wise Workload}}``.
    """
    counts, options, batch_size, repetitions, warmup, device = _checked(
        kind, copies, model_options, batch_size, repetitions, warmup, device, force
    )

    def fn(ctx: WorkerContext) -> None:
        _copy(ctx, kind, batch_size, repetitions, warmup, seed, options, device)

    def summary(records: list[dict]) -> dict[str, Any]:
        records.sort(key=lambda r: r["rank"])
        return {
            "compute": np.concatenate([np.asarray(r["compute"], dtype=float) for r in records]),
            "update": np.array([r["update"] for r in records]),
            "workload": records[0]["workload"],
        }

    return _per_count(counts, fn, summary, timeout=timeout, force=force)


def synchronized_step(
    ctx: WorkerContext,
    kind: str,
    batch_size: int,
    repetitions: int,
    warmup: int,
    seed: int,
    model_options: Mapping[str, Any],
    ddp: bool,
    device: str = "cpu",
    local: bool = False,
) -> None:
    """One of ``k`` copies stepping in lock step: report each step's start, end of backward, end of update.

    The step is :mod:`queuesgd.harness.ddp`'s: cross-entropy on a synthetic
    batch, SGD (:func:`~queuesgd.training_optimizer.default_optimizer`), one thread; through
    ``DistributedDataParallel`` on a one-rank group of its own when ``ddp``
    (with ``local``, its buckets handed back unreduced by a communication
    hook: no collective call); on ``device`` (on CUDA, timed after
    :func:`torch.cuda.synchronize`).
    """
    import time

    import torch
    import torch.distributed as dist

    from queuesgd.harness._torch import ddp_device_ids, use_device
    from queuesgd.harness.model_build import build_model_seeded
    from queuesgd.harness.models import classes_of, worker_batches

    torch.set_num_threads(1)
    dev, wait = use_device(device)
    own = None
    for r in range(ctx.world_size):  # new_group is collective: every rank makes every one-rank group
        group = dist.new_group([r])
        if r == ctx.rank:
            own = group
    net, shape = build_model_seeded(kind, seed, model_options)
    net = net.to(dev)
    net.train()
    ids = ddp_device_ids(dev)
    model = torch.nn.parallel.DistributedDataParallel(net, device_ids=ids, process_group=own) if ddp else net
    if ddp and local:
        model.register_comm_hook(None, _hand_back)
    opt = default_optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    classes = classes_of(model_options)
    ((x, y),) = worker_batches(seed, ctx.rank, batch_size, shape, classes, count=1, device=dev)
    times = []
    for step in range(warmup + repetitions):
        wait()
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        wait()
        t1 = time.perf_counter()
        opt.step()
        wait()
        t2 = time.perf_counter()
        if step >= warmup:
            times.append((t0, t1, t2))
    dist.barrier()
    ctx.report({"times": times})
    del model, opt, net


def _hand_back(_state, bucket):  # type: ignore[no-untyped-def]  # DDP refuses a hook annotated otherwise
    """A DDP communication hook that returns the bucket as it is (one rank: the mean is the bucket)."""
    import torch

    fut: Any = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def measure_synchronized(
    kind: str,
    copies: Iterable[int] = (1, 2, 4, 8),
    *,
    batch_size: int,
    repetitions: int = 20,
    warmup: int = 3,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    ddp: bool = True,
    timeout: float = 600.0,
    device: str = "cpu",
    local: bool = False,
    force: bool = False,
) -> dict[int, dict[str, Any]]:
    """The compute phase of a synchronous step of ``k`` workers sharing this machine, for each ``k``.

    ``k`` processes (one thread each) run the training step in lock step: a
    barrier, then forward, backward and the optimizer step, ``repetitions``
    times after ``warmup`` (see the module docstring).

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    copies : iterable of int
        Numbers of processes.
    batch_size, repetitions, warmup, seed
        Samples per step, measured steps, unmeasured first steps, the seed.
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    ddp : bool
        Train through ``DistributedDataParallel`` on a one-rank group (True,
        DDP's step) or the bare model (False, the parameter-server worker's step).
    timeout : float
        Wall-clock limit of each ``k``'s run, seconds.
    device : str
        Where every copy computes: ``"cpu"`` or one CUDA device that all ``k`` share.
    local : bool
        With ``ddp``: hand each bucket back unreduced through a communication
        hook, so that no collective is called (see the module docstring).
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any run starts.

    Returns
    -------
    dict
        ``{k: {"span": array, "update": array}}``: per step, the seconds from
        the copies' mean start to the last copy's end of backward, and the
        copies' mean optimizer step.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> m = measure_synchronized("mlp", (1, 2), batch_size=8, repetitions=5, warmup=1,
    ...                          model_options={"inputs": 16, "hidden": 8})
    >>> sorted(m), m[2]["span"].size, bool((m[2]["span"] > 0).all())
    ([1, 2], 5, True)
    """
    counts, options, batch_size, repetitions, warmup, device = _checked(
        kind, copies, model_options, batch_size, repetitions, warmup, device, force
    )

    def fn(ctx: WorkerContext) -> None:
        synchronized_step(
            ctx, kind, batch_size, repetitions, warmup, seed, options, bool(ddp), device, bool(local)
        )

    def summary(records: list[dict]) -> dict[str, Any]:
        return lock_step_spans([r["times"] for r in records])

    return _per_count(counts, fn, summary, timeout=timeout, force=force)


def lock_step_spans(times: Any) -> dict[str, np.ndarray]:
    """Per lock-step step: the span from the copies' mean start to the last end of backward, the mean update.

    Parameters
    ----------
    times : array_like, shape (copies, steps, 3)
        Each copy's ``(start, end of backward, end of optimizer step)`` per
        step, on one clock.

    Returns
    -------
    dict
        ``{"span": array of steps, "update": array of steps}``.

    Examples
    --------
    >>> out = lock_step_spans([[(0.0, 1.0, 1.1), (2.0, 3.0, 3.2)],
    ...                        [(0.2, 1.5, 1.6), (2.0, 2.5, 2.6)]])
    >>> out["span"].round(12).tolist(), out["update"].round(12).tolist()
    ([1.4, 1.0], [0.1, 0.15])
    """
    t = np.asarray(times, dtype=float)
    if t.ndim != 3 or t.shape[2] != 3:
        from queuesgd.errors import InvalidParameterError

        raise InvalidParameterError("times", t.shape, "an array of shape (copies, steps, 3)")
    return {
        "span": t[:, :, 1].max(axis=0) - t[:, :, 0].mean(axis=0),
        "update": (t[:, :, 2] - t[:, :, 1]).mean(axis=0),
    }
