"""``predict`` and ``sweep``: from (scheme, workload, cluster) to samples per second."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.queueing import ClosedNetwork, MVAResult, mva
from queuesgd.queueing.batch import mva_batch
from queuesgd.schemes.base import Scheme
from queuesgd.workload import Cluster, Workload

__all__ = ["Prediction", "StationBreakdown", "SweepResult", "predict", "sweep"]


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
class Prediction:
    """Predicted steady-state performance of a scheme on a cluster.

    Attributes
    ----------
    scheme : str
        The scheme's key (``"async-ps"``).
    workers : int
    throughput : float
        Training samples whose gradients are applied, per second.
    iteration_rate : float
        Model updates per second (also ``updates_per_second``).
    gradients_per_update : float
        Gradients folded into one update (1 for asynchronous SGD).
    iteration_time : float
        Mean time of one worker iteration, seconds.
    breakdown : mapping
        Seconds per worker iteration spent in ``compute``, ``communication``,
        ``update`` (service) and ``waiting`` (queueing for a busy resource).
    stations : mapping of str to StationBreakdown
        The same per station of the model.
    bottleneck : str
        The most utilized resource.
    staleness : float or None
        Mean staleness where the method gives it, else None.
    method : str
        The solution method that ran (``"mva"``, ``"ctmc"``, ``"linearizer"``).
    reason : str
        Why that method was chosen.
    model : object
        The model that was solved (e.g. a :class:`~queuesgd.ClosedNetwork`).
    """

    scheme: str
    workers: int
    throughput: float
    iteration_rate: float
    gradients_per_update: float
    iteration_time: float
    breakdown: Mapping[str, float]
    stations: Mapping[str, StationBreakdown]
    bottleneck: str
    staleness: float | None
    method: str
    reason: str
    model: Any

    @property
    def updates_per_second(self) -> float:
        """Model updates per second (same as ``iteration_rate``)."""
        return self.iteration_rate

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in self.breakdown.items())
        return (
            f"{self.scheme} with {self.workers} workers: {self.throughput:.6g} samples/s "
            f"({self.iteration_rate:.6g} updates/s; per iteration: {parts}; "
            f"bottleneck {self.bottleneck}; method {self.method})"
        )


def _resolve_workload(workload: Workload | str) -> Workload:
    if isinstance(workload, str):
        from queuesgd.catalog import load_workload

        return load_workload(workload)
    if not isinstance(workload, Workload):
        raise InvalidParameterError("workload", workload, "a Workload or the name of a catalog workload")
    return workload


def _check_scheme(scheme: Any) -> Scheme:
    if not isinstance(scheme, Scheme):
        from queuesgd.schemes import SCHEMES

        raise InvalidParameterError(
            "scheme",
            scheme,
            "a scheme object such as " + ", ".join(f"{c.__name__}()" for c in SCHEMES.values()),
        )
    return scheme


def _average_over_classes(
    result: MVAResult, net: ClosedNetwork
) -> tuple[float, dict[str, float], dict[str, float], dict[str, float]]:
    """Total iteration rate and per-iteration station measures averaged over classes."""
    if net.single_class:
        X = result.throughput
        R = dict(result.residence_time)
        Q = dict(result.queue_length)
        U = dict(result.utilization)
        return X, R, Q, U
    Xc = result.throughput
    X = float(sum(Xc.values()))
    R = {s: sum(Xc[c] * v[c] for c in Xc) / X for s, v in result.residence_time.items()}
    Q = {s: float(sum(v.values())) for s, v in result.queue_length.items()}
    U = {s: float(sum(v.values())) for s, v in result.utilization.items()}
    return X, R, Q, U


def predict(scheme: Scheme, workload: Workload | str, cluster: Cluster, method: str = "auto") -> Prediction:
    """Predict the throughput of ``scheme`` running ``workload`` on ``cluster``.

    Parameters
    ----------
    scheme : Scheme
        A coordination scheme, e.g. ``AsyncPS()``.
    workload : Workload or str
        What one worker computes and sends per step, or a catalog name
        (``"resnet50"``).
    cluster : Cluster
        Workers, links, stragglers.
    method : str
        ``"auto"`` (the cheapest exact method; ``Prediction.reason`` says
        which and why) or one of ``scheme.methods``: ``"mva"`` (exact mean
        value analysis), ``"ctmc"`` (the Markov chain of the network, solved
        exactly; small clusters only).

    Returns
    -------
    Prediction

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster, predict
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> p = predict(AsyncPS(), w, Cluster(workers=1, bandwidth="1Gbit/s"))
    >>> round(p.throughput, 4)            # 32 samples / (0.1 s + 2 x 0.08 s)
    123.0769
    >>> p.method
    'mva'
    """
    scheme = _check_scheme(scheme)
    workload = _resolve_workload(workload)
    if not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster")
    method = _checks.choice("method", method, ("auto",) + scheme.methods)
    net = scheme.queueing_network(workload, cluster)
    if method == "ctmc":
        from queuesgd.queueing.ctmc import ctmc_solve

        result = ctmc_solve(net)
        used, reason = "ctmc", "requested: exact CTMC of the closed network"
    elif method == "mva":
        result = mva(net, "exact")
        used, reason = "mva", "requested: exact mean value analysis"
    else:
        try:
            result = mva(net, "exact")
            used, reason = "mva", "product-form closed network: exact MVA is the cheapest exact method"
        except StateSpaceTooLargeError as err:
            result = mva(net, "linearizer")
            used, reason = "linearizer", f"exact multi-class MVA too large ({err}); Linearizer approximation"
    X, R, Q, U = _average_over_classes(result, net)
    demand = {s: _mean_demand(net, s, result) for s in net.station_names}
    stations = {
        s: StationBreakdown(
            residence_time=float(R[s]),
            service_time=float(demand[s]),
            waiting_time=float(R[s] - demand[s]),
            utilization=float(U[s]),
            queue_length=float(Q[s]),
        )
        for s in net.station_names
    }
    phases = {"compute": 0.0, "communication": 0.0, "update": 0.0, "waiting": 0.0}
    for s, b in stations.items():
        phases[scheme.phase_of(s)] += b.service_time
        phases["waiting"] += b.waiting_time
    return Prediction(
        scheme=scheme.key,
        workers=cluster.workers,
        throughput=float(X) * workload.batch_size,
        iteration_rate=float(X),
        gradients_per_update=1.0,
        iteration_time=float(sum(R.values())),
        breakdown=MappingProxyType(phases),
        stations=MappingProxyType(stations),
        bottleneck=result.bottleneck,
        staleness=None,
        method=used,
        reason=reason,
        model=net,
    )


def _mean_demand(net: ClosedNetwork, station: str, result: MVAResult) -> float:
    d = net.station(station).demand
    if not isinstance(d, Mapping):
        if net.single_class:
            return float(d)
        d = {c: d for c in net.classes}
    X = result.throughput
    total = sum(X.values())
    return float(sum(X[c] * d.get(c, 0.0) for c in X) / total)


@dataclass(frozen=True)
class SweepResult:
    """A table of predictions, one row per configuration.

    Attributes
    ----------
    scheme : str
    columns : mapping of str to ndarray
        ``workers``, ``bandwidth`` (bytes/s), ``latency`` (s), ``throughput``
        (samples/s), ``iteration_rate`` (updates/s), ``scaling_factor``
        (throughput / (workers x single-worker throughput at the same
        bandwidth and latency)) and ``bottleneck``.
    method : str
    """

    scheme: str
    columns: Mapping[str, np.ndarray]
    method: str

    def __len__(self) -> int:
        return len(self.columns["workers"])

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise InvalidParameterError("column", column, ", ".join(self.columns))
        return self.columns[column]

    def rows(self) -> list[dict[str, Any]]:
        """The table as a list of plain dicts (JSON-ready)."""
        out = []
        for i in range(len(self)):
            row = {}
            for k, v in self.columns.items():
                x = v[i]
                row[k] = x.item() if isinstance(x, np.generic) else x
            out.append(row)
        return out

    def table(self) -> str:
        """A plain-text table for a terminal."""
        head = (
            f"{'workers':>8} {'bandwidth':>14} {'latency':>10} {'samples/s':>12} {'scaling':>8}  bottleneck"
        )
        lines = [head]
        c = self.columns
        for i in range(len(self)):
            lat = units.format_seconds(c["latency"][i]) if c["latency"][i] else "0"
            lines.append(
                f"{c['workers'][i]:>8d} {units.format_bandwidth(c['bandwidth'][i]):>14} "
                f"{lat:>10} {c['throughput'][i]:>12.2f} "
                f"{c['scaling_factor'][i]:>8.3f}  {c['bottleneck'][i]}"
            )
        return "\n".join(lines)


def _grid(field: str, values: Any, default: Any, parse: Any) -> np.ndarray:
    if values is None:
        values = [default]
    elif isinstance(values, (str, int, float, np.number)):
        values = [values]
    elif not isinstance(values, Iterable):
        raise InvalidParameterError(field, values, "a value or an iterable of values")
    out = np.array([parse(field, v) for v in values], dtype=float)
    if out.size == 0:
        raise InvalidParameterError(field, values, "a non-empty list")
    return out


def sweep(
    scheme: Scheme,
    workload: Workload | str,
    cluster: Cluster,
    *,
    workers: Iterable[int] | int | None = None,
    bandwidth: Iterable[Any] | Any = None,
    latency: Iterable[Any] | Any = None,
) -> SweepResult:
    """Predict every combination of workers x bandwidth x latency in one call.

    Values left out come from ``cluster``. For :class:`~queuesgd.AsyncPS` the
    whole grid is one vectorized exact MVA recursion (identical to calling
    :func:`predict` row by row).

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster, sweep
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> t = sweep(AsyncPS(), w, Cluster(workers=1, bandwidth="1Gbit/s"),
    ...           workers=[1, 2, 4], bandwidth=["1Gbit/s", "10Gbit/s"])
    >>> len(t), round(float(t["throughput"][0]), 4)
    (6, 123.0769)
    """
    scheme = _check_scheme(scheme)
    workload = _resolve_workload(workload)
    if not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster")
    if cluster.speeds is not None:
        raise NotRepresentable(
            "sweep needs homogeneous workers (speeds=None); use predict for heterogeneous ones"
        )
    W = _grid("workers", workers, cluster.workers, lambda f, v: _checks.integer(f, v)).astype(int)
    B = _grid(
        "bandwidth",
        bandwidth,
        cluster.bandwidth,
        lambda f, v: _checks.positive(f, units.parse_bandwidth(v, f)),
    )
    L = _grid("latency", latency, cluster.latency, lambda f, v: units.parse_seconds(v, f))
    if not hasattr(scheme, "demand_matrix"):
        raise NotRepresentable(f"{type(scheme).__name__} has no vectorized sweep")
    grid = np.array(list(itertools.product(range(len(W)), range(len(B)), range(len(L)))))
    w, b, lat = W[grid[:, 0]], B[grid[:, 1]], L[grid[:, 2]]
    shards = cluster.ps_shards
    D = scheme.demand_matrix(workload, b, lat, shards)
    res = mva_batch(scheme.template(shards), D, w)
    X = res.throughput
    X1 = 1.0 / D.sum(axis=1)  # one worker never queues: X(1) = 1 / sum of demands
    cols = {
        "workers": w,
        "bandwidth": b,
        "latency": lat,
        "throughput": X * workload.batch_size,
        "iteration_rate": X,
        "scaling_factor": X / (w * X1),
        "bottleneck": res.bottleneck,
    }
    return SweepResult(scheme.key, MappingProxyType(cols), "mva")
