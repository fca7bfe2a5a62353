"""Busy processes that stand in for computing workers while a calibration measures the network.

On a machine whose cores the workers share, a message crosses the emulated
network more slowly while other processes compute: the kernel's work for
every packet (veth, bridge, ``tc``) and the two ranks' threads wait for a
core. A probe on 2026-11-25 (two cores, 1 Gbit/s) timed an 819 kB message at
6.1 ms with the cores idle and 8.2 ms beside four CPU-bound processes. A
calibration that should describe the link *as the run will see it* therefore
runs with the processes that will compute meanwhile: :class:`BusyProcesses`
forks ``k`` of them, each a one-thread loop of floating-point work, and
stops them when the block ends (also on an error).

Examples
--------
>>> import time
>>> with BusyProcesses(1) as busy:
...     time.sleep(0.05)
...     alive = busy.alive()
>>> alive, busy.alive()
(1, 0)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from typing import Any

from queuesgd import _checks
from queuesgd.harness.lifecycle import die_with_parent, restore_sigterm, sigterm_deferred, take_sigterm
from queuesgd.harness.process_limit import check_processes

__all__ = ["BusyProcesses"]


def _spin(stop: Any, parent: int) -> None:  # pragma: no cover - runs in the child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)  # killed with the parent, however it dies (SIGKILL too)
    x = 1.0
    while not stop.is_set():
        for _ in range(20_000):
            x = x * 1.0000001 + 1e-9
        if x > 1e300:
            x = 1.0
        if os.getppid() != parent:  # no parent-death signal here (not Linux): the parent is gone
            return


class BusyProcesses:
    """Fork ``count`` CPU-bound processes on entry; stop them on exit (a context manager).

    The processes never outlive the block's process: SIGTERM to it raises
    ``SystemExit(143)`` while the block runs (over the default action,
    :func:`~queuesgd.harness.lifecycle.take_sigterm`), so ``__exit__`` stops
    them, and each is killed by the kernel when the process that forked it
    dies in any other way (:func:`~queuesgd.harness.lifecycle.die_with_parent`).

    Parameters
    ----------
    count : int
        How many (0: none, the block runs on idle cores); at most the
        harness's process limit
        (:func:`~queuesgd.harness.process_limit.process_limit`, 8 a core).
    force : bool
        Start more all the same.

    Raises
    ------
    InvalidParameterError
        ``busy`` above the process limit (checked before anything is forked).

    Examples
    --------
    >>> from queuesgd.harness.process_limit import process_limit
    >>> BusyProcesses(process_limit() + 1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: busy: got ...; accepted: at most ... processes on ... force=True...
    """

    def __init__(self, count: int, *, force: bool = False) -> None:
        self.count = _checks.integer("busy", count, minimum=0)
        check_processes("busy", self.count, self.count, force=force, ranks=False)
        self._procs: list[Any] = []
        self._stop: Any = None
        self._prev_sigterm: Any = None

    def __enter__(self) -> BusyProcesses:
        if self.count:
            self._prev_sigterm = take_sigterm()
            try:
                ctx = mp.get_context("fork")
                self._stop = ctx.Event()
                for _ in range(self.count):
                    p = ctx.Process(target=_spin, args=(self._stop, os.getpid()), daemon=True)
                    p.start()
                    self._procs.append(p)
            except BaseException:
                self.__exit__()  # the ones started already: a half-made block leaves nothing behind
                raise
        return self

    def alive(self) -> int:
        """How many of the processes are running."""
        return sum(1 for p in self._procs if p.is_alive())

    def __exit__(self, *exc: object) -> None:
        try:
            with sigterm_deferred():  # a SIGTERM now acts once the processes are stopped
                if self._stop is not None:
                    self._stop.set()
                for p in self._procs:
                    p.join(5.0)
                    if p.is_alive():
                        os.kill(p.pid, signal.SIGKILL)
                        p.join(5.0)
                self._procs = []
        finally:
            restore_sigterm(self._prev_sigterm)
            self._prev_sigterm = None
