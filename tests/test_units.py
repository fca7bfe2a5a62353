"""Unit parsing: each expected number is written out by hand from the unit definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuesgd.errors import InvalidParameterError, UnitError
from queuesgd.units import (
    format_bandwidth,
    format_bytes,
    format_seconds,
    parse_bandwidth,
    parse_bytes,
    parse_seconds,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100MB", 100e6),
        ("64MiB", 64 * 1024**2),
        ("1.5 GB", 1.5e9),
        ("8Mbit", 1e6),
        ("8mbit", 1e6),
        ("512KiB", 512 * 1024),
        ("10kB", 10_000),
        ("10KB", 10_000),
        ("1B", 1),
        ("16b", 2),
        ("2 bytes", 2),
        ("1TiB", 2**40),
        ("1TB", 1e12),
        ("3Gbit", 3e9 / 8),
        (".5GB", 0.5e9),
        ("1e3 B", 1000),
        ("0B", 0),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50us", 50e-6),
        ("50\u00b5s", 50e-6),
        ("50\u03bcs", 50e-6),
        ("2ms", 0.002),
        ("1.5s", 1.5),
        ("1.5 sec", 1.5),
        ("3min", 180),
        ("100ns", 100e-9),
        ("1h", 3600),
        ("2 hours", 7200),
    ],
)
def test_parse_seconds(text, expected):
    assert parse_seconds(text) == pytest.approx(expected, rel=1e-15)


def test_micro_is_exactly_rounded():
    # 50 / 1e6 rather than 50 * 1e-6 (which is 4.9999999999999996e-05).
    assert parse_seconds("50us") == 5e-05


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10Gbit/s", 1.25e9),
        ("10Gbps", 1.25e9),
        ("10gbit/s", 1.25e9),
        ("10Gb/s", 1.25e9),
        ("1.25GB/s", 1.25e9),
        ("1.25GBps", 1.25e9),
        ("100Mbit/s", 12.5e6),
        ("1GiB/s", 2**30),
        ("800Mb/s", 1e8),
        ("800MB/s", 8e8),
        ("1 MB/ms", 1e9),
        ("10 Gbit / s", 1.25e9),
        ("1 kbit/s", 125),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-15)


def test_bits_versus_bytes():
    # 10 Gbit/s = 10e9 bits/s = 1.25e9 bytes/s = 1.25 GB/s: the classic factor of 8.
    assert parse_bandwidth("10Gbit/s") == parse_bandwidth("1.25GB/s") == parse_bandwidth("10Gbps") == 1.25e9
    assert parse_bandwidth("1Gb/s") * 8 == parse_bandwidth("1GB/s")
    assert parse_bytes("1Mb") * 8 == parse_bytes("1MB")


def test_binary_versus_decimal():
    assert parse_bytes("1MiB") == 1_048_576
    assert parse_bytes("1MB") == 1_000_000
    assert parse_bytes("1GiB") / parse_bytes("1GB") == pytest.approx(1.073741824, rel=1e-15)


def test_numbers_pass_through():
    assert parse_bytes(123) == 123.0
    assert parse_seconds(0.25) == 0.25
    assert parse_bandwidth(1.25e9) == 1.25e9
    assert parse_bytes(np.int64(7)) == 7.0
    assert isinstance(parse_bytes(5), float)


@pytest.mark.parametrize(
    ("func", "field", "value"),
    [
        (parse_bytes, "size", "10 parsecs"),
        (parse_bytes, "size", "2ms"),
        (parse_bytes, "size", "-1MB"),
        (parse_bytes, "size", ""),
        (parse_bytes, "size", "MB"),
        (parse_bytes, "size", "nan MB"),
        (parse_bytes, "size", float("nan")),
        (parse_bytes, "size", float("inf")),
        (parse_bytes, "size", -3),
        (parse_bytes, "size", True),
        (parse_bytes, "size", None),
        (parse_bytes, "size", [1, 2]),
        (parse_seconds, "time", "10MB"),
        (parse_seconds, "time", "5 fortnights"),
        (parse_seconds, "time", "-2ms"),
        (parse_seconds, "time", "   "),
        (parse_seconds, "time", False),
        (parse_bandwidth, "bandwidth", "10Gbit"),
        (parse_bandwidth, "bandwidth", "10Gbit/MB"),
        (parse_bandwidth, "bandwidth", "10 s"),
        (parse_bandwidth, "bandwidth", "ps"),
        (parse_bandwidth, "bandwidth", "-1GB/s"),
    ],
)
def test_bad_input_names_the_field(func, field, value):
    with pytest.raises(UnitError) as info:
        func(value)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: got {value!r}")
    assert "such as" in info.value.accepted or "finite" in info.value.accepted


def test_custom_field_name_in_message():
    with pytest.raises(UnitError, match=r"^link\.bandwidth: got '10 apples'"):
        parse_bandwidth("10 apples", field="link.bandwidth")
    assert issubclass(UnitError, InvalidParameterError) and issubclass(UnitError, ValueError)


def test_format_examples():
    assert format_bandwidth(1.25e9) == "10 Gbit/s"
    assert format_bandwidth(12.5e6) == "100 Mbit/s"
    assert format_bytes(102.2e6) == "102.2 MB"
    assert format_bytes(999.99e3) == "1 MB"
    assert format_seconds(0.002) == "2 ms"
    assert format_seconds(50e-6) == "50 us"
    assert format_seconds(0) == "0 ns"


@pytest.mark.parametrize("func", [format_bytes, format_seconds, format_bandwidth])
@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf, "1MB", True])
def test_format_refuses_bad_input(func, value):
    with pytest.raises(UnitError):
        func(value)


# The round trip format -> parse (within 5e-4) over every value the parsers accept, 0 to 1 EiB for sizes
# and to the largest float for durations and bandwidths: tests/test_units_range.py.


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["k", "M", "G", "T"]))
def test_bit_is_an_eighth_of_a_byte(n, prefix):
    assert parse_bytes(f"{n}{prefix}bit") == pytest.approx(parse_bytes(f"{n}{prefix}B") / 8, rel=1e-15)


@pytest.mark.parametrize(
    ("func", "text"),
    [
        (parse_bandwidth, "1e300 GB/s"),
        (parse_bandwidth, "1e308 Pbit/s"),
        (parse_bandwidth, "1e300 PiB/ns"),
        (parse_seconds, "1e308 h"),
        (parse_seconds, "1e306 hours"),
    ],
)
def test_a_finite_number_whose_unit_takes_it_past_the_float_range_is_refused(func, text):
    # "1e300 GB/s" parsed to inf and Cluster took it: free communication (audit 2026-11-27)
    with pytest.raises(UnitError, match=r"^x: got .*; accepted: a value below 1\.8e308 in base units"):
        func(text, "x")


def test_a_cluster_refuses_a_bandwidth_string_that_overflows():
    from queuesgd import Cluster

    with pytest.raises(UnitError, match="^Cluster.bandwidth: got '1e300 GB/s'"):
        Cluster(4, "1e300 GB/s")
    assert Cluster(4, "1e290 GB/s").bandwidth == 1e299  # the largest still in range pass, exactly


@pytest.mark.parametrize(
    ("func", "value"),
    [(f, v) for f in (parse_bytes, parse_seconds, parse_bandwidth) for v in ("-0", -0.0)]
    + [(parse_bytes, "-0 B"), (parse_seconds, "-0 s"), (parse_bandwidth, "-0 B/s")],
)
def test_negative_zero_reads_as_zero(func, value):
    # -0.0 came back as -0.0, where negative values are refused (audit 2026-11-27)
    out = func(value)
    assert out == 0.0 and math.copysign(1.0, out) == 1.0
