"""Memory per GPU of :class:`~queuesgd.schemes.parallel.hybrid.HybridParallel`: its busiest pipeline stage's.

Each stage ``i`` of ``p`` (:func:`stage_memory`) holds its own ``L_i`` layers (``l / p``, or
``stage_layers[i]``; interleaved, its ``v`` chunks, :func:`stage_chunk_layers`): their parameters
and gradients over ``t``, the embeddings on the first stage, and on the last its own output
parameters (:attr:`~queuesgd.model_shapes.TransformerShape.output_parameters`: the final norm, an
untied output matrix) and, with tied embeddings and ``p > 1``, Megatron-LM's copy of the word
embedding ``V h`` (``setup_embeddings_and_output_layer``: "create a second copy of word_embeddings on
the last stage", its gradient all-reduced with the first stage's); ZeRO over the ``d c`` ranks that
hold the same shard (:func:`~.megatron.hybrid_memory`; ZeRO 3 also holds two gathered layers, or
without layers two of the equal units :func:`~queuesgd.schemes.memory.default_unit_count` cuts the
GPU's parameters into); a mixture of experts' local ``E / e`` experts of its layers over the ``d c /
e`` ranks that hold them; activations per :func:`~.megatron.layer_activation_bytes` (with the shape's
:meth:`~queuesgd.model_shapes.TransformerShape.activation_terms`; plus
:func:`~.megatron.expert_activation_bytes`) times :func:`~.megatron.stage_layers_in_flight`, over
``c``. Without a shape, a stage's parameters are the model's times ``L_i / l`` (no activations).

:func:`busiest_stage_memory`, the scheme's memory per GPU, is the stage with the most bytes (the
first such), every part of its breakdown that stage's: the most any GPU holds. :func:`batch_memory`
is the same on the planner's arrays (:mod:`~.hybrid_batch`): the middle stages hold equal layers and
stage 1 the most in flight of them, so it weighs stages 0, 1 and ``p - 1`` only.

Examples
--------
>>> from queuesgd import Cluster, Workload
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> w = Workload(1.0, "15GB")                    # 7.5B parameters in 16 bits
>>> round(busiest_stage_memory(HybridParallel(zero=1, layers=60), w, Cluster(64, "1GB/s")).total / 1e9, 1)
31.4
>>> c = Cluster(64, "1GB/s")
>>> [round(busiest_stage_memory(HybridParallel(zero=z), w, c).total / 1e9, 1) for z in range(4)]
[120.0, 31.4, 16.6, 1.9]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.model_shapes_mlp import mlp_activation_split
from queuesgd.schemes.memory import Memory, default_unit_count
from queuesgd.schemes.parallel.hybrid_layout import head_slot_layers
from queuesgd.schemes.parallel.hybrid_stages import chunk_layers
from queuesgd.schemes.parallel.megatron import (
    SCHEDULES,
    expert_activation_bytes,
    hybrid_memory,
    layer_activation_bytes,
    stage_layers_in_flight,
)

if TYPE_CHECKING:
    from queuesgd.cluster import Cluster
    from queuesgd.model_shapes import TransformerShape
    from queuesgd.schemes.parallel.hybrid import HybridParallel
    from queuesgd.workload import Workload

__all__ = [
    "batch_memory",
    "busiest_stage_memory",
    "chunks_of",
    "end_parameters",
    "stage_chunk_layers",
    "stage_memory",
]


def stage_chunk_layers(scheme: HybridParallel) -> tuple[tuple[float, ...], ...]:
    """Each stage's layers by model chunk: ``v`` chunks interleaved (:func:`~.hybrid_stages.chunk_layers`).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> stage_chunk_layers(HybridParallel(pipeline=2, layers=8))
    ((4.0,), (4.0,))
    >>> stage_chunk_layers(HybridParallel(pipeline=2, layers=14, stage_layers=(5, 9)))
    ((5.0,), (9.0,))
    >>> stage_chunk_layers(HybridParallel(pipeline=2, layers=14, stage_layers=(7, 7), microbatches=4,
    ...                                   schedule="interleaved", virtual_stages=2))
    ((3.0, 4.0), (4.0, 3.0))
    """
    return chunks_of(scheme.layer_count, scheme.pipeline, scheme.virtual_stages, scheme.stage_layers)


def chunks_of(
    layers: int, pipeline: int, virtual: int, counts: tuple[int, ...] | None
) -> tuple[tuple[float, ...], ...]:
    """:func:`stage_chunk_layers` from ``l``, ``p``, ``v`` (1 unless interleaved), the counts (None: even).

    Examples
    --------
    >>> chunks_of(12, 2, 3, None), chunks_of(10, 4, 1, (2, 3, 3, 2))[:2]
    (((2.0, 2.0, 2.0), (2.0, 2.0, 2.0)), ((2.0,), (3.0,)))
    """
    p, v = pipeline, virtual
    if counts is None:
        return ((layers / (p * v),) * v,) * p
    if v > 1:
        chunks = chunk_layers(counts, v)
        assert chunks is not None  # stage_layer_counts accepts only counts that split
        return tuple(tuple(float(x) for x in row) for row in chunks)
    return tuple((float(n),) for n in counts)


def stage_memory(scheme: HybridParallel, workload: Workload, cluster: Cluster, stage: int) -> Memory:
    """Bytes per GPU of pipeline stage ``stage`` (0-based; the module docstring says what is counted)."""
    t, p, c = scheme.tensor, scheme.pipeline, scheme.context
    dc = scheme.replicas(cluster) * c
    s = scheme.shape
    experts = None
    chunks = stage_chunk_layers(scheme)[stage]
    own = sum(chunks)  # the stage's layers
    uneven = scheme.stage_layers is not None
    if s is None:
        share = own / scheme.layer_count if uneven else 1.0 / p
        P = workload.parameter_bytes * share / t if uneven else workload.parameter_bytes / (t * p)
        G = workload.gradient_bytes * share / t if uneven else workload.gradient_bytes / (t * p)
        # without layers, the GPU's parameters are cut into equal units (ShardedDataParallel's rule)
        layer = P / default_unit_count(P) if scheme.layers is None and not uneven else P / max(own, 1.0)
        act = 0.0
    else:
        nbytes = workload.parameter_bytes / s.parameters  # bytes per parameter, as the workload holds them
        block = s.block_parameters
        if scheme.experts is not None:  # the dense part here; the local experts' below
            mlp = s.mlp_parameters
            block = block - mlp
            local = own * mlp * (scheme.experts // scheme.expert_parallel) * nbytes / t
            experts = hybrid_memory(
                local, local, dc // scheme.expert_parallel, scheme.zero, optimizer=scheme.optimizer
            )
        count = own * block + end_parameters(s, stage, p)
        P = G = count * nbytes / t
        layer = block * nbytes / t
        if experts is not None:
            layer += mlp * (scheme.experts // scheme.expert_parallel) * nbytes / t
        kw = {"tensor": t, "sequence_parallel": scheme.sequence_parallel, "recompute": scheme.recompute}
        terms = s.activation_terms()  # the block's own (GPT: Korthikanti's 10, 24, 5)
        per = layer_activation_bytes(s.sequence, workload.batch_size, s.hidden, s.heads, terms=terms, **kw)
        if scheme.experts is not None:
            per += expert_activation_bytes(
                s.sequence,
                workload.batch_size,
                s.hidden,
                capacity_factor=scheme.capacity_factor,
                top_k=scheme.top_k,
                mlp_split=mlp_activation_split(s),
                **kw,
            )
        flight = stage_layers_in_flight(chunks, stage, p, scheme.microbatches, scheme.schedule)
        act = per * flight / c  # each context-parallel rank keeps s / c of every sequence
    gathered = 2 * layer if dc > 1 else 0.0
    out = hybrid_memory(
        P, G, dc, scheme.zero, optimizer=scheme.optimizer, gathered_bytes=gathered, activation_bytes=act
    )
    if experts is None:
        return out
    return Memory(
        out.parameters + experts.parameters,
        out.gradients + experts.gradients,
        out.optimizer + experts.optimizer,
        out.activations,
    )


def end_parameters(shape: TransformerShape, stage: int, pipeline: int) -> int:
    """Parameters stage ``stage`` holds besides its blocks: the embeddings first, the output's last.

    The first stage the embeddings; the last its
    :attr:`~queuesgd.model_shapes.TransformerShape.output_parameters` and, tied with ``p > 1``,
    Megatron-LM's copy of the word embedding ``V h`` (one stage holds both with ``p = 1``: the
    tied matrix once).

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(4, 64, 4, 128, 1000)             # tied, learned positions, LayerNorm
    >>> end_parameters(s, 0, 2), end_parameters(s, 1, 2), end_parameters(s, 0, 1)
    (72192, 64128, 72320)
    """
    count = 0
    if stage == 0:
        count += shape.embedding_parameters
    if stage == pipeline - 1:
        count += shape.output_parameters
        if pipeline > 1 and shape.tied_embeddings:
            count += shape.vocabulary * shape.hidden
    return count


def busiest_stage_memory(scheme: HybridParallel, workload: Workload, cluster: Cluster) -> Memory:
    """Bytes per GPU of the stage holding the most (:func:`stage_memory`; the first such stage)."""
    best = None
    for i in range(scheme.pipeline):
        here = stage_memory(scheme, workload, cluster, i)
        if best is None or here.total > best.total:
            best = here
    assert best is not None
    return best


def _zero_split(P: np.ndarray, ranks: np.ndarray, z: np.ndarray, opt: float, gathered: Any) -> tuple:
    """:func:`~.sharded.sharded_memory` on arrays: parameters, gradients, optimizer state (G = P)."""
    o = P * opt
    params = np.where(z == 3, P / ranks + gathered, P)
    grads = np.where(z >= 2, P / ranks, P)
    state = np.where(z >= 1, o / ranks, o)
    return params, grads, state


def _stage_flights(
    layers: int, p: np.ndarray, m: np.ndarray, v: np.ndarray, sched: np.ndarray, hs: np.ndarray
) -> np.ndarray:
    """Per row, the layers and layers in flight of stages 0, 1 and ``p - 1``: six columns.

    Once per distinct ``(p, m, v, schedule, layout)``, by the scalar path's own functions
    (:func:`chunks_of`, :func:`~.megatron.stage_layers_in_flight`). The middle
    stages hold equal layers and stage 1 the most in flight of them, so stages 0, 1 and ``p - 1``
    hold the busiest stage's bytes (stage 1 is used only where ``p > 2``).
    """
    keys = np.stack([p, m, v, sched, hs.astype(np.int64)], axis=1)
    unique, which = np.unique(keys, axis=0, return_inverse=True)
    rows = []
    for pp, mm, vv, ss, hh in (tuple(int(x) for x in k) for k in unique):
        chunks = chunks_of(layers, pp, vv, head_slot_layers(layers, pp) if hh else None)
        stages = (0, min(1, pp - 1), pp - 1)
        rows.append(
            [sum(chunks[i]) for i in stages]
            + [stage_layers_in_flight(chunks[i], i, pp, mm, SCHEDULES[ss]) for i in stages]
        )
    return np.array(rows, dtype=float).reshape(-1, 6)[which.ravel()]  # (0, 6) for a table of no rows


def batch_memory(
    shape: TransformerShape,
    param_bytes: np.ndarray,
    t: np.ndarray,
    p: np.ndarray,
    dc: np.ndarray,
    b: np.ndarray,
    m: np.ndarray,
    sched: np.ndarray,
    v: np.ndarray,
    sp: np.ndarray,
    rc: np.ndarray,
    z: np.ndarray,
    opt: float,
    c: np.ndarray,
    e: np.ndarray,
    moe: tuple[int, float, int] | None,
    hs: np.ndarray,
) -> dict[str, np.ndarray]:
    """``HybridParallel.memory`` on arrays: the busiest of stages 0, 1 and ``p - 1``."""
    s, h, a = shape.sequence, shape.hidden, shape.heads
    nbytes = param_bytes / shape.parameters
    block = shape.block_parameters
    if moe is not None:
        mlp = shape.mlp_parameters
        block = block - mlp
        experts_here = mlp * (moe[0] // e) * nbytes / t
    layer = block * nbytes / t
    if moe is not None:
        layer = layer + experts_here
    sbh = float(s) * b * h
    whole, split, core = shape.activation_terms()  # GPT: Korthikanti's 10, 24, 5
    attention = np.where(rc == 2, 0.0, core * a * s / (h * t))
    per = np.where(
        rc == 1,
        2 * sbh / np.where(sp, t, 1),
        np.where(sp, sbh * ((whole + split) / t + attention), sbh * (whole + split / t + attention)),
    )
    if moe is not None:
        more = (moe[1] * moe[2] - 1) * sbh * (mlp_activation_split(shape) / t + 2 / np.where(sp, t, 1))
        per = per + np.where(rc == 1, 0.0, more)
    gathered = np.where((z == 3) & (dc > 1), 2 * layer, 0.0)
    flights = _stage_flights(shape.layers, p, m, v, sched, hs)
    emb, out = shape.embedding_parameters, shape.output_parameters
    copy = shape.vocabulary * shape.hidden if shape.tied_embeddings else 0  # the last stage's, p > 1
    ends = (emb + np.where(p == 1, out, 0), 0, out + copy)  # end_parameters of stages 0, 1, p - 1 (p > 1)
    best: dict[str, np.ndarray] | None = None
    for j, end in enumerate(ends):
        own = flights[:, j]
        P = (own * block + end) * nbytes / t
        act = per * flights[:, 3 + j] / c
        params, grads, state = _zero_split(P, dc, z, opt, gathered)
        if moe is not None:
            local = own * mlp * (moe[0] // e) * nbytes / t
            xp, xg, xo = _zero_split(local, dc // e, z, opt, 0.0)
            params, grads, state = params + xp, grads + xg, state + xo
        here = {"parameters": params, "gradients": grads, "optimizer": state, "activations": act}
        here["memory"] = params + grads + state + act
        if best is None:
            best = here
            continue
        exists = p > 2 if j == 1 else p > 1
        take = exists & (here["memory"] > best["memory"])
        best = {k: np.where(take, here[k], best[k]) for k in best}
    assert best is not None
    return best
