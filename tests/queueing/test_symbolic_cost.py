"""Exact MVA with symbolic demands refuses, at once, populations whose rational functions explode."""

import math
import time
from fractions import Fraction

import numpy as np
import pytest
import sympy

from queuesgd.errors import StateSpaceTooLargeError
from queuesgd.queueing import ClosedNetwork, Delay, Queue, mva
from queuesgd.queueing.symbolic import MAX_SYMBOLIC_WORK, check_symbolic_mva, symbolic_mva_work

Z, D = sympy.symbols("Z D", positive=True)


def repairman_by_hand(z: Fraction, d: Fraction, n: int) -> Fraction:
    # finite-source M/M/1//N: X = (1 - p0) / D, p0 = (r^N / N!) / sum_j r^j / j!, r = Z / D
    r, terms = z / d, [Fraction(1)]
    for j in range(1, n + 1):
        terms.append(terms[-1] * r / j)
    return (1 - terms[-1] / sum(terms)) / d


def test_work_estimate_and_limit_by_hand():
    assert MAX_SYMBOLIC_WORK == 1_500
    assert symbolic_mva_work(2, 26) == 26 * 2 * 27  # 1,404: allowed
    assert symbolic_mva_work(2, 27) == 27 * 2 * 28  # 1,512: refused
    assert symbolic_mva_work(3, 9) == 9 * 3 * math.comb(11, 2)  # 1,485
    check_symbolic_mva(2, 26)
    with pytest.raises(StateSpaceTooLargeError, match=r"population <= 26 here"):
        check_symbolic_mva(2, 27)
    with pytest.raises(StateSpaceTooLargeError, match=r"population <= 9 here"):
        check_symbolic_mva(3, 10)


def test_population_200_fails_fast_with_the_numeric_road():
    net = ClosedNetwork([Delay("think", Z), Queue("cpu", D)], population=200)
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match="at population 200 .*population <= 26 here") as err:
        mva(net)
    assert time.perf_counter() - start < 1.0
    assert "Give numeric demands" in str(err.value)
    with pytest.raises(StateSpaceTooLargeError, match="population 200"):
        mva(ClosedNetwork([Delay("think", Z), Queue("cpu", D)], population=1), population=range(1, 201))
    # the numeric road it names: exact MVA with Rationals at 200 equals the Erlang-B form by hand
    exact = mva(
        ClosedNetwork([Delay("think", sympy.Rational(2)), Queue("cpu", sympy.Integer(1))], population=200)
    )
    assert exact.throughput == sympy.Rational(
        *repairman_by_hand(Fraction(2), Fraction(1), 200).as_integer_ratio()
    )


def test_small_symbolic_population_still_solves_and_matches_by_hand():
    x = mva(ClosedNetwork([Delay("think", Z), Queue("cpu", D)], population=12)).throughput
    want = repairman_by_hand(Fraction(7, 3), Fraction(1, 5), 12)
    assert x.subs({Z: sympy.Rational(7, 3), D: sympy.Rational(1, 5)}) == sympy.Rational(
        want.numerator, want.denominator
    )


def test_several_classes_count_the_lattice():
    net = ClosedNetwork(
        [Delay("think", {"a": Z, "b": Z}), Queue("cpu", {"a": D, "b": 2 * D})], population={"a": 10, "b": 10}
    )
    # 11 x 11 - 1 = 120 lattice steps x 2 stations x C(21, 1) = 21 monomials = 5,040 > 1,500
    with pytest.raises(StateSpaceTooLargeError, match="work estimate 5,040 > 1,500"):
        mva(net)
    small = mva(net.with_population({"a": 1, "b": 1}))
    numeric = mva(ClosedNetwork([Delay("think", {"a": 2.0, "b": 2.0}), Queue("cpu", {"a": 0.5, "b": 1.0})],
                                population={"a": 1, "b": 1}))  # fmt: skip
    got = [float(small.throughput[c].subs({Z: 2, D: sympy.Rational(1, 2)})) for c in ("a", "b")]
    np.testing.assert_allclose(got, [numeric.throughput["a"], numeric.throughput["b"]], rtol=1e-12)
