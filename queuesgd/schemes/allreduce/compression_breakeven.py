"""Where gradient compression stops paying: the breakeven bandwidth, closed form and fine model.

- :func:`compression_breakeven` -- ``T(B) = T_0(B)`` solved exactly for
  the closed form (one message, no overlap);
- :func:`fine_breakeven` -- the same crossing in the fine task graphs
  (overlap, fusion), by bisection.

Both compare :class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce`
with the plain :class:`~queuesgd.RingAllReduce` (see
:mod:`queuesgd.schemes.allreduce.compression`); the symbolic twin is
:func:`~queuesgd.schemes.allreduce.compression_formula.breakeven_formula`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.dag import schedule
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.schemes.allreduce.compressed_allreduce import CompressedAllReduce
from queuesgd.schemes.allreduce.compression_costs import closed_wire, collective_terms
from queuesgd.schemes.fine.finegrained import FineGrained

if TYPE_CHECKING:
    from queuesgd.workload import Cluster, Workload

__all__ = ["compression_breakeven", "fine_breakeven"]


def _plain(scheme: CompressedAllReduce) -> Any:
    from queuesgd.schemes.allreduce.allreduce import RingAllReduce

    fine = {f: getattr(scheme, f) for f in FineGrained.FINE_PARAMETERS}
    return RingAllReduce(**fine)


def _check_scheme(scheme: Any) -> CompressedAllReduce:
    if not isinstance(scheme, CompressedAllReduce):
        raise InvalidParameterError("scheme", scheme, "a CompressedAllReduce")
    return scheme


def compression_breakeven(workload: Workload, cluster: Cluster, scheme: CompressedAllReduce) -> float:
    """The bandwidth (bytes/s) above which compression stops paying, closed form (no overlap, one message).

    Solves ``T(B) = T_0(B)`` exactly, with ``T`` the closed form of
    ``scheme`` and ``T_0`` that of :class:`~queuesgd.RingAllReduce`:
    ``extra + L_c + V_c / B = L_0 + V_0 / B`` with ``extra`` the compression
    and decompression seconds, ``V`` the bytes each link carries
    (``V_0 = 2 (n-1)/n S``) and ``L`` the latency terms
    (``L_0 = 2 (n-1) alpha``)::

        B* = (V_0 - V_c) / (extra + L_c - L_0)

    Compression pays for ``B < B*``. ``cluster.bandwidth`` is not read.

    Returns
    -------
    float
        ``B*``; ``math.inf`` when compression pays at every bandwidth (no
        positive cost: zero compression costs and no extra latency); ``0.0``
        when it pays at none (it sends no fewer bytes, or one worker).

    Raises
    ------
    NotRepresentable
        When compression pays only *above* a bandwidth (top-k with ``d >=
        1/n`` sends more bytes than the ring but has ``n - 1`` fewer latency
        steps): the message gives that bandwidth.

    Examples
    --------
    >>> from queuesgd import Workload, Cluster
    >>> s = CompressedAllReduce("fp16", compress_time="1ns", decompress_time="0.5ns")
    >>> compression_breakeven(Workload(0.05, "8MB"), Cluster(2, "1GB/s"), s)  # 4e6 B / 12 ms
    333333333.3333333
    >>> compression_breakeven(Workload(0.05, "8MB"), Cluster(2, "1GB/s"), CompressedAllReduce("fp16"))
    inf
    """
    scheme = _check_scheme(scheme)
    n, alpha = cluster.workers, cluster.latency
    size = workload.gradient_bytes
    extra = float(scheme.compress_cost(size) + scheme.decompress_cost(size, n))
    volume, lat = collective_terms(scheme, n, alpha, *closed_wire(scheme, workload), False)
    ring = 2 * (n - 1) / n * size
    gain = ring - volume
    if abs(gain) <= 1e-12 * ring:
        # a tie within rounding (top-k at d = 1/n: the two volumes, computed apart, differ by about
        # 3e-8 of 1e8 bytes, either way, which turned 0.0 into a tiny B* and inf into a refusal)
        gain = 0.0
    cost = extra + lat - 2 * (n - 1) * alpha
    if gain > 0:
        return math.inf if cost <= 0 else gain / cost
    if cost >= 0:
        return 0.0
    if gain == 0:
        return math.inf
    raise NotRepresentable(
        f"{scheme.compressor} compression sends {-gain:.6g} more bytes per link than the ring all-reduce but "
        f"saves {-cost:.6g} s of latency: it pays only above {gain / cost:.6g} B/s, not below"
    )


def _fine_makespans(scheme: Any, workload: Workload, cluster: Cluster, bandwidths: np.ndarray) -> np.ndarray:
    """The fine model's iteration time at each bandwidth (one batched longest-path evaluation)."""
    model = scheme.fine_model(workload, cluster)
    if not model.graph.is_deterministic:
        raise NotRepresentable(
            "fine_breakeven needs a deterministic task graph (deterministic compute, identical workers): "
            "with random compute the fine model is a Monte Carlo estimate"
        )
    rows = np.tile(model.graph.mean_durations, (bandwidths.size, 1))
    comm = list(model.comm_tasks)
    for i, bw in enumerate(bandwidths):
        c = dataclasses.replace(cluster, bandwidth=float(bw))
        if isinstance(scheme, CompressedAllReduce):
            rows[i, comm] = scheme.message_costs_of(workload, c, model.buckets)
        else:
            rows[i, comm] = scheme.message_costs(workload, c, np.array([b.nbytes for b in model.buckets]))
    return np.asarray(schedule(model.graph, rows, critical_path=False).makespan, dtype=float)


def fine_breakeven(
    workload: Workload,
    cluster: Cluster,
    scheme: CompressedAllReduce,
    *,
    lower: float | str = "1Mbit/s",
    upper: float | str = "10Tbit/s",
    points: int = 64,
    rtol: float = 1e-9,
) -> float:
    """The bandwidth above which compression stops paying in the fine model (overlap, fusion): bisection.

    Compares the fine task graphs of ``scheme`` and of the plain
    :class:`~queuesgd.RingAllReduce` with the same fine-grained parameters
    (both deterministic, solved exactly by longest path) on a log grid of
    ``points`` bandwidths from ``lower`` to ``upper``, then bisects (in log
    bandwidth) the step of the highest bandwidth where compression stops
    paying, to a relative width ``rtol``. Exact up to ``rtol`` for the fine
    model; crossings closer together than one grid step are not resolved.

    Returns
    -------
    float
        The breakeven bandwidth, bytes/s; ``math.inf`` if compression pays at
        every grid bandwidth, ``0.0`` if it pays at none.

    Raises
    ------
    NotRepresentable
        A random task graph, or compression that pays again at ``upper``
        after not paying below it.

    Examples
    --------
    >>> from queuesgd import Workload, Layer, Cluster
    >>> w = Workload(0.05, None, layers=[Layer("b", 4e6, "10ms"), Layer("a", 4e6, "20ms")])
    >>> s = CompressedAllReduce("fp16", compress_time="1ns", decompress_time="0.5ns",
    ...                         fusion_bytes=None, fusion_time=None)
    >>> round(fine_breakeven(w, Cluster(2, "1GB/s"), s) / 1e8, 6)   # 2e6 B fp16 message at 10 ms
    2.0
    """
    scheme = _check_scheme(scheme)
    lo = _checks.positive("lower", units.parse_bandwidth(lower, "lower"))
    hi = _checks.positive("upper", units.parse_bandwidth(upper, "upper"))
    if hi <= lo:
        raise InvalidParameterError("upper", upper, f"a bandwidth above lower ({lo:g} B/s)")
    points = _checks.integer("points", points, minimum=2)
    rtol = _checks.positive("rtol", rtol)
    plain = _plain(scheme)

    def diff(bws: np.ndarray) -> np.ndarray:
        return _fine_makespans(scheme, workload, cluster, bws) - _fine_makespans(
            plain, workload, cluster, bws
        )

    grid = np.geomspace(lo, hi, points)
    pays = diff(grid) < 0
    if pays.all():
        return math.inf
    if not pays.any():
        return 0.0
    if pays[-1]:
        raise NotRepresentable(
            f"{scheme.compressor} compression pays again at {hi:g} B/s after not paying below it: "
            "no single breakeven"
        )
    i = int(np.flatnonzero(pays)[-1])
    a, b = math.log(grid[i]), math.log(grid[i + 1])
    while b - a > rtol:
        mid = 0.5 * (a + b)
        if diff(np.array([math.exp(mid)]))[0] < 0:
            a = mid
        else:
            b = mid
    return math.exp(0.5 * (a + b))
