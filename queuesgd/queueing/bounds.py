"""Throughput and response-time bounds of single-class closed networks.

Two families, both from the total demand at the queues ``D``, the largest
demand per server ``D_max`` and the total delay (think) demand ``Z``
(Lazowska, Zahorjan, Graham and Sevcik, *Quantitative System Performance*,
1984, ch. 5):

* :func:`asymptotic_bounds` (ABA): valid for any single-class network,
  multi-server queues included.
* :func:`balanced_bounds` (BJB, Zahorjan, Sevcik, Eager and Galler, CACM
  25(2) 1982): tighter, for single-server queues and delays.

``response_lower``/``response_upper`` bound the *cycle time* ``N / X`` -- the
sum of the residence times at all stations, delays included -- the same
quantity as :attr:`MVAResult.response_time`. They are derived from the
throughput bounds (``N / X_upper`` and ``N / X_lower``), so the two pairs are
always consistent. Subtract ``Z`` for the textbook response time that
excludes think time.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.queueing.network import ClosedNetwork, Queue

__all__ = ["Bounds", "asymptotic_bounds", "balanced_bounds"]


@dataclass(frozen=True)
class Bounds:
    """Lower and upper bounds on throughput and cycle time.

    Attributes
    ----------
    population : int or ndarray of int
        The population(s) bounded.
    throughput_lower, throughput_upper : float or ndarray
        Bounds on the throughput (cycles per second).
    response_lower, response_upper : float or ndarray
        Bounds on the cycle time ``N / X`` (delays included, as
        :attr:`MVAResult.response_time`).
    method : str
        ``"asymptotic"`` or ``"balanced"``.

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> b = asymptotic_bounds(ClosedNetwork([Delay("z", 2.0), Queue("q", 1.0)], population=2))
    >>> b.throughput_lower, b.throughput_upper
    (0.5, 0.6666666666666666)
    >>> b.response_lower, b.response_upper
    (3.0, 4.0)
    """

    population: Any
    throughput_lower: Any
    throughput_upper: Any
    response_lower: Any
    response_upper: Any
    method: str


def _demand_totals(net: ClosedNetwork, method: str) -> tuple[np.ndarray, np.ndarray, float]:
    """Queue demands, their server counts, and the total delay demand ``Z``."""
    if not isinstance(net, ClosedNetwork):
        raise InvalidParameterError("net", net, "a ClosedNetwork")
    if not net.single_class:
        raise InvalidParameterError(
            "net",
            f"a network with classes {list(net.classes)}",
            f"a single-class network ({method} bounds are single-class; use mva(net) for several classes)",
        )
    if net.symbolic:
        raise NotRepresentable(f"{method} bounds need numeric demands; got symbolic demands")
    D = net.demands[:, 0].astype(float)
    delay = net.is_delay
    return D[~delay], net.servers[~delay], float(D[delay].sum())


def _population(net: ClosedNetwork, population: Any) -> tuple[np.ndarray, bool]:
    """Populations as a float array and whether a scalar was asked for."""
    if population is None:
        return np.array([float(net.population)]), True
    if isinstance(population, numbers.Number) or isinstance(population, np.ndarray) and population.ndim == 0:
        return np.array([float(_checks.integer("population", population))]), True
    if isinstance(population, (str, bytes)) or not isinstance(population, Iterable):
        raise InvalidParameterError("population", population, "an int >= 1 or an iterable of ints >= 1")
    pops = np.array([_checks.integer("population", p) for p in population], dtype=float)
    if pops.size == 0:
        raise InvalidParameterError("population", population, "a non-empty iterable of ints >= 1")
    return pops, False


def _wrap(pops: np.ndarray, scalar: bool, lo: np.ndarray, hi: np.ndarray, method: str) -> Bounds:
    r_lo, r_hi = pops / hi, pops / lo
    if scalar:
        return Bounds(int(pops[0]), float(lo[0]), float(hi[0]), float(r_lo[0]), float(r_hi[0]), method)
    return Bounds(pops.astype(int), lo, hi, r_lo, r_hi, method)


def asymptotic_bounds(net: ClosedNetwork, population: int | Iterable[int] | None = None) -> Bounds:
    """Asymptotic bounds (ABA) on throughput and cycle time.

    With ``D`` the total demand at the queues, ``Z`` the total delay demand and
    ``D_max = max_k D_k / c_k`` over the queues (``c_k`` servers):

        N / (N D + Z)  <=  X(N)  <=  min(N / (D + Z), 1 / D_max)

    The lower bound is every customer queueing behind all others at every
    queue; the upper bound is no queueing at all, or the bottleneck saturated.
    Valid for multi-server queues.

    Parameters
    ----------
    net : ClosedNetwork
        A single-class network with numeric demands.
    population : int or iterable of int, optional
        Default ``net.population``. An iterable gives arrays in
        :class:`Bounds`.

    Returns
    -------
    Bounds
        ``method="asymptotic"``; cycle-time bounds are ``N / X_upper`` and
        ``N / X_lower``.

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> net = ClosedNetwork([Delay("think", 4.0), Queue("cpu", 1.0), Queue("disk", 2.0)], population=1)
    >>> b = asymptotic_bounds(net, population=[1, 2, 10])
    >>> b.throughput_upper.tolist()   # min(N/7, 1/2)
    [0.14285714285714285, 0.2857142857142857, 0.5]
    >>> b.throughput_lower.round(4).tolist()   # N/(3N + 4)
    [0.1429, 0.2, 0.2941]
    """
    Dq, c, Z = _demand_totals(net, "asymptotic")
    pops, scalar = _population(net, population)
    D = float(Dq.sum())
    d_max = float((Dq / c).max()) if Dq.size else 0.0
    with np.errstate(divide="ignore"):
        hi = np.minimum(pops / (D + Z), 1.0 / d_max if d_max > 0 else np.inf)
    lo = pops / (pops * D + Z)
    return _wrap(pops, scalar, lo, hi, "asymptotic")


def balanced_bounds(net: ClosedNetwork, population: int | Iterable[int] | None = None) -> Bounds:
    """Balanced job bounds (BJB) on throughput and cycle time.

    With ``K`` single-server queues of total demand ``D``, ``D_avg = D / K``,
    ``D_max`` the largest queue demand and ``Z`` the total delay demand
    (Zahorjan et al. 1982; Lazowska et al. 1984, Table 5.2):

        N / (D + Z + (N-1) D_max / (1 + Z/(N D)))  <=  X(N)
        X(N)  <=  min(1 / D_max, N / (D + Z + (N-1) D_avg / (1 + Z/D)))

    Note the two different denominators: ``1 + Z/D`` in the optimistic bound,
    ``1 + Z/(N D)`` in the pessimistic one. (Using ``Z/(N D)`` in the
    optimistic bound is a known misprint; it is violated, e.g. by the machine
    repairman with ``D = 1, Z = 2, N = 3``.) Without think time both reduce to
    ``N / (D + (N-1) D_avg)`` and ``N / (D + (N-1) D_max)``. Several delays act
    as one with the summed demand.

    Parameters
    ----------
    net : ClosedNetwork
        A single-class network with numeric demands and single-server queues.
    population : int or iterable of int, optional
        Default ``net.population``.

    Returns
    -------
    Bounds
        ``method="balanced"``; at least as tight as :func:`asymptotic_bounds`.

    Raises
    ------
    NotRepresentable
        If a queue has more than one server: BJB are derived for
        single-server queues only; use :func:`asymptotic_bounds`.

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=3)
    >>> b = balanced_bounds(net)    # exact MVA: X = 0.789474
    >>> round(b.throughput_lower, 6), round(b.throughput_upper, 6)
    (0.714286, 0.818182)
    """
    Dq, c, Z = _demand_totals(net, "balanced")
    if np.any(c > 1):
        multi = [st.name for st in net.stations if isinstance(st, Queue) and st.servers > 1]
        raise NotRepresentable(
            f"balanced job bounds are derived for single-server queues; {', '.join(map(repr, multi))} "
            "has several servers: use asymptotic_bounds(net) instead"
        )
    pops, scalar = _population(net, population)
    if Dq.size == 0:  # only delays: X = N / Z exactly
        x = pops / Z
        return _wrap(pops, scalar, x, x.copy(), "balanced")
    D = float(Dq.sum())
    d_max = float(Dq.max())
    d_avg = D / Dq.size
    hi = np.minimum(1.0 / d_max, pops / (D + Z + (pops - 1) * d_avg / (1 + Z / D)))
    lo = pops / (D + Z + (pops - 1) * d_max / (1 + Z / (pops * D)))
    return _wrap(pops, scalar, lo, hi, "balanced")
