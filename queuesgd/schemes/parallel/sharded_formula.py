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
    conditions: tuple[tuple[Any, str], ...] = ()
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
    if not scheme.no_overlap:
        conditions = _full_overlap_conditions(scheme, k, wait, gather(P / k), reduce(G / k), gather(G / k))
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
        conditions,
    )


def _full_overlap_conditions(
    scheme: ShardedDataParallel, k: Any, t: Any, a: Any, r: Any, g: Any
) -> tuple[tuple[Any, str], ...]:
    """:func:`~.sharded_closed.full_overlap`'s condition for ``k`` equal units of a compute ``t``.

    The units split ``t`` as a workload without layers does: forward ``t / 3`` and backward
    ``2 t / 3``, each in ``k`` equal parts ``f = t / 3k`` and ``b = 2 t / 3k``. Stages 0 and 2: each
    unit's message (all-reduce ``r + g``, reduce-scatter ``r``) sent as its backward ends fits under
    the next backward, ``(k - 1)(msg - b) <= 0``. Stage 3 with prefetch: each gather ``a`` under the
    previous forward, ``(k - 1)(a - f) <= 0``, and with overlap the reduce-scatter issued before a
    backward and the gather after it under that backward, ``(k - 1)(r - b) <= 0`` and
    ``(k - 1)(k - 2)(r + a - b) <= 0``. Written with ``(k - 1)`` factors so that one unit (nothing to
    overlap) holds whatever the costs. Without the condition the step is not a closed form (an audit
    found the formula 37.5% above the exact task graph where ``predict`` refused it).
    """
    f, b = t / (3 * k), 2 * t / (3 * k)
    why = "every collective fits under the compute (full overlap, ShardedDataParallel.full_overlap)"
    if scheme.stage in (0, 2):
        msg = r + g if scheme.stage == 0 else r
        return (((k - 1) * (msg - b) <= 0, why),)
    out = [((k - 1) * (a - f) <= 0, why)]
    if scheme.overlap:
        out += [((k - 1) * (r - b) <= 0, why), ((k - 1) * (k - 2) * (r + a - b) <= 0, why)]
    return tuple(out)
