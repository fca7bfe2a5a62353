"""The PS link's occupancy per push (harness.incast): its arithmetic, checked against hand-worked values."""

from __future__ import annotations

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.incast import _occupancy, incast_rate


def test_occupancy_is_the_mean_interval_without_the_ends():
    # 16 arrivals: 3 intervals of 1 s at each end (the start and the finish), 9 of 2 s between them.
    arrivals = [0, 1, 2, 3]
    for _ in range(9):
        arrivals.append(arrivals[-1] + 2)
    for _ in range(3):
        arrivals.append(arrivals[-1] + 1)
    assert _occupancy(arrivals[::-1]) == pytest.approx(2.0, rel=1e-12)  # order does not matter
    assert _occupancy([0.0, 0.5, 1.5]) == pytest.approx(0.75, rel=1e-12)  # too few to trim: all of them


def test_incast_rate_is_the_message_over_its_occupancy():
    # 1 MB with a 0.5 ms handshake on a 125 MB/s line: 8.5 ms per push, 117.6 MB/s.
    assert incast_rate({"gap": 0.0005, "bandwidth": 125e6}, 1e6) == pytest.approx(1e6 / 0.0085, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="incast"):
        incast_rate({"bandwidth": 1e8}, 1e6)
    with pytest.raises(InvalidParameterError, match="incast"):
        incast_rate({"gap": 0.0, "bandwidth": 0.0}, 1e6)
    with pytest.raises(InvalidParameterError, match="nbytes"):
        incast_rate({"gap": 0.0, "bandwidth": 1e8}, -1)


def test_measure_incast_refuses_one_size():
    from queuesgd.harness.incast import measure_incast

    with pytest.raises(InvalidParameterError, match="sizes"):
        measure_incast((1 << 16, 1 << 16))
    with pytest.raises(InvalidParameterError, match="count"):
        measure_incast(count=3)
