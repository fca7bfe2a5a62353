"""A :class:`~queuesgd.model_shapes.TransformerShape`'s kernels and attention core: eager or fused (flash).

- :class:`Operation` -- one kernel of a block's forward pass on one
  tensor-parallel rank (:meth:`~queuesgd.model_shapes.TransformerShape.operations`).
- :func:`attention_operations` -- the attention core, in one of
  :data:`ATTENTIONS`: ``"eager"``, Megatron-LM's layout (the scores product,
  a softmax and dropout over the ``s x s`` scores, the context product), or
  ``"flash"``, one fused kernel (FlashAttention: Dao et al., 2022;
  FlashAttention-2, Dao, 2023; Megatron-Core / Transformer Engine's fused
  attention, PyTorch's ``scaled_dot_product_attention``) that never writes
  the ``s x s`` matrix, keeps the output and the softmax's log-sum-exp for
  the backward, and recomputes the scores there.
- :func:`activation_terms` -- the bytes one block keeps for its backward
  pass, derived term by term (Korthikanti et al., 2022, Section 4.1; GPT's
  eager case is eq. 2's ``34 + 5 a s / h``).
- :data:`FLASH_BACKWARD` and :func:`extra_backward_flops` -- a flash core's
  backward runs five products against the forward's two (FlashAttention-2,
  Section 3.1.2: the scores recomputed, then ``dV``, ``dP``, ``dQ``,
  ``dK``): 2.5 times its forward, not twice.

Examples
--------
>>> from queuesgd.model_shapes import TransformerShape
>>> flash = TransformerShape(1, 8, 2, 4, 10, attention="flash")
>>> [(o.name, o.kind) for o in flash.operations(1)][1:3]
[('qkv', 'gemm'), ('attention', 'flash')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from queuesgd.model_shapes import TransformerShape

__all__ = [
    "ATTENTIONS",
    "FLASH_BACKWARD",
    "Operation",
    "activation_terms",
    "attention_operations",
    "extra_backward_flops",
    "gemm_operation",
    "memory_operation",
    "step_flops",
]

#: How a shape's attention core runs: Megatron-LM's eager kernels, or one fused FlashAttention kernel.
ATTENTIONS: tuple[str, ...] = ("eager", "flash")

#: A flash core's backward over its forward: five products against two (FlashAttention-2, Section 3.1.2).
FLASH_BACKWARD = 2.5


@dataclass(frozen=True)
class Operation:
    """One kernel of a forward pass on one tensor-parallel rank: a matrix product or a memory-bound op.

    Attributes
    ----------
    name : str
        ``qkv``, ``scores``, ``context``, ``proj``, ``fc1``, ``fc2``, ``logits`` (products);
        ``attention`` (a fused flash core); ``layernorm1``, ``softmax``, ... (memory-bound).
    kind : str
        ``"gemm"``; ``"flash"`` (a fused attention core: its two products in one kernel); or the
        memory-bound kind: ``"gelu"`` (element-wise), ``"layernorm"`` (norms, and the loss's softmax
        over the vocabulary) or ``"softmax"`` (the attention's, over rows of scores: Megatron-LM's
        fused kernel; see :data:`~queuesgd.gemm_table.STAND_INS`).
    flops : float
        Floating-point operations: ``2 batch m n k`` for a product, twice that for a flash core
        (its scores and context products), 0 for memory-bound ops (the textbook counts only the
        products).
    bytes : float
        Bytes moved: a product's operands and result, ``batch (m k + k n + m n) x dtype``; a flash
        core's Q, K, V read, its output written and its softmax statistics (fp32); a memory-bound
        op's reads and writes.
    m, n, k, batch : int
        A product's shape, ``batch`` products of ``(m x k) @ (k x n)`` (a flash core: its scores
        product's, ``q x d`` by ``d x s``; 0 for memory-bound ops).
    core : bool
        Part of the attention core (scores, softmax, dropout, context; or the flash kernel): what
        selective recomputation runs again (Korthikanti et al., 2022) -- eager cores only, a flash
        core's backward recomputes its scores itself.
    """

    name: str
    kind: str
    flops: float
    bytes: float
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    core: bool = False


def gemm_operation(
    name: str, m: int, n: int, k: int, batch: int, nbytes: int, core: bool = False
) -> Operation:
    """``batch`` products ``(m x k) @ (k x n)`` of ``nbytes``-byte values.

    Examples
    --------
    >>> gemm_operation("fc1", 4, 32, 8, 1, 2).flops          # 2 x 4 x 32 x 8
    2048.0
    """
    traffic = float(batch * (m * k + k * n + m * n) * nbytes)
    return Operation(name, "gemm", 2.0 * batch * m * n * k, traffic, m, n, k, batch, core)


def memory_operation(
    name: str, kind: str, elements: float, passes: int, nbytes: int, core: bool = False
) -> Operation:
    """``passes`` tensors of ``elements`` read or written (2: read one, write one).

    Examples
    --------
    >>> memory_operation("gelu", "gelu", 100, 2, 2).bytes
    400.0
    """
    return Operation(name, kind, 0.0, float(passes * elements * nbytes), core=core)


def attention_operations(
    shape: TransformerShape, microbatch: int, queries: int, tensor: int, dtype_bytes: int
) -> tuple[Operation, ...]:
    """The attention core's kernels on one of ``tensor`` ranks, ``queries`` tokens of ``b`` sequences.

    Eager (per head, ``b a / t`` of them, ``d = h / a``): the scores ``(q x d) @ (d x s)``, the
    softmax (kind ``"softmax"``) and, with ``dropout``, dropout over the ``b a q s / t`` scores,
    the context ``(q x s) @ (s x d)``. Flash: one kernel ``attention`` (kind ``"flash"``) with
    both products' FLOPs, ``4 b q s d (a / t)``; it reads Q (``b q h / t`` values), K and V
    (``b s g / t`` each, the key-value heads' width) and writes the output (``b q h / t``) and the
    log-sum-exp (``b a q / t`` fp32 values). FLOPs count the whole ``q x s`` square, as the eager
    kernels do (Narayanan et al.'s convention; a causal flash kernel skips about half its tiles,
    which this count does not model). The arguments are the caller's, already checked.

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> (op,) = attention_operations(TransformerShape(1, 8, 2, 4, 10, attention="flash"), 1, 4, 1, 2)
    >>> op.flops, op.bytes              # 4 x 4 x 4 x 8; (2 x 4 x 8 + 2 x 4 x 8) x 2 + 4 x 2 x 4
    (512.0, 288.0)
    """
    b, q, t, nb = microbatch, queries, tensor, dtype_bytes
    s, h, a = shape.sequence, shape.hidden, shape.heads
    d, heads = h // a, b * (a // t)
    if shape.attention == "flash":
        flops = 2.0 * heads * q * s * d + 2.0 * heads * q * d * s  # the scores' and the context's
        kv = b * s * (shape.kv // t) * d  # K (and V) on this rank: its key-value heads
        traffic = float((2 * heads * q * d + 2 * kv) * nb + 4 * heads * q)  # Q, O; K, V; fp32 log-sum-exp
        return (Operation("attention", "flash", flops, traffic, q, s, d, heads, core=True),)
    scores = b * a * q * s / t
    drop = [memory_operation("attention_dropout", "gelu", scores, 2, nb, core=True)] if shape.dropout else []
    return (
        gemm_operation("scores", q, s, d, heads, nb, core=True),
        memory_operation("softmax", "softmax", scores, 2, nb, core=True),
        *drop,
        gemm_operation("context", q, d, s, heads, nb, core=True),
    )


def extra_backward_flops(shape: TransformerShape, microbatch: int) -> float:
    """FLOPs one block's backward runs beyond twice its forward: ``(2.5 - 2) 4 b s^2 h`` flash, else 0.

    A flash core's backward recomputes the scores (:data:`FLASH_BACKWARD`); every other kernel's
    backward is twice its forward.

    Examples
    --------
    >>> from queuesgd.model_shapes import LLAMA3_8B
    >>> extra_backward_flops(LLAMA3_8B, 1) == 2 * 8192**2 * 4096      # 2 b s^2 h
    True
    """
    if shape.attention != "flash":
        return 0.0
    return (FLASH_BACKWARD - 2.0) * 4.0 * microbatch * shape.sequence**2 * shape.hidden


def step_flops(shape: TransformerShape, microbatch: int) -> float:
    """FLOPs the kernels of one micro-batch run, forward and backward (no activation recomputation).

    :meth:`~queuesgd.model_shapes.TransformerShape.iteration_flops` (three times the forward: the
    model's FLOPs), plus with flash the backward's recomputed scores (:func:`extra_backward_flops`
    per block): what ``shape.workload(b, flops=F)``'s compute time is, times ``F``.

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B
    >>> step_flops(GPT3_XL, 1) == GPT3_XL.iteration_flops(1)
    True
    >>> step_flops(LLAMA3_8B, 1) - LLAMA3_8B.iteration_flops(1) == 32 * 2 * 8192**2 * 4096
    True
    """
    if shape.attention != "flash":
        return shape.iteration_flops(microbatch)
    return shape.iteration_flops(microbatch) + shape.layers * extra_backward_flops(shape, microbatch)


def activation_terms(shape: TransformerShape) -> tuple[float, float, float]:
    """A block's saved activations as ``(R, S, K)``: ``s b h (R + S / t) + K a s^2 b / t`` bytes.

    ``R`` is bytes per ``s b h`` that every one of ``t`` tensor-parallel ranks
    keeps whole, ``S`` bytes per ``s b h`` split over the ``t`` ranks, ``K``
    bytes per ``a s^2 b`` of the attention core (split). As Korthikanti et al.
    (2022, Section 4.1) count them: 16-bit values (2 bytes), a dropout mask 1
    byte; ``g`` the columns of K and of V (``k h / a``), ``f`` the MLP's inner
    size. Per block, what the backward pass needs, eager attention:

    ======================================  ==============  =========  =======
    tensor kept                             ``R`` (whole)   ``S``      ``K``
    ======================================  ==============  =========  =======
    first norm's input                      2
    QKV product's input (norm's output)     2
    Q and K (the scores' inputs)                            2 + 2 g/h
    softmax output                                                     2
    dropout mask on the scores (dropout)                               1
    dropout's output (dropout)                                         2
    V (the context product's input)                         2 g/h
    projection's input (the context)                        2
    dropout mask after it (dropout)         1
    second norm's input                     2
    first MLP product's input               2
    activation's input: ``f`` (GeLU), or                    2 f/h
    ``2 f`` (gated: gate and up)                            (4 f/h)
    second MLP product's input                              2 f/h
    dropout mask after it (dropout)         1
    ======================================  ==============  =========  =======

    Without dropout the softmax output is the context product's input itself,
    kept once. So ``R = 8 (+ 2 with dropout)``, ``S = 4 + 4 g/h + (6 if gated
    else 4) f/h``, ``K = 2 (+ 3 with dropout)``: GPT (``g = h``, ``f = 4 h``,
    GeLU, dropout) has ``(10, 24, 5)``, Korthikanti's Table 2 (``s b h (10 +
    24/t + 5 a s/(h t))``) and at ``t = 1`` eq. 2's ``34 + 5 a s / h``. K and V
    are kept as their product makes them (``g`` columns), not repeated to
    ``a`` heads. Integers where whole, so that GPT's bytes stay bit for bit.

    **Flash attention** (``attention="flash"``), term by term against that table:
    Q, K, V stay (the fused backward reads them: ``2 + 4 g/h`` in ``S``); the
    output stays -- it is the projection's input, already the ``2`` in ``S``,
    kept once; the softmax output, the scores' dropout mask and dropout's output
    go (the kernel never writes the ``s x s`` matrix, and regenerates its
    dropout mask from the random generator's state): ``K = 0``; the softmax
    statistics come in, one fp32 log-sum-exp per query row and head, ``4 b a s
    / t`` bytes, that is ``4 a / h`` in ``S``. The other rows are unchanged
    (the two residual dropout masks with dropout). So flash has ``(R, S + 4 a
    / h, 0)``; selective recomputation (which drops the ``K`` part) then saves
    nothing more: a flash core has nothing of size ``s^2`` to drop.

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B, TransformerShape
    >>> activation_terms(GPT3_XL), activation_terms(LLAMA3_8B)    # Llama: 4 + 4/4 + 6 x 3.5 + 4 x 32/4096
    ((10, 24, 5), (8, 26.03125, 0))
    >>> activation_terms(TransformerShape(1, 8, 2, 4, 10, attention="flash"))   # 24 + 4 x 2 / 8
    (10, 25, 0)
    """
    h, g, f = shape.hidden, shape.kv_hidden, shape.ffn
    flash = shape.attention == "flash"
    split = 4 * h + 4 * g + (6 if shape.gated else 4) * f + (4 * shape.heads if flash else 0)
    whole = 10 if shape.dropout else 8
    core = 0 if flash else (5 if shape.dropout else 2)
    return whole, (split // h if split % h == 0 else split / h), core
