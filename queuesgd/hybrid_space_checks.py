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

import math
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.mixture_checks import capacity_factor, mixture
from queuesgd.name_checks import name_choice, name_key

__all__ = [
    "MAX_GLOBAL_BATCH",
    "axis",
    "bool_or",
    "boolean_axis",
    "check_experts",
    "choices",
    "divisors",
    "global_batch_value",
    "memory_limit_bytes",
    "microbatch_workloads",
]

#: Largest global batch the planners take, samples per step: ``10**9``, far above any published batch
#: (Megatron-LM's and Llama 3's are a few thousand sequences, Llama 3's 16M tokens), and small enough
#: that its divisors (the micro-batch sizes ``b``, at most 1,344 of them) take 31,623 trial divisions
#: and the hybrid space over them stays under a million rows.
MAX_GLOBAL_BATCH = 10**9


def global_batch_value(value: Any) -> int:
    """``global_batch`` as an int from 1 to :data:`MAX_GLOBAL_BATCH`, refused naming ``global_batch``.

    Examples
    --------
    >>> global_batch_value(512.0)
    512
    >>> global_batch_value(2**63)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: global_batch: got 9223372036854775808; accepted: an integer >= 1...
    """
    return _checks.integer("global_batch", value, maximum=MAX_GLOBAL_BATCH)


def memory_limit_bytes(memory_limit: Any) -> float:
    """A memory limit in bytes per GPU, > 0 (a number or a unit string); the planners' one reading.

    Examples
    --------
    >>> memory_limit_bytes("80GB")
    80000000000.0
    >>> memory_limit_bytes(0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: memory_limit: got 0; accepted: bytes per GPU > 0, e.g. ...
    """
    accepted = "bytes per GPU > 0, e.g. 80e9 or '80GB'"
    if memory_limit is None or isinstance(memory_limit, bool):
        raise InvalidParameterError("memory_limit", memory_limit, accepted)
    try:
        cap = float(units.parse_bytes(memory_limit, "memory_limit"))
    except InvalidParameterError:  # the parser's own "bytes >= 0": one message for every refusal
        raise InvalidParameterError("memory_limit", memory_limit, accepted) from None
    if not cap > 0:
        raise InvalidParameterError("memory_limit", memory_limit, accepted)
    return cap


def microbatch_workloads(
    shape: Any, sizes: list[int], *, flops: Any, compute: Any
) -> tuple[dict[int, Any], list[int], str]:
    """Each micro-batch size's workload (``sizes`` ascending); the sizes too large for a workload.

    The smallest size's workload is built as it is, so a bad ``flops`` or
    ``compute`` is refused naming it. What a larger size adds is only a
    longer time: where a layer's or the step's compute would pass
    ``units.MAX_SECONDS`` (which :class:`~queuesgd.workload.Workload`
    refuses), that size and every row with it are left out. Returns the
    workloads, the sizes left out and the note that says so ("" if none).

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> w, out, note = microbatch_workloads(GPT3_XL, [1, 10**10], flops=125e12, compute=None)
    >>> sorted(w), out
    ([1], [10000000000])
    >>> note  # doctest: +ELLIPSIS
    "microbatch 10,000,000,000: left out, one micro-batch's compute (a layer's or the step's) above 1e+09..."
    """
    workloads, over = {}, []
    for i, b in enumerate(sizes):
        try:
            workloads[b] = shape.workload(b, flops=flops, compute=compute)
        except InvalidParameterError:
            if i == 0:  # not the size: the rate, the compute model
                raise
            over.append(b)
    if not over:
        return workloads, over, ""
    more = f" and {len(over) - 1:,} larger" if len(over) > 1 else ""
    why = f"one micro-batch's compute (a layer's or the step's) above {units.MAX_SECONDS:g} s"
    return workloads, over, f"microbatch {over[0]:,}{more}: left out, {why}, more than a Workload takes"


def bool_or(x: Any, names: tuple[str, ...]) -> bool:
    """Whether ``x`` is a boolean or one of ``names`` (:func:`~queuesgd.name_checks.name_key`: any case)."""
    return isinstance(x, (bool, np.bool_)) or (isinstance(x, str) and name_key(x) in names)


def axis(field: str, value: Any, minimum: int = 1) -> tuple[int, ...] | None:
    """An axis of integers >= ``minimum`` without repeats, or None (every value that applies)."""
    if value is None:
        return None
    return tuple(dict.fromkeys(_checks.integers(field, value, minimum=minimum, maximum=_checks.MAX_COUNT)))


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
    """The divisors of ``x`` (an int >= 1), ascending: ``isqrt(x)`` trial divisions.

    Examples
    --------
    >>> divisors(12), divisors(999_999_937)                   # the largest prime below 10**9
    ([1, 2, 3, 4, 6, 12], [1, 999999937])
    """
    small = [i for i in range(1, math.isqrt(x) + 1) if x % i == 0]
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
