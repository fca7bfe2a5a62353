"""validation/measure_host_noise.py reads the clock in bounded time (harness lifecycle audit, LOW 17).

A stand-in ``nvidia-smi`` on PATH answers at once or hangs; the read must give its answer or, past the
timeout, an empty reading, never wait for the hung one.
"""

from __future__ import annotations

import os
import time

import pytest
from validation_scripts import load_script


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    def install(body: str) -> None:
        path = tmp_path / "nvidia-smi"
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    return install


def test_the_clock_is_what_nvidia_smi_prints(fake_smi):
    fake_smi("echo '1980 MHz'")
    assert load_script("measure_host_noise")._clock() == "1980 MHz"


def test_a_hung_nvidia_smi_gives_an_empty_reading_after_the_timeout(fake_smi, monkeypatch):
    fake_smi("exec sleep 30")  # exec: the process run() kills is the one holding the pipes
    mod = load_script("measure_host_noise")
    monkeypatch.setattr(mod, "SMI_TIMEOUT", 0.5)
    start = time.monotonic()
    assert mod._clock() == ""
    assert 0.5 <= time.monotonic() - start < 10.0  # the timeout, not the 30 s of the hung call
