"""Many single-class networks of one shape, solved by one vectorized recursion.

This is what makes sweeps cheap: 10,000 networks that share their station
types but differ in demands and population are one exact MVA recursion over
arrays of shape (networks, stations), run up to the largest population.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.queueing import _exact
from queuesgd.queueing.network import ClosedNetwork

__all__ = ["BatchResult", "mva_batch"]


@dataclass(frozen=True)
class BatchResult:
    """Exact MVA measures of M networks.

    Attributes
    ----------
    station_names : tuple of str
    population : ndarray of int, shape (M,)
    throughput : ndarray, shape (M,)
    residence_time, queue_length, utilization : ndarray, shape (M, K)
        Utilization is per server for a queue and mean busy servers for a delay.
    bottleneck : ndarray of str, shape (M,)
        The queue with the highest utilization in each network.
    """

    station_names: tuple[str, ...]
    population: np.ndarray
    throughput: np.ndarray
    residence_time: np.ndarray
    queue_length: np.ndarray
    utilization: np.ndarray
    bottleneck: np.ndarray


def mva_batch(template: ClosedNetwork, demands: np.ndarray, population: np.ndarray | int) -> BatchResult:
    """Solve M single-class networks shaped like ``template`` by exact MVA.

    Parameters
    ----------
    template : ClosedNetwork
        Single-class network giving the station names, kinds and servers.
    demands : array_like, shape (M, K)
        Demands of each network, stations in the template's order. Zero is
        allowed here (a station that a configuration does not use).
    population : int or array_like of int, shape (M,)
        Population of each network.

    Returns
    -------
    BatchResult

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=1)
    >>> r = mva_batch(net, [[2.0, 1.0], [2.0, 0.5]], population=[2, 2])
    >>> r.throughput.round(6).tolist()      # 3/5 and 10/13 by hand
    [0.6, 0.769231]
    """
    if not isinstance(template, ClosedNetwork) or not template.single_class:
        raise InvalidParameterError("template", template, "a single-class ClosedNetwork")
    K = len(template.stations)
    D = _checks.reals("demands", demands, accepted=f"an array of finite demands >= 0, shape (networks, {K})")
    if D.ndim != 2 or D.shape[1] != K:
        raise InvalidParameterError("demands", D.shape, f"an array of shape (networks, {K})")
    if not np.all(np.isfinite(D)) or np.any(D < 0):
        raise InvalidParameterError("demands", "non-finite or negative entries", "finite demands >= 0")
    accepted = f"an integer from 1 to {_checks.MAX_COUNT:,}, or one per network ({D.shape[0]:,})"
    if isinstance(population, (str, bytes, bytearray)):
        raise InvalidParameterError("population", population, accepted)
    try:
        pops = np.broadcast_to(np.asarray(population, dtype=object), (D.shape[0],))
    except ValueError:
        raise InvalidParameterError("population", population, accepted) from None
    pops = np.array(
        [_checks.integer("population", p, maximum=_checks.MAX_COUNT) for p in pops.tolist()], dtype=int
    )
    X, R, Q = _solve_unique(D, template, pops)
    div = np.where(template.is_delay, 1.0, template.servers)
    U = X[:, None] * D / div
    names = np.array(template.station_names)
    queue_idx = np.flatnonzero(~template.is_delay)
    if queue_idx.size:
        bottleneck = names[queue_idx[np.argmax(U[:, queue_idx], axis=1)]]
    else:
        bottleneck = names[np.argmax(U, axis=1)]
    return BatchResult(template.station_names, pops, X, R, Q, U, bottleneck)


#: Most values (networks x largest population x stations) one recursion holds per result array.
CHUNK_VALUES = 2**22
#: Longest estimated time of one :func:`mva_batch` call, seconds: larger ones are refused before they start.
MAX_BATCH_SECONDS = 30.0
#: Seconds per population step of one chunk, and per value (network x population x station) computed,
#: measured on a 2-core machine (13 us and 0.08 us; each multi-server queue at most doubles both).
STEP_SECONDS, VALUE_SECONDS = 15e-6, 1e-7


def _solve_unique(D: np.ndarray, template: ClosedNetwork, pops: np.ndarray) -> tuple[Any, Any, Any]:
    """X, R, Q of each row: one recursion per distinct demand row, in chunks of bounded memory.

    Rows that share their demands (a sweep over workers) share one recursion up to their largest
    population, so the work is (distinct demand rows) x (largest population), not rows x that; the
    recursion holds ``networks x population x stations`` values, so the distinct rows are solved in
    chunks of at most :data:`CHUNK_VALUES` of them (sorted by population, so small ones go together).
    """
    M, K = D.shape
    uniq, inverse = np.unique(D, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    top = np.zeros(len(uniq), dtype=int)
    np.maximum.at(top, inverse, pops)
    order = np.argsort(top, kind="stable")
    chunks, start = [], 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * top[order[stop]] * K <= CHUNK_VALUES:
            stop += 1
        chunks.append(order[start:stop])
        start = stop
    _check_cost(chunks, top, template)
    X, R, Q = np.empty(M), np.empty((M, K)), np.empty((M, K))
    for chunk in chunks:
        Xc, Rc, Qc = _exact.single_class(
            uniq[chunk], template.is_delay, template.servers, int(top[chunk].max())
        )
        where = np.full(len(uniq), -1)
        where[chunk] = np.arange(len(chunk))
        rows = np.flatnonzero(where[inverse] >= 0)
        local, idx = where[inverse[rows]], pops[rows] - 1
        X[rows], R[rows], Q[rows] = Xc[local, idx], Rc[local, idx], Qc[local, idx]
    return X, R, Q


def _check_cost(chunks: list[np.ndarray], top: np.ndarray, template: ClosedNetwork) -> None:
    """Refuse, before it starts, a recursion estimated to take more than :data:`MAX_BATCH_SECONDS`."""
    if not len(top):
        return
    K = len(template.stations)
    n_max = int(top.max())
    multi = int(np.sum(~template.is_delay & (template.servers > 1) & (template.servers < n_max)))
    steps = sum(int(top[c].max()) for c in chunks)
    values = sum(len(c) * int(top[c].max()) * K for c in chunks)
    seconds = (steps * STEP_SECONDS + values * VALUE_SECONDS) * 2.0 ** min(multi, 64)
    if seconds > MAX_BATCH_SECONDS:
        raise StateSpaceTooLargeError(
            f"mva_batch: {len(top):,} distinct demand rows up to population {n_max:,} ({K} stations, {multi} "
            f"multi-server) is about {seconds:,.0f} s of exact MVA, more than {MAX_BATCH_SECONDS:g} s; "
            "solve fewer distinct rows or smaller populations per call, or use approximate MVA "
            "(queuesgd.mva(..., method='schweitzer'))"
        )
