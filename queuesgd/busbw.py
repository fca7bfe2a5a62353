"""Measured collective efficiency: nccl-tests-style tables of bus bandwidth against message size.

nccl-tests (NVIDIA, ``doc/PERFORMANCE.md``) reports, for each message size
``S`` of a collective on ``g`` ranks, the time ``t``, the *algorithm
bandwidth* ``algbw = S / t`` and the *bus bandwidth* ``busbw = algbw x F``,
where the bus factor ``F`` (:func:`bus_factor`) makes the number comparable
with the hardware's link speed whatever ``g`` and the operation:

======================  ===============  ==========================================
operation               ``F``            why
======================  ===============  ==========================================
all-reduce              ``2 (g-1) / g``  each rank sends and receives ``2 (g-1)/g S``
reduce-scatter          ``(g-1) / g``    ``S`` is the whole (input) buffer
all-gather              ``(g-1) / g``    ``S`` is the whole (output) buffer
all-to-all              ``(g-1) / g``    each rank keeps ``S / g`` of its own
broadcast               ``1``            the root's ``S`` crosses every link once
======================  ===============  ==========================================

A :class:`BusBandwidth` table turns the measurement back into a time:
``t = F S / busbw(S)``, with ``busbw`` interpolated linearly in
``log2(S)`` between the measured sizes and held constant beyond them.
Small messages reach a small fraction of the link speed (their time is the
latency), large ones approach it: that is the *collective efficiency* the
alpha-beta model does not have. :class:`CollectiveTables` holds tables for
groups inside one node and across nodes, optionally for several group
sizes; a :class:`~queuesgd.Cluster` carries one (``collectives=``) and
:func:`~queuesgd.schemes.parallel.collectives.collective_time` uses it.

Examples
--------
>>> t = BusBandwidth([(1e6, 50e9), (1e9, 200e9)], ranks=8)
>>> t.busbw(1e9), round(float(t.busbw(31.6227766e6)), -6)    # halfway in log2 size: 125 GB/s
(200000000000.0, 125000000000.0)
>>> round(t.time("allreduce", 1e9), 6)                      # 2 x 7/8 x 1 GB / 200 GB/s
0.00875
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError

__all__ = ["LEVELS", "OPERATIONS", "BusBandwidth", "CollectiveTables", "bus_factor"]

#: The collectives modelled, by the names :func:`bus_factor` and the collective functions take.
OPERATIONS: tuple[str, ...] = ("allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast")
#: Where a group of ranks sits: all inside one node, or spread over several nodes.
LEVELS: tuple[str, ...] = ("intra", "inter")
#: Most rows a table holds (nccl-tests sweeps sizes by factors of 2: about 40 rows from 8 B to 8 GB).
MAX_ROWS = 10_000


def bus_factor(operation: str, ranks: Any) -> Any:
    """nccl-tests' bus factor ``F`` of ``operation`` on ``ranks`` ranks: ``busbw = algbw x F``.

    ``2(g-1)/g`` for all-reduce, ``(g-1)/g`` for reduce-scatter, all-gather
    and all-to-all, ``1`` for broadcast (nccl-tests, ``doc/PERFORMANCE.md``).
    Vectorized over ``ranks``; one rank moves nothing (``F = 0``).

    Examples
    --------
    >>> bus_factor("allreduce", 8), bus_factor("allgather", 4), bus_factor("broadcast", 16)
    (1.75, 0.75, 1.0)
    """
    op = _checks.choice("operation", operation, OPERATIONS)
    g = np.asarray(ranks, dtype=float)
    if op == "allreduce":
        out = 2 * (g - 1) / g
    elif op == "broadcast":
        out = np.where(g > 1, 1.0, 0.0)
    else:
        out = (g - 1) / g
    return float(out) if np.ndim(out) == 0 else out


def _rows(field: str, rows: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    accepted = (
        "a sequence of (size, busbw) pairs, sizes increasing, e.g. [('1MB', '50GB/s'), ('1GB', '200GB/s')] "
        "(a number of bytes and of bytes/s, or unit strings)"
    )
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise InvalidParameterError(field, rows, accepted)
    sizes: list[float] = []
    bws: list[float] = []
    for i, row in enumerate(rows):
        if i == MAX_ROWS:
            raise InvalidParameterError(
                field, f"more than {MAX_ROWS:,} rows", f"{accepted}; at most {MAX_ROWS:,}"
            )
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != 2:
            raise InvalidParameterError(f"{field}[{i}]", row, "a (size, busbw) pair")
        size = _checks.size(f"{field}[{i}].size", row[0], allow_zero=False)
        bw = _checks.positive(f"{field}[{i}].busbw", units.parse_bandwidth(row[1], f"{field}[{i}].busbw"))
        if sizes and size <= sizes[-1]:
            raise InvalidParameterError(
                f"{field}[{i}].size", row[0], f"a size above the previous row's {sizes[-1]:g} B"
            )
        sizes.append(size)
        bws.append(bw)
    if not sizes:
        raise InvalidParameterError(field, rows, f"{accepted} (at least one row)")
    return tuple(sizes), tuple(bws)


@dataclass(frozen=True, init=False)
class BusBandwidth:
    """One nccl-tests measurement: message size (bytes) to bus bandwidth (bytes/s), on ``ranks`` ranks.

    Parameters
    ----------
    rows : sequence of (size, busbw)
        Sizes increasing; numbers (bytes, bytes/s) or unit strings
        (``("1MB", "50GB/s")``). nccl-tests prints GB/s of 1e9 bytes.
    ranks : int or None
        The group size it was measured on (tables for several sizes are told
        apart by it; ``None``: any).

    Attributes
    ----------
    sizes, busbws : tuple of float
        The rows, in bytes and bytes/s.

    Examples
    --------
    >>> BusBandwidth([("1MB", "40GB/s")]).busbw(123.0)     # one row: the same at every size
    40000000000.0
    """

    sizes: tuple[float, ...]
    busbws: tuple[float, ...]
    ranks: int | None

    def __init__(self, rows: Any, ranks: int | None = None) -> None:
        sizes, bws = _rows("BusBandwidth.rows", rows)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "busbws", bws)
        g = (
            None
            if ranks is None
            else _checks.integer("BusBandwidth.ranks", ranks, minimum=2, maximum=_checks.MAX_COUNT)
        )
        object.__setattr__(self, "ranks", g)

    def busbw(self, size: Any) -> Any:
        """Bus bandwidth at ``size`` bytes: linear in ``log2(size)`` between rows, constant beyond them."""
        s = np.log2(np.maximum(np.asarray(size, dtype=float), 1e-300))
        out = np.interp(s, np.log2(self.sizes), self.busbws)
        return float(out) if np.ndim(out) == 0 else out

    def time(self, operation: str, size: Any, ranks: int | None = None) -> Any:
        """Seconds of ``operation`` on ``size`` bytes: ``F(g) size / busbw(size)`` (``g``: ``ranks``).

        Examples
        --------
        >>> BusBandwidth([(1e6, 1e9)], ranks=4).time("allgather", 4e6)     # 3/4 x 4 MB / 1 GB/s
        0.003
        """
        g = self.ranks if ranks is None else ranks
        if g is None:
            raise InvalidParameterError("ranks", None, "the group size (this table was given none)")
        out = bus_factor(operation, g) * np.asarray(size, dtype=float) / self.busbw(size)
        return float(out) if np.ndim(out) == 0 else out


def _tables(field: str, value: Any) -> tuple[BusBandwidth, ...]:
    if value is None:
        return ()
    if isinstance(value, BusBandwidth):
        return (value,)
    accepted = "a BusBandwidth, a sequence of them (one per group size), or None"
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidParameterError(field, value, accepted)
    out = tuple(value)
    if not out or not all(isinstance(t, BusBandwidth) for t in out):
        raise InvalidParameterError(field, value, accepted)
    if len(out) > 1 and any(t.ranks is None for t in out):
        raise InvalidParameterError(field, value, "tables each with its ranks= when there are several")
    if len({t.ranks for t in out}) != len(out):
        raise InvalidParameterError(field, value, "one table per group size (ranks given twice)")
    return out


@dataclass(frozen=True)
class CollectiveTables:
    """Bus-bandwidth tables of a cluster: for groups inside one node and for groups across nodes.

    A group's table is the one of its level measured on the group size
    nearest its own in ``log2`` (ties: the larger); a level without tables
    falls back to the alpha-beta model.

    Parameters
    ----------
    intra, inter : BusBandwidth, sequence of BusBandwidth, or None

    Examples
    --------
    >>> inter = [BusBandwidth([(1e9, 40e9)], ranks=16), BusBandwidth([(1e9, 30e9)], ranks=128)]
    >>> ct = CollectiveTables(intra=BusBandwidth([(1e9, 360e9)], ranks=8), inter=inter)
    >>> ct.table("inter", 64).ranks, ct.table("inter", 20).ranks, ct.table("intra", 2).ranks
    (128, 16, 8)
    """

    intra: Any = None
    inter: Any = None

    def __post_init__(self) -> None:
        for level in LEVELS:
            object.__setattr__(self, level, _tables(f"CollectiveTables.{level}", getattr(self, level)))

    def table(self, level: str, ranks: int) -> BusBandwidth | None:
        """The table for a group of ``ranks`` at ``level`` (``"intra"`` or ``"inter"``), or None."""
        found = getattr(self, _checks.choice("level", level, LEVELS))
        if not found:
            return None
        g = float(ranks)

        def distance(t: BusBandwidth) -> tuple[float, float]:
            r = float(t.ranks or ranks)
            return abs(np.log2(r) - np.log2(g)), -r

        return min(found, key=distance)
