"""End the workers' process groups when the harness's parent dies without cleanup (SIGKILL).

:func:`~queuesgd.harness.launch.run_workers` puts every worker in a process
group of its own and ends each group whole on every exit path it sees. A
parent killed with SIGKILL runs no exit path: the kernel's parent-death
signal (:func:`~queuesgd.harness.lifecycle.die_with_parent`) ends the
workers, but not what a worker started with a plain ``subprocess.Popen``
(the signal is not inherited), which would run on under init. A
:class:`Reaper` covers that case: a small process of its own that is told
each worker's pid (= its group's id) and, when the parent is gone without
having said "done", sends SIGKILL to every group it was told of.

How it works:

- the reaper is a fresh interpreter running this file
  (``python -I -S reaper.py PARENT``: the standard library only, no
  ``site``), started with ``close_fds`` (it holds no descriptor of the
  parent's but the read end of its pipe, its stdin) in a session of its own
  (a signal to the parent's process group, ``kill -9 -PGID``, leaves it to do
  its work; it is in no worker's group). A fork of the parent would hold
  every descriptor and lock of a process that has imported torch;
- it blocks reading the pipe, whose write end only the parent holds (a forked
  worker closes its copy first), one line ``PID STARTTIME`` a group;
- end of file, or its parent pid changed (the parent is gone; checked every
  :data:`POLL` seconds, in case a process forked by the parent kept the write
  end open), before a line ``done``: every group told of is sent SIGKILL,
  then it exits. A group whose leader's pid now names a process with another
  start time (``/proc/PID/stat``) is skipped: its id was freed, so the group
  is empty, and the pid may lead an unrelated group;
- ``done`` (:meth:`Reaper.stand_down`: the parent's cleanup has ended the
  groups and has not reaped their leaders yet, so no id was reused): it exits
  and signals nothing, whatever happens next;
- the parent reaps it (:meth:`Reaper.join`): it never stays a zombie of a
  living parent, and a reaper that does not leave within the bound is killed.

The reaper never hangs: it leaves on ``done``, on end of file, and when its
parent is gone. What it cannot end: a process that left its worker's group
(``setsid``, ``start_new_session=True``, ``setpgid``), and anything at all if
the reaper itself is SIGKILLed with the parent.

Examples
--------
>>> import subprocess
>>> sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)  # a group of its own
>>> reaper = Reaper()
>>> reaper.watch(sleeper.pid)
>>> reaper.stand_down()              # "done": the reaper signals nothing
>>> reaper.join(), sleeper.poll()    # it left with status 0; the group runs on
(0, None)
>>> sleeper.kill(); sleeper.wait()
-9
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys

__all__ = ["JOIN_TIMEOUT", "POLL", "Reaper", "kill_groups", "serve", "start_time"]

#: Seconds between two checks of the reaper's parent pid while its pipe is quiet.
POLL = 1.0
#: Seconds :meth:`Reaper.join` waits for the reaper to leave before killing it.
JOIN_TIMEOUT = 5.0
_DONE = b"done"


def start_time(pid: int) -> str | None:
    """``pid``'s start time (``/proc/PID/stat`` field 22, clock ticks since boot); None without one.

    With the pid, it names one process: a pid reused later has a later start time.

    Examples
    --------
    >>> import os, sys
    >>> (start_time(os.getpid()) is not None) == sys.platform.startswith("linux")
    True
    >>> start_time(-1) is None
    True
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, ValueError):
        return None


def kill_groups(groups: dict[int, str | None]) -> list[int]:
    """Send SIGKILL to each process group ``pgid`` of ``groups`` (``{pgid: leader's start time}``).

    A group is skipped when its leader's pid now names a process of another
    start time (:func:`start_time`): the id was reused, so the group told of
    is empty. A group already gone is skipped too.

    Returns
    -------
    list of int
        The groups signalled.

    Examples
    --------
    >>> import subprocess
    >>> sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    >>> kill_groups({sleeper.pid: "0"})     # another start time: not this group, left alone
    []
    >>> kill_groups({sleeper.pid: start_time(sleeper.pid)}) == [sleeper.pid], sleeper.wait()
    (True, -9)
    """
    done = []
    for pgid, started in groups.items():
        now = start_time(pgid)
        if started is not None and now is not None and now != started:
            continue
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        done.append(pgid)
    return done


def _take(data: bytes, groups: dict[int, str | None]) -> bool:
    """Read whole lines ``PID STARTTIME`` into ``groups``; True once ``done`` is met."""
    for line in data.split(b"\n"):
        if line == _DONE:
            return True
        words = line.split()
        if len(words) == 2 and words[0].isdigit():
            groups[int(words[0])] = None if words[1] == b"-" else words[1].decode()
    return False


def serve(fd: int, parent: int, poll: float = POLL) -> list[int]:
    """The reaper's loop: read groups from ``fd`` until ``done`` (signal none) or the parent is gone.

    The parent is gone at end of file, or when :func:`os.getppid` is no
    longer ``parent`` (checked every ``poll`` seconds while ``fd`` is quiet);
    then what is still waiting in the pipe is read, and each group told of is
    ended (:func:`kill_groups`) unless a ``done`` was among it.

    Returns
    -------
    list of int
        The groups signalled (empty after ``done``).

    Examples
    --------
    >>> import os
    >>> read, write = os.pipe()
    >>> _ = os.write(write, b"123 -\\nnot a group\\ndone\\n")   # an odd line is ignored
    >>> os.close(write)
    >>> serve(read, os.getppid())
    []
    >>> os.close(read)
    """
    groups: dict[int, str | None] = {}
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], poll)
        if not ready:
            if os.getppid() != parent:
                break
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        lines, _, pending = (pending + chunk).rpartition(b"\n")
        if _take(lines, groups):
            return []
    os.set_blocking(fd, False)  # gone: what the pipe still holds, then act
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 4096):
            pending += chunk
    if _take(pending, groups):
        return []
    return kill_groups(groups)


class Reaper:
    """The parent's handle on a reaper process (started here): tell it groups, then stand it down.

    Every method is safe to call after the reaper died (a write to it is then
    dropped: it is a safety net, and the parent's own cleanup still ends the
    groups).

    Parameters
    ----------
    executable : str
        The Python interpreter to run the reaper with.
    """

    def __init__(self, executable: str = sys.executable) -> None:
        read, self._fd = os.pipe()  # neither end is inherited by a program exec'd later
        try:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                [executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid())],
                stdin=read,
                stdout=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
        except BaseException:
            os.close(self._fd)
            raise
        finally:
            os.close(read)
        os.set_blocking(self._fd, False)  # a full pipe (a stopped reaper) drops a line, never blocks
        self._open = True

    @property
    def fd(self) -> int:
        """The write end of the pipe: a process forked by the parent must close its copy first."""
        return self._fd

    @property
    def pid(self) -> int | None:
        """The reaper's pid (None once joined)."""
        return None if self._proc is None else self._proc.pid

    def _send(self, line: bytes) -> None:
        if self._open:
            with contextlib.suppress(OSError):  # BrokenPipeError: the reaper is gone
                os.write(self._fd, line)

    def watch(self, pid: int) -> None:
        """Have group ``pid`` (a child of the caller's, unreaped, leading it) killed if the caller dies."""
        self._send(f"{pid} {start_time(pid) or '-'}\n".encode())

    def stand_down(self) -> None:
        """Say ``done`` and close the pipe: the reaper leaves and signals nothing. Idempotent.

        Call it once the groups are ended and before their leaders are
        reaped (a reaped leader's id may be reused).
        """
        if self._open:
            self._send(_DONE + b"\n")
            self._open = False
            os.close(self._fd)

    def join(self, timeout: float = JOIN_TIMEOUT) -> int | None:
        """Stand down (if not yet), reap the reaper, and return its exit status; killed past ``timeout`` s.

        Returns None when it was joined already.
        """
        self.stand_down()
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


def _main(argv: list[str]) -> int:  # pragma: no cover - the reaper process (its effects are tested)
    parent = int(argv[0])
    killed = serve(sys.stdin.fileno(), parent)
    if killed:  # the parent cannot say it any more
        print(
            f"queuesgd reaper: process {parent} ended without its cleanup; killed the process groups "
            f"{', '.join(map(str, killed))}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
