"""Launch live worker processes with a gloo process group; fail fast, never hang.

:func:`run_workers` forks ``world_size`` children after ``import torch`` in
the parent (0.2 s for 8 ranks instead of ~20 s of spawning), gives each a
default gloo process group, runs ``fn(ctx)`` in every child and collects the
records the children report. The rendezvous store is a ``TCPStore`` the
parent makes on port 0 (the kernel picks a free port: two concurrent runs
cannot collide, and there is no race between finding a port and binding it)
*after* forking, and hands the port to the children through a pipe: forking
while the store's server thread is serving earlier children left a child
hung on an inherited lock in 2 of 3 runs of a 4-rank test.

Records go to the parent through one pipe per child, written synchronously
by :meth:`WorkerContext.report`: a record sent before a crash is kept.

Failure handling: a child exiting non-zero, a child reporting an exception,
the wall-clock ``timeout`` or ``progress_timeout`` seconds without a record
from anyone each kill every child still alive (SIGKILL), reap them, and raise
:class:`~queuesgd.errors.WorkerFailure` with the records collected so far.
Every child leads its own process group, and the parent ends each group
whole (SIGKILL) before reaping its leader, whose zombie keeps the group id
from being reused: a process a worker started does not outlive the run. A
child that outlives a parent killed without cleanup is killed by the kernel
(:func:`~queuesgd.harness.lifecycle.die_with_parent`), and so is what it starts
through the harness (a :class:`~queuesgd.harness.busy.BusyProcesses` spinner, a
program started with :func:`~queuesgd.harness.lifecycle.run_with_parent`). What
it starts otherwise (a plain ``subprocess.Popen``: the signal is not inherited)
is ended with its group by a :class:`~queuesgd.harness.reaper.Reaper`, a process
of its own that the parent tells each worker's pid before the worker runs any
code of the caller's (``setup`` and ``fn`` wait for the rendezvous port, sent
once every worker is told of) and stands down once the groups are ended. SIGTERM to
the parent raises ``SystemExit(143)``
(:func:`~queuesgd.harness.lifecycle.take_sigterm`, or the handler of an
enclosing :class:`~queuesgd.harness.netns.Namespaces`), which runs the same
cleanup.

Teardown in the child follows the measured fix for the DDP teardown
deadlock: ``gc.collect()`` (dropping models and reducers that could hold the
process group) *before* ``destroy_process_group()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any

from queuesgd import _checks
from queuesgd.errors import WorkerFailure
from queuesgd.harness._torch import require_torch
from queuesgd.harness.lifecycle import die_with_parent, restore_sigterm, sigterm_deferred, take_sigterm
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.reaper import Reaper

__all__ = ["WorkerContext", "run_probe", "run_workers"]

_PR_SET_TIMERSLACK = 29
#: Longest single wait for the workers' records, seconds (a longer run waits again).
WAIT_CHUNK = 3600.0
_dynamo_imported = False


@dataclass
class WorkerContext:
    """What a worker function gets: its rank, the world, the run's deadline and a way to report.

    The default process group (gloo) is initialized before ``fn(ctx)`` runs and
    destroyed after it returns.

    Attributes
    ----------
    rank : int
        This process's rank, ``0 .. world_size - 1``.
    world_size : int
        Number of processes.
    deadline : float
        :func:`time.monotonic` reading at which the parent kills the run.
    epoch : float
        :func:`time.perf_counter` reading taken in the parent just before the
        children were started (the same clock in every process of the machine).
    sink : object with ``send(record)``
        Where :meth:`report` writes (the pipe to the parent; a file under torchrun).

    Examples
    --------
    >>> class Sink:
    ...     def send(self, record): print(record)
    >>> ctx = WorkerContext(1, 2, deadline=0.0, epoch=0.0, sink=Sink())
    >>> ctx.report({"step": 0, "t": 0.5})
    {'step': 0, 't': 0.5, 'rank': 1}
    """

    rank: int
    world_size: int
    deadline: float
    epoch: float = 0.0
    sink: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def report(self, record: dict) -> None:
        """Send one record (a dict of plain values) to the parent now; ``"rank"`` is added.

        The write is synchronous: the record survives a crash of this worker
        right after the call.
        """
        rec = dict(record)
        rec["rank"] = self.rank
        with self._lock:
            self.sink.send(rec)


def _timer_slack() -> None:
    """Ask the kernel for 1 ns timer slack (tighter sleeps); ignore any failure."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0)


def _child(
    rank: int,
    world_size: int,
    host: str,
    go: Connection,
    timeout: float,
    deadline: float,
    epoch: float,
    conn: Connection,
    fn: Callable[[WorkerContext], None],
    setup: Callable[[int], None] | None,
    parent: int,
    reaper_fd: int,
) -> None:  # pragma: no cover - runs in the forked child (its effects are tested)
    with contextlib.suppress(OSError):
        os.close(reaper_fd)  # only the parent holds the reaper's pipe: its end of file says the parent died
    gc.freeze()  # the parent's objects: the final gc.collect() need not scan them
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own process group: the parent ends it whole, whatever it started
    die_with_parent(parent)  # and the kernel ends it if the parent dies without cleanup (SIGKILL)
    # A daemonic multiprocessing child may not fork children of its own (BusyProcesses in a worker raised
    # AssertionError): what it starts is ended with its group, and each asks for the parent-death signal.
    multiprocessing.current_process().daemon = False
    torch = require_torch()
    import torch.distributed as dist

    code = 0
    try:
        torch.set_num_threads(1)
        _timer_slack()
        limit = timedelta(seconds=timeout)
        while not go.poll(min(max(deadline - time.monotonic(), 0.0), WAIT_CHUNK)):
            if time.monotonic() >= deadline:
                raise TimeoutError("no rendezvous port from the parent")
        port = go.recv()
        go.close()
        # The port comes once the reaper knows every worker's group: only then may the caller's code start
        # processes (a parent SIGKILLed between a fork and its reaper.watch would leave them to init).
        if setup is not None:
            setup(rank)
        store = dist.TCPStore(host, port, world_size, is_master=False, timeout=limit)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=limit)
        fn(WorkerContext(rank, world_size, deadline, epoch, conn))
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
        code = 1
        lines = traceback.format_exception_only(type(exc), exc)
        last = lines[-1].strip() if lines else type(exc).__name__
        with contextlib.suppress(Exception):
            conn.send({"rank": rank, "error": last, "traceback": traceback.format_exc()})
    finally:
        gc.collect()  # drop models/reducers holding the group before destroying it
        with contextlib.suppress(Exception):
            if dist.is_initialized():
                dist.destroy_process_group()
        with contextlib.suppress(Exception):
            conn.close()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


def _exit_code(proc: Any, block: bool) -> int | None:
    """``proc``'s exit code once it has ended (``-signal`` when killed), None while it runs; not reaped.

    ``os.waitid(..., WNOWAIT)`` reads the status and leaves the zombie, which keeps the pid (and so the
    process-group id) from being reused until the teardown has ended the group and joined the worker.
    ``block``: wait for the end (its sentinel said it is ending).
    """
    flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
    try:
        info = os.waitid(os.P_PID, proc.pid, flags)
    except ChildProcessError:  # reaped already: multiprocessing reaps ended children when it starts one
        return proc.exitcode
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _unreaped(proc: Any) -> bool:
    """Whether ``proc``'s pid is still its own: running, or ended and not yet reaped."""
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _drain(conn: Connection, rank: int, records: list[dict], on_record: Any) -> str | None:
    """Read every record waiting on ``conn``; return the first error text met, if any."""
    error = None
    while True:
        try:
            if not conn.poll():
                return error
            rec = conn.recv()
        except (EOFError, OSError):
            return error
        if "error" in rec:
            error = error or str(rec["error"])
            continue
        rec.setdefault("rank", rank)
        records.append(rec)
        if on_record is not None:
            on_record(rec)


def run_workers(
    fn: Callable[[WorkerContext], None],
    world_size: int,
    *,
    timeout: float = 120.0,
    progress_timeout: float | None = 60.0,
    setup: Callable[[int], None] | None = None,
    on_record: Callable[[dict], None] | None = None,
    host: str = "127.0.0.1",
    force: bool = False,
) -> list[dict]:
    """Run ``fn(ctx)`` in ``world_size`` forked processes joined by a gloo process group.

    Parameters
    ----------
    fn : callable
        ``fn(ctx: WorkerContext) -> None``, run in every child (a closure is
        fine: children are forked, nothing is pickled). Report results with
        ``ctx.report(record)``.
    world_size : int
        Number of processes (``>= 1``), at most
        :func:`~queuesgd.harness.process_limit.process_limit` (8 per CPU core)
        unless ``force``.
    timeout : float
        Wall-clock limit of the whole run in seconds (also the process group's
        timeout).
    progress_timeout : float or None
        Fail when no record arrives from anyone for this long (``None``: never).
    setup : callable, optional
        ``setup(rank)``, run in each child once every child is started, before
        the process group is made (enter a network namespace, set
        ``GLOO_SOCKET_IFNAME``).
    on_record : callable, optional
        Called in the parent with each record as it arrives (a progress bar).
    host : str
        Address the parent's rendezvous store binds to and the children
        connect to (a bridge address when the children live in network
        namespaces).
    force : bool
        Start more processes than 8 per CPU core (refused without it, before
        any is forked).

    Returns
    -------
    list of dict
        Every record, in arrival order, each with its ``"rank"``.

    Raises
    ------
    WorkerFailure
        A child crashed, raised, or the run timed out or stalled; every child is
        killed and reaped first, and ``.partial`` keeps the records collected.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> def fn(ctx):
    ...     import torch, torch.distributed as dist
    ...     t = torch.tensor([float(ctx.rank + 1)])
    ...     dist.all_reduce(t)
    ...     ctx.report({"sum": t.item()})
    >>> sorted((r["rank"], r["sum"]) for r in run_workers(fn, 2, timeout=60))
    [(0, 3.0), (1, 3.0)]
    """
    global _dynamo_imported
    size = _checks.integer("world_size", world_size)
    world_size = check_processes("world_size", world_size, size, force=force)
    timeout = _checks.positive("timeout", timeout)
    if progress_timeout is not None:
        progress_timeout = _checks.positive("progress_timeout", progress_timeout)
    require_torch()
    import torch.distributed as dist

    if not _dynamo_imported:
        # Building an optimizer imports torch._dynamo (1-2 s of CPU): once here, not once per child.
        with contextlib.suppress(Exception):
            import torch._dynamo  # noqa: F401
        _dynamo_imported = True
    mp = multiprocessing.get_context("fork")
    # SIGTERM raises SystemExit(143) so that the finally below ends the workers: they sit in process groups
    # of their own, out of reach of a signal to the parent's group (`timeout 12 queuesgd validate ...` left
    # both running, audit 2026-11-28); a handler already in place (an enclosing Namespaces') is kept.
    previous = take_sigterm()
    start = time.monotonic()
    deadline = start + timeout
    epoch = time.perf_counter()
    parent = os.getpid()
    procs: list[Any] = []
    readers: list[Connection] = []
    records: list[dict] = []
    failure: tuple[int | None, str] | None = None
    store = None
    reaper: Reaper | None = None
    try:
        # Before any worker: ends the workers' groups if this process dies without the cleanup below.
        reaper = Reaper()
        # Fork every child first, then start the store's server thread: forking while that thread
        # serves earlier children can leave a lock held in the new child (measured: 2 hangs in 3 runs).
        gos = []
        for rank in range(world_size):
            reader, writer = mp.Pipe(duplex=False)
            go_reader, go_writer = mp.Pipe(duplex=False)
            args = (rank, world_size, host, go_reader, timeout, deadline, epoch, writer, fn, setup)
            proc = mp.Process(
                target=_child,
                args=(*args, parent, reaper.fd),
                name=f"queuesgd-worker-{rank}",
                daemon=True,
            )
            proc.start()
            reaper.watch(proc.pid)  # before the child gets its port, so before any code of the caller's
            writer.close()  # only the child writes; later children must not inherit it
            go_reader.close()
            procs.append(proc)
            readers.append(reader)
            gos.append(go_writer)
        # Port 0: the kernel picks a free port, so concurrent runs never collide.
        store = dist.TCPStore(
            host, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=timeout)
        )
        for go in gos:
            go.send(store.port)
            go.close()
        last_record = time.monotonic()
        alive = set(range(world_size))
        while alive and failure is None:
            now = time.monotonic()
            limit = deadline - now
            if progress_timeout is not None:
                limit = min(limit, last_record + progress_timeout - now)
            # wait() polls in milliseconds of a C int: past about 24 days it raises OverflowError, so a
            # long run waits in hours and loops (audit 2026-11-28: --steps 100000 --compute 10s)
            chunk = min(max(limit, 0.0), WAIT_CHUNK)
            ready = wait([readers[r] for r in alive] + [procs[r].sentinel for r in alive], chunk)
            for rank in sorted(alive):
                if readers[rank] in ready:
                    before = len(records)
                    error = _drain(readers[rank], rank, records, on_record)
                    if len(records) > before:
                        last_record = time.monotonic()
                    if error is not None and failure is None:
                        failure = (rank, error)
            for rank in sorted(alive):
                code = _exit_code(procs[rank], block=procs[rank].sentinel in ready)
                if code is not None:  # ended, and left unreaped until its group is ended below
                    error = _drain(readers[rank], rank, records, on_record)
                    alive.discard(rank)
                    if failure is None and (error is not None or code != 0):
                        failure = (rank, error if error is not None else f"exit code {code}")
            now = time.monotonic()
            if failure is None and alive:
                if now >= deadline:
                    failure = (None, f"timed out after {timeout:g} s ({len(alive)} workers still running)")
                elif progress_timeout is not None and now - last_record >= progress_timeout:
                    failure = (None, f"no record from any worker for {progress_timeout:g} s")
    finally:
        try:
            with sigterm_deferred():  # a second SIGTERM waits until the workers are ended
                for proc in procs:
                    # The worker's group, with anything it started, ended while the worker is unreaped:
                    # its zombie holds the pid, so the group id cannot name a new process's group yet.
                    if _unreaped(proc):
                        with contextlib.suppress(OSError):
                            os.killpg(proc.pid, signal.SIGKILL)
                        proc.kill()  # killed before its setpgid: not yet its own group's leader
                if reaper is not None:  # the groups are ended, their ids still held: "done" before reaping
                    reaper.stand_down()
                for proc in procs:
                    proc.join()
                if reaper is not None:
                    reaper.join()
                for rank, reader in enumerate(readers):
                    if failure is not None:
                        _drain(reader, rank, records, on_record)
                    reader.close()
                store = None  # stops the rendezvous server
        finally:
            restore_sigterm(previous)
    if failure is not None:
        raise WorkerFailure(failure[0], failure[1], partial=records)
    return records


def run_probe(
    probe: Callable[..., None],
    world_size: int,
    nbytes: int,
    repeats: int,
    warmup: int,
    *,
    setup: Callable[[int], None] | None = None,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
    args: tuple[Any, ...] = (),
    force: bool = False,
) -> tuple[int, list[dict]]:
    """Run a calibration probe ``probe(ctx, size, repeats, warmup, *args)`` on ``world_size`` ranks.

    The shared launch of the network probes (:mod:`~queuesgd.harness.overlap`,
    :mod:`~queuesgd.harness.duplex`): ``nbytes`` is rounded up to whole
    float32 elements, ``repeats`` and ``warmup`` are checked, and only the
    wall-clock ``timeout`` applies (a 100 Mbit/s probe can outlast
    :func:`run_workers`' progress timeout). ``force``: as :func:`run_workers`' (more than 8 processes
    per CPU core).

    Returns
    -------
    size : int
        The message size used, bytes.
    records : list of dict
        Every rank's records (:meth:`WorkerContext.report`).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> def probe(ctx, size, repeats, warmup):
    ...     ctx.report({"size": size, "repeats": repeats})
    >>> size, recs = run_probe(probe, 2, 10, 3, 0)
    >>> size, sorted((r["rank"], r["repeats"]) for r in recs)
    (12, [(0, 3), (1, 3)])
    """
    size = 4 * -(-_checks.integer("nbytes", nbytes) // 4)
    reps = _checks.integer("repeats", repeats)
    warm = _checks.integer("warmup", warmup, minimum=0)

    def fn(ctx: WorkerContext) -> None:
        probe(ctx, size, reps, warm, *args)

    records = run_workers(
        fn, world_size, timeout=timeout, progress_timeout=None, setup=setup, host=host, force=force
    )
    return size, records
