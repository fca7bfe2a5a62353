"""Shared by the tests that start processes: run one in its own process group, bounded in time.

On a timeout the whole group is killed (a process's children too: torchrun's workers, a campaign's
ranks) and the test fails, saying so (tests/test_compare_input_checks.py,
tests/test_probe_and_text_checks.py, tests/harness/test_apriori_campaign.py,
tests/harness/test_torchrun.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


def run_group(
    cmd: list[str], timeout: float, *, env: dict[str, str] | None = None, cwd: Any = None
) -> subprocess.CompletedProcess[str]:
    """``cmd``'s status and output (text); past ``timeout`` seconds its group is killed and the test fails."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{cmd} ran past {timeout} s (its process group was killed)")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (read from /proc: a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


_NOTE = """
import os as _os


def note(name, pid):
    path = _os.path.join(PID_DIR, name)
    with open(path + ".tmp", "w") as fh:
        fh.write(str(pid))
    _os.replace(path + ".tmp", path + ".pid")

"""


def script_head(pid_dir: Path) -> str:
    """The first lines of a parent script for :func:`survivors_of_signal`: ``PID_DIR`` and ``note(name,
    pid)``, which writes ``PID_DIR/name.pid`` whole (written aside, then renamed: a reader polling for
    ``*.pid`` never sees half a number)."""
    return f"PID_DIR = {str(pid_dir)!r}\n" + _NOTE


def survivors_of_signal(
    script: str,
    pid_dir: Path,
    count: int,
    *,
    sig: int = signal.SIGTERM,
    start: float = 90.0,
    stop: float = 30.0,
    gone: float = 10.0,
    group: bool = False,
) -> tuple[int | None, list[int], str]:
    """Signal a Python parent (SIGTERM) once its children have written their pids; the ones alive after.

    ``script`` runs in its own session; it (or what it starts) writes one file ``*.pid`` per child into
    ``pid_dir``. Once ``count`` are there (at most ``start`` s), the parent (``group``: its whole process
    group, as ``kill -SIG -PGID`` or ``timeout`` would) gets ``sig`` and ``stop`` s
    to exit; its children then get ``gone`` s to end. Returns the parent's exit status (None: still
    running, killed here), the children's pids still running at the end and the parent's stderr.
    Whatever happens, everything it started is killed before this returns (the parent's group, and
    each child's group: the harness's workers lead their own).
    """
    err_path = pid_dir / "parent.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
    pids: list[int] = []
    status = None
    left: list[int] = []
    try:
        deadline = time.monotonic() + start
        while len(pids) < count and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            pids = [int(p.read_text()) for p in pid_dir.glob("*.pid") if p.read_text().strip()]
        if len(pids) < count:
            pytest.fail(f"{len(pids)} of {count} children started: {err_path.read_text()[-3000:]}")
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = proc.wait(timeout=stop)
        deadline = time.monotonic() + gone
        left = [pid for pid in pids if alive(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [pid for pid in left if alive(pid)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pid in pids:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    return status, left, err_path.read_text()
