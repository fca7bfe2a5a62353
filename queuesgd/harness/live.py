"""Live workloads: what one worker computes per step, emulated or real, with injected stragglers.

Two workloads describe a step as data (frozen dataclasses); inside a worker
process ``workload.make(rank, seed, workers=n)`` builds the live object (a
*step*) that runs it:

- :class:`EmulatedCompute` -- compute is a timed wait drawn from a law, and the
  gradient is a float32 tensor of the configured size. Waiting costs no CPU,
  so 8 to 16 workers fit on a 2-core machine and the measured times follow
  the configured law (sleep, then spin the last 0.2 ms).
- :class:`RealModel` -- a small real model (MLP or CNN) trained on synthetic
  data with one thread per process. On two cores this measures the machine
  above two workers.

A step offers ``compute(interrupt=None) -> seconds`` (one step's computation,
injected delays included; an optional :class:`threading.Event` aborts it, for
schemes that cancel stragglers), ``grad`` (the flat float32 gradient),
``params`` (the flat float32 parameters), ``apply(flat_grad)`` (one SGD step
with an averaged gradient), ``load(flat_params)`` (copy parameters in),
``nbytes`` and ``batch_size``.

Straggler injection (both workloads): ``delays`` -- an extra per-step delay
law for chosen workers; ``random_delay=(k, d)`` -- eager-SGD's recipe, ``k``
workers drawn anew every step sleep ``d`` seconds first (every worker draws
the same ``k`` from a seed shared by all, so exactly ``k`` are delayed).

Examples
--------
>>> from queuesgd.distributions import Exponential
>>> w = EmulatedCompute(Exponential(mean=0.02), "1MB", random_delay=(1, "10ms"))
>>> w.law.mean, w.gradient_bytes, w.random_delay
(0.02, 1000000, (1, 0.01))
>>> len(delayed_workers(w.random_delay, step=3, workers=4, seed=0))   # one worker delayed at step 3
1
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Deterministic, Distribution
from queuesgd.errors import InvalidParameterError
from queuesgd.harness._torch import require_torch
from queuesgd.harness.models import MODELS
from queuesgd.harness.shaping import sleep_until
from queuesgd.units import parse_bytes, parse_seconds

__all__ = ["EmulatedCompute", "RealModel", "delayed_workers"]

_DELAY_SALT = 0x5EED_DE1A


def _law(field: str, value: Any) -> Distribution:
    if isinstance(value, Distribution):
        mean = float(value.mean)
        if not (math.isfinite(mean) and mean >= 0):
            raise InvalidParameterError(field, value, "a distribution of seconds with a finite mean >= 0")
        return value
    return Deterministic(_checks.positive(field, parse_seconds(value, field), allow_zero=True))


def _random_delay(value: Any) -> tuple[int, float] | None:
    if value is None:
        return None
    if hasattr(value, "count") and hasattr(value, "delay"):  # queuesgd.workload.RandomDelay
        value = (value.count, value.delay)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InvalidParameterError("random_delay", value, "(count, delay) or a RandomDelay, or None")
    k = _checks.integer("random_delay.count", value[0])
    d = _checks.positive("random_delay.delay", parse_seconds(value[1], "random_delay.delay"), allow_zero=True)
    return k, d


def _delays(value: Any) -> dict[int, Distribution] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidParameterError("delays", value, "a mapping {worker index: delay law} or None")
    return {_checks.integer("delays key", k, minimum=0): _law(f"delays[{k}]", v) for k, v in value.items()}


def delayed_workers(random_delay: tuple[int, float], step: int, workers: int, seed: int = 0) -> np.ndarray:
    """The worker indices delayed at ``step`` by the recipe ``random_delay = (k, d)``.

    Every worker computes the same ``k`` distinct indices from the shared
    ``seed`` and the step (no communication needed).

    Examples
    --------
    >>> a = delayed_workers((2, 0.1), step=0, workers=8, seed=1)
    >>> len(a), len(set(a.tolist())), bool(all(0 <= i < 8 for i in a))
    (2, 2, True)
    >>> bool((a == delayed_workers((2, 0.1), 0, 8, seed=1)).all())
    True
    """
    k = min(int(random_delay[0]), workers)
    rng = np.random.default_rng([int(seed), int(step), _DELAY_SALT])
    return np.sort(rng.choice(workers, size=k, replace=False))


class _Step:
    """Shared parts of a live step: straggler delays, timing and the SGD update."""

    def __init__(self, spec: Any, rank: int, seed: int, workers: int) -> None:
        workers = _checks.integer("workers", workers)
        rank = _checks.integer("rank", rank, minimum=0)
        if rank >= workers:
            raise InvalidParameterError("rank", rank, f"a worker index 0 .. {workers - 1}")
        if spec.random_delay is not None and spec.random_delay[0] > workers:
            raise InvalidParameterError(
                "random_delay.count", spec.random_delay[0], f"at most the number of workers ({workers})"
            )
        self.rank, self.seed, self.workers = rank, int(seed), workers
        self.batch_size = spec.batch_size
        self.lr = spec.lr
        self._rng = np.random.default_rng([int(seed), rank])
        self._delay_law = (spec.delays or {}).get(rank)
        self._random_delay = spec.random_delay
        self.steps = 0
        self.interrupted = False
        self.last_delay = 0.0

    def _injected(self) -> float:
        """Seconds of injected delay for the current step."""
        delay = 0.0
        if self._delay_law is not None:
            delay += max(float(self._delay_law.sample(self._rng)), 0.0)
        if self._random_delay is not None:
            chosen = delayed_workers(self._random_delay, self.steps, self.workers, self.seed)
            if self.rank in chosen:
                delay += self._random_delay[1]
        return delay

    @property
    def nbytes(self) -> int:
        """Bytes of the gradient (float32)."""
        return int(self.grad.numel()) * 4


class _EmulatedStep(_Step):
    def __init__(self, spec: EmulatedCompute, rank: int, seed: int, workers: int) -> None:
        super().__init__(spec, rank, seed, workers)
        torch = require_torch()
        numel = max(1, math.ceil(spec.gradient_bytes / 4))
        self._law = spec.law
        speeds = spec.speeds
        self._speed = 1.0 if speeds is None else float(speeds[rank])
        data = np.random.default_rng([int(seed), rank, 1]).standard_normal(numel).astype(np.float32)
        self.grad = torch.from_numpy(data * np.float32(1e-3))
        self.params = torch.zeros(numel, dtype=torch.float32)

    def compute(self, interrupt: threading.Event | None = None) -> float:
        start = time.perf_counter()
        self.last_delay = self._injected()
        work = max(float(self._law.sample(self._rng)), 0.0) / self._speed
        self.steps += 1
        self.interrupted = not sleep_until(start + self.last_delay + work, interrupt)
        return time.perf_counter() - start

    def apply(self, flat: Any) -> None:
        self.params.add_(flat[: self.params.numel()], alpha=-self.lr)

    def load(self, flat: Any) -> None:
        self.params.copy_(flat[: self.params.numel()])


@dataclass(frozen=True)
class EmulatedCompute:
    """A step whose computation is a timed wait drawn from a law (fits many workers on few cores).

    Parameters
    ----------
    law : Distribution or float or str
        Compute seconds of one step of a speed-1 worker (a number or
        ``"20ms"`` is a deterministic time).
    gradient_bytes : int or str
        Size of the gradient exchanged per step (float32: ``bytes / 4``
        elements, rounded up); the parameters have the same size.
    batch_size : int
        Samples per step (for throughput in samples per second).
    delays : mapping, optional
        ``{worker index: law}``: an extra delay drawn every step for those
        workers (straggler injection).
    random_delay : (int, float) or RandomDelay, optional
        eager-SGD's recipe: ``k`` workers drawn anew every step wait ``d``
        extra seconds before computing.
    speeds : sequence of float, optional
        Per-worker speed factors (compute divided by the speed), one per worker.
    lr : float
        Learning rate of :meth:`apply` (the update does real work on the parameters).

    Examples
    --------
    >>> w = EmulatedCompute("20ms", "4KB", batch_size=16)
    >>> w.law, w.gradient_bytes, w.batch_size
    (Deterministic(value=0.02), 4000, 16)
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> step = w.make(rank=0, seed=1)
    >>> seconds = step.compute()
    >>> 0.02 <= seconds < 0.05, step.nbytes, step.grad.dtype
    (True, 4000, torch.float32)
    """

    law: Distribution | float | str
    gradient_bytes: int | float | str
    batch_size: int = 32
    delays: Mapping[int, Distribution] | None = None
    random_delay: tuple[int, float] | Any | None = None
    speeds: Sequence[float] | None = None
    lr: float = 0.01

    kind: ClassVar[str] = "emulated"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "law", _law("law", self.law))
        size = _checks.positive("gradient_bytes", parse_bytes(self.gradient_bytes, "gradient_bytes"))
        set_(self, "gradient_bytes", int(math.ceil(size)))
        set_(self, "batch_size", _checks.integer("batch_size", self.batch_size))
        set_(self, "delays", _delays(self.delays))
        set_(self, "random_delay", _random_delay(self.random_delay))
        if self.speeds is not None:
            set_(
                self, "speeds", tuple(_checks.positive(f"speeds[{i}]", s) for i, s in enumerate(self.speeds))
            )
        set_(self, "lr", _checks.positive("lr", self.lr, allow_zero=True))

    def make(self, rank: int, seed: int = 0, *, workers: int = 1) -> _EmulatedStep:
        """Build the live step of worker ``rank`` (``0 .. workers - 1``) in this process (needs torch).

        ``seed`` is shared by all workers (each worker's compute times come from
        ``(seed, rank)``; the random-delay draw from ``seed`` and the step).
        """
        if self.speeds is not None and len(self.speeds) != workers:
            raise InvalidParameterError("speeds", self.speeds, f"one speed factor per worker ({workers})")
        return _EmulatedStep(self, rank, seed, workers)


class _RealStep(_Step):
    def __init__(self, spec: RealModel, rank: int, seed: int, workers: int) -> None:
        super().__init__(spec, rank, seed, workers)
        torch = require_torch()
        nn = torch.nn
        # Identical initial parameters on every worker, without touching the caller's global RNG.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            self.model, shape = self._build(nn, spec)
        from queuesgd.harness.models import worker_batches

        self._data = worker_batches(seed, rank, spec.batch_size, shape, spec.classes)
        self._params = [p for p in self.model.parameters()]
        self._sizes = [p.numel() for p in self._params]
        self.grad = torch.zeros(sum(self._sizes), dtype=torch.float32)
        self._loss = nn.CrossEntropyLoss()
        self._torch = torch

    @staticmethod
    def _build(nn: Any, spec: RealModel) -> tuple[Any, tuple[int, ...]]:
        """The model and the shape of one input sample (:func:`queuesgd.harness.model_build.build_model`)."""
        from queuesgd.harness.model_build import build_model

        return build_model(spec.kind, **spec.sizes())

    @property
    def params(self) -> Any:
        with self._torch.no_grad():
            return self._torch.cat([p.reshape(-1) for p in self._params])

    def compute(self, interrupt: threading.Event | None = None) -> float:
        torch = self._torch
        start = time.perf_counter()
        self.last_delay = self._injected()
        x, y = self._data[self.steps % len(self._data)]
        self.steps += 1
        if self.last_delay > 0 and not sleep_until(start + self.last_delay, interrupt):
            self.interrupted = True
            return time.perf_counter() - start
        for p in self._params:
            p.grad = None
        loss = self._loss(self.model(x), y)
        if interrupt is not None and interrupt.is_set():
            self.interrupted = True
            return time.perf_counter() - start
        loss.backward()
        with torch.no_grad():
            torch.cat([p.grad.reshape(-1) for p in self._params], out=self.grad)
        self.interrupted = interrupt is not None and interrupt.is_set()
        return time.perf_counter() - start

    def _each(self, flat: Any):
        offset = 0
        for p, n in zip(self._params, self._sizes):
            yield p, flat[offset : offset + n].view_as(p)
            offset += n

    def apply(self, flat: Any) -> None:
        with self._torch.no_grad():
            for p, g in self._each(flat):
                p.add_(g, alpha=-self.lr)

    def load(self, flat: Any) -> None:
        with self._torch.no_grad():
            for p, v in self._each(flat):
                p.copy_(v)


@dataclass(frozen=True)
class RealModel:
    """A real small model (MLP or CNN) trained on synthetic data, one thread per process.

    Parameters
    ----------
    kind : {"mlp", "cnn", "resnet18s", "encoder"}
        ``"mlp"``: ``inputs -> hidden -> hidden -> classes`` with ReLUs;
        ``"cnn"``: two 3x3 convolutions with pooling on ``image_side``-pixel
        single-channel images, then ``hidden -> classes``; ``"resnet18s"``:
        the ResNet-18-style network of ``width`` on 3x32x32 images;
        ``"encoder"``: a transformer encoder of ``layers`` blocks of
        ``width`` on sequences of ``seq`` vectors
        (:mod:`queuesgd.harness.models`, which builds them all).
        A named model instead (:func:`~queuesgd.harness.models.check_model`:
        ``"module.path:callable"``, ``"torchvision:NAME"``, ``"queuesgd:KIND"``)
        is built with ``model_args`` and fed samples of ``input_shape``; it
        gives ``classes`` logits, and the harness's other sizes do not apply.
    batch_size, hidden, inputs, classes, image_side, width, layers, seq : int
        Sizes.
    input_shape : sequence of int, optional
        One sample's shape (a named model only, and required there).
    model_args : mapping, optional
        Keyword arguments of a named model's class or factory; for one of the
        project's (``queuesgd:KIND``, ``queuesgd.harness.zoo:vit``), checked here
        against the types its parameters declare
        (:func:`~queuesgd.profiler_model.check_named_model_args`).
    lr : float
        SGD learning rate of :meth:`apply`.
    delays, random_delay
        Straggler injection, as in :class:`EmulatedCompute`.

    Examples
    --------
    >>> m = RealModel("mlp", batch_size=8, hidden=16, inputs=32, classes=4)
    >>> m.parameter_count          # (32*16 + 16) + (16*16 + 16) + (16*4 + 4)
    868
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> step = m.make(0, seed=0)
    >>> _ = step.compute()
    >>> step.nbytes, tuple(step.grad.shape), bool(step.grad.abs().sum() > 0)
    (3472, (868,), True)
    """

    kind: str = "mlp"
    batch_size: int = 32
    hidden: int = 256
    inputs: int = 784
    classes: int = 10
    image_side: int = 28
    width: int = 16
    layers: int = 2
    seq: int = 16
    lr: float = 0.01
    delays: Mapping[int, Distribution] | None = None
    random_delay: tuple[int, float] | Any | None = None
    input_shape: tuple[int, ...] | None = None
    model_args: Mapping[str, Any] | None = None

    kinds: ClassVar[tuple[str, ...]] = MODELS

    def __post_init__(self) -> None:
        from queuesgd.harness.models import check_model, input_shape_of, is_named

        set_ = object.__setattr__
        check_model(self.kind, "RealModel.kind")
        if is_named(self.kind):
            from queuesgd.profiler_model import check_model_args, check_named_model_args

            set_(self, "input_shape", input_shape_of(self.input_shape, "RealModel.input_shape"))
            args = check_model_args("RealModel.model_args", self.model_args)
            set_(self, "model_args", check_named_model_args(self.kind, args, "RealModel.model_args"))
        elif self.input_shape is not None or self.model_args is not None:
            raise InvalidParameterError(
                "RealModel.input_shape" if self.input_shape is not None else "RealModel.model_args",
                self.input_shape if self.input_shape is not None else self.model_args,
                f"none for the harness model {self.kind!r} (for a named model, 'module:callable')",
            )
        for name in ("batch_size", "hidden", "inputs", "classes", "width", "layers", "seq"):
            set_(self, name, _checks.integer(f"RealModel.{name}", getattr(self, name)))
        set_(self, "image_side", _checks.integer("RealModel.image_side", self.image_side, minimum=4))
        set_(self, "lr", _checks.positive("RealModel.lr", self.lr, allow_zero=True))
        set_(self, "delays", _delays(self.delays))
        set_(self, "random_delay", _random_delay(self.random_delay))

    @property
    def parameter_count(self) -> int:
        """Number of float32 parameters (also the gradient's length).

        Examples
        --------
        >>> RealModel("cnn", hidden=32, classes=10, image_side=28).parameter_count
        26698
        """
        from queuesgd.harness.model_build import count_parameters

        return count_parameters(self.kind, **self.sizes())

    def sizes(self) -> dict[str, Any]:
        """The size options of :func:`~queuesgd.harness.models.build` (each model reads its own).

        A named model's are ``classes``, ``input_shape`` and ``model_args``.
        """
        if self.input_shape is not None:
            return {
                "classes": self.classes,
                "input_shape": list(self.input_shape),
                "model_args": dict(self.model_args or {}),
            }
        return {
            "classes": self.classes,
            "hidden": self.hidden,
            "inputs": self.inputs,
            "image_side": self.image_side,
            "width": self.width,
            "layers": self.layers,
            "seq": self.seq,
        }

    @property
    def gradient_bytes(self) -> int:
        """Bytes of the gradient (float32).

        Examples
        --------
        >>> RealModel("mlp", hidden=16, inputs=32, classes=4).gradient_bytes
        3472
        """
        return 4 * self.parameter_count

    def make(self, rank: int, seed: int = 0, *, workers: int = 1) -> _RealStep:
        """Build the live step of worker ``rank`` (``0 .. workers - 1``) in this process (needs torch).

        Every worker starts from the same parameters (seeded by ``seed``); each
        has its own synthetic data (``seed`` and ``rank``).
        """
        return _RealStep(self, rank, seed, workers)
