"""A pipeline's units and splits: how a sequential harness model is cut into stages.

A *unit* is a child of the model that holds parameters, together with the
parameter-free children that follow it (:func:`model_units`); a *split* is
``S`` unit counts in forward order (:func:`check_split`), by default the one
that balances the stages' profiled times (:func:`balanced_split`).

Examples
--------
>>> balanced_split([1.0, 1.0, 4.0, 1.0, 1.0], 3), check_split((2, 1), 2, 3)
([2, 1, 2], [2, 1])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["SCHEDULES", "SEQUENTIAL_MODELS", "balanced_split", "check_split", "model_units", "unit_count"]

#: The pipeline schedules the harness runs, by name.
SCHEDULES = ("1f1b", "gpipe")


#: The harness models whose forward pass is their children in order, so that they cut into pipeline units
#: (the transformer encoder averages over the sequence between its blocks and its head: it does not).
SEQUENTIAL_MODELS = ("mlp", "cnn", "resnet18s")


def model_units(net: Any) -> list[tuple[str, list[Any]]]:
    """The units of a sequential model: each child with parameters and the parameter-free ones after it.

    A leading run of parameter-free children joins the first unit. The unit's
    name is its first child's.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.models import cnn
    >>> [(name, len(mods)) for name, mods in model_units(cnn(28, 32, 10))]
    [('0', 3), ('3', 4), ('7', 2), ('9', 1)]
    """
    units: list[tuple[str, list[Any]]] = []
    pending: list[tuple[str, Any]] = []
    for name, mod in net.named_children():
        if any(True for _ in mod.parameters()):
            if pending:  # parameter-free children before the first unit join it
                units.append((pending[0][0], [m for _, m in pending] + [mod]))
                pending = []
            else:
                units.append((name, [mod]))
        elif units:
            units[-1][1].append(mod)
        else:
            pending.append((name, mod))
    if not units:
        raise InvalidParameterError("model", type(net).__name__, "a sequential model with parameters")
    return units


def check_split(split: Sequence[int], stages: int, units: int) -> list[int]:
    """``split`` as a list of ``stages`` positive unit counts summing to ``units``.

    Examples
    --------
    >>> check_split([2, 2], 2, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: split: got [2, 2]; accepted: 2 unit counts >= 1 (forward ...
    """
    accepted = f"{stages} unit counts >= 1 (forward order) summing to the model's {units} units"
    try:
        out = [int(k) for k in split]
    except (TypeError, ValueError):
        raise InvalidParameterError("split", split, accepted) from None
    if len(out) != stages or any(k < 1 for k in out) or sum(out) != units:
        raise InvalidParameterError("split", split, accepted)
    return out


def balanced_split(times: Sequence[float], stages: int) -> list[int]:
    """The contiguous split of units into ``stages`` that minimizes the slowest stage's total time.

    Exact: dynamic programming over prefix sums (``O(stages x units^2)``);
    among equal optima, the one with the most units in the earlier stages.

    Parameters
    ----------
    times : sequence of float
        Each unit's forward + backward time (forward order).
    stages : int
        Number of stages (at most the number of units).

    Examples
    --------
    >>> balanced_split([1.0, 1.0, 4.0, 1.0, 1.0], 3)     # stages of 2, 4 and 2 seconds
    [2, 1, 2]
    >>> balanced_split([1.0, 2.0], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: stages: got 3; accepted: an integer from 1 to the 2 units
    """
    t = np.asarray([float(x) for x in times], dtype=float)
    if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise InvalidParameterError("times", list(times), "finite unit times >= 0")
    n = t.size
    s = _checks.integer("stages", stages)
    if s > n:
        raise InvalidParameterError("stages", stages, f"an integer from 1 to the {n} units")
    prefix = np.concatenate([[0.0], np.cumsum(t)])
    inf = float("inf")
    # best[k][j]: the smallest max-stage time of the first j units in k stages; cut[k][j]: last stage start.
    best = [[inf] * (n + 1) for _ in range(s + 1)]
    cut = [[0] * (n + 1) for _ in range(s + 1)]
    best[0][0] = 0.0
    for k in range(1, s + 1):
        for j in range(k, n - (s - k) + 1):
            for i in range(j - 1, k - 2, -1):  # the last stage holds units i .. j-1
                value = max(best[k - 1][i], prefix[j] - prefix[i])
                if value < best[k][j] - 1e-15 * max(1.0, value):
                    best[k][j], cut[k][j] = value, i
    out, j = [], n
    for k in range(s, 0, -1):
        i = cut[k][j]
        out.append(j - i)
        j = i
    return out[::-1]


def unit_count(kind: str, model_options: Mapping[str, Any] | None) -> int:
    """Units of a harness model (built on the meta device: no weights are allocated).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> unit_count("cnn", None), unit_count("mlp", {"hidden": 8})
    (4, 3)
    """
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.models import build

    torch = require_torch()
    with torch.device("meta"):
        net, _ = build(kind, **dict(model_options or {}))
    return len(model_units(net))
