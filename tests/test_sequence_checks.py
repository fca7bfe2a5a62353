"""List arguments and sizes (fuzz audit F3): a 0-d array, a string, 10**400 refused naming the field.

``np.array(3)`` passed ``isinstance(x, np.ndarray)`` and then failed with ``TypeError: iteration over
a 0-d array``; ``10**400`` bytes raised a bare ``OverflowError``. The good-input checks compare with
values written out by hand (the interpolation of two points, a speed per worker).
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd.catalog import vector_add_time
from queuesgd.cost_curve import byte_sizes
from queuesgd.errors import InvalidParameterError

ZERO_D = np.array(3)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: q.Cluster(2, "1GB/s", speeds=ZERO_D), "Cluster.speeds"),
        (lambda: q.Cluster(2, "1GB/s", speeds=np.ones((2, 1))), "Cluster.speeds"),
        (lambda: q.CostCurve(ZERO_D, [1.0]), "CostCurve.sizes"),
        (lambda: q.CostCurve([0, 100], np.array(1.0)), "CostCurve.times"),
        (lambda: q.CostCurve(np.zeros((2, 2)), [1.0, 2.0]), "CostCurve.sizes"),
    ],
)
def test_an_array_of_other_than_one_dimension_is_refused_naming_the_field(build, field):
    said = rf"(?s)^{field}: got array\(.*accepted: .*one-dimensional"
    with pytest.raises(InvalidParameterError, match=said):
        build()


@pytest.mark.parametrize("value", [ZERO_D, "12", b"12", {1: 2}, {1, 2}, iter([1, 2]), None, 3])
def test_items_refuses_what_is_no_sequence(value):
    from queuesgd.sequence_checks import items

    with pytest.raises(InvalidParameterError, match="^speeds: got "):
        items("speeds", value, "speed factors")


@pytest.mark.parametrize(
    "call",
    [
        lambda: byte_sizes(10**400),
        lambda: byte_sizes([1, 10**400]),
        lambda: byte_sizes(True),
        lambda: byte_sizes(["5"]),
        lambda: q.CostCurve([0, 100], [1.0, 3.0])(10**400),
        lambda: vector_add_time(10**400),
        lambda: vector_add_time([10**400], (np.array([0.0, 100.0]), np.array([1.0, 3.0]))),
    ],
)
def test_a_size_past_the_float_range_or_not_a_number_is_refused_naming_nbytes(call):
    with pytest.raises(InvalidParameterError, match="^nbytes: got .*; accepted: finite sizes in bytes >= 0"):
        call()


def test_good_sequences_read_as_before():
    assert q.Cluster(2, "1GB/s", speeds=np.array([1.0, 0.5])).speeds == (1.0, 0.5)
    assert q.Cluster(3, "1GB/s", speeds=range(1, 4)).speeds == (1.0, 2.0, 3.0)
    curve = q.CostCurve(np.array([0, 100]), (1.0, "3s"))
    assert (curve.sizes, curve.times) == ((0.0, 100.0), (1.0, 3.0))
    # 1 + (3 - 1) x 25 / 100, and the last segment extrapolated: 3 + 2 x 100 / 100
    assert curve(25) == 1.5 and curve(np.int64(200)) == 5.0
    assert curve([50, 150]).tolist() == [2.0, 4.0]
    assert byte_sizes("2kB").tolist() == 2000.0 and byte_sizes(np.array([0, 5])).tolist() == [0.0, 5.0]
