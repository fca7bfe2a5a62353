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
from queuesgd.busbw import MIN_BANDWIDTH, CollectiveTables, bandwidth_value
from queuesgd.errors import InvalidParameterError
from queuesgd.sequence_checks import items

__all__ = [
    "Cluster",
    "MAX_PS_SHARDS",
    "MAX_WORKERS",
    "MIN_BANDWIDTH",
    "ROW_FIELDS",
    "RandomDelay",
    "check_rows",
]

#: Largest cluster accepted: one million workers. The models hold per-worker laws, samples and
#: populations, so far larger numbers only exhaust memory; no training cluster is near this size.
MAX_WORKERS = 1_000_000
#: Most parameter-server shards accepted: each shard is three stations of the PS models.
MAX_PS_SHARDS = 1024
# MIN_BANDWIDTH (1 bit/s, the smallest bandwidth accepted) is queuesgd.busbw's: a table's rows share it.


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
        object.__setattr__(self, "delay", _checks.duration("RandomDelay.delay", self.delay, allow_zero=False))


_KEEP: Any = object()


def _bounded_int(field: str, value: Any, maximum: int) -> int:
    out = _checks.integer(field, value, minimum=1)
    if out > maximum:
        raise InvalidParameterError(field, value, f"an integer from 1 to {maximum:,}")
    return out


#: How a configuration's workers, bandwidth and latency are checked: by :class:`Cluster`, by
#: :func:`queuesgd.sweep` for its values and by :func:`check_rows` for the arrays of
#: :meth:`~queuesgd.schemes.base.Scheme.solve_batch` (one rule for the three fields).
ROW_FIELDS: dict[str, Any] = {
    "workers": lambda field, value: _bounded_int(field, value, MAX_WORKERS),
    "bandwidth": bandwidth_value,
    "latency": lambda field, value: _checks.duration(field, value, allow_zero=True),
}


def check_rows(workers: Any, bandwidth: Any, latency: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of configurations, checked as :class:`Cluster` checks each field (:data:`ROW_FIELDS`).

    Parameters
    ----------
    workers : array_like of int
        One worker count per row (``2.7`` is refused, not truncated).
    bandwidth, latency : array_like or value
        One per row, or one value for every row; numbers (bytes/s, seconds)
        or unit strings.

    Returns
    -------
    tuple of ndarray
        ``(workers, bandwidth, latency)``: int, float and float arrays of one
        length, bandwidths in bytes/s and latencies in seconds.

    Raises
    ------
    InvalidParameterError
        A value ``Cluster`` refuses, named with its index (``bandwidth[2]``:
        NaN, 0, below 1 bit/s...), or a ``bandwidth`` or ``latency`` whose
        length is neither 1 nor the number of rows.

    Examples
    --------
    >>> n, bw, lat = check_rows([2, 4.0], "10Gbit/s", [0, "50us"])
    >>> n.tolist(), bw.tolist(), lat.tolist()
    ([2, 4], [1250000000.0, 1250000000.0], [0.0, 5e-05])
    >>> check_rows([2, 2.7], 1e9, 0.0)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: workers[1]: got 2.7; accepted: an integer >= 1
    """
    n = _row_values("workers", workers)
    out = [n.astype(int)]
    for field, values in (("bandwidth", bandwidth), ("latency", latency)):
        col = _row_values(field, values)
        if col.size not in (1, n.size):
            raise InvalidParameterError(
                field, f"{col.size:,} values", f"one value, or one per row of workers ({n.size:,})"
            )
        out.append(np.broadcast_to(col, n.shape).copy())
    return out[0], out[1], out[2]


def _row_values(field: str, values: Any) -> np.ndarray:
    """``values`` flattened, each checked by :data:`ROW_FIELDS` (once per distinct value), as floats."""
    check = ROW_FIELDS[field]
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    flat = arr.ravel().tolist()
    seen: dict[Any, float] = {}
    out = np.empty(len(flat))
    for i, v in enumerate(flat):
        key = (type(v), v)  # 1 and True are one dict key, not one value
        try:
            out[i] = seen[key]
        except KeyError:
            out[i] = seen[key] = float(check(f"{field}[{i}]", v))
        except TypeError:  # unhashable: checked on its own
            out[i] = float(check(f"{field}[{i}]", v))
    return out


#: How the node fields of a two-level cluster are checked (a flat cluster's take only the defaults).
_NODE_FIELDS: dict[str, Any] = {
    "node_latency": lambda field, value: _checks.duration(field, value, allow_zero=True),
    "rails": lambda field, value: _bounded_int(field, value, MAX_PS_SHARDS),
}
_FLAT_DEFAULTS: dict[str, Any] = {"node_latency": 0.0, "rails": 1}


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
        One-way latency per message, in seconds (``"50us"``); at most
        :data:`queuesgd.units.MAX_SECONDS` (1e9 s), as every duration parameter.
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
    gpus_per_node : int or None
        A two-level cluster: the workers (GPUs) are packed ``gpus_per_node``
        to a node, in order (worker ``i`` on node ``i // gpus_per_node``);
        ``workers`` must fit (at most one node, or a multiple of it). ``None``
        (the default): a flat cluster, every worker on its own link.
    node_bandwidth : float or str or None
        Two-level only, and required there: each GPU's bandwidth to the other
        GPUs of its node, per direction (NVLink/NVSwitch: ``"300GB/s"``).
        ``bandwidth`` is then the speed of one *rail* (one network card) between nodes.
    node_latency : float or str
        Two-level only: one-way latency per message inside a node (``latency``
        is between nodes), bounded as ``latency``. A flat cluster takes only
        the default, 0 (``"0s"`` too).
    rails : int
        Two-level only: network cards (rails) per node, each of ``bandwidth``
        (``8`` for eight 200 Gbit/s rails); a node sends ``rails x bandwidth``
        to the network at most. A flat cluster takes only the default, 1.
    collectives : CollectiveTables or None
        Measured bus bandwidth of collectives (nccl-tests tables, see
        :mod:`queuesgd.busbw`); where given they replace the alpha-beta cost
        of :func:`~queuesgd.schemes.parallel.collectives.collective_time`.
        Its ``intra`` tables need a two-level cluster (on a flat one every
        group spans nodes) and groups of at most ``gpus_per_node`` ranks.

    Notes
    -----
    The flat fields keep their meaning for every scheme; the two-level ones
    are read by the schemes that model placement
    (:class:`~queuesgd.HybridParallel`) through
    :mod:`queuesgd.schemes.parallel.collectives`. They appear in ``repr`` only when set.

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
    >>> dgx = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> dgx.nodes, dgx.node_bandwidth, dgx.network_bandwidth      # 8 rails x 25 GB/s per node
    (8, 300000000000.0, 200000000000.0)
    """

    workers: int
    bandwidth: float
    latency: float = 0.0
    ps_shards: int = 1
    speeds: tuple[float, ...] | None = None
    stragglers: RandomDelay | None = None
    name: str | None = None
    gpus_per_node: int | None = None
    node_bandwidth: float | None = None
    node_latency: float = 0.0
    rails: int = 1
    collectives: CollectiveTables | None = None

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
        for field, check in ROW_FIELDS.items():
            set_(self, field, check(f"Cluster.{field}", getattr(self, field)))
        set_(self, "ps_shards", _bounded_int("Cluster.ps_shards", self.ps_shards, MAX_PS_SHARDS))
        if self.speeds is not None:
            speeds = items("Cluster.speeds", self.speeds, "a sequence of speed factors > 0, or None")
            speeds = tuple(_checks.positive(f"Cluster.speeds[{i}]", s) for i, s in enumerate(speeds))
            if len(speeds) != self.workers:
                raise InvalidParameterError(
                    "Cluster.speeds",
                    self.speeds,
                    f"one speed factor per worker ({self.workers} values), or None",
                )
            set_(self, "speeds", speeds)
        self._two_level()

    def _two_level(self) -> None:
        """Check and normalize the two-level fields (all at their defaults for a flat cluster)."""
        set_ = object.__setattr__
        if self.collectives is not None and not isinstance(self.collectives, CollectiveTables):
            raise InvalidParameterError(
                "Cluster.collectives", self.collectives, "a CollectiveTables(intra=..., inter=...) or None"
            )
        if self.gpus_per_node is None:
            self._flat()
            return
        per = _bounded_int("Cluster.gpus_per_node", self.gpus_per_node, MAX_WORKERS)
        if self.workers > per and self.workers % per:
            raise InvalidParameterError(
                "Cluster.workers",
                self.workers,
                f"at most one node ({per}) or a multiple of gpus_per_node = {per} (whole nodes)",
            )
        set_(self, "gpus_per_node", per)
        if self.node_bandwidth is None:
            raise InvalidParameterError(
                "Cluster.node_bandwidth",
                None,
                "each GPU's bandwidth inside its node (e.g. '300GB/s' for NVLink) with gpus_per_node",
            )
        inside = bandwidth_value("Cluster.node_bandwidth", self.node_bandwidth, example="'300GB/s'")
        set_(self, "node_bandwidth", inside)
        for field, check in _NODE_FIELDS.items():
            set_(self, field, check(f"Cluster.{field}", getattr(self, field)))
        intra = () if self.collectives is None else self.collectives.intra
        for table in intra:
            if table.ranks is not None and table.ranks > per:
                raise InvalidParameterError(
                    "Cluster.collectives.intra",
                    f"a table of ranks={table.ranks}",
                    f"tables of groups inside one node: ranks at most gpus_per_node = {per}",
                )

    def _flat(self) -> None:
        """A flat cluster's node fields: their defaults, or values equal to them (``"0s"``, ``1.0``)."""
        accepted = "{} (the default) on a flat cluster; give gpus_per_node= for a two-level cluster"
        if self.node_bandwidth is not None:
            raise InvalidParameterError("Cluster.node_bandwidth", self.node_bandwidth, accepted.format(None))
        for field, check in _NODE_FIELDS.items():
            value, default = getattr(self, field), _FLAT_DEFAULTS[field]
            try:
                same = check(f"Cluster.{field}", value) == default
            except InvalidParameterError:  # a bool, a negative or unparsable value: not the default either
                same = False
            if not same:
                raise InvalidParameterError(f"Cluster.{field}", value, accepted.format(default))
            object.__setattr__(self, field, default)
        if self.collectives is not None and self.collectives.intra:
            raise InvalidParameterError(
                "Cluster.collectives.intra",
                f"{len(self.collectives.intra)} table(s)",
                "none on a flat cluster (every group spans nodes there: give its tables as inter=), "
                "or give gpus_per_node= for a two-level cluster",
            )

    def __repr__(self) -> str:
        names = ["workers", "bandwidth", "latency", "ps_shards", "speeds", "stragglers", "name"]
        names += [
            f
            for f in ("gpus_per_node", "node_bandwidth", "node_latency", "rails", "collectives")
            if getattr(self, f) != _FLAT_DEFAULTS.get(f)
        ]
        return "Cluster(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in names) + ")"

    @property
    def two_level(self) -> bool:
        """True where ``gpus_per_node`` is given (NVLink inside a node, rails between nodes)."""
        return self.gpus_per_node is not None

    @property
    def per_node(self) -> int:
        """Workers per node: ``gpus_per_node``, or 1 on a flat cluster (each worker its own node)."""
        return 1 if self.gpus_per_node is None else self.gpus_per_node

    @property
    def nodes(self) -> int:
        """Nodes in use: ``ceil(workers / per_node)``."""
        return -(-self.workers // self.per_node)

    @property
    def intra_bandwidth(self) -> float:
        """Each GPU's bandwidth inside its node (``node_bandwidth``; ``bandwidth`` on a flat cluster)."""
        return self.bandwidth if self.node_bandwidth is None else self.node_bandwidth

    @property
    def intra_latency(self) -> float:
        """Latency inside a node (``node_latency``; ``latency`` on a flat cluster)."""
        return self.latency if self.gpus_per_node is None else self.node_latency

    @property
    def network_bandwidth(self) -> float:
        """What one node sends to the network at most: ``rails x bandwidth`` (``bandwidth`` if flat)."""
        return self.rails * self.bandwidth

    @property
    def same_speeds(self) -> bool:
        """Whether every worker has the same speed (``speeds`` None, or one value repeated).

        Examples
        --------
        >>> Cluster(3, "1GB/s").same_speeds, Cluster(3, "1GB/s", speeds=[1, 1, 0.5]).same_speeds
        (True, False)
        """
        return self.speeds is None or len(set(self.speeds)) == 1

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
