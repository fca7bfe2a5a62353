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

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.harness import require_torch
from queuesgd.profiler_inputs import (
    INPUT_MEMORY_SHARE,
    MAX_BATCH_DEPTH,
    MAX_INPUT_ELEMENTS,
    batch_shape,
    call_args,
    check_model_memory,
    example_batch,
    free_memory,
)
from queuesgd.profiler_model import (
    INPUTS_ACCEPTED,
    MAX_MODEL_ARGS_CHARS,
    MODEL_ACCEPTED,
    build_model,
    check_model_args,
    import_callable,
    inputs_factory_of,
    model_factory_of,
    resolve_model,
)
from queuesgd.training_optimizer import default_optimizer

__all__ = [
    "INPUTS_ACCEPTED",
    "INPUT_MEMORY_SHARE",
    "MAX_BATCH_DEPTH",
    "MAX_INPUT_ELEMENTS",
    "MAX_MODEL_ARGS_CHARS",
    "MAX_PASSES",
    "MODEL_ACCEPTED",
    "TrainingStep",
    "build_model",
    "check_model_args",
    "check_steps",
    "free_memory",
    "import_callable",
    "inputs_factory_of",
    "model_factory_of",
    "resolve_model",
    "training_step",
]

# Re-exported: the model found by name is queuesgd.profiler_model's (resolve_model, check_model_args,
# import_callable, ...), the input batch and the memory guards queuesgd.profiler_inputs' (free_memory
# is looked up here, where training_step calls it, so a test may replace it here).

#: The most forward + backward passes one profile or reference loop runs (accumulation x steps).
MAX_PASSES = 100_000


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
    forward: Callable[[bool], Any] = field(repr=False, default=None)  # type: ignore[assignment]
    update: Callable[[], None] = field(repr=False, default=None)  # type: ignore[assignment]
    activations: list[int] = field(default_factory=list)  # CUDA bytes kept by each last forward pass
    label: str = ""  # the model and its batch, as an error names them
    batch: Any = field(repr=False, default=None)  # the example batch on the device
    loss_label: str = "the default loss"  # the user's loss, as an error names it
    first_loss: Any = field(repr=False, default=None)  # the first micro-step's loss, detached (no wait)
    modes: list[tuple[Any, bool]] = field(repr=False, default_factory=list)  # each module's mode before
    held: Any = field(repr=False, default=None)  # the last micro-step loss's backward, as run() keeps it

    def run(self) -> None:
        """One whole step, unhooked, as a training loop runs it.

        Each micro-step's loss is kept until the next micro-step's forward
        pass has run, as ``loss = ...`` in a training loop replaces it then,
        and as the profile's timed steps keep it
        (:meth:`queuesgd.profiler_recorder.Recorder.timed`): letting it go
        right after ``backward`` (as this did before, issue 21) ran a
        host-bound CPU step 1.6-2.3% slower than keeping it (medians of 300
        shuffled 8-step blocks; ``validation/diagnose_block_bias.py``), so the
        reference loop and the profile ran different code.
        """
        for j in range(self.accumulation):
            self.held = self.run_micro(j == self.accumulation - 1)
            self.held()
        self.update()

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Inside: a failure of the user's model, loss or optimizer on the batch as one clear error.

        Any ``Exception`` (not ``KeyboardInterrupt`` or ``SystemExit``) is
        wrapped, naming which of them raised: the loss's and the optimizer
        step's own failures are tagged where they are called (``loss``,
        ``optimizer``); the rest (the forward and backward passes) is the
        model's.
        """
        try:
            yield
        except QueuesgdError:
            raise
        except Exception as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: Exception) -> InvalidParameterError:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        said = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        source = getattr(exc, _BLAME, "model")
        if source == "loss":
            return InvalidParameterError(
                "loss",
                self.loss_label,
                f"a loss(output) -> scalar tensor that runs on the model's output (it raised {said})",
            )
        if source == "optimizer":
            return InvalidParameterError(
                "optimizer", type(self.opt).__name__, f"an optimizer whose step() runs (it raised {said})"
            )
        return InvalidParameterError(
            "model",
            self.label,
            f"a model that trains on the batch given (its step raised {said}); "
            "check input_shape or inputs, or use a smaller batch_size",
        )

    def check_loss(self) -> None:
        """Refuse a first step whose loss was nan or inf (read here, after the timing: one wait at most)."""
        if self.first_loss is None:
            return
        value = float(self.first_loss.float()) * self.accumulation
        if not math.isfinite(value):
            raise InvalidParameterError(
                "loss",
                value,
                "a finite loss: the first step's was not (the inputs may hold nan or inf, or the model or "
                "loss makes one); every step would train on it (nan weights, or fp16's GradScaler skipping "
                "each update)",
            )

    @contextlib.contextmanager
    def modes_kept(self) -> Iterator[None]:
        """Inside: the model in train mode; after (also on error), each module's train/eval mode as it was."""
        try:
            yield
        finally:
            for mod, training in self.modes:
                mod.training = training


#: The attribute that tags an exception with who raised it (``"loss"``, ``"optimizer"``); untagged: the model.
_BLAME = "_queuesgd_raised_by"


def _blame(exc: BaseException, who: str) -> None:
    """Tag ``exc`` as raised by ``who`` (for :meth:`TrainingStep.errors`); its type and message unchanged."""
    if not isinstance(exc, QueuesgdError) and not hasattr(exc, _BLAME):
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, _BLAME, who)


def _name_of(obj: Any) -> str:
    return str(getattr(obj, "__qualname__", None) or type(obj).__name__)


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
        shape = batch_shape(input_shape, batch_size, free, dev)
    elif input_shape is not None:
        raise InvalidParameterError(
            "input_shape", input_shape, "None when inputs= is given (one or the other)"
        )
    elif isinstance(inputs, str):
        inputs = inputs_factory_of(torch, inputs)
    factory, label, kwargs = model_factory_of(model, kwargs)
    if factory is not None:
        check_model_memory(torch, factory, kwargs, label, free, dev)
    torch.manual_seed(seed)
    net = model if factory is None else build_model(factory, kwargs, label)
    if any(t.is_meta for t in (*net.parameters(), *net.buffers())):
        raise InvalidParameterError(
            "model",
            label,
            "a model with real tensors, not meta ones (to_empty(device=...), then initialize it)",
        )
    modes = [(mod, mod.training) for mod in net.modules()]  # the caller's train/eval modes, put back after
    net = net.to(dev)
    compiled = getattr(net, "_orig_mod", None) is not None  # torch.compile's OptimizedModule
    prefix = "_orig_mod." if compiled else ""
    trainable = [(n.removeprefix(prefix), p) for n, p in net.named_parameters() if p.requires_grad]
    params = [(n, p) for n, p in trainable if p.numel() > 0]  # an empty one has no gradient to send
    if not params:
        raise InvalidParameterError(
            "model", type(net).__name__, "a model with trainable parameters (with at least one element)"
        )
    try:  # every trainable parameter, empty ones too, so that zero_grad clears them all
        opt = (
            optimizer([p for _, p in trainable])
            if optimizer is not None
            else default_optimizer([p for _, p in trainable])
        )
    except QueuesgdError:
        raise
    except Exception as exc:  # the factory's own failure: one line, the cause chained
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise InvalidParameterError(
            "optimizer",
            _name_of(optimizer),
            f"a callable optimizer(parameters) -> torch.optim.Optimizer (it raised {type(exc).__name__}: "
            f"{first})",
        ) from exc
    if not isinstance(opt, torch.optim.Optimizer):
        raise InvalidParameterError(
            "optimizer", type(opt).__name__, "a callable returning a torch.optim.Optimizer"
        )
    if shape is not None:
        gen = torch.Generator(device="cpu").manual_seed(seed)
        batch: Any = torch.randn((batch_size, *shape), generator=gen).to(dev)
    else:
        batch = example_batch(torch, inputs, batch_size, dev, free)
    args, kwargs = call_args(batch)
    scaler = torch.amp.GradScaler(dev.type) if amp == torch.float16 else None
    loss_of = loss if loss is not None else _default_loss
    step = TrainingStep(torch, net, params, opt, dev, amp, accumulation, batch_size, compiled)
    step.label = f"{label} on a batch of {(batch_size, *shape) if shape is not None else 'inputs'}"
    step.modes = modes
    if loss is not None:
        step.loss_label = _name_of(loss)
    cuda = dev.type == "cuda"

    def forward(last: bool) -> Any:
        """One micro-step's forward pass and loss: the (scaled) loss whose ``backward`` is the rest."""
        before = torch.cuda.memory_allocated(dev) if cuda and last else 0
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            out = net(*args, **kwargs)
            try:
                got = loss_of(out)
            except Exception as exc:  # the user's loss: TrainingStep.errors names it
                if loss is not None:
                    _blame(exc, "loss")
                raise
            value = _scalar(torch, got, loss is not None) / accumulation
        del out
        if step.first_loss is None:  # kept, not read: checked after the timed steps (check_loss)
            step.first_loss = value.detach()
        if cuda and last:  # the allocator's count, read on the host: no wait for the device
            step.activations.append(int(torch.cuda.memory_allocated(dev) - before))
        return scaler.scale(value) if scaler is not None else value

    def run_micro(last: bool) -> Callable[[], None]:
        return forward(last).backward

    def update() -> None:
        try:
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
        except Exception as exc:
            _blame(exc, "optimizer")
            raise
        opt.zero_grad(set_to_none=True)

    step.run_micro, step.update, step.forward, step.batch = run_micro, update, forward, batch
    net.train()  # last: a refusal above leaves the caller's model in its mode (modes_kept puts it back)
    return step


def check_steps(accumulation: Any, total: int, /, **counts: int) -> int:
    """``accumulation`` as an int, if ``accumulation x total`` passes stay within :data:`MAX_PASSES`.

    ``total`` is the steps the caller runs; ``counts`` its step counts that make it up (``warmup=5,
    repetitions=20``), each checked already: with one micro-step per update the
    error names the largest of them, the argument to lower (with several, it
    names ``accumulation``).

    Examples
    --------
    >>> check_steps(4, 30)
    4
    >>> check_steps(10**6, 30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: accumulation: got 1000000; accepted: at most 100,000 ...
    >>> check_steps(1, 100_030, warmup=30, steps=100_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: steps: got 100000; accepted: at most 100,000 forward + backward ...
    """
    accumulation = _checks.integer("accumulation", accumulation)
    if accumulation * total > MAX_PASSES:
        field = "accumulation"
        if accumulation == 1 and counts:
            field = max(counts, key=lambda name: counts[name])
        raise InvalidParameterError(
            field,
            accumulation if field == "accumulation" else counts[field],
            f"at most {MAX_PASSES:,} forward + backward passes in all (accumulation {accumulation} x "
            f"{total:,} steps): fewer steps or a smaller accumulation",
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
    if isinstance(out, Mapping) and isinstance(out.get("loss"), torch.Tensor):
        if out["loss"].numel() != 1:  # a per-sample loss (reduction="none"): not the model's scalar loss
            raise InvalidParameterError(
                "loss",
                f"the model's output['loss'] of shape {tuple(out['loss'].shape)}",
                "a model whose 'loss' output is a scalar (one element), or loss=callable(output) to "
                "reduce it (loss=lambda out: out['loss'].mean())",
            )
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
    real = isinstance(value, torch.Tensor) and not (value.is_complex() or value.dtype == torch.bool)
    if not real or value.numel() != 1 or not value.requires_grad:  # backward needs a real scalar
        raise InvalidParameterError(
            "loss" if given else "model",
            type(value).__name__
            if not isinstance(value, torch.Tensor)
            else f"tensor of shape {tuple(value.shape)}",
            "a loss that is a real scalar tensor requiring grad",
        )
    return value.reshape(())
