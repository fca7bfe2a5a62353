"""Formatting over the whole range the parsers accept, and digits the parsers refuse (fuzz audit F3).

The round trip of docs/units.md (parse(format(x)) within 5e-4 of x) is checked in exact rational
arithmetic against ``x`` itself, from 0 up to each parser's own limit: 1 EiB for sizes, the largest
float for durations and bandwidths.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from queuesgd.errors import UnitError
from queuesgd.units import (
    MAX_BYTES,
    format_bandwidth,
    format_bytes,
    format_seconds,
    parse_bandwidth,
    parse_bytes,
    parse_seconds,
)

BIGGEST = sys.float_info.max
TOLERANCE = Fraction(5, 10_000)  # docs/units.md: "to within 5·10⁻⁴ relative error"


def _within(back: float, x: float) -> bool:
    return abs(Fraction(back) - Fraction(x)) <= TOLERANCE * Fraction(x)


@given(st.floats(min_value=0.0, max_value=MAX_BYTES))
@example(MAX_BYTES)  # printed "1153 PB" (1.153e18 > 2**60): parse_bytes refused it
@example(float(np.nextafter(MAX_BYTES, 0)))
@example(1152.92e15)
@example(5e-324)
def test_every_size_parse_bytes_accepts_reads_back(n):
    assert _within(parse_bytes(format_bytes(n)), n)


@given(st.floats(min_value=0.0, max_value=BIGGEST))
@example(BIGGEST)  # printed "1.798e+308 s", past the float range
@example(1.79765e308)
@example(5e-324)
def test_every_finite_duration_reads_back(s):
    assert _within(parse_seconds(format_seconds(s)), s)


@given(st.floats(min_value=0.0, max_value=BIGGEST))
@example(1.7e308)  # 8 x 1.7e308 bits/s overflowed: "inf Tbit/s"
@example(BIGGEST)
@example(2.3e307)
@example(5e-324)
def test_every_finite_bandwidth_reads_back(bps):
    assert _within(parse_bandwidth(format_bandwidth(bps)), bps)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2**60, "1152.9 PB"),  # 2**60 / 1e15 = 1152.92..., one digit more than 4 to stay within 1 EiB
        (1152.9e15, "1152.9 PB"),
        (1.152e18, "1152 PB"),  # 4 digits where they stay within
        (1e15, "1 PB"),
    ],
)
def test_sizes_near_the_limit_are_written_within_it(value, text):
    assert format_bytes(value) == text
    assert parse_bytes(text) <= MAX_BYTES


@pytest.mark.parametrize("value", [2**60 * 1.01, float(np.nextafter(MAX_BYTES, np.inf)), 1e30, 1e300])
def test_a_size_above_the_parsers_limit_is_written_as_that_limit(value):
    # '1164 PB' was printed, which parse_bytes refuses ("at most 1 EiB"): one limit for both now
    assert format_bytes(value) == "more than 1 EiB"
    with pytest.raises(UnitError, match="^size: got 'more than 1 EiB'"):
        parse_bytes(format_bytes(value))


@pytest.mark.parametrize(
    ("func", "field"),
    [(format_bytes, "bytes"), (format_seconds, "seconds"), (format_bandwidth, "bytes_per_second")],
)
@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_an_integer_past_the_float_range_is_refused_naming_the_field(func, field, value):
    # raised a bare OverflowError
    message = rf"^{field}: got an integer of 401 digits; accepted: a finite number >= 0"
    with pytest.raises(UnitError, match=message):
        func(value)


@pytest.mark.parametrize(
    ("func", "text"),
    [
        (parse_bytes, "\uff13MB"),  # full-width 3
        (parse_bytes, "\u0663"),  # Arabic-Indic 3
        (parse_bytes, "1\uff10"),
        (parse_seconds, "\uff15ms"),
        (parse_seconds, "\u0969s"),  # Devanagari 3
        (parse_bandwidth, "\uff13"),
        (parse_bandwidth, "\uff11\uff10Gbit/s"),
        (parse_bandwidth, "1.\uff15GB/s"),
        (parse_bandwidth, "1e\uff19B/s"),
    ],
)
def test_digits_other_than_ascii_are_refused(func, text):
    # float() reads them ("\uff13" is 3.0): "--bandwidth \uff13" ran as 3 B/s without the bare-number warning
    with pytest.raises(UnitError, match=r"^x: got .*; accepted: digits 0-9 \(ASCII\) only; "):
        func(text, "x")


@pytest.mark.parametrize(
    ("func", "text", "expected"),
    [
        (parse_bytes, "3MB", 3e6),
        (parse_bytes, "\u00a03 MB\u00a0", 3e6),  # other white space around the number is kept as before
        (parse_seconds, "5 \u00b5s", 5e-6),
        (parse_bandwidth, "10Gbit/s", 1.25e9),
    ],
)
def test_ascii_numbers_parse_as_before(func, text, expected):
    assert func(text) == expected
