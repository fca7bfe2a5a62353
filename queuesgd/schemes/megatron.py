"""Megatron-LM's analytical pieces: pipeline bubble, activation memory, memory per GPU of hybrid parallelism.

Plain formulas, cited where they come from, used by
:class:`~queuesgd.schemes.hybrid.HybridParallel` and testable on their own:

- :func:`bubble_fraction` -- ``(p-1)/m`` for GPipe and 1F1B, ``(p-1)/(v m)``
  for the interleaved schedule (Narayanan et al., SC 2021, Sections 2.2.1-2.2.2).
- :func:`layer_activation_bytes` -- the activations one transformer layer
  keeps for its backward pass (Korthikanti et al., 2022, Table 2).
- :func:`layers_in_flight` -- how many layers' activations the first
  pipeline stage holds at its peak (Korthikanti et al., Section 4.2.3).
- :func:`hybrid_memory` -- bytes per GPU: model states split by tensor and
  pipeline parallelism then by ZeRO stage over the data-parallel group
  (Rajbhandari et al., SC 2020, Section 5 and Figure 1), plus activations.

Examples
--------
>>> bubble_fraction(8, 32, 1), bubble_fraction(8, 32, 4)     # 7/32; 7/128
(0.21875, 0.0546875)
"""

from __future__ import annotations

from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.memory import Memory
from queuesgd.schemes.sharded import sharded_memory

__all__ = [
    "RECOMPUTE",
    "SCHEDULES",
    "bubble_fraction",
    "hybrid_memory",
    "layer_activation_bytes",
    "layers_in_flight",
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


def layer_activation_bytes(
    sequence: int,
    microbatch: int,
    hidden: int,
    heads: int,
    *,
    tensor: int = 1,
    sequence_parallel: bool = False,
    recompute: str | None = None,
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

    Examples
    --------
    >>> layer_activation_bytes(2048, 1, 12288, 96)     # GPT-3: 34 + 5 x 96 x 2048 / 12288 = 114
    2868903936.0
    >>> layer_activation_bytes(2048, 1, 12288, 96, tensor=8, sequence_parallel=True) * 8
    2868903936.0
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
    attention = 0.0 if recompute == "selective" else 5 * a * s / (h * t)
    if sequence_parallel:
        return sbh * (34 / t + attention)
    return sbh * (10 + 24 / t + attention)


def layers_in_flight(
    layers: int, pipeline: int, microbatches: int, schedule: str, virtual_stages: int = 1
) -> float:
    """Layers' worth of one micro-batch's activations the first stage holds at its peak.

    Each stage holds ``l / p`` layers. GPipe keeps all ``m`` micro-batches:
    ``m l / p``. 1F1B keeps at most ``p`` on the first stage: ``min(p, m)
    l / p`` (Narayanan et al., SC 2021, Section 2.2.1). Interleaved keeps
    ``l (1 + (p - 1)/(p v))`` (Korthikanti et al., 2022, Section 4.2.3).

    Examples
    --------
    >>> layers_in_flight(96, 8, 64, "1f1b"), layers_in_flight(96, 8, 64, "interleaved", 2)
    (96.0, 138.0)
    """
    per_stage = layers / pipeline
    if schedule == "gpipe":
        return float(microbatches * per_stage)
    if schedule == "interleaved":
        return float(layers * (1 + (pipeline - 1) / (pipeline * virtual_stages)))
    return float(min(pipeline, microbatches) * per_stage)


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
