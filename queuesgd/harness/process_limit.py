"""How many live processes the harness starts on this machine unless forced: 8 per CPU core.

Emulated steps are timed waits, so 8 to 16 worker processes share two cores;
far more measure the machine, not the scheme (each process holds a sliver of
a core, and gloo connects every pair of ranks). One rule, :func:`check_processes`,
refused before any process is forked: by :func:`~queuesgd.harness.launch.run_workers`
and every public entry point that starts processes through it
(:func:`~queuesgd.harness.runners.run`, :func:`~queuesgd.harness.campaign.validate`,
:func:`~queuesgd.harness.ddp.run_ddp`, :func:`~queuesgd.harness.fsdp.run_fsdp`,
:func:`~queuesgd.harness.pipelining.run_pipeline`, the contention, incast and overlap
measurements, the profiles and the calibrations), each with the same ``force`` passed
down, and ``queuesgd validate`` (its ``--force`` is ``force=True``). An entry point
that loops over counts checks the largest before its first run.

Examples
--------
>>> import os
>>> process_limit() == PROCESSES_PER_CORE * (os.cpu_count() or 1)
True
>>> check_processes("workers", 4, 5)
5
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["PROCESSES_PER_CORE", "check_processes", "process_limit", "worker_counts"]

#: Most live worker processes per CPU core the harness starts without ``force=True`` (``--force``).
PROCESSES_PER_CORE = 8


def process_limit() -> int:
    """The most processes one live run may have here without ``force``: 8 per CPU core.

    Examples
    --------
    >>> process_limit() >= PROCESSES_PER_CORE
    True
    """
    return PROCESSES_PER_CORE * (os.cpu_count() or 1)


def check_processes(
    field: str,
    got: Any,
    processes: int,
    *,
    force: Any = False,
    option: str = "force=True",
    ranks: bool = True,
) -> int:
    """``processes``, or :class:`~queuesgd.errors.InvalidParameterError` naming ``field`` above the limit.

    Parameters
    ----------
    field, got : str, object
        The argument that asks for the processes and its value, as the error names them.
    processes : int
        The processes it means (a parameter server is one more than its workers).
    force : bool
        Start them all the same.
    option : str
        How the error tells the caller to force (``"--force"`` on the command line).
    ranks : bool
        The processes are gloo ranks (the error counts their connections); False for others
        (:class:`~queuesgd.harness.busy.BusyProcesses`' spinners).

    Examples
    --------
    >>> import os
    >>> cores = os.cpu_count() or 1
    >>> check_processes("workers", 10**4, 10**4, force=True)
    10000
    >>> try:
    ...     check_processes("workers", 10**4, 10**4)
    ... except InvalidParameterError as err:
    ...     print(err.field, err.accepted.startswith(f"at most {8 * cores} worker processes"))
    workers True
    """
    force = _checks.boolean("force", force)
    cores = os.cpu_count() or 1
    most = process_limit()
    if force or processes <= most:
        return processes
    gloo = (
        f"; PyTorch's gloo connects every pair of ranks: {processes * (processes - 1) // 2:,} TCP "
        f"connections, about {processes + 1:,} sockets per process"
        if ranks
        else ""
    )
    raise InvalidParameterError(
        field,
        got,
        f"at most {most} {'worker ' if ranks else ''}processes on {cores} CPU core(s), or {option}. "
        f"Estimate: {processes:,} processes, each with 1/{processes / cores:.0f} of a core, so the run "
        "would time the scheduler rather than the scheme" + gloo,
    )


def worker_counts(
    field: str, values: int | Iterable[int], processes: Callable[[int], int], *, force: Any = False
) -> list[int]:
    """Distinct worker counts of live runs, each within :func:`process_limit` unless forced.

    ``processes(n)``: the processes ``n`` workers need (a parameter server's ``n + 1``).

    Examples
    --------
    >>> worker_counts("workers", (2, 4), lambda n: n + 1)
    [2, 4]
    >>> worker_counts("workers", [2, 2], lambda n: n)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: workers: got [2, 2]; accepted: distinct counts, each given once
    """
    one = isinstance(values, (int, np.integer)) and not isinstance(values, bool)
    items = list(_checks.integers(field, [values] if one else values, maximum=_checks.MAX_COUNT))
    if len(set(items)) != len(items):
        raise InvalidParameterError(field, values, "distinct counts, each given once")
    check_processes(field, values, max(processes(n) for n in items), force=force)
    return items
