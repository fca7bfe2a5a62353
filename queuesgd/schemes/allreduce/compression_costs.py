"""What gradient compression sends and what it costs: bytes on the wire, collective terms, seconds.

The sizes and costs of :class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce`,
as functions of the scheme (its ``compressor``, ``density`` and ``rank``);
the scheme's methods and the breakeven (:mod:`~.compression_breakeven`,
:mod:`~.compression_formula`) read them here. The model they implement is
described in :mod:`queuesgd.schemes.allreduce.compression`.

- :func:`wire_bytes` and :func:`closed_wire` -- bytes one worker puts into
  the first and second collective of a message (of the whole gradient);
- :func:`collective_terms` -- the compressed collective's bytes over ``B``
  and latency seconds (numbers, arrays or SymPy), no reductions;
  :func:`symbolic_wire` its sizes in SymPy;
- :func:`collective_costs` -- seconds of each message's collective with
  the ring's reductions (the fine model);
- :func:`cost_field` and :func:`apply_cost` -- a compression cost as a
  field (seconds per byte or a CostCurve) and its seconds for some bytes.

Examples
--------
>>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
>>> s = CompressedAllReduce("fp16")
>>> first, second = wire_bytes(s, [4e6])
>>> first, second, collective_terms(s, 4, 0.5, first, second, False)   # 2 (n-1)/n x 2 MB; 2 (n-1) alpha
(2000000.0, 0.0, (3000000.0, 3.0))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.fine.fine import ring_message_costs
from queuesgd.workload import CostCurve

if TYPE_CHECKING:
    from queuesgd.schemes.allreduce.compressed_allreduce import CompressedAllReduce
    from queuesgd.workload import Workload

__all__ = [
    "FP32",
    "METHODS",
    "apply_cost",
    "closed_wire",
    "collective_costs",
    "collective_terms",
    "cost_field",
    "symbolic_wire",
    "wire_bytes",
]

#: The compression methods (``CompressedAllReduce.compressor``).
METHODS: tuple[str, ...] = ("topk", "powersgd", "fp16")
#: Bytes of one fp32 gradient element.
FP32 = 4.0


def cost_field(field: str, value: Any) -> float | CostCurve:
    """A compression cost field: seconds per uncompressed byte (0 to ``units.MAX_SECONDS``), or a CostCurve.

    Parameters
    ----------
    field : str
        The field's name, for the error message.
    value : float, str or CostCurve
        A number or unit string (``"1ns"``), or a
        :class:`~queuesgd.workload.CostCurve` of seconds against uncompressed
        bytes (passed through).

    Returns
    -------
    float or CostCurve

    Examples
    --------
    >>> cost_field("compress_time", "1ns")
    1e-09
    """
    if isinstance(value, CostCurve):
        return value
    accepted = (
        f"seconds per byte of uncompressed gradient from 0 to {units.MAX_SECONDS:g} (a number or a unit "
        "string such as '1ns'), or a queuesgd.workload.CostCurve of seconds against uncompressed bytes"
    )
    try:
        return _checks.duration(field, value, per="byte")
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None


def apply_cost(cost: float | CostCurve, nbytes: Any) -> Any:
    """Seconds of ``cost`` (a per-byte rate or a curve) for ``nbytes`` uncompressed bytes (array-friendly).

    Examples
    --------
    >>> apply_cost(1e-9, 4e6), apply_cost(CostCurve([0, 100], [1.0, 3.0]), 50)
    (0.004, 2.0)
    """
    if isinstance(cost, CostCurve):
        return cost(np.asarray(nbytes, dtype=float)) if np.ndim(nbytes) else cost(float(nbytes))
    return cost * nbytes


def wire_bytes(scheme: CompressedAllReduce, tensor_bytes: Sequence[float]) -> tuple[float, float]:
    """Bytes one worker puts into the first and second collective of a message of these tensors.

    :meth:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce.wire_bytes`
    (which documents the sizes).

    Examples
    --------
    >>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
    >>> wire_bytes(CompressedAllReduce("topk", density=0.01), [4e6])
    (80000.0, 0.0)
    """
    s = np.asarray(tensor_bytes, dtype=float)
    total = float(s.sum())
    if scheme.compressor == "topk":
        return 2.0 * scheme.density * total, 0.0
    if scheme.compressor == "fp16":
        return total / 2.0, 0.0
    elements = s / FP32
    factor = scheme.rank * np.sqrt(elements)  # elements of P (= of Q) for a square matrix
    compress = 2.0 * factor < elements
    factors = float(np.sum(np.where(compress, factor * FP32, 0.0)))
    raw = float(np.sum(np.where(compress, 0.0, s)))
    return factors + raw, factors


def closed_wire(scheme: CompressedAllReduce, workload: Workload) -> tuple[float, float]:
    """:func:`wire_bytes` of the whole gradient as one message (per tensor where there are layers).

    Examples
    --------
    >>> from queuesgd import Workload
    >>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
    >>> closed_wire(CompressedAllReduce("fp16"), Workload(0.1, "8MB"))
    (4000000.0, 0.0)
    """
    tensors = [x.gradient_bytes for x in workload.layers] if workload.layers else [workload.gradient_bytes]
    return wire_bytes(scheme, tensors)


def collective_terms(
    scheme: CompressedAllReduce, n: Any, latency: Any, first: Any, second: Any, symbolic: bool
) -> tuple[Any, Any]:
    """``(bytes over B, latency seconds)`` of the compressed collective (numbers, arrays or SymPy).

    Top-k: a ring all-gather of ``first`` bytes per rank, ``(n-1)`` steps;
    fp16: a ring all-reduce of ``first`` bytes; PowerSGD: ring all-reduces
    of ``first`` (the ``P``) then of ``second`` (the ``Q``, only where a
    tensor was compressed, always in SymPy). No reduction cost.

    Examples
    --------
    >>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
    >>> collective_terms(CompressedAllReduce("topk"), 4, 0.5, 8e4, 0.0, False)    # (n-1) steps of 8e4 B
    (240000.0, 1.5)
    """
    if scheme.compressor == "topk":  # ring all-gather of 2dS bytes per rank: (n-1) steps
        return (n - 1) * first, (n - 1) * latency
    if scheme.compressor == "fp16":
        return 2 * (n - 1) / n * first, 2 * (n - 1) * latency
    reduces = 2 if symbolic or second > 0 else 1  # P then Q; Q only where a tensor was compressed
    return 2 * (n - 1) / n * (first + second), reduces * 2 * (n - 1) * latency


def symbolic_wire(scheme: CompressedAllReduce, syms: dict[str, Any], size: Any) -> tuple[Any, Any]:
    """:func:`wire_bytes` in SymPy: ``size`` bytes as one tensor (for PowerSGD one square matrix).

    ``syms`` holds the symbols ``d`` (density) and ``r`` (rank).

    Examples
    --------
    >>> import sympy
    >>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
    >>> S, r = sympy.symbols("S r", positive=True)
    >>> symbolic_wire(CompressedAllReduce("powersgd"), {"r": r}, S)
    (2*sqrt(S)*r, 2*sqrt(S)*r)
    """
    import sympy

    if scheme.compressor == "topk":
        return 2 * syms["d"] * size, sympy.Integer(0)
    if scheme.compressor == "fp16":
        return size / 2, sympy.Integer(0)
    factor = 2 * syms["r"] * sympy.sqrt(size)  # 4 r sqrt(S/4) bytes: one square matrix
    return factor, factor


def collective_costs(
    scheme: CompressedAllReduce, workload: Workload, n: int, bw: Any, lat: Any, parts: np.ndarray
) -> np.ndarray:
    """Seconds of each message's compressed collective, the ring's reductions included.

    ``parts`` holds one row ``(first, second)`` of :func:`wire_bytes` per
    message. Top-k: ring all-gather ``(n-1) first / B + (n-1) alpha``; fp16:
    ring all-reduce of ``first`` bytes; PowerSGD: that, then one of ``second``
    where it is not 0 (each with its ``n - 1`` vector additions,
    :func:`~queuesgd.schemes.fine.fine.ring_message_costs`).

    Examples
    --------
    >>> from queuesgd import Workload
    >>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
    >>> s = CompressedAllReduce("topk", density=0.05)
    >>> collective_costs(s, Workload(0.1, "4MB"), 4, 1e9, 1e-5, np.array([[4e5, 0.0]])).round(9)
    array([0.00123])
    """
    first, second = parts[:, 0], parts[:, 1]
    if scheme.compressor == "topk":
        return (n - 1) * first / bw + (n - 1) * lat
    red = workload.reduction_time
    out = ring_message_costs(n, first, bw, lat, red)
    if scheme.compressor == "powersgd":
        out = out + np.where(second > 0, ring_message_costs(n, second, bw, lat, red), 0.0)
    return np.asarray(out, dtype=float)
