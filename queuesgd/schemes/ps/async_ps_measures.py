"""Per-station measures of the asynchronous parameter server, shared by its MVA, CTMC and simulation roads.

The station layout (compute, latency, then per-shard uplinks, updates and
downlinks), the phase of each station, where a gradient is applied and
where parameters are read, and the :class:`~queuesgd.schemes.base.SchemeSolution`
built from per-station residence times, queue lengths and utilizations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from queuesgd.queueing import ClosedNetwork, Delay, MVAResult, Queue
from queuesgd.schemes.base import SchemeSolution, StationBreakdown

__all__ = [
    "average_over_classes",
    "mean_demand",
    "phase_of",
    "read_station",
    "station_layout",
    "station_solution",
    "write_station",
]


def station_layout(shards: int) -> tuple[list[str], list[type]]:
    """Station names and kinds of the full layout: compute, latency, then uplinks, updates, downlinks.

    Examples
    --------
    >>> station_layout(2)[0]
    ['compute', 'latency', 'uplink[0]', 'uplink[1]', 'update[0]', 'update[1]', 'downlink[0]', 'downlink[1]']
    """
    names: list[str] = ["compute", "latency"]
    kinds: list[type] = [Delay, Delay]
    for part in ("uplink", "update", "downlink"):
        for i in range(shards):
            names.append(part if shards == 1 else f"{part}[{i}]")
            kinds.append(Queue)
    return names, kinds


def phase_of(station: str) -> str:
    """Which phase a station belongs to: compute, communication or update.

    Examples
    --------
    >>> phase_of("uplink[1]"), phase_of("update"), phase_of("compute")
    ('communication', 'update', 'compute')
    """
    if station == "compute":
        return "compute"
    if station.startswith("update"):
        return "update"
    return "communication"


def station_solution(
    X: float,
    R: Mapping[str, float],
    Q: Mapping[str, float],
    U: Mapping[str, float],
    demands: Mapping[str, float],
    method: str,
    reason: str,
    staleness: float,
    bottleneck: str,
    model: Any,
    details: dict[str, Any],
    interval: tuple[float, float] | None = None,
) -> SchemeSolution:
    """The scheme's solution from per-station measures (residence, queue length, utilization, demand).

    Examples
    --------
    >>> sol = station_solution(2.0, {"compute": 0.3, "uplink": 0.2}, {"compute": 0.6, "uplink": 0.4},
    ...                        {"compute": 0.6, "uplink": 0.3}, {"compute": 0.3, "uplink": 0.15},
    ...                        "mva", "", 0.5, "uplink", None, {})
    >>> sol.iteration_time, {k: round(v, 12) for k, v in sol.breakdown.items()}   # uplink waits 0.05 s
    (0.5, {'compute': 0.3, 'communication': 0.15, 'update': 0.0, 'waiting': 0.05})
    """
    stations = {}
    for s in R:
        d = float(demands[s])
        stations[s] = StationBreakdown(
            residence_time=float(R[s]),
            service_time=d,
            waiting_time=float(R[s] - d),
            utilization=float(U[s]),
            queue_length=float(Q[s]),
        )
    phases = {"compute": 0.0, "communication": 0.0, "update": 0.0, "waiting": 0.0}
    for s, b in stations.items():
        phases[phase_of(s)] += b.service_time
        phases["waiting"] += b.waiting_time
    return SchemeSolution(
        iteration_rate=float(X),
        gradients_per_update=1.0,
        iteration_time=float(sum(R.values())),
        breakdown=phases,
        method=method,
        reason=reason,
        staleness=float(staleness),
        details=details,
        interval=interval,
        stations=stations,
        bottleneck=bottleneck,
        model=model,
    )


def average_over_classes(
    result: MVAResult, net: ClosedNetwork
) -> tuple[float, dict[str, float], dict[str, float], dict[str, float]]:
    """Total iteration rate and per-iteration station measures averaged over classes."""
    if net.single_class:
        return (
            result.throughput,
            dict(result.residence_time),
            dict(result.queue_length),
            dict(result.utilization),
        )
    Xc = result.throughput
    X = float(sum(Xc.values()))
    R = {s: sum(Xc[c] * v[c] for c in Xc) / X for s, v in result.residence_time.items()}
    Q = {s: float(sum(v.values())) for s, v in result.queue_length.items()}
    U = {s: float(sum(v.values())) for s, v in result.utilization.items()}
    return X, R, Q, U


def mean_demand(net: ClosedNetwork, station: str, result: MVAResult) -> float:
    d = net.station(station).demand
    if not isinstance(d, Mapping):
        if net.single_class:
            return float(d)
        d = {c: d for c in net.classes}
    X = result.throughput
    total = sum(X.values())
    return float(sum(X[c] * d.get(c, 0.0) for c in X) / total)


def write_station(names: list[str], D: np.ndarray) -> str:
    """The station whose completion applies a gradient: the last update queue (or uplink without one)."""
    ups = [n for n, d in zip(names, D) if d > 0 and (n.startswith("update") or n.startswith("uplink"))]
    return ups[-1]


def read_station(names: list[str], D: np.ndarray) -> str | None:
    """The first downlink queue (a worker's parameter read starts with its service), or None."""
    downs = [n for n, d in zip(names, D) if d > 0 and n.startswith("downlink")]
    return downs[0] if downs else None
