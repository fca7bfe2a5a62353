"""Validation of :class:`~queuesgd.hybrid_space.HybridSpace`'s axes, each refused as ``HybridSpace.<axis>``.

The helpers :class:`~queuesgd.hybrid_space.HybridSpace` uses to read the
values tried on each axis (a tuple of integers, of named choices, of
booleans) and to check its mixture of experts by ``HybridParallel``'s rules.

Examples
--------
>>> boolean_axis("HybridSpace.zero_overlap", [True, False, True])
(True, False)
>>> boolean_axis("HybridSpace.zero_overlap", ("yes",))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: HybridSpace.zero_overlap: got ('yes',); accepted: a non-empty tuple ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.mixture_checks import capacity_factor, mixture
from queuesgd.name_checks import name_choice, name_key

__all__ = ["axis", "bool_or", "boolean_axis", "check_experts", "choices", "divisors"]

def bool_or(x: Any, names: tuple[str, ...]) -> bool:
    """Whether ``x`` is a boolean or one of ``names`` (:func:`~queuesgd.name_checks.name_key`: any case)."""
    return isinstance(x, (bool, np.bool_)) or (isinstance(x, str) and name_key(x) in names)


def axis(field: str, value: Any) -> tuple[int, ...] | None:
    """An axis of positive integers without repeats, or None (every value that applies)."""
    if value is None:
        return None
    return tuple(dict.fromkeys(_checks.integers(field, value, maximum=_checks.MAX_COUNT)))


def choices(field: str, value: Any, accepted: tuple[Any, ...], describe: str) -> tuple[Any, ...]:
    """A non-empty tuple of ``accepted`` values, no repeats, each refused as ``field[i]``.

    Names are read as :class:`~queuesgd.HybridParallel` reads them
    (:func:`~queuesgd.name_checks.name_choice`: any case, ``"none"`` for
    None); integers (ZeRO stages) as :func:`queuesgd._checks.integer` reads
    them: no bool (NumPy's neither), no array.

    Examples
    --------
    >>> choices("HybridSpace.schedule", ["GPipe", " 1F1B"], ("1f1b", "gpipe"), "'1f1b' or 'gpipe'")
    ('gpipe', '1f1b')
    >>> choices("HybridSpace.zero", (np.int64(3), 1.0), (0, 1, 2, 3), "ZeRO stages 0 to 3")
    (3, 1)
    >>> choices("HybridSpace.zero", (np.bool_(True),), (0, 1, 2, 3), "ZeRO stages 0 to 3")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridSpace.zero[0]: got np.True_; accepted: ZeRO stages 0 to 3
    """
    if isinstance(value, (str, bytes)) or value is None or not isinstance(value, (tuple, list)) or not value:
        raise InvalidParameterError(field, value, f"a non-empty tuple of {describe}")
    named = any(isinstance(a, str) for a in accepted)
    out = []
    for i, v in enumerate(value):
        try:
            if named:
                out.append(name_choice(f"{field}[{i}]", v, accepted))
            else:
                out.append(_checks.integer(f"{field}[{i}]", v, minimum=min(accepted), maximum=max(accepted)))
        except InvalidParameterError:
            raise InvalidParameterError(f"{field}[{i}]", v, describe) from None
    return tuple(dict.fromkeys(out))


def boolean_axis(field: str, value: Any) -> tuple[bool, ...]:
    """A non-empty tuple (or list) of True/False, without repeats."""
    if isinstance(value, (tuple, list)) and value and all(isinstance(x, (bool, np.bool_)) for x in value):
        return tuple(dict.fromkeys(bool(x) for x in value))
    raise InvalidParameterError(field, value, "a non-empty tuple of True/False")


def divisors(x: int) -> list[int]:
    """The divisors of ``x``, ascending."""
    small = [i for i in range(1, int(x**0.5) + 1) if x % i == 0]
    return sorted(set(small) | {x // i for i in small})


def check_experts(space: Any) -> None:
    """The experts of ``space`` by ``HybridParallel``'s rules (``check_experts``), as ``HybridSpace.*``."""
    set_ = object.__setattr__
    n = "HybridSpace"
    set_(space, "capacity_factor", capacity_factor(f"{n}.capacity_factor", space.capacity_factor))
    set_(space, "top_k", _checks.integer(f"{n}.top_k", space.top_k, maximum=_checks.MAX_COUNT))
    if space.experts is None:
        for f, default in (("capacity_factor", 1.0), ("top_k", 1)):
            if getattr(space, f) != default:
                raise InvalidParameterError(
                    f"{n}.{f}", getattr(space, f), f"{default} without experts= (a dense model)"
                )
        if space.expert_parallel not in (None, (1,)):
            raise InvalidParameterError(
                f"{n}.expert_parallel",
                space.expert_parallel,
                "None or (1,) without experts= (a dense model)",
            )
        return
    ranks = [(f"{n}.expert_parallel[{i}]", e) for i, e in enumerate(space.expert_parallel or ())]
    E, _, _ = mixture((f"{n}.experts", space.experts), ranks, (f"{n}.top_k", space.top_k))
    set_(space, "experts", E)
