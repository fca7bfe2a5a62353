"""Measured collective efficiency: nccl-tests-style tables of bus bandwidth against message size.

nccl-tests (NVIDIA, ``doc/PERFORMANCE.md``) reports, for each message size
``S`` of a collective on ``g`` ranks, the time ``t``, the *algorithm
bandwidth* ``algbw = S / t`` and the *bus bandwidth* ``busbw = algbw x F``,
where the bus factor ``F`` (:func:`bus_factor`) makes the number comparable
with the hardware's link speed whatever ``g`` and the operation:

| operation | ``F`` | why |
|---|---|---|
| all-reduce | ``2 (g-1) / g`` | each rank sends and receives ``2 (g-1)/g S`` |
| reduce-scatter | ``(g-1) / g`` | ``S`` is the whole (input) buffer |
| all-gather | ``(g-1) / g`` | ``S`` is the whole (output) buffer |
| all-to-all | ``(g-1) / g`` | each rank keeps ``S / g`` of its own |
| broadcast | ``1`` | the root's ``S`` crosses every link once |

A :class:`BusBandwidth` table turns the measurement back into a time:
``t = F S / busbw(S)``, with ``busbw`` interpolated linearly in
``log2(S)`` between the measured sizes and held constant beyond them.
Small messages reach a small fraction of the link speed (their time is the
latency), large ones approach it: that is the *collective efficiency* the
alpha-beta model does not have. :class:`CollectiveTables` holds tables for
groups inside one node and across nodes, optionally for several group
sizes; a :class:`~queuesgd.Cluster` carries one (``collectives=``) and
:func:`~queuesgd.schemes.parallel.collectives.collective_time` uses it.
:func:`read_nccl_tests` reads a table from nccl-tests' own output;
:mod:`queuesgd.busbw_probe` measures one on the machine at hand.

Examples
--------
>>> t = BusBandwidth([(1e6, 50e9), (1e9, 200e9)], ranks=8)
>>> t.busbw(1e9), round(float(t.busbw(31.6227766e6)), -6)    # halfway in log2 size: 125 GB/s
(200000000000.0, 125000000000.0)
>>> round(t.time("allreduce", 1e9), 6)                      # 2 x 7/8 x 1 GB / 200 GB/s
0.00875
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError

__all__ = [
    "LEVELS",
    "MIN_BANDWIDTH",
    "NCCL_TESTS",
    "OPERATIONS",
    "BusBandwidth",
    "CollectiveTables",
    "bandwidth_value",
    "bus_factor",
    "read_nccl_tests",
]

#: The collectives modelled, by the names :func:`bus_factor` and the collective functions take.
OPERATIONS: tuple[str, ...] = ("allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast")
#: Where a group of ranks sits: all inside one node, or spread over several nodes.
LEVELS: tuple[str, ...] = ("intra", "inter")
#: Most rows a table holds (nccl-tests sweeps sizes by factors of 2: about 40 rows from 8 B to 8 GB).
MAX_ROWS = 10_000
#: nccl-tests' programs of the operations modelled, to the names of :data:`OPERATIONS`.
NCCL_TESTS: dict[str, str] = {
    "all_reduce_perf": "allreduce",
    "reduce_scatter_perf": "reduce_scatter",
    "all_gather_perf": "allgather",
    "alltoall_perf": "alltoall",
    "broadcast_perf": "broadcast",
}
#: nccl-tests' other programs: output that names one of them is refused (no operation modelled matches).
_OTHER_TESTS = ("reduce_perf", "sendrecv_perf", "scatter_perf", "gather_perf", "hypercube_perf")
#: Longest text :func:`read_nccl_tests` reads, in characters (a full sweep with NCCL_DEBUG=INFO is ~1 MB).
MAX_NCCL_TESTS_CHARS = 16 * 2**20
#: Smallest bandwidth accepted, bytes/s (1 bit/s): below it, transfer times of real sizes overflow. A
#: :class:`~queuesgd.Cluster`'s links and a table's rows share it (also ``queuesgd.cluster.MIN_BANDWIDTH``).
MIN_BANDWIDTH = 0.125


def bandwidth_value(field: str, value: Any, *, example: str = "'10Gbit/s'") -> float:
    """Bytes/s of ``value`` (a number of bytes/s or a unit string), at least :data:`MIN_BANDWIDTH` (1 bit/s).

    Examples
    --------
    >>> bandwidth_value("bandwidth", "10Gbit/s"), bandwidth_value("bandwidth", "1bit/s")
    (1250000000.0, 0.125)
    >>> bandwidth_value("busbw", 1e-300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: busbw: got 1e-300; accepted: at least 1 bit/s (0.125 bytes/s), ...
    """
    bw = units.parse_bandwidth(value, field)
    if bw < MIN_BANDWIDTH:
        raise InvalidParameterError(
            field, value, f"at least 1 bit/s (0.125 bytes/s), e.g. {example}; a plain number is bytes/s"
        )
    return bw


def _sizes(field: str, value: Any) -> Any:
    """Bytes of ``value``: one size as :func:`queuesgd._checks.size` takes it (``"1MB"`` too), or an array."""
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        return _checks.size(field, value)
    arr = _checks.reals(
        field, value, accepted="sizes in bytes: a number, a string such as '1MB', or an array"
    )
    flat = arr.ravel()
    with np.errstate(invalid="ignore"):
        suspect = np.flatnonzero(~(np.isfinite(flat) & (flat >= 0) & (flat <= units.MAX_BYTES)))
    for i in suspect.tolist():
        _checks.size(f"{field}[{i}]", flat[i].item())  # the one rule for a size decides, and says why
    return arr


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
        bw = bandwidth_value(f"{field}[{i}].busbw", row[1], example="'200GB/s'")
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
        """Bus bandwidth at ``size`` bytes: linear in ``log2(size)`` between rows, constant beyond them.

        ``size`` is a number of bytes ``>= 0``, a unit string, or an array of numbers.

        Examples
        --------
        >>> t = BusBandwidth([("1MB", "50GB/s"), ("4MB", "150GB/s")])
        >>> t.busbw("2MB"), t.busbw(0), t.busbw([1e6, 4e9]).tolist()    # halfway, then held at both ends
        (100000000000.0, 50000000000.0, [50000000000.0, 150000000000.0])
        """
        sizes = _sizes("size", size)
        s = np.log2(np.maximum(sizes, 1e-300))
        out = np.interp(s, np.log2(self.sizes), self.busbws)
        return float(out) if np.ndim(out) == 0 else out

    def time(self, operation: str, size: Any, ranks: int | None = None) -> Any:
        """Seconds of ``operation`` on ``size`` bytes: ``F(g) size / busbw(size)`` (``g``: ``ranks``).

        ``size`` as :meth:`busbw` takes it; ``ranks`` an integer ``>= 1`` (one rank moves nothing), by
        default the table's own.

        Examples
        --------
        >>> BusBandwidth([(1e6, 1e9)], ranks=4).time("allgather", 4e6)     # 3/4 x 4 MB / 1 GB/s
        0.003
        >>> BusBandwidth([(1e6, 1e9)], ranks=4).time("allgather", "4MB", ranks=2)   # 1/2 x 4 MB / 1 GB/s
        0.002
        """
        g = self.ranks if ranks is None else _checks.integer("ranks", ranks, maximum=_checks.MAX_COUNT)
        if g is None:
            raise InvalidParameterError("ranks", None, "the group size (this table was given none)")
        sizes = _sizes("size", size)
        out = bus_factor(operation, g) * sizes / self.busbw(sizes)
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
        """The table for a group of ``ranks`` at ``level`` (``"intra"`` or ``"inter"``), or None.

        ``ranks`` is an integer ``>= 1``.

        Examples
        --------
        >>> CollectiveTables(inter=BusBandwidth([(1e9, 40e9)], ranks=16)).table("inter", 4).ranks
        16
        """
        found = getattr(self, _checks.choice("level", level, LEVELS))
        g = float(_checks.integer("ranks", ranks, maximum=_checks.MAX_COUNT))
        if not found:
            return None

        def distance(t: BusBandwidth) -> tuple[float, float]:
            r = float(t.ranks or ranks)
            return abs(np.log2(r) - np.log2(g)), -r

        return min(found, key=distance)


_NCCL_ACCEPTED = (
    "the output of one nccl-tests run (e.g. all_reduce_perf -b 8 -e 8G -f 2 -g 8): its header "
    "'# nThread 1 nGpus 8 ...', and its table '#  size  count  type  redop  root  time  algbw  busbw  "
    "#wrong ...' with at least one row, on at least 2 ranks"
)


def _named_operation(text: str, operation: str | None) -> str | None:
    """The operation ``text`` is the output of (by the program it names), checked against ``operation``."""
    found = set(re.findall(r"\b(" + "|".join(list(NCCL_TESTS) + list(_OTHER_TESTS)) + r")\b", text))
    if len(found) > 1:
        raise InvalidParameterError("text", f"it names {', '.join(sorted(found))}", _NCCL_ACCEPTED)
    if not found:
        return operation
    (program,) = found
    if program not in NCCL_TESTS:
        raise InvalidParameterError(
            "text", f"{program}'s output", f"{_NCCL_ACCEPTED}, of one of {', '.join(NCCL_TESTS)}"
        )
    if operation is not None and NCCL_TESTS[program] != operation:
        raise InvalidParameterError(
            "operation", operation, f"{NCCL_TESTS[program]!r} (the text is {program}'s)"
        )
    return NCCL_TESTS[program]


def _number(line: int, token: str) -> float:
    try:
        value = float(token)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value < 0:
        raise InvalidParameterError("text", f"line {line}: {token!r}", f"{_NCCL_ACCEPTED} (numbers >= 0)")
    return value


def read_nccl_tests(text: str, *, operation: str | None = None) -> BusBandwidth:
    """A :class:`BusBandwidth` table from the printed output of one nccl-tests run.

    Reads, for each message size, the **out-of-place** ``busbw`` column
    (GB/s of 1e9 bytes; the in-place columns are ignored), and the group
    size from the header: the number of ``#  Rank N ...`` lines under ``#
    Using devices`` (every rank of every process), or ``nThread x nGpus``
    where there are none. Columns are found by their names in the table's
    header line (``size``, ``time``, ``busbw``, ``#wrong``), so older
    layouts (without ``root``, with ``error``) read too; lines that are not
    rows of the table (NCCL's ``INFO`` lines, the launcher's) are skipped.

    Rows printed with ``busbw`` 0.00 (below nccl-tests' resolution of 0.01
    GB/s: small messages) are derived from their out-of-place time,
    ``F(g) size / time``, where the operation is known (``operation``, or
    the program the text names, e.g. ``all_reduce_perf``); otherwise they
    are left out.

    Parameters
    ----------
    text : str
        nccl-tests' output: ``all_reduce_perf -b 8 -e 8G -f 2 -g 8``'s, say.
    operation : str or None
        One of :data:`OPERATIONS`; checked against the program the text
        names, if it names one.

    Returns
    -------
    BusBandwidth
        With ``ranks`` the run's group size.

    Raises
    ------
    InvalidParameterError
        ``text`` without the header or the table, with two runs, a run on
        one rank, sizes not increasing, a row with wrong results (``#wrong``
        above 0), or a program other than those of :data:`NCCL_TESTS`;
        ``operation`` other than the one the text names.

    Examples
    --------
    >>> log = "\\n".join([
    ...     "# nThread 1 nGpus 2 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20",
    ...     "#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong",
    ...     "#   (B) (elements)                (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)",
    ...     "   1024    256  float  sum  -1   20.00   0.05   0.05   0   19.0  0.05  0.05  0",
    ...     "   2048    512  float  sum  -1   25.00   0.08   0.08   0   24.0  0.09  0.09  0",
    ... ])
    >>> t = read_nccl_tests(log)
    >>> t.ranks, t.sizes, t.busbws
    (2, (1024.0, 2048.0), (50000000.0, 80000000.0))
    """
    if not isinstance(text, str):
        raise InvalidParameterError("text", type(text).__name__, f"a str: {_NCCL_ACCEPTED}")
    if len(text) > MAX_NCCL_TESTS_CHARS:
        raise InvalidParameterError(
            "text",
            f"{len(text):,} characters",
            f"{_NCCL_ACCEPTED}, at most {MAX_NCCL_TESTS_CHARS:,} characters",
        )
    op = None if operation is None else _checks.choice("operation", operation, OPERATIONS)
    op = _named_operation(text, op)
    lines = text.splitlines()
    heads = [re.match(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\b", ln.strip()) for ln in lines]
    found = [m for m in heads if m]
    tables = [i for i, ln in enumerate(lines) if _columns(ln)[:1] == ["size"] and "busbw" in _columns(ln)]
    if len(found) != 1 or len(tables) != 1:
        what = f"{len(found)} '# nThread N nGpus N' headers and {len(tables)} tables"
        raise InvalidParameterError("text", what, f"{_NCCL_ACCEPTED} (one of each)")
    ranks = {int(m.group(1)) for ln in lines if (m := re.match(r"#\s*Rank\s+(\d+)\b", ln.strip()))}
    g = len(ranks) if ranks else int(found[0].group(1)) * int(found[0].group(2))
    if g < 2:
        raise InvalidParameterError(
            "text", f"a run on {g} rank", f"{_NCCL_ACCEPTED} (no bus to measure on one)"
        )
    cols = _columns(lines[tables[0]])
    if "time" not in cols:  # "busbw" is there: it found the table
        raise InvalidParameterError(
            "text", "a table without its 'time' column", f"{_NCCL_ACCEPTED} (with 'time')"
        )
    at_time, at_bus = cols.index("time"), cols.index("busbw")
    at_wrong = cols.index("#wrong") if "#wrong" in cols else None
    scale = 1e-3 if "(ms)" in " ".join(lines[tables[0] + 1 : tables[0] + 2]) else 1e-6
    rows: list[tuple[float, float]] = []
    for n, line in enumerate(lines[tables[0] + 1 :], start=tables[0] + 2):
        tokens = line.split()
        if len(tokens) != len(cols) or not tokens[0].isdigit():
            continue  # a units line, a summary, NCCL's or the launcher's lines
        size, seconds = _number(n, tokens[0]), _number(n, tokens[at_time]) * scale
        if at_wrong is not None and tokens[at_wrong] not in ("0", "N/A"):
            raise InvalidParameterError(
                "text", f"line {n}: #wrong {tokens[at_wrong]}", f"{_NCCL_ACCEPTED} (all 0)"
            )
        if rows and size <= rows[-1][0]:
            raise InvalidParameterError(
                "text", f"line {n}: size {tokens[0]}", f"{_NCCL_ACCEPTED} (sizes rising)"
            )
        bw = _number(n, tokens[at_bus]) * 1e9
        if bw == 0 and op is not None and seconds > 0:
            bw = bus_factor(op, g) * size / seconds  # printed 0.00: below the column's resolution
        if bw > 0 and size > 0:
            rows.append((size, bw))
        if len(rows) > MAX_ROWS:
            raise InvalidParameterError("text", f"more than {MAX_ROWS:,} rows", _NCCL_ACCEPTED)
    if not rows:
        raise InvalidParameterError("text", "no row with a bus bandwidth above 0", _NCCL_ACCEPTED)
    return BusBandwidth(rows, ranks=g)


def _columns(line: str) -> list[str]:
    """The names of a table header line (``#  size  count ...``), or [] for any other line."""
    stripped = line.strip()
    if not stripped.startswith("#"):
        return []
    return stripped[1:].split()
