"""The catalog's per-tensor backward traces (``.bk.log``): :func:`load_trace` reads one into layers.

The format is that of netx-repo/training-bottleneck with queuesgd's
optional forward-time and name columns (``models/README.md``); a workload
file names its trace (:func:`~queuesgd.catalog.load_workload`), and
:func:`~queuesgd.catalog.save_workload` writes one.
"""

from __future__ import annotations

import os
from decimal import Decimal
from fractions import Fraction

from queuesgd import _checks
from queuesgd.catalog_files import parse_number, read_lines
from queuesgd.errors import InvalidParameterError
from queuesgd.workload import Layer

__all__ = ["EXACT_HEADER", "load_trace", "microseconds"]

_TRACE_COLUMNS = ("gap_us", "bytes", "forward_us", "name")

#: Line 1 of a trace whose times are exact decimals (:func:`microseconds`; ``save_workload`` writes it):
#: :func:`load_trace` reads each time as the decimal's value over ``10**6``, rounded once, which gives back
#: the writer's seconds to the last bit. Other traces keep the older reading ``float(text) / 1e6`` (two
#: roundings: about 4% of times came back one unit in the last place off; issue 22).
EXACT_HEADER = "# queuesgd profile: gap_us,bytes,forward_us,name (backward order; exact decimal microseconds)"


def microseconds(seconds: float) -> str:
    """``seconds`` as a decimal number of microseconds that a trace headed by :data:`EXACT_HEADER` reads
    back to the same float: the shortest decimal of ``seconds`` with its point moved six places.

    Examples
    --------
    >>> microseconds(0.005375578901785), 0.005375578901785 * 1e6 / 1e6 == 0.005375578901785
    ('5375.578901785', False)
    >>> microseconds(None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: seconds: got None; accepted: a finite number >= 0
    """
    value = _checks.positive("seconds", seconds, allow_zero=True)  # a float: 10**400, nan, None refused
    return format(Decimal(repr(value)).scaleb(6), "f")


def _seconds(where: str, text: str, accepted: str, exact: bool) -> float:
    """A trace's microseconds as seconds: exactly rounded from the decimal where ``exact``."""
    value = parse_number(where, text, accepted)
    return float(Fraction(text) / 1_000_000) if exact else value / 1e6


def _column_count(counts: list[int]) -> int:
    """The number of columns most lines have (ties: the fewest), which the other lines must match."""
    tally: dict[int, int] = {}
    for n in counts:
        tally[n] = tally.get(n, 0) + 1
    return max(tally, key=lambda n: (tally[n], -n))


def load_trace(path: str | os.PathLike[str]) -> tuple[Layer, ...]:
    """Parse a per-tensor backward trace (``.bk.log``) into layers in backward order.

    The format (netx-repo/training-bottleneck): line 1 a comment, line 2 the
    number of batches averaged, line 3 the number of gradient tensors ``L``,
    then ``L`` lines ``gap_us,bytes`` in backward order -- microseconds since
    the previous gradient became ready (the first from the start of the
    backward pass) and the tensor's gradient size in bytes (a whole number).

    queuesgd's extension (written by the live harness): optional extra
    columns ``gap_us,bytes,forward_us`` or ``gap_us,bytes,forward_us,name``
    -- the layer's forward time in microseconds and the tensor's name (no
    commas). Every line must have the same number of columns. A named trace
    without forward times leaves ``forward_us`` empty on every line
    (``gap_us,bytes,,name``).

    Parameters
    ----------
    path : str or path-like
        The trace file.

    Returns
    -------
    tuple of Layer
        In backward order, named by the ``name`` column or ``tensor0``,
        ``tensor1``, ... Each gap becomes the layer's ``backward_time``
        (seconds): the backward computation attributable to that tensor.
        ``forward_time`` is ``forward_us / 1e6``, or ``None`` when the trace
        does not record the forward pass (the catalog's traces).

    Raises
    ------
    InvalidParameterError
        Naming the file, line number and field: a missing, negative or
        non-numeric field (an ASCII decimal), a fractional byte count or
        batch count, a line whose column count differs from the
        others', a duplicate name, or a tensor count that does not match
        line 3.

    Examples
    --------
    >>> from pathlib import Path
    >>> from queuesgd.catalog import workload_info
    >>> info = workload_info("vgg16")
    >>> layers = load_trace(Path(info["path"]).parent / info["trace"])
    >>> len(layers), layers[1].name, layers[1].gradient_bytes, round(layers[1].backward_time * 1e6, 3)
    (58, 'tensor1', 16384000.0, 41.877)
    """
    p, lines = read_lines(path)
    if len(lines) < 3:
        raise InvalidParameterError(
            f"{p.name} line {len(lines) + 1}",
            "(end of file)",
            "a comment, the batch count and the tensor count",
        )
    parse_number(f"{p.name} line 2: batches", lines[1].strip(), "an integer >= 1", minimum=1, whole=True)
    exact = lines[0].strip() == EXACT_HEADER
    count_text = lines[2].strip()
    where_count = f"{p.name} line 3: tensor count"
    count = int(parse_number(where_count, count_text, "an integer >= 1", minimum=1, whole=True))
    found = len(lines) - 3
    if found != count:
        raise InvalidParameterError(
            f"{p.name}: tensor count", found, f"{count} gap_us,bytes lines after line 3 (as line 3 says)"
        )
    rows = [[f.strip() for f in line.split(",")] for line in lines[3:]]
    width = _column_count([len(r) for r in rows])
    if not 2 <= width <= len(_TRACE_COLUMNS):
        width = 2  # most lines are malformed: report each against the base format
    columns = _TRACE_COLUMNS[:width]
    accepted = {
        "gap_us": "microseconds >= 0",
        "bytes": "a whole number of bytes > 0",
        "forward_us": "microseconds >= 0",
        "name": "a tensor name (no commas), unique in the trace",
    }
    # A named trace without forward times leaves forward_us empty on every line.
    no_forward = all(len(r) >= 3 and not r[2] for r in rows)
    layers = []
    seen: dict[str, int] = {}
    for i, (line, fields) in enumerate(zip(lines[3:], rows, strict=True)):
        lineno = i + 4
        if len(fields) != width:
            raise InvalidParameterError(
                f"{p.name} line {lineno}",
                line,
                f"{width} comma-separated fields {','.join(columns)} like the other lines "
                "(the format: gap_us,bytes[,forward_us[,name]])",
            )
        where = {c: f"{p.name} line {lineno}: {c}" for c in columns}
        gap = _seconds(where["gap_us"], fields[0], accepted["gap_us"], exact)
        size = parse_number(where["bytes"], fields[1], accepted["bytes"], whole=True)
        if size <= 0:
            raise InvalidParameterError(where["bytes"], fields[1], accepted["bytes"])
        forward = None
        if width >= 3 and not no_forward:
            forward = _seconds(where["forward_us"], fields[2], accepted["forward_us"], exact)
        name = f"tensor{i}"
        if width == 4:
            name = fields[3]
            if not name:
                raise InvalidParameterError(where["name"], name, accepted["name"])
            if name in seen:
                raise InvalidParameterError(
                    where["name"], name, f"a name not already used (line {seen[name]} has it)"
                )
            seen[name] = lineno
        layers.append(Layer(name, size, gap, forward))
    return tuple(layers)
