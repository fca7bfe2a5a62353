"""Read a user's own training measurements: a CSV file, a DataFrame, columns or rows.

Each row belongs to one *configuration*, named by the configuration columns
(only ``workers`` is required):

========================  ==================================================
column                    meaning
========================  ==================================================
``workers``               number of workers (required)
``scheme``                scheme name (``sync-ps``, ``ring-allreduce``, ...)
``workload``              catalog workload name (``resnet50``)
``bandwidth``             link bandwidth (``10Gbit/s``; a bare number is B/s)
``latency``               one-way latency (``50us``; a bare number is s)
``ps_shards``             parameter-server shards
``batch_size``            samples per worker per step
any other name            a parameter of the scheme (``backups``, ``cutoff``)
``run``                   a label of one run (timestamps restart per run)
========================  ==================================================

and carries exactly one kind of measurement:

- ``samples_per_second``: one run's measured throughput (several rows of one
  configuration are repeated runs);
- ``time``: the time, in seconds from any origin, at which the job applied
  one model update (a training step ended); the first time of each run only
  starts the clock;
- ``step_time``: the seconds one update took (a duration per row).

With ``time`` or ``step_time`` an optional ``samples`` column says how many
training samples that update applied. Empty cells of configuration columns
take the defaults given by the caller. Lines starting with ``#`` are comments.

Examples
--------
>>> rows = read_measured({"workers": [2, 2, 4], "samples_per_second": [100, 110, 190]})
>>> [(m.config["workers"], m.kind, m.values.tolist()) for m in rows]
[(2, 'samples_per_second', [100.0, 110.0]), (4, 'samples_per_second', [190.0])]
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import parse_value

__all__ = ["CONFIG_COLUMNS", "MEASURE_COLUMNS", "Measurement", "read_measured"]

#: Columns that name a configuration (besides scheme parameters), in display order.
CONFIG_COLUMNS = ("scheme", "workload", "workers", "bandwidth", "latency", "ps_shards", "batch_size")
#: The kinds of measurement; a table has exactly one of these columns.
MEASURE_COLUMNS = ("samples_per_second", "time", "step_time")
#: Other columns with a meaning.
_OTHER = ("samples", "run")

_ACCEPTED_INPUT = (
    "a CSV file path, a pandas DataFrame, a mapping of column name -> values, or a list of row dicts"
)


@dataclass(frozen=True)
class Measurement:
    """The measurements of one configuration.

    Attributes
    ----------
    config : mapping
        ``workers`` (int) and, where given, ``scheme``, ``workload`` (str),
        ``bandwidth`` (B/s), ``latency`` (s), ``ps_shards``, ``batch_size``
        (int); missing ones are absent.
    params : mapping
        Scheme parameters from the other columns (values as read: numbers
        or strings such as ``"30ms"``).
    kind : str
        One of :data:`MEASURE_COLUMNS`.
    values : ndarray
        ``samples_per_second``: one value per run. ``time``/``step_time``:
        durations in seconds of the updates, runs one after the other.
    samples : ndarray or None
        Samples applied by each update of ``values`` (``time``/``step_time``
        with a ``samples`` column), else None.
    runs : tuple of int
        Number of updates (or rows) of each run, in order; they sum to
        ``len(values)`` (a run of one timestamp has none).
    where : str
        The rows it came from, for messages (``"log.csv lines 2-203"``).
    """

    config: Mapping[str, Any]
    params: Mapping[str, Any]
    kind: str
    values: np.ndarray
    samples: np.ndarray | None
    runs: tuple[int, ...]
    where: str


def _table(measured: Any) -> tuple[list[str], list[list[Any]], Any]:
    """``(header, rows, where)``: ``where(i)`` names row ``i`` (a line of the file or a row number)."""
    if isinstance(measured, (str, os.PathLike)):
        return _read_csv(Path(measured))
    if hasattr(measured, "to_dict") and hasattr(measured, "columns"):  # a pandas DataFrame
        header = [str(c) for c in measured.columns]
        records = measured.to_dict("records")
        return header, [[r[c] for c in measured.columns] for r in records], lambda i: f"measured row {i}"
    if isinstance(measured, Mapping):
        header = [str(k) for k in measured]
        cols = []
        for k in measured:
            v = measured[k]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise InvalidParameterError(f"measured[{k!r}]", v, "a list of values, one per row")
            cols.append(list(v))
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}: {len(c)}" for k, c in zip(header, cols))
            raise InvalidParameterError("measured", sizes, "columns of one length (one value per row)")
        return header, [list(r) for r in zip(*cols)], lambda i: f"measured row {i}"
    if isinstance(measured, Sequence) and not isinstance(measured, (str, bytes)):
        header: list[str] = []
        for i, r in enumerate(measured):
            if not isinstance(r, Mapping):
                raise InvalidParameterError(f"measured[{i}]", r, "a row dict such as {'workers': 4, ...}")
            header += [str(k) for k in r if str(k) not in header]
        rows = [[r.get(k, None) for k in header] for r in measured]
        return header, rows, lambda i: f"measured row {i}"
    raise InvalidParameterError("measured", type(measured).__name__, _ACCEPTED_INPUT)


def _read_csv(path: Path) -> tuple[list[str], list[list[Any]], Any]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            lines = [(n, row) for n, row in enumerate(csv.reader(fh), start=1)]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        raise InvalidParameterError("measured", str(path), f"a readable UTF-8 CSV file ({why})") from None
    lines = [(n, row) for n, row in lines if any(c.strip() for c in row)]
    lines = [(n, row) for n, row in lines if not row[0].lstrip().startswith("#")]
    if not lines:
        raise InvalidParameterError(
            "measured", str(path), "a CSV file with a header row, e.g. workers,samples_per_second"
        )
    (_, header), body = lines[0], lines[1:]
    if not body:
        raise InvalidParameterError("measured", str(path), "a CSV file with data rows below its header")
    header = [h.strip() for h in header]
    numbers = [n for n, _ in body]
    rows = []
    for n, row in body:
        if len(row) != len(header):
            raise InvalidParameterError(
                f"{path.name} line {n}",
                f"{len(row)} cells",
                f"{len(header)} cells, one per column of the header ({', '.join(header)})",
            )
        rows.append([c.strip() for c in row])
    return header, rows, lambda i: f"{path.name} line {numbers[i]}"


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, float) and np.isnan(value)  # pandas' missing cell


def _number(field: str, value: Any, accepted: str) -> float:
    if isinstance(value, str):
        value = parse_value(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidParameterError(field, value, accepted)
    out = float(value)
    if not np.isfinite(out):
        raise InvalidParameterError(field, value, accepted)
    return out


def _int(field: str, value: Any) -> int:
    return _checks.integer(field, parse_value(value.strip()) if isinstance(value, str) else value)


def _config_value(col: str, field: str, value: Any) -> Any:
    if col in ("workers", "ps_shards", "batch_size"):
        return _int(field, value)
    if col == "bandwidth":
        return _checks.positive(field, units.parse_bandwidth(value, field))
    if col == "latency":
        return units.parse_seconds(value, field)
    return _checks.name(field, str(value).strip() if not isinstance(value, str) else value.strip())


def _measure_value(col: str, field: str, value: Any) -> float:
    if col == "time":
        return _number(field, value, "a time in seconds (a finite number)")
    if col == "step_time":
        seconds = units.parse_seconds(value, field)
        if seconds <= 0:
            raise InvalidParameterError(field, value, "a duration > 0 (seconds, or with a unit: 120ms)")
        return seconds
    accepted = "a number > 0" if col == "samples_per_second" else "a number of samples > 0"
    out = _number(field, value, accepted)
    if out <= 0:
        raise InvalidParameterError(field, value, accepted)
    return out


def _check_header(header: list[str], ignore: Iterable[str]) -> tuple[str, list[str]]:
    """The measurement column and the parameter columns; clear errors for a malformed header."""
    seen: set[str] = set()
    for h in header:
        if not h:
            raise InvalidParameterError("measured columns", header, "a name for every column")
        if h in seen:
            raise InvalidParameterError("measured columns", h, "each column named once")
        seen.add(h)
    kinds = [c for c in MEASURE_COLUMNS if c in seen]
    accepted = "exactly one of " + ", ".join(repr(c) for c in MEASURE_COLUMNS)
    if len(kinds) != 1:
        raise InvalidParameterError("measured columns", ", ".join(header), accepted)
    if "workers" not in seen:
        raise InvalidParameterError("measured columns", ", ".join(header), "a 'workers' column")
    if "samples" in seen and kinds[0] == "samples_per_second":
        raise InvalidParameterError(
            "measured columns", "samples", "a 'samples' column only with 'time' or 'step_time'"
        )
    known = set(CONFIG_COLUMNS) | set(MEASURE_COLUMNS) | set(_OTHER) | set(ignore)
    return kinds[0], [h for h in header if h not in known]


def read_measured(measured: Any, *, ignore: Iterable[str] = ()) -> list[Measurement]:
    """The configurations of ``measured`` and their measurements, in order of first appearance.

    Parameters
    ----------
    measured : str, path, DataFrame, mapping or list of dicts
        A CSV file (header row first), a :class:`pandas.DataFrame`, a
        mapping of column name to values, or a list of row dicts, with the
        columns described in this module's documentation.
    ignore : iterable of str
        Columns to drop (a log's ``loss`` or ``epoch``). Any other column
        that is not a configuration or measurement column is kept as a
        scheme parameter.

    Returns
    -------
    list of Measurement

    Raises
    ------
    InvalidParameterError
        Naming the file and line (or row) and the column of a malformed cell,
        a missing or duplicate column, or a row of the wrong length.

    Examples
    --------
    >>> m = read_measured({"workers": [4] * 3, "time": [0.0, 0.1, 0.3]})[0]
    >>> m.kind, m.values.round(9).tolist(), m.runs
    ('time', [0.1, 0.2], (2,))
    >>> read_measured({"workers": [4], "sample_per_second": [1.0]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: measured columns: got 'workers, sample_per_second'; ...
    """
    ignore = [ignore] if isinstance(ignore, str) else list(ignore)
    header, rows, where = _table(measured)
    if not rows:
        raise InvalidParameterError("measured", "no data rows", "at least one data row below the header")
    kind, params = _check_header(header, ignore)
    index = {h: i for i, h in enumerate(header)}
    groups: dict[tuple, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        config: dict[str, Any] = {}
        for col in CONFIG_COLUMNS:
            if col in index and not _empty(row[index[col]]):
                config[col] = _config_value(col, f"{where(i)}, column {col}", row[index[col]])
        if "workers" not in config:
            raise InvalidParameterError(f"{where(i)}, column workers", "an empty cell", "an integer >= 1")
        par = {p: parse_value(str(row[index[p]]).strip()) for p in params if not _empty(row[index[p]])}
        cell = row[index[kind]]
        if _empty(cell):
            raise InvalidParameterError(f"{where(i)}, column {kind}", "an empty cell", "a measurement")
        value = _measure_value(kind, f"{where(i)}, column {kind}", cell)
        samples = None
        if "samples" in index:
            if _empty(row[index["samples"]]):
                raise InvalidParameterError(f"{where(i)}, column samples", "an empty cell", "a number > 0")
            samples = _measure_value("samples", f"{where(i)}, column samples", row[index["samples"]])
        run = "" if "run" not in index or _empty(row[index["run"]]) else str(row[index["run"]]).strip()
        key = (tuple(sorted(config.items())), tuple(sorted((k, str(v)) for k, v in par.items())))
        g = groups.setdefault(key, {"config": config, "params": par, "runs": {}, "rows": []})
        g["runs"].setdefault(run, []).append((value, samples))
        g["rows"].append(i)
    return [_measurement(g, kind, where) for g in groups.values()]


def _measurement(group: dict[str, Any], kind: str, where: Any) -> Measurement:
    values: list[np.ndarray] = []
    samples: list[np.ndarray] = []
    runs: list[int] = []
    for items in group["runs"].values():
        v = np.array([x for x, _ in items])
        s = np.array([np.nan if y is None else y for _, y in items])
        if kind == "time":
            order = np.argsort(v, kind="stable")
            v, s = np.diff(v[order]), s[order][1:]  # the first time starts the clock
        values.append(v)
        samples.append(s)
        runs.append(v.size)
    all_s = np.concatenate(samples)
    return Measurement(
        config=MappingProxyType(dict(group["config"])),
        params=MappingProxyType(dict(group["params"])),
        kind=kind,
        values=np.concatenate(values).astype(float),
        samples=None if np.isnan(all_s).all() else all_s,
        runs=tuple(runs),
        where=_where_range(group["rows"], where),
    )


def _where_range(rows: list[int], where: Any) -> str:
    first, last = where(rows[0]), where(rows[-1])
    if first == last:
        return first
    # "log.csv line 2" .. "log.csv line 9" -> "log.csv lines 2-9"
    head, _, a = first.rpartition(" ")
    _, _, b = last.rpartition(" ")
    return f"{head}s {a}-{b}"
