"""The reaper: ends the groups it was told of when its parent dies without saying "done", and only then.

Each test runs a parent in its own session that starts a ``sleep`` in a process group of its own (as a
worker leads one), tells a :class:`~queuesgd.harness.reaper.Reaper` of it and blocks; the test SIGKILLs
the parent (no cleanup can run) and reads from /proc which processes are left 10 s later
(:func:`process_groups.survivors_of_signal`, which kills whatever is left, each group whole).
"""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest
from process_groups import script_head, survivors_of_signal

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, process groups")

_PARENT = """
import os, subprocess, sys, time
from queuesgd.harness.reaper import Reaper

sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)  # leads a group, as a worker does
reaper = Reaper()
reaper.watch(sleeper.pid)
if HOLD:  # a process forked by the parent keeps the pipe's write end open: no end of file for the reaper
    if os.fork() == 0:
        time.sleep(120)
        os._exit(0)
if STAND_DOWN:
    reaper.stand_down()
note("sleeper", sleeper.pid)
note("reaper", reaper.pid)
time.sleep(120)
"""


def _script(tmp_path, *, hold: bool, stand_down: bool) -> str:
    return script_head(tmp_path) + f"HOLD = {hold}\nSTAND_DOWN = {stand_down}\n" + textwrap.dedent(_PARENT)


@pytest.mark.parametrize("hold", [False, True], ids=["end-of-file", "parent-pid-changed"])
def test_a_parent_killed_without_done_has_the_groups_killed(tmp_path, hold):
    # The parent dies; the reaper learns it from its pipe's end of file, or (a fork of the parent holding
    # the write end) from its parent pid within reaper.POLL = 1 s. Both the group and the reaper are gone.
    status, left, err = survivors_of_signal(
        _script(tmp_path, hold=hold, stand_down=False), tmp_path, 2, sig=signal.SIGKILL
    )
    assert status == -signal.SIGKILL, err[-2000:]
    assert left == [], err[-2000:]
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert f"killed the process groups {sleeper}" in err  # the reaper's one line on the parent's stderr


def test_nothing_is_signalled_after_done(tmp_path):
    # "done" said, the parent is SIGKILLed before it reaps anything: the reaper leaves without a signal
    # (the group's id might name an unrelated group by then), so the sleeper is the one process left.
    status, left, err = survivors_of_signal(
        _script(tmp_path, hold=False, stand_down=True), tmp_path, 2, sig=signal.SIGKILL, gone=3.0
    )
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert status == -signal.SIGKILL, err[-2000:]
    assert left == [sleeper], err[-2000:]  # the reaper is gone, the sleeper runs on (killed here after)
    assert "queuesgd reaper" not in err
