"""What a scheme's solution road returns: :class:`SchemeSolution` (one configuration, with its
:class:`StationBreakdown` per station) and :class:`BatchSolution` (a typed column per field, many
configurations at once, as :meth:`~queuesgd.schemes.base.Scheme.solve_batch` gives :func:`queuesgd.sweep`).

Plain data: :mod:`queuesgd.schemes.base` holds the contract that produces them and re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce

__all__ = ["PARTS", "BatchSolution", "SchemeSolution", "StationBreakdown", "bottleneck"]

#: The parts of an iteration, in the order a bottleneck is chosen among equals.
PARTS: tuple[str, ...] = ("compute", "communication", "update", "waiting")


@dataclass(frozen=True)
class StationBreakdown:
    """Where one iteration's time goes at one station (seconds per iteration).

    ``residence_time = service_time + waiting_time``; ``utilization`` is per
    server for a queue, mean busy servers for a delay.
    """

    residence_time: float
    service_time: float
    waiting_time: float
    utilization: float
    queue_length: float


@dataclass(frozen=True)
class SchemeSolution:
    """What a scheme's solver returns; :func:`~queuesgd.predict` turns it into a Prediction.

    Attributes
    ----------
    iteration_rate : float
        Model updates per second.
    gradients_per_update : float
        Mean number of gradients folded into one update (1 for asynchronous
        SGD, ``n - b`` with ``b`` backup workers, the mean participation for
        eager-SGD).
    iteration_time : float
        Mean time of one worker iteration in seconds (``1 / iteration_rate``
        for synchronous schemes; a worker's cycle for asynchronous ones).
    breakdown : mapping of str to float
        Seconds per iteration in ``compute``, ``communication``, ``update``
        and ``waiting`` (time spent waiting for other workers or for a busy
        resource). They add up to ``iteration_time``.
    method : str
        One of :data:`METHODS`.
    reason : str
        What ran and why, including any approximation made (a phase-type fit
        of a non-exponential law, an approximate MVA).
    staleness : float or None
        Mean staleness (updates applied between a gradient's parameter read
        and its own update) where the scheme has staleness.
    details : mapping
        Scheme-specific results: ``participation``, ``staleness_distribution``
        (a dict {staleness: probability}), ``cutoff``, ``states`` (CTMC
        size), ``phase_type`` (the fit used), ...
    interval : tuple of float or None
        95% confidence interval of gradients applied per second,
        ``iteration_rate * gradients_per_update`` (simulation only).
    stations : mapping of str to StationBreakdown
        Per-station measures where the model is a queueing network.
    bottleneck : str
        The busiest resource, where the model tells.
    model : object
        The model that was solved (a ClosedNetwork, a PetriNet, a Formula...).
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    iteration_rate: float
    gradients_per_update: float
    iteration_time: float
    breakdown: Mapping[str, float]
    method: str
    reason: str
    staleness: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    interval: tuple[float, float] | None = None
    stations: Mapping[str, StationBreakdown] = field(default_factory=dict)
    bottleneck: str = ""
    model: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown", MappingProxyType(dict(self.breakdown)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        object.__setattr__(self, "stations", MappingProxyType(dict(self.stations)))


@dataclass(frozen=True)
class BatchSolution:
    """Many configurations solved at once (what :meth:`Scheme.solve_batch` returns).

    Every attribute is a read-only array with one entry per configuration
    (row), in the order of the ``workers``, ``bandwidth`` and ``latency``
    arrays given to :meth:`Scheme.solve_batch`.

    Attributes
    ----------
    iteration_rate : ndarray of float
        Model updates per second.
    gradients_per_update : ndarray of float
        Gradients folded into one update.
    bottleneck : ndarray of str (object)
        The busiest resource, ``""`` where the model does not tell.
    method : ndarray of str (object)
        The method that ran for the row (as :attr:`SchemeSolution.method`).

    Examples
    --------
    >>> b = BatchSolution.from_solutions([SchemeSolution(2.0, 4.0, 0.5, {}, "mva", "")])
    >>> b.iteration_rate, b.method
    (array([2.]), array(['mva'], dtype=object))
    """

    iteration_rate: np.ndarray
    gradients_per_update: np.ndarray
    bottleneck: np.ndarray
    method: np.ndarray

    def __post_init__(self) -> None:
        rate = _batch_numbers("iteration_rate", self.iteration_rate).ravel()
        n = rate.shape
        cols = {
            "iteration_rate": rate,
            "gradients_per_update": _batch_column(
                "gradients_per_update", _batch_numbers("gradients_per_update", self.gradients_per_update), n
            ),
            "bottleneck": _batch_column("bottleneck", _batch_texts("bottleneck", self.bottleneck), n),
            "method": _batch_column("method", _batch_texts("method", self.method), n),
        }
        for name, col in cols.items():
            col.flags.writeable = False
            object.__setattr__(self, name, col)

    def __len__(self) -> int:
        return int(self.iteration_rate.size)

    @classmethod
    def from_solutions(cls, solutions: list[SchemeSolution]) -> BatchSolution:
        """Stack single solutions, one row each."""
        return cls(
            np.array([s.iteration_rate for s in solutions], dtype=float),
            np.array([s.gradients_per_update for s in solutions], dtype=float),
            np.array([s.bottleneck for s in solutions], dtype=object),
            np.array([s.method for s in solutions], dtype=object),
        )

    @classmethod
    def merge(cls, size: int, parts: list[tuple[np.ndarray, BatchSolution]]) -> BatchSolution:
        """One batch of ``size`` rows from parts solved on the row indices given with each."""
        rate = np.full(size, np.nan)
        gpu = np.full(size, np.nan)
        bott = np.full(size, "", dtype=object)
        meth = np.full(size, "", dtype=object)
        for idx, part in parts:
            rate[idx], gpu[idx] = part.iteration_rate, part.gradients_per_update
            bott[idx], meth[idx] = part.bottleneck, part.method
        return cls(rate, gpu, bott, meth)


def _batch_numbers(name: str, value: Any) -> np.ndarray:
    """A numeric column of a BatchSolution: numbers >= 0, NaN where a row was not solved."""
    accepted = "numbers >= 0, finite or NaN (a row not solved): one, or one per configuration"
    arr = _checks.reals(f"BatchSolution.{name}", value, accepted=accepted)
    if np.any(arr < 0) or np.any(np.isinf(arr)):
        raise InvalidParameterError(f"BatchSolution.{name}", value, accepted)
    return arr


def _batch_texts(name: str, value: Any) -> np.ndarray:
    """A text column of a BatchSolution (an object array of str)."""
    accepted = "a str, or one str per configuration"
    try:
        arr = np.asarray(value, dtype=object)
    except (ValueError, TypeError):
        raise InvalidParameterError(f"BatchSolution.{name}", value, accepted) from None
    if not all(isinstance(x, str) for x in arr.ravel().tolist()):
        raise InvalidParameterError(f"BatchSolution.{name}", value, accepted)
    return arr


def _batch_column(name: str, arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``arr`` broadcast to one entry per configuration (a copy), or a clear error."""
    try:
        return np.broadcast_to(arr, shape).copy()
    except ValueError:
        raise InvalidParameterError(
            f"BatchSolution.{name}", arr, f"one value or {shape[0]:,}, one per row (got shape {arr.shape})"
        ) from None


def bottleneck(D: Any, compute: Any, comm: Any, update: Any) -> Any:
    """The largest part of an iteration (:data:`PARTS` order among equals); numbers or arrays.

    The one rule of every road that splits a step into compute, waiting,
    communication and update (``predict``'s and ``sweep``'s alike).

    Parameters
    ----------
    D : float or ndarray
        Seconds until the step's communication may start: the own compute
        plus the waiting for the slowest (a barrier, a pipeline's bubble).
    compute : float or ndarray
        A worker's own compute, seconds; ``min(compute, D)`` counts as
        compute and ``max(D - compute, 0)`` as waiting.
    comm, update : float or ndarray
        Exposed communication and update seconds.

    Returns
    -------
    str or ndarray of str (object)
        ``"compute"``, ``"communication"``, ``"update"`` or ``"waiting"``.

    Examples
    --------
    >>> bottleneck(0.05, 0.02, 0.01, 0.0)        # 0.03 s waiting for the slowest, 0.02 s computing
    'waiting'
    >>> bottleneck([0.05, 0.02], 0.02, [0.01, 0.03], 0.0).tolist()
    ['waiting', 'communication']
    """
    D, compute, comm, update = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (D, compute, comm, update))
    )
    waiting = np.maximum(D - compute, 0.0)
    which = np.argmax(np.stack([D - waiting, comm, update, waiting]), axis=0)
    return PARTS[int(which)] if np.ndim(which) == 0 else np.array(PARTS, dtype=object)[which]
