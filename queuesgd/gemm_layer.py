"""The products of a transformer layer that GEMM tables measure, and a row's labels checked against them.

A measured GEMM table (:mod:`queuesgd.gemm_table`) times, per hidden size
``h`` and tensor-parallel degree ``tp``, the four products of a layer in
Megatron's layout (Shoeybi et al. 2019): the column-parallel ``qkv`` and
``fc1`` split ``N``, the row-parallel ``proj`` and ``fc2`` split ``K``.
:func:`queuesgd.gemm_probe.probe_gemm` and ``shared/data/gpu/measure_gemm.py``
write each row with its labels ``op``, ``h`` and ``tp`` beside its shape
``M``, ``K``, ``N``. The table is read by shape alone (its volume ``M N K``);
:func:`check_row_labels` refuses a row whose labels say another shape than
its own, so that a row edited or written wrong is not read silently.

Examples
--------
>>> layer_products(1024, 4)["fc2"]      # (K, N) = (4h/tp, h)
(1024, 1024)
>>> check_row_labels("gemm[0]", {"op": "qkv", "h": 1024, "tp": 2}, 1024, 1536)
>>> check_row_labels("gemm[0]", {"op": "qkv", "h": 1024, "tp": 4}, 1024, 1536)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: gemm[0].tp: got 4; accepted: 2, as qkv has K = h, N = 3h/tp ...
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["LAYER_PRODUCTS", "check_row_labels", "layer_products"]

#: Each product's dimension split over the ``tp`` ranks and its factor (``N = 3h/tp`` for ``qkv``); its
#: other dimension is ``h``.
LAYER_PRODUCTS: dict[str, tuple[str, int]] = {
    "qkv": ("N", 3), "proj": ("K", 1), "fc1": ("N", 4), "fc2": ("K", 4),
}  # fmt: skip


def layer_products(h: int, tp: int) -> dict[str, tuple[int, int]]:
    """``(K, N)`` of each product of a layer of hidden size ``h`` on one of ``tp`` ranks.

    Examples
    --------
    >>> layer_products(1024, 2)
    {'qkv': (1024, 1536), 'proj': (512, 1024), 'fc1': (1024, 2048), 'fc2': (2048, 1024)}
    """
    out = {}
    for op, (split, factor) in LAYER_PRODUCTS.items():
        part = factor * h // tp
        out[op] = (part, h) if split == "K" else (h, part)
    return out


def check_row_labels(name: str, row: Mapping[str, Any], k: int, n: int) -> None:
    """Refuse a GEMM row (``name``) whose labels ``op``, ``h``, ``tp`` disagree with its shape ``K``, ``N``.

    Each label is optional. ``op`` is a non-empty string; ``h`` and ``tp``
    are integers >= 1, ``tp`` a divisor of ``h``. For a product of the layer
    (``op`` one of :data:`LAYER_PRODUCTS`) they must also be the shape's:
    ``h`` its unsplit dimension (``K`` of ``qkv`` and ``fc1``, ``N`` of
    ``proj`` and ``fc2``), ``tp`` what divides the split one (``N = 3h/tp`` of
    ``qkv``). Another ``op``'s ``h`` and ``tp`` are labels only: checked as
    integers, not against the shape.

    Examples
    --------
    >>> check_row_labels("gemm[3]", {"op": "fc2", "h": 1024, "tp": 8}, 512, 1024)
    >>> check_row_labels("gemm[3]", {"op": "fc2", "h": 2048, "tp": 8}, 512, 1024)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: gemm[3].h: got 2048; accepted: 1024, as fc2 has N = h, ...
    """
    op = row.get("op")
    if "op" in row and (not isinstance(op, str) or not op.strip()):
        raise InvalidParameterError(f"{name}.op", op, f"the product's name, e.g. {', '.join(LAYER_PRODUCTS)}")
    h = _checks.integer(f"{name}.h", row["h"]) if "h" in row else None
    tp = _checks.integer(f"{name}.tp", row["tp"]) if "tp" in row else None
    if h is not None and tp is not None and h % tp:
        raise InvalidParameterError(f"{name}.tp", row["tp"], f"a divisor of the row's h ({h})")
    if op not in LAYER_PRODUCTS:
        return
    split, factor = LAYER_PRODUCTS[op]
    whole = "N" if split == "K" else "K"
    shape = {"K": k, "N": n}
    says = (
        f"{op} has {whole} = h, {split} = {factor if factor > 1 else ''}h/tp "
        f"(the row's K = {k}, N = {n})"
    )
    if h is not None and h != shape[whole]:
        raise InvalidParameterError(f"{name}.h", row["h"], f"{shape[whole]}, as {says}")
    own = Fraction(factor * shape[whole], shape[split])
    if tp is not None and own != tp:
        accepted = f"{own}, as {says}" if own.denominator == 1 else f"none: {says}; no integer tp gives it"
        raise InvalidParameterError(f"{name}.tp", row["tp"], accepted)
