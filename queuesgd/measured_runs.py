"""One configuration's measurements: the runs of its rows made into update durations, with notes.

:func:`queuesgd.measured.read_measured` groups the rows of a log by
configuration and run; :func:`measurement` turns one group into a
:class:`Measurement`: timestamps into the durations between them (in seconds,
a Unix time unit recognized by its size), steps into updates per interval,
and a note where the median update is implausible for a training step.

Examples
--------
>>> group = {"config": {"workers": 2}, "params": {}, "rows": [0, 1, 2],
...          "runs": {"": [(0.0, None, None, 0), (0.5, None, None, 1), (1.0, None, None, 2)]}}
>>> m = measurement(group, "time", lambda i: f"row {i}", "auto", ())
>>> m.values.tolist(), m.runs, m.where
([0.5, 0.5], (2,), 'rows 0-2')

Throughputs: the rows of one run label are one run, its throughput their mean:

>>> runs = {"a": [(100.0, None, 1, 0), (100.0, None, 2, 1), (100.0, None, 3, 2)], "b": [(200.0, None, 1, 3)]}
>>> group = {"config": {"workers": 2}, "params": {}, "rows": [0, 1, 2, 3], "runs": runs}
>>> measurement(group, "samples_per_second", lambda i: f"row {i}", "auto", ()).values.tolist()
[100.0, 200.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.measured_cells import MAX_CELL, MEASURE_RANGE, empty, short_value

__all__ = ["PLAUSIBLE_STEP", "TIME_UNITS", "Measurement", "measurement", "run_keys"]

#: The units ``time_unit=`` takes, in seconds (``"auto"``: seconds, or Unix time recognized by its size).
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

#: A training step shorter or longer than these (seconds) is noted as implausible.
PLAUSIBLE_STEP = (1e-5, 1e3)

#: Unix time (1973-2286) in each unit: the range of the earliest time that recognizes it.
_UNIX = {"s": (1e8, 1e10), "ms": (1e11, 1e13), "us": (1e14, 1e16), "ns": (1e17, 1e19)}
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


@dataclass(frozen=True)
class Measurement:
    """The measurements of one configuration.

    Attributes
    ----------
    config : mapping
        Where given: ``workers`` (int), ``scheme``, ``workload`` (str),
        ``bandwidth`` (B/s), ``latency`` (s), ``ps_shards``, ``batch_size``
        (int); missing ones are absent.
    params : mapping
        Scheme parameters from the other columns (values as read: numbers
        or strings such as ``"30ms"``).
    kind : str
        One of :data:`~queuesgd.measured.MEASURE_COLUMNS`.
    values : ndarray
        ``samples_per_second``: one value per run. ``time``/``step_time``:
        durations in seconds of the updates (of the intervals between two
        rows, with a ``step`` column), runs one after the other.
    samples : ndarray or None
        Samples applied by one update of each entry of ``values``
        (``time``/``step_time`` with a ``samples`` column), else None.
    runs : tuple of int
        Number of entries of ``values`` of each run, in order; they sum to
        ``len(values)`` (a run of one timestamp has none).
    where : str
        The rows it came from, for messages (``"log.csv lines 2-203"``).
    updates : ndarray or None
        ``time`` with a ``step`` column: the updates each interval of
        ``values`` holds (the difference of the steps), else None (one each).
    notes : tuple of str
        What a reader of the numbers should know: rows skipped, a time unit
        recognized, an implausible step time.
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    config: Mapping[str, Any]
    params: Mapping[str, Any]
    kind: str
    values: np.ndarray
    samples: np.ndarray | None
    runs: tuple[int, ...]
    where: str
    updates: np.ndarray | None = None
    notes: tuple[str, ...] = ()


def _time_scale(times: np.ndarray, time_unit: str, where: str) -> tuple[float, list[str]]:
    """Seconds per unit of a ``time`` column, and the note that says a recognized Unix time."""
    if time_unit != "auto":
        return TIME_UNITS[time_unit], []
    first = float(np.min(times))
    for unit, (low, high) in _UNIX.items():
        if low <= first < high:
            import datetime

            seconds = first * TIME_UNITS[unit]
            date = datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
            note = (
                f"{where}: the times read as Unix {_UNIT_WORDS[unit]} (the first, {first:.15g}, is "
                f"{date} UTC); time_unit= (CLI: --time-unit) says otherwise"
            )
            return TIME_UNITS[unit], [note]
    return 1.0, []


def measurement(
    group: dict[str, Any], kind: str, where: Any, time_unit: str, notes: tuple[str, ...]
) -> Measurement:
    """The :class:`Measurement` of one configuration's rows.

    Parameters
    ----------
    group : dict
        ``config`` and ``params`` (mappings of the configuration), ``rows``
        (the indices of its rows, in order) and ``runs`` (run label -> list
        of ``(value, samples or None, step or None)``, one per row).
    kind : str
        One of :data:`~queuesgd.measured.MEASURE_COLUMNS`.
    where : callable
        ``where(i)`` names row ``i`` (``"log.csv line 3"``, ``"measured row 2"``).
    time_unit : str
        ``"auto"`` or a key of :data:`TIME_UNITS` (for ``time``).
    notes : tuple of str
        Notes of the whole table, kept first.

    Returns
    -------
    Measurement

    Raises
    ------
    InvalidParameterError
        Steps that do not increase with the time, or times too far apart
        for a float.
    """
    values: list[np.ndarray] = []
    samples: list[np.ndarray] = []
    updates: list[np.ndarray] = []
    runs: list[int] = []
    at = _where_range(group["rows"], where)
    scale, unit_notes = 1.0, []
    if kind == "time":
        times = np.array([x for items in group["runs"].values() for x, *_ in items])
        scale, unit_notes = _time_scale(times, time_unit, at)
    # read_measured gives a step on every row or on none (run_keys refuses a partly filled step column)
    has_steps = kind == "time" and all(it[2] is not None for items in group["runs"].values() for it in items)
    for label, items in group["runs"].items():
        v = np.array([it[0] for it in items], dtype=float)
        s = np.array([np.nan if it[1] is None else it[1] for it in items])
        u = np.ones(v.size)
        if kind == "samples_per_second":  # one run: the mean of its rows
            v, s, u = v[:1] if v.size == 1 else np.array([v.mean()]), s[:1], u[:1]
        elif kind == "time":
            order = np.argsort(v, kind="stable")
            v = np.diff(v[order]) * scale  # the first time starts the clock
            s = s[order][1:]
            _check_intervals(v, [items[k][3] for k in order[1:]], where)
            if has_steps:
                steps = np.array([it[2] for it in items], dtype=float)[order]
                u = np.diff(steps)
                if np.any(u <= 0):
                    raise InvalidParameterError(
                        f"measured step ({at}{', run ' + repr(label) if label else ''})",
                        "a step that does not increase with the time",
                        "steps that increase with the time (a restarted job: a 'run' column)",
                    )
            else:
                u = np.ones(v.size)
        values.append(v)
        samples.append(s)
        updates.append(u)
        runs.append(v.size)
    all_s = np.concatenate(samples)
    all_v = np.concatenate(values).astype(float)
    all_u = np.concatenate(updates)
    if not np.all(np.isfinite(all_v)):
        raise InvalidParameterError(
            f"measured {kind} ({at})", "times too far apart for a float", "times whose differences are finite"
        )
    return Measurement(
        config=MappingProxyType(dict(group["config"])),
        params=MappingProxyType(dict(group["params"])),
        kind=kind,
        values=all_v,
        samples=None if np.isnan(all_s).all() else all_s,
        runs=tuple(runs),
        where=at,
        updates=all_u if has_steps else None,
        notes=(*notes, *unit_notes, *_plausibility(kind, all_v, all_u, at)),
    )


def _check_intervals(intervals: np.ndarray, rows: list[int], where: Any) -> None:
    """Refuse a time between two rows (after the unit) that is not 0 and outside :data:`MEASURE_RANGE`."""
    low, high = MEASURE_RANGE
    with np.errstate(all="ignore"):
        bad = np.flatnonzero((intervals != 0) & ~((intervals >= low) & (intervals <= high)))
    if bad.size:
        k = int(bad[0])
        raise InvalidParameterError(
            f"{where(rows[k])}, column time",
            f"{float(intervals[k]):.6g} s after the row before it",
            f"times {low:g} to {high:g} s apart (or equal), after the unit",
        )


def run_keys(
    rows: list[list[Any]], index: Mapping[str, int], kind: str, where: Any, name: str
) -> tuple[dict[int, Any], list[str]]:
    """The run of each row with a measurement (row index -> key), and a note of how runs were formed.

    ``time``/``step_time``: the ``run`` label (``""`` without one). A
    ``step`` column is filled on every ``time`` row or on none.
    ``samples_per_second``: the rows of one ``run`` label are one run (a
    label on every row or on none); without labels, the rows of a
    configuration are one run with a ``step`` column (logged steps), else
    each row is a run.

    Raises
    ------
    InvalidParameterError
        A partly filled ``step`` column (with ``time``) or ``run`` column
        (with ``samples_per_second``), naming the first empty cell; a run
        label longer than :data:`~queuesgd.measured_cells.MAX_CELL`.
    """
    measured = [i for i, row in enumerate(rows) if not empty(row[index[kind]])]

    def first_empty(col: str) -> int | None:
        if col not in index:
            return None
        filled = [i for i in measured if not empty(rows[i][index[col]])]
        if not filled or len(filled) == len(measured):
            return None
        return next(i for i in measured if empty(rows[i][index[col]]))

    has = {c: c in index and any(not empty(rows[i][index[c]]) for i in measured) for c in ("run", "step")}
    for col, only, why in (
        ("step", "time", "the updates between two rows are the difference of their steps"),
        ("run", "samples_per_second", "the rows of one label are one run"),
    ):
        gap = first_empty(col) if kind == only else None
        if gap is not None:
            raise InvalidParameterError(
                f"{where(gap)}, column {col}",
                "an empty cell",
                f"a {col} on every row with a {kind} or on none ({why}; ignore= (CLI: --ignore) drops the "
                "column)",
            )
    keys: dict[int, Any] = {}
    for i in measured:
        cell = rows[i][index["run"]] if has["run"] else None
        run = "" if empty(cell) else str(cell).strip()
        if len(run) > MAX_CELL:
            raise InvalidParameterError(
                f"{where(i)}, column run", short_value(run), f"at most {MAX_CELL} characters"
            )
        keys[i] = run
    notes = []
    if kind == "samples_per_second":
        if has["run"] and len(set(keys.values())) < len(keys):
            notes.append(f"{name}: the samples_per_second rows of one run label are one run (their mean)")
        elif not has["run"] and has["step"]:
            notes.append(
                f"{name}: samples_per_second rows with a step column are the logged steps of one run per "
                "configuration (their mean, without an interval); a 'run' column labels repeated runs"
            )
        elif not has["run"]:
            keys = {i: ("row", i) for i in measured}  # each row is one run
    return keys, notes


def _plausibility(kind: str, values: np.ndarray, updates: np.ndarray, where: str) -> list[str]:
    if kind == "samples_per_second" or values.size == 0:
        return []
    per_update = values / updates
    median = float(np.median(per_update))
    low, high = PLAUSIBLE_STEP
    if low <= median <= high:
        return []
    hint = "time_unit=, CLI --time-unit" + ("" if kind == "time" else ", or a unit in the cells, e.g. 250ms")
    return [
        f"{where}: the median update takes {units.format_seconds(median) if median > 0 else '0 s'}, "
        f"implausible for a training step (outside {low:g}-{high:g} s): check the unit ({hint})"
    ]


def _where_range(rows: list[int], where: Any) -> str:
    first, last = where(rows[0]), where(rows[-1])
    if first == last:
        return first
    # "log.csv line 2" .. "log.csv line 9" -> "log.csv lines 2-9"
    head, _, a = first.rpartition(" ")
    _, _, b = last.rpartition(" ")
    return f"{head}s {a}-{b}"
