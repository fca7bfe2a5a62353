"""Bad input to the numeric searches of queuesgd.optimum: refused naming the field, never a false answer.

Found by an input-fuzzing audit (findings 3, 9, 17 part): ``continuous_search(f, "T", 0, 50,
points=10**9)`` ran past its timeout with 7 GB; ``points=2`` answered "X is increasing; largest at T = 5e-08"
(the grid never reached ``upper``) and ``points=True`` "X is constant"; with ``upper=2**63`` every value of
``x e^-x`` underflowed to 0 and the answer was "X is constant"; ``symbol`` of any type was printed as the
name. The good inputs are checked against the closed-form maximum of ``x e^-x`` (at ``x = 1``, ``1/e``).
"""

import math

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.optimum import MAX_GRID, continuous_search, integer_search


def _peak(x):
    return x * np.exp(-x)


@pytest.mark.parametrize("points", [MAX_GRID + 1, 10**9, 2, 1, 0, -1, True, 2.5, "4001", None, float("nan")])
def test_continuous_search_points_are_an_integer_from_3_to_max_grid(points):
    with pytest.raises(
        InvalidParameterError, match=r"^points: got .*accepted: an integer >= 3, at most 10,000,000"
    ):
        continuous_search(_peak, "T", 0.0, 50.0, points=points)


@pytest.mark.parametrize("symbol", [None, 3, "", "  ", 1 + 2j, ["T"], b"T"])
@pytest.mark.parametrize("search", [integer_search, continuous_search])
def test_the_symbol_is_a_non_empty_name(search, symbol):
    with pytest.raises(InvalidParameterError, match=r"^symbol: got "):
        search(_peak, symbol, 1, 50)


@pytest.mark.parametrize("fn", [None, 3.0, "x * exp(-x)", [1.0, 2.0]])
@pytest.mark.parametrize("search", [integer_search, continuous_search])
def test_fn_is_a_callable(search, fn):
    with pytest.raises(InvalidParameterError, match=r"^fn: got "):
        search(fn, "T", 1, 50)


@pytest.mark.parametrize(
    ("search", "lower", "upper"),
    [
        (continuous_search, 0.0, float(2**63)),  # x e^-x is 0 beyond x = 745
        (continuous_search, 800.0, 2000.0),
        (integer_search, 1000, 5000),
    ],
)
def test_a_throughput_that_underflows_everywhere_is_not_called_constant(search, lower, upper):
    with pytest.raises(NotRepresentable, match=r"below 2.2e-308.*at every T in .*underflows"):
        search(_peak, "T", lower, upper)


def test_good_searches_keep_their_answers():
    opt = continuous_search(_peak, "T", 0.0, 50.0)
    assert opt.interior and opt.argmax == pytest.approx(1.0, abs=1e-7)
    assert opt.maximum == pytest.approx(math.exp(-1.0), rel=1e-15)
    three = continuous_search(_peak, "T", 0.0, 50.0, points=3)  # [0, 5e-8, 50]: the ends and one between
    assert three.interior and three.argmax == pytest.approx(1.0, abs=1e-6)
    small = continuous_search(_peak, "T", 0.0, 2.0, points=np.int64(101))
    assert small.argmax == pytest.approx(1.0, abs=1e-7)  # a flat peak: sqrt(eps)
    assert small.maximum == pytest.approx(math.exp(-1.0), rel=1e-15)
    # 700 e^-700 is 7e-302: tiny but a normal double, and the shape is read from it
    falling = continuous_search(_peak, "T", 700.0, 705.0)
    assert not falling.interior and falling.monotone == "decreasing" and falling.argmax == 700.0
    assert falling.maximum == pytest.approx(700 * math.exp(-700.0), rel=1e-12)
    flat = integer_search(lambda n: np.full(n.shape, 2.0), "n", 1, 10)  # a constant that is one
    assert flat.monotone == "constant" and flat.maximum == 2.0
    best = integer_search(lambda n: n * np.exp(-n / 10), "n", 1, 100)
    assert (best.argmax, best.interior) == (10, True)
    assert best.maximum == pytest.approx(10 * math.exp(-1.0), rel=1e-15)
