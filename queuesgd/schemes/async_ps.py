"""Asynchronous parameter server as a closed queueing network.

Source: Lin, Paolieri, Golubchik et al., MASCOTS 2018 (see ``docs/schemes/async-ps.md``):
workers are customers circulating through their own computation (a delay
station) and the parameter server's resources (queues): the PS inbound link
(gradient upload), the PS update, and the PS outbound link (parameter
download). Every completed cycle applies one gradient to the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from queuesgd.queueing import ClosedNetwork, Delay, Queue
from queuesgd.schemes.base import Scheme
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
