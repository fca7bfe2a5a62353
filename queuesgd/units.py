"""Quantities with units, parsed once at the edges into SI floats.

Inside queuesgd every size is in bytes, every duration in seconds and every
bandwidth in bytes per second. Constructors, the CLI and catalog files accept
strings such as ``"25MB"``, ``"50us"`` or ``"10Gbit/s"`` and turn them into
those floats with the functions here.

Conventions:

- SI prefixes ``k``/``K`` = 1e3, ``M`` = 1e6, ``G`` = 1e9, ``T`` = 1e12,
  ``P`` = 1e15; binary prefixes ``Ki``, ``Mi``, ``Gi``, ``Ti``, ``Pi`` = ``1024**n``.
  Prefix letters are case-insensitive (``"gbit"`` is a gigabit).
- ``B`` (or ``byte``) is a byte; ``b`` (or ``bit``) is a bit, worth 1/8 byte.
  The case of ``B``/``b`` matters: ``"800Mb/s"`` is 100 MB/s.
- Bandwidths are a size per time (``"GB/s"``, ``"Gbit/s"``, ``"MiB/ms"``) or
  the ``ps`` forms (``"Gbps"`` = gigabit/s, ``"GBps"`` = gigabyte/s).
- Plain numbers (and strings without a unit) are taken as already in SI base
  units. Negative, NaN and infinite values are refused, and so are numbers
  too large for a float (``10**400``) and sizes above :data:`MAX_BYTES`
  (1 EiB), so that every time computed from them stays finite.
- Durations are not bounded by :func:`parse_seconds` (a log's step times are
  read as they come, and judged by their reader); a duration a user sets as a
  parameter (a scheme's timeout, fusion time, compression cost) is at most
  :data:`MAX_SECONDS` (``queuesgd._checks.duration``).

Examples
--------
>>> from queuesgd.units import parse_bandwidth, parse_bytes, parse_seconds
>>> parse_bandwidth("10Gbit/s") == parse_bandwidth("1.25GB/s") == 1.25e9
True
>>> parse_bytes("64MiB"), parse_seconds("50us")
(67108864.0, 5e-05)
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from typing import Any

from queuesgd.errors import UnitError

__all__ = [
    "MAX_BYTES",
    "MAX_SECONDS",
    "OVER_MAX_BYTES",
    "parse_bytes",
    "parse_seconds",
    "parse_bandwidth",
    "format_bytes",
    "format_seconds",
    "format_bandwidth",
]

#: Largest size :func:`parse_bytes` accepts: 1 EiB (``2**60`` bytes), far above any gradient, buffer or
#: dataset, and small enough that a size divided by the smallest bandwidth a cluster accepts stays finite.
MAX_BYTES = 2.0**60
#: Largest duration a parameter takes: 1e9 s (about 32 years), far above any step, timeout or latency,
#: so that a duration of 1e30 s is refused rather than carried into a plausible-looking prediction.
MAX_SECONDS = 1e9

_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_BINARY = {"ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40, "pi": 2.0**50}

# Byte bases are case-sensitive ("B" vs "b"); the spelled-out names are not.
_BYTE_BASES = {"B": 1.0, "byte": 1.0, "bytes": 1.0, "b": 0.125, "bit": 0.125, "bits": 0.125}

# Seconds per unit as (multiplier, divisor) so that "50us" is 50 / 1e6 == 5e-05 exactly rounded.
_TIME_UNITS: dict[str, tuple[float, float]] = {
    **dict.fromkeys(("ns", "nsec"), (1.0, 1e9)),
    **dict.fromkeys(("us", "\u00b5s", "\u03bcs", "usec"), (1.0, 1e6)),  # micro sign, Greek mu
    **dict.fromkeys(("ms", "msec"), (1.0, 1e3)),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), (1.0, 1.0)),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), (60.0, 1.0)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), (3600.0, 1.0)),
}

# ASCII digits only: int() and float() read the other scripts' digits too ("\uff13" is 3), which no
# command line or file of queuesgd's means (a full-width 3 passed every check as 3 B/s).
_NUMBER = re.compile(r"^\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(.*?)\s*$")

_ACCEPTED_BYTES = (
    "a finite number of bytes >= 0, or a string such as '100MB', '64MiB', '1.5 GB', '8Mbit', '512KiB', '1B' "
    "(B = byte, b/bit = bit; k/M/G/T = 1000**n, Ki/Mi/Gi/Ti = 1024**n)"
)
_ACCEPTED_SECONDS = (
    "a finite number of seconds >= 0, or a string such as '100ns', '50us', '50\u00b5s', '2ms', '1.5s', "
    "'3min', '1h'"
)
_ACCEPTED_BANDWIDTH = (
    "a finite number of bytes per second >= 0, or a string such as '10Gbit/s', '10Gbps', '1.25GB/s', "
    "'100Mbit/s', '1GiB/s', '800Mb/s' (B = byte, b/bit = bit)"
)


def _split(value: Any, field: str, accepted: str) -> tuple[float, str] | float:
    """Return a validated float for numbers, or ``(number, unit text)`` for strings."""
    if isinstance(value, bool):
        raise UnitError(field, value, accepted)
    if isinstance(value, numbers.Real):
        try:
            f = float(value)
        except OverflowError:  # an int beyond the float range (10**400)
            raise UnitError(field, value, accepted) from None
        if not math.isfinite(f) or f < 0:
            raise UnitError(field, value, accepted)
        return abs(f)  # -0.0 is 0
    if not isinstance(value, str):
        raise UnitError(field, value, accepted)
    if any(ch.isdigit() and not ch.isascii() for ch in value):
        raise UnitError(field, value, f"digits 0-9 (ASCII) only; {accepted}")
    match = _NUMBER.match(value)
    if match is None:
        raise UnitError(field, value, accepted)
    number = float(match.group(1))
    if not math.isfinite(number) or number < 0:
        raise UnitError(field, value, accepted)
    return abs(number), match.group(2)  # "-0" is 0


def _finite(out: float, field: str, value: Any, accepted: str) -> float:
    """``out``, a number times its unit, refused where it passed the float range (``"1e300 GB/s"``)."""
    if not math.isfinite(out):
        raise UnitError(field, value, f"a value below 1.8e308 in base units; {accepted}")
    return out


def _size_factor(unit: str) -> float | None:
    """Bytes per unit for a size unit such as ``'MiB'`` or ``'Gbit'``; None if unknown."""
    for prefixes, width in ((_BINARY, 2), (_SI, 1), (_SI, 0)):
        prefix = unit[:width].lower()
        if prefix in prefixes and len(prefix) == width:
            base = unit[width:]
            factor = _BYTE_BASES.get(base)
            if factor is None and base.lower() in ("byte", "bytes", "bit", "bits"):
                factor = _BYTE_BASES[base.lower()]
            if factor is not None:
                return prefixes[prefix] * factor
    return None


def parse_bytes(value: Any, field: str = "size") -> float:
    """Parse a size into bytes.

    Parameters
    ----------
    value : float or str
        A number of bytes, or a string with a unit: ``"100MB"``, ``"64MiB"``,
        ``"1.5 GB"``, ``"8Mbit"`` (bits are divided by 8), ``"512KiB"``.
    field : str
        Name of the parameter, used in error messages.

    Returns
    -------
    float
        The size in bytes.

    Raises
    ------
    UnitError
        If the unit is unknown or not a size, or the value is negative or not finite.

    Examples
    --------
    >>> parse_bytes("100MB"), parse_bytes("64MiB"), parse_bytes("8Mbit")
    (100000000.0, 67108864.0, 1000000.0)
    >>> parse_bytes("2048PiB")  # 2 EiB  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnitError: size: got '2048PiB'; accepted: a size of at most 1 EiB ...
    """
    parsed = _split(value, field, _ACCEPTED_BYTES)
    if isinstance(parsed, float):
        out = parsed
    else:
        number, unit = parsed
        factor = _size_factor(unit) if unit else 1.0
        if factor is None:
            raise UnitError(field, value, _ACCEPTED_BYTES)
        out = number * factor
    if out > MAX_BYTES:
        raise UnitError(field, value, f"a size of at most 1 EiB (2**60 bytes); {_ACCEPTED_BYTES}")
    return out


def parse_seconds(value: Any, field: str = "time") -> float:
    """Parse a duration into seconds.

    Parameters
    ----------
    value : float or str
        A number of seconds, or a string with a unit: ``"100ns"``, ``"50us"``
        (or ``"50µs"``), ``"2ms"``, ``"1.5s"``, ``"3min"``, ``"1h"``.
    field : str
        Name of the parameter, used in error messages.

    Returns
    -------
    float
        The duration in seconds.

    Raises
    ------
    UnitError
        If the unit is unknown or not a time, or the value is negative or not finite.

    Examples
    --------
    >>> parse_seconds("2ms"), parse_seconds("3min"), parse_seconds(0.5)
    (0.002, 180.0, 0.5)
    """
    parsed = _split(value, field, _ACCEPTED_SECONDS)
    if isinstance(parsed, float):
        return parsed
    number, unit = parsed
    if not unit:
        return number
    factor = _TIME_UNITS.get(unit, _TIME_UNITS.get(unit.lower()))
    if factor is None:
        raise UnitError(field, value, _ACCEPTED_SECONDS)
    return _finite(number * factor[0] / factor[1], field, value, _ACCEPTED_SECONDS)


def parse_bandwidth(value: Any, field: str = "bandwidth") -> float:
    """Parse a bandwidth into bytes per second.

    Parameters
    ----------
    value : float or str
        A number of bytes per second, or a string such as ``"10Gbit/s"``,
        ``"10Gbps"``, ``"1.25GB/s"``, ``"1GiB/s"``, ``"800Mb/s"``. ``B`` is a
        byte and ``b``/``bit`` a bit; ``"...ps"`` means per second.
    field : str
        Name of the parameter, used in error messages.

    Returns
    -------
    float
        The bandwidth in bytes per second.

    Raises
    ------
    UnitError
        If the unit is unknown or not a size per time, or the value is negative or not finite.

    Examples
    --------
    >>> parse_bandwidth("10Gbit/s"), parse_bandwidth("10Gbps"), parse_bandwidth("1GiB/s")
    (1250000000.0, 1250000000.0, 1073741824.0)
    """
    parsed = _split(value, field, _ACCEPTED_BANDWIDTH)
    if isinstance(parsed, float):
        return parsed
    number, unit = parsed
    if not unit:
        return number
    if "/" in unit:
        size_unit, _, time_unit = (part.strip() for part in unit.partition("/"))
        per = _TIME_UNITS.get(time_unit, _TIME_UNITS.get(time_unit.lower()))
    elif unit.endswith("ps"):
        size_unit, per = unit[:-2], (1.0, 1.0)
    else:
        size_unit, per = unit, None
    factor = _size_factor(size_unit) if per is not None else None
    if factor is None:
        raise UnitError(field, value, _ACCEPTED_BANDWIDTH)
    return _finite(number * factor * per[1] / per[0], field, value, _ACCEPTED_BANDWIDTH)


def _check_format_input(value: Any, field: str) -> float:
    """``value`` as a float if it is a finite number >= 0 (``10**400``, past the float range, is not)."""
    accepted = "a finite number >= 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UnitError(field, value, accepted)
    try:
        f = float(value)
    except (OverflowError, ValueError):  # an int beyond the float range (10**400)
        raise UnitError(field, value, accepted) from None
    if not math.isfinite(f) or f < 0:
        raise UnitError(field, value, accepted)
    return abs(f)  # -0.0 is 0


def _format_scaled(value: float, steps: list[tuple[float, str]], limit: float = sys.float_info.max) -> str:
    """Format ``value`` with the largest unit of ``steps`` (ascending) it reaches, 4 significant digits.

    ``steps`` holds each unit's worth in the base unit of ``value``. A value
    at most ``limit`` whose 4 digits round past it (1152.95 PB, over 1 EiB;
    1.798e+308 s, past the largest float) gets as many more digits as keep
    it within, so that its parser takes it.
    """
    index = max([0] + [i for i, (scale, _) in enumerate(steps) if value >= scale])
    text = f"{value / steps[index][0]:.4g}"
    # Rounding can reach the next unit (999.96 kB -> "1000 kB"): move up instead.
    if float(text) >= 1000 and index + 1 < len(steps):
        index += 1
        text = f"{value / steps[index][0]:.4g}"
    digits = 4
    while float(text) * steps[index][0] > limit and digits < 17:
        digits += 1
        text = f"{value / steps[index][0]:.{digits}g}"
    return f"{text} {steps[index][1]}"


_BYTE_STEPS = [(1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB"), (1e12, "TB"), (1e15, "PB")]
# Bits per second, each unit's worth in bytes per second (a bit is 1/8 byte): a bandwidth is divided,
# never multiplied by 8, so that the largest float (1.8e308 B/s) prints as it is, not as "inf".
_BIT_STEPS = [
    (0.125, "bit/s"),
    (125.0, "kbit/s"),
    (1.25e5, "Mbit/s"),
    (1.25e8, "Gbit/s"),
    (1.25e11, "Tbit/s"),
]
_TIME_STEPS = [(1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s")]

#: What :func:`format_bytes` prints for a size above :data:`MAX_BYTES`, which no parser takes.
OVER_MAX_BYTES = "more than 1 EiB"


def format_bytes(n: float) -> str:
    """Format a number of bytes with an SI prefix and 4 significant digits.

    :func:`parse_bytes` reads the text back to within 5e-4 of ``n`` for every
    size it accepts (at most :data:`MAX_BYTES`, 1 EiB; the few sizes whose 4
    digits would round past 1 EiB get more). A larger size is printed as
    :data:`OVER_MAX_BYTES`, the limit it passed, not as a number no parser
    takes. Not a finite number >= 0 (``nan``, ``10**400``): ``UnitError``.

    Examples
    --------
    >>> format_bytes(102.2e6), format_bytes(512), format_bytes(0)
    ('102.2 MB', '512 B', '0 B')
    >>> format_bytes(2**60), format_bytes(2**61)
    ('1152.9 PB', 'more than 1 EiB')
    """
    value = _check_format_input(n, "bytes")
    if value > MAX_BYTES:
        return OVER_MAX_BYTES
    return _format_scaled(value, _BYTE_STEPS, MAX_BYTES)


def format_seconds(s: float) -> str:
    """Format a duration in seconds as ns, us, ms or s with 4 significant digits.

    Every finite duration >= 0 is printed (:func:`parse_seconds` has no upper
    bound either) and reads back to within 5e-4 (the largest floats with more
    digits: ``1.798e+308`` would be past the float range).

    Examples
    --------
    >>> format_seconds(0.002), format_seconds(5e-5), format_seconds(90)
    ('2 ms', '50 us', '90 s')
    """
    return _format_scaled(_check_format_input(s, "seconds"), _TIME_STEPS)


def format_bandwidth(bytes_per_second: float) -> str:
    """Format a bandwidth given in bytes per second as bits per second (network convention).

    Every finite bandwidth >= 0 is printed, up to the largest float
    (:func:`parse_bandwidth` takes them all) and reads back to within 5e-4.

    Examples
    --------
    >>> format_bandwidth(1.25e9), format_bandwidth(12.5e6), format_bandwidth(1.7e308)
    ('10 Gbit/s', '100 Mbit/s', '1.36e+297 Tbit/s')
    """
    return _format_scaled(_check_format_input(bytes_per_second, "bytes_per_second"), _BIT_STEPS)
