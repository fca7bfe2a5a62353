"""The rules of a mixture of experts, checked once for every place that takes one.

A mixture of ``E`` experts, each token routed to ``top_k`` of them, the
experts split over ``e`` expert-parallel ranks, each expert's buffer padded to
``capacity_factor`` times its even share (GShard, Switch Transformer). Three
places take one, each under its own field names:
:class:`~queuesgd.schemes.parallel.hybrid.HybridParallel` (``experts``,
``expert_parallel``, ``capacity_factor``, ``top_k``),
:class:`~queuesgd.hybrid_space.HybridSpace` (several ``expert_parallel``
values to try) and the compute model's ``experts=(E, e, capacity_factor,
top_k)`` tuple. The rules are the same: ``E``, each ``e`` and ``top_k`` are
integers >= 1, each ``e`` divides ``E``, ``top_k <= E``, and the capacity
factor is a finite number > 0, at most :data:`MAX_CAPACITY_FACTOR`.

Examples
--------
>>> mixture(("experts", 8), [("expert_parallel", 2)], ("top_k", 2))
(8, (2,), 2)
>>> mixture(("experts", 8), [("expert_parallel", 3)], ("top_k", 2))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: expert_parallel: got 3; accepted: a divisor of the 8 experts
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["MAX_CAPACITY_FACTOR", "capacity_factor", "mixture"]

#: Most a capacity factor may be (GShard and Switch use 1 to 2; ``E / k`` already keeps every token).
MAX_CAPACITY_FACTOR = 1000.0


def capacity_factor(field: str, value: Any) -> float:
    """``value`` as a capacity factor: a finite number > 0, at most :data:`MAX_CAPACITY_FACTOR`.

    Examples
    --------
    >>> capacity_factor("capacity_factor", 1.25)
    1.25
    >>> capacity_factor("capacity_factor", "1.25")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: capacity_factor: got '1.25'; accepted: a finite number > 0, ...
    """
    return _checks.positive(field, value, maximum=MAX_CAPACITY_FACTOR)


def mixture(
    experts: tuple[str, Any],
    ranks: Iterable[tuple[str, Any]],
    top_k: tuple[str, Any],
    *,
    of: str = "",
) -> tuple[int, tuple[int, ...], int]:
    """The expert count, each expert-parallel count and ``top_k``, checked together.

    Parameters
    ----------
    experts, top_k : (str, value)
        Each field's name, as an error names it, and its value.
    ranks : iterable of (str, value)
        Each expert-parallel count to check, with its field's name.
    of : str
        Appended to the experts a message cites (``" (experts[0])"``: which field holds them).

    Returns
    -------
    tuple
        ``(E, (e, ...), top_k)`` as integers.

    Examples
    --------
    >>> mixture(("experts", 4), [], ("top_k", 5), of=" (experts[0])")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: top_k: got 5; accepted: at most the 4 experts (experts[0])
    """
    E = _checks.integer(experts[0], experts[1], maximum=_checks.MAX_COUNT)
    checked = []
    for field, value in ranks:
        e = _checks.integer(field, value, maximum=_checks.MAX_COUNT)
        if E % e:
            raise InvalidParameterError(field, value, f"a divisor of the {E} experts{of}")
        checked.append(e)
    k = _checks.integer(top_k[0], top_k[1], maximum=_checks.MAX_COUNT)
    if k > E:
        raise InvalidParameterError(top_k[0], top_k[1], f"at most the {E} experts{of}")
    return E, tuple(checked), k
