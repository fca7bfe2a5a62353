"""The arguments of one live run, checked in one place for ``validate`` and the torchrun entry point.

:func:`queuesgd.harness.campaign.validate` and ``python -m
queuesgd.harness.torchrun`` run the same worker loops, so they take the same
steps, warm-up, workload, compute time, gradient, batch, random delay and seed
with the same bounds (:func:`check_run`). An error names the Python argument
(``steps``) or, with ``flags=True``, the command line's flag (``--steps``).
:func:`check_data_parallel` checks the arguments that the real data-parallel
launchers (DDP, FSDP) share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.process_limit import check_processes
from queuesgd.workload import RandomDelay

__all__ = ["MIN_STEPS", "RunArgs", "check_data_parallel", "check_run", "run_seconds", "steps_and_warmup"]

#: Fewest steps of a live run, warm-up included (and at least 10 measured after the warm-up).
MIN_STEPS = 20


@dataclass(frozen=True)
class RunArgs:
    """One live run's checked arguments (:func:`check_run`).

    Attributes
    ----------
    steps, warmup : int
        Steps per worker (warm-up included) and the steps left out of the measurement.
    workload : str
        ``"emulated"`` or a harness model (:data:`queuesgd.harness.models.MODELS`).
    compute : float
        Mean compute seconds per step.
    gradient_bytes, batch_size, seed : int
        The exchanged gradient's bytes, samples per step per worker, the workers' seed.
    random_delay : RandomDelay or None
        ``K`` workers drawn every step sleep ``DELAY``; None: no delay.
    """

    steps: int
    warmup: int
    workload: str
    compute: float
    gradient_bytes: int
    batch_size: int
    random_delay: RandomDelay | None
    seed: int


def run_seconds(field_name: str, value: Any, steps: int, *, allow_zero: bool = True) -> float:
    """Seconds of ``value`` such that ``steps`` of them last at most ``units.MAX_SECONDS``.

    Examples
    --------
    >>> run_seconds("compute", "20ms", 200)
    0.02
    >>> run_seconds("compute", "1h", 1_000_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: compute: got '1h'; accepted: at most 1000 s: 1000000 steps of ...
    """
    seconds = _checks.duration(field_name, value, allow_zero=allow_zero)
    if steps * seconds > units.MAX_SECONDS:
        limit = f"{steps} steps of it last at most {units.MAX_SECONDS:g} s (about 32 years)"
        raise InvalidParameterError(field_name, value, f"at most {units.MAX_SECONDS / steps:.4g} s: {limit}")
    return seconds


def check_run(
    steps: Any,
    warmup: Any,
    workload: Any,
    compute: Any,
    gradient_bytes: Any,
    batch_size: Any,
    random_delay: Any,
    seed: Any,
    *,
    fewest_workers: int | None = None,
    flags: bool = False,
) -> RunArgs:
    """Check a live run's arguments before anything starts.

    ``steps`` 20 to 1,000,000; ``warmup`` (None: ``max(5, steps // 10)``)
    fewer than ``steps - 10``; ``workload`` ``"emulated"`` or a harness model;
    ``compute`` > 0 with ``steps`` of it at most 1e9 s; ``gradient_bytes`` > 0;
    ``batch_size`` 1 to 1,000,000; ``random_delay`` ``"K:DELAY"`` (or a
    :class:`~queuesgd.RandomDelay`) with ``steps`` delays at most 1e9 s and,
    given ``fewest_workers``, ``K`` at most that; ``seed`` 0 to ``2**32 - 1``.

    Parameters
    ----------
    steps, warmup, workload, compute, gradient_bytes, batch_size, random_delay, seed
        As :func:`queuesgd.harness.campaign.validate` takes them.
    fewest_workers : int, optional
        The smallest worker count of the runs (None: not known yet).
    flags : bool
        Name the command line's flags in errors (``--gradient-bytes``) rather than the arguments.

    Returns
    -------
    RunArgs

    Raises
    ------
    InvalidParameterError
        Naming the argument (or flag) and what it accepts.

    Examples
    --------
    >>> run = check_run(200, None, "emulated", "20ms", "1MB", 32, "1:50ms", 0)
    >>> run.warmup, run.compute, run.gradient_bytes, run.random_delay.count
    (20, 0.02, 1000000, 1)
    >>> check_run(30, 25, "emulated", "20ms", "1MB", 32, None, 0, flags=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --warmup: got 25; accepted: fewer than steps - 10 (20)
    """
    from queuesgd.harness.models import MODELS
    from queuesgd.specs import random_delay as parse_delay

    def name(field: str) -> str:
        return "--" + field.replace("_", "-") if flags else field

    steps = _checks.integer(name("steps"), steps, minimum=MIN_STEPS, maximum=_checks.MAX_COUNT)
    warm = max(5, steps // 10) if warmup is None else _checks.integer(name("warmup"), warmup, minimum=0)
    if warm >= steps - 10:
        raise InvalidParameterError(name("warmup"), warm, f"fewer than steps - 10 ({steps - 10})")
    workload = _checks.choice(name("workload"), workload, ("emulated", *MODELS))
    mean = run_seconds(name("compute"), compute, steps, allow_zero=False)
    nbytes = units.parse_bytes(gradient_bytes, name("gradient_bytes"))
    nbytes = int(_checks.positive(name("gradient_bytes"), nbytes))
    batch = _checks.integer(name("batch_size"), batch_size, maximum=_checks.MAX_COUNT)
    delays = random_delay
    if delays is not None and not isinstance(delays, RandomDelay):
        delays = parse_delay(delays, name("random_delay"))
    too_many = fewest_workers is not None and delays is not None and delays.count > fewest_workers
    if delays is not None and (too_many or steps * delays.delay > units.MAX_SECONDS):
        most = (
            ""
            if fewest_workers is None
            else f"at most {fewest_workers} delayed workers (the fewest workers), "
        )
        each = f"{units.MAX_SECONDS / steps:.4g} s ({steps} steps of it: at most 1e9 s, 32 years)"
        accepted = f"{most}each delay at most {each}"
        raise InvalidParameterError(name("random_delay"), random_delay, accepted)
    seed = _checks.integer(name("seed"), seed, minimum=0, maximum=2**32 - 1)  # torch: seed x 7919 + rank
    return RunArgs(steps, warm, workload, mean, nbytes, batch, delays, seed)


def steps_and_warmup(steps: Any, warmup: Any, prefix: str = "") -> tuple[int, int]:
    """``(steps, warmup)`` of a live run as ints: ``steps >= 2`` and ``0 <= warmup < steps``.

    ``prefix`` goes before both names in errors (``"spec."``: ``spec.warmup``), where they are fields of
    a document.

    Examples
    --------
    >>> steps_and_warmup(10, 2.0)
    (10, 2)
    >>> steps_and_warmup(3, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: warmup: got 3; accepted: fewer than steps (3)
    >>> steps_and_warmup(30, 30, "spec.")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec.warmup: got 30; accepted: fewer than spec.steps (30)
    """
    steps = _checks.integer(f"{prefix}steps", steps, minimum=2)
    warmup = _checks.integer(f"{prefix}warmup", warmup, minimum=0)
    if warmup >= steps:
        raise InvalidParameterError(f"{prefix}warmup", warmup, f"fewer than {prefix}steps ({steps})")
    return steps, warmup


def check_data_parallel(
    kind: Any, workers: Any, steps: Any, warmup: Any, batch_size: Any, *, force: bool = False
) -> tuple[int, int, int, int]:
    """The arguments a real data-parallel launch shares, checked in order before any process starts.

    :func:`~queuesgd.harness.ddp.run_ddp` and :func:`~queuesgd.harness.fsdp.run_fsdp` take them:
    ``kind`` a harness model, ``workers`` an integer within
    :func:`~queuesgd.harness.process_limit.process_limit` (unless ``force``), ``steps`` and
    ``warmup`` as :func:`steps_and_warmup`, ``batch_size`` an integer >= 1.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    workers, steps, warmup, batch_size : int
        Processes, training steps per worker (warm-up included), the first steps marked
        ``warmup``, samples per step per worker.
    force : bool
        Accept more processes than the limit.

    Returns
    -------
    tuple of int
        ``(workers, steps, warmup, batch_size)``.

    Raises
    ------
    InvalidParameterError
        Naming the first argument out of bounds (``UnknownNameError`` for ``kind``).

    Examples
    --------
    >>> check_data_parallel("mlp", 2, 10, 2.0, 8)
    (2, 10, 2, 8)
    >>> check_data_parallel("mlp", 2, 3, 3, 8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: warmup: got 3; accepted: fewer than steps (3)
    """
    from queuesgd.harness.models import MODELS

    _checks.choice("model", kind, MODELS)
    workers = check_processes("workers", workers, _checks.integer("workers", workers), force=force)
    steps, warmup = steps_and_warmup(steps, warmup)
    return workers, steps, warmup, _checks.integer("batch_size", batch_size)
