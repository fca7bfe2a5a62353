"""Machine-repairman closed forms against the finite Erlang-B sum and the numeric MVA."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy

from queuesgd.errors import InvalidParameterError
from queuesgd.queueing import _exact
from queuesgd.queueing.symbolic import repairman_throughput

F = Fraction
Z, D = sympy.symbols("Z D", positive=True)
N_SYM = sympy.Symbol("N", positive=True, integer=True)


def _erlang_b_sum(Zv: F, Dv: F, N: int) -> F:
    """X = (1 - p0)/D, p0 = (r^N/N!) / sum_{j<=N} r^j/j!, with fractions."""
    r = Zv / Dv
    terms = [F(1)]
    for j in range(1, N + 1):
        terms.append(terms[-1] * r / j)
    return (1 - terms[-1] / sum(terms)) / Dv


def test_small_populations_by_hand():
    # N=1: one job alternates between think and service: X = 1/(Z + D).
    assert sympy.simplify(repairman_throughput(Z, D, 1) - 1 / (Z + D)) == 0
    # N=2, r = Z/D: p0 = (r^2/2) / (1 + r + r^2/2), X = (1 + r) / (D (1 + r + r^2/2))
    #             = 2 (D + Z) / (2 D^2 + 2 D Z + Z^2).
    assert sympy.simplify(repairman_throughput(Z, D, 2) - 2 * (D + Z) / (2 * D**2 + 2 * D * Z + Z**2)) == 0
    # Z=2, D=1: N=2 -> p0 = 2/5, X = 3/5; N=3 -> p0 = (4/3)/(19/3) = 4/19, X = 15/19.
    assert repairman_throughput(2, 1, 2) == sympy.Rational(3, 5)
    assert repairman_throughput(2, 1, 3) == sympy.Rational(15, 19)


def test_uppergamma_form_equals_sum_form_at_N5():
    closed = repairman_throughput(2, 1)  # symbolic N
    at5 = closed.subs(N_SYM, 5)
    expected = _erlang_b_sum(F(2), F(1), 5)  # r=2: sum = 1+2+2+4/3+2/3+4/15 = 109/15, p0 = (4/15)/(109/15)
    assert expected == F(105, 109)
    assert sympy.simplify(at5 - sympy.Rational(105, 109)) == 0
    assert float(at5) == pytest.approx(105 / 109, rel=1e-14)


@pytest.mark.parametrize("n", [1, 4, 17, 60])
def test_uppergamma_form_with_symbols(n):
    closed = repairman_throughput(Z, D)
    vals = {Z: sympy.Rational(7, 3), D: sympy.Rational(1, 5), N_SYM: n}
    expected = _erlang_b_sum(F(7, 3), F(1, 5), n)
    assert float(closed.subs(vals).evalf(30)) == pytest.approx(float(expected), rel=1e-14)


def test_symbolic_mva_at_N3_equals_closed_form_and_numeric():
    X, R, Q = _exact.single_class(np.array([[Z, D]], dtype=object), [True, False], [np.inf, 1.0], 3)
    closed = repairman_throughput(Z, D, 3)
    assert sympy.simplify(X[0, -1] - closed) == 0
    Xn, _, _ = _exact.single_class(np.array([[2.5, 0.7]]), [True, False], [np.inf, 1.0], 3)
    value = float(X[0, -1].subs({Z: sympy.Rational(5, 2), D: sympy.Rational(7, 10)}))
    assert value == pytest.approx(Xn[0, -1], rel=1e-12)
    assert value == pytest.approx(float(_erlang_b_sum(F(5, 2), F(7, 10), 3)), rel=1e-14)


def test_numbers_in_numbers_out():
    assert repairman_throughput(2.0, 1.0, 2) == pytest.approx(0.6, rel=1e-15)
    assert repairman_throughput(sympy.Rational(1, 2), sympy.Rational(1, 4), 3) == sympy.Rational(60, 19)
    # The symbol N is fresh, positive and integer.
    assert repairman_throughput(Z, D).free_symbols == {Z, D, N_SYM}


def test_mva_on_symbolic_network_equals_closed_form():
    from queuesgd.queueing.mva import mva
    from queuesgd.queueing.network import ClosedNetwork, Delay, Queue

    net = ClosedNetwork([Delay("think", Z), Queue("repair", D)], population=4)
    assert sympy.simplify(mva(net).throughput - repairman_throughput(Z, D, 4)) == 0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"think": -1, "service": 1, "N": 2}, "think"),
        ({"think": 1, "service": 0, "N": 2}, "service"),
        ({"think": 1, "service": 1, "N": 0}, "N"),
        ({"think": 1, "service": 1, "N": 2.5}, "N"),
        ({"think": 1, "service": 1, "N": sympy.Rational(1, 2)}, "N"),
    ],
)
def test_bad_arguments_are_named(kwargs, field):
    with pytest.raises(InvalidParameterError, match=field):
        repairman_throughput(**kwargs)


@pytest.mark.parametrize(
    ("z", "d", "n"), [(1e9, 1e-9, 3), (1e9, 1e-9, 2000), (1.0, 1e-12, 5), (1e6, 1.0, 10), (0.3, 0.7, 40)]
)
def test_float_demands_do_not_cancel(z, d, n):
    # Read as 15-digit SymPy Floats, 1 - p0 cancelled: (1e9, 1e-9, 3) gave 0 and (1.0, 1e-12, 5)
    # 8.3e-8 off (the randomized audit of 2026-11-27). The reference: the finite sum in fractions
    # of the decimal values the floats stand for.
    got = repairman_throughput(z, d, n)
    assert isinstance(got, sympy.Float)
    ref = _erlang_b_sum(F(str(z)), F(str(d)), n)
    assert abs(F(float(got)) - ref) <= 1e-14 * ref
