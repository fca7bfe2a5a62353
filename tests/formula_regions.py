"""A formula's conditions against ``predict``'s closed form: refused where it refuses, equal elsewhere."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from queuesgd import predict
from queuesgd.errors import InvalidParameterError, NotRepresentable


def assert_formula_holds_where_the_closed_form_does(
    formula: Any, cases: Iterable[tuple[Any, Any, Any, dict[str, Any]]], why: str
) -> None:
    """For each ``(scheme, workload, cluster, values)``: ``formula.evaluate(**values)`` raises
    (matching ``why``) exactly where ``predict(scheme, workload, cluster, method="closed_form")``
    raises ``NotRepresentable``, and equals its throughput to 1e-12 elsewhere; both sides must be
    drawn."""
    outcomes = set()
    for scheme, w, c, values in cases:
        try:
            want = predict(scheme, w, c, method="closed_form").throughput
        except NotRepresentable:
            with pytest.raises(InvalidParameterError, match=why):
                formula.evaluate(**values)
            outcomes.add("refused")
            continue
        assert float(formula.evaluate(**values)) == pytest.approx(want, rel=1e-12)
        outcomes.add("held")
    assert outcomes == {"refused", "held"}  # both sides of the condition were drawn
