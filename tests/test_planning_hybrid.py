"""plan_parallelism over the hybrid space: the vectorized closed form equals predict row by row; the space.

The independent sources: ``predict`` of each row's ``HybridParallel`` (its scalar closed form),
``collective_time`` for each group, and a brute-force enumeration of every configuration that
``HybridParallel`` itself accepts.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hybrid_rows import accepted_configurations, dgx, rel
from hybrid_rows import assert_rows_equal_predict as every_column_equals_predict

from queuesgd import Cluster, predict
from queuesgd.busbw import BusBandwidth, CollectiveTables
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, TransformerShape
from queuesgd.planning import plan_parallelism
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.schemes.parallel.hybrid_batch import ALGORITHM_NAMES, batch_collective_time

#: Megatron-LM SC'21, Table 1, last row: 1T parameters.
T1 = TransformerShape(layers=128, hidden=25600, heads=160, sequence=2048, vocabulary=51200, name="1t")
SMALL = TransformerShape(layers=8, hidden=256, heads=8, sequence=128, vocabulary=1000, name="small")


TABLES = CollectiveTables(
    intra=BusBandwidth([(1e3, 1e9), (1e6, 100e9), (1e9, 230e9)], ranks=8),
    inter=[
        BusBandwidth([(1e3, 0.5e9), (1e8, 40e9)], ranks=4),
        BusBandwidth([(1e3, 0.3e9), (1e8, 30e9)], ranks=64),
    ],
)


def assert_rows_equal_predict(table, cluster, rows) -> None:
    rows = list(rows)
    for i, (scheme, p) in zip(rows, every_column_equals_predict(table, cluster, rows)):
        # the slowest stage's: the last with its head, or (the ends sending one message less, the head
        # shorter than a message) a middle one
        head = float(table["head"][i]) if p.details["slowest_stage"] == scheme.pipeline - 1 else 0.0
        assert rel(p.breakdown["compute"], scheme.microbatches * (float(table["compute"][i]) + head)) <= 1e-12


H100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")


@pytest.mark.parametrize(
    ("shape", "cluster", "batch", "sample", "compute"),
    [
        (T1, dgx(3072), 3072, 300, None),  # the benchmark's question
        (GPT3_XL, dgx(64, collectives=TABLES), 512, 300, None),  # measured bus bandwidth, not the model
        (SMALL, Cluster(16, "10Gbit/s", "20us"), 64, 200, None),  # a flat cluster
        (SMALL, dgx(4), 48, 200, None),  # less than a node
        (GPT3_XL, dgx(64), 512, 300, H100),  # kernel times from the H100 table, per (b, t, p, SP, recompute)
        (SMALL, dgx(16, speeds=[0.5] + [1.0] * 15), 64, 200, H100),  # ... paced by the slowest GPU
    ],
    ids=["1T-3072", "tables", "flat", "partial-node", "compute-h100", "compute-slow-gpu"],
)
def test_a_random_sample_equals_predict_row_by_row(shape, cluster, batch, sample, compute):
    space = HybridSpace(schedule=("1f1b", "gpipe", "interleaved"))
    table = evaluate_space(
        shape, cluster, space, global_batch=batch, memory_limit=80e9, flops=150e12, compute=compute
    )
    assert table.compute is compute
    rng = np.random.default_rng(24)
    rows = rng.choice(len(table), size=min(sample, len(table)), replace=False)
    assert_rows_equal_predict(table, cluster, rows)


def test_collectives_on_arrays_equal_collective_time():
    rng = np.random.default_rng(7)
    for cluster in (dgx(256), dgx(256, collectives=TABLES), Cluster(32, "25Gbit/s", "10us")):
        gpn = cluster.per_node
        for op in ("allreduce", "reduce_scatter", "allgather"):
            groups = [(g, k) for g in (1, 2, 4, 8, 16, 32, 64, 128) for k in (1, 2, 4, 8) if k <= min(g, gpn)]
            groups = [(g, k) for g, k in groups if g % k == 0 and g <= cluster.workers]
            g, k = np.array(groups).T
            S = 10.0 ** rng.uniform(0, 10, size=g.shape)
            seconds, algo = batch_collective_time(op, S, cluster, g, k)
            for j in range(len(g)):
                ref = collective_time(op, S[j], cluster, int(g[j]), per_node=int(k[j]))
                assert rel(ref.seconds, float(seconds[j])) <= 1e-12
                assert ALGORITHM_NAMES[algo[j]] == ref.algorithm or math.isclose(
                    ref.times.get(ALGORITHM_NAMES[algo[j]], math.inf), ref.seconds, rel_tol=1e-12
                )


def test_the_space_is_every_configuration_hybrid_parallel_accepts():
    # brute force: every (t, p, b, schedule, v, recompute, zero, SP) that HybridParallel and its
    # check() accept with G = d m b, less the documented duplicates
    cluster, G = dgx(16), 32
    space = HybridSpace(schedule=("1f1b", "gpipe", "interleaved"))
    table = evaluate_space(SMALL, cluster, space, global_batch=G, memory_limit=1e12)
    names = ("tensor", "pipeline", "microbatch", "schedule", "virtual_stages", "recompute", "zero")
    names += ("sequence_parallel",)
    got = {tuple(table.row(i)[k] for k in names) for i in range(len(table))}
    assert len(got) == len(table)  # no duplicates
    want = accepted_configurations(SMALL, cluster, G, names, schedules=("1f1b", "gpipe", "interleaved"))
    assert got == want


def test_the_plan_is_the_fastest_that_fits_and_matches_predict():
    c = dgx(64)
    plan = plan_parallelism(GPT3_XL, c, global_batch=512, memory_limit="8GB", space="hybrid", flops=150e12)
    table = plan.table
    fits = table["fits"]
    assert np.all(table["memory"][fits] <= 8e9) and np.all(table["memory"][~fits] > 8e9)
    assert plan.best.throughput == pytest.approx(float(table["throughput"][fits].max()), rel=1e-12)
    speeds = [c_.throughput for c_ in plan.candidates]
    assert speeds == sorted(speeds, reverse=True) and len(plan.candidates) == 10
    for cand in plan.candidates:
        assert cand.fits and cand.memory.total <= 8e9 and cand.method == "closed_form"
        w = GPT3_XL.workload(cand.microbatch, flops=150e12)
        assert cand.throughput == predict(cand.scheme, w, c).throughput
        assert cand.replicas * cand.microbatches * cand.microbatch == 512
        assert cand.replicas * cand.stages * cand.scheme.tensor == 64
    row = plan.rows()[0]
    assert (row["T"], row["b"], row["zero"]) == (
        plan.best.scheme.tensor,
        plan.best.microbatch,
        plan.best.scheme.zero,
    )


def test_axes_restrict_the_space_and_notes_say_why_a_value_never_applies():
    space = HybridSpace(
        tensor=(3, 8), pipeline=(5, 4), recompute=("full",), zero=(1,), sequence_parallel=(True,)
    )
    plan = plan_parallelism(T1, dgx(3072), global_batch=3072, space=space)
    t = plan.table
    assert set(t["tensor"]) == {8} and set(t["pipeline"]) == {4} and set(t["recompute"]) == {"full"}
    assert set(t["zero"]) == {1} and set(t["sequence_parallel"]) == {True}
    assert "tensor 3: not tried, does not divide the 160 heads" in plan.notes
    assert "pipeline 5: not tried, does not divide the 128 layers" in plan.notes


def test_nothing_fits_is_said():
    plan = plan_parallelism(T1, dgx(64), global_batch=64, space="hybrid", memory_limit="10GB")
    assert plan.best is None and plan.candidates == ()
    assert any(n.startswith("none fits") for n in plan.notes)


def test_the_strategies_space_is_unchanged_with_a_cluster_given():
    a = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64)
    b = plan_parallelism(GPT3_XL, Cluster(8, "100Gbit/s", "10us"), global_batch=64)
    assert [c.throughput for c in a.candidates] == [c.throughput for c in b.candidates]
    assert a.table is None and all(c.microbatch is None for c in a.candidates)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"space": "everything"}, "space"),
        ({"space": 3}, "space"),
        ({"space": "hybrid", "stages": (2,)}, "stages"),
        ({"space": "hybrid", "microbatch": 2}, "microbatch"),
        ({"space": "hybrid", "schedule": "1f1b"}, "schedule"),
        ({"bandwidth": "1Gbit/s"}, "bandwidth"),
        ({"latency": "1us"}, "latency"),
        ({"space": "hybrid", "global_batch": 0}, "global_batch"),
        ({"space": "hybrid", "memory_limit": "-1GB"}, "memory_limit"),
        ({"space": "hybrid", "optimizer": "adamw9"}, "optimizer"),
        ({"space": "hybrid", "flops": 0}, "flops"),
    ],
)
def test_bad_arguments_name_their_field(kwargs, field):
    args = {"global_batch": 64, **kwargs}
    with pytest.raises(InvalidParameterError, match=f"^{field}"):
        plan_parallelism(GPT3_XL, dgx(64), **args)


def test_a_model_without_shapes_and_a_missing_bandwidth():
    class Alike:
        def workload(self, b, flops=1): ...
        def activation_bytes(self, b): ...
        def boundary_bytes(self, b): ...

    with pytest.raises(InvalidParameterError, match="^model"):
        plan_parallelism(Alike(), dgx(8), global_batch=8, space="hybrid")
    with pytest.raises(InvalidParameterError, match="^bandwidth"):
        plan_parallelism(GPT3_XL, 8, global_batch=8)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tensor": (0,)}, "HybridSpace.tensor[0]"),
        ({"pipeline": "4"}, "HybridSpace.pipeline"),
        ({"microbatch": (1.5,)}, "HybridSpace.microbatch[0]"),
        ({"schedule": "1f1b"}, "HybridSpace.schedule"),
        ({"schedule": ("zigzag",)}, "HybridSpace.schedule[0]"),
        ({"virtual_stages": (True,)}, "HybridSpace.virtual_stages[0]"),
        ({"recompute": ("some",)}, "HybridSpace.recompute[0]"),
        ({"zero": (True,)}, "HybridSpace.zero[0]"),
        ({"zero": ()}, "HybridSpace.zero"),
        ({"sequence_parallel": (1,)}, "HybridSpace.sequence_parallel"),
        ({"keep": 0}, "HybridSpace.keep"),
    ],
)
def test_hybrid_space_fields_are_checked(kwargs, field):
    with pytest.raises(InvalidParameterError, match="^" + re.escape(field) + ":"):
        HybridSpace(**kwargs)


def test_table_columns_and_rows():
    t = plan_parallelism(SMALL, dgx(8), global_batch=16, space="hybrid").table
    assert len(t.to_pandas()) == len(t)
    with pytest.raises(InvalidParameterError, match="^column"):
        t["nope"]
    assert not t["throughput"].flags.writeable


def test_the_hybrid_plan_takes_a_compute_model():
    # A constant table without memory traffic is one sustained rate, PEAK x EFF: the same plan as
    # flops=PEAK x EFF, row by row (full recomputation is left out: the compute model does not rerun
    # the output layer, the rate model reruns a third of everything -- tests/schemes/test_hybrid_compute.py)
    space = HybridSpace(recompute=(None, "selective"), keep=3)
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    c = dgx(64)
    shaped = plan_parallelism(GPT3_XL, c, global_batch=512, space=space, compute=cm, memory_limit="8GB")
    flat = plan_parallelism(GPT3_XL, c, global_batch=512, space=space, flops=0.5e15, memory_limit="8GB")
    assert len(shaped.table) == len(flat.table) > 1000
    np.testing.assert_allclose(shaped.table["throughput"], flat.table["throughput"], rtol=1e-9)
    assert shaped.table.compute is cm and flat.table.compute is None
    assert all(cand.scheme.compute_model is cm for cand in shaped.candidates)
    # the H100 table: the candidates are predict's with HybridParallel(compute_model=H100)
    h = plan_parallelism(GPT3_XL, c, global_batch=512, space=space, compute=H100, memory_limit="8GB")
    for cand in h.candidates:
        w = GPT3_XL.workload(cand.microbatch, compute=H100)
        assert cand.throughput == predict(cand.scheme, w, c).throughput
        assert "GEMM table" in predict(cand.scheme, w, c).reason
    with pytest.raises(InvalidParameterError, match="^compute"):
        plan_parallelism(GPT3_XL, c, global_batch=512, space=space, compute="h100-bf16")


def test_each_candidate_shows_its_own_formula():
    # The plan derives one formula per kind of candidate; sequence parallelism (no all-gather after a
    # send) and the backward's TP overlap change the expression, so each candidate's must be its own.
    from queuesgd.planning import _formula

    c = Cluster(16, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    space = HybridSpace(tensor=(8,), pipeline=(2,), sequence_parallel=(False, True), tp_overlap=(False, True),
                        schedule=("1f1b",), zero=(0,), recompute=(None,), keep=40)  # fmt: skip
    plan = plan_parallelism(GPT3_XL, c, global_batch=16, space=space, flops=150e12)
    kinds = {(x.scheme.sequence_parallel, x.scheme.tp_overlap) for x in plan.candidates}
    assert len(kinds) == 4
    for x in plan.candidates:
        assert x.formula == _formula(x.scheme)


def test_a_microbatch_or_chunk_count_no_configuration_takes_gets_a_note():
    # audit 2026-11-28: microbatch=(3,) with a global batch of 16 gave an empty table and no note, where
    # unusable tensor and pipeline degrees each get one
    from queuesgd.hybrid_space import HybridSpace, evaluate_space
    from queuesgd.model_shapes import GPT3_XL

    c = Cluster(16, "25GB/s", gpus_per_node=8, node_bandwidth="300GB/s")
    t = evaluate_space(GPT3_XL, c, HybridSpace(microbatch=(3, 1)), global_batch=16, memory_limit="80GB")
    assert set(t.columns["microbatch"].tolist()) == {1}  # 3 divides no replica's share of 16 (1, 2, ..., 16)
    assert t.notes == ("microbatch 3: not tried, no configuration takes it (b must divide a replica's share "
                       "of the global batch 16)",)  # fmt: skip
    five = HybridSpace(virtual_stages=(5,), schedule=("interleaved",))
    none = evaluate_space(GPT3_XL, c, five, global_batch=16, memory_limit="80GB")
    assert len(none) == 0 and none.notes[0].startswith("virtual_stages 5: not tried")  # 24 layers: p v | 24
