"""Read a ``torch.profiler`` (Kineto) Chrome trace into a layer-wise :class:`~queuesgd.Workload`.

Many users already have a trace of their training written by
``torch.profiler.profile(...).export_chrome_trace(path)``. :func:`read_trace`
turns it into the same kind of Workload as :func:`queuesgd.profile` measures
with hooks, without running the model again -- and without PyTorch: the trace
is JSON, parsed with the standard library.

What the trace gives, per ``ProfilerStep#N`` span (one per ``prof.step()``):

- the backward pass: the ``autograd::engine::evaluate_function: ...`` events,
  from the first one's start to the last one's end;
- each gradient: a ``torch::autograd::AccumulateGrad`` event, ready at its
  end; its ``Input Dims`` and ``Input type`` arguments (recorded with
  ``record_shapes=True``) give the gradient's shape and dtype, hence its size;
- the forward pass: from the step's start (or the end of an
  ``Optimizer.zero_grad#...`` span before the backward) to the backward;
- the optimizer step: the ``Optimizer.step#...`` spans.

What it cannot give: parameter names (a gradient is known by its shape, dtype
and position in the backward order, so layers are named ``grad0``, ``grad1``,
...) and which forward operations belong to which parameter (the layers have
no ``forward_time``; the forward time is in ``compute``).

PyTorch is not needed to read a trace; recording one needs it.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.workload import Layer, Workload

__all__ = ["read_trace", "DTYPE_BYTES"]

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

_STEP = re.compile(r"ProfilerStep#(\d+)$")
_BACKWARD = "autograd::engine::evaluate_function:"
_GRAD = "torch::autograd::AccumulateGrad"
_OPT_STEP = "Optimizer.step#"
_ZERO_GRAD = "Optimizer.zero_grad#"
_HOW = (
    "a torch.profiler trace recorded with record_shapes=True around whole training steps "
    "(forward, loss.backward(), optimizer step), prof.step() after each, written by export_chrome_trace"
)


@dataclass(frozen=True)
class _Step:
    number: int
    keys: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) of each gradient, in trace order
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
) -> Workload:
    """Read a ``torch.profiler`` Chrome trace of training steps into a layer-wise Workload.

    Record the trace with ``record_shapes=True`` (the gradients' shapes and
    dtypes), around whole training steps (forward, ``loss.backward()``,
    optimizer step) and with ``prof.step()`` after each step, then
    ``prof.export_chrome_trace(path)`` (a ``.json`` or gzip-compressed file).

    For each complete step (a ``ProfilerStep#N`` span with its backward pass;
    steps with no backward, or cut off by the end of the recording, are
    skipped), the reader takes the forward time (the step's start, or the end
    of an ``Optimizer.zero_grad`` before the backward, to the first
    ``autograd::engine::evaluate_function`` event), the backward time (that
    event's start to the last one's end), the ready time of each gradient (the
    end of its ``torch::autograd::AccumulateGrad`` event, from the start of
    the backward pass), its size (product of its ``Input Dims`` times the
    element size of its ``Input type``) and the ``Optimizer.step#...`` time.

    Gradients are identified by their position in the step (the k-th
    AccumulateGrad event of every step is the same tensor); every step used
    must have the same gradients (shapes and dtypes) in the same order.

    Parameters
    ----------
    path : str or path-like
        The trace file (JSON, optionally gzip-compressed).
    batch_size : int
        Samples per step (the trace does not say).
    name : str or None
        The Workload's label (the file's name without ``.json`` if None).
    steps : int, iterable of int or None
        The ``N`` of the ``ProfilerStep#N`` spans to use; None uses every
        complete step.

    Returns
    -------
    Workload
        ``layers`` in backward order (mean ready time over the steps), named
        ``grad0``, ``grad1``, ... (a trace carries no parameter names), each
        with its gradient size and its mean backward gap (``forward_time`` is
        None: the trace does not tie forward operations to parameters);
        ``compute`` the :class:`~queuesgd.distributions.Empirical` law of
        forward + backward per step; ``update_time`` the median optimizer
        step (0 if the trace has none); ``batch_size`` as given.

    Raises
    ------
    InvalidParameterError
        The file cannot be read or is not JSON (the message quotes the path,
        never the content); the trace has no ``ProfilerStep`` spans, no
        AccumulateGrad events, or no shapes (``record_shapes=False``); the
        steps disagree on their gradients; ``steps`` names a step the trace
        lacks or an incomplete one.

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
    if name is not None:
        _checks.name("name", name)
    where = os.fspath(path)
    events = _events(where)
    found = _steps(where, events)
    used = _select(where, found, steps)
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
    return Workload(
        Empirical(np.asarray([s.forward + s.backward for s in used])),
        None,
        batch_size=batch_size,
        update_time=float(statistics.median(updates)) if updates else 0.0,
        layers=tuple(layers),
        name=label,
    )


def _stem(path: str) -> str:
    stem = Path(path).name
    for suffix in (".gz", ".json"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
    return stem


def _events(path: str) -> list[dict[str, Any]]:
    """The complete (``"ph": "X"``) events of the trace at ``path``, sorted by start."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw.decode("utf-8"))
    except OSError as err:
        raise InvalidParameterError("path", path, f"a readable trace file ({err.strerror or err})") from None
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError is a ValueError
        where = f" (line {err.lineno}, column {err.colno})" if isinstance(err, json.JSONDecodeError) else ""
        raise InvalidParameterError(
            "path", path, f"a JSON Chrome trace; the file is not JSON{where}. Expected: {_HOW}"
        ) from None
    if isinstance(data, dict):
        data = data.get("traceEvents")
    if not isinstance(data, list):
        raise InvalidParameterError(
            "path", path, f"a Chrome trace (a JSON object with a 'traceEvents' list). Expected: {_HOW}"
        )
    events = []
    for e in data:
        if not isinstance(e, dict) or e.get("ph") != "X" or not isinstance(e.get("name"), str):
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if _number(ts) and _number(dur) and dur >= 0:
            events.append(e)
    events.sort(key=lambda e: float(e["ts"]))
    return events


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _steps(path: str, events: list[dict[str, Any]]) -> dict[int, _Step | None]:
    """Every ``ProfilerStep#N`` of the trace: its record, or None when it has no backward pass."""
    spans: dict[int, dict[str, Any]] = {}
    for e in events:
        m = _STEP.match(e["name"])
        if m is None:
            continue
        n = int(m.group(1))
        if n in spans:
            raise InvalidParameterError(
                "path", path, f"one ProfilerStep#{n} span (found several: a trace of several processes?)"
            )
        spans[n] = e
    if not spans:
        raise InvalidParameterError(
            "path",
            path,
            f"a trace with ProfilerStep#N spans (none found; call prof.step()). Expected: {_HOW}",
        )
    if not any(e["name"] == _GRAD for e in events):
        raise InvalidParameterError(
            "path",
            path,
            "a trace with torch::autograd::AccumulateGrad events (none found: no backward pass was "
            f"profiled). Expected: {_HOW}",
        )
    starts = [float(e["ts"]) for e in events]
    return {n: _step(path, n, span, events, starts) for n, span in sorted(spans.items())}


def _step(
    path: str, n: int, span: dict[str, Any], events: list[dict[str, Any]], starts: list[float]
) -> _Step | None:
    start = float(span["ts"])
    end = start + float(span["dur"])
    pid = span.get("pid")
    window = events[bisect.bisect_left(starts, start) : bisect.bisect_right(starts, end)]
    inside = [e for e in window if e.get("pid") == pid and e is not span]
    backward = [e for e in inside if e["name"].startswith(_BACKWARD)]
    grads = [e for e in inside if e["name"] == _GRAD]
    if not backward or not grads:
        return None
    b_start = float(backward[0]["ts"])
    b_end = max(float(e["ts"]) + float(e["dur"]) for e in backward + grads)
    f_start = start
    for e in inside:
        stop = float(e["ts"]) + float(e["dur"])
        if e["name"].startswith(_ZERO_GRAD) and stop <= b_start:
            f_start = max(f_start, stop)
    keys, sizes, ready = [], [], []
    for k, e in enumerate(grads):
        shape, dtype = _shape_dtype(path, n, k, e)
        keys.append((shape, dtype))
        sizes.append(float(math.prod(shape) * DTYPE_BYTES[dtype]))
        ready.append((float(e["ts"]) + float(e["dur"]) - b_start) / 1e6)
    update, last = 0.0, -math.inf
    opt = [e for e in inside if e["name"].startswith(_OPT_STEP)]
    for e in opt:  # top-level spans only (a nested one is inside its parent's time)
        if float(e["ts"]) >= last:
            update += float(e["dur"])
            last = float(e["ts"]) + float(e["dur"])
    return _Step(
        number=n,
        keys=tuple(keys),
        sizes=tuple(sizes),
        ready=tuple(ready),
        forward=max(b_start - f_start, 0.0) / 1e6,
        backward=(b_end - b_start) / 1e6,
        update=update / 1e6 if opt else None,
    )


def _shape_dtype(path: str, n: int, k: int, event: dict[str, Any]) -> tuple[tuple[int, ...], str]:
    args = event.get("args")
    dims = args.get("Input Dims") if isinstance(args, dict) else None
    types = args.get("Input type") if isinstance(args, dict) else None
    if not dims or not types or not isinstance(dims, list) or not isinstance(types, list):
        raise InvalidParameterError(
            "path",
            path,
            "AccumulateGrad events with 'Input Dims' and 'Input type' (ProfilerStep#"
            f"{n} has none: the trace was recorded without record_shapes=True). Expected: {_HOW}",
        )
    shape, dtype = dims[0], types[0]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise InvalidParameterError(
            f"{path}: ProfilerStep#{n} gradient {k} Input Dims", shape, "a list of sizes >= 0"
        )
    if dtype not in DTYPE_BYTES:
        raise InvalidParameterError(
            f"{path}: ProfilerStep#{n} gradient {k} Input type",
            dtype,
            "one of " + ", ".join(repr(t) for t in DTYPE_BYTES),
        )
    return tuple(shape), dtype


def _select(path: str, found: dict[int, _Step | None], steps: Any) -> list[_Step]:
    """The steps to use: the chosen ones, or every complete one; all with the same gradients."""
    numbers = sorted(found)
    if steps is None:
        have = [s for s in found.values() if s is not None]
        if not have:
            raise InvalidParameterError(
                "path", path, f"ProfilerStep spans that contain a backward pass (none does). Expected: {_HOW}"
            )
        counts = Counter(s.keys for s in have)
        ref = max(counts, key=lambda keys: (counts[keys], len(keys)))
        # A step whose gradients are a strict prefix of the others' was cut off by the recording's end.
        used = [s for s in have if not (len(s.keys) < len(ref) and ref[: len(s.keys)] == s.keys)]
    else:
        chosen = _step_numbers(steps)
        missing = [n for n in chosen if n not in found]
        if missing or not chosen:
            raise InvalidParameterError(
                "steps", steps, f"ProfilerStep numbers of the trace: {', '.join(map(str, numbers))}"
            )
        empty = [n for n in chosen if found[n] is None]
        if empty:
            complete = [n for n in numbers if found[n] is not None]
            raise InvalidParameterError(
                "steps",
                steps,
                f"complete steps (ProfilerStep {', '.join(map(str, empty))} has no backward pass); "
                f"complete: {', '.join(map(str, complete)) or 'none'}",
            )
        used = [found[n] for n in chosen]  # type: ignore[misc]
    ref = used[0].keys
    odd = [s.number for s in used if s.keys != ref]
    if odd:
        raise InvalidParameterError(
            "steps" if steps is not None else "path",
            steps if steps is not None else path,
            f"steps with the same gradients: ProfilerStep {', '.join(map(str, odd))} differs from "
            f"ProfilerStep {used[0].number} ({len(ref)} gradients); gradient accumulation or a "
            "changing model? choose steps=[...] with the same gradients",
        )
    return used


def _step_numbers(steps: Any) -> list[int]:
    if isinstance(steps, bool):
        return []
    if isinstance(steps, int):
        return [steps]
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
        return []
    out = []
    for n in steps:
        if not isinstance(n, int) or isinstance(n, bool):
            return []
        out.append(n)
    return sorted(set(out))
