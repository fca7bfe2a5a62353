"""What every coordination scheme offers: parameters in, models out.

A scheme is a small frozen dataclass. It builds each model that can represent
it (``petri_net``, ``queueing_network``, ``formula``) and solves itself with
each method it lists in ``methods`` (``solve``), returning a
:class:`SchemeSolution`; :func:`queuesgd.predict` wraps that into a
:class:`~queuesgd.prediction.Prediction`. A model or method that cannot
represent the scheme raises :class:`~queuesgd.errors.NotRepresentable`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from queuesgd.errors import NotRepresentable

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.petri import PetriNet
    from queuesgd.queueing import ClosedNetwork
    from queuesgd.workload import Cluster, Workload

__all__ = ["Scheme", "SchemeSolution", "StationBreakdown", "METHODS"]

#: Every solution method ``predict`` knows, cheapest first. ``"coarse"`` (the phase model with
#: heuristics) and ``"fine"`` (the layer-wise task graph) apply to schemes with a fine-grained form.
METHODS: tuple[str, ...] = ("closed_form", "mva", "ctmc", "simulate", "coarse", "fine")


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


class Scheme:
    """Base class of coordination schemes (small frozen dataclasses).

    Subclasses set :attr:`key` and :attr:`methods` and implement
    :meth:`solve`; they override the model builders that apply.
    """

    #: Name used by the CLI (``--scheme``).
    key: ClassVar[str] = ""
    #: Methods ``predict`` accepts for this scheme, cheapest exact first.
    methods: ClassVar[tuple[str, ...]] = ()

    # ---- checks and method choice ---------------------------------------------------
    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Raise :class:`~queuesgd.errors.InvalidParameterError` if the scheme cannot run on ``cluster``.

        (E.g. ``backups >= workers``.) Parameters that do not depend on the
        cluster are checked by the constructor.
        """

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """The method ``method="auto"`` runs, and why (the cheapest exact one that applies)."""
        return self.methods[0], f"{self.methods[0]}: the cheapest exact method for {type(self).__name__}"

    def solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: np.random.Generator | int | None = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        """Solve the scheme with ``method`` (one of :attr:`methods`; never ``"auto"``).

        ``rng`` and ``iterations`` are used by ``method="simulate"``.
        """
        raise NotRepresentable(f"{type(self).__name__} has no solver")

    # ---- models ----------------------------------------------------------------------
    def queueing_network(self, workload: Workload, cluster: Cluster) -> ClosedNetwork:
        """The closed queueing network of this scheme."""
        raise NotRepresentable(f"{type(self).__name__} has no closed queueing network model")

    def petri_net(self, workload: Workload, cluster: Cluster) -> PetriNet:
        """The generalized stochastic Petri net of this scheme (exponential or phase-type times)."""
        raise NotRepresentable(f"{type(self).__name__} has no Petri net model")

    def formula(self, compute: str = "exponential") -> Formula:
        """Throughput as a SymPy formula (see :func:`queuesgd.derive`)."""
        raise NotRepresentable(f"{type(self).__name__} has no closed-form throughput")

    def solve_batch(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> dict[str, Any]:
        """Solve many configurations in one vectorized evaluation (used by :func:`queuesgd.sweep`).

        ``workers``, ``bandwidth`` and ``latency`` are equal-length arrays; the
        other cluster fields come from ``cluster``. Returns a dict with arrays
        ``iteration_rate`` and ``gradients_per_update``, optionally
        ``bottleneck`` (array of str), and ``method`` (the exact method used:
        ``"closed_form"`` or ``"mva"``). Raises
        :class:`~queuesgd.errors.NotRepresentable` where no vectorized exact
        solution exists (``sweep`` then calls ``predict`` per row).
        """
        raise NotRepresentable(f"{type(self).__name__} has no vectorized exact solution")

    # ---- helpers -----------------------------------------------------------------------
    def replace(self, **changes: Any) -> Scheme:
        """A copy with some parameters changed (validated again).

        Examples
        --------
        >>> from queuesgd import AsyncPS
        >>> AsyncPS().replace() == AsyncPS()
        True
        """
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """Names of the scheme's parameters (its dataclass fields)."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
