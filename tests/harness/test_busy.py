"""Busy stand-in processes (harness.busy): stopped with the block, and never outliving their parent.

The spinners are counted from /proc (independent of multiprocessing): after the parent is signalled
each must be gone within a bounded time, whatever the signal (audit 2026-11-28, harness lifecycle
HIGH 2: a parent ended by SIGTERM left its spinner running under init, state R, for good).
"""

from __future__ import annotations

import signal
import sys

import pytest
from process_groups import alive, survivors_of_signal

from queuesgd.harness.busy import BusyProcesses

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

_PARENT = """
import os, time
from queuesgd.harness.busy import BusyProcesses
with BusyProcesses(2) as busy:
    for p in busy._procs:
        path = os.path.join(PID_DIR, f"spinner{p.pid}")
        with open(path + ".tmp", "w") as fh:
            fh.write(str(p.pid))
        os.replace(path + ".tmp", path + ".pid")
    time.sleep(120)
"""


@pytest.mark.parametrize(
    ("sig", "status"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM),  # SystemExit(143): the block's exit stops them
        (signal.SIGKILL, -signal.SIGKILL),  # no cleanup at all: the kernel's parent-death signal
        (signal.SIGHUP, -signal.SIGHUP),  # the default action of another signal: the same
    ],
)
def test_spinners_end_with_their_parent_however_it_dies(tmp_path, sig, status):
    script = f"PID_DIR = {str(tmp_path)!r}\n" + _PARENT
    got, left, err = survivors_of_signal(script, tmp_path, 2, sig=sig, start=60)
    assert left == [], err[-2000:]  # every spinner gone within 10 s
    assert got == status, err[-2000:]


def test_the_block_stops_them_and_a_half_made_block_leaves_none(monkeypatch):
    import multiprocessing

    with BusyProcesses(2) as busy:
        pids = [p.pid for p in busy._procs]
        assert [alive(pid) for pid in pids] == [True, True]
    assert [alive(pid) for pid in pids] == [False, False]
    # The third fork fails: the two started already are stopped before the error surfaces.
    started: list[int] = []
    real = multiprocessing.context.ForkProcess._Popen

    def popen(process):
        if len(started) == 2:
            raise OSError(11, "Resource temporarily unavailable")
        out = real(process)
        started.append(out.pid)
        return out

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "_Popen", staticmethod(popen))
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        with BusyProcesses(3):
            pass
    assert len(started) == 2 and [alive(pid) for pid in started] == [False, False]
