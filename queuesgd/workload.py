"""What one worker computes and sends per step, and the cluster it runs on.

Plain, validated, immutable data; no solver logic. Sizes, times and rates are
stored in SI units (bytes, seconds, bytes per second); the constructors also
accept unit strings such as ``"97.5MiB"``, ``"128ms"`` or ``"10Gbit/s"``,
parsed once by :mod:`queuesgd.units`.

- :class:`Layer` -- one gradient tensor of a per-layer profile, in backward
  order (the order in which gradients become ready).
- :class:`Workload` -- the per-step compute time (a distribution), the
  gradient and parameter sizes, the mini-batch size, the parameter server's
  update time and, optionally, the per-layer profile.
- :class:`CostCurve` (defined in :mod:`queuesgd.cost_curve`) -- seconds of
  an operation as a piecewise-linear function of its size in bytes (the GPU
  vector addition of a reduction).
- :class:`PhaseTimes` -- a step split into forward, backward and the rest
  (:meth:`Workload.phase_times`).
- :class:`Cluster` and :class:`RandomDelay` (defined in :mod:`queuesgd.cluster`)
  -- number of workers, per-link bandwidth and latency, parameter-server
  shards, optional per-worker speed factors and straggler delays.

Examples
--------
>>> from queuesgd.workload import Cluster, Workload
>>> w = Workload("128ms", "97.5MiB", batch_size=32)
>>> round(w.samples_per_second_single, 2)
250.0
>>> Cluster(8, "10Gbit/s").bandwidth
1250000000.0
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.cluster import Cluster, RandomDelay
from queuesgd.cost_curve import CostCurve, byte_sizes
from queuesgd.distributions import Deterministic, Distribution
from queuesgd.errors import InvalidParameterError
from queuesgd.units import MAX_SECONDS, parse_bytes

__all__ = ["Layer", "CostCurve", "MAX_BATCH_SIZE", "PhaseTimes", "Workload", "Cluster", "RandomDelay"]

#: Largest mini-batch accepted: ``2**53``, the largest integer up to which every count is exact in the
#: floating-point throughput arithmetic (samples/s = batch x updates/s).
MAX_BATCH_SIZE = 2**53

# Relative tolerance for "the layer sizes add up to gradient_bytes" (sizes are
# integers in practice; the tolerance only absorbs float rounding).
_SUM_RTOL = 1e-9


def _bytes(field_name: str, value: Any, *, allow_zero: bool = False) -> float:
    return _checks.positive(field_name, parse_bytes(value, field_name), allow_zero=allow_zero)


def _fmt_seconds(value: float) -> str:
    return f"{value:.6g} s"


@dataclass(frozen=True)
class Layer:
    """One gradient tensor of a per-layer (per-tensor) profile.

    A profile lists the tensors in *backward order*, the order in which their
    gradients become ready during back-propagation (last layer first). The
    backward pass is taken to be sequential, so tensor ``i`` becomes ready
    ``backward_time`` seconds after tensor ``i - 1`` (the first one,
    ``backward_time`` after the backward pass starts): ``backward_time`` is
    both the back-propagation time attributable to this tensor and its
    :attr:`ready_gap`. A zero is allowed (a bias gradient that becomes ready
    together with its layer's weight gradient).

    Parameters
    ----------
    name : str
        Tensor or layer name (``"tensor0"`` for traces that carry none).
    gradient_bytes : float or str
        Size of the gradient tensor, in bytes (or a unit string, ``"4KiB"``).
    backward_time : float or str
        Seconds of backward computation attributable to this tensor: the time
        from the previous tensor's gradient being ready to this one's.
    forward_time : float, str or None
        Seconds of forward computation of this layer, or ``None`` when the
        profile does not record it (backward-only traces, such as the
        catalog's).

    Examples
    --------
    >>> Layer("fc.weight", "8000KB", "16us")
    Layer(name='fc.weight', gradient_bytes=8000000.0, backward_time=1.6e-05, forward_time=None)
    >>> Layer("fc.weight", 8e6, 1.6e-5).ready_gap
    1.6e-05
    """

    name: str
    gradient_bytes: float
    backward_time: float
    forward_time: float | None = None

    def __post_init__(self) -> None:
        _checks.name("Layer.name", self.name)
        label = f"Layer({self.name!r})"
        object.__setattr__(self, "gradient_bytes", _bytes(f"{label}.gradient_bytes", self.gradient_bytes))
        object.__setattr__(
            self,
            "backward_time",
            _checks.duration(f"{label}.backward_time", self.backward_time),
        )
        if self.forward_time is not None:
            object.__setattr__(
                self,
                "forward_time",
                _checks.duration(f"{label}.forward_time", self.forward_time),
            )

    @property
    def ready_gap(self) -> float:
        """Seconds from the previous tensor's gradient being ready to this one's (= ``backward_time``)."""
        return self.backward_time


@dataclass(frozen=True)
class PhaseTimes:
    """One training step split into phases (:meth:`Workload.phase_times`), in seconds.

    Parameters
    ----------
    forward : float
        Forward pass.
    backward : float
        Backward pass (the per-layer profile's total).
    other : float
        The rest of the step: data loading, optimizer, bookkeeping.
    derived : bool
        ``True`` when ``forward`` is not measured but derived as compute
        minus backward (the profile has no forward times).
    note : str
        How the split was obtained, for reports.

    Examples
    --------
    >>> PhaseTimes(0.06, 0.05, 0.01, False, "measured").forward
    0.06
    """

    forward: float
    backward: float
    other: float
    derived: bool
    note: str


@dataclass(frozen=True, repr=False)
class Workload:
    """What one worker computes and sends per training step.

    Parameters
    ----------
    compute : Distribution, float or str
        Time one worker (speed factor 1) needs for one step -- forward,
        backward and local bookkeeping on one mini-batch -- as a
        :class:`~queuesgd.distributions.Distribution` of seconds. A number or
        a unit string (``"128ms"``) means a deterministic time. At most
        :data:`queuesgd.units.MAX_SECONDS` (1e9 s; a distribution's mean), as
        every duration (``update_time``, a layer's times, a ``RandomDelay``).
    gradient_bytes : float, str or None
        Bytes of gradient a worker sends per step (``"97.5MiB"`` accepted).
        ``None`` derives it from ``layers`` (the sum of their sizes).
    parameter_bytes : float, str or None
        Bytes of parameters a worker receives per step; defaults to
        ``gradient_bytes`` (dense model, same dtype).
    batch_size : int
        Training samples per worker per step (the mini-batch size), from 1 to
        :data:`MAX_BATCH_SIZE` (``2**53``).
    update_time : float or str
        Seconds a parameter server needs to apply one gradient (``0`` if
        negligible).
    layers : sequence of Layer or None
        Optional per-tensor profile in backward order. When given, the layer
        sizes must add up to ``gradient_bytes``.
    name : str or None
        Label used in reports.
    add_cost : CostCurve or None
        Seconds to add two gradient vectors of ``x`` bytes (the reduction of
        a ring all-reduce), as a :class:`CostCurve`; ``None`` scales
        ``update_time`` instead (see :meth:`reduction_time`).
    provenance : mapping or None
        Where the numbers came from, for reports: plain JSON values by name
        (:func:`queuesgd.profile` records the device, torch version, dtype,
        date, accumulation and peak memory). Descriptive only: no model
        reads it, and it takes no part in equality.

    Examples
    --------
    >>> w = Workload("128ms", "97.5MiB", batch_size=32, name="resnet50")
    >>> w  # doctest: +NORMALIZE_WHITESPACE
    Workload(name='resnet50', compute=Deterministic(value=0.128), gradient_bytes=102236160.0,
             parameter_bytes=102236160.0, batch_size=32, update_time=0.0, layers=None)
    >>> w.compute_time, round(w.samples_per_second_single, 1)
    (0.128, 250.0)

    The gradient size can come from the layers:

    >>> layers = [Layer("fc.bias", 4000, "0.7ms"), Layer("fc.weight", 8192000, "16us")]
    >>> w = Workload(0.2, None, layers=layers)
    >>> w.gradient_bytes, round(w.backward_time, 6)
    (8196000.0, 0.000716)
    """

    compute: Distribution
    gradient_bytes: float | None
    parameter_bytes: float | None = None
    batch_size: int = 1
    update_time: float = 0.0
    layers: tuple[Layer, ...] | None = field(default=None)
    name: str | None = None
    add_cost: CostCurve | None = None
    provenance: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.name is not None:
            _checks.name("Workload.name", self.name)
        if self.provenance is not None:
            set_(self, "provenance", _checks.json_record("Workload.provenance", self.provenance))
        if self.add_cost is not None and not isinstance(self.add_cost, CostCurve):
            raise InvalidParameterError(
                "Workload.add_cost", self.add_cost, "a CostCurve (seconds per vector add of x bytes) or None"
            )
        set_(self, "compute", _compute("Workload.compute", self.compute))
        batch = _checks.integer("Workload.batch_size", self.batch_size, minimum=1)
        if batch > MAX_BATCH_SIZE:
            raise InvalidParameterError(
                "Workload.batch_size", self.batch_size, "an integer from 1 to 2**53 (exact in floating point)"
            )
        set_(self, "batch_size", batch)
        set_(self, "update_time", _checks.duration("Workload.update_time", self.update_time))

        layers = self.layers
        if layers is not None:
            if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
                raise InvalidParameterError("Workload.layers", layers, "a sequence of Layer, or None")
            layers = tuple(layers)
            if not layers:
                raise InvalidParameterError(
                    "Workload.layers", layers, "a non-empty sequence of Layer, or None"
                )
            for i, layer in enumerate(layers):
                if not isinstance(layer, Layer):
                    raise InvalidParameterError(f"Workload.layers[{i}]", layer, "a queuesgd.workload.Layer")
            set_(self, "layers", layers)

        if self.gradient_bytes is None:
            if layers is None:
                raise InvalidParameterError(
                    "Workload.gradient_bytes", None, "a size in bytes (or give layers to derive it from)"
                )
            set_(self, "gradient_bytes", math.fsum(layer.gradient_bytes for layer in layers))
        else:
            set_(self, "gradient_bytes", _bytes("Workload.gradient_bytes", self.gradient_bytes))
            if layers is not None:
                total = math.fsum(layer.gradient_bytes for layer in layers)
                if not math.isclose(total, self.gradient_bytes, rel_tol=_SUM_RTOL):
                    raise InvalidParameterError(
                        "Workload.gradient_bytes",
                        self.gradient_bytes,
                        f"the sum of the layers' gradient_bytes ({total:.17g}), or None to derive it",
                    )

        if self.parameter_bytes is None:
            set_(self, "parameter_bytes", self.gradient_bytes)
        else:
            set_(self, "parameter_bytes", _bytes("Workload.parameter_bytes", self.parameter_bytes))

    def __repr__(self) -> str:
        layers = "None" if self.layers is None else f"<{len(self.layers)} layers>"
        return (
            f"Workload(name={self.name!r}, compute={self.compute!r}, gradient_bytes={self.gradient_bytes!r}, "
            f"parameter_bytes={self.parameter_bytes!r}, batch_size={self.batch_size!r}, "
            f"update_time={self.update_time!r}, layers={layers}"
            + ("" if self.add_cost is None else f", add_cost={self.add_cost!r}")
            + ")"
        )

    @property
    def compute_time(self) -> float:
        """Mean compute time of one step on one worker of speed 1, in seconds."""
        return float(self.compute.mean)

    @property
    def samples_per_second_single(self) -> float:
        """Throughput of one worker alone, ignoring communication: ``batch_size / compute_time``."""
        return self.batch_size / self.compute_time

    @property
    def backward_time(self) -> float | None:
        """Total backward time of the layer profile in seconds (``None`` without layers)."""
        if self.layers is None:
            return None
        return math.fsum(layer.backward_time for layer in self.layers)

    @property
    def ready_times(self) -> np.ndarray | None:
        """Seconds from the start of the backward pass at which each layer's gradient is ready.

        The cumulative sum of the layers' ``backward_time`` (``None`` without layers).
        """
        if self.layers is None:
            return None
        return np.cumsum([layer.backward_time for layer in self.layers])

    @property
    def forward_time(self) -> float | None:
        """Total forward time of the layer profile in seconds.

        The sum of the layers' ``forward_time`` when every layer has one;
        ``None`` otherwise (no layers, or a backward-only profile).

        Examples
        --------
        >>> Workload(0.1, None, layers=[Layer("a", 4, "1ms", "2ms"), Layer("b", 4, 0, "3ms")]).forward_time
        0.005
        >>> Workload(0.1, None, layers=[Layer("a", 4, "1ms")]).forward_time is None
        True
        """
        if self.layers is None or any(layer.forward_time is None for layer in self.layers):
            return None
        return math.fsum(layer.forward_time for layer in self.layers)  # type: ignore[misc]

    def phase_times(self) -> PhaseTimes:
        """Split the mean step time into forward, backward and the rest.

        Needs the per-layer profile. ``backward`` is :attr:`backward_time`.

        - Every layer has a ``forward_time``: ``forward`` is their sum and
          ``other = compute_time - forward - backward`` (data loading,
          optimizer, bookkeeping); ``derived`` is ``False``.
        - No layer has one (backward-only traces, such as the catalog's): the
          forward time is *derived* -- everything in the step that is not
          backward is attributed to the forward pass,
          ``forward = compute_time - backward`` and ``other = 0``;
          ``derived`` is ``True`` and ``note`` says so.

        Returns
        -------
        PhaseTimes

        Raises
        ------
        InvalidParameterError
            ``Workload.layers`` without layers or when only some layers have a
            forward time; ``Workload.compute`` when the mean step time is
            shorter than the profile's forward + backward time.

        Examples
        --------
        >>> w = Workload("128.09ms", None, layers=[Layer("a", 4, "40ms"), Layer("b", 4, "24.81ms")])
        >>> p = w.phase_times()
        >>> round(p.forward, 5), round(p.backward, 5), p.other, p.derived
        (0.06328, 0.06481, 0.0, True)
        >>> print(p.note)  # doctest: +NORMALIZE_WHITESPACE
        forward time derived from the single-worker step time: compute (128.09 ms) - backward (64.81 ms)
        = 63.28 ms; the profile has no forward times
        """
        if self.layers is None:
            raise InvalidParameterError(
                "Workload.layers", None, "a per-layer profile (layers=...) to split the step into phases"
            )
        compute = self.compute_time
        backward = self.backward_time
        assert backward is not None  # layers are set
        have = sum(layer.forward_time is not None for layer in self.layers)
        if have == 0:
            forward = compute - backward
            self._check_phases(forward, compute, backward)
            forward = max(forward, 0.0)
            note = (
                "forward time derived from the single-worker step time: "
                f"compute ({compute * 1e3:.2f} ms) - backward ({backward * 1e3:.2f} ms) = "
                f"{forward * 1e3:.2f} ms; the profile has no forward times"
            )
            return PhaseTimes(forward, backward, 0.0, True, note)
        if have < len(self.layers):
            raise InvalidParameterError(
                "Workload.layers",
                f"forward_time on {have} of {len(self.layers)} layers",
                "forward_time on every layer or on none",
            )
        forward = self.forward_time
        assert forward is not None  # every layer has one
        other = compute - forward - backward
        self._check_phases(other, compute, forward + backward)
        other = max(other, 0.0)
        note = (
            f"forward ({forward * 1e3:.2f} ms) and backward ({backward * 1e3:.2f} ms) from the per-layer "
            f"profile; other = compute ({compute * 1e3:.2f} ms) - forward - backward = {other * 1e3:.2f} ms"
        )
        return PhaseTimes(forward, backward, other, False, note)

    def _check_phases(self, rest: float, compute: float, needed: float) -> None:
        # Tolerate float rounding (a profile whose phases add up to the step time exactly).
        if rest < -1e-9 * compute:
            raise InvalidParameterError(
                "Workload.compute", compute, f"at least the profile's forward + backward ({needed:.6g} s)"
            )

    def reduction_time(self, nbytes: Any) -> float | np.ndarray:
        """Seconds to add two gradient vectors of ``nbytes`` bytes (the reduction of an all-reduce).

        ``add_cost(nbytes)`` when :attr:`add_cost` is set. Otherwise an
        assumption: an update (``update_time``) is taken to be one vector
        addition of the whole, uncompressed gradient -- ``parameter_bytes``
        bytes, which is ``gradient_bytes`` for a dense model unless
        :meth:`compressed` shrank the wire size -- and the cost is scaled
        linearly, ``update_time * nbytes / parameter_bytes`` (``0`` when
        ``update_time`` is ``0``).

        Parameters
        ----------
        nbytes : float, str or array_like
            Size(s) in bytes (a unit string for a scalar).

        Returns
        -------
        float or ndarray
            Same shape as ``nbytes``.

        Examples
        --------
        >>> w = Workload(0.1, "100MB", update_time="2ms")
        >>> w.reduction_time("25MB"), w.reduction_time([0, 50e6])
        (0.0005, array([0.   , 0.001]))
        >>> w2 = Workload(0.1, "100MB", add_cost=CostCurve([0, 1e8], [1e-5, 1e-3]))
        >>> round(w2.reduction_time(5e7), 9)
        0.000505
        """
        if self.add_cost is not None:
            return self.add_cost(nbytes)
        x = byte_sizes(nbytes)
        out = self.update_time * x / self.parameter_bytes
        return float(out) if out.ndim == 0 else out

    def compressed(self, ratio: float) -> Workload:
        """A copy whose gradients on the wire are ``ratio`` times smaller.

        ``gradient_bytes`` and every layer's ``gradient_bytes`` are divided by
        ``ratio``; ``parameter_bytes``, compute, ``update_time``,
        ``add_cost`` and ``name`` are kept (the receiver still applies a
        full-size update). Encoding and decoding costs are not modeled.

        Parameters
        ----------
        ratio : float
            Compression ratio, ``>= 1`` (``1`` = no compression, an equal copy).

        Examples
        --------
        >>> w = Workload(0.1, "100MB", layers=[Layer("a", 6e7, 0), Layer("b", 4e7, 0)])
        >>> c = w.compressed(4)
        >>> c.gradient_bytes, [layer.gradient_bytes for layer in c.layers], c.parameter_bytes
        (25000000.0, [15000000.0, 10000000.0], 100000000.0)
        >>> w.compressed(1) == w
        True
        """
        accepted = "a ratio >= 1 (1 = no compression)"
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
            raise InvalidParameterError("compression", ratio, accepted)
        r = float(ratio)
        if not (math.isfinite(r) and r >= 1):
            raise InvalidParameterError("compression", ratio, accepted)
        return self._with_gradients(lambda b: b / r)

    def gradients_scaled(self, factor: float) -> Workload:
        """A copy whose gradients on the wire are ``factor`` times the size: another reduction dtype.

        ``gradient_bytes`` and every layer's are multiplied by ``factor``;
        the rest is kept. ``2`` reduces the gradients of a bf16 model in fp32
        (Megatron's default for bf16; FSDP's ``reduce_dtype=torch.float32``,
        Composer's ``DEFAULT`` mixed precision), ``0.5`` an fp32 model's in
        bf16. Parameters (``parameter_bytes``, what ZeRO gathers) stay as
        they are.

        Parameters
        ----------
        factor : float
            A finite number > 0, at most 1e6.

        Examples
        --------
        >>> w = Workload(0.1, "100MB", layers=[Layer("a", 6e7, 0), Layer("b", 4e7, 0)])
        >>> f = w.gradients_scaled(2)
        >>> f.gradient_bytes, [layer.gradient_bytes for layer in f.layers], f.parameter_bytes
        (200000000.0, [120000000.0, 80000000.0], 100000000.0)
        >>> w.gradients_scaled(0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: gradients_scaled: got 0; accepted: ...
        """
        accepted = "a finite number > 0, at most 1e6 (2: bf16 gradients reduced in fp32)"
        if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
            raise InvalidParameterError("gradients_scaled", factor, accepted)
        f = float(factor)
        if not (math.isfinite(f) and 0 < f <= 1e6):
            raise InvalidParameterError("gradients_scaled", factor, accepted)
        return self._with_gradients(lambda b: b * f)

    def _with_gradients(self, size: Any) -> Workload:
        """A copy with ``size(bytes)`` as ``gradient_bytes`` and every layer's."""
        layers = self.layers
        if layers is not None:
            layers = tuple(dataclasses.replace(x, gradient_bytes=size(x.gradient_bytes)) for x in layers)
        return dataclasses.replace(self, gradient_bytes=size(self.gradient_bytes), layers=layers)


def _compute(field_name: str, value: Any) -> Distribution:
    if isinstance(value, Distribution):
        mean = float(value.mean)
        if not (math.isfinite(mean) and 0 < mean <= MAX_SECONDS):
            raise InvalidParameterError(
                field_name, value, f"a distribution of seconds with a mean > 0 and at most {MAX_SECONDS:g} s"
            )
        return value
    return Deterministic(_checks.duration(field_name, value, allow_zero=False))
