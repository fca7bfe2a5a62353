"""How busy the machine was during a live run, from the kernel's counters: ours, others', the host's.

A live run on a shared machine is slowed by what else runs on it. The
a-priori rows therefore record, for each run, the CPU time the machine spent
on it and on everything else (:class:`CpuMeter`): the machine's busy time
from ``/proc/stat`` (user, nice, system, irq, softirq), the CPU time of this
process and its reaped children (:func:`resource.getrusage`), and the time
the hypervisor gave the machine's CPUs to other guests (``steal``). The
difference of the first two is *foreign* load: other processes, and the
kernel's networking on behalf of the run (softirq time is not charged to
the processes that caused it).

Examples
--------
>>> with CpuMeter() as meter:
...     _ = sum(i * i for i in range(200_000))
>>> load = meter.result()
>>> load is None or (load["wall"] > 0 and 0 <= load["steal"] <= 1)
True
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

__all__ = ["DISTURBED", "CpuMeter", "disturbed", "read_proc_stat"]

#: Share of the machine's capacity that other processes may take before a run counts as disturbed.
DISTURBED = 0.10


def disturbed(load: dict[str, float] | None, limit: float = DISTURBED) -> bool:
    """Whether others took more than ``limit`` of the machine during a run (``load``: a result).

    "Others" are the machine's other processes (``foreign_share``) and the
    hypervisor's other guests (``steal``: time the machine's CPUs were
    given away). Both make the run slower than the machine the profile
    measured, and neither is part of what the model describes.

    Examples
    --------
    >>> disturbed({"foreign_share": 0.3}), disturbed({"foreign_share": 0.02}), disturbed(None)
    (True, False, False)
    >>> disturbed({"foreign_share": 0.0, "steal": 0.385}), disturbed({"foreign_share": 0.05, "steal": 0.03})
    (True, False)
    """
    if load is None:
        return False
    return float(load.get("foreign_share", 0.0)) + float(load.get("steal", 0.0)) > limit


_PROCESS = (0, 1, 2)  # user, nice, system (guest time is included in user)
_IRQ = (5, 6)  # irq, softirq: the kernel's work for devices and the network, charged to no process
_STEAL = 7


def read_proc_stat(text: str | None = None) -> dict[str, float] | None:
    """The machine's cumulative CPU seconds from ``/proc/stat``'s ``cpu`` line, or None off Linux.

    Parameters
    ----------
    text : str, optional
        The file's content (read from ``/proc/stat`` when None).

    Returns
    -------
    dict or None
        ``process`` (user + nice + system), ``irq`` (irq + softirq), ``steal``, ``total``
        (every field), in seconds summed over the CPUs.

    Examples
    --------
    >>> read_proc_stat("cpu  100 0 50 800 10 0 20 30 0 0\\ncpu0 1 2 3\\n")
    {'process': 1.5, 'irq': 0.2, 'steal': 0.3, 'total': 10.1}
    """
    if text is None:
        try:
            text = Path("/proc/stat").read_text()
        except OSError:
            return None
    first = text.split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        return None
    ticks = [int(v) for v in first[1:]]
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    # guest and guest_nice (fields 8, 9) are already counted in user and nice
    total = sum(ticks[:8])
    return {
        "process": sum(ticks[i] for i in _PROCESS if i < len(ticks)) / hz,
        "irq": sum(ticks[i] for i in _IRQ if i < len(ticks)) / hz,
        "steal": (ticks[_STEAL] if len(ticks) > _STEAL else 0) / hz,
        "total": total / hz,
    }


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class CpuMeter:
    """Measure the machine's CPU use while a block runs (a context manager).

    :meth:`result` gives, over the block's wall time: ``wall`` (seconds),
    ``cores``, ``ours`` (CPU seconds of this process and the children it
    reaped), ``foreign`` (the CPU seconds of every other process: the
    machine's user and system time less ours), ``irq`` (the kernel's
    interrupt and softirq time, mostly the network's packets, ours
    included), and, as fractions of the machine's capacity
    (``wall x cores``), ``ours_share``, ``foreign_share``, ``irq_share`` and
    ``steal``. None where ``/proc/stat`` is missing.
    """

    def __init__(self) -> None:
        self._start: tuple[float, float, dict[str, float] | None] | None = None
        self._end: tuple[float, float, dict[str, float] | None] | None = None

    def __enter__(self) -> CpuMeter:
        self._start = (time.monotonic(), _own_cpu(), read_proc_stat())
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end = (time.monotonic(), _own_cpu(), read_proc_stat())

    def result(self) -> dict[str, float] | None:
        """The measurement (see the class docstring), after the block."""
        if self._start is None or self._end is None or self._start[2] is None or self._end[2] is None:
            return None
        wall = max(self._end[0] - self._start[0], 1e-9)
        ours = self._end[1] - self._start[1]
        busy = self._end[2]["process"] - self._start[2]["process"]
        irq = self._end[2]["irq"] - self._start[2]["irq"]
        steal = self._end[2]["steal"] - self._start[2]["steal"]
        cores = os.cpu_count() or 1
        capacity = wall * cores
        foreign = max(busy - ours, 0.0)
        return {
            "wall": wall,
            "cores": cores,
            "ours": ours,
            "foreign": foreign,
            "irq": irq,
            "ours_share": ours / capacity,
            "foreign_share": foreign / capacity,
            "irq_share": irq / capacity,
            "steal": min(max(steal / capacity, 0.0), 1.0),
        }
