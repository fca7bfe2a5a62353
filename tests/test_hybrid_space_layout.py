"""Uneven pipeline stages ("head-slots") as an axis of the hybrid planner's space.

The independent sources: the configurations of a small case counted by hand, the stages' layer counts
written out, ``predict`` of each row's ``HybridParallel(stage_layers=...)`` (its scalar closed form,
row by row), the derivation of each candidate's formula, and the documented count of the default space.
"""

from __future__ import annotations

import numpy as np
import pytest
from hybrid_rows import assert_rows_equal_predict as every_column_equals_predict
from hybrid_rows import dgx

from queuesgd import Cluster
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, TransformerShape
from queuesgd.planning import _formula, plan_parallelism

#: 10 layers: p = 3, 4, 6 do not divide them, (10 + 2) / p is whole (3, 4, 3; 2, 3, 3, 2; 1, 2 x 4, 1).
EAGER = TransformerShape(layers=10, hidden=256, heads=8, sequence=64, vocabulary=1000, name="ten")
FLASH = TransformerShape(
    10, 512, 8, 128, 32000, "ten-flash", kv_heads=2, ffn_hidden=1376, attention="flash", gated=True,
    bias=False, norm="rmsnorm", tied_embeddings=False, position_embedding=False, dropout=False,
)  # fmt: skip
H100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
FLAT = ComputeModel(GemmTable.constant(0.6, peak_flops=989e12), memory_bandwidth="3.35TB/s")
ALL = ("1f1b", "gpipe", "interleaved")
BOTH = ("even", "head-slots")
STAGES = {2: (5, 5), 3: (3, 4, 3), 4: (2, 3, 3, 2), 6: (1, 2, 2, 2, 2, 1)}  # p = 2: interleaved rows


def small(layout, **kw) -> list[tuple]:
    """(p, schedule, v, layout) of every row for t = 1, b = 1 on 12 flat workers, G = 12."""
    space = HybridSpace(
        tensor=(1,), microbatch=(1,), schedule=ALL, recompute=(None,), zero=(0,),
        sequence_parallel=(False,), layout=layout, **kw,
    )  # fmt: skip
    table = evaluate_space(EAGER, Cluster(12, "10Gbit/s"), space, global_batch=12, memory_limit=1e12)
    return sorted(
        (int(p), str(s), int(v), str(k))
        for p, s, v, k in zip(table["pipeline"], table["schedule"], table["virtual_stages"], table["layout"])
    )


# ---- which configurations: by hand ---------------------------------------------------------------------
def test_the_small_case_counted_by_hand():
    # 12 workers, t = 1: p divides 12; even where p divides 10 (1, 2), head-slots where p > 1 divides 12 and
    # 12 / p >= 2 (2, 3, 4, 6); p = 2's head-slots split is 5, 5 (the even one): left out beside "even".
    # d = 12 / p, m = 12 / d = p; interleaved needs p > 1, m % p == 0 and 2 v | 10: only p = 2, v = 5;
    # head-slots interleaved v | n = 12 / p, n / v >= 2: p = 2 (n = 6) v = 2, 3; p = 3 (n = 4) v = 2 (at
    # p = 2 its chunks, 2 + 3 and 3 + 2 or 1 + 2 + 2 and 2 + 2 + 1, are not the even split's: kept)
    ones = [(p, s, 1, k) for p, k in ((1, "even"), (2, "even"), (3, "head-slots"), (4, "head-slots"),
                                      (6, "head-slots")) for s in ("1f1b", "gpipe")]  # fmt: skip
    chunked = [(2, "interleaved", 2, "head-slots"), (2, "interleaved", 3, "head-slots"),
               (3, "interleaved", 2, "head-slots")]  # fmt: skip
    assert small(BOTH) == sorted([*ones, (2, "interleaved", 5, "even"), *chunked])
    assert small(("even",)) == sorted([*ones[:4], (2, "interleaved", 5, "even")])
    heads = [(p, s, 1, "head-slots") for p in (2, 3, 4, 6) for s in ("1f1b", "gpipe")]
    assert small(("head-slots",)) == sorted(heads + chunked)  # no p = 1; p = 2 as head-slots


def test_the_stage_layers_of_head_slot_rows_and_the_pipeline_notes():
    space = HybridSpace(tensor=(1,), pipeline=(3, 4, 5, 6, 12), microbatch=(1,), recompute=(None,), zero=(0,),
                        sequence_parallel=(False,), layout=BOTH)  # fmt: skip
    table = evaluate_space(EAGER, Cluster(60, "10Gbit/s"), space, global_batch=60, memory_limit=1e12)
    for i in range(len(table)):
        s, _ = table.scheme(i)
        want = STAGES.get(s.pipeline) if table["layout"][i] == "head-slots" else None
        assert s.stage_layers == want and (want is None) == (s.pipeline == 5)
    assert set(table["pipeline"].tolist()) == {3, 4, 5, 6}
    # p = 12: 10 / 12 is not whole, and (10 + 2) / 12 = 1 leaves the end stages no layer
    assert table.notes == ("pipeline 12: not tried, does not divide the 10 layers nor a head-slots depth",)
    only = evaluate_space(EAGER, Cluster(60, "10Gbit/s"), HybridSpace(tensor=(1,), pipeline=(5,)),
                          global_batch=60, memory_limit=1e12)  # fmt: skip
    assert set(only["layout"].tolist()) == {"even"} and not only.notes
    space = HybridSpace(tensor=(1,), pipeline=(5,), layout=BOTH)
    none = evaluate_space(EAGER, Cluster(60, "10Gbit/s"), space, global_batch=60, memory_limit=1e12)
    assert none.notes == (
        "layout 'head-slots': not tried, no depth applies (GPipe, 1F1B: p > 2 with (l + 2) / p whole; "
        "interleaved: v dividing n = (l + 2) / p with n / v >= 2)",
    )


# ---- every head-slots row equals predict ----------------------------------------------------------------
def assert_rows_equal_predict(table, cluster, rows) -> None:
    rows = list(rows)
    assert len(rows) > 0
    for scheme, _ in every_column_equals_predict(table, cluster, rows):
        assert scheme.stage_layers == STAGES[scheme.pipeline]


@pytest.mark.parametrize("compute", [None, FLAT, H100], ids=["flops", "constant-table", "h100-table"])
@pytest.mark.parametrize("shape", [EAGER, FLASH], ids=["eager", "flash"])
def test_head_slot_rows_equal_predict(shape, compute):
    cluster = dgx(48)  # t in 1, 2, 4, 8; p = 3, 4, 6 with head-slots
    space = HybridSpace(schedule=ALL, context=None, layout=BOTH, tp_overlap=(False, True))
    table = evaluate_space(
        shape, cluster, space, global_batch=96, memory_limit=80e9, flops=150e12, compute=compute
    )
    heads = np.flatnonzero(table["layout"] == "head-slots")
    assert set(table["pipeline"][heads].tolist()) == {2, 3, 4, 6}  # p = 2: interleaved only (its chunks)
    assert set(table["schedule"][heads[table["pipeline"][heads] == 2]].tolist()) == {"interleaved"}
    assert set(table["schedule"][heads].tolist()) == {"1f1b", "gpipe", "interleaved"}
    # every recomputation, ZeRO stage, SP and overlap among them
    for axis, values in (("recompute", 3 - (shape is FLASH)), ("zero", 4), ("sequence_parallel", 2)):
        assert len(set(table[axis][heads].tolist())) == values
    rng = np.random.default_rng(10)
    assert_rows_equal_predict(table, cluster, rng.choice(heads, size=min(150, len(heads)), replace=False))


def test_gpipe_and_context_parallel_head_slot_rows_equal_predict():
    cluster = dgx(48)
    space = HybridSpace(schedule=("gpipe",), context=(1, 2), layout=("head-slots",), zero=(0, 3))
    table = evaluate_space(EAGER, cluster, space, global_batch=48, memory_limit=80e9, compute=H100)
    assert set(table["layout"].tolist()) == {"head-slots"} and table["context"].max() == 2
    rows = np.flatnonzero(table["pipeline"] > 2)
    assert_rows_equal_predict(table, cluster, np.random.default_rng(3).choice(rows, size=80, replace=False))
    two = np.flatnonzero(table["pipeline"] == 2)  # the 5, 5 split: as the even rows
    even = evaluate_space(EAGER, cluster, HybridSpace(schedule=("gpipe",), context=(1, 2), zero=(0, 3),
                          pipeline=(2,)), global_batch=48, memory_limit=80e9, compute=H100)  # fmt: skip
    assert len(two) == len(even)
    for k in ("throughput", "memory"):
        assert np.allclose(table[k][two], even[k], rtol=1e-12, atol=0)


# ---- the planner -----------------------------------------------------------------------------------------
def test_the_plan_shows_the_layout_and_each_candidates_own_formula():
    space = HybridSpace(tensor=(1,), pipeline=(2, 3, 4), zero=(0,), layout=BOTH, keep=40)
    plan = plan_parallelism(EAGER, dgx(48), global_batch=96, space=space, memory_limit="80GB")
    rows = plan.rows()
    assert {r["layout"] for r in rows} == {"even", "head-slots"}
    for c, r in zip(plan.candidates, rows):
        assert r["layout"] == ("head-slots" if c.scheme.stage_layers else "even")
        assert (r["layout"] == "even") <= (c.scheme.pipeline == 2)  # 10 layers: p = 3, 4 head-slots only
        assert (c.scheme.pipeline == 2) <= (r["layout"] == "even" or c.scheme.schedule == "interleaved")
        assert c.formula == _formula(c.scheme)  # uneven stages have no formula: not another's cached
    assert any(c.formula.startswith("none:") for c in plan.candidates)
    assert any(not c.formula.startswith("none:") for c in plan.candidates)


# ---- defaults and input ---------------------------------------------------------------------------------
def test_the_default_space_is_unchanged():
    c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    kw = {"global_batch": 512, "memory_limit": 8e9, "flops": 150e12}
    table = evaluate_space(GPT3_XL, c, HybridSpace(), **kw)
    assert (len(table), int(table["fits"].sum())) == (8010, 4220)  # the module docstring's
    # 4204 fitted when the interleaved schedule at m = p was taken to hold l (1 + (p - 1)/(p v))
    # layers on its first stage; Megatron runs all m v forwards first there, l layers (every stage
    # m L_i, the first the busiest: its (V + s) h embeddings outweigh the last's 2 h + V h). Those
    # rows' activations times 1 + (p - 1)/(p v) again give the old count: 16 rows freed.
    p, v = table["pipeline"], table["virtual_stages"]
    at_p = (table["schedule"] == "interleaved") & (table["microbatches"] == p)
    before = table["memory"] + np.where(at_p, table["activations"] * (p - 1) / (p * v), 0.0)
    assert int((before <= 8e9).sum()) == 4204
    assert set(table["layout"].tolist()) == {"even"} and HybridSpace().layout == ("even",)
    # 24 layers: (24 + 2) / p whole for p = 2 (the even split), 13 (does not divide 64), 26 (n = 1): none
    both = evaluate_space(GPT3_XL, c, HybridSpace(layout=BOTH), **kw)
    assert len(both) == 8010 and "layout 'head-slots'" in both.notes[-1]


@pytest.mark.parametrize(
    ("layout", "field"),
    [
        (("even", "uneven"), "HybridSpace.layout[1]"),
        (("head_slots",), "HybridSpace.layout[0]"),
        ("even", "HybridSpace.layout"),
        ((), "HybridSpace.layout"),
        (None, "HybridSpace.layout"),
        ((1,), "HybridSpace.layout[0]"),
    ],
)
def test_a_bad_layout_is_refused_by_name(layout, field):
    with pytest.raises(InvalidParameterError) as err:
        HybridSpace(layout=layout)
    assert str(err.value).startswith(f"{field}: ")


def test_layout_names_are_normalised():
    assert HybridSpace(layout=["Head-Slots", "even", "even"]).layout == ("head-slots", "even")
