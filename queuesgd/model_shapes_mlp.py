"""One block's MLP of a :class:`~queuesgd.model_shapes.TransformerShape`, and the check of a shape's workload.

The MLP is GPT's ``h -> 4h -> h`` (GeLU, biases) or a gated one of any inner
size ``f`` (SwiGLU, GeGLU: Llama, Mixtral, Grok-1). Each expert of a
mixture-of-experts layer is a copy of it (:mod:`queuesgd.schemes.parallel.hybrid_moe`).

- :func:`mlp_parameters` -- ``(3 if gated else 2) h f`` weights, and with
  biases ``(2 f if gated else f) + h``: ``8 h^2 + 5 h`` for GPT.
- :func:`mlp_flops` -- its forward FLOPs, ``2 b s`` times the weights.
- :func:`mlp_activation_split` -- the saved activations it splits over
  ``t`` ranks, per ``s b h``: ``(6 if gated else 4) f / h`` (Korthikanti et
  al. 2022, Section 4.1), 16 for GPT.
- :func:`mlp_operations` -- its kernels on any number of rows.
- :func:`check_workload` -- a workload given beside a shape must be of
  that model: 0.5 to 8 bytes per parameter.

Examples
--------
>>> from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B
>>> h = 2048
>>> mlp_parameters(GPT3_XL) == 8 * h * h + 5 * h, mlp_parameters(LLAMA3_8B) == 3 * 4096 * 14336
(True, True)
>>> mlp_flops(GPT3_XL, 1) == 16 * 2048 * h * h, mlp_activation_split(LLAMA3_8B)      # 6 x 14336 / 4096
(True, 21)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes_attention import Operation, gemm_operation, memory_operation

if TYPE_CHECKING:
    from queuesgd.model_shapes import TransformerShape

__all__ = ["BYTES_PER_PARAMETER", "check_workload", "mlp_activation_split", "mlp_flops", "mlp_operations",
           "mlp_parameters"]  # fmt: skip

#: The bytes per parameter a shape's workload may hold (fp8 to fp64); outside, it is another model's.
BYTES_PER_PARAMETER = (0.5, 8.0)


def mlp_parameters(shape: TransformerShape) -> int:
    """Parameters of one block's MLP: ``(3 if gated else 2) h f`` (+ ``(2 f if gated else f) + h`` biases)."""
    h, f = shape.hidden, shape.ffn
    return (3 if shape.gated else 2) * h * f + (((2 if shape.gated else 1) * f + h) if shape.bias else 0)


def mlp_flops(shape: TransformerShape, microbatch: int) -> float:
    """Forward FLOPs of one block's MLP for ``microbatch`` sequences: ``2 b s (3 if gated else 2) h f``."""
    return float(2 * microbatch * shape.sequence * (3 if shape.gated else 2) * shape.hidden * shape.ffn)


def mlp_activation_split(shape: TransformerShape) -> float:
    """The MLP's saved activations split over ``t`` ranks, per ``s b h``: ``(6 if gated else 4) f / h``.

    The activation's input (``f``, or ``2 f`` gated) and the second product's input (``f``), 2 bytes
    each; the first product's input (``2``) is kept whole, as every block's
    (:meth:`~queuesgd.model_shapes.TransformerShape.activation_terms`). A whole number where it is one.
    """
    split = (6 if shape.gated else 4) * shape.ffn
    return split // shape.hidden if split % shape.hidden == 0 else split / shape.hidden


def mlp_operations(
    shape: TransformerShape, rows: int, tensor: int, dtype_bytes: int
) -> tuple[Operation, ...]:
    """The MLP's kernels on ``rows`` tokens on one of ``tensor`` ranks (checked by the shape's method).

    ``fc1`` ``(rows x h) @ (h x f/t)`` (``2f/t`` gated), the activation over ``rows f / t`` values (GeLU
    reads and writes; gated, SiLU-and-multiply reads two halves and writes one), ``fc2`` ``(rows x f/t)
    @ (f/t x h)``: a part of :meth:`~queuesgd.model_shapes.TransformerShape.operations`. A
    mixture-of-experts layer runs them once per local expert, on the rows routed to it
    (:meth:`~queuesgd.compute_model.ComputeModel.block_parts`).

    Examples
    --------
    >>> from queuesgd.model_shapes import LLAMA3_8B
    >>> [(o.name, o.m, o.n, o.k) for o in mlp_operations(LLAMA3_8B, 512, 2, 2) if o.kind == "gemm"]
    [('fc1', 512, 14336, 4096), ('fc2', 512, 4096, 7168)]
    """
    h, f, t, nb = shape.hidden, shape.ffn, tensor, dtype_bytes
    if shape.gated:  # SiLU(gate) x up: read both halves, write one
        act = memory_operation("swiglu", "gelu", rows * f / t, 3, nb)
    else:
        act = memory_operation("gelu", "gelu", rows * f / t, 2, nb)
    return (
        gemm_operation("fc1", rows, (2 if shape.gated else 1) * f // t, h, 1, nb),
        act,
        gemm_operation("fc2", rows, h, f // t, 1, nb),
    )


def check_workload(shape: TransformerShape, workload: Any, field: str = "workload", hint: str = "") -> None:
    """Refuse a workload of another model: its parameter bytes must be 0.5 to 8 per parameter of ``shape``.

    A scheme with a shape reads the bytes per parameter as ``workload.parameter_bytes /
    shape.parameters``; a workload of another model, ResNet-50's 102 MB beside a 7B-parameter
    shape, would scale every parameter, gradient and activation byte by nonsense. ``field`` names
    the input, ``hint`` says what to give instead.

    Examples
    --------
    >>> from queuesgd.catalog import load_workload
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> check_workload(GPT3_XL, GPT3_XL.workload(1))                        # 2 bytes a parameter
    >>> check_workload(GPT3_XL, load_workload("resnet50"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: workload: got 'resnet50'; accepted: a workload of the ...
    """
    lo, hi = BYTES_PER_PARAMETER
    per = workload.parameter_bytes / shape.parameters
    if not lo <= per <= hi:
        raise InvalidParameterError(
            field, workload.name or "(unnamed)",
            f"a workload of the shape's model: its {workload.parameter_bytes:.4g} bytes of parameters are "
            f"{per:.3g} bytes per parameter of the shape's {shape.parameters:,} (accepted {lo:g} to {hi:g})"
            + (f"; {hint}" if hint else ""),
        )  # fmt: skip
