"""The input batch of a profiled training step, and the memory it and the model may take.

A batch is made from ``input_shape`` (random, float32) or given as ``inputs``
(a tensor, a nest of them, or a factory's result); either is bounded by
:data:`MAX_INPUT_ELEMENTS` and by :data:`INPUT_MEMORY_SHARE` of the memory
:func:`free_memory` finds on the device, and a model built here is first
sized on the ``meta`` device (:func:`check_model_memory`), so nothing too
large is allocated.

Examples
--------
>>> import torch
>>> batch_shape((3, 8, 8), 2, None, torch.device("cpu"))
(3, 8, 8)
>>> call_args({"x": 1})
((), {'x': 1})
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.sequence_checks import items
from queuesgd.units import format_bytes

__all__ = [
    "INPUT_MEMORY_SHARE",
    "MAX_BATCH_DEPTH",
    "MAX_INPUT_ELEMENTS",
    "batch_shape",
    "call_args",
    "check_model_memory",
    "example_batch",
    "free_memory",
]

#: The largest random input batch made from ``input_shape`` (``2**31`` float32 elements: 8 GiB).
MAX_INPUT_ELEMENTS = 2**31
#: The deepest nesting of lists, tuples and dicts in an ``inputs`` batch.
MAX_BATCH_DEPTH = 8
#: The share of the free memory the random input batch may take (the activations need the rest).
INPUT_MEMORY_SHARE = 0.25


def batch_shape(input_shape: Any, batch_size: int, free: int | None, dev: Any) -> tuple[int, ...]:
    """``input_shape`` as a tuple of ints, if a random float32 batch of it fits the bounds.

    Parameters
    ----------
    input_shape : iterable of int
        The shape of one sample, e.g. ``(3, 32, 32)``.
    batch_size : int
        Samples in the batch.
    free : int or None
        Bytes free on ``dev`` (:func:`free_memory`); None: not checked.
    dev : torch.device
        Where the batch will be, named in messages.

    Returns
    -------
    tuple of int

    Raises
    ------
    InvalidParameterError
        A shape that is not positive integers, a batch over
        :data:`MAX_INPUT_ELEMENTS` elements or over :data:`INPUT_MEMORY_SHARE`
        of ``free``.

    Examples
    --------
    >>> batch_shape([784], 10**7, None, "cpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: batch_size: got 'batch_size 10000000 x input_shape (784,) ...
    """
    accepted = "a tuple of positive integers, e.g. (3, 32, 32) (or inputs= for other batches)"
    shape = tuple(items("input_shape", input_shape, accepted))  # np.array(3): refused, not a TypeError
    if not shape or not all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 1 for d in shape
    ):
        raise InvalidParameterError("input_shape", input_shape, accepted)
    shape = tuple(int(d) for d in shape)
    elements = batch_size * math.prod(shape)
    _check_input_size(elements, 4 * elements, free, dev, f"batch_size {batch_size} x input_shape {shape}")
    return shape


def _check_input_size(elements: int, size: int, free: int | None, dev: Any, what: str) -> None:
    """Refuse an input batch over :data:`MAX_INPUT_ELEMENTS`, or over its share of the free memory."""
    how = "use a smaller batch_size (--batch-size), and accumulation (--accumulation) for a larger step"
    if elements > MAX_INPUT_ELEMENTS:
        raise InvalidParameterError(
            "batch_size",
            f"{what} of {elements:,} elements",
            f"at most {MAX_INPUT_ELEMENTS:,} input elements per batch; {how}",
        )
    if free is not None and size > INPUT_MEMORY_SHARE * free:
        raise InvalidParameterError(
            "batch_size",
            f"{what} of {format_bytes(size)}",
            f"an input batch within {INPUT_MEMORY_SHARE:.0%} of the {format_bytes(free)} free on {dev} "
            f"(the activations need the rest); {how}",
        )


def free_memory(torch: Any, dev: Any) -> int | None:
    """Bytes free on ``dev``: the CUDA device's free memory, or the host's MemAvailable (None if unknown).

    Examples
    --------
    >>> import torch
    >>> free_memory(torch, torch.device("cpu")) > 0
    True
    """
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_model_memory(
    torch: Any, factory: Callable[..., Any], kwargs: Mapping[str, Any], label: str, free: int | None, dev: Any
) -> None:
    """Build the model on the ``meta`` device (no memory) and refuse one whose training state cannot fit.

    Its parameters and buffers, their gradients and the default optimizer's
    momentum: three times the parameters' bytes. A factory that cannot build
    on ``meta`` is not checked here.

    Parameters
    ----------
    torch : module
        The ``torch`` module.
    factory : callable
        Builds the model from ``kwargs``.
    kwargs : mapping
        The model's keyword arguments (``model_args``).
    label : str
        The model's name, for messages.
    free : int or None
        Bytes free on ``dev``; None: not checked.
    dev : torch.device
        Where the model will train, named in messages.

    Raises
    ------
    InvalidParameterError
        Three times the parameters' and buffers' bytes over ``free``.

    Examples
    --------
    >>> import torch
    >>> args = {"in_features": 8, "out_features": 2}
    >>> check_model_memory(torch, torch.nn.Linear, args, "Linear", 200, "cpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model_args: got "Linear with {...}"; accepted: a model whose ...
    """
    if free is None:
        return
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            net = factory(**kwargs)
        size = sum(t.numel() * t.element_size() for t in (*net.parameters(), *net.buffers()))
    except Exception:  # the real build will say what is wrong, or it cannot build on meta
        return
    if 3 * size > free:
        raise InvalidParameterError(
            "model_args" if kwargs else "model",
            f"{label} with {dict(kwargs)}" if kwargs else label,
            f"a model whose parameters, gradients and optimizer state (3 x {format_bytes(size)}) fit in the "
            f"{format_bytes(free)} free on {dev}: a smaller model (or smaller --model-args)",
        )


def example_batch(torch: Any, inputs: Any, batch_size: int, dev: Any, free: int | None) -> Any:
    """The example batch: ``inputs`` itself or what the factory returns, moved to ``dev``, checked.

    Parameters
    ----------
    torch : module
        The ``torch`` module.
    inputs : tensor, tuple, list, dict or callable
        The batch (tensors nested at most :data:`MAX_BATCH_DEPTH` deep), or
        a factory ``inputs(batch_size, device)`` returning one. A namedtuple
        (or another subclass of tuple or list) is looked into as a tuple is,
        and rebuilt with its own type when its tensors move.
    batch_size : int
        The first dimension every tensor of the batch must have.
    dev : torch.device
        Where the batch goes.
    free : int or None
        Bytes free on ``dev``: a CUDA batch is held to
        :data:`INPUT_MEMORY_SHARE` of it.

    Returns
    -------
    The batch, its tensors on ``dev``.

    Raises
    ------
    InvalidParameterError
        A factory that fails, no tensor, a meta tensor, a first dimension
        other than ``batch_size``, a dict whose keys are not argument names,
        or a batch over the bounds.

    Examples
    --------
    >>> import torch
    >>> example_batch(torch, {"x": torch.zeros(2, 3)}, 2, torch.device("cpu"), None)["x"].shape
    torch.Size([2, 3])
    >>> from collections import namedtuple
    >>> example_batch(torch, (namedtuple("Pair", "a b")(torch.zeros(2), torch.zeros(3)),), 2,
    ...               torch.device("cpu"), None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: inputs: got 'tensors of shape (3,)'; accepted: tensors whose ...
    """
    accepted = (
        "a tensor, a tuple (a namedtuple too), list or dict of them (nested at most "
        f"{MAX_BATCH_DEPTH} deep), or a factory inputs(batch_size, device) returning one"
    )
    batch = inputs
    if callable(inputs) and not isinstance(inputs, torch.Tensor):
        try:
            batch = inputs(batch_size, dev)
        except QueuesgdError:
            raise
        except Exception as exc:  # the factory's own failure: one line, the cause chained
            name = getattr(inputs, "__qualname__", type(inputs).__name__)
            raise InvalidParameterError(
                "inputs", name, f"{accepted} (it raised {type(exc).__name__}: {exc})"
            ) from exc
    tensors: list[Any] = []

    def walk(x: Any, depth: int) -> None:
        if depth > MAX_BATCH_DEPTH:
            raise InvalidParameterError("inputs", type(batch).__name__, accepted)
        if isinstance(x, torch.Tensor):
            if x.is_meta:
                raise InvalidParameterError("inputs", "a meta tensor", f"{accepted}, with data (not on meta)")
            tensors.append(x)
        elif isinstance(x, (list, tuple)):  # a namedtuple, torch.return_types or other subclass too
            for v in x:
                walk(v, depth + 1)
        elif isinstance(x, Mapping):
            if depth == 0 and not all(isinstance(k, str) and k.isidentifier() for k in x):
                raise InvalidParameterError(
                    "inputs", list(x)[:3], f"{accepted}; a dict's keys are argument names"
                )
            for v in x.values():
                walk(v, depth + 1)

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.to(dev)
        if isinstance(x, (list, tuple)):
            items = [move(v) for v in x]
            if type(x) in (list, tuple):
                return type(x)(items)
            if all(a is b for a, b in zip(items, x, strict=True)):  # nothing moved: the object itself
                return x
            if isinstance(x, tuple) and hasattr(x, "_fields") and hasattr(x, "_make"):  # a namedtuple
                return x._make(items)
            try:  # a subclass rebuilt from its items, as list and tuple (and torch.return_types) are
                return type(x)(items)
            except Exception as exc:
                raise InvalidParameterError(
                    "inputs",
                    type(x).__name__,
                    f"{accepted}; a subclass of tuple or list either a namedtuple or one that "
                    f"type(x)(items) rebuilds (it raised {type(exc).__name__}: {exc})",
                ) from exc
        if isinstance(x, Mapping):
            return {k: move(v) for k, v in x.items()}
        return x

    if not isinstance(batch, (torch.Tensor, list, tuple, Mapping)):
        raise InvalidParameterError("inputs", batch, accepted)
    walk(batch, 0)
    if not tensors:
        raise InvalidParameterError("inputs", type(batch).__name__, f"{accepted} (no tensor found)")
    if all(t.dim() == 0 for t in tensors):  # a scalar beside batched tensors is an argument; alone, no batch
        first = f"tensors whose first dimension is batch_size ({batch_size})"
        raise InvalidParameterError("inputs", "0-dimensional tensors only", first)
    wrong = [tuple(t.shape) for t in tensors if t.dim() >= 1 and t.shape[0] != batch_size]
    if wrong:
        raise InvalidParameterError(
            "inputs",
            f"tensors of shape {wrong[0]}",
            f"tensors whose first dimension is batch_size ({batch_size})",
        )
    size = sum(t.numel() * t.element_size() for t in tensors)
    # on the host the batch is made already: only the copy to a CUDA device is still to come
    _check_input_size(
        sum(t.numel() for t in tensors), size, free if dev.type == "cuda" else None, dev, "inputs"
    )
    return move(batch)


def call_args(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` the model is called with: a dict's items as keywords, a sequence's as arguments.

    A namedtuple is a tuple: its fields are the arguments (``(batch,)`` passes it whole).

    Examples
    --------
    >>> call_args([1, 2]), call_args(3)
    (((1, 2), {}), ((3,), {}))
    """
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if isinstance(batch, (list, tuple)):
        return tuple(batch), {}
    return (batch,), {}
