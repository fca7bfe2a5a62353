"""The CPUs next to a GPU, and pinning the process to them (issue 21, profile fidelity pass 9).

Host-bound steps (the GPU waits for Python's kernel launches) moved by 20-60%
from one 4-step block to the next on a shared H200 host (pass 8's probe,
``validation/fidelity/probes/h200-block-bias.json``), whichever code ran.
One suspect is the launching thread wandering between NUMA nodes; the GPU's
PCI device lists the CPUs local to it (``local_cpulist`` in sysfs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nvidia_smi import query


def parse_cpulist(text: str) -> list[int]:
    """CPUs of a Linux cpulist (``"0-3,8,10-11"``), sorted.

    >>> parse_cpulist("0-3,8,10-11\\n")
    [0, 1, 2, 3, 8, 10, 11]
    >>> parse_cpulist("")
    []
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return sorted(cpus)


def sysfs_device(bus_id: str) -> str:
    """The sysfs name of a PCI address as ``nvidia-smi`` prints it (8-digit domain) or already short.

    >>> sysfs_device("00000000:19:00.0")
    '0000:19:00.0'
    >>> sysfs_device("0000:9A:00.0")
    '0000:9a:00.0'
    """
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}"


def gpu_local_cpus(index: int = 0) -> dict[str, Any]:
    """The GPU's PCI address and the CPUs sysfs lists as local to it (``cpus`` empty when unknown)."""
    out: dict[str, Any] = {"bus_id": None, "cpus": [], "numa_node": None}
    bus = query("pci.bus_id", index)
    if not bus:
        return out
    out["bus_id"] = bus
    base = Path("/sys/bus/pci/devices") / sysfs_device(bus)
    try:
        out["cpus"] = parse_cpulist((base / "local_cpulist").read_text())
        out["numa_node"] = int((base / "numa_node").read_text())
    except (OSError, ValueError):
        pass
    return out


def pin_local(index: int = 0) -> dict[str, Any]:
    """Pin this process (the calling thread, and the threads it starts after) to the GPU's local CPUs.

    Call before CUDA is first used, so that the driver's threads start
    there too. Returns what was found and done: ``allowed_before``,
    ``gpu`` (:func:`gpu_local_cpus`), ``pinned`` (the CPUs now allowed; the
    old set when the local set is unknown or shares none of them) and
    ``changed``.
    """
    before = sorted(os.sched_getaffinity(0))
    gpu = gpu_local_cpus(index)
    chosen = sorted(set(gpu["cpus"]) & set(before))
    if chosen:
        os.sched_setaffinity(0, chosen)
    now = sorted(os.sched_getaffinity(0))
    return {"allowed_before": before, "gpu": gpu, "pinned": now, "changed": now != before}
