"""What a Llama-style :class:`~queuesgd.model_shapes.TransformerShape` adds: its activations, its text form.

- :func:`activation_terms` -- the bytes one block keeps for its backward pass,
  derived term by term for grouped-query attention, a gated MLP of any inner
  size, with or without dropout (Korthikanti et al., 2022, Section 4.1, whose
  GPT case is eq. 2's ``34 + 5 a s / h``).
- :func:`parse_shape_text` -- ``"l:h:a:s:V"`` with optional keywords for the
  Llama fields, as ``HybridParallel(shape=...)`` and ``--shape`` take it.

Examples
--------
>>> parse_shape_text("32:4096:32:8192:128256:kv=8:ffn=14336:llama").parameters    # Llama 3.1 8B
8030261248
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd.errors import InvalidParameterError

if TYPE_CHECKING:
    from queuesgd.model_shapes import TransformerShape

__all__ = ["SHAPE_TEXT", "activation_terms", "parse_shape_text"]

#: The text form of a shape, as error messages state it.
SHAPE_TEXT = (
    "'layers:hidden:heads:sequence:vocabulary' (e.g. 96:12288:96:2048:51200), optionally followed by "
    ":kv=K, :ffn=F and the flags :gated, :rmsnorm, :nobias, :untied, :rope, :nodropout, or :llama for "
    "all six (e.g. 32:4096:32:8192:128256:kv=8:ffn=14336:llama)"
)

#: The flags of the text form: the field each sets, and to what.
_FLAGS: dict[str, tuple[tuple[str, Any], ...]] = {
    "gated": (("gated", True),),
    "rmsnorm": (("norm", "rmsnorm"),),
    "nobias": (("bias", False),),
    "untied": (("tied_embeddings", False),),
    "rope": (("position_embedding", False),),
    "nodropout": (("dropout", False),),
}
_FLAGS["llama"] = tuple(pair for pairs in _FLAGS.values() for pair in pairs)
_NUMBERS = {"kv": "kv_heads", "ffn": "ffn_hidden"}


def activation_terms(shape: TransformerShape) -> tuple[float, float, float]:
    """A block's saved activations as ``(R, S, K)``: ``s b h (R + S / t) + K a s^2 b / t`` bytes.

    ``R`` is bytes per ``s b h`` that every one of ``t`` tensor-parallel ranks
    keeps whole, ``S`` bytes per ``s b h`` split over the ``t`` ranks, ``K``
    bytes per ``a s^2 b`` of the attention core (split). As Korthikanti et al.
    (2022, Section 4.1) count them: 16-bit values (2 bytes), a dropout mask 1
    byte; ``g`` the columns of K and of V (``k h / a``), ``f`` the MLP's inner
    size. Per block, what the backward pass needs:

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

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B
    >>> activation_terms(GPT3_XL), activation_terms(LLAMA3_8B)    # Llama: 4 + 4/4 + 6 x 3.5 = 26
    ((10, 24, 5), (8, 26, 2))
    """
    h, g, f = shape.hidden, shape.kv_hidden, shape.ffn
    split = 4 * h + 4 * g + (6 if shape.gated else 4) * f
    whole = 10 if shape.dropout else 8
    return whole, (split // h if split % h == 0 else split / h), (5 if shape.dropout else 2)


def parse_shape_text(text: str, field: str = "shape", name: str = "transformer") -> TransformerShape:
    """A :class:`~queuesgd.model_shapes.TransformerShape` from its text form (:data:`SHAPE_TEXT`).

    ``l:h:a:s:V`` (GPT-style), then any of ``kv=K`` (``kv_heads``), ``ffn=F``
    (``ffn_hidden``), ``gated``, ``rmsnorm``, ``nobias``, ``untied``
    (``tied_embeddings=False``), ``rope`` (``position_embedding=False``),
    ``nodropout``, and ``llama`` (the six flags). Anything else is refused on
    ``field`` with InvalidParameterError.

    Examples
    --------
    >>> parse_shape_text("96:12288:96:2048:51200").parameters       # GPT-3 175B
    174615846912
    >>> s = parse_shape_text("4:512:8:1024:32000:kv=2:ffn=1376:gated:rmsnorm:nobias:untied")
    >>> s.kv_heads, s.ffn_hidden, s.gated, s.norm, s.bias, s.tied_embeddings, s.position_embedding
    (2, 1376, True, 'rmsnorm', False, False, True)
    """
    from queuesgd.model_shapes import TransformerShape

    accepted = f"a TransformerShape, None, or {SHAPE_TEXT}"
    if not isinstance(text, str):
        raise InvalidParameterError(field, text, accepted)
    parts = [p.strip() for p in text.split(":")]
    if len(parts) < 5 or not all(p.isascii() and p.isdigit() for p in parts[:5]):
        raise InvalidParameterError(field, text, accepted)
    keywords: dict[str, Any] = {}
    for part in parts[5:]:
        key, equals, number = part.partition("=")
        if equals and key in _NUMBERS and number.isascii() and number.isdigit():
            keywords[_NUMBERS[key]] = int(number)
        elif not equals and part in _FLAGS:
            keywords.update(_FLAGS[part])
        else:
            raise InvalidParameterError(field, text, f"{accepted}; not {part!r}")
    return TransformerShape(*(int(p) for p in parts[:5]), name=name, **keywords)
