"""HybridParallel's closed form as a SymPy expression: throughput, the bubble, TP communication per layer.

What :meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.formula` (and ``derive``)
returns: ring collectives, tensor parallelism inside a node, blocking
pipeline sends of ``A / t`` then an all-gather of ``A`` over the ``t`` ranks
(Megatron's scatter/gather, without sequence parallelism), data-parallel
collectives exposed after the flush, deterministic stages: with a shape the
last stage also runs the output layer (``C_h``) and paces the pipeline,
``M (tau + C_h / t) + (p - 1) tau / v`` (Narayanan et al., SC 2021;
Korthikanti et al., 2022; :func:`~.megatron.pipeline_time`) less the ``M + 1``
messages Megatron does not send (the first stage's gradients, the last's
activations), exact where the output layer covers a message (GPipe: always);
without a shape, 1F1B with ``p > 2`` and the interleaved schedule with ``p > 1``
raise NotRepresentable (``predict`` times their passes). Context and
expert parallelism are not in it (their collectives' placement depends on
the cluster's nodes): the scheme's closed form has them, ``formula`` says so. With ``tp_overlap``
the backward's two TP collectives of a layer are ``Max(0, x - W_qkv)`` and
``Max(0, x - W_fc1)`` (``x`` the all-reduce, the reduce-scatter with sequence
parallelism, whose all-gathers stay exposed; :mod:`~.hybrid_overlap`); with ``tp_overlap="all"``
each of a layer's four collectives ``x`` pipelined with its GEMM ``W`` (``W_qkv``, ``W_proj``,
``W_fc1``, ``W_fc2``) in ``t`` chunks, ``Max(0, x - W) + Min(x, W) / t``, two sets (three with full
recomputation). ``zero_overlap``
(:mod:`~.hybrid_zero`, any ZeRO stage) is not in the throughput: ``formula`` raises NotRepresentable.

Examples
--------
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> hybrid_formula(HybridParallel(pipeline=4, microbatches=8), "deterministic", "bubble").expr
(p - 1)/M
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import NotRepresentable
from queuesgd.model_shapes_attention import step_flops
from queuesgd.schemes.costs import ring_allgather, ring_allreduce, ring_reduce_scatter
from queuesgd.schemes.parallel.hybrid_overlap import exposed_all_per_layer, exposed_per_layer
from queuesgd.schemes.parallel.hybrid_stages import stage_shares
from queuesgd.schemes.parallel.megatron import bubble_fraction, pipeline_time

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["QUANTITIES", "hybrid_formula"]

#: What ``formula(quantity=...)`` gives.
QUANTITIES: tuple[str, ...] = ("throughput", "bubble", "tp_communication")


def _forward_share(scheme: HybridParallel) -> Any:
    """The forward's share of a micro-batch's compute: 1/3, less with flash attention.

    Flash attention's backward reruns the scores (:func:`~queuesgd.model_shapes_attention.step_flops`);
    ``predict`` takes the same share from the workload's forward and backward times.
    """
    import sympy

    if scheme.shape is None or scheme.shape.attention != "flash":
        return sympy.Rational(1, 3)
    return sympy.Float(scheme.shape.iteration_flops(1) / 3 / step_flops(scheme.shape, 1))


def hybrid_formula(
    scheme: HybridParallel, compute: str = "deterministic", quantity: str = "throughput"
) -> Formula:
    """``scheme``'s throughput (samples/s), bubble fraction or TP communication per layer, as a Formula.

    See :meth:`~queuesgd.schemes.parallel.hybrid.HybridParallel.formula` for the symbols.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> hybrid_formula(HybridParallel(tensor=2), quantity="tp_communication").expr
    4*A*(2*t - 2)/(B_intra*t) + 4*alpha_intra*(2*t - 2)
    """
    import sympy

    from queuesgd.formula import Formula

    compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
    quantity = _checks.choice("quantity", quantity, QUANTITIES)
    if compute != "deterministic":
        raise NotRepresentable(
            "HybridParallel has a closed form for deterministic compute only (compute='deterministic')"
        )
    if scheme.context > 1 or scheme.experts is not None:
        raise NotRepresentable(
            "HybridParallel's formula has no context or expert parallelism (context=1, experts=None); "
            "predict has them"
        )
    if scheme.zero_overlap and quantity == "throughput":
        raise NotRepresentable(
            "HybridParallel's formula has the data-parallel collectives exposed only (zero_overlap=False); "
            "predict has their overlap with the stage's compute (min(max(X - K, 0) + X / n, X) per "
            "collective, K the compute it hides behind; hybrid_zero), not derived here"
        )
    if stage_shares(scheme) is not None:
        raise NotRepresentable(
            "HybridParallel's formula has equal stages only (stage_layers=None or equal counts, "
            "interleaved: equal chunks); predict has uneven partitions"
        )
    # the ends' unsent messages leave the stages unequal; 1F1B's two stages send one message each (exact)
    ends = scheme.pipeline > {"1f1b": 2, "interleaved": 1}.get(scheme.schedule, scheme.pipeline)
    if quantity == "throughput" and scheme.shape is None and ends:
        raise NotRepresentable(
            f"HybridParallel's formula of pipeline={scheme.pipeline} under schedule='{scheme.schedule}' "
            "needs a shape (shape=...): Megatron does not send the first stage's gradient nor the last "
            "stage's activation, so the stages are unequal, and the closed form is exact only where the "
            "last stage's output layer covers a message; predict times the passes numerically, and "
            "schedule='gpipe' has a formula without a shape"
        )
    pos = {"positive": True}
    ints = {k: sympy.Symbol(k, integer=True, **pos) for k in ("t", "p", "d", "M", "v", "m", "l", "g")}
    reals = {k: sympy.Symbol(k, **pos) for k in ("C", "B_intra", "B", "G")}
    names = ("A", "alpha_intra", "alpha", "u", "C_a", "C_h", "W_qkv", "W_fc1", "W_proj", "W_fc2")
    nonneg = {k: sympy.Symbol(k, nonnegative=True) for k in names}
    sy = {**ints, **reals, **nonneg}
    t, p, d, M, m, l = (sy[k] for k in ("t", "p", "d", "M", "m", "l"))
    v = sy["v"] if scheme.schedule == "interleaved" else 1
    A, Bi, ai, B, a, G = (sy[k] for k in ("A", "B_intra", "alpha_intra", "B", "alpha", "G"))
    one = ring_allreduce(t, A, Bi, ai)  # = reduce-scatter + all-gather with sequence parallelism
    per_layer = (6 if scheme.recompute == "full" else 4) * one
    full = scheme.recompute == "full"
    if scheme.tp_overlap is True:  # the backward's all-reduce (SP: reduce-scatter) behind the wgrads
        sp = scheme.sequence_parallel
        x, rest = (ring_reduce_scatter(t, A, Bi, ai), ring_allgather(t, A, Bi, ai)) if sp else (one, 0)
        w = (sy["W_qkv"], sy["W_fc1"])
        per_layer = exposed_per_layer(one, x, rest, *w, full, maximum=sympy.Max)
    elif scheme.tp_overlap == "all":  # every collective pipelined with its GEMM in t chunks (SP)
        g = (sy["W_qkv"], sy["W_proj"], sy["W_fc1"], sy["W_fc2"])
        ag, rs = ring_allgather(t, A, Bi, ai), ring_reduce_scatter(t, A, Bi, ai)
        per_layer = exposed_all_per_layer(ag, rs, *g, t, full, maximum=sympy.Max, minimum=sympy.Min)
    meaning = {
        "t": "tensor-parallel ranks",
        "p": "pipeline stages",
        "d": "data-parallel replicas",
        "M": "micro-batches per step",
        "v": "model chunks per GPU (interleaved)",
        "m": "samples per micro-batch",
        "l": "transformer layers",
        "g": "GPUs per node (1 without nodes)",
        "C": "forward and backward time of one micro-batch, whole model, one GPU, s",
        "C_a": "forward time of the attention cores of one micro-batch, whole model, one GPU, s",
        "C_h": "forward and backward time of the output layer (logits) of one micro-batch, one GPU, s "
        "(part of C; the last stage runs it)",
        "A": "activation bytes of one micro-batch (b s h x 2), the TP all-reduce message",
        "B_intra": "bandwidth inside a node, bytes/s",
        "alpha_intra": "latency inside a node, s",
        "B": "link bandwidth per GPU between nodes, bytes/s",
        "alpha": "one-way latency between nodes, s",
        "G": "gradient bytes of the whole model (dense: = parameter bytes)",
        "u": "optimizer step of the whole model, s",
        "W_qkv": "weight-gradient product of QKV, one layer and micro-batch, one of t ranks, s (tp_overlap)",
        "W_fc1": "weight-gradient product of fc1, one layer and micro-batch, one of t ranks, s (tp_overlap)",
        "W_proj": "the attention projection's product, one layer and micro-batch, one of t ranks, s",
        "W_fc2": "fc2's product, one layer and micro-batch, one of t ranks, s",
    }
    if scheme.tp_overlap == "all":  # the forward products (the backward's data-gradient ones: their volumes)
        for k, what in (("W_qkv", "QKV's product"), ("W_fc1", "fc1's product")):
            meaning[k] = f"{what}, one layer and micro-batch, one of t ranks, s"
    conditions: tuple[tuple[Any, str], ...] = ()
    if scheme.schedule == "interleaved" and quantity != "tp_communication":
        why = "Megatron's interleaved schedule: micro-batches a multiple of the stages (as HybridParallel)"
        conditions += ((sympy.Eq(sympy.Mod(M, p), 0), why),)
    if quantity == "throughput":
        why = "equal stages (and chunks): the layers a multiple of p v, as HybridParallel takes them"
        conditions += ((sympy.Eq(sympy.Mod(l, p * v), 0), why),)
    if quantity == "bubble":
        expr, name = bubble_fraction(p, M, v), "pipeline bubble fraction"
    elif quantity == "tp_communication":
        expr, name = per_layer, "tensor-parallel communication per layer and micro-batch, s"
    else:
        head = sy["C_h"] if scheme.shape is not None else 0  # without a shape the stages are equal
        blocks = sy["C"] - head
        extra = {None: 0, "full": blocks * _forward_share(scheme), "selective": sy["C_a"]}[scheme.recompute]
        regather = 0 if scheme.sequence_parallel else ring_allgather(t, A, Bi, ai)
        msg = (a + A / (t * B) + regather) * sympy.Min(p - 1, 1)  # one message (none with p = 1)
        tau = (blocks + extra) / (t * p) + l / p * per_layer + 2 * v * msg
        Gs = G / (t * p)
        if scheme.zero == 0:
            dp = ring_allreduce(d, Gs, B, a)
        elif scheme.zero in (1, 2):
            dp = ring_reduce_scatter(d, Gs, B, a) + ring_allgather(d, Gs, B, a)
        else:
            dp = M * (2 * ring_allgather(d, Gs, B, a) + ring_reduce_scatter(d, Gs, B, a))
        update = sy["u"] / (t * p * (d if scheme.zero else 1))
        # the first stage sends no gradient, the last no activation: (M + 1) messages less than the
        # textbook form, exact where the head's passes cover a message (hybrid_sends; GPipe: any head)
        pipe = pipeline_time(tau, head / t, p, M, v) - (M + 1) * msg
        if scheme.schedule == "gpipe":
            pipe += (M - 1) * sympy.Max(0, msg - head / (3 * t))
        else:
            why = (
                "the last stage's output layer at least one pipeline message (1F1B: C_h / t; interleaved: "
                "its forward, C_h / 3t; 1F1B on p <= 2 stages any), where the closed form is exact: "
                "the ends' unsent messages leave the stages unequal; predict times the passes elsewhere"
            )
            covered = head / (t * (3 if scheme.schedule == "interleaved" else 1)) - msg >= 0
            conditions += ((sympy.Or(covered, p <= 2) if scheme.schedule == "1f1b" else covered, why),)
        expr = d * M * m / (pipe + dp + update)
        name = (
            f"{scheme.key} throughput ({scheme.schedule}, recompute {scheme.recompute}, ZeRO {scheme.zero})"
        )
        # predict places a data-parallel group's ranks inside a node where t < g (gcd(d, g / t) of them,
        # over NVLink and the node's rails) and prices each pipeline boundary by its ranks' nodes, NVLink
        # between stages of one node (hybrid_sends): the audit of 2026-11-28 found the formula up to 97.5%
        # off there. With t >= g a stage fills whole nodes and every boundary (the interleaved wrap too)
        # crosses nodes: the formula's one price B is then every send's
        why = (
            "the formula's placement: each tensor-parallel group fills whole nodes (t >= g), so pipeline "
            "sends and data-parallel collectives cross nodes at B; predict places them inside a node "
            "where t < g"
        )
        conditions += ((t - sy["g"] >= 0, why),)
    return Formula.pruned(
        expr,
        sy,
        meaning,
        name,
        "Megatron-LM's model (Narayanan et al. SC'21; Korthikanti et al. 2022): ring collectives, "
        "tensor parallelism inside a node, blocking pipeline sends of A/t and their all-gather over the "
        "t ranks (scatter/gather, without sequence parallelism), data-parallel collectives exposed after "
        "the flush; deterministic stages, the last one also running the output layer (C_h, with a shape)",
        conditions,
    )
