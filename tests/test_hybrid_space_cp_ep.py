"""Context (CP) and expert (EP) parallelism as axes of the hybrid planner's space.

The independent sources: ``predict`` of each row's ``HybridParallel`` (its scalar closed form, row
by row) and a brute-force enumeration of every configuration that ``HybridParallel`` and its
``check`` accept, less the documented duplicates.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hybrid_rows import accepted_configurations, dgx
from hybrid_rows import assert_rows_equal_predict as every_column_equals_predict

from queuesgd import Cluster, HybridParallel, predict
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import load_gemm_table
from queuesgd.hybrid_space import CONFIGURATION, HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, TransformerShape
from queuesgd.planning import plan_parallelism

#: Megatron-LM SC'21, Table 1, last row: 1T parameters.
T1 = TransformerShape(layers=128, hidden=25600, heads=160, sequence=2048, vocabulary=51200, name="1t")
#: A sequence of 24 tokens: c = 16 divides the 16 workers but not the sequence; c = 3 the reverse.
SEQ24 = TransformerShape(layers=8, hidden=256, heads=8, sequence=24, vocabulary=1000, name="seq24")
H100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
ALL = ("1f1b", "gpipe", "interleaved")


def assert_rows_equal_predict(table, cluster, rows) -> None:
    rows = list(rows)
    assert len(rows) > 0
    for i, (scheme, _) in zip(rows, every_column_equals_predict(table, cluster, rows)):
        assert (scheme.context, scheme.expert_parallel) == (
            int(table["context"][i]),
            int(table["expert_parallel"][i]),
        )


@pytest.mark.parametrize(
    ("shape", "cluster", "batch", "space", "compute"),
    [
        (T1, dgx(3072), 3072, HybridSpace(schedule=ALL, context=None), None),  # the benchmark's space
        (GPT3_XL, dgx(64), 512, HybridSpace(context=None), H100),  # kernel times per (b, t, SP, c)
        (SEQ24, Cluster(16, "10Gbit/s", "20us"), 64, HybridSpace(context=None), None),  # a flat cluster
        (
            GPT3_XL,
            dgx(64),
            512,
            HybridSpace(context=(1, 2, 4), experts=8, capacity_factor=1.25, top_k=2),
            None,
        ),  # a mixture of experts, every e that applies
    ],
    ids=["1T-3072-cp", "compute-h100-cp", "flat-cp", "moe-cp-ep"],
)
def test_sampled_rows_with_context_or_experts_equal_predict(shape, cluster, batch, space, compute):
    table = evaluate_space(
        shape, cluster, space, global_batch=batch, memory_limit=80e9, flops=150e12, compute=compute
    )
    c, e = table["context"], table["expert_parallel"]
    assert c.max() > 1
    rng = np.random.default_rng(24)
    parallel = np.flatnonzero((c > 1) | (e > 1))
    assert_rows_equal_predict(
        table, cluster, rng.choice(parallel, size=min(120, len(parallel)), replace=False)
    )
    if space.experts is not None:  # rows with e > 1, with and without c > 1
        for rows in (np.flatnonzero((e > 1) & (c == 1)), np.flatnonzero((e > 1) & (c > 1))):
            assert_rows_equal_predict(
                table, cluster, rng.choice(rows, size=min(40, len(rows)), replace=False)
            )
    # every row's workers: t c p d
    assert np.all(table["tensor"] * c * table["pipeline"] * table["data"] == cluster.workers)


@pytest.mark.parametrize("experts", [None, 4], ids=["dense", "moe-4"])
def test_the_space_with_context_is_every_configuration_hybrid_parallel_accepts(experts):
    cluster, G = dgx(16), 32
    moe = {"top_k": 2, "capacity_factor": 1.5} if experts else {}
    space = HybridSpace(schedule=ALL, context=None, experts=experts, **moe)
    table = evaluate_space(SEQ24, cluster, space, global_batch=G, memory_limit=1e12)
    assert set(CONFIGURATION) <= set(table.columns)
    names = ("tensor", "pipeline", "microbatch", "schedule", "virtual_stages", "recompute", "zero")
    names += ("sequence_parallel", "context", "expert_parallel")
    got = {tuple(table.row(i)[k] for k in names) for i in range(len(table))}
    assert len(got) == len(table)  # no duplicates
    # every configuration HybridParallel and its check accept, with G = d m b, less SP at t = 1 and
    # ZeRO with d c = 1
    want = accepted_configurations(
        SEQ24, cluster, G, names, schedules=ALL, context=range(1, cluster.workers + 1), experts=experts, **moe
    )
    assert got == want
    # c = 16 divides the workers, not the 24-token sequence; c = 3 the sequence, not the workers
    assert {w[8] for w in want} == {1, 2, 4, 8} == set(table["context"].tolist())
    assert {w[9] for w in want} == ({1} if experts is None else {1, 2, 4})


def test_the_default_space_has_no_context_and_the_axis_partitions_the_whole():
    c, G = dgx(64), 512
    default = evaluate_space(GPT3_XL, c, HybridSpace(), global_batch=G, memory_limit=8e9, flops=150e12)
    assert len(default) == 8010 and set(default["context"].tolist()) == {1}  # the documented count
    assert set(default["expert_parallel"].tolist()) == {1}
    whole = evaluate_space(GPT3_XL, c, HybridSpace(context=None), global_batch=G, memory_limit=8e9)
    degrees = sorted(set(whole["context"].tolist()))
    assert degrees == [1, 2, 4, 8, 16, 32, 64]  # divisors of 2048 that divide the 64 workers
    each = [
        len(evaluate_space(GPT3_XL, c, HybridSpace(context=(k,)), global_batch=G, memory_limit=8e9))
        for k in degrees
    ]
    assert each[0] == 8010 and sum(each) == len(whole)


def test_the_plan_predicts_context_parallel_candidates_one_by_one():
    c = dgx(3072)
    plan = plan_parallelism(T1, c, global_batch=3072, space=HybridSpace(context=None, keep=20), flops=150e12)
    assert any(cand.scheme.context > 1 for cand in plan.candidates)
    for cand, row in zip(plan.candidates, plan.rows()):
        s = cand.scheme
        assert isinstance(s, HybridParallel) and row["C"] == s.context and row["EP"] == 1
        assert cand.replicas * cand.stages * s.tensor * s.context == 3072
        assert ("CP" in cand.strategy) == (s.context > 1)
        assert cand.throughput == predict(s, T1.workload(cand.microbatch, flops=150e12), c).throughput
        if s.context > 1:
            assert cand.formula.startswith("none: ")  # derive has no context parallelism
    best = plan.table.order()[0]
    assert plan.best.throughput == pytest.approx(float(plan.table["throughput"][best]), rel=1e-12)


def test_the_plan_predicts_expert_parallel_candidates_one_by_one():
    c = dgx(64)
    space = HybridSpace(experts=8, top_k=2, keep=20)
    plan = plan_parallelism(GPT3_XL, c, global_batch=512, space=space, flops=150e12, memory_limit="20GB")
    assert any(cand.scheme.expert_parallel > 1 for cand in plan.candidates)
    for cand, row in zip(plan.candidates, plan.rows()):
        s = cand.scheme
        assert (s.experts, s.top_k, row["EP"]) == (8, 2, s.expert_parallel)
        assert ("EP" in cand.strategy) == (s.expert_parallel > 1)
        assert cand.throughput == predict(s, GPT3_XL.workload(cand.microbatch, flops=150e12), c).throughput


def test_values_that_never_apply_are_noted():
    table = evaluate_space(
        GPT3_XL, dgx(16), HybridSpace(context=(1, 32), tensor=(8,)), global_batch=64, memory_limit=80e9
    )
    assert set(table["context"].tolist()) == {1}
    assert any(n.startswith("context 32: not tried") for n in table.notes)
    moe = evaluate_space(
        GPT3_XL,
        dgx(16),
        HybridSpace(tensor=(8,), pipeline=(2,), experts=4, expert_parallel=(1, 4)),
        global_batch=64,
        memory_limit=80e9,
    )  # d = 1: no e > 1
    assert set(moe["expert_parallel"].tolist()) == {1}
    assert any(n.startswith("expert_parallel 4: not tried") for n in moe.notes)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"context": (0,)}, "HybridSpace.context[0]"),
        ({"context": (2.5,)}, "HybridSpace.context[0]"),
        ({"context": "2"}, "HybridSpace.context"),
        ({"context": ()}, "HybridSpace.context"),
        ({"expert_parallel": (0,)}, "HybridSpace.expert_parallel[0]"),
        ({"expert_parallel": (2,)}, "HybridSpace.expert_parallel"),  # without experts
        ({"experts": 8, "expert_parallel": (1, 3)}, "HybridSpace.expert_parallel[1]"),
        ({"experts": 0}, "HybridSpace.experts"),
        ({"experts": 8, "top_k": 9}, "HybridSpace.top_k"),
        ({"top_k": 2}, "HybridSpace.top_k"),
        ({"capacity_factor": 1.5}, "HybridSpace.capacity_factor"),
        ({"experts": 8, "capacity_factor": 0}, "HybridSpace.capacity_factor"),
        ({"experts": 8, "capacity_factor": "1"}, "HybridSpace.capacity_factor"),
    ],
)
def test_context_and_expert_fields_are_checked(kwargs, field):
    with pytest.raises(InvalidParameterError, match="^" + re.escape(field) + ":"):
        HybridSpace(**kwargs)


@pytest.mark.parametrize(("context", "field"), [((3,), "[0]"), ((1, 2, 48), "[2]")])
def test_a_context_that_does_not_divide_the_sequence_is_refused(context, field):
    # as HybridParallel(context=3) is for a 2048-token sequence, whatever the cluster
    with pytest.raises(InvalidParameterError, match=re.escape(f"HybridSpace.context{field}:") + ".*2048"):
        plan_parallelism(GPT3_XL, dgx(64), global_batch=512, space=HybridSpace(context=context))
    with pytest.raises(InvalidParameterError, match="^HybridParallel.context"):
        HybridParallel(shape=GPT3_XL, context=context[-1])


def test_experts_with_a_compute_model_are_planned_as_predict_times_them():
    space = HybridSpace(experts=8, context=(1,), pipeline=(1, 2), recompute=(None,))
    plan = plan_parallelism(GPT3_XL, dgx(64), global_batch=512, space=space, compute=H100)
    assert len(plan.table) and set(plan.table["expert_parallel"].tolist()) > {1}
    every_column_equals_predict(plan.table, dgx(64), range(min(20, len(plan.table))))


def test_the_tensor_axis_follows_the_key_value_heads_and_the_mlp_of_llama_shapes():
    # t must divide the key-value heads and ffn_hidden too (HybridParallel refuses t = 4, 8 here)
    gqa = TransformerShape(
        8,
        256,
        8,
        128,
        1000,
        kv_heads=2,
        ffn_hidden=688,
        gated=True,
        bias=False,
        norm="rmsnorm",
        tied_embeddings=False,
        position_embedding=False,
        dropout=False,
    )
    odd = TransformerShape(8, 256, 8, 128, 1000, ffn_hidden=690)  # 690 = 2 x 345
    cluster = dgx(16)
    for shape, why in ((gqa, "does not divide the 2 key-value heads"), (odd, "does not divide ffn_hidden")):
        for t in (4, 8):
            with pytest.raises(InvalidParameterError, match="^HybridParallel.tensor"):
                HybridParallel(tensor=t, shape=shape)
        space = HybridSpace(tensor=(1, 2, 4, 8), context=None)
        table = evaluate_space(shape, cluster, space, global_batch=32, memory_limit=1e12, flops=150e12)
        assert set(table["tensor"].tolist()) == {1, 2} and set(table["context"].tolist()) == {1, 2, 4, 8, 16}
        assert any(n.startswith("tensor 4: not tried, " + why) for n in table.notes)
        assert len(
            evaluate_space(shape, cluster, HybridSpace(context=None), global_batch=32, memory_limit=1e12)
        ) == len(table)
        rng = np.random.default_rng(5)
        rows = np.flatnonzero(table["context"] > 1)
        assert_rows_equal_predict(table, cluster, rng.choice(rows, size=60, replace=False))
    # experts copy the shape's own (gated) MLP: the space's rows are predict's, row by row
    moe = evaluate_space(gqa, cluster, HybridSpace(experts=4, context=None), global_batch=32,
                         memory_limit=1e12, flops=150e12)  # fmt: skip
    assert len(moe) and set(moe["expert_parallel"].tolist()) > {1}
    rng = np.random.default_rng(6)
    assert_rows_equal_predict(moe, cluster, rng.choice(len(moe), size=min(40, len(moe)), replace=False))
