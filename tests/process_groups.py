"""Shared by the tests that start processes: run one in its own process group, bounded in time.

On a timeout the whole group is killed (a process's children too: torchrun's workers, a campaign's
ranks) and the test fails, saying so (tests/test_compare_input_checks.py,
tests/test_probe_and_text_checks.py, tests/harness/test_apriori_campaign.py,
tests/harness/test_torchrun.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
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
