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

import importlib
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness import require_torch

__all__ = ["TrainingStep", "import_callable", "resolve_model", "training_step"]

#: The largest random input batch made from ``input_shape`` (2**31 float32 elements: 8 GiB).
MAX_INPUT_ELEMENTS = 2**31


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

    def run(self) -> None:
        """One whole step, unhooked."""
        for j in range(self.accumulation):
            self.run_micro(j == self.accumulation - 1)()
        self.update()


def resolve_model(model: Any) -> Any:
    """An ``nn.Module`` from a module, a factory (called with no arguments) or a name.

    Names: ``"module.path:callable"`` (a factory in an importable module),
    ``"torchvision:NAME"`` (``torchvision.models.get_model(NAME, weights=None)``:
    random weights, nothing downloaded; where torchvision loads beside torch),
    or ``"queuesgd:KIND"`` (a harness model, :func:`queuesgd.harness.models.build`:
    ``mlp``, ``cnn``, ``resnet18s``).

    Examples
    --------
    >>> resolve_model("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'nope'; accepted: an nn.Module, a factory ...
    """
    accepted = (
        "an nn.Module, a factory returning one, or 'module.path:callable' (e.g. 'mypkg.models:make_net')"
    )
    if isinstance(model, str):
        mod_name, sep, attr = model.partition(":")
        if not sep or not mod_name or not attr:
            raise InvalidParameterError("model", model, accepted)
        if mod_name == "torchvision":
            return _torchvision(model, attr)
        if mod_name == "queuesgd":
            from queuesgd.harness.models import build

            return build(attr)[0]
        model = import_callable("model", model, accepted)
    nn = require_torch().nn
    if not isinstance(model, nn.Module) and callable(model):
        model = model()
    if not isinstance(model, nn.Module):
        raise InvalidParameterError("model", model, accepted)
    return model


def _torchvision(spec: str, name: str) -> Any:
    """``torchvision.models.get_model(name, weights=None)``, or a clear error saying why not."""
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
        return tvm.get_model(name, weights=None)
    except (ValueError, KeyError) as exc:
        raise InvalidParameterError(
            "model", spec, f"a name torchvision.models.list_models() gives ({exc})"
        ) from None


def import_callable(field: str, spec: str, accepted: str) -> Callable[..., Any]:
    """The callable ``"module.path:name"`` names (the module imported), or an error naming ``field``.

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
        found = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidParameterError(field, spec, f"{accepted} ({type(exc).__name__}: {exc})") from None
    if not callable(found):
        raise InvalidParameterError(field, spec, f"{accepted} (not callable)")
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
    device: str,
    optimizer: Any,
    seed: int,
) -> TrainingStep:
    """Check the arguments, build the model on its device and the step's closures (see the module)."""
    from queuesgd.harness import check_device

    torch = require_torch()
    batch_size = _checks.integer("batch_size", batch_size)
    accumulation = _checks.integer("accumulation", accumulation)
    if loss is not None and not callable(loss):
        raise InvalidParameterError("loss", loss, "a callable loss(output) -> scalar tensor, or None")
    if optimizer is not None and not callable(optimizer):
        raise InvalidParameterError("optimizer", optimizer, "a callable optimizer(parameters), or None")
    amp = _autocast(torch, autocast)
    dev = check_device(device)
    shape = None
    if inputs is None:
        shape = _shape(input_shape, batch_size)
    elif input_shape is not None:
        raise InvalidParameterError(
            "input_shape", input_shape, "None when inputs= is given (one or the other)"
        )
    seed = _checks.integer("seed", seed, minimum=0)
    torch.manual_seed(seed)
    net = resolve_model(model).to(dev)
    net.train()
    compiled = getattr(net, "_orig_mod", None) is not None  # torch.compile's OptimizedModule
    prefix = "_orig_mod." if compiled else ""
    params = [(n.removeprefix(prefix), p) for n, p in net.named_parameters() if p.requires_grad]
    if not params:
        raise InvalidParameterError("model", type(net).__name__, "a model with trainable parameters")
    trainable = [p for _, p in params]
    opt = optimizer(trainable) if optimizer is not None else torch.optim.SGD(trainable, lr=0.01, momentum=0.9)
    if shape is not None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        batch: Any = torch.randn((batch_size, *shape), generator=gen).to(dev)
    else:
        batch = _batch(torch, inputs, batch_size, dev)
    args, kwargs = _call_args(batch)
    scaler = torch.amp.GradScaler(dev.type) if amp == torch.float16 else None
    loss_of = loss if loss is not None else _default_loss
    step = TrainingStep(torch, net, params, opt, dev, amp, accumulation, batch_size, compiled)
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


def _shape(input_shape: Any, batch_size: int) -> tuple[int, ...]:
    accepted = "a tuple of positive integers, e.g. (3, 32, 32) (or inputs= for other batches)"
    if input_shape is None or isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise InvalidParameterError("input_shape", input_shape, accepted)
    shape = tuple(input_shape)
    if not shape or not all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 1 for d in shape
    ):
        raise InvalidParameterError("input_shape", input_shape, accepted)
    shape = tuple(int(d) for d in shape)
    if batch_size * math.prod(shape) > MAX_INPUT_ELEMENTS:
        raise InvalidParameterError(
            "input_shape",
            input_shape,
            f"at most {MAX_INPUT_ELEMENTS:.3g} input elements per batch (batch_size x the shape's product)",
        )
    return shape


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


def _batch(torch: Any, inputs: Any, batch_size: int, dev: Any) -> Any:
    """The example batch: ``inputs`` itself or what the factory returns, moved to ``dev``, checked."""
    accepted = (
        "a tensor, a tuple, list or dict of them, or a factory inputs(batch_size, device) returning one"
    )
    batch = inputs(batch_size, dev) if callable(inputs) and not isinstance(inputs, torch.Tensor) else inputs
    tensors: list[Any] = []

    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            tensors.append(x)
            return x.to(dev)
        if isinstance(x, (list, tuple)):
            return type(x)(move(v) for v in x) if type(x) in (list, tuple) else x
        if isinstance(x, Mapping):
            return {k: move(v) for k, v in x.items()}
        return x

    if not isinstance(batch, (torch.Tensor, list, tuple, Mapping)):
        raise InvalidParameterError("inputs", batch, accepted)
    moved = move(batch)
    if not tensors:
        raise InvalidParameterError("inputs", type(batch).__name__, f"{accepted} (no tensor found)")
    wrong = [tuple(t.shape) for t in tensors if t.dim() >= 1 and t.shape[0] != batch_size]
    if wrong:
        raise InvalidParameterError(
            "inputs",
            f"tensors of shape {wrong[0]}",
            f"tensors whose first dimension is batch_size ({batch_size})",
        )
    return moved


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
