"""Which pass of a pipeline stage issues HybridParallel's tensor-, context- and expert-parallel collectives.

A stage's micro-batch is a forward and a backward pass (:func:`~.hybrid_stages.chunk_passes`),
timed apart by the pipeline schedule (:func:`~.schedule_step.pass_time`). Its collectives go to
the pass that issues them, kind by kind, per transformer layer (``one`` a TP unit: the all-reduce,
or with sequence parallelism a reduce-scatter plus an all-gather):

- **Tensor parallelism**, ``2 one`` forward and ``2 one`` backward. Megatron-LM's ``f`` and ``g``
  operators (Shoeybi et al., 2019, Figures 3 and 4; ``megatron/core/tensor_parallel/mappings.py``):
  ``copy_to_tensor_model_parallel_region`` is the identity forward and an all-reduce backward,
  ``reduce_from_tensor_model_parallel_region`` an all-reduce forward and the identity backward, one
  pair in the attention block and one in the MLP. With sequence parallelism (Korthikanti et al.,
  2022, Section 4.2.2, Figure 5: ``g`` and ``g-bar``) ``gather_from_sequence_parallel_region`` is an
  all-gather forward and a reduce-scatter backward, ``reduce_scatter_to_sequence_parallel_region``
  the reverse: 2 all-gathers + 2 reduce-scatters each way. (Its backward also all-gathers the
  input again for the weight gradient, overlapped with the input gradient's product: not counted.)
  ``tp_overlap=True`` hides part of the backward's two only (:mod:`~.hybrid_overlap`); with
  ``"all"`` each pass has one set of the four pipelined pairs.
- **Context parallelism**, one all-gather of the keys and values forward; backward that all-gather
  again and the reduce-scatter of their gradients (Megatron-Core's ring attention, Transformer
  Engine's ``AttnFuncWithCPAndKVP2P``: the forward passes K/V around the ring, the backward K/V
  and dK/dV), as :class:`~queuesgd.HybridParallel` prices them.
- **Expert parallelism**, the token dispatcher's two all-to-alls forward (dispatch, combine) and
  their two transposes backward (Megatron-Core's ``MoEAlltoAllTokenDispatcher``: ``all_to_all``'s
  gradient is the reverse all-to-all).
- **Full recomputation** (``recompute="full"``) re-runs each layer's forward inside the backward pass
  (Megatron's ``CheckpointFunction.backward``), so the backward also re-issues the forward's: 2 TP
  units, one K/V all-gather, 2 all-to-alls. Selective recomputation re-runs the attention cores
  only, which issue none of these (the scheme counts none).

So without recomputation the collectives split 1:1 (CP: 1 all-gather : 1 all-gather + 1
reduce-scatter), with full recomputation 1:2 (TP, EP), while the compute splits about 1:2 (1:3).
Before, the model split them as the compute.

Examples
--------
>>> forward_collectives(4, 1.0, 5.0, False, False, 0.5, 0.25)     # 4 layers x (2 + 0.5 + 2 x 0.25)
12.0
>>> block_passes(9.0, 3.0, 6.0, 2.0)                              # compute 3 + 6, collectives 2 + 4
(5.0, 10.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["block_passes", "forward_collectives", "tp_forward_per_layer"]


def tp_forward_per_layer(one: Any, exposed: Any, pipelined: Any, full: Any) -> Any:
    """The forward pass's exposed TP seconds of a layer and micro-batch.

    ``2 one`` (the forward's all-reduces, or all-gathers and reduce-scatters: never hidden, the
    backward's are what ``tp_overlap=True`` hides); with ``pipelined`` (``tp_overlap="all"``) one of
    the ``2`` (``3`` with ``full`` recomputation) equal sets of pipelined pairs in ``exposed``, the
    layer's exposed TP seconds. Floats or NumPy arrays.

    Examples
    --------
    >>> tp_forward_per_layer(1.5, 4.0, False, True), tp_forward_per_layer(1.5, 4.5, True, True)
    (3.0, 1.5)
    """
    out = np.where(pipelined, exposed / np.where(full, 3, 2), 2 * one)
    return float(out) if np.ndim(out) == 0 else out


def forward_collectives(
    layers: Any, one: Any, exposed: Any, pipelined: Any, full: Any, kv_gather: Any, alltoall: Any
) -> Any:
    """The forward pass's collectives on ``layers`` layers of one micro-batch (the module docstring).

    Per layer :func:`tp_forward_per_layer` (``one``, ``exposed`` the layer's exposed TP seconds,
    ``pipelined``, ``full``), one K/V all-gather ``kv_gather`` (0 without context parallelism) and
    two all-to-alls ``alltoall`` (0 without experts). The backward pass has the rest.

    Examples
    --------
    >>> forward_collectives(2, 1.0, 6.0, False, True, 0.0, 0.0)     # full recomputation: 4 of 12 forward
    4.0
    """
    return layers * (tp_forward_per_layer(one, exposed, pipelined, full) + kv_gather + 2 * alltoall)


def block_passes(compute: Any, forward: Any, collectives: Any, collectives_forward: Any) -> tuple[Any, Any]:
    """The blocks' forward and backward pass of one micro-batch: ``(forward + cf, rest)``.

    ``compute`` the blocks' compute (recomputation included, which runs in the backward),
    ``forward`` its forward, ``collectives`` their exposed TP, CP and EP seconds,
    ``collectives_forward`` the forward's (:func:`forward_collectives`).

    Examples
    --------
    >>> block_passes(4.0, 1.0, 3.0, 1.0)
    (2.0, 5.0)
    """
    fwd = forward + collectives_forward
    return fwd, compute + collectives - fwd
