"""One cell of a measurement table, read: bounded in length, parsed, and named in any error.

:func:`queuesgd.measured.read_measured` reads each cell of a user's log with
these: a configuration cell (:func:`config_value`), a measurement
(:func:`measure_value`), a step (:func:`step_value`) or a scheme parameter
(:func:`param_value`). Every failure is one :class:`~queuesgd.errors.InvalidParameterError`
that names the cell (``"log.csv line 3, column workers"``) and what it accepts.

Examples
--------
>>> config_value("workers", "row 0, column workers", " 4 ")
4
>>> measure_value("step_time", "row 0, column step_time", "250ms")
0.25
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.cluster import MAX_PS_SHARDS, MAX_WORKERS
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.specs import parse_value

__all__ = [
    "MAX_CELL",
    "MEASURE_RANGE",
    "config_value",
    "empty",
    "measure_value",
    "param_value",
    "parse_cell",
    "short_value",
    "step_value",
]

#: Longest cell that is read as a value, in characters (a number, a unit, a name or a label).
MAX_CELL = 100
#: The range of a measured duration (s) or rate (samples/s), and of the time between two timestamps: far
#: beyond any training step, yet every rate and error computed from such values is a finite number.
MEASURE_RANGE = (1e-300, 1e300)


def short_value(value: Any) -> Any:
    """A long cell shortened for a message (its length said); any other value as it is.

    Parameters
    ----------
    value : object
        A cell, a header or a user's argument.

    Returns
    -------
    object
        ``value``, or a short text in its place for a string over 40
        characters or an integer over 128 bits.

    Examples
    --------
    >>> short_value("x" * 50), short_value(10**50), short_value(3)
    ('xxxxxxxxxxxxxxxxxxxx... (50 characters)', 'an integer of about 50 digits', 3)
    """
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:20]}... ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    return value


def empty(value: Any) -> bool:
    """Whether a cell is empty: None, blank text, or NaN of any float type (pandas' missing cell).

    Examples
    --------
    >>> [bool(empty(v)) for v in (None, "  ", float("nan"), np.float32("nan"), 0)]
    [True, True, True, True, False]
    """
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))  # pandas' missing cell


def parse_cell(field: str, value: Any, parse: Any, accepted: str) -> Any:
    """``parse(field, value)`` of one cell, bounded in length; any failure is one error naming the cell.

    Parameters
    ----------
    field : str
        The cell's name for messages (``"log.csv line 3, column workers"``).
    value : object
        The cell; text is stripped and at most :data:`MAX_CELL` characters.
    parse : callable
        ``parse(field, value)`` returns the value read.
    accepted : str
        What the cell accepts, for the message.

    Returns
    -------
    object
        What ``parse`` returns.

    Raises
    ------
    InvalidParameterError
        A cell too long, or one ``parse`` refuses (a ``ValueError``,
        ``TypeError`` or ``ArithmeticError`` becomes this error).

    Examples
    --------
    >>> parse_cell("row 0, column x", " 7 ", lambda f, v: int(v), "an integer")
    7
    >>> parse_cell("row 0, column x", "seven", lambda f, v: int(v), "an integer")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: row 0, column x: got 'seven'; accepted: an integer
    """
    if isinstance(value, str):
        value = value.strip()
        if len(value) > MAX_CELL:
            raise InvalidParameterError(
                field, short_value(value), f"{accepted} (at most {MAX_CELL} characters)"
            )
    try:
        return parse(field, value)
    except QueuesgdError:
        raise
    except (ValueError, TypeError, ArithmeticError):  # int("9" * 5000), float(10**400), ...
        raise InvalidParameterError(field, short_value(value), accepted) from None


def _number(field: str, value: Any, accepted: str) -> float:
    if isinstance(value, str):
        value = parse_value(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidParameterError(field, value, accepted)
    out = float(value)
    if not np.isfinite(out):
        raise InvalidParameterError(field, value, accepted)
    return out


def _int(field: str, value: Any, minimum: int = 1) -> int:
    return _checks.integer(field, parse_value(value) if isinstance(value, str) else value, minimum=minimum)


def config_value(col: str, field: str, value: Any) -> Any:
    """The value of a configuration cell of column ``col``, in SI units.

    Parameters
    ----------
    col : str
        One of :data:`~queuesgd.measured.CONFIG_COLUMNS`.
    field : str
        The cell's name for messages.
    value : object
        The cell.

    Returns
    -------
    int, float or str
        ``workers``, ``ps_shards``, ``batch_size``: an int; ``bandwidth``:
        B/s; ``latency``: seconds; ``scheme``, ``workload``: a name.

    Examples
    --------
    >>> config_value("bandwidth", "row 0, column bandwidth", "8Gbit/s")
    1000000000.0
    """
    if col in ("workers", "ps_shards"):
        most = MAX_WORKERS if col == "workers" else MAX_PS_SHARDS
        accepted = f"an integer from 1 to {most:,}"

        def bounded(f: str, v: Any) -> int:
            out = _int(f, v)
            if out > most:
                raise InvalidParameterError(f, short_value(out), accepted)
            return out

        return parse_cell(field, value, bounded, accepted)
    if col == "batch_size":
        return parse_cell(field, value, _int, "an integer >= 1")
    if col == "bandwidth":
        return parse_cell(
            field, value, lambda f, v: _checks.positive(f, units.parse_bandwidth(v, f)), "a bandwidth > 0"
        )
    if col == "latency":
        return parse_cell(
            field, value, lambda f, v: units.parse_seconds(v, f), "a latency (seconds, or with a unit: 50us)"
        )
    return parse_cell(
        field, value, lambda f, v: _checks.name(f, v if isinstance(v, str) else str(v)), "a name"
    )


def step_value(field: str, value: Any) -> int:
    """The training step of a ``step`` cell: an integer >= 0.

    Examples
    --------
    >>> step_value("row 0, column step", "50")
    50
    """
    return parse_cell(field, value, lambda f, v: _int(f, v, 0), "an integer >= 0")


def param_value(field: str, value: Any) -> Any:
    """A scheme parameter's cell, as read (a number, or text such as ``"30ms"``).

    Examples
    --------
    >>> param_value("row 0, column backups", "2"), param_value("row 0, column cutoff", "30ms")
    (2, '30ms')
    """
    return parse_cell(field, value, lambda f, v: parse_value(str(v)), "a value")


def _in_range(field: str, value: Any, out: float, accepted: str, scaled: bool = False) -> float:
    low, high = MEASURE_RANGE
    if not low <= out <= high:
        read = f"; read as {out:.6g} s" if scaled else ""
        raise InvalidParameterError(field, short_value(value), f"{accepted}, from {low:g} to {high:g}{read}")
    return out


def _bare(value: Any) -> bool:
    """Whether a step-time cell is a number without a unit (read in ``time_unit``)."""
    if isinstance(value, str):
        return not isinstance(parse_value(value), str)
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


_STEP_TIME = "a duration > 0 (seconds, or with a unit: 120ms)"


def _step_time(field: str, value: Any, scale: float) -> float:
    if isinstance(value, str) and "," in value:
        accepted = _STEP_TIME + "; no thousands separators (1250ms, not 1,250ms)"
        raise InvalidParameterError(field, value, accepted)
    seconds = units.parse_seconds(value, field)
    scaled = _bare(value) and scale != 1.0
    if scaled:
        seconds *= scale
    if not seconds > 0 or not np.isfinite(seconds):
        raise InvalidParameterError(field, value, _STEP_TIME)
    return _in_range(field, value, seconds, "a duration in seconds", scaled)


def measure_value(col: str, field: str, value: Any, scale: float = 1.0) -> float:
    """The number a measurement cell (or a ``samples`` cell) holds.

    Parameters
    ----------
    col : str
        ``time`` (seconds, any finite number), ``step_time`` (a duration
        > 0, a unit allowed), ``samples_per_second`` or ``samples`` (> 0).
        A duration or rate lies in :data:`MEASURE_RANGE`.
    field : str
        The cell's name for messages.
    value : object
        The cell.
    scale : float
        Seconds per unit of a ``step_time`` cell without a unit (``time_unit=``).

    Returns
    -------
    float

    Examples
    --------
    >>> measure_value("time", "row 0, column time", "-1.5"), measure_value("samples", "row 0", 64)
    (-1.5, 64.0)
    >>> measure_value("step_time", "row 0", "250", 1e-3), measure_value("step_time", "row 0", "1s", 1e-3)
    (0.25, 1.0)
    >>> measure_value("samples_per_second", "row 0", "1e-320")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: row 0: got '1e-320'; accepted: a number > 0, from 1e-300 to 1e+300
    """
    if col == "time":
        accepted = "a time in seconds (a finite number)"
        return parse_cell(field, value, lambda f, v: _number(f, v, accepted), accepted)
    if col == "step_time":
        return parse_cell(field, value, lambda f, v: _step_time(f, v, scale), _STEP_TIME)
    accepted = "a number > 0" if col == "samples_per_second" else "a number of samples > 0"

    def positive(f: str, v: Any) -> float:
        out = _number(f, v, accepted)
        if out <= 0:
            raise InvalidParameterError(f, v, accepted)
        return _in_range(f, v, out, accepted)

    return parse_cell(field, value, positive, accepted)
