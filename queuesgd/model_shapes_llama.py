"""What a Llama-style :class:`~queuesgd.model_shapes.TransformerShape` adds: its activations, its text form.

- :func:`activation_terms` -- the bytes one block keeps for its backward pass,
  derived term by term for grouped-query attention, a gated MLP of any inner
  size, with or without dropout, eager or flash attention (Korthikanti et al.,
  2022, Section 4.1, whose GPT case is eq. 2's ``34 + 5 a s / h``); it lives in
  :mod:`queuesgd.model_shapes_attention` (which the shape imports) and is
  re-exported here.
- :func:`parse_shape_text` -- ``"l:h:a:s:V"`` with optional keywords for the
  Llama fields, as ``HybridParallel(shape=...)`` and ``--shape`` take it;
  :func:`parse_shape` -- a shape, or None, from itself or that text.

Examples
--------
>>> parse_shape_text("32:4096:32:8192:128256:kv=8:ffn=14336:llama").parameters    # Llama 3.1 8B
8030261248
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes import LLAMA_STYLE
from queuesgd.model_shapes_attention import activation_terms

if TYPE_CHECKING:
    from queuesgd.model_shapes import TransformerShape

__all__ = ["SHAPE_TEXT", "activation_terms", "parse_shape", "parse_shape_text"]

#: The text form of a shape, as error messages state it.
SHAPE_TEXT = (
    "'layers:hidden:heads:sequence:vocabulary' (e.g. 96:12288:96:2048:51200), optionally followed by "
    ":kv=K, :ffn=F and the flags :gated, :rmsnorm, :nobias, :untied, :rope, :nodropout, :flash, or :llama "
    "for all seven (e.g. 32:4096:32:8192:128256:kv=8:ffn=14336:llama)"
)

#: The flags of the text form: the field each sets, and to what.
_FLAGS: dict[str, tuple[tuple[str, Any], ...]] = {
    "gated": (("gated", True),),
    "rmsnorm": (("norm", "rmsnorm"),),
    "nobias": (("bias", False),),
    "untied": (("tied_embeddings", False),),
    "rope": (("position_embedding", False),),
    "nodropout": (("dropout", False),),
    "flash": (("attention", "flash"),),
}
_FLAGS["llama"] = tuple(LLAMA_STYLE.items())  # the presets' fields, the seven flags together
_NUMBERS = {"kv": "kv_heads", "ffn": "ffn_hidden"}


def parse_shape_text(text: str, field: str = "shape", name: str = "transformer") -> TransformerShape:
    """A :class:`~queuesgd.model_shapes.TransformerShape` from its text form (:data:`SHAPE_TEXT`).

    ``l:h:a:s:V`` (GPT-style), then any of ``kv=K`` (``kv_heads``), ``ffn=F``
    (``ffn_hidden``), ``gated``, ``rmsnorm``, ``nobias``, ``untied``
    (``tied_embeddings=False``), ``rope`` (``position_embedding=False``),
    ``nodropout``, ``flash`` (``attention="flash"``, a fused attention kernel),
    and ``llama`` (the seven flags: Llama 3 trains with flash attention).
    Anything else, and a keyword given twice (``kv=4:kv=8``), is refused on
    ``field`` with InvalidParameterError.

    Examples
    --------
    >>> parse_shape_text("96:12288:96:2048:51200").parameters       # GPT-3 175B
    174615846912
    >>> s = parse_shape_text("4:512:8:1024:32000:kv=2:ffn=1376:gated:rmsnorm:nobias:untied")
    >>> s.kv_heads, s.ffn_hidden, s.gated, s.norm, s.bias, s.tied_embeddings, s.position_embedding
    (2, 1376, True, 'rmsnorm', False, False, True)
    >>> s.attention, parse_shape_text("4:512:8:1024:32000:flash").attention
    ('eager', 'flash')
    >>> parse_shape_text("4:512:8:1024:32000:kv=2:kv=4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: shape: got '4:512:8:1024:32000:kv=2:kv=4'; ... not 'kv' twice
    """
    from queuesgd.model_shapes import TransformerShape

    accepted = f"a TransformerShape, None, or {SHAPE_TEXT}"
    if not isinstance(text, str):
        raise InvalidParameterError(field, text, accepted)
    parts = [p.strip() for p in text.split(":")]
    if len(parts) < 5 or not all(p.isascii() and p.isdigit() for p in parts[:5]):
        raise InvalidParameterError(field, text, accepted)
    keywords: dict[str, Any] = {}
    seen: set[str] = set()
    for part in parts[5:]:
        key, equals, number = part.partition("=")
        if equals and key in _NUMBERS and number.isascii() and number.isdigit():
            fields: Any = ((_NUMBERS[key], int(number)),)
        elif not equals and part in _FLAGS:
            fields = _FLAGS[part]
        else:
            raise InvalidParameterError(field, text, f"{accepted}; not {part!r}")
        if key in seen:  # kv=4:kv=8 took the last one: say which is meant
            raise InvalidParameterError(field, text, f"{accepted}; each keyword once, not {key!r} twice")
        seen.add(key)
        keywords.update(fields)
    return TransformerShape(*(int(p) for p in parts[:5]), name=name, **keywords)


def parse_shape(value: Any, field: str = "HybridParallel.shape") -> TransformerShape | None:
    """A :class:`TransformerShape`, from itself or its text (``"l:h:a:s:V"`` and optional Llama keywords).

    ``None`` (or the text ``"none"``, as a command line gives it) is ``None``; the text form is
    :func:`parse_shape_text`'s.

    Examples
    --------
    >>> parse_shape("96:12288:96:2048:51200").parameters       # GPT-3 175B
    174615846912
    >>> parse_shape("None") is None
    True
    >>> parse_shape("32:4096:32:8192:128256:kv=8:ffn=14336:llama").parameters   # Llama 3.1 8B
    8030261248
    """
    from queuesgd.model_shapes import TransformerShape

    if value is None or isinstance(value, TransformerShape):
        return value
    if isinstance(value, str) and value.strip().lower() == "none":
        return None
    return parse_shape_text(value, field)

