"""Discrete-event simulation of the asynchronous parameter server (``method="simulate"``).

Workers cycle through their own computation (the actual compute law, with
speeds and ``RandomDelay`` stragglers), a fixed delay of 2 x latency, and the
PS queues -- an order-preserving FCFS tandem of uplink, update and downlink
(exponential or deterministic service). Throughput, staleness and per-station
measures are measured after a warm-up, with batch-means intervals
(:mod:`queuesgd.batchmeans`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.batchmeans import (
    BATCHES,
    check_iterations,
    check_simulation_size,
    check_tail,
    count_rate_interval,
    half_width,
    little_interval,
)
from queuesgd.errors import NotRepresentable
from queuesgd.queueing.results import bottleneck_station
from queuesgd.rng import as_generator
from queuesgd.schemes.base import SchemeSolution
from queuesgd.schemes.laws import sample_compute
from queuesgd.schemes.ps.async_ps_measures import (
    read_station,
    station_layout,
    station_solution,
    write_station,
)

if TYPE_CHECKING:
    from queuesgd.schemes.ps.async_ps import AsyncPS
    from queuesgd.workload import Cluster, Workload

__all__ = ["simulate_async_ps"]


def simulate_async_ps(
    scheme: AsyncPS, workload: Workload, cluster: Cluster, rng: Any, iterations: int | None
) -> SchemeSolution:
    """The simulation road: workers' cycles through an order-preserving FCFS tandem of PS queues."""
    n = cluster.workers
    total = scheme.simulation_iterations if iterations is None else check_iterations(iterations)
    gen = as_generator(np.random.default_rng() if rng is None else rng)
    names, _ = station_layout(cluster.ps_shards)
    D = scheme.demand_matrix(
        workload, np.array([cluster.bandwidth]), np.array([cluster.latency]), cluster.ps_shards
    )[0]
    qk = [k for k in range(2, len(names)) if D[k] > 0]
    qnames = [names[k] for k in qk]
    K = len(qk)
    write_k = qnames.index(write_station(names, D))
    read = read_station(names, D)
    read_k = None if read is None else qnames.index(read)
    lat = float(D[1])
    # warm-up: one extra update in ten (at least 5 per worker) before measuring, as long as or longer
    # than the policy's WARMUP fraction: the workers start in step, a transient longer than a barrier's
    warm = max(total // 10, 5 * n)
    cycles = total + warm
    # Per pass: K service times as an array and as Python floats, K departures, 5 more values; and the
    # compute draws of every worker (2 passes' worth per worker are drawn ahead). The loop costs some
    # 3 us a pass here.
    check_simulation_size(
        cycles,
        12 + 6 * K,
        unit="values a pass",
        what="values",
        seconds_per_iteration=3e-6,
        instead="method='mva' or 'ctmc'",
    )
    check_simulation_size(2 * cycles // n + 16, n)
    if scheme.service == "deterministic":
        S = np.broadcast_to(D[qk][None, :], (cycles, K))
    else:
        S = gen.exponential(size=(cycles, K)) * D[qk][None, :]

    def draw(count: int) -> np.ndarray:
        return sample_compute(workload, cluster, gen, count)

    coupled = scheme.duplex < 1.0 and read_k is not None and qnames[0].startswith("uplink")
    if coupled and cluster.ps_shards > 1:
        raise NotRepresentable(
            f"AsyncPS(duplex={scheme.duplex:g}) with {cluster.ps_shards} PS shards: the coupled link is "
            "simulated for one PS shard"
        )
    if coupled:
        A, C, dep, who, begin = _run_coupled(draw, S, n, lat, scheme.duplex)
    else:
        A, C, dep, who, begin = _run_tandem(draw, S, n, lat, -1 if read_k is None else read_k)
    # ---- measures over the passes after warm-up --------------------------------------
    W = dep[:, write_k]
    stale = _staleness(W, dep[:, -1] if read_k is None else begin, who, warm)
    t0, t1 = W[warm - 1], W[-1]
    nb = BATCHES
    sl = slice(warm, cycles)
    before = np.column_stack([A, dep[:, :-1]])
    res_each = (dep - before)[sl]
    cycle = C[sl] + lat + res_each.sum(axis=1)  # each pass's whole cycle: compute, latency, the PS queues
    X, interval = count_rate_interval(W[warm:], t0, t1, nb)
    # Cycles too heavy-tailed for the batches: Little's law, X = n / E[cycle], with the subsampling
    # interval of the mean cycle, inverted; the user is told.
    if check_tail(cycle, f"AsyncPS simulation of {cycles - warm:,} updates", repaired=True):
        interval = little_interval(cycle, n, X, nb)
    sm = np.array([g.mean() for g in np.array_split(stale, nb)])
    s_half = half_width(sm)
    values, freq = np.unique(stale, return_counts=True)
    dist = {int(v): float(f / stale.size) for v, f in zip(values, freq)}
    # per-station means (Little's law for queue lengths)
    res = res_each.mean(axis=0)
    svc_mean = S[sl].mean(axis=0)
    R = {"compute": float(C[sl].mean())}
    demands = {"compute": R["compute"]}
    if lat > 0:
        R["latency"] = demands["latency"] = lat
    for k, st in enumerate(qnames):
        R[st] = float(res[k])
        demands[st] = float(svc_mean[k])
    Q = {st: X * r for st, r in R.items()}
    U = {st: (Q[st] if st in ("compute", "latency") else X * demands[st]) for st in R}
    details = {
        "staleness_distribution": dist,
        "staleness_interval": (float(sm.mean() - s_half), float(sm.mean() + s_half)),
        "updates": int(cycles - warm),
    }
    reason = (
        f"discrete-event simulation of {cycles - warm} updates after {warm} warm-up: actual compute law, "
        f"fixed latency, {scheme.service} PS service times"
    )
    if coupled:
        reason += f"; the PS link's directions each at {scheme.duplex:g} of the rate while both transmit"
    bottleneck = bottleneck_station(scheme.queueing_network(workload, cluster))
    return station_solution(
        X,
        R,
        Q,
        U,
        demands,
        "simulate",
        reason,
        float(stale.mean()),
        bottleneck,
        None,
        details,
        interval=(float(interval[0]), float(interval[1])),
    )


class _Computes:
    """Each worker's next compute time, drawn ``rows`` steps at a time for all workers at once."""

    def __init__(self, draw: Any, n: int, cycles: int) -> None:
        self.draw, self.rows = draw, 2 * cycles // n + 16
        self.comp = draw(self.rows)
        self.passes = np.ones(n, dtype=np.int64)
        self.last = self.comp[0].tolist()  # the compute time that preceded each worker's current pass

    def first(self, w: int) -> float:
        return float(self.comp[0, w])

    def next(self, w: int) -> float:
        p = self.passes[w]
        if p >= self.comp.shape[0]:
            self.comp = np.vstack([self.comp, self.draw(self.rows)])
        c = float(self.comp[p, w])
        self.passes[w] = p + 1
        self.last[w] = c
        return c


def _run_tandem(
    draw: Any, S: np.ndarray, n: int, lat: float, rk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The event loop: ``n`` workers compute (``draw(rows)`` gives compute times), wait ``lat``, then
    pass the FCFS tandem of PS queues with service times ``S`` (one row per pass, in arrival order).

    Returns per pass: arrival time at the PS, the compute time that preceded it, departure time
    from each queue, the worker, and the start of service at the read station ``rk`` (-1: none).
    """
    cycles, K = S.shape
    comp = _Computes(draw, n, cycles)
    A = np.empty(cycles)
    C = np.empty(cycles)
    dep = np.empty((cycles, K))
    who = np.empty(cycles, dtype=np.int64)
    begin = np.empty(cycles)
    heap = [(comp.first(w) + lat, w) for w in range(n)]
    heapq.heapify(heap)
    prev = [0.0] * K
    svc = S.tolist()
    for j in range(cycles):
        a, w = heapq.heappop(heap)
        s = svc[j]
        d = a
        for k in range(K):  # FCFS tandem: D_k = max(D_{k-1}, previous customer's D_k) + S_k
            d = d if d > prev[k] else prev[k]
            if k == rk:
                begin[j] = d  # start of service at the read station
            d += s[k]
            prev[k] = d
        A[j] = a
        C[j] = comp.last[w]
        dep[j] = prev
        who[j] = w
        heapq.heappush(heap, (d + comp.next(w) + lat, w))
    return A, C, dep, who, begin


def _run_coupled(
    draw: Any, S: np.ndarray, n: int, lat: float, duplex: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The event loop of :func:`_run_tandem` for one PS whose link's directions slow each other.

    The stations are the uplink (column 0), the update (if any) and the
    downlink (last column), each first-come first-served. ``S`` holds each
    pass's work at each station: seconds at the full rate. The head of the
    uplink queue and the head of the downlink queue progress at rate 1 when
    alone and at rate ``duplex`` each while both transmit, so the departures
    are found event by event (the rates change when a transfer starts or
    ends). Returns what :func:`_run_tandem` returns; ``begin`` is the start of
    each pass's downlink service.
    """
    cycles, K = S.shape
    has_update = K == 3
    comp = _Computes(draw, n, cycles)
    A = np.empty(cycles)
    C = np.empty(cycles)
    dep = np.full((cycles, K), np.nan)
    who = np.empty(cycles, dtype=np.int64)
    begin = np.empty(cycles)
    arrivals = [(comp.first(w) + lat, w) for w in range(n)]
    heapq.heapify(arrivals)
    svc = S.tolist()
    up: deque[int] = deque()
    upd: deque[int] = deque()
    down: deque[int] = deque()
    up_left = down_left = 0.0  # work left of the head transfers
    upd_end = math.inf
    t = 0.0
    arrived = finished = 0
    while finished < cycles:
        rate = duplex if (up and down) else 1.0
        t_arr = arrivals[0][0] if (arrivals and arrived < cycles) else math.inf
        t_up = t + up_left / rate if up else math.inf
        t_down = t + down_left / rate if down else math.inf
        t_next = min(t_arr, t_up, t_down, upd_end)
        if up:
            up_left -= (t_next - t) * rate
        if down:
            down_left -= (t_next - t) * rate
        t = t_next
        if t == t_up:
            j = up.popleft()
            dep[j, 0] = t
            if up:
                up_left = svc[up[0]][0]
            if has_update:
                upd.append(j)
                if len(upd) == 1:
                    upd_end = t + svc[j][1]
            else:
                _enter_downlink(down, j, t, begin)
                if len(down) == 1:
                    down_left = svc[j][-1]
        elif t == upd_end:
            j = upd.popleft()
            dep[j, 1] = t
            upd_end = t + svc[upd[0]][1] if upd else math.inf
            _enter_downlink(down, j, t, begin)
            if len(down) == 1:
                down_left = svc[j][-1]
        elif t == t_down:
            j = down.popleft()
            dep[j, -1] = t
            finished += 1
            if down:
                begin[down[0]] = t
                down_left = svc[down[0]][-1]
            w = int(who[j])
            heapq.heappush(arrivals, (t + comp.next(w) + lat, w))
        else:
            _, w = heapq.heappop(arrivals)
            j = arrived
            arrived += 1
            A[j], C[j], who[j] = t, comp.last[w], w
            up.append(j)
            if len(up) == 1:
                up_left = svc[j][0]
    return A, C, dep, who, begin


def _enter_downlink(down: deque[int], j: int, t: float, begin: np.ndarray) -> None:
    """Queue pass ``j`` at the downlink at time ``t`` (its service begins now if the link is free)."""
    down.append(j)
    if len(down) == 1:
        begin[j] = t


def _staleness(W: np.ndarray, reads: np.ndarray, who: np.ndarray, warm: int) -> np.ndarray:
    """Staleness of each pass after the warm-up: updates written between its worker's previous read
    (``reads`` of the worker's previous pass) and its own write (``W``, nondecreasing)."""
    cycles = W.size
    order = np.lexsort((np.arange(cycles), who))
    prev_pass = np.full(cycles, -1, dtype=np.int64)
    same = who[order][1:] == who[order][:-1]
    prev_pass[order[1:][same]] = order[:-1][same]
    idx = np.arange(warm, cycles)
    idx = idx[prev_pass[idx] >= 0]
    return idx - np.searchsorted(W, reads[prev_pass[idx]], side="right")
