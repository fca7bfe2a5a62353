"""Rates and weights of transitions: positive numbers, or SymPy expressions in positive symbols.

Every symbol in a rate or weight stands for a positive quantity (a rate, a
time, a count). A symbol declared without assumptions (``Symbol("x")``) is
therefore read as positive when the sign of the expression is checked, so
``-x`` and ``-2*x/y`` are refused although SymPy alone cannot tell their sign;
a symbol declared non-positive (``negative=True``, ``nonpositive=True``) is
refused outright. An expression whose sign SymPy cannot decide even then
(``x - y``) is accepted: it is positive for some values of its symbols.

Examples
--------
>>> import sympy
>>> x = sympy.Symbol("x")
>>> positive_rate("rate", 2 * x)
2*x
>>> positive_rate("rate", -x)
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: rate: got -x; accepted: a number > 0, or a SymPy expression > 0 ...
"""

from __future__ import annotations

from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["positive_rate"]


def positive_rate(field: str, value: Any) -> Any:
    """``value`` if it is a valid rate or weight (see the module), else an error naming ``field``.

    Numbers are returned as floats (SymPy numbers unchanged), expressions
    unchanged.

    Examples
    --------
    >>> positive_rate("weight", 0.5)
    0.5
    """
    value = _checks.positive(field, value, symbolic=True)
    if not _checks.is_symbolic(value):
        return value
    import sympy

    free = sorted(value.free_symbols, key=lambda s: s.name)
    declared = [s for s in free if s.is_positive is False]
    if declared:
        raise InvalidParameterError(
            field, value, f"SymPy symbols that may be positive ({declared[0]} is declared non-positive)"
        )
    as_positive = value.xreplace(
        {s: sympy.Dummy(s.name, positive=True) for s in free if s.is_positive is not True}
    )
    if as_positive.is_nonpositive:
        raise InvalidParameterError(
            field,
            value,
            "a number > 0, or a SymPy expression > 0 for some positive values of its symbols "
            "(every symbol stands for a positive quantity; this one is <= 0 for all of them)",
        )
    return value
