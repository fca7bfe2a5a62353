"""Mixture-of-experts layers in :class:`~.hybrid.HybridParallel`: fields, compute, bytes.

Every layer's MLP is ``E`` experts (Megatron-Core's default ``moe_layer_freq
= 1``; GShard and Switch Transformer put them in every other layer), each
token routed to ``top_k`` of them, each expert's buffer padded to
``capacity_factor`` times its even share (Lepikhin et al., *GShard*, 2020;
Fedus et al., *Switch Transformer*, 2021), the experts split over ``e``
expert-parallel ranks of the data-parallel group (Rajbhandari et al.,
*DeepSpeed-MoE*, 2022). The formulas themselves are in
:mod:`queuesgd.schemes.parallel.megatron` (:func:`~.megatron.alltoall_bytes`,
:func:`~.megatron.expert_activation_bytes`) and the shape's own MLP
(:attr:`~queuesgd.model_shapes.TransformerShape.mlp_parameters`,
:meth:`~queuesgd.model_shapes.TransformerShape.mlp_flops`): each expert is a
copy of the block's MLP, GPT's ``h -> 4h -> h`` or a gated one of any inner
size (Mixtral, Grok-1, DeepSeek).

Examples
--------
>>> from queuesgd import Workload
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> from queuesgd.model_shapes import TransformerShape
>>> s = TransformerShape(2, 64, 4, 32, 100)
>>> h = HybridParallel(shape=s, experts=8, capacity_factor=1.5, top_k=2)
>>> w = s.workload(1)
>>> expert_bytes(h, w) == 2 * (8 * 64**2 + 5 * 64) * 2          # l (8 h^2 + 5 h) x 2 bytes
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuesgd.errors import InvalidParameterError
from queuesgd.mixture_checks import MAX_CAPACITY_FACTOR, capacity_factor, mixture
from queuesgd.model_shapes_attention import step_flops

if TYPE_CHECKING:
    from queuesgd.model_shapes import TransformerShape
    from queuesgd.schemes.parallel.hybrid import HybridParallel
    from queuesgd.workload import Workload

__all__ = [
    "MAX_CAPACITY_FACTOR",
    "check_experts",
    "expert_bytes",
    "expert_compute_share",
    "expert_share",
    "mlp_bytes",
]



def check_experts(scheme: HybridParallel) -> None:
    """Check and set ``scheme``'s mixture-of-experts fields: each alone, then together (off without experts).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(layers=2, top_k=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.top_k: got 2; accepted: 1 without experts=...
    """
    set_ = object.__setattr__
    n = "HybridParallel"
    set_(scheme, "capacity_factor", capacity_factor(f"{n}.capacity_factor", scheme.capacity_factor))
    if scheme.experts is None:
        for f, default in (("expert_parallel", 1), ("capacity_factor", 1.0), ("top_k", 1)):
            if getattr(scheme, f) != default:
                raise InvalidParameterError(
                    f"{n}.{f}", getattr(scheme, f), f"{default} without experts= (a dense model)"
                )
        return
    E, _, _ = mixture(
        (f"{n}.experts", scheme.experts),
        [(f"{n}.expert_parallel", scheme.expert_parallel)],
        (f"{n}.top_k", scheme.top_k),
    )
    set_(scheme, "experts", E)
    if scheme.shape is None:
        raise InvalidParameterError(f"{n}.experts", E, "None without shape= (the experts' MLP comes from it)")


def expert_share(scheme: HybridParallel, workload: Workload) -> float:
    """Extra compute of the experts, a share of ``C``: ``(capacity_factor top_k - 1)`` x the MLPs' share.

    Each token's MLP runs in ``top_k`` experts on buffers padded to the
    capacity: ``capacity_factor x top_k`` times the dense MLP's forward
    FLOPs per layer (``16 b s h^2`` for GPT; 3x with the backward).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(2, 64, 4, 32, 100)
    >>> x = expert_share(HybridParallel(shape=s, experts=4, top_k=2), s.workload(1))
    >>> x == 2 * 3 * 16 * 32 * 64**2 / s.iteration_flops(1)       # (1 x 2 - 1) x the MLPs' share
    True
    """
    if scheme.experts is None:
        return 0.0
    return expert_compute_share(scheme.shape, workload.batch_size, scheme.capacity_factor, scheme.top_k)


def expert_compute_share(
    shape: TransformerShape, microbatch: int, capacity_factor: float, top_k: int
) -> float:
    """``(capacity_factor top_k - 1) x 3 l M / F``: :func:`expert_share` from the shape alone.

    ``M`` is one block's MLP forward FLOPs (:meth:`~.TransformerShape.mlp_flops`: ``16 b s h^2`` for GPT).

    ``F`` is the dense model's forward and backward FLOPs as a micro-batch's compute counts them
    (:func:`~queuesgd.model_shapes_attention.step_flops`: :meth:`~.TransformerShape.iteration_flops`, plus
    with flash attention the backward's rerun scores).

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(2, 64, 4, 32, 100)
    >>> expert_compute_share(s, 1, 1.0, 1)                   # capacity factor 1, top-1: the dense MLP
    0.0
    """
    s, b = shape, microbatch
    mlp = s.layers * 3.0 * s.mlp_flops(b) / step_flops(s, b)
    return (capacity_factor * top_k - 1.0) * mlp


def expert_bytes(scheme: HybridParallel, workload: Workload) -> float:
    """Bytes of the dense model's MLPs (``l`` x the shape's MLP; GPT ``8 h^2 + 5 h``), which experts replace.

    0 if dense.

    See the module docstring's example.
    """
    if scheme.experts is None:
        return 0.0
    return mlp_bytes(scheme.shape, workload)


def mlp_bytes(shape: TransformerShape, workload: Workload) -> float:
    """Bytes of the shape's ``l`` MLPs as ``workload`` holds its parameters: ``l M_p x bytes / parameter``.

    Examples
    --------
    >>> from queuesgd.model_shapes import LLAMA3_8B
    >>> w = LLAMA3_8B.workload(1)
    >>> mlp_bytes(LLAMA3_8B, w) == 32 * 3 * 4096 * 14336 * 2                  # l x 3 h f x 2 bytes
    True
    """
    return shape.layers * shape.mlp_parameters * workload.parameter_bytes / shape.parameters
