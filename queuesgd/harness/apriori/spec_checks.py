"""Checks of a campaign spec's links, calibration gap and lines (:mod:`~queuesgd.harness.apriori.spec`).

- :func:`link_rates`: ``rates`` (the campaign's, or a line's) are units-bearing
  strings or ``"loopback"``, within what ``tc tbf`` shapes, each once;
- :func:`calibration_gap`: seconds (or ``"profiled"``) a calibration can wait
  out before each timed operation within its time limit;
- :func:`check_distinct`: no configuration is run twice by two lines;
- :func:`line_runs`: the runs of the lines, in order.

Examples
--------
>>> link_rates("spec.rates", ["1Gbit/s", "loopback"])
(125000000.0, None)
>>> link_rates("spec.rates", [10])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: spec.rates[0]: got 10; accepted: a rate with its unit, e.g. ...
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import NUMBER

__all__ = [
    "LOOPBACK",
    "MAX_CALIBRATION_GAP",
    "MAX_RATE",
    "MIN_RATE",
    "calibration_gap",
    "check_distinct",
    "line_runs",
    "link_rates",
]

#: The rate that means "no emulated link" (gloo over loopback).
LOOPBACK = "loopback"

#: Least link rate of a campaign, bytes/s: 8 kbit/s, the least :class:`~queuesgd.harness.netns.Namespaces`
#: shapes (the runs' links are network namespaces with ``tc tbf``).
MIN_RATE = 1000.0
#: Largest link rate, bytes/s: ``2**60`` (:data:`queuesgd.units.MAX_BYTES` a second), whose bits per second
#: still fit ``tc``'s 64-bit rate.
MAX_RATE = units.MAX_BYTES
#: Longest ``calibration_gap``, seconds: a calibration sleeps it before each of its timed operations (30
#: at the default sizes and repeats, more at DDP's buckets) within its 300 s limit.
MAX_CALIBRATION_GAP = 1.0


def link_rates(field: str, value: Any) -> tuple[float | None, ...]:
    """The link rates of ``value`` in bytes/s (``None``: loopback), each once.

    A bare number (``10``, ``"10"``) is refused rather than read as bytes/s: a
    spec is written once and run for hours, and ``10`` means 10 Gbit/s to most
    readers (the command line warns about a bare ``--bandwidth`` instead).

    Examples
    --------
    >>> link_rates("spec.rates", ["1e-300bit/s"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec.rates[0]: got '1e-300bit/s'; accepted: from 8 kbit/s ...
    """
    if not isinstance(value, list) or not value:
        raise InvalidParameterError(field, value, f"a list of link rates ('1Gbit/s', ...) or '{LOOPBACK}'")
    out: list[float | None] = []
    for i, rate in enumerate(value):
        where = f"{field}[{i}]"
        if rate == LOOPBACK:
            out.append(None)
            continue
        if not isinstance(rate, str) or NUMBER.match(rate):
            raise InvalidParameterError(
                where,
                rate,
                f"a rate with its unit, e.g. '1Gbit/s' or '100Mbit/s' (a bare number would be bytes/s), "
                f"or '{LOOPBACK}'",
            )
        bw = units.parse_bandwidth(rate, where)
        if not MIN_RATE <= bw <= MAX_RATE:
            raise InvalidParameterError(
                where,
                rate,
                "from 8 kbit/s (the least tc tbf shapes here) to 2**60 bytes/s (tc's 64-bit rate)",
            )
        out.append(bw)
    if len(set(out)) != len(out):
        raise InvalidParameterError(field, value, "rates named once each")
    return tuple(out)


def calibration_gap(value: Any) -> float | str:
    """``"profiled"``, or the seconds of ``value`` from 0 to :data:`MAX_CALIBRATION_GAP`.

    Examples
    --------
    >>> calibration_gap("10ms"), calibration_gap("profiled")
    (0.01, 'profiled')
    >>> calibration_gap(1e300)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec.calibration_gap: got 1e+300; accepted: seconds from 0 to 1 ...
    """
    if value == "profiled":
        return value
    field = "spec.calibration_gap"
    seconds = _checks.positive(field, units.parse_seconds(value, field), allow_zero=True)
    if seconds > MAX_CALIBRATION_GAP:
        raise InvalidParameterError(
            field,
            value,
            f"seconds from 0 to {MAX_CALIBRATION_GAP:g} (a calibration sleeps the gap before each of its "
            "timed operations, within its 300 s limit), or 'profiled'",
        )
    return seconds


def check_distinct(lines: Iterable[Any], rates: tuple[float | None, ...]) -> None:
    """Refuse two lines that run the same configuration (scheme, model, parameters, workers, link, delays).

    ``lines`` are :class:`~queuesgd.harness.apriori.spec.Line` objects, in the
    spec's order, enumerated by :func:`line_runs` (as
    :meth:`~queuesgd.harness.apriori.spec.CampaignSpec.configurations` is);
    ``rates`` are the campaign's, for a line that names none.
    """
    seen: dict[tuple, int] = {}
    for i, line, model, params, n, rate in line_runs(lines, rates):
        tag = json.dumps(params, sort_keys=True, default=str)
        key = (line.scheme, model, tag, n, rate, line.random_delay[model])
        first = seen.setdefault(key, i)
        if first != i:
            where = "loopback" if rate is None else units.format_bandwidth(rate)
            raise InvalidParameterError(
                f"spec.lines[{i}]",
                f"{line.scheme} {model} n={n} at {where}",
                f"a configuration that no other line runs (spec.lines[{first}] runs it): each "
                "is run once per pass",
            )


def line_runs(lines: Iterable[Any], rates: tuple[float | None, ...]) -> Iterator[tuple]:
    """``(line index, line, model, params, n, rate)`` of every run, line by line, model by model.

    One worker runs once, on loopback (``rate`` None); ``n > 1`` workers at each
    of the line's rates (``rates``, the campaign's, where the line gives none);
    ``params`` are the line's with the model's own over them.
    """
    for i, line in enumerate(lines):
        for model in line.models:
            params = {**line.params, **line.model_params.get(model, {})}
            for n in line.workers:
                for rate in (None,) if n == 1 else (line.rates or rates):
                    yield i, line, model, params, n, rate
