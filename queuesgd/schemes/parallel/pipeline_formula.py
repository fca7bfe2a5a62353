"""The throughput formula of the pipeline model (SymPy), exact for balanced deterministic stages.

:func:`pipeline_formula` is :meth:`~queuesgd.schemes.parallel.pipeline.Pipeline.formula`:
``X = D M m / T`` with ``T = (M + S - 1)(t_f + t_b) + 2 (S - 1)(alpha +
A/B)`` plus the exposed collective and update, exact under
:func:`~queuesgd.schemes.parallel.pipeline_closed.closed_form_condition`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuesgd import _checks
from queuesgd.errors import NotRepresentable
from queuesgd.schemes.costs import ring_allgather, ring_allreduce, ring_reduce_scatter

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.schemes.parallel.pipeline import Pipeline

__all__ = ["pipeline_formula"]


def pipeline_formula(scheme: Pipeline, compute: str = "deterministic") -> Formula:
    """:meth:`~.pipeline.Pipeline.formula`: throughput of balanced deterministic stages."""
    import sympy

    from queuesgd.formula import Formula

    compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
    if scheme.p2p == "rendezvous":
        raise NotRepresentable(
            "Pipeline(p2p='rendezvous') has no formula in S (its closed form is derived for S <= 2, "
            "see rendezvous_two_stages, M = 1 or without communication); use p2p='eager' for the "
            "formula, or solve_closed_form / method='fine'"
        )
    if compute != "deterministic":
        raise NotRepresentable(
            "Pipeline has a closed form only for deterministic compute (the mean makespan of random "
            "stage times is a mean of maxima); use compute='deterministic', or method='fine' for a "
            "random law"
        )
    pos = {"positive": True}
    sy = {
        "S": sympy.Symbol("S", integer=True, **pos),
        "M": sympy.Symbol("M", integer=True, **pos),
        "D": sympy.Symbol("D", integer=True, **pos),
        "m": sympy.Symbol("m", integer=True, **pos),
        "t_f": sympy.Symbol("t_f", **pos),
        "t_b": sympy.Symbol("t_b", **pos),
        "A": sympy.Symbol("A", nonnegative=True),
        "B": sympy.Symbol("B", **pos),
        "alpha": sympy.Symbol("alpha", nonnegative=True),
        "G": sympy.Symbol("G", **pos),
        "u": sympy.Symbol("u", nonnegative=True),
    }
    S, M, D, m = sy["S"], sy["M"], sy["D"], sy["m"]
    c = sy["alpha"] + sy["A"] / sy["B"]
    Gs = sy["G"] / S
    if scheme.data_parallel == "sharded":
        # reduce-scatter of the stage's gradients, all-gather of its parameters (P = G)
        B, alpha = sy["B"], sy["alpha"]
        tail = ring_reduce_scatter(D, Gs, B, alpha) + ring_allgather(D, Gs, B, alpha) + sy["u"] / (S * D)
    else:
        tail = ring_allreduce(D, Gs, sy["B"], sy["alpha"]) + sy["u"] / S
    T = (M + S - 1) * (sy["t_f"] + sy["t_b"]) + 2 * (S - 1) * c + tail
    # closed_form_condition, with (S - 1)(M - 1) factors so that one stage or one micro-batch holds
    # whatever c: GPipe c <= min(t_f, t_b); 1F1B c <= t_f + t_b at M = 2 and c = 0 from M = 3 on
    why = f"the pipeline closed form is exact ({scheme.condition_text()}, c = alpha + A/B)"
    one = (S - 1) * (M - 1)
    if scheme.schedule == "gpipe":
        conditions = ((one * (c - sy["t_f"]) <= 0, why), (one * (c - sy["t_b"]) <= 0, why))
    else:
        conditions = ((one * (c - sy["t_f"] - sy["t_b"]) <= 0, why), (one * (M - 2) * c <= 0, why))
    expr = D * M * m / T
    meaning = {
        "S": "pipeline stages",
        "M": "micro-batches per step",
        "D": "pipeline replicas (data parallel)",
        "m": "samples per micro-batch",
        "t_f": "forward time of one micro-batch at one stage (with Pipeline.action_overhead), s",
        "t_b": "backward time of one micro-batch at one stage (with Pipeline.action_overhead), s",
        "A": "activation bytes sent per micro-batch across a stage boundary",
        "B": "link bandwidth, bytes/s",
        "alpha": "one-way latency, s",
        "G": "gradient bytes of the whole model (dense: = parameter bytes)",
        "u": "optimizer step of the whole model, s",
    }
    return Formula.pruned(
        expr,
        sy,
        meaning,
        f"{scheme.key} throughput ({scheme.schedule}, {scheme.data_parallel}), deterministic compute",
        "S balanced stages of forward t_f and backward t_b, deterministic; sends alpha + A/B on FIFO "
        f"full-duplex links, exact when {scheme.condition_text()} with c = alpha + A/B; stage gradients "
        "G/S "
        "combined across the D replicas by a ring (or a reduce-scatter after an all-gather when sharded)",
        conditions,
    )
