"""Marks for the factories a profile may call by name: ``@model_factory`` and ``@inputs_factory``.

``queuesgd profile MODULE:CALLABLE`` and ``profile("module:callable")`` import
what the name points to; before anything calls it, :mod:`queuesgd.profiler_model`
checks that it is meant to be called: an ``nn.Module`` subclass, a function
whose return annotation is one, or a function marked with :func:`model_factory`
(for ``--inputs``: :func:`inputs_factory`, or a return annotation that is a
``torch.Tensor`` subclass). Anything else (``os:system``, ``sys:exit``) is
refused without being called.

This module imports neither torch nor the rest of the package (its errors aside): the project's
own model builders (:mod:`queuesgd.harness.models`, :mod:`queuesgd.harness.zoo`)
are marked with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from queuesgd.errors import InvalidParameterError

__all__ = ["MARK", "factory_kind", "inputs_factory", "model_factory"]

#: The attribute a marked factory carries: ``"model"`` or ``"inputs"``.
MARK = "__queuesgd_factory__"

F = TypeVar("F", bound=Callable[..., Any])


def model_factory(func: F) -> F:
    """Mark ``func`` as a model factory that ``queuesgd profile MODULE:CALLABLE`` may call.

    The factory is called with the keyword arguments of ``--model-args``
    (``model_args=`` in :func:`queuesgd.profile`) and must return an ``nn.Module``.

    Examples
    --------
    >>> @model_factory
    ... def make_net(width=16):
    ...     import torch
    ...     return torch.nn.Linear(width, 2)
    >>> factory_kind(make_net)
    'model'
    """
    return _mark(func, "model")


def inputs_factory(func: F) -> F:
    """Mark ``func`` as a batch factory ``inputs(batch_size, device)`` that ``--inputs`` may call.

    Examples
    --------
    >>> @inputs_factory
    ... def tokens(batch_size, device):
    ...     import torch
    ...     return torch.randint(0, 32, (batch_size, 6), device=device)
    >>> factory_kind(tokens)
    'inputs'
    """
    return _mark(func, "inputs")


def factory_kind(obj: Any) -> str | None:
    """``"model"`` or ``"inputs"`` for a marked factory, None for anything else.

    Examples
    --------
    >>> import os
    >>> factory_kind(os.system) is None
    True
    """
    try:
        kind = obj.__dict__.get(MARK) if hasattr(obj, "__dict__") else None
    except Exception:  # an object whose __dict__ is not a mapping
        return None
    return kind if kind in ("model", "inputs") else None


def _mark(func: F, kind: str) -> F:
    if not callable(func):
        raise InvalidParameterError(f"{kind}_factory", func, "a function or class to mark")
    setattr(func, MARK, kind)
    return func
