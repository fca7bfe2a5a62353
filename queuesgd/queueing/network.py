"""Closed queueing networks as plain data: stations and a population.

A closed network is a fixed population of customers (jobs) circulating among
stations. Each station is described by its *service demand* per customer
cycle: ``demand = visits * mean service time``. Routing therefore does not
appear: for product-form (BCMP) networks the performance measures depend on
the routing only through the visit ratios, which demands already include.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.frozen_pickle import frozen_reduce

__all__ = ["Delay", "Queue", "ClosedNetwork", "Station"]

#: One class: a number or a SymPy expression; several: a ``{class: demand}`` mapping.
Demand = float | Any | Mapping[str, Any]


def _freeze_demand(field_name: str, demand: Any) -> Any:
    if isinstance(demand, Mapping):
        if not demand:
            raise InvalidParameterError(field_name, dict(demand), "a non-empty {class: demand} mapping")
        out = {}
        for cls, d in demand.items():
            _checks.name(f"{field_name} class name", cls)
            out[cls] = _checks.positive(f"{field_name}[{cls!r}]", d, symbolic=True)
        return MappingProxyType(out)
    return _checks.positive(field_name, demand, symbolic=True)


@dataclass(frozen=True)
class Delay:
    """An infinite-server (delay, think-time) station.

    Every customer is served at once, so the residence time equals the demand.
    Product form holds for any service-time distribution with this mean.

    Parameters
    ----------
    name : str
        Unique station name.
    demand : float, SymPy expression or mapping
        Service demand per cycle (visits x mean service time), in seconds:
        a number for a single class, or ``{class: demand}``. A class that is
        absent from the mapping does not visit the station.

    Examples
    --------
    >>> Delay("think", 2.0)
    Delay(name='think', demand=2.0)
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    name: str
    demand: Demand

    def __post_init__(self) -> None:
        _checks.name("Delay.name", self.name)
        object.__setattr__(self, "demand", _freeze_demand(f"Delay({self.name!r}).demand", self.demand))

    servers = float("inf")


@dataclass(frozen=True)
class Queue:
    """A queueing station with ``servers`` identical servers.

    Single-class: first-come first-served with exponential service (or any
    processor-sharing station). Several classes: processor sharing, or FCFS
    with the same service time for every class (BCMP conditions); the demands
    may differ by class through the visit ratios.

    Parameters
    ----------
    name : str
        Unique station name.
    demand : float, SymPy expression or mapping
        Service demand per cycle (visits x mean service time of one server),
        in seconds, or ``{class: demand}``.
    servers : int, default 1
        Number of identical servers (>= 1).

    Examples
    --------
    >>> Queue("cpu", 0.5, servers=2)
    Queue(name='cpu', demand=0.5, servers=2)
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    name: str
    demand: Demand
    servers: int = 1

    def __post_init__(self) -> None:
        _checks.name("Queue.name", self.name)
        object.__setattr__(self, "demand", _freeze_demand(f"Queue({self.name!r}).demand", self.demand))
        object.__setattr__(self, "servers", _checks.integer(f"Queue({self.name!r}).servers", self.servers))


Station = Delay | Queue


@dataclass(frozen=True)
class ClosedNetwork:
    """A closed product-form queueing network.

    Parameters
    ----------
    stations : sequence of Delay or Queue
        The stations; names must be unique.
    population : int or mapping
        Number of customers (one class) or ``{class: number}`` (several
        classes), each at most 1,000,000 (``_checks.MAX_COUNT``: exact
        single-class MVA takes about 13 s there). With several classes a station's demand is a
        ``{class: demand}`` mapping whose keys are a subset of the
        population's classes, or a single number shared by all classes.

    Notes
    -----
    Demands already include visit ratios: ``D_k = V_k * S_k``.

    Examples
    --------
    >>> net = ClosedNetwork([Delay("think", 4.0), Queue("cpu", 1.0)], population=3)
    >>> net.classes
    ('default',)
    >>> net.demands.tolist()
    [[4.0], [1.0]]
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    stations: Sequence[Station]
    population: int | Mapping[str, int]
    _classes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.stations, (Delay, Queue)) or not isinstance(self.stations, Sequence):
            raise InvalidParameterError("stations", self.stations, "a list of Delay and Queue stations")
        stations = tuple(self.stations)
        if not stations:
            raise InvalidParameterError("stations", [], "a non-empty list of Delay and Queue stations")
        for i, st in enumerate(stations):
            if not isinstance(st, (Delay, Queue)):
                raise InvalidParameterError(f"stations[{i}]", st, "a Delay or Queue station")
        names = [st.name for st in stations]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidParameterError("stations", dup, "unique station names")
        object.__setattr__(self, "stations", stations)

        pop = self.population
        if isinstance(pop, Mapping):
            if not pop:
                raise InvalidParameterError("population", dict(pop), "a non-empty {class: int} mapping")
            frozen = {}
            for cls, n in pop.items():
                _checks.name("population class name", cls)
                frozen[cls] = _checks.integer(f"population[{cls!r}]", n, minimum=1, maximum=_checks.MAX_COUNT)
            object.__setattr__(self, "population", MappingProxyType(frozen))
            classes = tuple(frozen)
            for st in stations:
                if isinstance(st.demand, Mapping):
                    for cls in st.demand:
                        if cls not in frozen:
                            raise UnknownNameError(f"{st.name}.demand class", cls, classes)
            for cls in classes:
                if not any((not isinstance(st.demand, Mapping)) or cls in st.demand for st in stations):
                    raise InvalidParameterError(
                        f"population[{cls!r}]", cls, "a class that visits at least one station"
                    )
        else:
            pop = _checks.integer("population", pop, minimum=1, maximum=_checks.MAX_COUNT)
            object.__setattr__(self, "population", pop)
            classes = ("default",)
            for st in stations:
                if isinstance(st.demand, Mapping):
                    raise InvalidParameterError(
                        f"{st.name}.demand",
                        dict(st.demand),
                        "a single number when population is an int "
                        "(give population as {class: int} for several classes)",
                    )
        object.__setattr__(self, "_classes", classes)

    # --- derived views (arrays in station order x class order) -----------------
    @property
    def classes(self) -> tuple[str, ...]:
        """Class names; ``('default',)`` when the population is an int."""
        return self._classes

    @property
    def single_class(self) -> bool:
        """True when the population was given as an int."""
        return not isinstance(self.population, Mapping)

    @property
    def station_names(self) -> tuple[str, ...]:
        """Station names in declaration order."""
        return tuple(st.name for st in self.stations)

    def station(self, name: str) -> Station:
        """Return the station called ``name`` (UnknownNameError otherwise)."""
        for st in self.stations:
            if st.name == name:
                return st
        raise UnknownNameError("station", name, self.station_names)

    @property
    def symbolic(self) -> bool:
        """True if any demand is a SymPy expression."""
        return any(_checks.is_symbolic(d) for d in self.demands.ravel())

    @property
    def demands(self) -> np.ndarray:
        """Demand matrix, shape (stations, classes); 0 where a class does not visit.

        dtype float, or object when some demand is symbolic.
        """
        rows = []
        for st in self.stations:
            if isinstance(st.demand, Mapping):
                rows.append([st.demand.get(c, 0) for c in self._classes])
            else:
                rows.append([st.demand] * len(self._classes))
        arr = np.array(rows, dtype=object)
        if any(_checks.is_symbolic(d) or type(d).__module__.startswith("sympy") for d in arr.ravel()):
            return arr
        return arr.astype(float)

    @property
    def servers(self) -> np.ndarray:
        """Servers per station, shape (stations,); ``inf`` for a Delay."""
        return np.array([float(st.servers) for st in self.stations])

    @property
    def is_delay(self) -> np.ndarray:
        """Boolean mask of Delay stations, shape (stations,)."""
        return np.array([isinstance(st, Delay) for st in self.stations])

    @property
    def population_vector(self) -> np.ndarray:
        """Population per class, shape (classes,), int."""
        if isinstance(self.population, Mapping):
            return np.array([self.population[c] for c in self._classes], dtype=int)
        return np.array([self.population], dtype=int)

    def with_population(self, population: int | Mapping[str, int]) -> ClosedNetwork:
        """Return a copy with another population (the model is never mutated)."""
        return ClosedNetwork(self.stations, population)
