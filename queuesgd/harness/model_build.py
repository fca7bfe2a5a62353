"""Build any model the harness trains: one of its own (:mod:`queuesgd.harness.models`) or a named one.

A named model is a user's (``"module.path:callable"``), torchvision's
(``"torchvision:NAME"``) or a harness model under the profiler's name
(``"queuesgd:KIND"``), built by :func:`queuesgd.profiler_step.resolve_model`
with ``model_args`` and trained on synthetic samples of ``input_shape`` with
labels in ``0 .. classes - 1``. Its options are ``input_shape``, ``classes``
and ``model_args``; a harness model's are its sizes. The profiling, lock-step
and DDP loops build through :func:`build_model` and :func:`build_model_seeded`,
so that the a-priori protocol runs either.

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> net, shape = build_model("queuesgd:mlp", input_shape=[8], model_args={"inputs": 8, "hidden": 4})
>>> shape, net[0].in_features
((8,), 8)
>>> count_parameters("queuesgd:mlp", input_shape=[8], model_args={"inputs": 8})  # (8+1)256 + 257*256 + 257*10
70666
>>> build_model("mlp", hidden=4)[1]
(784,)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness import models

__all__ = ["build_model", "build_model_seeded", "count_parameters"]


def build_model(kind: str, **options: Any) -> tuple[Any, tuple[int, ...]]:
    """The model ``kind`` names and the shape of one input sample (the caller seeds torch first).

    A harness model takes its sizes (:func:`queuesgd.harness.models.build`); a
    named one ``input_shape`` (required), ``classes`` (the logits it gives;
    not an argument of its own) and ``model_args`` (its keyword arguments).
    """
    if not models.is_named(kind):
        return models.build(kind, **options)
    from queuesgd.profiler_step import resolve_model

    models.check_model(kind)
    extra = sorted(set(options) - {"input_shape", "classes", "model_args"})
    if extra:
        raise InvalidParameterError(
            extra[0], options[extra[0]], f"input_shape, classes and model_args for the named model {kind!r}"
        )
    shape = models.input_shape_of(options.get("input_shape"))  # before anything is imported or built
    return resolve_model(kind, options.get("model_args")), shape


def build_model_seeded(kind: str, seed: int, model_options: Mapping[str, Any] | None = None) -> Any:
    """:func:`build_model` with torch seeded by ``seed`` (the same initial parameters in every worker).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> opts = {"input_shape": [4], "model_args": {"inputs": 4, "hidden": 2}}
    >>> (a, _), (b, _) = (build_model_seeded("queuesgd:mlp", 3, opts) for _ in range(2))
    >>> all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    True
    """
    return models.seeded(seed, lambda: build_model(kind, **dict(model_options or {})))


def count_parameters(kind: str, **options: Any) -> int:
    """Parameters of the model (a harness model's counted from its shapes; a named one is built)."""
    if not models.is_named(kind):
        return models.parameter_count(kind, **options)
    net, _ = build_model(kind, **options)
    return int(sum(p.numel() for p in net.parameters()))
