"""JSON text parsed the one way every queuesgd file reader parses it (:func:`loads`).

Python's :func:`json.loads` converts an integer literal with :class:`int`,
which refuses one of more than ``sys.get_int_max_str_digits()`` digits
(4,300 by default) with a bare :class:`ValueError` that names neither the
file nor the place. :func:`loads` turns that into a
:class:`json.JSONDecodeError` at the integer's line and column, which the
readers (workload files, campaign specs, traces, GEMM and bandwidth tables)
already report as a file that is not JSON they read, naming the file.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

__all__ = ["loads", "max_int_digits"]


def max_int_digits() -> int:
    """The most digits an integer literal may have: Python's limit (0 when it has none).

    Examples
    --------
    >>> max_int_digits() == sys.get_int_max_str_digits()
    True
    """
    return sys.get_int_max_str_digits()


class _NotFinite(Exception):
    """A ``NaN``, ``Infinity`` or a float literal past the float range, with ``finite=True``."""

    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _constant(name: str) -> float:
    raise _NotFinite(name)


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e400
        raise _NotFinite(literal)
    return value


def loads(text: str, *, finite: bool = False, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``, an over-long integer literal being a :class:`json.JSONDecodeError`.

    Parameters
    ----------
    text : str
        The JSON text.
    finite : bool
        Refuse ``NaN``, ``Infinity``, ``-Infinity`` (which Python's parser
        takes, JSON has none) and a float literal past the float range
        (``1e400``, read as infinity), as a :class:`json.JSONDecodeError` at
        the literal's line and column.
    **kwargs
        Passed to :func:`json.loads` (``object_pairs_hook``, ...).

    Returns
    -------
    object
        The parsed value. Integers stay :class:`int` (exact); a reader checks
        their range (an integer beyond the float range is not a finite number).

    Raises
    ------
    json.JSONDecodeError
        As :func:`json.loads` raises it, and for an integer literal of more
        than :func:`max_int_digits` digits, at its line and column, the
        message giving its length and the limit.

    Examples
    --------
    >>> loads('{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> loads('{"a": 1,\\n "b": 1e400}', finite=True)
    Traceback (most recent call last):
    ...
    json.decoder.JSONDecodeError: 1e400 is no finite number (JSON has none): line 2 column 7 (char 15)
    >>> loads('{"a": "12",\\n "b": ' + "9" * 5000 + "}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    json.decoder.JSONDecodeError: an integer of 5,000 digits (at most 4,300 are read): line 2 column 7 ...
    """
    if finite:
        kwargs.update(parse_constant=_constant, parse_float=_finite_float)
    try:
        return json.loads(text, **kwargs)
    except _NotFinite as err:
        pos = _literal(text, err.literal)
        raise json.JSONDecodeError(f"{err.literal} is no finite number (JSON has none)", text, pos) from None
    except ValueError as err:
        if type(err) is not ValueError:  # a JSONDecodeError, or a hook's own error: as it is
            raise
        found = _long_integer(text)
        if found is None:
            raise
        pos, digits = found
        limit = max_int_digits()
        raise json.JSONDecodeError(
            f"an integer of {digits:,} digits (at most {limit:,} are read)", text, pos
        ) from None


def _long_integer(text: str) -> tuple[int, int] | None:
    """Where the first integer literal of more than :func:`max_int_digits` digits starts, and its digits.

    Strings are skipped (a long run of digits in a string is read as text), and
    so are a number's fraction and exponent (a float has no digit limit).
    """
    limit = max_int_digits()
    if limit <= 0:
        return None
    digits = "[0-9]{" + str(limit + 1) + ",}"
    pattern = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![0-9.eE+-])-?(' + digits + r")(?![0-9.eE])")
    for m in pattern.finditer(text):
        if m.group(1) is not None:
            return m.start(), len(m.group(1))
    return None


def _literal(text: str, literal: str) -> int:
    """Where the first number or constant ``literal`` outside strings starts (0 if none is found)."""
    token = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN|-?[0-9][0-9.eE+-]*')
    for m in token.finditer(text):
        if m.group() == literal:
            return m.start()
    return 0
