"""Immutable result objects of the queueing-network solvers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.queueing.network import ClosedNetwork

__all__ = ["MVAResult", "MVASeries"]


def _scalar(v: Any) -> Any:
    """Plain float for numbers; SymPy expressions unchanged."""
    if isinstance(v, (float, int, np.floating, np.integer)):
        return float(v)
    return v


def _per_class(net: ClosedNetwork, row: np.ndarray) -> Any:
    if net.single_class:
        return _scalar(row[0])
    return MappingProxyType({c: _scalar(v) for c, v in zip(net.classes, row)})


def _per_station(net: ClosedNetwork, mat: np.ndarray) -> Mapping[str, Any]:
    return MappingProxyType({name: _per_class(net, mat[k]) for k, name in enumerate(net.station_names)})


def utilizations(net: ClosedNetwork, X: np.ndarray) -> np.ndarray:
    """Per-station, per-class utilization from throughputs, shape (..., K, C).

    A queue's utilization is per server, ``X_c D_kc / servers_k``; a delay's is
    its mean number of busy servers, ``X_c D_kc``.
    """
    D = net.demands
    div = np.where(net.is_delay, 1.0, net.servers)
    return X[..., None, :] * D / div[:, None]


def bottleneck_station(net: ClosedNetwork) -> str:
    """Name of the queue with the largest total demand per server.

    With no queue (only delays) the delay with the largest demand is named.
    Symbolic demands: the first queue (no order is known).
    """
    D = net.demands
    load_rows = []
    for k in range(len(net.stations)):
        total = D[k].sum()
        load_rows.append(total if net.is_delay[k] else total / net.servers[k])
    candidates = [k for k in range(len(net.stations)) if not net.is_delay[k]] or list(
        range(len(net.stations))
    )
    try:
        best = max(candidates, key=lambda k: float(load_rows[k]))
    except TypeError:
        best = candidates[0]
    return net.station_names[best]


@dataclass(frozen=True)
class MVAResult:
    """Steady-state measures of a closed network at one population.

    Attributes
    ----------
    network : ClosedNetwork
        The solved network (not modified).
    method : str
        The method that produced the numbers (``"exact"``, ``"schweitzer"``, ...).
    throughput : float or mapping
        Cycles completed per second (one class) or ``{class: throughput}``.
    response_time : float or mapping
        Cycle time ``N_c / X_c``: the sum of residence times at all stations,
        delays included.
    residence_time, queue_length, utilization : mapping
        ``{station: value}``, each value a float (one class) or ``{class: value}``.
        Utilization is per server for a queue, mean busy servers for a delay.
    bottleneck : str
        The station with the largest demand per server.

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue, mva
    >>> r = mva(ClosedNetwork([Delay("think", 1.0), Queue("cpu", 1.0)], population=1))
    >>> r.throughput, r.bottleneck
    (0.5, 'cpu')
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    network: ClosedNetwork
    method: str
    throughput: Any
    response_time: Any
    residence_time: Mapping[str, Any]
    queue_length: Mapping[str, Any]
    utilization: Mapping[str, Any]
    bottleneck: str

    @classmethod
    def from_arrays(
        cls, net: ClosedNetwork, method: str, X: np.ndarray, R: np.ndarray, Q: np.ndarray
    ) -> MVAResult:
        """Wrap solver arrays: X (C,), R and Q (K, C)."""
        N = net.population_vector
        cycle = np.array([N[c] / X[c] if X[c] != 0 else np.inf for c in range(len(N))], dtype=X.dtype)
        return cls(
            network=net,
            method=method,
            throughput=_per_class(net, X),
            response_time=_per_class(net, cycle),
            residence_time=_per_station(net, R),
            queue_length=_per_station(net, Q),
            utilization=_per_station(net, utilizations(net, X)),
            bottleneck=bottleneck_station(net),
        )

    def table(self) -> str:
        """A plain-text table of the per-station measures."""
        lines = [f"{'station':<16}{'residence':>14}{'queue':>14}{'utilization':>14}"]
        for s in self.network.station_names:

            def fmt(v: Any) -> str:
                if isinstance(v, Mapping):
                    v = sum(v.values())
                try:
                    return f"{float(v):14.6g}"
                except TypeError:
                    return f"{str(v):>14}"

            lines.append(
                f"{s:<16}{fmt(self.residence_time[s])}{fmt(self.queue_length[s])}{fmt(self.utilization[s])}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class MVASeries:
    """Single-class measures for many populations from one recursion.

    Attributes
    ----------
    network : ClosedNetwork
    method : str
    population : ndarray of int, shape (P,)
    throughput, response_time : ndarray, shape (P,)
    residence_time, queue_length, utilization : mapping of station -> ndarray (P,)
    bottleneck : str

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue, mva
    >>> s = mva(ClosedNetwork([Delay("z", 1.0), Queue("q", 1.0)], 1), population=range(1, 4))
    >>> s.population.tolist(), s.throughput.round(4).tolist()
    ([1, 2, 3], [0.5, 0.8, 0.9375])
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    network: ClosedNetwork
    method: str
    population: np.ndarray
    throughput: np.ndarray
    response_time: np.ndarray
    residence_time: Mapping[str, np.ndarray]
    queue_length: Mapping[str, np.ndarray]
    utilization: Mapping[str, np.ndarray]
    bottleneck: str

    @classmethod
    def from_arrays(
        cls, net: ClosedNetwork, method: str, pops: np.ndarray, X: np.ndarray, R: np.ndarray, Q: np.ndarray
    ) -> MVASeries:
        """Wrap solver arrays: X (P,), R and Q (P, K) for populations ``pops``."""
        U = utilizations(net, X[:, None])[..., 0]
        names = net.station_names
        with np.errstate(divide="ignore"):
            cycle = pops / X
        return cls(
            network=net,
            method=method,
            population=np.asarray(pops),
            throughput=X,
            response_time=cycle,
            residence_time=MappingProxyType({s: R[:, k] for k, s in enumerate(names)}),
            queue_length=MappingProxyType({s: Q[:, k] for k, s in enumerate(names)}),
            utilization=MappingProxyType({s: U[:, k] for k, s in enumerate(names)}),
            bottleneck=bottleneck_station(net),
        )

    def __len__(self) -> int:
        return len(self.population)

    def at(self, population: int) -> MVAResult:
        """The measures at one population, as an :class:`MVAResult`."""
        hits = np.flatnonzero(self.population == population)
        if not len(hits):
            raise InvalidParameterError(
                "population",
                population,
                f"one of the solved populations {self.population.min()}..{self.population.max()}",
            )
        i = hits[0]
        names = self.network.station_names
        X = np.array([self.throughput[i]])
        R = np.array([[self.residence_time[s][i]] for s in names])
        Q = np.array([[self.queue_length[s][i]] for s in names])
        return MVAResult.from_arrays(self.network.with_population(int(population)), self.method, X, R, Q)
