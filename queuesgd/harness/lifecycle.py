"""How the harness's processes end: SIGTERM as an exception in the parent, held during teardown.

The harness's children sit in process groups of their own (a worker and
whatever it starts: :mod:`~queuesgd.harness.launch`), out of reach of a
signal sent to the parent's group, and Python's default action on SIGTERM
ends the parent without running a single ``finally``. Every part of the
harness that starts something which must not outlive the parent
(:func:`~queuesgd.harness.launch.run_workers`,
:class:`~queuesgd.harness.netns.Namespaces`,
:class:`~queuesgd.harness.busy.BusyProcesses`) therefore takes SIGTERM over
the default action with :func:`take_sigterm`: the signal raises
``SystemExit(143)`` (:func:`exit_on_sigterm`), the stack unwinds, and every
``finally`` and ``with`` on the way ends what it started -- the workers first,
then the network they ran on. A handler of the caller's own is left alone.
:func:`sigterm_deferred` holds a SIGTERM that arrives during a teardown until
the teardown is done, so that a second signal cannot cut it short.

A signal handler cannot help against SIGKILL, nor a child whose parent died
of a signal: a child that must not outlive its parent calls
:func:`die_with_parent` first (Linux's parent-death signal) -- a worker, a
busy spinner (whoever forked it: the harness's parent or a worker), a
program started with :func:`run_with_parent` (through ``preexec_fn``, before
its ``exec``). The signal is not inherited by a child's own children, so
each process a worker starts must ask for it itself: the harness starts
them only through these two. What the caller's code in a worker starts
otherwise (a plain ``subprocess.Popen``) stays in the worker's process
group, which a :class:`~queuesgd.harness.reaper.Reaper`, a process of its
own, ends when the parent dies without cleanup; only a process that leaves
that group (``start_new_session=True``, ``setsid``) escapes both.

Examples
--------
>>> import signal
>>> previous = take_sigterm()          # the default action: taken
>>> signal.getsignal(signal.SIGTERM) is exit_on_sigterm, previous is signal.SIG_DFL
(True, True)
>>> restore_sigterm(previous)
>>> signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
True
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, NoReturn

__all__ = [
    "die_with_parent",
    "exit_on_sigterm",
    "restore_sigterm",
    "run_with_parent",
    "sigterm_deferred",
    "take_sigterm",
]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_on_sigterm(signum: int, _frame: FrameType | None) -> NoReturn:
    """The harness's SIGTERM handler: raise ``SystemExit(128 + signum)`` (143), so that cleanup runs.

    Examples
    --------
    >>> import signal
    >>> try:
    ...     exit_on_sigterm(signal.SIGTERM, None)
    ... except SystemExit as exc:
    ...     print(exc.code)
    143
    """
    raise SystemExit(128 + signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def take_sigterm() -> Any:
    """Make SIGTERM raise ``SystemExit(143)``; return the handler replaced, or None when none was.

    Only from the main thread (signal handlers cannot be set elsewhere) and
    only over the default action: a handler of the caller's own, ``SIG_IGN``
    or :func:`exit_on_sigterm` already in place (an enclosing part of the
    harness took it) is left as it is, and None is returned.

    Examples
    --------
    >>> import signal
    >>> previous = take_sigterm()
    >>> take_sigterm() is None             # taken already: nothing to give back twice
    True
    >>> restore_sigterm(previous)
    """
    if not _main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, exit_on_sigterm)


def restore_sigterm(previous: Any) -> None:
    """Give back the handler :func:`take_sigterm` replaced (``previous`` None: nothing was taken).

    The handler is restored only while :func:`exit_on_sigterm` is in place:
    one installed since by someone else stays.

    Examples
    --------
    >>> restore_sigterm(None)             # nothing taken: nothing done
    """
    if previous is None or not _main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is exit_on_sigterm:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigterm_deferred() -> Iterator[None]:
    """Hold SIGTERM while the block runs (a teardown), then deliver it to the handler in place after.

    A SIGTERM during the block is remembered, not acted on; when the block
    ends, the handler it found is put back and the signal is raised again
    (:func:`signal.raise_signal`): :func:`exit_on_sigterm` then raises
    ``SystemExit(143)`` after the teardown, the default action ends the
    process after it. Outside the main thread, or where the handler in place
    was not set from Python, the block runs as it is.

    Examples
    --------
    >>> import os, signal
    >>> previous = take_sigterm()
    >>> try:
    ...     with sigterm_deferred():
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...         print("teardown done")
    ... except SystemExit as exc:
    ...     print("then", exc.code)
    teardown done
    then 143
    >>> restore_sigterm(previous)
    """
    current = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    if current is None:
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)

    signal.signal(signal.SIGTERM, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, current)
        if held:
            signal.raise_signal(signal.SIGTERM)


def die_with_parent(parent: int) -> bool:
    """In a child: be killed (SIGKILL) when the parent dies; exit now if ``parent`` is already gone.

    Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through :mod:`ctypes`. The
    parent may have died between the fork and this call, before the signal
    was asked for: so the parent's pid, ``parent``, read in the parent before
    the fork, is compared with :func:`os.getppid` after it, and the child
    leaves (``os._exit(1)``) when they differ. The signal comes when the
    *thread* that forked ends: fork from a thread that outlives the child
    (the harness forks and joins in the same call).

    Returns
    -------
    bool
        Whether the parent-death signal is set (False off Linux, or where
        ``prctl`` failed): then the caller should watch :func:`os.getppid`
        itself.

    Examples
    --------
    >>> import multiprocessing, os, sys
    >>> fork, parent = multiprocessing.get_context("fork"), os.getpid()
    >>> got = fork.SimpleQueue()
    >>> child = fork.Process(target=lambda: got.put(die_with_parent(parent)))
    >>> child.start(); child.join()
    >>> got.get() == sys.platform.startswith("linux"), child.exitcode
    (True, 0)
    >>> orphan = fork.Process(target=lambda: die_with_parent(-1))  # "the parent is gone": it leaves
    >>> orphan.start(); orphan.join(); orphan.exitcode
    1
    """
    prctl = _prctl()
    armed = prctl is not None and prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    if os.getppid() != parent:
        os._exit(1)
    return armed


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (None off Linux, or where it cannot be loaded), looked up once.

    Looked up in the parent before a fork (:func:`run_with_parent`), the child between its fork and
    its ``exec`` only calls it: no library is loaded there.
    """
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


def run_with_parent(args: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)``, the program killed (SIGKILL) when the calling process dies.

    :func:`die_with_parent` runs in the child between its fork and its
    ``exec`` (``preexec_fn``; the parent-death signal survives the
    ``exec``): a program a worker starts ends with that worker, and so with
    the harness's parent however it dies, wherever it runs (a plain
    ``Popen``'s ends only with its process group: in a worker of
    :func:`~queuesgd.harness.launch.run_workers`, ended by its reaper;
    elsewhere it runs on under init). As :func:`die_with_parent`, the
    signal comes when the calling *thread* ends.

    Raises
    ------
    TypeError
        ``preexec_fn`` given (this function sets it).

    Examples
    --------
    >>> import subprocess, sys
    >>> proc = run_with_parent([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE, text=True)
    >>> proc.communicate()[0], proc.returncode
    ('hi\\n', 0)
    """
    if "preexec_fn" in kwargs:
        raise TypeError("run_with_parent sets preexec_fn itself")
    parent = os.getpid()
    _prctl()  # looked up here, before the fork

    def arm() -> None:  # pragma: no cover - runs in the child, before its exec
        die_with_parent(parent)

    return subprocess.Popen(list(args), preexec_fn=arm, **kwargs)  # preexec_fn: a prctl call only
