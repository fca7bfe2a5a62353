"""Fuzzed inputs of the hybrid space, the planners and HybridParallel (audit F2: 1, 5, 6, 14, 19, 20).

Each bad input is refused naming its field (the command line: its flag, one line, status 2); the
good neighbours keep their numbers, checked against predict of a row (tests/hybrid_rows.py), the
interleaved bubble's closed form (p - 1) / (v m), SymPy's divisors and hand counts.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import sympy
from hybrid_rows import assert_rows_equal_predict, dgx

import queuesgd as q
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.hybrid_space_checks import MAX_GLOBAL_BATCH, divisors
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes import Pipeline

TINY = TransformerShape(4, 64, 4, 32, 100)
ONE = dict(recompute=(None,), zero=(0,), sequence_parallel=(False,))  # one inner configuration per row


def cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "queuesgd", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# ---- 1, 19: the global batch is bounded; its divisors are found in sqrt time ----------------------------
@pytest.mark.parametrize("G", [MAX_GLOBAL_BATCH + 1, 2**63, 10**400])
def test_a_global_batch_above_the_bound_is_refused_naming_it_in_both_planners(G):
    # 2**63 ran past any timeout (3e9 trial divisions), 10**400 raised a raw OverflowError, and the
    # strategies planner named "microbatch: got 1152921504606846976" (2**63 / 8)
    c = dgx(8)
    with pytest.raises(InvalidParameterError, match=r"^global_batch: .*at most 1,000,000,000$"):
        evaluate_space(TINY, c, HybridSpace(), global_batch=G, memory_limit=8e9)
    for space in ("hybrid", "strategies"):
        with pytest.raises(InvalidParameterError, match=r"^global_batch: .*at most 1,000,000,000$"):
            q.plan_parallelism(TINY, c, global_batch=G, memory_limit=8e9, space=space)


@pytest.mark.parametrize("x", [1, 12, 735_134_400, 999_999_937, MAX_GLOBAL_BATCH])
def test_divisors_are_sympys(x):
    # 735,134,400 has the most divisors (1,344) below 10**9; 999,999,937 is the largest prime below it
    assert divisors(x) == sympy.divisors(x)


def test_the_largest_global_batch_is_evaluated_and_its_rows_are_predicts():
    space = HybridSpace(tensor=(1,), pipeline=(1,), schedule=("1f1b",), **ONE)
    c = q.Cluster(8, "100Gbit/s")
    t = evaluate_space(TINY, c, space, global_batch=MAX_GLOBAL_BATCH, memory_limit=8e9)
    # d = 8: b a divisor of 1.25e8 = 2^6 5^9 (70 of them) with m = 1.25e8 / b <= 10**6, i.e. b >= 125:
    # the divisors below 125 are 1, 2, 4, 8, 16, 32, 64, 5, 10, 20, 40, 80, 25, 50, 100 (15): 55 rows
    assert len(t) == 70 - 15 == 55
    assert set(t["microbatch"].tolist()) == {b for b in sympy.divisors(125_000_000) if b >= 125}
    assert any(n.startswith("15 (t, c, p, b) left out") for n in t.notes)
    assert_rows_equal_predict(t, c, [0, len(t) - 1])


# ---- 6: configurations HybridParallel refuses are not listed ----------------------------------------------
def test_rows_above_a_million_microbatches_are_left_out_with_a_note():
    # d = 8 replicas of G / d = 1,250,000 = 2^4 5^7 (40 divisors b); only b = 1 has m > 10**6. It was listed
    # (fits=True, the fastest), and plan_parallelism then failed on HybridParallel.microbatches
    space = HybridSpace(tensor=(1,), pipeline=(1,), schedule=("1f1b",), **ONE)
    c = q.Cluster(8, "100Gbit/s")
    t = evaluate_space(TINY, c, space, global_batch=10**7, memory_limit=8e9)
    assert len(t) == 39 and 1 not in t["microbatch"].tolist()
    assert int(t["microbatches"].max()) == 625_000  # b = 2
    assert any(n.startswith("1 (t, c, p, b) left out: m = G / (d b) above 1,000,000") for n in t.notes)
    plan = q.plan_parallelism(TINY, c, global_batch=10**7, memory_limit=8e9, space=space)
    best = plan.best
    assert best.microbatches <= 10**6
    assert best.throughput == pytest.approx(q.predict(*t.scheme(t.order()[0]), c).throughput, rel=1e-12)


def test_microbatches_whose_compute_no_workload_takes_are_left_out_with_a_note():
    # GPT-3 175B: ~17 s of compute per sequence at 125 TFLOP/s, so a micro-batch of ~6e7 sequences passes
    # the 1e9 s a Workload takes; evaluate_space raised Workload.compute, which names no input of it
    gpt3 = TransformerShape(96, 12288, 96, 2048, 51200)
    space = HybridSpace(tensor=(8,), pipeline=(1,), schedule=("1f1b",), **ONE)
    t = evaluate_space(gpt3, dgx(8), space, global_batch=MAX_GLOBAL_BATCH, memory_limit=8e9)

    def builds(b: int) -> bool:
        try:
            gpt3.workload(b, flops=125e12)
        except InvalidParameterError:
            return False
        return True

    # d = 1: b divides 10**9 with m = 10**9 / b <= 10**6 (b >= 1000), and its workload builds
    want = {b for b in sympy.divisors(10**9) if b >= 1000 and builds(b)}
    assert set(t["microbatch"].tolist()) == want and 0 < len(want) < 100 - 16
    assert any("left out, one micro-batch's compute" in n for n in t.notes)
    assert_rows_equal_predict(t, dgx(8), [int(np.argmax(t["microbatch"]))])


# ---- 5: interleaving needs v >= 2 ---------------------------------------------------------------------
def test_interleaved_with_one_chunk_is_refused_naming_virtual_stages():
    # it was accepted: 1F1B's throughput, but 331,776 B of activations against 1F1B's 221,184 B
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel\.virtual_stages: got 1; .*>= 2"):
        q.HybridParallel(schedule="interleaved", pipeline=2, microbatches=4, shape=TINY)
    r = cli("predict", "--scheme", "hybrid", "--workers", "8", "--pipeline", "4", "--microbatches", "8",
            "--schedule", "interleaved", "--bandwidth", "1GB/s")  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("queuesgd: error: --virtual-stages: got 1;")
    for axis in ((1,), (1, 2)):
        with pytest.raises(InvalidParameterError, match=r"^HybridSpace\.virtual_stages\[0\]: got 1;.*>= 2"):
            HybridSpace(virtual_stages=axis)
    # two chunks stay accepted: the bubble is (p - 1) / (v m) = 3 / 16
    s = q.HybridParallel(schedule="interleaved", virtual_stages=2, pipeline=4, microbatches=8)
    assert q.predict(s, q.Workload("80ms", "100MB"), dgx(32)).details["bubble"] == pytest.approx(3 / 16)


# ---- 19: the field at fault is named -------------------------------------------------------------------
def test_chunks_that_do_not_split_the_layers_per_stage_name_virtual_stages():
    kw = dict(schedule="interleaved", pipeline=2, microbatches=4, shape=TINY)  # 4 layers: 2 per stage
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel\.virtual_stages: got 3; .* 2 layers"):
        q.HybridParallel(virtual_stages=3, **kw)
    assert q.HybridParallel(virtual_stages=2, **kw).virtual_stages == 2
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel\.pipeline: got 3"):  # p divides no l
        q.HybridParallel(**{**kw, "pipeline": 3, "microbatches": 3, "virtual_stages": 2})
    r = cli("predict", "--scheme", "hybrid", "--workers", "8", "--pipeline", "2", "--microbatches", "8",
            "--schedule", "interleaved", "--virtual-stages", "3", "--shape", "4:64:4:32:100",
            "--bandwidth", "1GB/s")  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("queuesgd: error: --virtual-stages: got 3;")


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
