"""Arguments that are lists: one rule for what a sequence is, so that a 0-d array or a string is refused.

``isinstance(np.array(3), np.ndarray)`` holds, but a 0-d array cannot be iterated (``TypeError:
iteration over a 0-d array``), and a string is a ``Sequence`` of its characters. :func:`items` reads
the sequence arguments of the constructors (``Cluster.speeds``, ``CostCurve.sizes``) and
:func:`one_dimensional` is the array rule it shares with :func:`queuesgd._checks.integers`.

Examples
--------
>>> import numpy as np
>>> items("speeds", np.array([1.0, 0.5]), "speed factors")
[1.0, 0.5]
>>> items("speeds", np.array(3), "speed factors")
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: speeds: got array(3); accepted: speed factors (a one-dimensional array)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError

__all__ = ["items", "one_dimensional"]


def one_dimensional(field: str, value: Any, accepted: str) -> None:
    """Refuse a NumPy array of other than one dimension (a 0-d array is no sequence); others pass.

    Examples
    --------
    >>> import numpy as np
    >>> one_dimensional("sizes", np.zeros(3), "sizes"), one_dimensional("sizes", [1, 2], "sizes")
    (None, None)
    >>> one_dimensional("sizes", np.zeros((2, 2)), "sizes")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: sizes: got array(...); accepted: sizes (a one-dimensional array)
    """
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise InvalidParameterError(field, value, f"{accepted} (a one-dimensional array)")


def items(field: str, value: Any, accepted: str) -> list[Any]:
    """The items of ``value`` if it is a sequence: a list, a tuple, a ``range``, a 1-d NumPy array.

    Refused with :class:`~queuesgd.errors.InvalidParameterError` naming
    ``field`` and saying ``accepted``: a 0-d or a 2-d array, a string or
    bytes (not read one character at a time), a mapping, a set, an iterator
    (read once, it would be gone), ``None`` and a number. The items are
    returned as they are (an array's as Python scalars), for the caller to check.

    Examples
    --------
    >>> items("sizes", (0, 100), "sizes in bytes"), items("sizes", range(2), "sizes in bytes")
    ([0, 100], [0, 1])
    >>> items("sizes", "0,100", "sizes in bytes")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: sizes: got '0,100'; accepted: sizes in bytes
    """
    one_dimensional(field, value, accepted)
    if isinstance(value, np.ndarray):
        return value.tolist()  # NumPy scalars as Python numbers
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise InvalidParameterError(field, value, accepted)
    return list(value)
