"""Shared parsing and formatting helpers of the distributions package (private to it)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import MAX_SAMPLES
from queuesgd.errors import InvalidParameterError
from queuesgd.units import parse_seconds


def size_of(size: Any) -> tuple[int, ...] | None:
    """The shape ``size`` asks of ``sample``: at most :data:`~queuesgd.batchmeans.MAX_SAMPLES` draws in all
    (1 GiB of doubles, the most one simulation holds), refused before anything is allocated."""
    accepted = (
        f"None, an integer >= 0 or a tuple of integers >= 0, at most {MAX_SAMPLES:,} draws in all "
        "(1 GiB of doubles)"
    )
    if size is None:
        return None
    dims = size if isinstance(size, tuple) else (size,)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or not 0 <= int(d) <= MAX_SAMPLES:
            raise InvalidParameterError("size", size, accepted)
        out.append(int(d))
    if math.prod(out) > MAX_SAMPLES:
        raise InvalidParameterError("size", size, accepted)
    return tuple(out)


def is_sympy(value: Any) -> bool:
    return type(value).__module__.startswith("sympy")


def time_value(field: str, value: Any, *, symbolic: bool = False, allow_zero: bool = False) -> Any:
    """A positive duration: a number, a unit string ("2ms") or (if allowed) a SymPy expression."""
    if isinstance(value, str):
        value = parse_seconds(value, field)
    return _checks.positive(field, value, symbolic=symbolic, allow_zero=allow_zero)


def real_value(field: str, value: Any, *, time: bool = False) -> float:
    """A finite real number (may be negative); a unit string if ``time``."""
    if time and isinstance(value, str):
        return parse_seconds(value, field)
    return _checks.real(field, value)


def vector_value(field: str, value: Any, *, min_len: int = 1) -> np.ndarray:
    """A 1-D float array of finite numbers (strings, bytes and 10**400 refused, not converted)."""
    arr = _checks.reals(field, value, accepted="a sequence of finite numbers")
    if arr.ndim != 1 or arr.size < min_len or not np.all(np.isfinite(arr)):
        raise InvalidParameterError(field, value, f"a 1-D sequence of at least {min_len} finite numbers")
    return arr


def frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, dtype=float)
    arr.flags.writeable = False
    return arr


def fmt(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return repr(value.tolist())
    if is_sympy(value):
        return str(value)
    return repr(value)


def construct(cls: type, params: dict[str, Any]) -> Any:
    """Rebuild a law from its class and parameters (what pickling calls)."""
    return cls(**params)


def sample_exponential_mixture(gen: np.random.Generator, total: int, probs: np.ndarray, rates: np.ndarray):
    idx = gen.choice(probs.size, size=total, p=probs)
    return gen.exponential(size=total) / rates[idx]
