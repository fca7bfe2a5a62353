"""The throughput formula of sharded data parallelism (SymPy), ``k`` equal units.

:func:`sharded_formula` is
:meth:`~queuesgd.schemes.parallel.sharded.ShardedDataParallel.formula`: exact in the
no-overlap cases, and under the condition of
:func:`~.sharded_closed.full_overlap` in the full-overlap ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.costs import ring_allgather, ring_reduce_scatter

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.schemes.parallel.sharded import ShardedDataParallel

__all__ = ["sharded_formula"]


def sharded_formula(scheme: ShardedDataParallel, compute: str = "exponential") -> Formula:
    """:meth:`~.sharded.ShardedDataParallel.formula`: throughput, ``k`` equal units."""
    import sympy

    from queuesgd.formula import Formula

    compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
    pos = {"positive": True}
    n, m, k = (sympy.Symbol(s, integer=True, **pos) for s in ("n", "m", "k"))
    P, G, B, alpha, u = (sympy.Symbol(s, **pos) for s in ("P", "G", "B", "alpha", "u"))
    syms = {"n": n, "m": m, "k": k, "P": P, "G": G, "B": B, "alpha": alpha, "u": u}
    if compute == "exponential":
        if not scheme.no_overlap:
            raise NotRepresentable(
                "ShardedDataParallel with overlap has a closed form only for deterministic compute "
                "(compute='deterministic'); use method='fine' for random compute"
            )
        mu = sympy.Symbol("mu", **pos)
        syms["mu"] = mu
        wait = sympy.harmonic(n) / mu
    else:
        t = sympy.Symbol("t", **pos)
        syms["t"] = t
        wait = t

    def gather(size: Any) -> Any:
        return ring_allgather(n, size, B, alpha)

    def reduce(size: Any) -> Any:  # with its n - 1 additions of size / n (u per P bytes added)
        return ring_reduce_scatter(n, size, B, alpha) + (n - 1) * u * (size / n) / P

    upd = u if scheme.stage == 0 else u / n
    if scheme.no_overlap:
        if scheme.stage == 0:
            comm = k * (reduce(G / k) + gather(G / k))
        elif scheme.stage in (1, 2):
            comm = k * (reduce(G / k) + gather(P / k))
        else:
            comm = (2 * k - 1) * gather(P / k) + k * reduce(G / k)
        note = "no overlap: every collective exposed (exact)"
    elif scheme.stage == 0:
        comm = reduce(G / k) + gather(G / k)
        note = "full overlap: only the last unit's all-reduce exposed (when the condition holds)"
    elif scheme.stage == 2:
        comm = reduce(G / k) + k * gather(P / k)
        note = "full overlap: the last reduce-scatter and the post-update gathers exposed"
    else:
        comm = gather(P / k) + (reduce(G / k) if scheme.overlap else k * reduce(G / k))
        note = "full overlap: the first gather and the last reduction(s) exposed (if the condition holds)"
    expr = n * m / (wait + comm + upd)
    meaning = {
        "n": "workers (ranks)",
        "m": "batch size (samples per worker step)",
        "k": "units (equal parameter and gradient bytes each)",
        "P": "parameter bytes",
        "G": "gradient bytes",
        "B": "link bandwidth, bytes/s",
        "alpha": "one-way latency, s",
        "u": "time of one full optimizer step, s (and of adding P bytes)",
        "mu": "compute rate, 1/s (exponential compute)",
        "t": "compute time, s (deterministic compute)",
    }
    return Formula.pruned(
        expr,
        syms,
        meaning,
        f"{scheme.key} stage {scheme.stage} throughput, {compute} compute",
        f"ring alpha-beta collectives on one channel per worker, k equal units; {note}",
    )
