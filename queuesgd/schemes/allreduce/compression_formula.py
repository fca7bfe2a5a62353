"""The SymPy side of compressed all-reduce: its extra symbols and the breakeven bandwidth as a formula.

- :func:`symbols` and :func:`meanings` -- the symbols ``d``, ``r``,
  ``c_c``, ``c_d`` that the throughput formula of
  :class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce`
  adds to the barrier family's;
- :func:`breakeven_formula` -- ``formula(quantity="breakeven")``: the
  bandwidth ``B*`` at which compression and the plain ring all-reduce give
  the same throughput (one message, no overlap), whose numeric twin is
  :func:`~queuesgd.schemes.allreduce.compression_breakeven.compression_breakeven`.

Examples
--------
>>> from queuesgd.schemes.allreduce.compression import CompressedAllReduce
>>> breakeven_formula(CompressedAllReduce("fp16")).expr       # half the bytes, the same latency
(n - 1)/(n*(c_c + c_d))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd.schemes.allreduce.compression_costs import collective_terms, symbolic_wire
from queuesgd.schemes.costs import ring_allreduce

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.schemes.allreduce.compressed_allreduce import CompressedAllReduce

__all__ = ["breakeven_formula", "conditions", "meanings", "symbols"]


def symbols() -> dict[str, Any]:
    """The SymPy symbols of compression: ``d`` (density), ``r`` (rank), ``c_c`` and ``c_d`` (costs per byte).

    Examples
    --------
    >>> sorted(symbols())
    ['c_c', 'c_d', 'd', 'r']
    """
    import sympy

    pos = {"positive": True}
    return {
        "d": sympy.Symbol("d", **pos),
        "r": sympy.Symbol("r", integer=True, **pos),
        "c_c": sympy.Symbol("c_c", **pos),
        "c_d": sympy.Symbol("c_d", **pos),
    }


def conditions(compressor: str, size: Any, rank: Any) -> tuple[tuple[Any, str], ...]:
    """Where the formulas hold: for PowerSGD, a gradient ``S`` whose factors are smaller than it.

    The formulas send the gradient as one square matrix's two factors of ``2 r sqrt(S)`` bytes each;
    below ``S = 16 r^2`` they would not be smaller, and the tensor goes uncompressed (as ``predict``
    and PyTorch's hook send it), which the formulas do not follow.

    Examples
    --------
    >>> import sympy
    >>> S, r = sympy.Symbol("S", positive=True), sympy.Symbol("r", positive=True)
    >>> conditions("powersgd", S, r)[0][0], conditions("topk", S, r)
    (S > 16*r**2, ())
    """
    if compressor != "powersgd":
        return ()
    return (
        (
            size > 16 * rank**2,
            "PowerSGD's factors (2 r sqrt(S) bytes each) smaller than the gradient; a smaller tensor is "
            "sent uncompressed, which predict follows and the formula does not",
        ),
    )


def meanings(compressor: str) -> dict[str, str]:
    """What each symbol of :func:`symbols` means, for ``compressor`` (top-k sums ``n`` sparse vectors).

    Examples
    --------
    >>> meanings("topk")["c_d"]
    'decompression seconds per byte of uncompressed gradient (one sparse vector; n are summed)'
    """
    return {
        "d": "top-k density (fraction of the elements kept)",
        "r": "PowerSGD rank",
        "c_c": "compression seconds per byte of uncompressed gradient",
        "c_d": "decompression seconds per byte of uncompressed gradient"
        + (" (one sparse vector; n are summed)" if compressor == "topk" else ""),
    }


def breakeven_formula(scheme: CompressedAllReduce) -> Formula:
    """The breakeven bandwidth (bytes/s) of ``scheme`` as a :class:`~queuesgd.formula.Formula`.

    ``formula(quantity="breakeven")`` of
    :class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce`,
    which documents it.
    """
    import sympy

    from queuesgd.formula import Formula

    pos = {"positive": True}
    syms = {
        "n": sympy.Symbol("n", integer=True, **pos),
        "S": sympy.Symbol("S", **pos),
        "alpha": sympy.Symbol("alpha", **pos),
        **symbols(),
    }
    n, size, alpha = syms["n"], syms["S"], syms["alpha"]
    first, second = symbolic_wire(scheme, syms, size)
    volume, lat = collective_terms(scheme, n, alpha, first, second, True)
    extra = syms["c_c"] * size + (n if scheme.compressor == "topk" else 1) * syms["c_d"] * size
    # T(B) - T_0(B) = extra + lat - 2(n-1) alpha + (volume - 2(n-1)/n S) / B = 0
    gain = sympy.factor(ring_allreduce(n, size, 1, 0) - volume)
    expr = gain / sympy.collect(sympy.expand(extra + lat - 2 * (n - 1) * alpha), size)
    meaning = {
        "n": "workers",
        "S": "gradient bytes (uncompressed)",
        "alpha": "one-way latency, s",
        **meanings(scheme.compressor),
    }
    return Formula.pruned(
        expr,
        syms,
        meaning,
        f"{scheme.key} ({scheme.compressor}) breakeven bandwidth, bytes/s",
        "one message, no overlap: compression pays below B* when the denominator (compression cost plus "
        "latency difference) is positive; deterministic costs linear in the uncompressed bytes",
        conditions(scheme.compressor, size, syms["r"]),
    )
