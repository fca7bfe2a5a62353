"""Real fully sharded data-parallel training with PyTorch's FSDP2 (``fully_shard``) on gloo.

The sharded counterpart of :mod:`queuesgd.harness.ddp`: every worker process
builds the same harness model (:func:`queuesgd.harness.models.build`, same
seed), applies ``torch.distributed.fsdp.fully_shard`` to each child block of
the model that holds parameters (the FSDP *units*, in forward order), then to
the root (which owns nothing left over in these models), and trains it on its
own synthetic mini-batches (random inputs, random labels, cross-entropy) with
SGD (:func:`~queuesgd.training_optimizer.default_optimizer`), one thread per process. FSDP2 shards
every parameter along its first dimension across the ranks (ZeRO-3), gathers
a unit's parameters before its forward and again before its backward (with
``reshard_after_forward=True``), reduce-scatters its gradients after its
backward, prefetches the next unit's gather and updates each rank's shard
(Zhao et al., *PyTorch FSDP*, VLDB 2023; Rajbhandari et al., *ZeRO*, SC
2020). Nothing here emulates a network time.

Each worker reports one record per step, as :func:`~queuesgd.harness.ddp.run_ddp`
does: ``t0`` (step start), ``t_backward`` (end of ``loss.backward()``: the
gradients are reduce-scattered), ``t_end`` (after the optimizer step),
``t_update``, ``applied = n`` and ``warmup``. Rank 0 also reports the units
(``role: "units"``: ``unit_names`` and ``unit_bytes``, the parameter bytes of
each unit in forward order). With ``report_parameters=True`` every rank
reports, after the last step, the full parameters (each unit gathered:
``DTensor.full_tensor()``) as one flat list (``role: "parameters"``).

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> recs = run_fsdp("mlp", 2, steps=4, warmup=1, batch_size=8, model_options={"hidden": 16}, timeout=120)
>>> sorted(r["step"] for r in recs if r.get("role") == "worker" and r["rank"] == 0)
[0, 1, 2, 3]
>>> next(r["unit_bytes"] for r in recs if r.get("role") == "units")  # 4 x (784*16+16, 16*16+16, 16*10+10)
[50240, 1088, 680]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.run_args import check_data_parallel
from queuesgd.training_optimizer import default_optimizer

__all__ = ["COLLECTIVES", "collective_seconds", "fsdp_units", "fsdp_worker", "run_fsdp", "timed_collectives"]

#: The ``torch.distributed`` collectives FSDP2 issues (torch 2.13,
#: ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``), as :func:`timed_collectives` names them.
COLLECTIVES = {"all_gather_single": "allgather", "reduce_scatter_single": "reducescatter"}


@contextlib.contextmanager
def timed_collectives() -> Iterator[list[tuple[str, float, float]]]:
    """In a worker process: time every collective FSDP2 issues, on the rank that issues it.

    While the block runs, ``torch.distributed``'s :data:`COLLECTIVES` are
    wrapped; each call appends ``(kind, start, end)`` (``time.perf_counter``)
    to the list the block receives. On a CPU FSDP2 waits for each collective
    where it issues it, so a call's span is what the rank spends in it.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> with timed_collectives() as calls:
    ...     pass
    >>> calls, torch.distributed.all_gather_single.__name__
    ([], 'all_gather_single')
    """
    import time

    import torch.distributed as dist

    calls: list[tuple[str, float, float]] = []
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append((COLLECTIVES[name], t0, time.perf_counter()))

        return wrapper

    try:
        for name, fn in originals.items():
            setattr(dist, name, timed(name, fn))
        yield calls
    finally:
        for name, fn in originals.items():
            setattr(dist, name, fn)


def collective_seconds(calls: Iterable[Sequence[Any]], start: float, end: float) -> float:
    """Seconds of the calls of :func:`timed_collectives` that began in ``[start, end)``.

    Examples
    --------
    >>> calls = [("allgather", 1.0, 1.5), ("reducescatter", 2.0, 2.25), ("allgather", 3.0, 3.5)]
    >>> collective_seconds(calls, 1.0, 3.0)     # the first two began in [1, 3)
    0.75
    """
    return float(sum(c[2] - c[1] for c in calls if start <= c[1] < end))


def fsdp_units(net: Any) -> list[tuple[str, Any]]:
    """The FSDP units of a harness model: its child blocks that hold parameters, in forward order.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.models import mlp
    >>> [name for name, _ in fsdp_units(mlp(8, 4, 2))]     # the ReLUs hold no parameters
    ['0', '2', '4']
    """
    return [(name, m) for name, m in net.named_children() if any(True for _ in m.parameters())]


def fsdp_worker(
    ctx: WorkerContext,
    kind: str,
    steps: int,
    *,
    batch_size: int,
    warmup: int,
    seed: int = 0,
    reshard_after_forward: bool = True,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
    solo: bool = False,
    key: str,
) -> None:
    """In a worker process: train ``kind`` sharded with FSDP2 for ``steps`` steps, one record per step.

    ``solo=True``: every rank shards over a process group of its own (one
    rank): independent copies of single-rank FSDP training, FSDP's own
    per-unit work without a network (the profiling run of
    :func:`queuesgd.harness.apriori_parallel.profile_fsdp`). ``key`` is the
    records' ``scheme`` (the live row's,
    :data:`queuesgd.harness.live_schemes.parallel.FSDP`).
    """
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.ddp import train_steps
    from queuesgd.harness.models import build_seeded, classes_of, worker_batches

    torch = require_torch()
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    nn = torch.nn
    net, shape = build_seeded(kind, seed, model_options)  # identical initial parameters before sharding
    net.train()
    units = fsdp_units(net)
    unit_bytes = [sum(p.numel() * p.element_size() for p in m.parameters()) for _, m in units]
    mesh = None
    if solo:
        import torch.distributed as dist
        from torch.distributed.device_mesh import DeviceMesh

        groups = [dist.new_group([r]) for r in range(ctx.world_size)]  # collective: every rank makes all
        mesh = DeviceMesh.from_group(groups[ctx.rank], "cpu")
    for _, module in units:
        fully_shard(module, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(net, mesh=mesh, reshard_after_forward=reshard_after_forward)
    opt = default_optimizer(net.parameters())
    loss_fn = nn.CrossEntropyLoss()
    data = worker_batches(seed, ctx.rank, batch_size, shape, classes_of(model_options))
    applied = 1 if solo else ctx.world_size
    train_steps(ctx, key, net, opt, loss_fn, data, steps, warmup, applied, report_loss=True)
    if ctx.rank == 0:
        ctx.report({"role": "units", "unit_names": [u for u, _ in units], "unit_bytes": unit_bytes})
    if report_parameters:
        flat = [
            v
            for p in net.parameters()
            for v in (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().reshape(-1).tolist()
        ]
        ctx.report({"role": "parameters", "parameters": flat})
    del opt, net


def run_fsdp(
    kind: str,
    workers: int,
    steps: int,
    *,
    batch_size: int = 32,
    warmup: int = 5,
    seed: int = 0,
    reshard_after_forward: bool = True,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
    timeout: float = 600.0,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    on_record: Callable[[dict], None] | None = None,
    force: bool = False,
) -> list[dict]:
    """Train ``kind`` with FSDP2 (``fully_shard`` per unit) on ``workers`` gloo processes; every record.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    workers, steps, batch_size, warmup : int
        Processes, training steps per worker (warm-up included), samples per
        step per worker, and the first steps marked ``warmup``.
    seed : int
        Initial parameters (shared) and each worker's data (seed and rank,
        :func:`~queuesgd.harness.models.worker_batches`).
    reshard_after_forward : bool
        FSDP2's option: free each unit's gathered parameters after its
        forward (gather again for the backward; ZeRO-3) or keep them.
    model_options : mapping, optional
        Sizes passed to :func:`~queuesgd.harness.models.build`.
    report_parameters : bool
        Every rank reports its full parameters after the last step.
    timeout : float
        Wall-clock limit, seconds (every process group is killed and reaped past it).
    setup, host, on_record
        As :func:`~queuesgd.harness.launch.run_workers`.
    force : bool
        Start more processes than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts.

    Returns
    -------
    list of dict
        See the module docstring.

    Examples
    --------
    >>> run_fsdp("mlp", 2, steps=3, warmup=3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: warmup: got 3; accepted: fewer than steps (3)
    """
    from queuesgd.errors import InvalidParameterError
    from queuesgd.schemes import ShardedDataParallel

    workers, steps, warmup, batch_size = check_data_parallel(
        kind, workers, steps, warmup, batch_size, force=force
    )
    if not isinstance(reshard_after_forward, bool):
        raise InvalidParameterError("reshard_after_forward", reshard_after_forward, "True or False")

    def fn(ctx: WorkerContext) -> None:
        fsdp_worker(
            ctx,
            kind,
            steps,
            batch_size=batch_size,
            warmup=warmup,
            seed=seed,
            reshard_after_forward=reshard_after_forward,
            model_options=model_options,
            report_parameters=report_parameters,
            key=ShardedDataParallel.key,
        )

    return run_workers(fn, workers, timeout=timeout, setup=setup, on_record=on_record, host=host, force=force)
