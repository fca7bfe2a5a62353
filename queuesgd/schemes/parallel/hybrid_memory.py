"""Memory per GPU of :class:`~queuesgd.schemes.parallel.hybrid.HybridParallel`: the first pipeline stage's.

Parameters and gradients of its ``l / p`` layers (``stage_layers[0]`` with
an uneven partition; and the embeddings; with ``p = 1`` the final norm and an
untied output layer too) over ``t``, ZeRO over the ``d c`` ranks that hold the same shard
(:func:`~.megatron.hybrid_memory`; ZeRO 3 also holds two gathered layers, or without layers two of the
equal units :func:`~queuesgd.schemes.memory.default_unit_count` cuts the GPU's parameters into);
a mixture of experts' local ``E / e`` experts over the ``d c / e`` ranks
that hold them; activations per :func:`~.megatron.layer_activation_bytes` (with the
shape's :meth:`~queuesgd.model_shapes.TransformerShape.activation_terms`; plus
:func:`~.megatron.expert_activation_bytes`) times
:func:`~.megatron.layers_in_flight`, over ``c``.

Examples
--------
>>> from queuesgd import Cluster, Workload
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> w = Workload(1.0, "15GB")                    # 7.5B parameters in 16 bits
>>> round(first_stage_memory(HybridParallel(zero=1, layers=60), w, Cluster(64, "1GB/s")).total / 1e9, 1)
31.4
>>> c = Cluster(64, "1GB/s")
>>> [round(first_stage_memory(HybridParallel(zero=z), w, c).total / 1e9, 1) for z in range(4)]
[120.0, 31.4, 16.6, 1.9]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuesgd.model_shapes_mlp import mlp_activation_split
from queuesgd.schemes.memory import Memory, default_unit_count
from queuesgd.schemes.parallel.hybrid_stages import first_stage_layers
from queuesgd.schemes.parallel.megatron import (
    expert_activation_bytes,
    hybrid_memory,
    layer_activation_bytes,
    layers_in_flight,
)

if TYPE_CHECKING:
    from queuesgd.cluster import Cluster
    from queuesgd.schemes.parallel.hybrid import HybridParallel
    from queuesgd.workload import Workload

__all__ = ["first_stage_memory"]


def first_stage_memory(scheme: HybridParallel, workload: Workload, cluster: Cluster) -> Memory:
    """Bytes per GPU of ``scheme``'s first pipeline stage (the module docstring says what is counted)."""
    t, p, c = scheme.tensor, scheme.pipeline, scheme.context
    dc = scheme.replicas(cluster) * c
    s = scheme.shape
    experts = None
    uneven = scheme.stage_layers is not None
    first = first_stage_layers(scheme)  # l / p, or the first stage's own count
    if s is None:
        share = first / scheme.layer_count if uneven else 1.0 / p
        P = workload.parameter_bytes * share / t if uneven else workload.parameter_bytes / (t * p)
        G = workload.gradient_bytes * share / t if uneven else workload.gradient_bytes / (t * p)
        # without layers, the GPU's parameters are cut into equal units (ShardedDataParallel's rule)
        layer = P / default_unit_count(P) if scheme.layers is None and not uneven else P / max(first, 1.0)
        act = 0.0
    else:
        nbytes = workload.parameter_bytes / s.parameters  # bytes per parameter, as the workload holds them
        block = s.block_parameters
        if scheme.experts is not None:  # the dense part here; the local experts' below
            mlp = s.mlp_parameters
            block = block - mlp
            local = first * mlp * (scheme.experts // scheme.expert_parallel) * nbytes / t
            experts = hybrid_memory(
                local, local, dc // scheme.expert_parallel, scheme.zero, optimizer=scheme.optimizer
            )
        count = first * block + s.embedding_parameters + (s.output_parameters if p == 1 else 0)
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
        total = first * p if uneven else s.layers  # layers_in_flight reads the first stage's as total / p
        flight = layers_in_flight(total, p, scheme.microbatches, scheme.schedule, scheme.virtual_stages)
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
