"""Fuzzed inputs of the hybrid space, the planners and HybridParallel (audit F2: 14, 20).

Each bad input is refused naming its field (the command line: its flag, one line, status 2); the
good neighbours keep their numbers, checked against predict of a row (tests/hybrid_rows.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from hybrid_rows import dgx

import queuesgd as q
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.hybrid_space import HybridSpace
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes import Pipeline

TINY = TransformerShape(4, 64, 4, 32, 100)


# ---- 14: NumPy booleans and arrays on the ZeRO axis ------------------------------------------------------
@pytest.mark.parametrize("bad", [np.array(3), np.bool_(True), np.array([1, 2]), True, 4, "1"])
def test_a_zero_stage_that_is_no_integer_is_refused(bad):
    # np.array(3) raised TypeError: unhashable; np.bool_(True) was accepted as ZeRO 1
    with pytest.raises(InvalidParameterError, match=r"^HybridSpace\.zero\[0\]: .*ZeRO stages 0, 1, 2 or 3"):
        HybridSpace(zero=(bad,))


def test_numpy_integers_are_zero_stages_as_ints():
    z = HybridSpace(zero=(np.int64(3), 1.0, np.int8(0))).zero
    assert z == (3, 1, 0) and all(type(x) is int for x in z)


# ---- 20: one case rule for names, the same in HybridParallel and HybridSpace ---------------------------
@pytest.mark.parametrize(
    ("field", "spelled", "name"),
    [
        ("schedule", "1F1B", "1f1b"),
        ("schedule", " GPipe ", "gpipe"),
        ("recompute", "Full", "full"),
        ("recompute", "FULL", "full"),
        ("recompute", "NONE", None),
        ("recompute", "Selective", "selective"),
    ],
)
def test_names_are_read_in_any_case_alike_by_the_scheme_and_the_space(field, spelled, name):
    # HybridParallel refused '1F1B', 'GPIPE', 'Full' that HybridSpace took (and took 'NONE')
    kw = {"shape": TINY} if name == "selective" else {}
    assert getattr(q.HybridParallel(**{field: spelled}, **kw), field) == name
    assert getattr(HybridSpace(**{field: (spelled,)}), field) == (name,)
    assert q.HybridParallel(**{field: spelled}, **kw) == q.HybridParallel(**{field: name}, **kw)


BAD_NAMES = [("schedule", "zb"), ("schedule", 1), ("recompute", "some"), ("schedule", np.array("1f1b")),
             ("recompute", np.bool_(True))]  # fmt: skip


@pytest.mark.parametrize(("field", "bad"), BAD_NAMES)
def test_names_the_rule_refuses_are_refused_by_both(field, bad):
    with pytest.raises(InvalidParameterError, match=rf"^HybridParallel\.{field}: .*\(any case\)"):
        q.HybridParallel(**{field: bad})
    with pytest.raises(InvalidParameterError, match=rf"^HybridSpace\.{field}\[0\]: .*\(any case\)"):
        HybridSpace(**{field: (bad,)})


def test_the_optimizer_is_named_in_any_case_and_its_refusal_lists_names_only_as_names():
    w, c = TINY.workload(1), dgx(8)
    upper = q.HybridParallel(optimizer="ADAM", shape=TINY)
    assert upper.optimizer == "adam"
    assert q.predict(upper, w, c).memory.optimizer == 2 * q.predict(upper, w, c).memory.parameters  # Adam: 2
    with pytest.raises(UnknownNameError) as err:
        q.HybridParallel(optimizer="lamb")
    text = str(err.value)
    assert text.startswith("HybridParallel.optimizer: got 'lamb'; accepted: one of 'sgd', 'momentum', 'adam'")
    assert "'or a number" not in text and "or a number from 0 to 1000" in text
    with pytest.raises(UnknownNameError, match=r"Pipeline\.optimizer"):  # every scheme reads it alike
        Pipeline(2, 2, optimizer="lamb")
    pw, pc = q.Workload(1.0, "8MB"), q.Cluster(4, "1GB/s")
    mixed, lower = (q.predict(Pipeline(2, 2, optimizer=o), pw, pc).memory for o in ("Momentum", "momentum"))
    assert mixed == lower and mixed.optimizer > 0
