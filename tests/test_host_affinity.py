"""validation/host_affinity.py: Linux cpulists and PCI addresses read as the kernel writes them."""

from __future__ import annotations

import os

import pytest
from validation_scripts import load_script


@pytest.fixture(scope="module")
def affinity():
    return load_script("host_affinity")


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]), ("5", [5]), ("", []), ("0-1,1-2", [0, 1, 2])],
)
def test_cpulist(affinity, text, cpus):
    assert affinity.parse_cpulist(text) == cpus


def test_cpulist_of_this_process_round_trips(affinity):
    # the kernel's own cpulist of this process (Cpus_allowed_list) against os.sched_getaffinity
    line = next(x for x in open("/proc/self/status") if x.startswith("Cpus_allowed_list:"))
    assert affinity.parse_cpulist(line.split(":", 1)[1]) == sorted(os.sched_getaffinity(0))


def test_sysfs_name(affinity):
    assert affinity.sysfs_device("00000000:19:00.0") == "0000:19:00.0"
    assert affinity.sysfs_device("00000001:AB:00.0") == "0001:ab:00.0"


def test_pin_local_without_a_gpu_changes_nothing(affinity):
    before = sorted(os.sched_getaffinity(0))
    got = affinity.pin_local()
    if got["gpu"]["cpus"]:
        pytest.skip("a GPU with local CPUs is here")
    assert got["pinned"] == before and not got["changed"]
    assert sorted(os.sched_getaffinity(0)) == before


def test_fidelity_refuses_pin_local_on_a_cpu(capsys, tmp_path):
    script = load_script("run_profile_fidelity")
    with pytest.raises(SystemExit) as stop:
        script.main(["--device", "cpu", "--out", str(tmp_path / "out"), "--pin", "local"])
    assert stop.value.code == 2
    assert "--pin local: needs a CUDA device" in capsys.readouterr().err
