"""The events of a torch.profiler Chrome trace, read and checked, and its training steps' host windows
(:func:`queuesgd.read_trace`).

:func:`load_events` parses the file (:func:`queuesgd.json_text.loads`) and
checks every complete (``"ph": "X"``) event: a string ``name``, and a
``ts`` and ``dur`` that are finite numbers of microseconds (``dur >= 0``).
An event that fails is refused naming the file, the event and the field,
never skipped: a skipped ``ProfilerStep`` or backward event would silently
remove a step. :func:`windows` cuts the host's events into steps, at the
``ProfilerStep#N`` spans (refusing a malformed step number and two spans
that overlap) or at the optimizer steps.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from queuesgd import _checks, json_text
from queuesgd.errors import InvalidParameterError
from queuesgd.profiler_trace_device import event_end

__all__ = ["HOW", "OPT_STEP", "STEP_PREFIX", "Window", "load_events", "top_level", "windows"]

#: What a trace must be, for the messages.
HOW = (
    "a torch.profiler trace recorded with record_shapes=True around whole training steps "
    "(forward, loss.backward(), a torch.optim optimizer's step), with prof.step() after each or none, "
    "written by export_chrome_trace"
)
#: The name of a step's span is this prefix and the step's number (``prof.step()`` writes it).
STEP_PREFIX = "ProfilerStep#"
#: The prefix of an optimizer step's span.
OPT_STEP = "Optimizer.step#"
#: Most digits of a step number (torch counts steps in a 64-bit integer).
_STEP_DIGITS = 19
_STEP = re.compile(r"ProfilerStep#([0-9]{1,%d})" % _STEP_DIGITS)  # noqa: UP031 (a regex's braces)
#: Two step spans may overlap by this much (microseconds, 10 ns): ten times the 1 ns to which Kineto rounds
#: ``ts`` and ``dur``, so that an end computed as ``ts + dur`` never counts as an overlap.
_OVERLAP_SLACK = 0.01


def load_events(path: str, max_bytes: int) -> list[dict[str, Any]]:
    """The complete (``"ph": "X"``) events of the trace at ``path``, sorted by start; ``ts``, ``dur`` floats.

    Parameters
    ----------
    path : str
        The trace file (JSON, optionally gzip-compressed).
    max_bytes : int
        The most bytes of JSON read (after gunzip).

    Returns
    -------
    list of dict
        The events, their ``ts`` and ``dur`` converted to floats.

    Raises
    ------
    InvalidParameterError
        The file is not JSON Python reads (naming the line and column, never
        quoting the content) or not a Chrome trace; an entry of ``traceEvents``
        is not an object; a complete event's ``name`` is not a string, or its
        ``ts`` or ``dur`` not a finite number (a bool, an integer beyond the
        float range, ``NaN`` or ``Infinity``, a negative ``dur``), naming the
        event (its index in ``traceEvents`` and its name) and the field.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "t.json"
    ...     _ = p.write_text('{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": NaN}]}')
    ...     load_events(str(p), 2**20)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: ...t.json: traceEvents[0] ('ProfilerStep#1') dur: got nan; ...
    """
    raw = _checks.read_bytes("path", path, max_bytes=max_bytes, gunzip=True)
    try:
        data = json_text.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError is a ValueError
        where = ""
        if isinstance(err, json.JSONDecodeError):
            where = f" ({err.msg}: line {err.lineno}, column {err.colno})"
        raise InvalidParameterError(
            "path", path, f"a JSON Chrome trace; the file is not JSON Python reads{where}. Expected: {HOW}"
        ) from None
    except RecursionError:
        raise InvalidParameterError(
            "path", path, f"a JSON Chrome trace; the file nests deeper than a trace does. Expected: {HOW}"
        ) from None
    if isinstance(data, dict):
        data = data.get("traceEvents")
    if not isinstance(data, list):
        raise InvalidParameterError(
            "path", path, f"a Chrome trace (a JSON object with a 'traceEvents' list). Expected: {HOW}"
        )
    events = []
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise InvalidParameterError(f"{path}: traceEvents[{i}]", e, "an event (a JSON object)")
        if e.get("ph") != "X":
            continue
        name = e.get("name")
        if not isinstance(name, str):
            raise InvalidParameterError(f"{path}: traceEvents[{i}] name", name, "a string")
        for key in ("ts", "dur"):
            field = f"{path}: traceEvents[{i}] ({name[:80]!r}) {key}"
            e[key] = _microseconds(field, e.get(key), duration=key == "dur")
        events.append(e)
    events.sort(key=lambda e: e["ts"])
    return events


def _microseconds(field: str, value: Any, *, duration: bool) -> float:
    """``value`` as a float if it is a finite number (>= 0 for a duration), else an error naming ``field``."""
    accepted = "a finite number of microseconds" + (" >= 0" if duration else "")
    f = _checks.real(field, value, accepted=accepted)  # no bool, NaN, inf or integer past the float range
    if duration and f < 0:
        raise InvalidParameterError(field, value, accepted)
    return f


def top_level(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans (sorted by start) not nested in an earlier one: a nested one is inside its parent's time."""
    out, last = [], -math.inf
    for e in spans:
        if e["ts"] >= last:
            out.append(e)
            last = event_end(e)
    return out


@dataclass(frozen=True)
class Window:
    """A training step on the host: [start, end] of process ``pid``; ``span`` its ProfilerStep event.

    ``tid`` is the training loop's thread (the ProfilerStep's, or the optimizer step's).
    """

    start: float
    end: float
    pid: Any
    span: dict[str, Any] | None
    tid: Any = None


def windows(path: str, host: list[dict[str, Any]]) -> tuple[dict[int, Window], str]:
    """The steps' host windows, by number, and what the steps are called.

    The ``ProfilerStep#N`` spans of ``host`` (the host's events, sorted by
    start), or else cuts at the optimizer steps (see :func:`queuesgd.read_trace`).

    Raises
    ------
    InvalidParameterError
        A span named ``ProfilerStep#`` and anything but 1 to 19 ASCII digits
        (``ProfilerStep#-1``, ``ProfilerStep#``); two spans of one number
        (several processes); two spans that overlap by more than 10 ns (the
        later one's events would be read in both steps); neither kind of span; optimizer steps of
        several processes.

    Examples
    --------
    >>> span = lambda n, ts: {"name": f"ProfilerStep#{n}", "ts": ts, "dur": 100.0}
    >>> sorted(windows("t.json", [span(1, 0.0), span(2, 100.0)])[0])
    [1, 2]
    >>> windows("t.json", [span(1, 0.0), span(2, 50.0)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got 't.json'; accepted: ProfilerStep spans that do not ...
    """
    spans: dict[int, dict[str, Any]] = {}
    for e in host:
        if not e["name"].startswith(STEP_PREFIX):
            continue
        m = _STEP.fullmatch(e["name"])
        if m is None:
            raise InvalidParameterError(
                f"{path}: a {STEP_PREFIX}N span's name",
                e["name"][:80],
                f"{STEP_PREFIX}N with N a step number of 1 to {_STEP_DIGITS} ASCII digits (as prof.step() "
                "writes it)",
            )
        n = int(m.group(1))
        if n in spans:
            raise InvalidParameterError(
                "path", path, f"one ProfilerStep#{n} span (found several: a trace of several processes?)"
            )
        spans[n] = e
    if spans:
        _no_overlap(path, sorted(spans.items(), key=lambda item: item[1]["ts"]))
        found = {n: Window(e["ts"], event_end(e), e.get("pid"), e, e.get("tid")) for n, e in spans.items()}
        return found, "ProfilerStep"
    opt = top_level([e for e in host if e["name"].startswith(OPT_STEP)])
    if not opt:
        raise InvalidParameterError(
            "path",
            path,
            "a trace with ProfilerStep#N spans (call prof.step() after each step) or, without them, "
            f"Optimizer.step#... spans (use a torch.optim optimizer); found neither. Expected: {HOW}",
        )
    pids = {repr(e.get("pid")) for e in opt}
    if len(pids) > 1:
        raise InvalidParameterError(
            "path",
            path,
            f"Optimizer.step spans of one process (found them in {len(pids)}: a trace of several processes?)",
        )
    found, prev = {}, host[0]["ts"]
    for n, e in enumerate(opt, 1):  # a trailing piece after the last optimizer step is not a step
        found[n] = Window(prev, event_end(e), e.get("pid"), None, e.get("tid"))
        prev = event_end(e)
    return found, "step"


def _no_overlap(path: str, spans: list[tuple[int, dict[str, Any]]]) -> None:
    """Refuse two step spans (sorted by start) of which the earlier ends after the later starts."""
    for (a, first), (b, second) in zip(spans, spans[1:]):
        if event_end(first) > second["ts"] + _OVERLAP_SLACK:
            raise InvalidParameterError(
                "path",
                path,
                f"ProfilerStep spans that do not overlap (ProfilerStep#{a} runs from {first['ts']:.15g} to "
                f"{event_end(first):.15g} us, past the start of ProfilerStep#{b} at {second['ts']:.15g} us: "
                "its events would be read in both steps)",
            )
