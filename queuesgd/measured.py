"""Read a user's own training measurements: a CSV file, a text log, a DataFrame, columns or rows.

Each row belongs to one *configuration*, named by the configuration columns:

========================  ==================================================
column                    meaning
========================  ==================================================
``workers``               number of workers (or the caller's ``workers=``)
``scheme``                scheme name (``sync-ps``, ``ring-allreduce``, ...)
``workload``              catalog workload name (``resnet50``)
``bandwidth``             link bandwidth (``10Gbit/s``; a bare number is B/s)
``latency``               one-way latency (``50us``; a bare number is s)
``ps_shards``             parameter-server shards
``batch_size``            samples per worker per step
any other name            a parameter of the scheme (``backups``, ``cutoff``)
``run``                   a label of one run (timestamps restart per run)
``step``                  the training step a row was logged at
========================  ==================================================

and carries exactly one kind of measurement:

- ``samples_per_second``: one run's measured throughput (several rows of one
  configuration are repeated runs; the rows of one ``run`` label are one
  run, its throughput their mean, and so are all the rows of a
  configuration with a ``step`` column and no ``run`` column);
- ``time``: the time at which the job applied one model update (a training
  step ended), in seconds from any origin; Unix times in seconds,
  milliseconds, microseconds or nanoseconds are recognized and said in a
  note (``time_unit=`` says otherwise); the first time of each run only
  starts the clock. With a ``step`` column a row may follow several
  updates (a log written every 50 steps): the updates between two rows are
  the difference of their steps (a step on every row, or on none);
- ``step_time``: the seconds one update took (a duration per row; a number
  without a unit is in ``time_unit=``, seconds by default).

Durations, rates and the time between two rows lie in
:data:`~queuesgd.measured_cells.MEASURE_RANGE` (1e-300 to 1e300).

With ``time`` or ``step_time`` an optional ``samples`` column says how many
training samples one update applied. Empty cells of configuration columns
take the defaults given by the caller; a row whose measurement cell is empty
(a log row of other metrics, as PyTorch Lightning's ``metrics.csv`` has) is
skipped, with a note. Lines starting with ``#`` are comments (a quoted
``"#2"`` is a value).

A file is read as it comes: ``-`` is standard input, a UTF-8 byte-order mark
is dropped, and the separator (``,``, ``;`` or a tab) is the one the header
row uses most. Every read is bounded (:data:`MAX_BYTES`, :data:`MAX_ROWS`,
:data:`MAX_CELL`), and devices, FIFOs and directories are refused before
anything is read. ``columns=`` maps a log's own column names onto these
(``{"samples_per_second": "train/throughput"}``), and ``log_pattern=`` reads
a plain-text log (a torchrun/DDP job's output) with a regular expression
whose named groups are the columns (see :data:`LOG_PATTERNS`; a user's own
pattern is bounded in time, :mod:`queuesgd.measured_log`).

Examples
--------
>>> rows = read_measured({"workers": [2, 2, 4], "samples_per_second": [100, 110, 190]})
>>> [(m.config["workers"], m.kind, m.values.tolist()) for m in rows]
[(2, 'samples_per_second', [100.0, 110.0]), (4, 'samples_per_second', [190.0])]
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.measured_cells import (
    MAX_CELL,
    config_value,
    empty,
    measure_value,
    param_value,
    short_value,
    step_value,
)
from queuesgd.measured_columns import CONFIG_COLUMNS, MEASURE_COLUMNS, check_header, options, select
from queuesgd.measured_log import LOG_PATTERNS, compile_pattern, matching_lines
from queuesgd.measured_runs import PLAUSIBLE_STEP, TIME_UNITS, Measurement, measurement, run_keys

__all__ = [
    "CONFIG_COLUMNS",
    "LOG_PATTERNS",
    "MAX_BYTES",
    "MAX_CELL",
    "MAX_LINE",
    "MAX_PATTERN_LINE",
    "MAX_ROWS",
    "MEASURE_COLUMNS",
    "PATTERN_SECONDS",
    "PLAUSIBLE_STEP",
    "TIME_UNITS",
    "Measurement",
    "read_measured",
]

# The bounds of a read live here (and are looked up here when a file is read): MAX_CELL, the
# longest cell, is queuesgd.measured_cells'; TIME_UNITS and PLAUSIBLE_STEP are queuesgd.measured_runs'.

#: Largest file (or standard input) read, in bytes: 64 MiB, a million steps of a wide log.
MAX_BYTES = 64 * 2**20
#: Most data rows (or matched log lines) read.
MAX_ROWS = 1_000_000
#: Longest line of a text log that ``log_pattern`` is tried on; longer lines are skipped (noted).
MAX_LINE = 10_000

#: Longest line a user's own ``log_pattern`` is tried on (a ready-made one: :data:`MAX_LINE`).
MAX_PATTERN_LINE = 2_000
#: Seconds a user's own ``log_pattern`` may search one file (in a separate process, then stopped).
PATTERN_SECONDS = 20.0

_ACCEPTED_INPUT = (
    "a CSV file path (or '-' for standard input), a pandas DataFrame, a mapping of column name -> values, "
    "or a list of row dicts"
)


# ---- the table: header, rows and where each row came from ---------------------------------


def _read_text(measured: Any) -> tuple[str, str]:
    """``(text, name)`` of a file path or ``"-"`` (standard input), bounded and decoded."""
    if isinstance(measured, str) and measured == "-":
        name = "<stdin>"
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        raw = stream.read(MAX_BYTES + 1) if stream is not None else b""
        if len(raw) > MAX_BYTES:
            raise InvalidParameterError("measured", name, f"at most {MAX_BYTES:,} bytes on standard input")
        if isinstance(raw, str):
            return raw.removeprefix("\ufeff"), name
    else:
        name = Path(measured).name or os.fspath(measured)
        raw = _checks.read_bytes("measured", measured, max_bytes=MAX_BYTES)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidParameterError(
            "measured", os.fspath(measured), f"UTF-8 text (byte {err.start} is not UTF-8)"
        ) from None
    if "\0" in text:
        raise InvalidParameterError("measured", os.fspath(measured), "a text file (it has NUL bytes)")
    return text, name


def _separator(header_line: str) -> str:
    """The separator the header row uses most: ``,`` (also when none), ``;`` or a tab."""
    counts = {sep: header_line.count(sep) for sep in (",", ";", "\t")}
    best = max(counts, key=lambda s: counts[s])  # ties: the first, a comma
    return best if counts[best] else ","


def _read_csv(text: str, name: str) -> tuple[list[str], list[list[Any]], Any]:
    first = next(
        (line for line in io.StringIO(text) if line.strip() and not line.lstrip().startswith("#")), ""
    )
    sep = _separator(first)
    lines: list[tuple[int, list[str]]] = []
    done = [0]  # the physical lines of the rows read so far: a line past them starts a row

    def physical() -> Iterator[str]:
        """The file's lines; an unquoted ``#`` line that starts a row is a comment (read as blank)."""
        for k, line in enumerate(io.StringIO(text, newline="")):
            yield "\n" if k == done[0] and line.lstrip().startswith("#") else line

    reader = csv.reader(physical(), delimiter=sep)
    try:
        for row in reader:
            done[0] = reader.line_num
            if not any(c.strip() for c in row):
                continue
            lines.append((reader.line_num, row))
            if len(lines) > MAX_ROWS + 1:
                raise InvalidParameterError(
                    "measured",
                    name,
                    f"at most {MAX_ROWS:,} data rows (split the log, or keep every n-th row)",
                )
    except csv.Error as err:
        raise InvalidParameterError(
            f"{name} line {reader.line_num}", str(err), "a well-formed CSV row"
        ) from None
    if not lines:
        raise InvalidParameterError(
            "measured", name, "a CSV file with a header row, e.g. workers,samples_per_second"
        )
    (_, header), body = lines[0], lines[1:]
    if not body:
        raise InvalidParameterError("measured", name, "a CSV file with data rows below its header")
    header = [h.strip() for h in header]
    numbers = [n for n, _ in body]
    rows = []
    for n, row in body:
        if len(row) != len(header):
            raise InvalidParameterError(
                f"{name} line {n}",
                f"{len(row)} cells",
                f"{len(header)} cells, one per column of the header ({short_value(', '.join(header))}; "
                f"separator {sep!r})",
            )
        rows.append(row)
    return header, rows, lambda i: f"{name} line {numbers[i]}"


def _read_log(text: str, name: str, log_pattern: Any) -> tuple[list[str], list[list[Any]], Any, list[str]]:
    """The named groups of the lines ``log_pattern`` matches, as a table (``rank``: lowest rank's lines)."""
    pattern, builtin = compile_pattern(log_pattern)
    header = list(pattern.groupindex)
    max_line = MAX_LINE if builtin else min(MAX_LINE, MAX_PATTERN_LINE)
    found, long, count = matching_lines(text, pattern, builtin, max_line, MAX_ROWS, PATTERN_SECONDS)
    if len(found) > MAX_ROWS:
        raise InvalidParameterError(
            "measured",
            name,
            f"at most {MAX_ROWS:,} matching lines (split the log, or keep every n-th line)",
        )
    rows = [groups for _, groups in found]
    numbers = [n for n, _ in found]
    ranks = [groups[header.index("rank")] if "rank" in header else None for groups in rows]
    notes = []
    if not rows:
        raise InvalidParameterError(
            "measured",
            name,
            f"a text log with lines that log_pattern matches (none of {count:,} lines did)",
        )
    if "rank" in header:
        header.remove("rank")
        seen = sorted({int(r) for r in ranks if r is not None and str(r).isdigit()})
        if len(seen) > 1:
            keep = [
                i for i, r in enumerate(ranks) if r is not None and str(r).isdigit() and int(r) == seen[0]
            ]
            notes.append(
                f"{name}: the lines of rank {seen[0]} only ({len(keep):,} of {len(rows):,} matched lines; "
                f"ranks {seen[0]}-{seen[-1]} logged)"
            )
            rows, numbers = [rows[i] for i in keep], [numbers[i] for i in keep]
        at = list(pattern.groupindex).index("rank")
        rows = [r[:at] + r[at + 1 :] for r in rows]
    notes.append(f"{name}: {len(rows):,} of {count:,} lines matched the log pattern")
    if long:
        notes.append(f"{name}: {long:,} lines longer than {max_line:,} characters skipped")
    return header, rows, lambda i: f"{name} line {numbers[i]}", notes


def _table(measured: Any, log_pattern: Any) -> tuple[list[str], list[list[Any]], Any, list[str], str]:
    """``(header, rows, where, notes, name)``: ``where(i)`` names row ``i`` (a line of the file or a row)."""
    if isinstance(measured, (str, os.PathLike)):
        text, name = _read_text(measured)
        if log_pattern is not None:
            return (*_read_log(text, name, log_pattern), name)
        return (*_read_csv(text, name), [], name)
    if log_pattern is not None:
        raise InvalidParameterError(
            "log_pattern",
            short_value(log_pattern),
            "None unless measured is a text file or '-' (standard input)",
        )
    row_name = lambda i: f"measured row {i}"  # noqa: E731
    if hasattr(measured, "to_dict") and hasattr(measured, "columns"):  # a pandas DataFrame
        if len(measured) > MAX_ROWS:
            raise InvalidParameterError("measured", f"{len(measured):,} rows", f"at most {MAX_ROWS:,} rows")
        header = [str(c) for c in measured.columns]
        records = measured.to_dict("records")
        return header, [[r[c] for c in measured.columns] for r in records], row_name, [], "measured"
    if isinstance(measured, Mapping):
        header = [str(k) for k in measured]
        cols = []
        for k in measured:
            v = measured[k]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise InvalidParameterError(f"measured[{k!r}]", v, "a list of values, one per row")
            if hasattr(v, "__len__") and len(v) > MAX_ROWS:
                raise InvalidParameterError(
                    f"measured[{k!r}]", f"{len(v):,} rows", f"at most {MAX_ROWS:,} rows"
                )
            col = list(itertools.islice(v, MAX_ROWS + 1))  # an iterator without a length: bounded too
            if len(col) > MAX_ROWS:
                raise InvalidParameterError(
                    f"measured[{k!r}]", f"more than {MAX_ROWS:,} values", f"at most {MAX_ROWS:,} rows"
                )
            cols.append(col)
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}: {len(c)}" for k, c in zip(header, cols))
            raise InvalidParameterError("measured", sizes, "columns of one length (one value per row)")
        return header, [list(r) for r in zip(*cols)], row_name, [], "measured"
    if isinstance(measured, Sequence) and not isinstance(measured, (str, bytes)):
        if len(measured) > MAX_ROWS:
            raise InvalidParameterError("measured", f"{len(measured):,} rows", f"at most {MAX_ROWS:,} rows")
        header: list[str] = []
        for i, r in enumerate(measured):
            if not isinstance(r, Mapping):
                raise InvalidParameterError(f"measured[{i}]", r, "a row dict such as {'workers': 4, ...}")
            header += [str(k) for k in r if str(k) not in header]
        rows = [[r.get(k, None) for k in header] for r in measured]
        return header, rows, row_name, [], "measured"
    raise InvalidParameterError("measured", type(measured).__name__, _ACCEPTED_INPUT)


def read_measured(
    measured: Any,
    *,
    ignore: Iterable[str] = (),
    columns: Mapping[str, str] | None = None,
    log_pattern: str | None = None,
    time_unit: str = "auto",
) -> list[Measurement]:
    """The configurations of ``measured`` and their measurements, in order of first appearance.

    Parameters
    ----------
    measured : str, path, DataFrame, mapping or list of dicts
        A CSV file (header row first; ``"-"`` reads standard input), a text
        log (with ``log_pattern``), a :class:`pandas.DataFrame`, a mapping
        of column name to values, or a list of row dicts, with the columns
        described in this module's documentation.
    ignore : iterable of str
        Columns of the log to drop (a log's ``loss`` or ``epoch``), by the
        log's own names. Any other column that is not a configuration or
        measurement column is kept as a scheme parameter.
    columns : mapping of str to str, optional
        queuesgd's column name -> the log's (``{"samples_per_second":
        "train/throughput"}``).
    log_pattern : str, optional
        Read ``measured`` as a text log: a regular expression (or a name in
        :data:`LOG_PATTERNS`) whose named groups are the columns; a line it
        does not match is skipped. A ``rank`` group keeps the lowest rank's
        lines.
    time_unit : str
        The unit of a ``time`` column: ``"auto"`` (seconds, or Unix time in
        s, ms, us or ns recognized by its size and said in a note) or one of
        :data:`TIME_UNITS`; also of a ``step_time`` without a unit (``"auto"``:
        seconds). Only ``"auto"`` with ``samples_per_second``.

    Returns
    -------
    list of Measurement

    Raises
    ------
    InvalidParameterError
        Naming the file and line (or row) and the column of a malformed cell
        or of the first empty cell of a partly filled ``step`` (``time``) or
        ``run`` (``samples_per_second``) column, a missing or duplicate
        column, a row of the wrong length, a file that is not a regular file
        or is larger than the bounds, or a ``log_pattern`` refused or
        stopped (:mod:`queuesgd.measured_log`).

    Examples
    --------
    >>> m = read_measured({"workers": [4] * 3, "time": [0.0, 0.1, 0.3]})[0]
    >>> m.kind, m.values.round(9).tolist(), m.runs
    ('time', [0.1, 0.2], (2,))
    >>> read_measured({"workers": [4], "sample_per_second": [1.0]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: measured columns: got 'workers, sample_per_second'; ...

    A log's own names, mapped:

    >>> log = {"train/throughput": [500.0, None, 520.0], "val_loss": [None, 0.3, None]}
    >>> m = read_measured(log, columns={"samples_per_second": "train/throughput"}, ignore=["val_loss"])[0]
    >>> m.values.tolist(), m.notes
    ([500.0, 520.0], ('measured: 1 row with an empty samples_per_second cell skipped (rows 1)',))
    """
    ignore, mapping, time_unit = options(ignore, columns, time_unit)
    header, rows, where, notes, name = _table(measured, log_pattern)
    if not rows:
        raise InvalidParameterError("measured", "no data rows", "at least one data row below the header")
    header, rows = select(header, rows, ignore, mapping, name)
    kind, params = check_header(header)
    if kind == "samples_per_second" and time_unit != "auto":
        raise InvalidParameterError(
            "time_unit",
            time_unit,
            "'auto' with samples_per_second measurements (no times to read; CLI: --time-unit)",
        )
    scale = TIME_UNITS.get(time_unit, 1.0)  # of a bare step_time
    index = {h: i for i, h in enumerate(header)}
    keys, key_notes = run_keys(rows, index, kind, where, name)
    groups: dict[tuple, dict[str, Any]] = {}
    skipped: list[int] = []
    for i, row in enumerate(rows):
        cell = row[index[kind]]
        if empty(cell):
            skipped.append(i)
            continue
        config: dict[str, Any] = {}
        for col in CONFIG_COLUMNS:
            if col in index and not empty(row[index[col]]):
                config[col] = config_value(col, f"{where(i)}, column {col}", row[index[col]])
        par = {
            p: param_value(f"{where(i)}, column {p}", row[index[p]])
            for p in params
            if not empty(row[index[p]])
        }
        value = measure_value(kind, f"{where(i)}, column {kind}", cell, scale)
        samples = None
        if "samples" in index:
            if empty(row[index["samples"]]):
                raise InvalidParameterError(f"{where(i)}, column samples", "an empty cell", "a number > 0")
            samples = measure_value("samples", f"{where(i)}, column samples", row[index["samples"]])
        step = None
        if "step" in index and not empty(row[index["step"]]):
            step = step_value(f"{where(i)}, column step", row[index["step"]])
        key = (tuple(sorted(config.items())), tuple(sorted((k, str(v)) for k, v in par.items())))
        g = groups.setdefault(key, {"config": config, "params": par, "runs": {}, "rows": []})
        g["runs"].setdefault(keys[i], []).append((value, samples, step, i))
        g["rows"].append(i)
    if not groups:
        raise InvalidParameterError(
            f"measured column {kind}",
            "no measurement",
            f"at least one row with a {kind} cell ({name} has {len(rows):,} rows, all empty there)",
        )
    if skipped:
        shown = ", ".join(where(i).rpartition(" ")[2] for i in skipped[:5]) + (
            ", ..." if len(skipped) > 5 else ""
        )
        label = "lines" if where(0).startswith(f"{name} line") else "rows"
        notes.append(
            f"{name}: {len(skipped):,} row{'s' if len(skipped) != 1 else ''} with an empty {kind} cell "
            f"skipped ({label} {shown})"
        )
    notes.extend(key_notes)
    return [measurement(g, kind, where, time_unit, tuple(notes)) for g in groups.values()]
