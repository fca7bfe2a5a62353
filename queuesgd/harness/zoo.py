"""Models people train, written out for the profiler's checks: a GPT-style language model and a ViT.

Both are sized by their arguments (a GPT-2-small or ViT-B/16 on a GPU, a few
thousand parameters in a test) and randomly initialized, and both have what
made ``queuesgd.profile`` go wrong on real models (issue 21):

- :func:`gpt` -- a causal decoder-only language model on token ids
  (Radford et al. 2019, GPT-2: pre-norm blocks, GELU, learned positions,
  the output projection tied to the token embedding). ``model(ids,
  labels=ids)`` returns ``{"logits": ..., "loss": ...}`` (next-token cross
  entropy), the shape of a Hugging Face ``CausalLMOutput``. The position
  embedding is a parameter of the root module, which also has children.
- :func:`vit` -- a vision transformer (Dosovitskiy et al., ICLR 2021):
  a patch embedding, a class token and position embedding on the root
  module, pre-norm encoder blocks, a linear head on the class token.

:func:`token_batch` makes the inputs a language model takes:
``inputs=token_batch(vocab, seq)`` gives ``profile`` a factory of
``{"ids": ..., "labels": ...}`` batches.

Examples
--------
>>> import pytest; torch = pytest.importorskip("torch")
>>> lm = gpt(vocab=64, seq=16, width=32, layers=2, heads=4)
>>> batch = token_batch(64, 16)(3, torch.device("cpu"))
>>> out = lm(**batch)
>>> tuple(out["logits"].shape), out["loss"].dim()
((3, 16, 64), 0)
>>> lm.head.weight is lm.tokens.weight      # tied: one tensor, sent once by DDP
True
>>> tuple(vit(image=16, patch=4, width=32, layers=2, heads=4, classes=10)(torch.zeros(2, 3, 16, 16)).shape)
(2, 10)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness._torch import require_torch
from queuesgd.profiler_factory import model_factory

__all__ = ["gpt", "token_batch", "vit"]


def _encoder(width: int, layers: int, heads: int) -> Any:
    """``layers`` pre-norm transformer blocks (4x MLP, GELU, no dropout), batch first."""
    nn = require_torch().nn
    block = nn.TransformerEncoderLayer(
        width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    return nn.TransformerEncoder(block, layers, enable_nested_tensor=False)


@model_factory
def gpt(
    vocab: int = 50257,
    seq: int = 1024,
    width: int = 768,
    layers: int = 12,
    heads: int = 12,
    checkpoint: bool = False,
) -> Any:
    """A GPT-style causal language model (GPT-2 small by default: 124M parameters with the tied head).

    Parameters
    ----------
    vocab, seq : int
        Vocabulary size and the longest sequence (the position embedding's length).
    width, layers, heads : int
        Model width, number of blocks, attention heads (``width`` divisible by ``heads``).
    checkpoint : bool
        Activation checkpointing of every block (``torch.utils.checkpoint``,
        non-reentrant): the block's forward runs again in the backward pass.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> lm = gpt()
    >>> sum(p.numel() for p in lm.parameters())   # GPT-2 small, biases in every linear layer
    124439808
    """
    torch = require_torch()
    nn = torch.nn
    vocab, seq = _checks.integer("vocab", vocab), _checks.integer("seq", seq)
    width, layers, heads = (
        _checks.integer(k, v) for k, v in (("width", width), ("layers", layers), ("heads", heads))
    )
    if width % heads:
        raise InvalidParameterError("heads", heads, f"a divisor of width ({width})")
    checkpoint = _checks.boolean("checkpoint", checkpoint)
    from torch.utils.checkpoint import checkpoint as recompute

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.positions = nn.Parameter(torch.randn(1, seq, width) * 0.01)  # on the root, beside children
            self.blocks = _encoder(width, layers, heads)
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)
            self.head.weight = self.tokens.weight  # tied
            mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, ids: Any, labels: Any = None) -> dict[str, Any]:
            n = ids.shape[1]
            h = self.tokens(ids) + self.positions[:, :n]
            mask = self.mask[:n, :n]
            for block in self.blocks.layers:
                if checkpoint:
                    h = recompute(block, h, mask, None, True, use_reentrant=False)
                else:
                    h = block(h, mask, None, True)  # src_mask, src_key_padding_mask, is_causal
            logits = self.head(self.norm(h))
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1)
                )
            return out

    return GPT()


@model_factory
def vit(
    image: int = 224,
    patch: int = 16,
    width: int = 768,
    layers: int = 12,
    heads: int = 12,
    classes: int = 1000,
) -> Any:
    """A ViT-style image classifier (ViT-B/16 by default), class token and positions on the root module.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> sum(p.numel() for p in vit().parameters())   # ViT-B/16's 86.6M
    86567656
    """
    torch = require_torch()
    nn = torch.nn
    image, patch, classes = (
        _checks.integer(k, v) for k, v in (("image", image), ("patch", patch), ("classes", classes))
    )
    width, layers, heads = (
        _checks.integer(k, v) for k, v in (("width", width), ("layers", layers), ("heads", heads))
    )
    if image % patch:
        raise InvalidParameterError("patch", patch, f"a divisor of image ({image})")
    tokens = (image // patch) ** 2 + 1

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patches = nn.Conv2d(3, width, patch, stride=patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, width))
            self.positions = nn.Parameter(torch.randn(1, tokens, width) * 0.02)
            self.blocks = _encoder(width, layers, heads)
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, classes)

        def forward(self, x: Any) -> Any:
            h = self.patches(x).flatten(2).transpose(1, 2)
            h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.positions
            return self.head(self.norm(self.blocks(h))[:, 0])

    return ViT()


def token_batch(vocab: int, seq: int) -> Callable[[int, Any], dict[str, Any]]:
    """A factory ``(batch_size, device) -> {"ids": ..., "labels": ...}`` of random token ids (seeded).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> b = token_batch(100, 8)(4, torch.device("cpu"))
    >>> tuple(b["ids"].shape), bool((b["ids"] == b["labels"]).all())
    ((4, 8), True)
    """
    vocab, seq = _checks.integer("vocab", vocab), _checks.integer("seq", seq)

    def make(batch_size: int, device: Any) -> dict[str, Any]:
        torch = require_torch()
        gen = torch.Generator(device="cpu").manual_seed(0)
        ids = torch.randint(0, vocab, (batch_size, seq), generator=gen).to(device)
        return {"ids": ids, "labels": ids}

    return make
