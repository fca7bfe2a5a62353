"""harness.load: the machine's CPU use during a block, ours against everything else's."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from queuesgd.harness.load import CpuMeter, read_proc_stat

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_proc_stat_fields_by_hand():
    # user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s
    got = read_proc_stat("cpu  300 10 40 5000 7 3 2 45 100 0\n")
    assert got == pytest.approx({"process": 3.5, "irq": 0.05, "steal": 0.45, "total": 54.07}, rel=1e-12)
    assert read_proc_stat("intr 1 2 3\n") is None


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat")
def test_a_child_we_reap_is_ours_and_a_process_we_do_not_is_foreign():
    with CpuMeter() as mine:
        subprocess.run([sys.executable, "-c", BURN.format(s=0.6)], check=True)
    ours = mine.result()
    assert ours["ours"] >= 0.55  # the child's 0.6 CPU seconds (plus the interpreter's start-up)
    other = subprocess.Popen([sys.executable, "-c", BURN.format(s=1.5)])
    try:
        time.sleep(0.2)
        with CpuMeter() as meter:
            time.sleep(0.8)  # the other process burns a core meanwhile; we sleep
        load = meter.result()
    finally:
        other.wait(timeout=30)
    assert load["ours"] < 0.1
    assert load["foreign"] >= 0.5, load  # about 0.8 s of the other process's CPU
    assert 0.0 <= load["steal"] <= 1.0 and load["foreign_share"] <= 1.0
