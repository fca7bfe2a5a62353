"""The device's timeline in a torch.profiler trace: kernels, copies and memsets, and the host calls that
launched them (:func:`queuesgd.read_trace` of a trace recorded on a GPU).

Kineto writes each device operation (``cat`` ``kernel``, ``gpu_memcpy`` or
``gpu_memset``) with ``args.correlation``, the id of the ``cuda_runtime`` (or
``cuda_driver``) event on the host that launched it. A phase of a training
step (forward, backward, optimizer step) is timed by the device work its
host window launched (:func:`device_times`).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEVICE_CATS",
    "LAUNCH_CATS",
    "DeviceTimeline",
    "category",
    "device_timeline",
    "device_times",
    "event_end",
]

#: Event categories of work on the device.
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Event categories of the host calls that launch it.
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})


def category(event: dict[str, Any]) -> str:
    """The event's ``cat``, lower case (``""`` when it has none).

    Examples
    --------
    >>> category({"cat": "Kernel"}), category({})
    ('kernel', '')
    """
    cat = event.get("cat")
    return cat.lower() if isinstance(cat, str) else ""


def event_end(event: dict[str, Any]) -> float:
    """The event's end, ``ts + dur`` (microseconds).

    Examples
    --------
    >>> event_end({"ts": 10, "dur": 2.5})
    12.5
    """
    return float(event["ts"]) + float(event["dur"])


@dataclass(frozen=True)
class DeviceTimeline:
    """The device operations of a trace matched to their launch, sorted by the launch's host start."""

    launch: tuple[float, ...]  # host start of the cuda_runtime/cuda_driver launch event (microseconds)
    pid: tuple[Any, ...]  # host process of the launch
    start: tuple[float, ...]  # device start (microseconds)
    end: tuple[float, ...]  # device end (microseconds)

    def launched(self, pid: Any, lo: float, hi: float) -> list[int]:
        """Indices of the operations process ``pid`` launched in ``[lo, hi)`` (host time)."""
        a, b = bisect.bisect_left(self.launch, lo), bisect.bisect_left(self.launch, hi)
        return [i for i in range(a, b) if self.pid[i] == pid]


def _correlation(event: dict[str, Any]) -> int | None:
    args = event.get("args")
    c = args.get("correlation") if isinstance(args, dict) else None
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def device_timeline(events: list[dict[str, Any]]) -> DeviceTimeline | None:
    """The trace's device operations whose launch is in the trace; None when there is none."""
    launches: dict[int, dict[str, Any]] = {}
    for e in events:
        if category(e) in LAUNCH_CATS:
            c = _correlation(e)
            if c is not None:
                launches.setdefault(c, e)
    rows = []
    for e in events:
        if category(e) in DEVICE_CATS:
            host = launches.get(_correlation(e))  # type: ignore[arg-type]
            if host is not None:
                rows.append((float(host["ts"]), host.get("pid"), float(e["ts"]), event_end(e)))
    if not rows:
        return None
    rows.sort(key=lambda r: r[0])
    launch, pid, start, end = zip(*rows)
    return DeviceTimeline(launch, pid, start, end)


def device_times(
    device: DeviceTimeline,
    pid: Any,
    host: tuple[float, float, float],
    grad_ends: list[float],
    opt: list[dict[str, Any]],
) -> tuple[float, float, float, list[float]] | None:
    """Forward, backward, update (microseconds) and ready times (seconds) on the device; None without work.

    ``host`` is the forward's start, the backward's start and its end on the host. A phase ends on
    the device when the last operation launched in it ends; it starts where the previous phase
    ended (the first phase with work at its first operation's start), so the phases tile the
    device's timeline. A gradient is ready when every operation launched up to the end of its
    AccumulateGrad event, on any stream, has ended.
    """
    f_start, b_start, b_end = host
    forward = device.launched(pid, f_start, b_start)
    backward = device.launched(pid, b_start, b_end)
    update = [i for e in opt for i in device.launched(pid, float(e["ts"]), event_end(e))]
    if not forward and not backward:
        return None
    edge: float | None = None  # where the previous phase ended on the device
    begins, spans = [], []
    for ops in (forward, backward, update):
        if not ops:
            begins.append(edge)
            spans.append(0.0)
            continue
        begin = edge if edge is not None else min(device.start[i] for i in ops)
        edge = max(begin, max(device.end[i] for i in ops))
        begins.append(begin)
        spans.append(edge - begin)
    origin = begins[1]
    assert origin is not None  # the forward or the backward has work
    ops = forward + backward  # in launch order
    launch = [device.launch[i] for i in ops]
    done = list(itertools.accumulate((device.end[i] for i in ops), max))
    ready, last = [], 0.0
    for t in grad_ends:
        j = bisect.bisect_right(launch, t)
        last = max(last, (done[j - 1] - origin) if j else 0.0)  # a running max: ready times never decrease
        ready.append(min(last, spans[1]) / 1e6)
    return spans[0], spans[1], spans[2], ready
