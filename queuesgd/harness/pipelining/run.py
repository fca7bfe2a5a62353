"""Launch a pipeline-parallel training run: :func:`run_pipeline` (see :mod:`queuesgd.harness.pipelining`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.launch import WorkerContext, run_workers
from queuesgd.harness.pipelining.profile import StageProfile, default_split
from queuesgd.harness.pipelining.units import SCHEDULES, check_split, unit_count
from queuesgd.harness.pipelining.worker import pipeline_worker
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.run_args import steps_and_warmup
from queuesgd.schemes import Pipeline

__all__ = ["run_pipeline"]


def run_pipeline(
    kind: str,
    stages: int,
    microbatches: int,
    steps: int,
    *,
    schedule: str = "1f1b",
    batch_size: int = 32,
    warmup: int = 5,
    split: Sequence[int] | None = None,
    replicas: int = 1,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    report_parameters: bool = False,
    profile: StageProfile | None = None,
    timeout: float = 600.0,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    on_record: Callable[[dict], None] | None = None,
    force: bool = False,
) -> list[dict]:
    """Train ``kind`` pipelined over ``stages`` gloo processes (times ``replicas``); every record.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    stages, microbatches : int
        ``S`` pipeline stages and ``M`` micro-batches per step
        (``batch_size`` must be a multiple of ``M``).
    steps, warmup : int
        Training steps (warm-up included) and the first ones marked ``warmup``.
    schedule : {"1f1b", "gpipe"}
        ``Schedule1F1B`` or ``ScheduleGPipe``.
    batch_size : int
        Samples per step per replica (``M`` micro-batches of ``batch_size / M``).
    split : sequence of int, optional
        Units per stage (forward order; :func:`~queuesgd.harness.pipelining.model_units`). None: the
        balanced split of ``profile``, or of a short profile made here before the run
        (:func:`~queuesgd.harness.pipelining.profile.default_split`).
    replicas : int
        ``D`` data-parallel pipeline replicas: ``D x S`` processes, each
        stage's gradients all-reduced across its replicas.
    seed : int
        Initial parameters (shared) and each replica's data (:func:`~queuesgd.harness.models.worker_batches`
        with the replica as the rank).
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    report_parameters : bool
        Every rank reports its stage's parameters after the last step.
    profile : StageProfile, optional
        The stage profile for ``split=None``.
    timeout : float
        Wall-clock limit, seconds (every process group is killed and reaped past it).
    setup, host, on_record
        As :func:`~queuesgd.harness.launch.run_workers`.
    force : bool
        Start more processes (``replicas x stages``) than
        :func:`~queuesgd.harness.process_limit.process_limit` (8 per CPU core), refused without it
        before any starts (or any profile is made).

    Returns
    -------
    list of dict
        See :mod:`queuesgd.harness.pipelining`.

    Examples
    --------
    >>> run_pipeline("mlp", 2, 3, steps=4, batch_size=8, warmup=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: batch_size: got 8; accepted: a multiple of microbatches (3)
    """
    from queuesgd.harness.models import MODELS

    _checks.choice("model", kind, MODELS)
    S = _checks.integer("stages", stages)
    M = _checks.integer("microbatches", microbatches)
    D = _checks.integer("replicas", replicas)
    size = check_processes("replicas x stages", f"{D} x {S}", D * S, force=force)
    steps, warmup = steps_and_warmup(steps, warmup)
    batch_size = _checks.integer("batch_size", batch_size)
    schedule = _checks.choice("schedule", schedule, SCHEDULES)
    if batch_size % M:
        raise InvalidParameterError("batch_size", batch_size, f"a multiple of microbatches ({M})")
    if schedule == "1f1b" and M < S:
        # torch's Schedule1F1B refuses fewer micro-batches than stages.
        raise InvalidParameterError("microbatches", M, f"at least the stages ({S}) for 1F1B")
    units = unit_count(kind, model_options)
    if S > units:
        raise InvalidParameterError("stages", S, f"an integer from 1 to the model's {units} units")
    if split is None:
        chosen = default_split(kind, S, batch_size // M, model_options, seed=seed, profile=profile)
    else:
        chosen = check_split(split, S, units)

    def fn(ctx: WorkerContext) -> None:
        pipeline_worker(
            ctx,
            kind,
            S,
            M,
            steps,
            schedule=schedule,
            batch_size=batch_size,
            warmup=warmup,
            split=chosen,
            key=Pipeline.key,
            seed=seed,
            model_options=model_options,
            report_parameters=report_parameters,
        )

    return run_workers(fn, size, timeout=timeout, setup=setup, on_record=on_record, host=host, force=force)
