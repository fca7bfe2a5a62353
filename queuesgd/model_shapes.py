"""Workloads from a model's published shapes: a GPT-style transformer's layer profile without running it.

Large models are planned before anyone can profile them. Their shapes are
published (layers, hidden size, heads, sequence length, vocabulary), and
from the shapes follow, exactly, the parameter count of every layer and the
floating-point operations of every matrix product. :class:`TransformerShape`
turns them into a layer-wise :class:`~queuesgd.Workload` (in backward order,
with forward and backward times), from which every scheme's fine model --
data parallel, sharded data parallel, pipelines and their hybrids -- can be
predicted.

What is exact and what is assumed:

- **Parameters** per block ``12 h^2 + 13 h`` (attention ``4 h^2 + 4 h``,
  MLP with a ``4 h`` inner size ``8 h^2 + 5 h``, two layer norms ``4 h``);
  token and position embeddings ``V h + s h``; the final layer norm ``2 h``;
  the output layer shares the token embedding (GPT-2/GPT-3).
- **Forward FLOPs** per block and micro-batch of ``b`` sequences:
  ``24 b s h^2 + 4 b s^2 h`` (the matrix products; Narayanan et al., SC
  2021, eq. 3), the logits ``2 b s h V``; backward is twice the forward.
  Over the whole model that is ``72 b s l h^2 (1 + s / (6 h) + V / (12 l h))``
  per iteration: Narayanan et al.'s ``96 ...`` without activation
  recomputation (which adds one more forward).
- **Times** are FLOPs over a *sustained* rate ``flops`` (assumed; 125
  TFLOP/s, 40% of an A100's 16-bit peak); element-wise kernels uncounted. With a
  :class:`~queuesgd.compute_model.ComputeModel` (``workload(compute=)``)
  each kernel of :meth:`TransformerShape.operations` is timed instead, at
  its shape's GEMM efficiency or its memory traffic. The optimizer step reads
  and writes ``update_bytes_per_parameter`` bytes per parameter at
  ``memory_bandwidth`` (Adam with fp32 master weights, moments, a 16-bit copy: ~32 bytes).
- **Activations** one micro-batch keeps for the backward pass, per block, ``s b h (34 + 5 a s / h)``
  bytes (Korthikanti et al., 2022, eq. 2); a pipeline boundary sends ``s b h`` values.
- **The MLP** (and each expert of a mixture): :mod:`~queuesgd.model_shapes_mlp`.
- **Llama-style models** (grouped-query attention ``kv_heads``, a gated MLP
  of inner size ``ffn_hidden``, no biases, RMSNorm, an untied output layer,
  rotary positions, no dropout): optional fields, each count above
  generalized term by term (:attr:`TransformerShape.block_parameters`,
  :meth:`TransformerShape.activation_terms`); the defaults are GPT's, bit for
  bit. :data:`LLAMA3_8B`, :data:`LLAMA3_70B`, :data:`LLAMA3_405B`.
- **Flash attention** (``attention="flash"``; the Llama 3 presets): the
  attention core is one fused kernel (:mod:`~queuesgd.model_shapes_attention`)
  with the same FLOPs; its backward runs 2.5 times its forward (it recomputes
  the scores), and a block keeps no ``s^2`` activations, only the softmax's
  log-sum-exp (``4 b a s`` bytes).

Examples
--------
>>> gpt = GPT3_XL
>>> gpt.parameters      # "1.3B" (Brown et al. 2020): 24 x 50,358,272 + 52,305 x 2048 + 4096
1315723264
>>> w = gpt.workload(microbatch=1)
>>> len(w.layers), w.layers[0].name, w.layers[-1].name
(26, 'final_norm', 'embedding')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from queuesgd import _checks, units
from queuesgd import model_shapes_mlp as mlp
from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes_attention import (
    ATTENTIONS,
    Operation,
    activation_terms,
    attention_operations,
    extra_backward_flops,
    gemm_operation,
    memory_operation,
)

__all__ = [
    "ATTENTIONS",
    "GPT3_XL",
    "LLAMA3_405B",
    "LLAMA3_70B",
    "LLAMA3_8B",
    "LLAMA_STYLE",
    "MAX_DIMENSION",
    "MAX_LAYERS",
    "NORMS",
    "Operation",
    "TransformerShape",
]

#: The normalizations a block may use: LayerNorm (weight and bias, ``2 h``), RMSNorm (a weight, ``h``).
NORMS: tuple[str, ...] = ("layernorm", "rmsnorm")

#: Most blocks a shape has: its workload holds one :class:`~queuesgd.workload.Layer` per block (the
#: largest published models have about 100).
MAX_LAYERS = 10_000

#: Largest hidden size, heads, sequence and vocabulary: far above any published model, and small
#: enough that every count stays an exact integer and every FLOP count a finite float.
MAX_DIMENSION = 2**31


def _microbatch(value: Any) -> int:
    """A micro-batch of sequences: an integer from 1 to the largest batch a workload takes."""
    from queuesgd.workload import MAX_BATCH_SIZE

    b = _checks.integer("microbatch", value)
    if b > MAX_BATCH_SIZE:
        raise InvalidParameterError("microbatch", value, f"an integer from 1 to {MAX_BATCH_SIZE:,} (2**53)")
    return b


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer, by its published shapes (GPT-2/3 by default; Llama-style by its fields).

    Parameters
    ----------
    layers : int
        Transformer blocks ``l``.
    hidden : int
        Hidden size ``h``.
    heads : int
        Attention (query) heads ``a`` (``h`` must be a multiple; ``d = h / a``).
    sequence : int
        Tokens per sequence ``s``.
    vocabulary : int
        Vocabulary size ``V``.
    name : str
        For the workload.
    kv_heads : int or None
        Key-value heads ``k`` (grouped-query attention; a divisor of ``heads``); None: ``heads``.
        K and V are each ``h x k d``.
    ffn_hidden : int or None
        The MLP's inner size ``f``; None: ``4 h``.
    gated : bool
        A gated MLP (SwiGLU): the first product makes ``2 f`` columns (gate and up), SiLU(gate) x up
        goes into the second (``f -> h``); else ``h -> f``, GeLU, ``f -> h``.
    bias : bool
        The linear layers have biases (GPT: True; Llama: False).
    norm : {"layernorm", "rmsnorm"}
        LayerNorm (weight and bias, ``2 h``) or RMSNorm (a weight, ``h``).
    tied_embeddings : bool
        The output layer shares the token embedding (GPT); False: its own ``V x h`` matrix.
    position_embedding : bool
        A learned position embedding of ``s h`` parameters (GPT); False: rotary, no parameters.
    dropout : bool
        Dropout after the softmax and after each block's two sub-layers (GPT); False (Llama):
        no masks kept, no dropout kernels.
    attention : {"eager", "flash"}
        The attention core: Megatron-LM's eager kernels (scores, softmax, dropout, context; the
        ``s x s`` scores kept), or one fused FlashAttention kernel (the Llama 3 presets; see
        :mod:`~queuesgd.model_shapes_attention`).

    Examples
    --------
    >>> t = TransformerShape(layers=2, hidden=8, heads=2, sequence=4, vocabulary=10)
    >>> t.block_parameters, t.parameters            # 12 x 64 + 13 x 8; 2 x 872 + 80 + 32 + 16
    (872, 1872)
    >>> LLAMA3_8B.parameters                         # Hugging Face's count of Llama-3.1-8B
    8030261248
    """

    layers: int
    hidden: int
    heads: int
    sequence: int
    vocabulary: int
    name: str = "transformer"
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    gated: bool = False
    bias: bool = True
    norm: str = "layernorm"
    tied_embeddings: bool = True
    position_embedding: bool = True
    dropout: bool = True
    attention: str = "eager"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for f in ("layers", "hidden", "heads", "sequence", "vocabulary", "kv_heads", "ffn_hidden"):
            field = f"TransformerShape.{f}"
            if f in ("kv_heads", "ffn_hidden") and getattr(self, f) is None:
                continue
            value = _checks.integer(field, getattr(self, f))
            most = MAX_LAYERS if f == "layers" else MAX_DIMENSION
            if value > most:
                why = " (the workload has one layer per block)" if f == "layers" else ""
                none = "None or " if f in ("kv_heads", "ffn_hidden") else ""
                raise InvalidParameterError(field, value, f"{none}an integer from 1 to {most:,}{why}")
            set_(self, f, value)
        set_(self, "name", _checks.name("TransformerShape.name", self.name))
        for f in ("gated", "bias", "tied_embeddings", "position_embedding", "dropout"):
            set_(self, f, _checks.boolean(f"TransformerShape.{f}", getattr(self, f)))
        set_(self, "norm", _checks.choice("TransformerShape.norm", self.norm, NORMS))
        set_(self, "attention", _checks.choice("TransformerShape.attention", self.attention, ATTENTIONS))
        if self.hidden % self.heads:
            raise InvalidParameterError(
                "TransformerShape.heads", self.heads, f"a divisor of hidden (= {self.hidden})"
            )
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise InvalidParameterError(
                "TransformerShape.kv_heads", self.kv_heads, f"None or a divisor of heads (= {self.heads})"
            )

    # ---- the resolved fields ----------------------------------------------------------------
    @property
    def kv(self) -> int:
        """Key-value heads ``k``: ``kv_heads``, or ``heads`` (multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def kv_hidden(self) -> int:
        """Columns of K (and of V): ``g = k d = k h / a`` (``h`` without grouped-query attention)."""
        return self.kv * (self.hidden // self.heads)

    @property
    def ffn(self) -> int:
        """The MLP's inner size ``f``: ``ffn_hidden``, or ``4 h``."""
        return 4 * self.hidden if self.ffn_hidden is None else self.ffn_hidden

    @property
    def mlp_parameters(self) -> int:
        """One block's MLP parameters, each expert's in a mixture (:func:`~.model_shapes_mlp.mlp_parameters`).

        >>> GPT3_XL.mlp_parameters == 8 * 2048**2 + 5 * 2048
        True
        """
        return mlp.mlp_parameters(self)

    def mlp_flops(self, microbatch: int = 1) -> float:
        """Forward FLOPs of one block's MLP (:func:`~.model_shapes_mlp.mlp_flops`).

        >>> GPT3_XL.mlp_flops(1) == 16 * 2048 * 2048**2
        True
        """
        return mlp.mlp_flops(self, _microbatch(microbatch))

    def check_tensor(self, tensor: Any, field: str = "tensor") -> int:
        """``tensor`` if ``t`` ranks can split a block (Megatron's rules), else an error naming ``field``.

        ``t`` must divide the heads, the key-value heads (Megatron's ``num_query_groups``) and the
        MLP's inner size.

        Examples
        --------
        >>> LLAMA3_8B.check_tensor(8)
        8
        >>> LLAMA3_8B.check_tensor(16)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: tensor: ... a divisor of the 8 key-value heads ...
        """
        t = _checks.integer(field, tensor, maximum=MAX_DIMENSION)
        if self.heads % t:
            raise InvalidParameterError(field, tensor, f"a divisor of the {self.heads} heads")
        if self.kv % t:
            raise InvalidParameterError(
                field, tensor, f"a divisor of the {self.kv} key-value heads (Megatron's num_query_groups)"
            )
        if self.ffn % t:
            raise InvalidParameterError(field, tensor, f"a divisor of ffn_hidden (= {self.ffn})")
        return t

    # ---- counts (exact) ---------------------------------------------------------------------
    @property
    def norm_parameters(self) -> int:
        """Parameters of one normalization: ``2 h`` (LayerNorm), ``h`` (RMSNorm)."""
        return (2 if self.norm == "layernorm" else 1) * self.hidden

    @property
    def block_parameters(self) -> int:
        """Parameters of one block: ``12 h^2 + 13 h`` for GPT.

        Attention ``2 h^2 + 2 h g`` (Q and the output ``h x h``, K and V ``h x g``; biases ``2 h + 2 g``),
        MLP ``(3 if gated else 2) h f`` (biases ``(2 f if gated else f) + h``), two norms.

        Examples
        --------
        >>> h, g, f = 4096, 1024, 14336          # Llama 3 8B: no biases, two RMSNorm weights
        >>> LLAMA3_8B.block_parameters == 2 * h * h + 2 * h * g + 3 * h * f + 2 * h
        True
        """
        h, g = self.hidden, self.kv_hidden
        attention = 2 * h * h + 2 * h * g + (2 * h + 2 * g if self.bias else 0)
        return attention + self.mlp_parameters + 2 * self.norm_parameters

    @property
    def embedding_parameters(self) -> int:
        """The first stage's embeddings: token ``V h`` and (if learned) position ``s h``."""
        return (self.vocabulary + (self.sequence if self.position_embedding else 0)) * self.hidden

    @property
    def output_parameters(self) -> int:
        """The last stage's own: the final norm (``2 h`` or ``h``) and, untied, the output matrix ``V h``."""
        return self.norm_parameters + (0 if self.tied_embeddings else self.vocabulary * self.hidden)

    @property
    def parameters(self) -> int:
        """All parameters: ``l (12 h^2 + 13 h) + V h + s h + 2 h`` for GPT."""
        return self.layers * self.block_parameters + self.embedding_parameters + self.output_parameters

    def block_flops(self, microbatch: int = 1) -> float:
        """Forward FLOPs of one block for ``microbatch`` sequences: ``24 b s h^2 + 4 b s^2 h`` for GPT.

        In general ``2 b s (h (h + 2 g) + h^2 + (2 if gated else 1) h f + f h) + 4 b s^2 h``: the
        products of :meth:`operations` (the attention core ``4 b s^2 h`` whatever ``g``, eager or flash).

        Examples
        --------
        >>> TransformerShape(1, 8, 2, 4, 10).block_flops(1)     # 24 x 4 x 64 + 4 x 16 x 8
        6656.0
        """
        b, s, h, g = _microbatch(microbatch), self.sequence, self.hidden, self.kv_hidden
        return float(2 * b * s * (h * (h + 2 * g) + h * h) + self.mlp_flops(b) + 4 * b * s * s * h)

    def logits_flops(self, microbatch: int = 1) -> float:
        """Forward FLOPs of the output layer (logits): ``2 b s h V``."""
        return float(2 * _microbatch(microbatch) * self.sequence * self.hidden * self.vocabulary)

    def iteration_flops(self, microbatch: int = 1) -> float:
        """Forward and backward FLOPs of one micro-batch: three times the forward.

        Examples
        --------
        >>> t = GPT3_XL
        >>> b, s, l, h, V = 1, t.sequence, t.layers, t.hidden, t.vocabulary
        >>> t.iteration_flops(1) == 72 * b * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
        True
        """
        return 3.0 * (self.layers * self.block_flops(microbatch) + self.logits_flops(microbatch))

    def activation_terms(self) -> tuple[float, float, float]:
        """A block's saved activations as ``(R, S, K)``: ``s b h (R + S / t) + K a s^2 b / t`` bytes.

        ``R`` bytes per ``s b h`` every tensor-parallel rank keeps whole, ``S`` those split over
        ``t`` ranks, ``K`` bytes per ``a s^2 b`` of the attention core;
        :func:`~queuesgd.model_shapes_attention.activation_terms` derives them term by term. GPT's
        ``(10, 24, 5)`` is Korthikanti et al.'s (2022) eq. 2, ``34 + 5 a s / h`` at ``t = 1``; flash
        attention keeps no ``s^2`` term (``K = 0``) and ``4 a / h`` more in ``S`` (the log-sum-exp).

        Examples
        --------
        >>> GPT3_XL.activation_terms(), LLAMA3_8B.activation_terms()    # Llama 3: flash
        ((10, 24, 5), (8, 26.03125, 0))
        """
        return activation_terms(self)

    def activation_bytes(self, microbatch: int = 1) -> float:
        """Bytes one micro-batch keeps for the backward pass, whole model: ``l s b h (34 + 5 a s / h)`` (GPT).

        Korthikanti et al. (2022), eq. 2, 16-bit activations without recomputation; in general
        ``l s b h (R + S + K a s / h)`` (:meth:`activation_terms`).
        """
        b, s, h, a = _microbatch(microbatch), self.sequence, self.hidden, self.heads
        whole, split, core = self.activation_terms()
        return float(self.layers * s * b * h * (whole + split + core * a * s / h))

    def boundary_bytes(self, microbatch: int = 1, dtype_bytes: int = 2) -> float:
        """Bytes a pipeline boundary sends per micro-batch (the hidden states ``s b h``)."""
        nbytes = _checks.integer("dtype_bytes", dtype_bytes, maximum=16)
        return float(_microbatch(microbatch) * self.sequence * self.hidden * nbytes)

    # ---- operations (exact) --------------------------------------------------------------------
    def _split(self, microbatch: int, tensor: int, dtype_bytes: int) -> tuple[int, int, int]:
        b = _microbatch(microbatch)
        t = self.check_tensor(tensor)
        return b, t, _checks.integer("dtype_bytes", dtype_bytes, maximum=16)

    def _context(self, context: int) -> int:
        """Tokens of the sequence on one of ``context`` ranks (``s / c``, a whole number)."""
        c = _checks.integer("context", context, maximum=MAX_DIMENSION)
        if self.sequence % c:
            raise InvalidParameterError("context", context, f"a divisor of the sequence (= {self.sequence})")
        return self.sequence // c

    def operations(
        self,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        sequence_parallel: bool = False,
        dtype_bytes: int = 2,
        context: int = 1,
    ) -> tuple[Operation, ...]:
        """The kernels of one block's forward pass on one of ``tensor`` ranks (Megatron's layout).

        Products, ``M = b s`` tokens: QKV ``(M x h) @ (h x (h + 2g)/t)`` (``g = h`` but with
        grouped-query attention) and the first MLP product ``(M x h) @ (h x f/t)`` (``2f/t``
        gated) split by columns, the projection ``(M x h/t) @ (h/t x h)`` and the second MLP
        product ``(M x f/t) @ (f/t x h)`` by rows; per head (``b a / t`` of them, ``d = h / a``)
        the scores ``(s x d) @ (d x s)`` and the context ``(s x s) @ (s x d)``. Together
        :meth:`block_flops` over ``t`` (GPT: ``(24 b s h^2 + 4 b s^2 h) / t``). Memory-bound: two
        norms (LayerNorm or RMSNorm, kind ``"layernorm"``) and two residual adds (with dropout
        before them when ``dropout``) over ``b s h`` values (``b s h / t`` with sequence
        parallelism; the adds read two tensors and write one), softmax (kind ``"softmax"``) and
        (with ``dropout``) dropout over the ``b a s^2 / t`` scores, GeLU over ``b s f / t``
        (read, write); gated, SiLU-and-multiply reads the gate and the up halves and writes one:
        three passes of ``b s f / t`` (kind ``"gelu"``, element-wise). With ``attention="flash"``
        scores, softmax, dropout and context are one kernel ``attention`` of kind ``"flash"``
        with the two products' FLOPs
        (:func:`~queuesgd.model_shapes_attention.attention_operations`).

        With ``context`` ranks (context parallelism) each holds ``s / c`` of the sequence's
        tokens: every ``M`` is ``b s / c``, and its queries meet the whole sequence's keys and
        values (gathered): scores ``(s/c x d) @ (d x s)``, context ``(s/c x s) @ (s x d)``, so
        the FLOPs are :meth:`block_flops` over ``t c`` (Megatron-Core's context parallelism).

        Examples
        --------
        >>> ops = TransformerShape(1, 8, 2, 4, 10).operations(1)
        >>> for o in ops:
        ...     if o.kind == "gemm":
        ...         print(o.name, o.m, o.n, o.k, o.batch)
        qkv 4 24 8 1
        scores 4 4 4 2
        context 4 4 4 2
        proj 4 8 8 1
        fc1 4 32 8 1
        fc2 4 8 32 1
        >>> sum(o.flops for o in ops) == TransformerShape(1, 8, 2, 4, 10).block_flops(1)
        True
        >>> [o.n for o in LLAMA3_8B.operations(1, tensor=8) if o.name in ("qkv", "fc1")]   # 6144/8, 28672/8
        [768, 3584]
        >>> [o.name for o in LLAMA3_8B.operations(1) if o.core]                # flash: one fused kernel
        ['attention']
        """
        b, t, nb = self._split(microbatch, tensor, dtype_bytes)
        h, g = self.hidden, self.kv_hidden
        q = self._context(context)  # this rank's tokens of the sequence (its queries)
        tokens = b * q
        sp = _checks.boolean("sequence_parallel", sequence_parallel)
        hidden = tokens * h / (t if sp else 1)
        norm, drop = self.norm, "dropout_residual" if self.dropout else "residual"
        _gemm, _memory = gemm_operation, memory_operation
        return (
            _memory(f"{norm}1", "layernorm", hidden, 2, nb),
            _gemm("qkv", tokens, (h + 2 * g) // t, h, 1, nb),
            *attention_operations(self, b, q, t, nb),
            _gemm("proj", tokens, h, h // t, 1, nb),
            _memory(f"{drop}1", "gelu", hidden, 3, nb),
            _memory(f"{norm}2", "layernorm", hidden, 2, nb),
            *self.mlp_operations(tokens, tensor=t, dtype_bytes=nb),
            _memory(f"{drop}2", "gelu", hidden, 3, nb),
        )

    def mlp_operations(self, rows: int, *, tensor: int = 1, dtype_bytes: int = 2) -> tuple[Operation, ...]:
        """The MLP's kernels on ``rows`` tokens (:func:`~.model_shapes_mlp.mlp_operations`).

        >>> " ".join(o.name for o in LLAMA3_8B.mlp_operations(512, tensor=2))
        'fc1 swiglu fc2'
        """
        _, t, nb = self._split(1, tensor, dtype_bytes)
        return mlp.mlp_operations(self, _checks.integer("rows", rows, maximum=2**62), t, nb)

    def head_operations(
        self,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        sequence_parallel: bool = False,
        dtype_bytes: int = 2,
        context: int = 1,
    ) -> tuple[Operation, ...]:
        """The output layer's forward kernels on one of ``tensor`` ranks: final norm, logits, loss.

        The logits ``(b s x h) @ (h x V/t)`` (vocabulary-parallel, ``2 b s h V / t`` FLOPs) and
        the cross-entropy's softmax over ``b s V / t`` values. The embedding lookup is not
        counted (a gather of ``b s h`` values). ``context``: ``b s / c`` tokens, as :meth:`operations`.

        Examples
        --------
        >>> [o.name for o in TransformerShape(1, 8, 2, 4, 10).head_operations(1)]
        ['final_layernorm', 'logits', 'cross_entropy']
        """
        b, t, nb = self._split(microbatch, tensor, dtype_bytes)
        h, V = self.hidden, self.vocabulary
        sp = _checks.boolean("sequence_parallel", sequence_parallel)
        tokens = b * self._context(context)
        vocab = V // t if V % t == 0 else V / t  # Megatron pads V to a multiple of t; the count does not
        return (
            memory_operation(f"final_{self.norm}", "layernorm", tokens * h / (t if sp else 1), 2, nb),
            gemm_operation("logits", tokens, vocab, h, 1, nb),  # type: ignore[arg-type]
            memory_operation("cross_entropy", "layernorm", tokens * vocab, 2, nb),
        )

    # ---- the workload --------------------------------------------------------------------------
    def workload(
        self,
        microbatch: int = 1,
        *,
        flops: float = 125e12,
        dtype_bytes: int = 2,
        memory_bandwidth: float | str = "1.5TB/s",
        update_bytes_per_parameter: float = 32.0,
        compute: Any = None,
    ) -> Any:
        """The layer-wise workload of one micro-batch of ``microbatch`` sequences.

        Layers in backward order: ``final_norm`` (with the logits), the
        blocks from last to first, then ``embedding``. Each layer's gradient
        is its parameters times ``dtype_bytes``; its forward time its forward
        FLOPs over ``flops`` (a sustained FLOP/s rate, an assumption), its
        backward time twice that (with flash attention ``2 b s^2 h`` FLOPs
        more: the core's backward is 2.5 times its forward). ``update_time`` is the optimizer step,
        memory bound: ``parameters x update_bytes_per_parameter /
        memory_bandwidth``. ``batch_size`` is ``microbatch`` sequences.

        With ``compute`` (a :class:`~queuesgd.compute_model.ComputeModel`)
        the forward times are its per-operation times instead (each
        product at its shape's efficiency, memory-bound kernels at their
        bandwidth; ``flops`` is then not used), backward as
        :meth:`~queuesgd.compute_model.ComputeModel.block_parts` says (twice
        the forward; a flash core's 2.5 times).

        Examples
        --------
        >>> w = GPT3_XL.workload(1, flops=1e14)
        >>> round(w.compute_time, 5), w.gradient_bytes    # 1.8582e13 FLOPs / 1e14 FLOP/s; 2 B/parameter
        (0.18582, 2631446528.0)
        """
        from queuesgd.workload import Layer, Workload

        rate = _checks.positive("flops", flops)
        mem = _checks.positive(
            "memory_bandwidth", units.parse_bandwidth(memory_bandwidth, "memory_bandwidth")
        )
        nbytes = _checks.integer("dtype_bytes", dtype_bytes, maximum=16)
        per_parameter = _checks.positive(
            "update_bytes_per_parameter", update_bytes_per_parameter, allow_zero=True
        )
        if compute is None:
            block_f = self.block_flops(microbatch) / rate
            block_b = 2 * block_f + extra_backward_flops(self, _microbatch(microbatch)) / rate
            head_f = self.logits_flops(microbatch) / rate
        else:
            if not callable(getattr(compute, "block_parts", None)):
                raise InvalidParameterError("compute", compute, "None or a ComputeModel")
            block_f, block_b, _, head_f = compute.block_parts(self, microbatch, dtype_bytes=nbytes)
        if not max(block_b, 2 * head_f) <= units.MAX_SECONDS:  # a layer's time past 32 years: name the rate
            why = f"a rate at which a layer takes at most {units.MAX_SECONDS:g} s (a block: {block_b:.3g} s)"
            raise InvalidParameterError("flops" if compute is None else "compute", flops, why)
        layers = [Layer("final_norm", self.output_parameters * nbytes, 2 * head_f, forward_time=head_f)]
        for i in reversed(range(self.layers)):
            layers.append(Layer(f"block{i}", self.block_parameters * nbytes, block_b, forward_time=block_f))
        layers.append(Layer("embedding", self.embedding_parameters * nbytes, 0.0, forward_time=0.0))
        params = self.parameters * nbytes
        compute = sum(layer.backward_time + layer.forward_time for layer in layers)
        return Workload(
            compute,
            params,
            parameter_bytes=params,
            batch_size=_microbatch(microbatch),
            update_time=self.parameters * per_parameter / mem,
            layers=layers,
            name=f"{self.name} (micro-batch {microbatch})",
        )



#: GPT-3 XL, "1.3B" (Brown et al., 2020, Table 2.1): 24 layers, hidden 2048, 16 heads (the table's
#: d_head 128), context 2048, GPT-2's vocabulary of 50257 tokens.
GPT3_XL = TransformerShape(layers=24, hidden=2048, heads=16, sequence=2048, vocabulary=50257, name="gpt3-xl")


#: The fields that make a shape Llama-style (the presets below; the text form's ``:llama``): SwiGLU,
#: RMSNorm, no biases, an untied output layer, rotary positions, no dropout, flash attention.
LLAMA_STYLE: Mapping[str, Any] = MappingProxyType(
    {
        "gated": True,
        "bias": False,
        "norm": "rmsnorm",
        "tied_embeddings": False,
        "position_embedding": False,
        "dropout": False,
        "attention": "flash",
    }
)

#: Llama 3 / 3.1, 8B (Meta, *The Llama 3 Herd of Models*, 2024, Table 3; the Hugging Face
#: ``config.json``): 32 layers, hidden 4096, 32 heads and 8 key-value heads, SwiGLU of 14336, RMSNorm,
#: no biases, untied output layer, rotary positions, no dropout; 8192 tokens, vocabulary 128256; flash
#: attention (as Llama 3 is trained: a fused attention kernel, no s x s activations).
LLAMA3_8B = TransformerShape(
    32, 4096, 32, 8192, 128256, "llama3-8b", kv_heads=8, ffn_hidden=14336, **LLAMA_STYLE
)
#: Llama 3 70B: 80 layers, hidden 8192, 64 heads (8 key-value), SwiGLU of 28672; otherwise as 8B.
LLAMA3_70B = TransformerShape(
    80, 8192, 64, 8192, 128256, "llama3-70b", kv_heads=8, ffn_hidden=28672, **LLAMA_STYLE
)
#: Llama 3.1 405B: 126 layers, hidden 16384, 128 heads (8 key-value), SwiGLU of 53248; otherwise as 8B.
LLAMA3_405B = TransformerShape(
    126, 16384, 128, 8192, 128256, "llama3-405b", kv_heads=8, ffn_hidden=53248, **LLAMA_STYLE
)
