"""Randomness: every random function of queuesgd takes a Generator or a seed, never global state.

Examples
--------
>>> import numpy as np
>>> g = as_generator(7)
>>> isinstance(g, np.random.Generator), as_generator(g) is g
(True, True)
>>> as_generator(None)                     # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: rng: got None; accepted: a numpy.random.Generator ...
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError

__all__ = ["as_generator"]


def as_generator(rng: Any, field: str = "rng") -> np.random.Generator:
    """A :class:`numpy.random.Generator` from a Generator or an integer seed ``>= 0``.

    Anything else (``None`` included) is refused with
    :class:`~queuesgd.errors.InvalidParameterError` naming ``field``:
    queuesgd never falls back to global random state.

    Examples
    --------
    >>> float(as_generator(0).random()) == float(np.random.default_rng(0).random())
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and int(rng) >= 0:
        return np.random.default_rng(int(rng))
    raise InvalidParameterError(
        field,
        rng,
        "a numpy.random.Generator (e.g. numpy.random.default_rng(0)) or an integer seed >= 0; "
        "queuesgd never uses global random state",
    )
