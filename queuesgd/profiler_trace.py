"""Read a ``torch.profiler`` (Kineto) Chrome trace into a layer-wise :class:`~queuesgd.Workload`.

Many users already have a trace of their training written by
``torch.profiler.profile(...).export_chrome_trace(path)``. :func:`read_trace`
turns it into the same kind of Workload as :func:`queuesgd.profile` measures
with hooks, without running the model again -- and without PyTorch: the trace
is JSON, parsed with the standard library.

The trace is cut into training steps at its ``ProfilerStep#N`` spans (one per
``prof.step()``) or, in a trace recorded without them, at its
``Optimizer.step#...`` spans. What it gives, per step:

- the backward pass: the ``autograd::engine::evaluate_function: ...`` events,
  from the first one's start to the last one's end;
- each gradient: a ``torch::autograd::AccumulateGrad`` event, ready at its
  end; its ``Input Dims`` and ``Input type`` arguments (recorded with
  ``record_shapes=True``) give the gradient's shape and dtype, hence its size
  (a gradient of a shape that no operation of the optimizer step takes, such
  as an input's made with ``requires_grad=True``, is no parameter's: left out);
- gradient accumulation: ``k`` backward passes of the same gradients before
  one optimizer step are ``k`` micro-steps (see :func:`read_trace`);
- the forward pass: from the step's start (or the end of an
  ``Optimizer.zero_grad#...`` span before the backward) to the backward;
- the optimizer step: the ``Optimizer.step#...`` spans.

Those are host (CPU) times. A trace recorded with CUDA activity also has the
device's work (``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events), and on a
GPU the host only launches it: each device operation is then attributed, by
its ``correlation`` id, to the phase during which the host launched it (its
``cuda_runtime`` or ``cuda_driver`` launch event), and the phases and ready
times are measured on the device's timeline (see :func:`read_trace`).

What it cannot give: parameter names (a gradient is known by its shape, dtype
and position in the backward order, so layers are named ``grad0``, ``grad1``,
...) and which forward operations belong to which parameter (the layers have
no ``forward_time``; the forward time is in ``compute``).

PyTorch is not needed to read a trace; recording one needs it.
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.profiler_trace_device import (
    DEVICE_CATS,
    DeviceTimeline,
    category,
    device_timeline,
    device_times,
    event_end,
)
from queuesgd.profiler_trace_events import HOW, OPT_STEP, Window, load_events, top_level
from queuesgd.profiler_trace_events import windows as step_windows
from queuesgd.profiler_trace_passes import BACKWARD as _BACKWARD
from queuesgd.profiler_trace_passes import GRAD as _GRAD
from queuesgd.profiler_trace_passes import micro_steps
from queuesgd.workload import Layer, Workload

__all__ = ["read_trace", "DTYPE_BYTES", "MAX_TRACE_BYTES"]

#: The largest trace read, in bytes of JSON (after gunzip): 1 GiB, a few hundred steps of a large model.
MAX_TRACE_BYTES = 2**30

#: Bytes per element of the dtypes as a Kineto trace spells them (``"Input type"``).
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "long int": 8,
    "long long": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}

_ZERO_GRAD = "Optimizer.zero_grad#"
_GPU_ANNOTATION = "gpu_user_annotation"  # a user annotation repeated on the device's timeline


_Key = tuple[tuple[int, ...], str]  # a gradient's (shape, dtype)


@dataclass(frozen=True)
class _Step:
    number: int
    keys: tuple[_Key, ...]  # (shape, dtype) of each gradient read (of one micro-step), in trace order
    every: tuple[_Key, ...]  # every parameter's AccumulateGrad of the step (all micro-steps), in trace order
    accumulation: int  # backward passes (micro-steps) per optimizer step
    others: tuple[_Key, ...]  # gradients of one micro-step left out: not the optimizer step's parameters
    sizes: tuple[float, ...]  # bytes of each gradient
    ready: tuple[float, ...]  # seconds from the start of the backward pass
    forward: float
    backward: float
    update: float | None


def read_trace(
    path: str | os.PathLike[str],
    *,
    batch_size: int,
    name: str | None = None,
    steps: int | Iterable[int] | None = None,
    accumulation: int | None = None,
) -> Workload:
    """Read a ``torch.profiler`` Chrome trace of training steps into a layer-wise Workload.

    Record the trace with ``record_shapes=True`` (the gradients' shapes and
    dtypes), around whole training steps (forward, ``loss.backward()``,
    optimizer step), with ``prof.step()`` after each step (or none: see
    *Steps*), then ``prof.export_chrome_trace(path)`` (a ``.json`` or
    gzip-compressed file). CPU-only and CUDA traces are both read.

    For each complete step (one with a backward pass; steps with no backward,
    or cut off by the end of the recording, are skipped), the reader takes the
    forward time (the step's start, or the end of an ``Optimizer.zero_grad``
    before the backward, to the first ``autograd::engine::evaluate_function``
    event), the backward time (that event's start to the last one's end), the
    ready time of each gradient (the end of its
    ``torch::autograd::AccumulateGrad`` event, from the start of the backward
    pass), its size (product of its ``Input Dims`` times the element size of
    its ``Input type``) and the ``Optimizer.step#...`` time.

    **Steps.** A step is a ``ProfilerStep#N`` span of the host (its copy on
    the GPU's timeline, category ``gpu_user_annotation``, is ignored; two host
    spans of one ``N`` mean a trace of several processes, which is refused).
    A trace without ``ProfilerStep`` spans (recorded without ``prof.step()``)
    is cut at its optimizer steps: step ``i`` (numbered 1, 2, ...) runs from
    the end of the previous ``Optimizer.step#...`` span (the trace's first
    event for step 1) to the end of the ``i``-th one; what follows the last
    optimizer step is not a step.

    **Device times.** On a GPU the host only launches work, so in a trace with
    device activity (``kernel``, ``gpu_memcpy``, ``gpu_memset`` events matched
    by their ``correlation`` id to the ``cuda_runtime`` or ``cuda_driver``
    event that launched them) the times come from the device's timeline:

    - each device operation belongs to the phase during which the host
      launched it: forward and backward as above, update inside an
      ``Optimizer.step#...`` span (the host windows);
    - a phase ends when the last of its operations ends on the device (the
      last to end, on any stream), and starts where the previous phase ended
      (the forward at its first operation's start); so the forward, backward
      and update tile the device's timeline and add up. A phase with no
      device operation lasts 0, and device work launched between phases (such
      as gradient clipping before the optimizer step) is counted in the next
      phase that has work;
    - a gradient is ready when every operation launched up to the end of its
      AccumulateGrad event (on any stream, the last to end) has ended,
      measured from the start of the backward phase on the device; a running
      max keeps the ready times in trace order non-decreasing, and none
      exceeds the backward time;
    - a step with no device work in its forward and backward is skipped, and
      device operations whose launch is not in the trace are ignored (a trace
      where none is matched is read on the host's timeline).

    Gradients are identified by their position in the step (the k-th
    AccumulateGrad event of every step is the same tensor); every step used
    must have the same gradients (shapes and dtypes) in the same order.

    **Parameters only.** An AccumulateGrad event is any leaf tensor's
    gradient: an input made with ``requires_grad=True`` has one too. A
    gradient whose shape no operation inside the step's ``Optimizer.step``
    spans takes (their ``Input Dims``) is left out (``provenance
    ["non_parameter_gradients"]`` lists them); without an optimizer step, or
    when it shows none of the gradients' shapes, every gradient is kept. An
    input of the same shape as a parameter cannot be told apart and is kept.

    **Gradient accumulation.** The backward passes of a step are told apart
    where the training loop's thread runs something else between backward
    events (the next micro-step's forward). ``k > 1`` passes of the same
    gradients before one optimizer step are ``k`` micro-steps, read as
    :func:`queuesgd.profile` with ``accumulation=k`` measures them: each
    gradient once, the layers' ready times from the last micro-step (the one
    whose gradients are reduced), ``compute`` all ``k`` forward + backward
    passes, ``batch_size`` times ``k``. (Passes of different gradients, as
    two models with two optimizers, are one backward of all of them.)

    Parameters
    ----------
    path : str or path-like
        The trace file (JSON, optionally gzip-compressed), a regular file of
        at most :data:`MAX_TRACE_BYTES` of JSON (devices and FIFOs are refused).
    batch_size : int
        Samples per forward pass (per micro-step with gradient accumulation),
        as :func:`queuesgd.profile` takes it; the trace does not say.
    name : str or None
        The Workload's label (the file's name without ``.json`` if None).
    steps : int, sequence of int or None
        The steps to use: the ``N`` of the ``ProfilerStep#N`` spans (or the
        numbers 1, 2, ... of a trace cut at its optimizer steps), each once;
        None uses every complete step.
    accumulation : int or None
        Backward passes per optimizer step: None reads them from the trace;
        a number must be what the trace shows (a check).

    Returns
    -------
    Workload
        ``layers`` in backward order (mean ready time over the steps), named
        ``grad0``, ``grad1``, ... (a trace carries no parameter names), each
        with its gradient size and its mean backward gap (``forward_time`` is
        None: the trace does not tie forward operations to parameters);
        ``compute`` the :class:`~queuesgd.distributions.Empirical` law of
        forward + backward per step; ``update_time`` the median optimizer
        step (0 if the trace has none); ``batch_size``: ``batch_size x
        accumulation``; ``provenance``: ``accumulation``, ``micro_batch``,
        the steps used (``trace_steps``) and ``non_parameter_gradients``. The
        layers' gaps add up to at most the mean backward time, so ``compute``
        covers them.

    Raises
    ------
    InvalidParameterError
        The file cannot be read or is not JSON Python reads (the message
        quotes the path, never the content; an integer of more than 4,300
        digits is refused at its line and column); an event is malformed
        (naming it and the field: see
        :func:`queuesgd.profiler_trace_events.load_events`); a
        ``ProfilerStep#`` span's number is not 1 to 19 ASCII digits, or two
        ``ProfilerStep`` spans overlap; a parameter's gradient has 0 bytes or
        more than 1 EiB; the trace has neither ``ProfilerStep`` spans nor
        ``Optimizer.step`` spans, several processes, no AccumulateGrad events,
        or no shapes (``record_shapes=False``); the steps disagree on their
        gradients or accumulation; several optimizer steps between backward
        passes of the same gradients in one step (call ``prof.step()`` after
        each); ``steps`` names a step the trace lacks or an incomplete one,
        names one twice, or is a mapping or a set;
        ``accumulation`` is not the trace's.

    Examples
    --------
    A hand-written trace of one step (times in microseconds): forward 0-100,
    backward 100-400 with a bias gradient (4 floats) ready at 200 and a
    weight gradient (4 x 16 floats) ready at 350, an optimizer step of 50.

    >>> import json, tempfile
    >>> from pathlib import Path
    >>> def grad(ts, dims):
    ...     args = {"Input Dims": [dims], "Input type": ["float"]}
    ...     return {"ph": "X", "name": "torch::autograd::AccumulateGrad", "ts": ts, "dur": 10, "args": args}
    >>> def span(name, ts, dur):
    ...     return {"ph": "X", "name": name, "ts": ts, "dur": dur, "args": {}}
    >>> events = [
    ...     span("ProfilerStep#1", 0, 500),
    ...     span("autograd::engine::evaluate_function: AddmmBackward0", 100, 80),
    ...     grad(190, [4]),
    ...     grad(340, [4, 16]),
    ...     span("autograd::engine::evaluate_function: TBackward0", 360, 40),
    ...     span("Optimizer.step#SGD.step", 420, 50),
    ... ]
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = Path(d) / "mlp.json"
    ...     _ = path.write_text(json.dumps({"traceEvents": events}))
    ...     w = read_trace(path, batch_size=4)
    >>> [(layer.name, layer.gradient_bytes, round(layer.backward_time * 1e6)) for layer in w.layers]
    [('grad0', 16.0, 100), ('grad1', 256.0, 150)]
    >>> w.name, round(w.compute_time * 1e6), round(w.update_time * 1e6)
    ('mlp', 400, 50)
    """
    batch_size = _checks.integer("batch_size", batch_size)
    if accumulation is not None:
        accumulation = _checks.integer("accumulation", accumulation)
    if name is not None:
        _checks.name("name", name)
    where = _checks.file_path("path", path, accepted="a trace file path (str or os.PathLike)")
    events = load_events(where, MAX_TRACE_BYTES)
    found, label = _steps(where, events)
    used = _select(where, found, label, steps)
    micro = used[0].accumulation
    if accumulation is not None and accumulation != micro:
        raise InvalidParameterError(
            "accumulation",
            accumulation,
            f"{micro}: the backward passes per optimizer step that the trace {where} shows "
            "(or None to read it from the trace)",
        )
    sizes = used[0].sizes
    count = len(sizes)
    ready = [statistics.fmean(s.ready[i] for s in used) for i in range(count)]
    order = sorted(range(count), key=lambda i: (ready[i], i))
    layers, prev = [], 0.0
    for i in order:
        layers.append(Layer(f"grad{i}", sizes[i], max(ready[i] - prev, 0.0)))
        prev = max(prev, ready[i])
    updates = [s.update for s in used if s.update is not None]
    label = name if name is not None else _stem(where)
    provenance = {
        "source": "torch.profiler trace",
        "trace_steps": [s.number for s in used],
        "accumulation": micro,
        "micro_batch": batch_size,
        "non_parameter_gradients": [f"{list(shape)} {dtype}" for shape, dtype in used[0].others],
    }
    return Workload(
        Empirical(np.asarray([s.forward + s.backward for s in used])),
        None,
        batch_size=batch_size * micro,
        update_time=float(statistics.median(updates)) if updates else 0.0,
        layers=tuple(layers),
        name=label,
        provenance=provenance,
    )


def _stem(path: str) -> str:
    stem = Path(path).name
    for suffix in (".gz", ".json"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
    return stem


def _title(label: str, n: int) -> str:
    return f"ProfilerStep#{n}" if label == "ProfilerStep" else f"step {n}"


def _steps(path: str, events: list[dict[str, Any]]) -> tuple[dict[int, _Step | None], str]:
    """Every step of the trace: its record, or None when incomplete; and what the steps are called."""
    # Kineto repeats user annotations (ProfilerStep#N, Optimizer.step#...) on the GPU's timeline.
    host = [e for e in events if category(e) not in DEVICE_CATS and category(e) != _GPU_ANNOTATION]
    windows, label = step_windows(path, host)
    if not any(e["name"] == _GRAD for e in host):
        raise InvalidParameterError(
            "path",
            path,
            "a trace with torch::autograd::AccumulateGrad events (none found: no backward pass was "
            f"profiled). Expected: {HOW}",
        )
    device = device_timeline(events)
    starts = [float(e["ts"]) for e in host]
    found = {n: _step(path, _title(label, n), n, w, host, starts, device) for n, w in sorted(windows.items())}
    return found, label


def _step(
    path: str,
    title: str,
    n: int,
    where: Window,
    events: list[dict[str, Any]],
    starts: list[float],
    device: DeviceTimeline | None,
) -> _Step | None:
    window = events[bisect.bisect_left(starts, where.start) : bisect.bisect_right(starts, where.end)]
    inside = [e for e in window if e.get("pid") == where.pid and e is not where.span]
    grads = [e for e in inside if e["name"] == _GRAD]
    if not grads or not any(e["name"].startswith(_BACKWARD) for e in inside):
        return None
    opt = top_level([e for e in inside if e["name"].startswith(OPT_STEP)])
    key = {id(e): _shape_dtype(path, title, k, e) for k, e in enumerate(grads)}
    m = micro_steps(inside, where.tid, opt, lambda e: key[id(e)])
    if m.interleaved:
        raise InvalidParameterError(
            "path",
            path,
            f"one optimizer step per step ({title} has {len(opt)} optimizer steps between {m.accumulation} "
            f"backward passes of the same {len(m.read)} gradients: several training steps per "
            "ProfilerStep? call prof.step() after each optimizer step)",
        )
    span, read = m.span, m.read
    b_start = float(span[0]["ts"])
    b_end = max(event_end(e) for e in span)
    f_start = where.start
    for e in inside:
        if e["name"].startswith(_ZERO_GRAD) and event_end(e) <= m.first:
            f_start = max(f_start, event_end(e))
    if device is None:
        ready = [(event_end(e) - b_start) / 1e6 for e in read]
        forward, back = max(b_start - f_start, 0.0), b_end - b_start
        update = math.fsum(float(e["dur"]) for e in opt)
    else:
        ends = [event_end(e) for e in read]
        timed = device_times(device, where.pid, (f_start, b_start, b_end), ends, opt)
        if timed is None:
            return None
        forward, back, update, ready = timed
    keys = tuple(key[id(e)] for e in read)
    index = {id(e): k for k, e in enumerate(grads)}
    return _Step(
        number=n,
        keys=keys,
        every=tuple(key[id(e)] for e in m.every),
        accumulation=m.accumulation,
        others=tuple(key[id(e)] for e in m.others),
        sizes=tuple(_gradient_bytes(path, title, index[id(e)], key[id(e)]) for e in read),
        ready=tuple(ready),
        forward=forward / 1e6,
        backward=back / 1e6,
        update=update / 1e6 if opt else None,
    )


def _shape_dtype(path: str, title: str, k: int, event: dict[str, Any]) -> tuple[tuple[int, ...], str]:
    args = event.get("args")
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    types = args.get("Input type") if isinstance(args, dict) else None
    recorded = isinstance(args, dict) and ("Input Dims" in args or "Input type" in args)
    if recorded and not (dims and types and isinstance(dims, list) and isinstance(types, list)):
        # the trace has shapes (this event has the keys): this one event is damaged, not the recording
        raise InvalidParameterError(
            f"{path}: {title} gradient {k} Input Dims / Input type", (dims, types), "two non-empty lists"
        )
    if not dims or not types or not isinstance(dims, list) or not isinstance(types, list):
        raise InvalidParameterError(
            "path",
            path,
            "AccumulateGrad events with 'Input Dims' and 'Input type' ("
            f"{title} has none: the trace was recorded without record_shapes=True). Expected: {HOW}",
        )
    shape, dtype = dims[0], types[0]
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise InvalidParameterError(f"{path}: {title} gradient {k} Input Dims", shape, "a list of sizes >= 0")
    if dtype not in DTYPE_BYTES:
        raise InvalidParameterError(
            f"{path}: {title} gradient {k} Input type",
            dtype,
            "one of " + ", ".join(repr(t) for t in DTYPE_BYTES),
        )
    return tuple(shape), dtype


def _gradient_bytes(path: str, title: str, k: int, key: _Key) -> float:
    """The bytes of a parameter's gradient of (shape, dtype) ``key``: 1 byte to 1 EiB, else an error."""
    shape, dtype = key
    nbytes = math.prod(shape) * DTYPE_BYTES[dtype]  # an exact int: one past the float range is refused too
    if not 0 < nbytes <= units.MAX_BYTES:
        raise InvalidParameterError(
            f"{path}: {title} gradient {k} Input Dims",
            list(shape),
            f"the shape of a parameter's gradient of 1 byte to 1 EiB (2**60 bytes): {dtype} elements of "
            f"{DTYPE_BYTES[dtype]} bytes, none of the sizes 0",
        )
    return float(nbytes)


def _select(path: str, found: dict[int, _Step | None], label: str, steps: Any) -> list[_Step]:
    """The steps to use: the chosen ones, or every complete one; all with the same gradients."""
    numbers = sorted(found)
    if steps is None:
        have = [s for s in found.values() if s is not None]
        if not have:
            raise InvalidParameterError(
                "path",
                path,
                f"{label}s that contain a backward pass (and, in a trace with device activity, device work "
                f"launched in their forward or backward; none does). Expected: {HOW}",
            )
        counts = Counter(s.every for s in have)
        ref = max(counts, key=lambda keys: (counts[keys], len(keys)))
        # A step whose gradients are a strict prefix of the others' was cut off by the recording's end.
        used = [s for s in have if not (len(s.every) < len(ref) and ref[: len(s.every)] == s.every)]
    else:
        chosen = _step_numbers(steps, label, numbers)
        missing = [n for n in chosen if n not in found]
        if missing or not chosen:
            raise InvalidParameterError(
                "steps", steps, f"{label} numbers of the trace: {', '.join(map(str, numbers))}"
            )
        empty = [n for n in chosen if found[n] is None]
        if empty:
            complete = [n for n in numbers if found[n] is not None]
            raise InvalidParameterError(
                "steps",
                steps,
                f"complete steps ({label} {', '.join(map(str, empty))} has no backward pass); "
                f"complete: {', '.join(map(str, complete)) or 'none'}",
            )
        used = [found[n] for n in chosen]  # type: ignore[misc]
    first = used[0]
    odd = [s.number for s in used if s.every != first.every]
    if odd:
        raise InvalidParameterError(
            "steps" if steps is not None else "path",
            steps if steps is not None else path,
            f"steps with the same gradients: {label} {', '.join(map(str, odd))} differs from "
            f"{label} {first.number} ({len(first.keys)} gradients, {first.accumulation} backward "
            "pass(es) per optimizer step); a changing model or accumulation? choose steps=[...] with "
            "the same gradients",
        )
    return used


def _step_numbers(steps: Any, label: str, have: list[int]) -> list[int]:
    """The numbers ``steps`` chooses, sorted: an int, or a sequence of distinct ints.

    A string, a mapping (``{1: 2}`` is not steps 1 and 2) or a set is refused, as is a number given twice
    (it would count one step twice); more items than the trace has steps are not read (an endless
    iterator ends), one of them then being no step of the trace, which the caller refuses.
    """
    accepted = f"{label} numbers of the trace: {', '.join(map(str, have))}"
    if isinstance(steps, Integral) and not isinstance(steps, bool):
        return [int(steps)]
    if isinstance(steps, (str, bytes, bytearray, Mapping, set, frozenset)) or not isinstance(steps, Iterable):
        raise InvalidParameterError("steps", steps, f"an int or a sequence of ints, {accepted}")
    out: list[int] = []
    for n in steps:
        if isinstance(n, bool) or not isinstance(n, Integral):
            raise InvalidParameterError("steps", steps, accepted)
        if int(n) in out:
            twice = f"each step once ({int(n)} is given twice), {accepted}"
            raise InvalidParameterError("steps", steps, twice)
        out.append(int(n))
        if len(out) > len(have):
            break
    return sorted(out)
