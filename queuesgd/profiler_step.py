"""One training step of a user's model, as :func:`queuesgd.profile` and its plain reference loop run it.

The profile and the hook-free reference loop must run the *same* step (the
same batch, loss, mixed precision, accumulation and optimizer), or comparing
them proves nothing; both build it here, with :func:`training_step`.

A step is ``accumulation`` micro-steps (forward under ``torch.autocast`` when
asked, the loss divided by ``accumulation``, backward, through a
``GradScaler`` for float16), then the optimizer step and
``zero_grad(set_to_none=True)``.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import importlib
import inspect
import json
import keyword
import math
import numbers
import os
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.harness import require_torch
from queuesgd.profiler_factory import factory_kind
from queuesgd.units import format_bytes

__all__ = [
    "TrainingStep",
    "check_model_args",
    "check_steps",
    "import_callable",
    "resolve_model",
    "training_step",
]

#: The largest random input batch made from ``input_shape`` (2**31 float32 elements: 8 GiB).
MAX_INPUT_ELEMENTS = 2**31
#: The longest ``model_args`` JSON text (``--model-args``).
MAX_MODEL_ARGS_CHARS = 10_000
#: The most forward + backward passes one profile or reference loop runs (accumulation x steps).
MAX_PASSES = 100_000
#: The deepest nesting of lists, tuples and dicts in an ``inputs`` batch.
MAX_BATCH_DEPTH = 8
#: The share of the free memory the random input batch may take (the activations need the rest).
INPUT_MEMORY_SHARE = 0.25


@dataclass
class TrainingStep:
    """A model on its device with its optimizer, batch and loss: ``run_micro`` and ``update`` run a step."""

    torch: Any
    net: Any
    params: list[tuple[str, Any]]  # trainable, tied ones once, names without torch.compile's prefix
    opt: Any
    dev: Any
    amp: Any  # None, torch.bfloat16 or torch.float16
    accumulation: int
    batch_size: int
    compiled: bool
    run_micro: Callable[[bool], Callable[[], None]] = field(repr=False, default=None)  # type: ignore[assignment]
    update: Callable[[], None] = field(repr=False, default=None)  # type: ignore[assignment]
    activations: list[int] = field(default_factory=list)  # CUDA bytes kept by each last forward pass
    label: str = ""  # the model and its batch, as an error names them

    def run(self) -> None:
        """One whole step, unhooked."""
        for j in range(self.accumulation):
            self.run_micro(j == self.accumulation - 1)()
        self.update()

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Inside: the model's own failure on the batch (shape, dtype, out of memory) as one clear error."""
        try:
            yield
        except QueuesgdError:
            raise
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise InvalidParameterError(
                "model",
                self.label,
                f"a model that trains on the batch given (its step raised {type(exc).__name__}: {first}); "
                "check input_shape or inputs, or use a smaller batch_size",
            ) from exc


def resolve_model(model: Any, model_args: Any = None) -> Any:
    """An ``nn.Module`` from a module, a class or factory, or a name; checked before anything is called.

    Names: ``"module.path:callable"`` (in an importable module: an ``nn.Module``
    subclass, a function marked with :func:`queuesgd.model_factory`, or one
    whose return annotation is an ``nn.Module`` subclass; anything else is
    refused without being called), ``"torchvision:NAME"``
    (``torchvision.models.get_model(NAME, weights=None)``: random weights,
    nothing downloaded; where torchvision loads beside torch), or
    ``"queuesgd:KIND"`` (a harness model, the function of that name in
    :mod:`queuesgd.harness.models`: ``mlp``, ``cnn``, ``resnet18s``, ``encoder``,
    with its own arguments). A class or factory is called
    with ``model_args`` as keyword arguments (see :func:`check_model_args`).

    Examples
    --------
    >>> net = resolve_model("queuesgd:mlp", {"inputs": 8, "hidden": 4})
    >>> net[0].in_features, net[0].out_features
    (8, 4)
    >>> resolve_model("os:getcwd")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'os:getcwd'; accepted: an nn.Module subclass, ...
    """
    kwargs = check_model_args("model_args", model_args)
    factory, label = model_factory_of(model, kwargs)
    return model if factory is None else build_model(factory, kwargs, label)


MODEL_ACCEPTED = (
    "an nn.Module subclass, a function marked @queuesgd.model_factory or annotated '-> nn.Module', "
    "named 'module.path:callable' (e.g. 'mypkg.models:make_net'); 'queuesgd:KIND' or 'torchvision:NAME'"
)


def model_factory_of(model: Any, kwargs: Mapping[str, Any]) -> tuple[Callable[..., Any] | None, str]:
    """``(factory, label)`` that builds ``model`` with ``kwargs``, or ``(None, label)`` for a built module.

    Nothing is called: a name is imported and its type checked, and ``kwargs``
    are bound to the factory's signature.
    """
    nn = require_torch().nn
    if isinstance(model, nn.Module):
        if kwargs:
            raise InvalidParameterError(
                "model_args", dict(kwargs), "none for a model already built (they are for a class or factory)"
            )
        return None, type(model).__name__
    if isinstance(model, str):
        mod_name, sep, attr = model.partition(":")
        if not sep or not mod_name or not attr:
            raise InvalidParameterError("model", model, MODEL_ACCEPTED)
        if mod_name == "torchvision":
            return functools.partial(_torchvision, model, attr), model
        if mod_name == "queuesgd":
            from queuesgd.harness import models

            _checks.choice("model", attr, models.MODELS)
            factory: Callable[..., Any] = getattr(models, attr)  # what build(KIND) builds, its own arguments
            _bind(model, factory, (), kwargs)
            return factory, model
        found = import_callable("model", model, MODEL_ACCEPTED)
        if not _is_model_factory(nn, found):
            raise InvalidParameterError(
                "model", model, f"{MODEL_ACCEPTED} (it is {_what(found)}: not called)"
            )
        _bind(model, found, (), kwargs)
        return found, model
    if isinstance(model, type) or callable(model):  # a class or factory the caller passes in code
        label = getattr(model, "__qualname__", type(model).__name__)
        if isinstance(model, type) and not issubclass(model, nn.Module):
            raise InvalidParameterError("model", label, MODEL_ACCEPTED)
        _bind(label, model, (), kwargs)
        return model, label
    raise InvalidParameterError("model", model, f"an nn.Module, or {MODEL_ACCEPTED}")


def build_model(factory: Callable[..., Any], kwargs: Mapping[str, Any], label: str) -> Any:
    """``factory(**kwargs)``, checked to be an ``nn.Module``; its own errors named as the model's."""
    nn = require_torch().nn
    field = "model_args" if kwargs else "model"
    shown = f"{label} with {dict(kwargs)}" if kwargs else label
    try:
        net = factory(**kwargs)
    except QueuesgdError:
        raise
    except Exception as exc:  # the factory's own failure: one line, the cause chained
        raise InvalidParameterError(
            field, shown, f"arguments that build the model (it raised {type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(net, nn.Module):
        raise InvalidParameterError("model", label, f"{MODEL_ACCEPTED} (it returned {_what(net)})")
    return net


def check_model_args(field: str, value: Any) -> dict[str, Any]:
    """Keyword arguments for a model's class or factory: None, a mapping, or the text of a JSON object.

    Names must be Python identifiers; JSON text is at most :data:`MAX_MODEL_ARGS_CHARS`
    characters, with finite numbers.

    Examples
    --------
    >>> check_model_args("--model-args", '{"width": 64}')
    {'width': 64}
    >>> check_model_args("--model-args", "[64]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --model-args: got '[64]'; accepted: a JSON object of keyword ...
    """
    accepted = 'a JSON object of keyword arguments, e.g. {"width": 64}'
    if value is None:
        return {}
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        if len(value) > MAX_MODEL_ARGS_CHARS:
            raise InvalidParameterError(
                field, shown, f"{accepted}, of at most {MAX_MODEL_ARGS_CHARS} characters"
            )
        try:
            value = json.loads(value, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; so is a 5000-digit int
            raise InvalidParameterError(field, shown, f"{accepted} ({type(exc).__name__}: {exc})") from None
        if not isinstance(value, dict):
            raise InvalidParameterError(field, shown, accepted)
        if not all(_finite(v) for v in value.values()):
            raise InvalidParameterError(field, shown, f"{accepted} (finite numbers)")
    if not isinstance(value, Mapping):
        raise InvalidParameterError(field, value, f"{accepted}, or a dict of them")
    bad = [k for k in value if not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k)]
    if bad:
        raise InvalidParameterError(
            f"{field} name", bad[0], "a Python identifier (a keyword argument's name)"
        )
    return dict(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    return True


def _bind(label: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse ``kwargs`` (or missing arguments) the signature of ``func`` does not take, before calling it."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # no signature to read (some builtins): the call will say
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        names = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        names = names[len(args) :] if len(args) <= len(names) else []
        takes = ", ".join(names) or "none"
        raise InvalidParameterError(
            "model_args" if kwargs else "model",
            f"{label} with {dict(kwargs)}" if kwargs else label,
            f"the keyword arguments it takes ({takes}; {exc})",
        ) from None


def _is_model_factory(nn: Any, obj: Any) -> bool:
    if isinstance(obj, type):
        return issubclass(obj, nn.Module)
    return factory_kind(obj) == "model" or _returns(obj, nn.Module)


def _returns(func: Any, base: type) -> bool:
    """Whether ``func``'s return annotation is a subclass of ``base``, read without evaluating code."""
    try:
        ann = inspect.get_annotations(func).get("return")
    except TypeError:  # not a function, class or module
        return False
    if isinstance(ann, str):  # ``from __future__ import annotations``: look the dotted name up, no eval
        parts = ann.strip().split(".")
        if not all(p.isidentifier() for p in parts):
            return False
        scope = {**vars(builtins), **getattr(func, "__globals__", {})}
        ann = scope.get(parts[0])
        for part in parts[1:]:
            ann = getattr(ann, part, None) if isinstance(ann, (type, types.ModuleType)) else None
    return isinstance(ann, type) and issubclass(ann, base)


def _what(obj: Any) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    if callable(obj):
        return f"{type(obj).__name__} {getattr(obj, '__qualname__', '')}".rstrip()
    return f"a {type(obj).__name__}"


def _torchvision(spec: str, name: str, **kwargs: Any) -> Any:
    """``torchvision.models.get_model(name, weights=None, **kwargs)``, or a clear error saying why not."""
    require_torch()
    try:
        import torchvision.models as tvm
    except Exception as exc:  # ImportError, or torchvision's own operators failing to register
        raise InvalidParameterError(
            "model",
            spec,
            f"a torchvision model where torchvision loads beside this torch ({type(exc).__name__}: {exc}); "
            "or 'queuesgd:resnet18s', a ResNet-18-style model that needs no torchvision",
        ) from None
    try:
        return tvm.get_model(name, weights=None, **kwargs)
    except (ValueError, KeyError) as exc:
        with_args = ", with arguments its builder takes" if kwargs else ""
        raise InvalidParameterError(
            "model_args" if kwargs else "model",
            f"{spec} with {kwargs}" if kwargs else spec,
            f"a name torchvision.models.list_models() gives{with_args} ({exc})",
        ) from None


def import_callable(field: str, spec: str, accepted: str) -> Callable[..., Any]:
    """The callable ``"module.path:name"`` names (the module imported, the callable not called).

    Examples
    --------
    >>> import_callable("inputs", "math:sqrt", "a factory")(4.0)
    2.0
    >>> import_callable("inputs", "math:pi", "a factory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: inputs: got 'math:pi'; accepted: a factory (not callable)
    """
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise InvalidParameterError(field, spec, accepted)
    try:
        found = importlib.import_module(mod_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:  # TypeError: a relative name
        raise InvalidParameterError(field, spec, f"{accepted} ({type(exc).__name__}: {exc})") from None
    if not callable(found):
        raise InvalidParameterError(field, spec, f"{accepted} (not callable)")
    return found


INPUTS_ACCEPTED = (
    "a factory inputs(batch_size, device) marked @queuesgd.inputs_factory or annotated '-> torch.Tensor', "
    "named 'module.path:callable'"
)


def inputs_factory_of(torch: Any, spec: str) -> Callable[..., Any]:
    """The batch factory ``spec`` names, checked (marked or annotated, two arguments) but not called."""
    found = import_callable("inputs", spec, INPUTS_ACCEPTED)
    if factory_kind(found) != "inputs" and not _returns(found, torch.Tensor):
        raise InvalidParameterError("inputs", spec, f"{INPUTS_ACCEPTED} (it is {_what(found)}: not called)")
    try:
        inspect.signature(found).bind(1, None)
    except TypeError as exc:
        raise InvalidParameterError("inputs", spec, f"{INPUTS_ACCEPTED} ({exc})") from None
    except ValueError:  # no signature to read
        pass
    return found


def training_step(
    model: Any,
    *,
    batch_size: int,
    input_shape: Any,
    inputs: Any,
    loss: Any,
    autocast: Any,
    accumulation: int,
    device: Any,
    optimizer: Any,
    seed: int,
    model_args: Any = None,
) -> TrainingStep:
    """Check the arguments, build the model on its device and the step's closures (see the module).

    Every argument is checked before anything is built or called; a model made
    here is first built on the ``meta`` device (no memory) to count its
    parameters against the memory free on ``device``, and the random batch is
    held to :data:`INPUT_MEMORY_SHARE` of it.
    """
    from queuesgd.harness import check_device

    torch = require_torch()
    batch_size = _checks.integer("batch_size", batch_size)
    if batch_size > MAX_INPUT_ELEMENTS:
        raise InvalidParameterError("batch_size", batch_size, f"at most {MAX_INPUT_ELEMENTS:,} samples")
    accumulation = _checks.integer("accumulation", accumulation)
    if loss is not None and not callable(loss):
        raise InvalidParameterError("loss", loss, "a callable loss(output) -> scalar tensor, or None")
    if optimizer is not None and not callable(optimizer):
        raise InvalidParameterError("optimizer", optimizer, "a callable optimizer(parameters), or None")
    amp = _autocast(torch, autocast)
    dev = check_device(str(device) if isinstance(device, torch.device) else device)
    seed = _checks.integer("seed", seed, minimum=0)
    if seed >= 2**64:
        raise InvalidParameterError("seed", seed, "an integer from 0 to 2**64 - 1")
    kwargs = check_model_args("model_args", model_args)
    free = free_memory(torch, dev)
    shape = None
    if inputs is None:
        shape = _shape(input_shape, batch_size, free, dev)
    elif input_shape is not None:
        raise InvalidParameterError(
            "input_shape", input_shape, "None when inputs= is given (one or the other)"
        )
    elif isinstance(inputs, str):
        inputs = inputs_factory_of(torch, inputs)
    factory, label = model_factory_of(model, kwargs)
    if factory is not None:
        _check_model_memory(torch, factory, kwargs, label, free, dev)
    torch.manual_seed(seed)
    net = model if factory is None else build_model(factory, kwargs, label)
    if any(t.is_meta for t in (*net.parameters(), *net.buffers())):
        raise InvalidParameterError(
            "model",
            label,
            "a model with real tensors, not meta ones (to_empty(device=...), then initialize it)",
        )
    net = net.to(dev)
    net.train()
    compiled = getattr(net, "_orig_mod", None) is not None  # torch.compile's OptimizedModule
    prefix = "_orig_mod." if compiled else ""
    params = [(n.removeprefix(prefix), p) for n, p in net.named_parameters() if p.requires_grad]
    if not params:
        raise InvalidParameterError("model", type(net).__name__, "a model with trainable parameters")
    trainable = [p for _, p in params]
    opt = optimizer(trainable) if optimizer is not None else torch.optim.SGD(trainable, lr=0.01, momentum=0.9)
    if not isinstance(opt, torch.optim.Optimizer):
        raise InvalidParameterError(
            "optimizer", type(opt).__name__, "a callable returning a torch.optim.Optimizer"
        )
    if shape is not None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        batch: Any = torch.randn((batch_size, *shape), generator=gen).to(dev)
    else:
        batch = _batch(torch, inputs, batch_size, dev, free)
    args, kwargs = _call_args(batch)
    scaler = torch.amp.GradScaler(dev.type) if amp == torch.float16 else None
    loss_of = loss if loss is not None else _default_loss
    step = TrainingStep(torch, net, params, opt, dev, amp, accumulation, batch_size, compiled)
    step.label = f"{label} on a batch of {(batch_size, *shape) if shape is not None else 'inputs'}"
    cuda = dev.type == "cuda"

    def run_micro(last: bool) -> Callable[[], None]:
        before = torch.cuda.memory_allocated(dev) if cuda and last else 0
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            out = net(*args, **kwargs)
            value = _scalar(torch, loss_of(out), loss is not None) / accumulation
        del out
        if cuda and last:  # the allocator's count, read on the host: no wait for the device
            step.activations.append(int(torch.cuda.memory_allocated(dev) - before))
        return (scaler.scale(value) if scaler is not None else value).backward

    def update() -> None:
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)

    step.run_micro, step.update = run_micro, update
    return step


def _shape(input_shape: Any, batch_size: int, free: int | None, dev: Any) -> tuple[int, ...]:
    accepted = "a tuple of positive integers, e.g. (3, 32, 32) (or inputs= for other batches)"
    if input_shape is None or isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise InvalidParameterError("input_shape", input_shape, accepted)
    shape = tuple(input_shape)
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


def _check_model_memory(
    torch: Any, factory: Callable[..., Any], kwargs: Mapping[str, Any], label: str, free: int | None, dev: Any
) -> None:
    """Build the model on the ``meta`` device (no memory) and refuse one whose training state cannot fit.

    Its parameters and buffers, their gradients and the default optimizer's
    momentum: three times the parameters' bytes. A factory that cannot build
    on ``meta`` is not checked here.
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


def check_steps(accumulation: Any, steps: int) -> int:
    """``accumulation`` as an int, if ``accumulation x steps`` passes stay within :data:`MAX_PASSES`.

    Examples
    --------
    >>> check_steps(4, 30)
    4
    >>> check_steps(10**6, 30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: accumulation: got 1000000; accepted: at most 100,000 ...
    """
    accumulation = _checks.integer("accumulation", accumulation)
    if accumulation * steps > MAX_PASSES:
        raise InvalidParameterError(
            "accumulation" if accumulation > 1 else "repetitions",
            accumulation if accumulation > 1 else steps,
            f"at most {MAX_PASSES:,} forward + backward passes in all (accumulation {accumulation} x "
            f"{steps} steps): fewer steps or a smaller accumulation",
        )
    return accumulation


def _autocast(torch: Any, value: Any) -> Any:
    names = {
        "bf16": torch.bfloat16,
        "bfloat16": torch.bfloat16,
        "fp16": torch.float16,
        "float16": torch.float16,
    }
    if value is None:
        return None
    if isinstance(value, str) and value.lower() in names:
        return names[value.lower()]
    if value in (torch.bfloat16, torch.float16):
        return value
    raise InvalidParameterError("autocast", value, "None, torch.bfloat16 ('bf16') or torch.float16 ('fp16')")


def _batch(torch: Any, inputs: Any, batch_size: int, dev: Any, free: int | None) -> Any:
    """The example batch: ``inputs`` itself or what the factory returns, moved to ``dev``, checked."""
    accepted = (
        "a tensor, a tuple, list or dict of them (nested at most "
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
        elif type(x) in (list, tuple):
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
            return type(x)(move(v) for v in x) if type(x) in (list, tuple) else x
        if isinstance(x, Mapping):
            return {k: move(v) for k, v in x.items()}
        return x

    if not isinstance(batch, (torch.Tensor, list, tuple, Mapping)):
        raise InvalidParameterError("inputs", batch, accepted)
    walk(batch, 0)
    if not tensors:
        raise InvalidParameterError("inputs", type(batch).__name__, f"{accepted} (no tensor found)")
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


def _call_args(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if isinstance(batch, (list, tuple)):
        return tuple(batch), {}
    return (batch,), {}


def _floating(torch: Any, out: Any) -> list[Any]:
    """The floating-point tensors of a model's output (a tensor, tuple, list, dict or ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() or out.is_complex() else []
    if isinstance(out, Mapping):  # a Hugging Face ModelOutput is an OrderedDict
        return [t for v in out.values() for t in _floating(torch, v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _floating(torch, v)]
    return []


def _default_loss(out: Any) -> Any:
    """The output's ``"loss"``, or the sum of ``mean(t ** 2)`` over its floating tensors."""
    torch = require_torch()
    if isinstance(out, Mapping) and isinstance(out.get("loss"), torch.Tensor) and out["loss"].numel() == 1:
        return out["loss"]
    tensors = [t for t in _floating(torch, out) if t.requires_grad]
    if not tensors:
        raise InvalidParameterError(
            "loss",
            type(out).__name__,
            "a model output with a floating tensor that requires grad, or loss=callable(output)",
        )
    return sum(t.float().pow(2).mean() for t in tensors)


def _scalar(torch: Any, value: Any, given: bool) -> Any:
    if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.requires_grad:
        raise InvalidParameterError(
            "loss" if given else "model",
            type(value).__name__
            if not isinstance(value, torch.Tensor)
            else f"tensor of shape {tuple(value.shape)}",
            "a loss that is a scalar tensor requiring grad",
        )
    return value.reshape(())
