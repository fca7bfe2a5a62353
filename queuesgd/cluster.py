"""The cluster a workload runs on: workers, links, parameter-server shards, speeds and stragglers.

Plain, validated, immutable data (see :mod:`queuesgd.workload` for what one
worker computes). Imported as ``queuesgd.Cluster`` and
``queuesgd.workload.Cluster`` as well.

Examples
--------
>>> Cluster(8, "10Gbit/s", stragglers=RandomDelay(2, "320ms")).stragglers.delay
0.32
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.units import parse_bandwidth, parse_seconds

__all__ = ["Cluster", "MAX_PS_SHARDS", "MAX_WORKERS", "MIN_BANDWIDTH", "RandomDelay"]

#: Largest cluster accepted: one million workers. The models hold per-worker laws, samples and
#: populations, so far larger numbers only exhaust memory; no training cluster is near this size.
MAX_WORKERS = 1_000_000
#: Most parameter-server shards accepted: each shard is three stations of the PS models.
MAX_PS_SHARDS = 1024
#: Smallest bandwidth accepted, bytes/s (1 bit/s): below it, transfer times of real sizes overflow.
MIN_BANDWIDTH = 0.125


def seconds_value(field_name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A duration (a number of seconds or a unit string) ``> 0`` (``>= 0`` with ``allow_zero``).

    Examples
    --------
    >>> seconds_value("latency", "50us")
    5e-05
    """
    return _checks.positive(field_name, parse_seconds(value, field_name), allow_zero=allow_zero)


@dataclass(frozen=True)
class RandomDelay:
    """eager-SGD's straggler recipe: each step, ``count`` workers chosen at random sleep ``delay`` seconds.

    The chosen workers are drawn uniformly, anew every step, independently of
    everything else (Li et al., PPoPP 2020: about two of 64 ranks sleep
    0.32 s before the forward pass). A delayed worker's compute time is
    ``delay + compute`` (:class:`~queuesgd.distributions.Shifted`).

    Parameters
    ----------
    count : int
        Workers delayed per step (``>= 1``, at most the cluster's workers).
    delay : float or str
        Seconds added to each chosen worker's step (``"320ms"``).

    Examples
    --------
    >>> RandomDelay(2, "320ms")
    RandomDelay(count=2, delay=0.32)
    """

    count: int
    delay: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", _checks.integer("RandomDelay.count", self.count, minimum=1))
        object.__setattr__(self, "delay", seconds_value("RandomDelay.delay", self.delay))


_KEEP: Any = object()


def _bounded_int(field: str, value: Any, maximum: int) -> int:
    out = _checks.integer(field, value, minimum=1)
    if out > maximum:
        raise InvalidParameterError(field, value, f"an integer from 1 to {maximum:,}")
    return out


@dataclass(frozen=True)
class Cluster:
    """The machines a workload runs on.

    Parameters
    ----------
    workers : int
        Number of workers (``1`` to :data:`MAX_WORKERS`, one million).
    bandwidth : float or str
        Bandwidth of each link, per direction, in bytes per second; unit
        strings distinguish bits from bytes (``"10Gbit/s"`` is 1.25e9 B/s,
        ``"10GB/s"`` is 1e10 B/s). At least 1 bit/s (:data:`MIN_BANDWIDTH`).
    latency : float or str
        One-way latency per message, in seconds (``"50us"``).
    ps_shards : int
        Number of parameter-server shards (``1`` to :data:`MAX_PS_SHARDS`,
        1024); the parameters are split evenly across them (ignored by
        all-reduce schemes).
    speeds : sequence of float or None
        Per-worker speed factors, one per worker; worker ``i`` computes a step
        in ``compute / speeds[i]`` (a speed of 2 is twice as fast). ``None``
        means every worker has speed 1.
    stragglers : RandomDelay or None
        Injected straggling: ``RandomDelay(k, d)`` delays ``k`` random
        workers by ``d`` seconds every step.
    name : str or None
        Label used in reports.

    Examples
    --------
    >>> c = Cluster(4, "10Gbit/s", latency="50us")
    >>> c  # doctest: +NORMALIZE_WHITESPACE
    Cluster(workers=4, bandwidth=1250000000.0, latency=5e-05, ps_shards=1, speeds=None, stragglers=None,
             name=None)
    >>> c.with_workers(8).workers
    8
    >>> Cluster(2, "1GB/s", speeds=[1, 0.5]).speed_factors
    array([1. , 0.5])
    >>> Cluster(4, 1e-300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: Cluster.bandwidth: got 1e-300; accepted: at least 1 bit/s ...
    """

    workers: int
    bandwidth: float
    latency: float = 0.0
    ps_shards: int = 1
    speeds: tuple[float, ...] | None = None
    stragglers: RandomDelay | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.name is not None:
            _checks.name("Cluster.name", self.name)
        if self.stragglers is not None:
            if not isinstance(self.stragglers, RandomDelay):
                raise InvalidParameterError(
                    "Cluster.stragglers", self.stragglers, "a RandomDelay(count, delay) or None"
                )
            if self.stragglers.count > self.workers:
                raise InvalidParameterError(
                    "Cluster.stragglers.count",
                    self.stragglers.count,
                    f"at most the number of workers ({self.workers})",
                )
        set_(self, "workers", _bounded_int("Cluster.workers", self.workers, MAX_WORKERS))
        bandwidth = parse_bandwidth(self.bandwidth, "Cluster.bandwidth")
        if bandwidth < MIN_BANDWIDTH:
            raise InvalidParameterError(
                "Cluster.bandwidth",
                self.bandwidth,
                "at least 1 bit/s (0.125 bytes/s), e.g. '10Gbit/s'; a plain number is bytes/s",
            )
        set_(self, "bandwidth", bandwidth)
        set_(self, "latency", seconds_value("Cluster.latency", self.latency, allow_zero=True))
        set_(self, "ps_shards", _bounded_int("Cluster.ps_shards", self.ps_shards, MAX_PS_SHARDS))
        if self.speeds is not None:
            speeds = self.speeds
            if isinstance(speeds, (str, bytes)) or not isinstance(speeds, (Sequence, np.ndarray)):
                raise InvalidParameterError(
                    "Cluster.speeds", speeds, "a sequence of speed factors > 0, or None"
                )
            speeds = tuple(_checks.positive(f"Cluster.speeds[{i}]", s) for i, s in enumerate(speeds))
            if len(speeds) != self.workers:
                raise InvalidParameterError(
                    "Cluster.speeds",
                    self.speeds,
                    f"one speed factor per worker ({self.workers} values), or None",
                )
            set_(self, "speeds", speeds)

    @property
    def speed_factors(self) -> np.ndarray:
        """Per-worker speed factors as an array of length ``workers`` (ones when ``speeds`` is None)."""
        if self.speeds is None:
            return np.ones(self.workers)
        return np.asarray(self.speeds, dtype=float)

    def with_workers(self, workers: int, *, speeds: Sequence[float] | None = _KEEP) -> Cluster:
        """Return a copy with ``workers`` workers.

        Per-worker ``speeds`` are kept when their number still matches;
        otherwise pass new ``speeds`` (or ``speeds=None`` for all ones).

        Examples
        --------
        >>> c = Cluster(2, "1GB/s", speeds=[1.0, 2.0])
        >>> c.with_workers(3, speeds=[1, 1, 2]).speeds
        (1.0, 1.0, 2.0)
        >>> c.with_workers(3)  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: Cluster.speeds: got (1.0, 2.0); accepted:
        one speed factor per worker (3 values), or None; pass speeds= to with_workers
        """
        if speeds is _KEEP:
            speeds = self.speeds
            n = _checks.integer("Cluster.workers", workers, minimum=1)
            if speeds is not None and len(speeds) != n:
                raise InvalidParameterError(
                    "Cluster.speeds",
                    speeds,
                    f"one speed factor per worker ({n} values), or None; pass speeds= to with_workers",
                )
        return dataclasses.replace(self, workers=workers, speeds=speeds)

    def with_bandwidth(self, bandwidth: float | str) -> Cluster:
        """Return a copy with a different per-link ``bandwidth`` (bytes/s or a unit string).

        Examples
        --------
        >>> Cluster(4, "10Gbit/s").with_bandwidth("100Gbit/s").bandwidth
        12500000000.0
        """
        return dataclasses.replace(self, bandwidth=bandwidth)
