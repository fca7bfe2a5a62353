"""Profile a PyTorch model on one worker into a layer-wise :class:`~queuesgd.Workload`.

The first step of predicting a model's distributed training before it runs
(issue 12): measure, on one worker, what one training step costs, tensor by
tensor, and hand that to the models (``method="fine"``, ``sweep``,
``whatif``).

For ``repetitions`` steps (after ``warmup`` unmeasured ones) on a random
mini-batch of ``batch_size`` inputs of ``input_shape``:

- the forward pass and each leaf module's share of it (forward hooks);
- the backward pass of the loss ``mean(output ** 2)`` (a synthetic loss: no
  labels are needed, and its backward reaches every parameter the output
  depends on), with the moment each parameter's gradient is accumulated
  (``register_post_accumulate_grad_hook``);
- the optimizer step (SGD with momentum by default).

The result's layers are the parameters in *backward order* (the order of their
mean ready times), each with its gradient size (``numel x element size``),
its backward gap (the mean time from the previous gradient being ready to
this one) and its forward time (its module's mean forward time, split among
the module's parameters in proportion to their sizes). ``compute`` is the
:class:`~queuesgd.distributions.Empirical` law of the measured forward +
backward times, and ``update_time`` the median optimizer step.

PyTorch is an optional dependency (``pip install queuesgd[validation]``),
imported only when :func:`profile` runs.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Empirical
from queuesgd.errors import InvalidParameterError
from queuesgd.harness import require_torch
from queuesgd.workload import Layer, Workload

__all__ = ["profile", "resolve_model"]


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
        try:
            factory = getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as exc:
            raise InvalidParameterError("model", model, f"{accepted} ({type(exc).__name__}: {exc})") from None
        model = factory
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


def profile(
    model: Any,
    *,
    batch_size: int,
    input_shape: tuple[int, ...],
    device: str = "cpu",
    threads: int | None = 1,
    warmup: int = 3,
    repetitions: int = 20,
    optimizer: Callable[[Any], Any] | None = None,
    seed: int = 0,
    name: str | None = None,
) -> Workload:
    """Measure one worker's training step of ``model`` and return it as a layer-wise Workload.

    Parameters
    ----------
    model : nn.Module, callable or str
        The model, a factory, or ``"module.path:callable"`` (see :func:`resolve_model`).
    batch_size : int
        Samples per step (the per-worker mini-batch).
    input_shape : tuple of int
        Shape of one input sample (``(3, 32, 32)`` for small images).
    device : str
        ``"cpu"`` or a CUDA device where present.
    threads : int or None
        ``torch.set_num_threads`` during the profile (restored after); None keeps the current one.
    warmup, repetitions : int
        Unmeasured steps first, then measured ones (each measure is a distribution over them).
    optimizer : callable or None
        ``optimizer(parameters) -> torch.optim.Optimizer``; SGD (lr 0.01, momentum 0.9) if None.
    seed : int
        Seed of the random inputs and of the model's initialization when it is built here.
    name : str or None
        The Workload's label (the model's class name if None).

    Returns
    -------
    Workload
        ``layers`` in backward order; ``compute`` the Empirical law of forward + backward;
        ``update_time`` the median optimizer step; ``batch_size`` as given.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    >>> w = profile(net, batch_size=4, input_shape=(8,), repetitions=5)
    >>> sorted(layer.name for layer in w.layers[:2])      # the last Linear's gradients come first
    ['2.bias', '2.weight']
    >>> int(w.gradient_bytes) == 4 * sum(p.numel() for p in net.parameters())
    True
    """
    torch = require_torch()
    batch_size = _checks.integer("batch_size", batch_size)
    warmup = _checks.integer("warmup", warmup, minimum=0)
    repetitions = _checks.integer("repetitions", repetitions, minimum=2)
    shape = _shape(input_shape)
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(_checks.integer("threads", threads))
    try:
        torch.manual_seed(seed)
        net = resolve_model(model).to(device)
        net.train()
        params = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
        if not params:
            raise InvalidParameterError("model", type(net).__name__, "a model with trainable parameters")
        opt = (
            optimizer(net.parameters())
            if optimizer is not None
            else torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        )
        gen = torch.Generator(device="cpu").manual_seed(seed)
        x = torch.randn((batch_size, *shape), generator=gen).to(device)
        rec = _Recorder(torch, net, params, device)
        try:
            for _ in range(warmup):
                rec.step(x, opt, measure=False)
            for _ in range(repetitions):
                rec.step(x, opt, measure=True)
        finally:
            rec.remove()
    finally:
        torch.set_num_threads(old_threads)
    return rec.workload(batch_size, name or type(net).__name__)


def _shape(input_shape: Any) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in input_shape)
    except TypeError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise InvalidParameterError(
            "input_shape", input_shape, "a tuple of positive integers, e.g. (3, 32, 32)"
        )
    return shape


class _Recorder:
    """Hooks on a model that time its forward modules, gradient readiness and the optimizer step."""

    def __init__(self, torch: Any, net: Any, params: list[tuple[str, Any]], device: str) -> None:
        self.torch, self.net, self.params = torch, net, params
        self.cuda = str(device).startswith("cuda")
        self.ready: dict[str, float] = {}
        self.enter: dict[str, float] = {}
        self.fwd: dict[str, float] = {}
        self.samples: dict[str, list] = {"forward": [], "backward": [], "update": []}
        self.ready_runs: list[dict[str, float]] = []
        self.fwd_runs: list[dict[str, float]] = []
        self.handles = [p.register_post_accumulate_grad_hook(self._ready(n)) for n, p in params]
        self.owner: dict[str, str] = {}
        for mod_name, mod in net.named_modules():
            own = [n for n, _ in mod.named_parameters(recurse=False)]
            if not own:
                continue
            for pn in own:
                self.owner[f"{mod_name}.{pn}" if mod_name else pn] = mod_name
            self.handles.append(mod.register_forward_pre_hook(self._enter(mod_name)))
            self.handles.append(mod.register_forward_hook(self._leave(mod_name)))

    def _now(self) -> float:
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter()

    def _ready(self, name: str) -> Any:
        def hook(_p: Any) -> None:
            self.ready[name] = self._now()

        return hook

    def _enter(self, mod: str) -> Any:
        def hook(_m: Any, _inp: Any) -> None:
            self.enter[mod] = self._now()

        return hook

    def _leave(self, mod: str) -> Any:
        def hook(_m: Any, _inp: Any, _out: Any) -> None:
            self.fwd[mod] = self.fwd.get(mod, 0.0) + self._now() - self.enter[mod]

        return hook

    def step(self, x: Any, opt: Any, *, measure: bool) -> None:
        self.ready.clear()
        self.fwd.clear()
        opt.zero_grad(set_to_none=True)
        t0 = self._now()
        out = self.net(x)
        loss = out.float().pow(2).mean()
        t1 = self._now()
        loss.backward()
        t2 = self._now()
        opt.step()
        t3 = self._now()
        if not measure:
            return
        missing = [n for n, _ in self.params if n not in self.ready]
        if missing:
            raise InvalidParameterError(
                "model", missing[:3], "a model whose every trainable parameter receives a gradient"
            )
        self.samples["forward"].append(t1 - t0)
        self.samples["backward"].append(t2 - t1)
        self.samples["update"].append(t3 - t2)
        self.ready_runs.append({n: t - t1 for n, t in self.ready.items()})
        self.fwd_runs.append(dict(self.fwd))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def workload(self, batch_size: int, name: str) -> Workload:
        names = [n for n, _ in self.params]
        ready = {n: float(np.mean([r[n] for r in self.ready_runs])) for n in names}
        order = sorted(names, key=lambda n: (ready[n], names.index(n)))
        sizes = {n: float(p.numel() * p.element_size()) for n, p in self.params}
        fwd_mod = {
            m: float(np.mean([r.get(m, 0.0) for r in self.fwd_runs])) for m in set(self.owner.values())
        }
        mod_bytes: dict[str, float] = {}
        for n in names:
            mod_bytes[self.owner[n]] = mod_bytes.get(self.owner[n], 0.0) + sizes[n]
        layers, prev = [], 0.0
        for n in order:
            gap = max(ready[n] - prev, 0.0)
            prev = max(prev, ready[n])
            share = sizes[n] / mod_bytes[self.owner[n]] if mod_bytes[self.owner[n]] else 0.0
            layers.append(Layer(n, sizes[n], gap, fwd_mod[self.owner[n]] * share))
        steps = np.asarray(self.samples["forward"]) + np.asarray(self.samples["backward"])
        return Workload(
            Empirical(steps),
            None,
            batch_size=batch_size,
            update_time=float(statistics.median(self.samples["update"])),
            layers=tuple(layers),
            name=name,
        )
