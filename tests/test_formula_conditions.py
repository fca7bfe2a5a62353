"""Formula.conditions: where an expression holds, refused outside (evaluate, subs), carried by subs."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from queuesgd.errors import InvalidParameterError
from queuesgd.formula import Formula

S, r = sympy.Symbol("S", positive=True), sympy.Symbol("r", positive=True)
WHERE = ((S > 16 * r**2, "factors smaller"),)
F = Formula(4 * sympy.sqrt(S) * r, {"S": S, "r": r}, {}, "bytes", conditions=WHERE)


def test_evaluate_inside_is_the_expression_and_outside_is_refused_naming_the_first_value_outside():
    assert F.evaluate(S=4096.0, r=4) == 4 * 64 * 4  # 16 r^2 = 256 < 4096
    outside = r"S,r: got 'S=200, r=4'; accepted: S > 16\*r\*\*2: factors"
    with pytest.raises(InvalidParameterError, match=outside):
        F.evaluate(S=np.array([4096.0, 200.0, 100.0]), r=4)
    with pytest.raises(InvalidParameterError, match="S=256"):  # the boundary is outside (strict)
        F.evaluate(S=256.0, r=4)


def test_subs_carries_the_condition_drops_it_when_it_holds_and_refuses_it_when_it_fails():
    assert F.subs(r=4).conditions[0][0] == (S > 256)
    assert F.subs(S=4096.0, r=4).conditions == ()
    with pytest.raises(InvalidParameterError, match="S,r"):
        F.subs(S=100.0, r=4)
    assert "where S > 16*r**2: factors smaller" in str(F)


@pytest.mark.parametrize(
    "conditions",
    [
        ((S > 1,),),
        ((S > 1, 3),),
        (("S > 1", "why"),),
        ((sympy.Symbol("x") > 1, "not a symbol of it"),),
        "S > 1",
    ],
)
def test_malformed_conditions_are_refused(conditions):
    with pytest.raises(InvalidParameterError, match="Formula.conditions"):
        Formula(S, {"S": S}, {}, "x", conditions=conditions)
