"""Megatron-LM's analytical pieces: pipeline bubble, activation memory, memory per GPU of hybrid parallelism.

Plain formulas, cited where they come from, used by
:class:`~queuesgd.schemes.parallel.hybrid.HybridParallel` and testable on their own:

- :func:`bubble_fraction` -- ``(p-1)/m`` for GPipe and 1F1B, ``(p-1)/(v m)``
  for the interleaved schedule (Narayanan et al., SC 2021, Sections 2.2.1-2.2.2).
- :func:`pipeline_time` -- the time of ``m`` micro-batches through stages of
  unequal times: ``m max + (sum - max) / v`` (equal stages: ``(m + (p-1)/v) tau``).
- :func:`stage_pipeline_time` -- the same for any stage times (uneven
  partitions): ``sum_i tau_i + (m - 1) max_i tau_i`` for GPipe and 1F1B.
- :func:`head_share` -- the output layer's share of a micro-batch's FLOPs
  (the work the last pipeline stage adds); :func:`selective_share` -- the
  attention cores' forward, what selective recomputation adds (none for
  flash attention).
- :func:`layer_activation_bytes` -- the activations one transformer layer
  keeps for its backward pass (Korthikanti et al., 2022, Table 2).
- :func:`stage_layers_in_flight` -- how many layers' activations a pipeline
  stage holds at its peak under each schedule (Narayanan et al., Section 2.2.1;
  Korthikanti et al., Section 4.2.3; Megatron-LM's interleaved order);
  :func:`layers_in_flight` -- the first of equal stages'.
- :func:`hybrid_memory` -- bytes per GPU: model states split by tensor and
  pipeline parallelism then by ZeRO stage over the data-parallel group
  (Rajbhandari et al., SC 2020, Section 5 and Figure 1), plus activations.
- :func:`kv_bytes` -- the keys and values context parallelism gathers per
  layer (Megatron-Core, *Context parallelism*; Liu et al., *Ring Attention*, 2023).
- :func:`expert_mlp_parameters`, :func:`alltoall_bytes`,
  :func:`expert_activation_bytes` -- a mixture-of-experts layer: ``E``
  copies of the MLP, the all-to-all of ``capacity_factor x top_k`` times the
  tokens (Lepikhin et al., *GShard*, 2020; Fedus et al., *Switch
  Transformer*, 2021; Rajbhandari et al., *DeepSpeed-MoE*, 2022).

Examples
--------
>>> bubble_fraction(8, 32, 1), bubble_fraction(8, 32, 4)     # 7/32; 7/128
(0.21875, 0.0546875)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes_attention import step_flops
from queuesgd.schemes.memory import Memory
from queuesgd.schemes.parallel.pipeline_schedule import interleaved_chunk, interleaved_warmup
from queuesgd.schemes.parallel.sharded import sharded_memory

__all__ = [
    "RECOMPUTE",
    "SCHEDULES",
    "bubble_fraction",
    "alltoall_bytes",
    "expert_activation_bytes",
    "expert_mlp_parameters",
    "head_share",
    "hybrid_memory",
    "kv_bytes",
    "layer_activation_bytes",
    "layers_in_flight",
    "stage_layers_in_flight",
    "pipeline_time",
    "selective_share",
    "stage_pipeline_time",
]

#: Pipeline schedules: GPipe (all forwards, then all backwards), 1F1B (PipeDream-Flush), interleaved 1F1B.
SCHEDULES: tuple[str, ...] = ("1f1b", "gpipe", "interleaved")
#: Activation recomputation: none, every layer's forward again ("full"), the attention core ("selective").
RECOMPUTE: tuple[Any, ...] = (None, "full", "selective")


def bubble_fraction(pipeline: Any, microbatches: Any, virtual_stages: Any = 1) -> Any:
    """Idle time of the pipeline relative to its ideal time: ``(p - 1) / (v m)``.

    ``v = 1`` for GPipe and 1F1B (Narayanan et al., SC 2021, Section 2.2.1);
    ``v`` model chunks per GPU for the interleaved schedule (Section 2.2.2).
    Numbers or SymPy symbols.

    Examples
    --------
    >>> bubble_fraction(4, 8)
    0.375
    """
    return (pipeline - 1) / (virtual_stages * microbatches)


def pipeline_time(stage: Any, last: Any, pipeline: Any, microbatches: Any, virtual_stages: Any = 1) -> Any:
    """Seconds of ``m`` micro-batches through ``p`` stages, the last ``last`` seconds slower than the others.

    Each of the first ``p - 1`` stages takes ``tau = stage`` per micro-batch,
    the last ``tau + last`` (it also runs the output layer). For GPipe and
    1F1B with stage times ``tau_i`` the step is ``sum_i tau_i + (m - 1) max_i
    tau_i`` (every stage's fill and drain, then ``m - 1`` micro-batches at the
    slowest). For the interleaved schedule (each GPU ``v`` chunks of
    ``tau / v``, the head in the last GPU's last chunk) this function's case
    is exact; with unequal stages the tempting ``m max_i tau_i + (sum_i tau_i
    - max_i tau_i) / v`` is neither exact nor a bound against Megatron's
    order (``tests/schemes/test_hybrid_interleaved_stages.py`` has a
    counterexample; unequal chunks are timed by
    :func:`~.schedule_step.interleaved_pass_time`). With the last stage the
    slowest, both schedules give

        ``m (tau + last) + (p - 1) tau / v``,

    ``(m + (p - 1)/v) tau`` when ``last = 0`` (Narayanan et al., SC 2021,
    Sections 2.2.1-2.2.2). Exact for deterministic times, checked against the
    task graph of 1F1B and GPipe and a simulation of Megatron's interleaved
    order (``tests/schemes/test_hybrid_stages.py``); it assumes the other
    stages are equal and the last not faster (``last >= 0``). Numbers, NumPy
    arrays or SymPy symbols.

    Examples
    --------
    >>> pipeline_time(3.0, 0.0, 4, 8), (8 + 3) * 3.0            # equal stages
    (33.0, 33.0)
    >>> pipeline_time(3.0, 0.5, 4, 8, 2)                         # 8 x 3.5 + 3 x 3 / 2
    32.5
    """
    return microbatches * (stage + last) + (pipeline - 1) / virtual_stages * stage


def stage_pipeline_time(stages: Any, microbatches: Any) -> Any:
    """Seconds of ``m`` micro-batches through stages of times ``tau_i``: ``sum tau_i + (m - 1) max tau_i``.

    GPipe and 1F1B (``v = 1``) with any stage times, as an uneven partition
    of the layers gives them: every stage's fill and drain, then ``m - 1``
    micro-batches at the slowest. :func:`pipeline_time` is the case of equal
    stages but the last. Exact for deterministic times when the *last* stage
    is the slowest (then the critical path is the forward fill through the
    other stages, the last stage's ``m`` passes, the backward drain; for
    GPipe it must be the slowest forward and backward both); and, for GPipe,
    whenever each stage's backward is the same multiple of its forward.
    Otherwise, when an earlier stage is the slowest under 1F1B, the stages
    after it overlap part of their fill and drain with its warm-up forwards
    and the form is an upper bound (both checked against the task graph in
    ``tests/schemes/test_hybrid_stages.py``). ``HybridParallel`` times
    unequal stages exactly instead (:func:`~.schedule_step.pass_time`: the
    longest path through the schedule's passes; for GPipe this form is
    below it where the slowest forward and backward are on different
    stages). ``stages`` a sequence of numbers.

    Examples
    --------
    >>> stage_pipeline_time([5.0, 6.0, 6.0, 7.0], 8)              # 24 + 7 x 7
    73.0
    >>> stage_pipeline_time([3.0, 3.0, 3.0, 3.5], 8) == pipeline_time(3.0, 0.5, 4, 8)
    True
    """
    return sum(stages) + (microbatches - 1) * max(stages)


def head_share(shape: Any, microbatch: int = 1) -> float:
    """The output layer's share of one micro-batch's forward + backward FLOPs: ``3 (2 b s h V) / F``.

    ``F`` the model's FLOPs (:meth:`~queuesgd.model_shapes.TransformerShape.iteration_flops`;
    with flash attention plus the backward's recomputed scores,
    :func:`~queuesgd.model_shapes_attention.step_flops`, as the workload's compute time counts them);
    the last pipeline stage runs this share of a micro-batch's compute
    ``C`` besides its blocks (the logits ``2 b s h V`` FLOPs forward,
    twice that backward; the final layer norm and the loss are not FLOPs
    of a product and not counted here).

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(128, 25600, 160, 2048, 51200)    # Megatron's 1T: 1 / (1 + 12 l h (1 + s/6h) / V)
    >>> round(head_share(s, 1) * (1 + 12 * 128 * 25600 * (1 + 2048 / (6 * 25600)) / 51200), 12)
    1.0
    """
    return 3.0 * shape.logits_flops(microbatch) / step_flops(shape, microbatch)


def selective_share(shape: Any, microbatch: int = 1) -> float:
    """What selective recomputation adds to a micro-batch's compute, as a share of it: ``l 4 b s^2 h / F``.

    The attention cores' forward (their two products; ``F`` as in :func:`head_share`), for eager
    attention; 0 for flash attention, whose backward recomputes the scores already (its cost is in
    ``F``) and which keeps nothing of size ``s^2`` to drop.

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B
    >>> selective_share(GPT3_XL, 1) == 24 * 4 * 2048**2 * 2048 / GPT3_XL.iteration_flops(1)
    True
    >>> selective_share(LLAMA3_8B, 1)                                   # flash
    0.0
    """
    if shape.attention == "flash":
        return 0.0
    s, b = shape, microbatch
    return s.layers * 4.0 * b * s.sequence**2 * s.hidden / s.iteration_flops(b)


def layer_activation_bytes(
    sequence: int,
    microbatch: int,
    hidden: int,
    heads: int,
    *,
    tensor: int = 1,
    sequence_parallel: bool = False,
    recompute: str | None = None,
    terms: tuple[float, float, float] = (10, 24, 5),
) -> float:
    """Bytes one transformer layer keeps for its backward pass, per GPU (16-bit activations).

    Korthikanti et al. (2022), Table 2, with ``s b h`` the sequence, micro-batch
    and hidden sizes, ``a`` heads, ``t`` tensor-parallel ranks:

    ===========================  ===============================
    configuration                bytes per layer
    ===========================  ===============================
    no parallelism               ``s b h (34 + 5 a s / h)``
    tensor parallel              ``s b h (10 + 24/t + 5 a s/(h t))``
    + sequence parallel          ``s b h (34/t + 5 a s/(h t))``
    tensor, selective recompute  ``s b h (10 + 24/t)``
    + sequence parallel          ``s b h (34/t)``
    full recompute               ``2 s b h`` (the layer's input; ``/t`` with sequence parallelism)
    ===========================  ===============================

    ``terms`` ``(R, S, K)`` are the block's own counts (GPT's ``(10, 24, 5)`` by default;
    :meth:`~queuesgd.model_shapes.TransformerShape.activation_terms` for grouped-query attention,
    a gated MLP, no dropout): ``10`` reads ``R``, ``24`` reads ``S``, ``34`` reads ``R + S`` and
    ``5`` reads ``K`` in every row (sequence parallelism splits the ``R`` part too; selective
    recomputation drops the ``K`` part). Flash attention keeps no ``s^2`` part (``K = 0``, and its
    softmax statistics in ``S``): selective recomputation then keeps what no recomputation keeps.

    Examples
    --------
    >>> layer_activation_bytes(2048, 1, 12288, 96)     # GPT-3: 34 + 5 x 96 x 2048 / 12288 = 114
    2868903936.0
    >>> layer_activation_bytes(2048, 1, 12288, 96, tensor=8, sequence_parallel=True) * 8
    2868903936.0
    >>> layer_activation_bytes(8192, 1, 4096, 32, terms=(8, 26, 2)) / (8192 * 4096)   # Llama 3 8B
    162.0
    """
    s, b, h, a = (
        _checks.integer(n, v)
        for n, v in (("sequence", sequence), ("microbatch", microbatch), ("hidden", hidden), ("heads", heads))
    )
    t = _checks.integer("tensor", tensor)
    sbh = float(s) * b * h
    if recompute not in RECOMPUTE:
        raise InvalidParameterError("recompute", recompute, "None, 'full' or 'selective'")
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    whole, split, core = terms
    attention = 0.0 if recompute == "selective" else core * a * s / (h * t)
    if sequence_parallel:
        return sbh * ((whole + split) / t + attention)
    return sbh * (whole + split / t + attention)


def layers_in_flight(
    layers: int, pipeline: int, microbatches: int, schedule: str, virtual_stages: int = 1
) -> float:
    """Layers' worth of one micro-batch's activations the first of ``p`` equal stages holds at its peak.

    :func:`stage_layers_in_flight` of stage 0 holding ``l / p`` layers (``v`` chunks of ``l / (p v)``
    interleaved): GPipe ``m l / p``; 1F1B ``min(p, m) l / p`` (Narayanan et al., SC 2021, Section
    2.2.1); interleaved ``l (1 + (p - 1)/(p v))`` for ``m > p`` (Korthikanti et al., 2022, Section
    4.2.3), ``l`` (all ``m v`` chunks) for ``m = p``.

    Examples
    --------
    >>> layers_in_flight(96, 8, 64, "1f1b"), layers_in_flight(96, 8, 64, "interleaved", 2)
    (96.0, 138.0)
    >>> layers_in_flight(96, 8, 8, "interleaved", 2)             # m = p: every chunk, l layers
    96.0
    """
    chunks = (layers / (pipeline * virtual_stages),) * virtual_stages
    return stage_layers_in_flight(chunks, 0, pipeline, microbatches, schedule)


def stage_layers_in_flight(
    chunks: Sequence[float], stage: int, pipeline: int, microbatches: int, schedule: str
) -> float:
    """Layers' worth of one micro-batch's activations pipeline stage ``i`` holds at its peak.

    ``chunks``: the stage's layers by model chunk (``v`` chunks under the interleaved schedule,
    else one), ``L_i`` in all. A forward pass's activations live until its backward pass; the
    peak counts the forwards alive at once, each by its chunk's layers:

    - GPipe, every forward first: ``m L_i``.
    - 1F1B (PipeDream-Flush): ``p - i - 1`` warm-up forwards, then one forward and one
      backward: ``min(p - i, m) L_i`` (Narayanan et al., SC 2021, Section 2.2.1).
    - Interleaved (Megatron-LM's ``forward_backward_pipelining_with_interleaving``, ``m`` a
      multiple of ``p``): ``m v`` forwards, the ``k``-th running chunk ``(k // p) mod v``, the
      ``k``-th backward chunk ``v - 1 - (k // p) mod v``; ``w = 2 (p - i - 1) + (v - 1) p``
      warm-up forwards (all ``m v`` when ``m = p``, "run all forward passes and then all
      backward passes if number of microbatches is just the number of pipeline stages", or
      when ``w >= m v``), then one forward and one backward each, so ``W_i = min(w + 1, m v)``
      forwards are alive at the peak: ``W_i L_i / v`` with equal chunks (stage 0, ``m > p``:
      ``(p v + p - 1) l / (p v) = l (1 + (p - 1)/(p v))`` for ``L_0 = l / p``, Korthikanti et
      al., 2022, Section 4.2.3; ``m = p``: ``m L_i``). With unequal chunks (an end chunk one
      layer short, :func:`~.hybrid_stages.chunk_layers`) the most layers the ``W_i`` alive
      forwards hold over the steady state (periodic in ``p v`` passes, so one period is
      walked): the first stage's is its first ``W_i`` forwards', the last stage's, whose short
      chunk's backwards come first, can be one short chunk more than those.

    Examples
    --------
    >>> stage_layers_in_flight((9,), 1, 4, 8, "1f1b"), stage_layers_in_flight((9,), 1, 4, 8, "gpipe")
    (27.0, 72.0)
    >>> stage_layers_in_flight((3, 4), 0, 4, 8, "interleaved")   # first 11 forwards: 7 x 3 + 4 x 4
    37.0
    >>> stage_layers_in_flight((4, 3), 3, 4, 8, "interleaved")   # 5 alive: 4 x 4 + 3 first, then 5 x 4
    20.0
    """
    p, m, i = pipeline, microbatches, stage
    layers = float(sum(chunks))
    if schedule == "gpipe":
        return m * layers
    if schedule != "interleaved":
        return min(p - i, m) * layers
    v = len(chunks)
    total = m * v
    warm = interleaved_warmup(p, v, m, i)
    if len(set(chunks)) == 1:
        return float(min(warm + 1, total) * chunks[0])
    held = float(sum(chunks[interleaved_chunk(k, p, v)] for k in range(warm)))
    peak = held
    for q in range(min(total - warm, p * v)):  # forward warm + q, then backward q
        held += chunks[interleaved_chunk(warm + q, p, v)]
        peak = max(peak, held)
        held -= chunks[interleaved_chunk(q, p, v, forward=False)]
    return peak


def hybrid_memory(
    parameter_bytes: float,
    gradient_bytes: float,
    data: int,
    zero: int,
    *,
    optimizer: str | float = 6.0,
    gathered_bytes: float = 0.0,
    activation_bytes: float = 0.0,
) -> Memory:
    """Bytes per GPU of a tensor- and pipeline-parallel shard, ZeRO stage ``zero`` over ``data`` ranks.

    ``parameter_bytes`` and ``gradient_bytes`` are those of the GPU's shard
    (the model's over ``t p``, or the first stage's); ZeRO then splits the
    optimizer state (stage 1), the gradients too (2), the parameters too (3)
    over the ``d`` data-parallel ranks (:func:`~.sharded.sharded_memory`);
    ``optimizer`` is bytes of state per byte of parameters (6: Adam with fp32
    master weights against 16-bit parameters, ZeRO's ``K = 12``).

    Examples
    --------
    >>> [round(hybrid_memory(15e9, 15e9, 64, z).total / 1e9, 1) for z in range(4)]   # ZeRO Figure 1, 7.5B
    [120.0, 31.4, 16.6, 1.9]
    """
    return sharded_memory(
        parameter_bytes,
        gradient_bytes,
        data,
        zero,
        optimizer=optimizer,
        gathered_bytes=gathered_bytes if zero == 3 else 0.0,
        activation_bytes=activation_bytes,
    )


def kv_bytes(boundary_bytes: Any, tensor: Any = 1, share: float = 1.0) -> Any:
    """Bytes of one layer's keys and values for the whole sequence on one tensor-parallel rank: ``2 A / t``.

    ``share``: the key-value heads over the heads, ``k / a`` (grouped-query attention: K and V have
    ``g = k h / a`` columns); 1 for multi-head attention. Works on arrays.

    ``A = b s h`` x 2 bytes (the layer's hidden states); K and V are each
    ``b s h / t`` values on a rank of ``t``. Context parallelism (``c``
    ranks, ``s / c`` tokens each) all-gathers them in the forward pass,
    gathers them again in the backward pass and reduce-scatters their
    gradients (Megatron-Core's *Context parallelism* guide: "CP requires
    additional all-gather across GPUs to collect the full sequence of KV.
    Correspondingly, reduce-scatter should be applied to the activation
    gradients of KV in backward propagation ... each GPU only stores the KV
    of a sequence chunk in forward and gathers KV again in backward"; run as
    the ring of Liu et al., *Ring Attention*, 2023): collectives whose whole
    buffer, as nccl-tests counts it, is this.

    Examples
    --------
    >>> kv_bytes(2048 * 12288 * 2.0, tensor=8) / 1e6         # GPT-3 175B, TP 8: 2 x 2048 x 1536 x 2 bytes
    12.582912
    >>> kv_bytes(2048 * 8192 * 2.0, tensor=8, share=8 / 64) / 1e6   # Llama 3 70B: 8 of 64 heads
    1.048576
    """
    return 2.0 * boundary_bytes / tensor * share


def expert_mlp_parameters(hidden: int) -> int:
    """Parameters of one expert, an MLP ``h -> 4h -> h``: ``8 h^2 + 5 h`` (weights and biases).

    A mixture-of-experts layer holds ``E`` of them in place of the dense MLP
    (GShard, Section 2.1; Switch Transformer, Section 2.1); its router
    (``h x E``) is not counted (under ``1 / (8 h)`` of the experts).

    Examples
    --------
    >>> expert_mlp_parameters(8)        # 8 x 32 + 32 + 32 x 8 + 8
    552
    """
    h = _checks.integer("hidden", hidden)
    return 8 * h * h + 5 * h


def alltoall_bytes(
    boundary_bytes: float,
    *,
    context: int = 1,
    tensor: int = 1,
    sequence_parallel: bool = False,
    capacity_factor: float = 1.0,
    top_k: int = 1,
) -> float:
    """Each GPU's all-to-all buffer of one mixture-of-experts layer: ``A / c x capacity_factor x top_k``.

    The rank's tokens (``b s / c`` of the micro-batch; ``1 / t`` of them with
    sequence parallelism, each tensor-parallel rank dispatching its own share)
    each go to ``top_k`` experts, and each expert takes at most
    ``capacity_factor x top_k x tokens / E`` of them (GShard, Section 2.2;
    Switch Transformer, eq. 3-4: the buffers are padded to the capacity), so
    each rank sends ``capacity_factor x top_k x`` its tokens' hidden states,
    ``1 / e`` to each rank of the expert-parallel group, and receives as
    much (DeepSpeed-MoE, Section 5: the all-to-all's volume per GPU).

    Examples
    --------
    >>> alltoall_bytes(4096 * 4096 * 2.0, capacity_factor=1.25, top_k=2) / 2**20   # 2.5 x 32 MiB
    80.0
    """
    per_rank = boundary_bytes / context / (tensor if sequence_parallel else 1)
    return per_rank * capacity_factor * top_k


def expert_activation_bytes(
    sequence: int,
    microbatch: int,
    hidden: int,
    *,
    tensor: int = 1,
    sequence_parallel: bool = False,
    recompute: str | None = None,
    capacity_factor: float = 1.0,
    top_k: int = 1,
    mlp_split: float = 16.0,
) -> float:
    """Activation bytes a mixture-of-experts layer keeps beyond those of :func:`layer_activation_bytes`.

    The experts' MLP keeps Korthikanti's MLP activations (Section 4.1: its
    first product's input ``2 s b h`` and, split over ``t`` ranks,
    ``mlp_split s b h``: the activation's and the second product's inputs,
    ``16`` for GPT's GeLU MLP of ``4 h``, ``(6 if gated else 4) f / h`` in
    general, :func:`~queuesgd.model_shapes_mlp.mlp_activation_split`)
    for ``capacity_factor x top_k`` times the tokens: ``(capacity_factor top_k
    - 1) s b h (mlp_split/t + 2/t')`` more, ``t' = t`` with sequence
    parallelism (else the input is whole on every rank). Full recomputation
    keeps only the layer's input: nothing more.

    Examples
    --------
    >>> expert_activation_bytes(2048, 1, 4096, capacity_factor=1.25, top_k=2)  # 1.5 x 18 s b h
    226492416.0
    """
    if recompute == "full":
        return 0.0
    sbh = float(sequence) * microbatch * hidden
    whole = 2 / (tensor if sequence_parallel else 1)
    return (capacity_factor * top_k - 1) * sbh * (mlp_split / tensor + whole)
