"""The columns of a measurement table: their names, and a log's own columns ignored, renamed and checked.

:func:`queuesgd.measured.read_measured` reads a log's header with these:
:func:`select` drops the ``ignore=`` columns and renames the ``columns=``
ones (the log's name -> queuesgd's), then :func:`check_header` finds the one
measurement column and the scheme parameters.

Examples
--------
>>> header, rows = select(["throughput", "loss"], [[100.0, 2.3]], ["loss"],
...                       {"samples_per_second": "throughput"}, "log.csv")
>>> header, rows, check_header(header)
(['samples_per_second'], [[100.0]], ('samples_per_second', []))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.measured_cells import short_value
from queuesgd.measured_runs import TIME_UNITS

__all__ = ["CONFIG_COLUMNS", "MEASURE_COLUMNS", "OTHER_COLUMNS", "check_header", "options", "select"]

#: Columns that name a configuration (besides scheme parameters), in display order.
CONFIG_COLUMNS = ("scheme", "workload", "workers", "bandwidth", "latency", "ps_shards", "batch_size")
#: The kinds of measurement; a table has exactly one of these columns.
MEASURE_COLUMNS = ("samples_per_second", "time", "step_time")
#: Other columns with a meaning.
OTHER_COLUMNS = ("samples", "run", "step")


def _names(field: str, values: Any) -> list[str]:
    items = [values] if isinstance(values, str) else values
    if not isinstance(items, Iterable):
        raise InvalidParameterError(field, values, "column names (a list of str)")
    return [_checks.name(field, v) for v in items]


def select(
    header: list[str],
    rows: list[list[Any]],
    ignore: list[str],
    columns: Mapping[str, str],
    name: str,
) -> tuple[list[str], list[list[Any]]]:
    """Drop the ignored columns, then rename the mapped ones (the log's name -> queuesgd's).

    Parameters
    ----------
    header : list of str
        The log's column names.
    rows : list of list
        The cells, one list per row, in the order of ``header``.
    ignore : list of str
        Columns to drop, by the log's names.
    columns : mapping of str to str
        queuesgd's column name -> the log's.
    name : str
        The log's name, for messages.

    Returns
    -------
    header, rows
        The columns kept, renamed, and their cells.

    Raises
    ------
    InvalidParameterError
        An ignored or mapped column the log does not have, a column both
        ignored and mapped or mapped twice, or a mapping onto a name the log
        already has.
    """
    present = ", ".join(short_value(h) for h in header)
    for col in ignore:
        if col not in header:
            raise InvalidParameterError("ignore", col, f"a column of {name} ({present})")
    sources = list(columns.values())
    for ours, theirs in columns.items():
        if theirs not in header:
            raise InvalidParameterError(f"columns[{ours!r}]", theirs, f"a column of {name} ({present})")
        if theirs in ignore:
            raise InvalidParameterError(f"columns[{ours!r}]", theirs, "a column that is not also ignored")
        if sources.count(theirs) > 1:
            raise InvalidParameterError(f"columns[{ours!r}]", theirs, "each column of the log mapped once")
        if ours in header and ours not in ignore and ours not in sources:
            raise InvalidParameterError(
                f"columns[{ours!r}]",
                theirs,
                f"a mapping onto a name the log does not have ({name} has a column {ours!r}: ignore it)",
            )
    keep = [i for i, h in enumerate(header) if h not in ignore]
    rename = {theirs: ours for ours, theirs in columns.items()}
    return [rename.get(header[i], header[i]) for i in keep], [[r[i] for i in keep] for r in rows]


def check_header(header: list[str]) -> tuple[str, list[str]]:
    """The measurement column and the parameter columns; clear errors for a malformed header.

    Parameters
    ----------
    header : list of str
        The column names (after :func:`select`).

    Returns
    -------
    kind : str
        The one column of :data:`MEASURE_COLUMNS` the header has.
    params : list of str
        The columns that are neither configuration, measurement nor other
        known columns: scheme parameters.

    Raises
    ------
    InvalidParameterError
        A column without a name or named twice, no or several measurement
        columns, or a ``samples`` column with ``samples_per_second``.

    Examples
    --------
    >>> check_header(["workers", "backups", "time"])
    ('time', ['backups'])
    """
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
        raise InvalidParameterError(
            "measured columns",
            short_value(", ".join(header)),
            accepted + " (columns= maps a log's own name onto one, e.g. samples_per_second=train/throughput)",
        )
    if "samples" in seen and kinds[0] == "samples_per_second":
        raise InvalidParameterError(
            "measured columns", "samples", "a 'samples' column only with 'time' or 'step_time'"
        )
    known = set(CONFIG_COLUMNS) | set(MEASURE_COLUMNS) | set(OTHER_COLUMNS)
    return kinds[0], [h for h in header if h not in known]


def options(ignore: Any, columns: Any, time_unit: Any) -> tuple[list[str], dict[str, str], str]:
    """``read_measured``'s ``ignore=``, ``columns=`` and ``time_unit=``, checked.

    Parameters
    ----------
    ignore : str or iterable of str
        Column names to drop.
    columns : mapping of str to str or None
        queuesgd's column name -> the log's.
    time_unit : str
        ``"auto"`` or a key of :data:`~queuesgd.measured_runs.TIME_UNITS`.

    Returns
    -------
    ignore : list of str
    columns : dict of str to str
    time_unit : str

    Examples
    --------
    >>> options("loss", None, "ms")
    (['loss'], {}, 'ms')
    """
    ignore = _names("ignore", ignore)
    if columns is None:
        columns = {}
    if not isinstance(columns, Mapping):
        raise InvalidParameterError("columns", columns, "a mapping of queuesgd's column name -> the log's")
    mapping = {_checks.name("columns", k): _checks.name(f"columns[{k!r}]", v) for k, v in columns.items()}
    time_unit = _checks.choice("time_unit", time_unit, ["auto", *TIME_UNITS])
    return ignore, mapping, time_unit
