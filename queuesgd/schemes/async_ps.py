"""Asynchronous parameter server as a closed queueing network.

Source: Lin, Paolieri, Golubchik et al., MASCOTS 2018 (see ``docs/schemes/async-ps.md``):
workers are customers circulating through their own computation (a delay
station) and the parameter server's resources (queues): the PS inbound link
(gradient upload), the PS update, and the PS outbound link (parameter
download). Every completed cycle applies one gradient to the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd.errors import NotRepresentable, StateSpaceTooLargeError
from queuesgd.queueing import ClosedNetwork, Delay, MVAResult, Queue, mva
from queuesgd.queueing.batch import mva_batch
from queuesgd.schemes.base import Scheme, SchemeSolution, StationBreakdown
from queuesgd.workload import Cluster, Workload

__all__ = ["AsyncPS"]


@dataclass(frozen=True)
class AsyncPS(Scheme):
    """Asynchronous SGD with a (possibly sharded) parameter server.

    Each worker repeats: compute a gradient on its mini-batch, push it to the
    parameter server (PS), wait for the PS to apply it, pull the new
    parameters. Workers never wait for each other, only for the PS's
    resources, so W workers form a closed network with population W:

    ========== ======== ==========================================
    station    kind     demand per iteration
    ========== ======== ==========================================
    compute    Delay    mean compute time (divided by speed)
    latency    Delay    2 x one-way latency (push and pull)
    uplink     Queue    gradient_bytes / (shards x bandwidth)
    update     Queue    update_time / shards
    downlink   Queue    parameter_bytes / (shards x bandwidth)
    ========== ======== ==========================================

    With ``ps_shards = s > 1`` there are s uplink, update and downlink
    queues (``uplink[0]`` ...), each carrying 1/s of the bytes and of the
    update work. Stations with zero demand (no latency, no update time) are
    left out.

    Assumptions
    -----------
    * The PS's links are the shared network resources; a worker's own link
      never queues (it serves one transfer at a time). Visiting the s shards
      one after the other reproduces both limits: one worker alone moves its
      bytes at its own link rate (total s x 1/s), and together the workers
      saturate s shard links in parallel.
    * Transfers and updates are served first-come first-served; exact MVA
      treats their times as exponential (product form). Compute may follow
      any distribution (a delay station is insensitive to it).
    * Per-worker speed factors split the workers into classes by speed; the
      model is then solved by the exact multi-class recursion.

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> c = Cluster(workers=4, bandwidth="1Gbit/s")
    >>> AsyncPS().queueing_network(w, c).station_names
    ('compute', 'uplink', 'downlink')
    """

    key: ClassVar[str] = "async-ps"
    methods: ClassVar[tuple[str, ...]] = ("mva", "ctmc")

    # ---- one network ---------------------------------------------------------
    def queueing_network(self, workload: Workload, cluster: Cluster) -> ClosedNetwork:
        """The closed network for ``cluster.workers`` workers.

        Examples
        --------
        >>> from queuesgd import AsyncPS, Workload, Cluster, mva
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> net = AsyncPS().queueing_network(w, Cluster(workers=1, bandwidth="1Gbit/s"))
        >>> round(mva(net).throughput, 6)   # 1 / (0.1 + 2 x 0.08)
        3.846154
        """
        names, kinds = self._layout(cluster.ps_shards)
        D = self.demand_matrix(
            workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
        )[0]
        keep = D > 0
        speeds = cluster.speeds
        if speeds is None or len(set(speeds)) == 1:
            factor = 1.0 if speeds is None else float(speeds[0])
            D = D.copy()
            D[0] /= factor
            stations = [kind(n, float(d)) for n, kind, d, k in zip(names, kinds, D, keep) if k]
            return ClosedNetwork(stations, cluster.workers)
        # Heterogeneous speeds: one class per distinct speed.
        groups: dict[float, int] = {}
        for s in speeds:
            groups[float(s)] = groups.get(float(s), 0) + 1
        classes = {f"speed={s:g}": n for s, n in groups.items()}
        stations = []
        for i, (n, kind, d) in enumerate(zip(names, kinds, D)):
            if not keep[i]:
                continue
            if i == 0:
                stations.append(kind(n, {f"speed={s:g}": float(d) / s for s in groups}))
            else:
                stations.append(kind(n, float(d)))
        return ClosedNetwork(stations, classes)

    # ---- solvers ---------------------------------------------------------------------
    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        return "mva", "product-form closed network: exact MVA is the cheapest exact method"

    def solve(
        self,
        workload: Workload,
        cluster: Cluster,
        method: str,
        *,
        rng: Any = None,
        iterations: int | None = None,
    ) -> SchemeSolution:
        if cluster.stragglers is not None:
            raise NotRepresentable(
                "AsyncPS with RandomDelay stragglers: the closed network has no per-step random delay"
            )
        net = self.queueing_network(workload, cluster)
        if method == "ctmc":
            from queuesgd.queueing.ctmc import ctmc_solve

            result = ctmc_solve(net)
            used, reason = "ctmc", "exact CTMC of the closed network"
        elif method == "mva":
            try:
                result = mva(net, "exact")
                used, reason = "mva", "exact mean value analysis"
            except StateSpaceTooLargeError as err:
                result = mva(net, "linearizer")
                used, reason = (
                    "linearizer",
                    f"exact multi-class MVA too large ({err}); Linearizer approximation",
                )
        else:
            raise NotRepresentable(f"AsyncPS cannot be solved with method {method!r}")
        X, R, Q, U = _average_over_classes(result, net)
        stations = {}
        for s in net.station_names:
            d = _mean_demand(net, s, result)
            stations[s] = StationBreakdown(
                residence_time=float(R[s]),
                service_time=d,
                waiting_time=float(R[s] - d),
                utilization=float(U[s]),
                queue_length=float(Q[s]),
            )
        phases = {"compute": 0.0, "communication": 0.0, "update": 0.0, "waiting": 0.0}
        for s, b in stations.items():
            phases[self.phase_of(s)] += b.service_time
            phases["waiting"] += b.waiting_time
        return SchemeSolution(
            iteration_rate=float(X),
            gradients_per_update=1.0,
            iteration_time=float(sum(R.values())),
            breakdown=phases,
            method=used,
            reason=reason,
            stations=stations,
            bottleneck=result.bottleneck,
            model=net,
        )

    def solve_batch(
        self,
        workload: Workload,
        cluster: Cluster,
        workers: np.ndarray,
        bandwidth: np.ndarray,
        latency: np.ndarray,
    ) -> dict[str, Any]:
        if cluster.speeds is not None or cluster.stragglers is not None:
            raise NotRepresentable("the vectorized AsyncPS solution needs identical workers")
        shards = cluster.ps_shards
        D = self.demand_matrix(workload, bandwidth, latency, shards)
        res = mva_batch(self.template(shards), D, workers)
        return {
            "iteration_rate": res.throughput,
            "gradients_per_update": np.ones_like(res.throughput),
            "bottleneck": res.bottleneck,
            "method": "mva",
        }

    # ---- vectorized pieces, shared by predict and sweep ------------------------
    @staticmethod
    def _layout(shards: int) -> tuple[list[str], list[type]]:
        names: list[str] = ["compute", "latency"]
        kinds: list[type] = [Delay, Delay]
        for part in ("uplink", "update", "downlink"):
            for i in range(shards):
                names.append(part if shards == 1 else f"{part}[{i}]")
                kinds.append(Queue)
        return names, kinds

    def demand_matrix(
        self, workload: Workload, bandwidth: np.ndarray, latency: np.ndarray, shards: int
    ) -> np.ndarray:
        """Demands for M (bandwidth, latency) pairs, shape (M, stations).

        Columns follow the full station layout (compute, latency, uplinks,
        updates, downlinks); zero columns are stations a configuration lacks.
        """
        bandwidth = np.asarray(bandwidth, dtype=float)
        latency = np.asarray(latency, dtype=float)
        M = bandwidth.shape[0]
        cols = [np.full(M, workload.compute.mean), 2.0 * latency]
        cols += [workload.gradient_bytes / (shards * bandwidth)] * shards
        cols += [np.full(M, workload.update_time / shards)] * shards
        cols += [workload.parameter_bytes / (shards * bandwidth)] * shards
        return np.stack(cols, axis=1)

    def template(self, shards: int) -> ClosedNetwork:
        """A network with the full station layout, for :func:`~queuesgd.queueing.batch.mva_batch`."""
        names, kinds = self._layout(shards)
        return ClosedNetwork([kind(n, 1.0) for n, kind in zip(names, kinds)], 1)

    @staticmethod
    def phase_of(station: str) -> str:
        """Which phase a station belongs to: compute, communication or update."""
        if station == "compute":
            return "compute"
        if station.startswith("update"):
            return "update"
        return "communication"


def _average_over_classes(
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


def _mean_demand(net: ClosedNetwork, station: str, result: MVAResult) -> float:
    d = net.station(station).demand
    if not isinstance(d, Mapping):
        if net.single_class:
            return float(d)
        d = {c: d for c in net.classes}
    X = result.throughput
    total = sum(X.values())
    return float(sum(X[c] * d.get(c, 0.0) for c in X) / total)
