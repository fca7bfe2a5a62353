"""plan_parallelism: memory by hand, a free network's DP step by hand, the choice rule, errors."""

from __future__ import annotations

import math

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes import GPT3_XL, TransformerShape
from queuesgd.planning import plan_parallelism


def test_dp_and_fsdp_memory_by_hand():
    p = plan_parallelism(GPT3_XL, 16, "100Gbit/s", global_batch=64)
    dp, fsdp = p.candidates[0], p.candidates[1]
    assert (dp.strategy, fsdp.strategy) == ("DP", "FSDP")
    P = 2 * 1_315_723_264  # 16-bit parameters (TransformerShape's count, checked against Megatron's)
    act = 4 * GPT3_XL.activation_bytes(1)  # 64 / 16 = 4 sequences per worker
    # DP: parameters + gradients + 6 x parameters of Adam state (ZeRO's K = 12 against 2 bytes)
    assert dp.memory.total == pytest.approx(P + P + 6 * P + act, rel=1e-12)
    # FSDP (ZeRO-3): all of it sharded by 16, plus the gathered units: the largest unit is the embedding
    # ((50257 + 2048) x 2048 16-bit values = 214 MB > a block's 101 MB), held twice with prefetch
    embedding = 2 * (50257 + 2048) * 2048
    assert embedding > 2 * GPT3_XL.block_parameters
    assert fsdp.memory.total == pytest.approx(8 * P / 16 + act + 2 * embedding, rel=1e-12)


def test_dp_is_the_ring_allreduce_of_the_per_worker_batch():
    # A second model: DP (ShardedDataParallel stage 0) on G / n samples per worker is the fine model of
    # RingAllReduce with one message per layer on the same workload.
    from queuesgd import Cluster, RingAllReduce, predict

    tiny = TransformerShape(layers=4, hidden=64, heads=4, sequence=32, vocabulary=100)
    p = plan_parallelism(tiny, 4, "1Gbit/s", global_batch=8, latency="5us", flops=1e9)
    ring = RingAllReduce(fusion_bytes=None, fusion_time=None)
    ref = predict(ring, tiny.workload(2, flops=1e9), Cluster(4, "1Gbit/s", latency="5us"), "fine")
    assert p.candidates[0].throughput == pytest.approx(ref.throughput, rel=1e-12)


def test_the_best_is_the_fastest_that_fits():
    p = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64)
    fitting = [c for c in p.candidates if c.fits]
    assert all(c.memory.total <= 80e9 for c in fitting)
    assert all(c.memory.total > 80e9 for c in p.candidates if c.memory is not None and not c.fits)
    assert p.best is max(fitting, key=lambda c: c.throughput)
    # every candidate processes the global batch: D x M x microbatch = 64 for the pipelines
    for c in p.candidates:
        if c.strategy in ("PP", "DP x PP"):
            assert c.replicas * c.microbatches == 64 and c.replicas * c.stages == 8


def test_a_pipeline_deeper_than_the_model_is_listed_with_its_reason():
    p = plan_parallelism(GPT3_XL, 32, "10Gbit/s", global_batch=64)
    pp = [c for c in p.candidates if c.strategy == "PP"][0]
    assert math.isnan(pp.throughput) and not pp.fits and "Pipeline.stages" in pp.note


def test_bad_global_batch():
    with pytest.raises(InvalidParameterError, match="global_batch"):
        plan_parallelism(GPT3_XL, 8, "10Gbit/s", global_batch=60)


# ----------------------------------------------------------------------------- every parameter at the edge
TINY = TransformerShape(layers=4, hidden=64, heads=4, sequence=32, vocabulary=100)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"stages": None}, None),  # the default depths
        ({"stages": (2.7,)}, "stages[0]"),
        ({"stages": "24"}, "stages"),
        ({"stages": 4}, "stages"),
        ({"stages": (0,)}, "stages[0]"),
        ({"stages": (True,)}, "stages[0]"),
        ({"microbatch": 1.5}, "microbatch"),
        ({"microbatch": 0}, "microbatch"),
        ({"optimizer": "adamw9"}, "optimizer"),
        ({"optimizer": -1}, "optimizer"),
        ({"schedule": "zb"}, "schedule"),
        ({"flops": 0}, "flops"),
        ({"flops": float("nan")}, "flops"),
        ({"memory_limit": -1}, "memory_limit"),
        ({"latency": "-1us"}, "latency"),
    ],
)
def test_every_parameter_is_checked_by_name(kwargs, field):
    if field is None:
        p = plan_parallelism(TINY, 4, "10Gbit/s", global_batch=8, **kwargs)
        assert [c.stages for c in p.candidates] == [1, 1, 2, 4] and p.notes == ()
        return
    with pytest.raises(InvalidParameterError) as err:
        plan_parallelism(TINY, 4, "10Gbit/s", global_batch=8, **kwargs)
    assert str(err.value).startswith(f"{field}:"), str(err.value)


@pytest.mark.parametrize("model", ["gpt", None, 3, object()])
def test_a_model_without_a_shape_is_refused(model):
    with pytest.raises(InvalidParameterError, match="^model: .*TransformerShape"):
        plan_parallelism(model, 4, "10Gbit/s", global_batch=8)


def test_a_microbatch_larger_than_the_replicas_batch_is_noted():
    # 4 workers, global batch 8: PP (D = 1) takes 8 samples, DP x PP with S = 2 (D = 2) takes 4 each
    p = plan_parallelism(TINY, 4, "10Gbit/s", global_batch=8, microbatch=6)
    assert [c.strategy for c in p.candidates] == ["DP", "FSDP"]
    assert p.notes == (
        "DP x PP (S = 2, D = 2): not predicted, the micro-batch 6 is larger than the 4 samples each "
        "replica takes",
        "PP (S = 4, D = 1): not predicted, the micro-batch 6 does not divide the 8 samples each "
        "replica takes",
    )


def test_depths_that_do_not_apply_are_noted_when_asked_for():
    p = plan_parallelism(TINY, 4, "10Gbit/s", global_batch=8, stages=(1, 3, 2, 8, 2))
    assert [(c.strategy, c.stages) for c in p.candidates] == [
        ("DP", 1),
        ("FSDP", 1),
        ("DP x PP", 2),
        ("PP", 4),
    ]
    assert p.notes == (
        "stages 1: no pipeline (that is DP)",
        "stages 3: no pipeline, 3 does not divide the 4 workers",
        "stages 8: no pipeline, more stages than the 4 workers",
    )


def test_a_candidate_too_large_to_build_is_listed_not_raised():
    # 10**9 samples (MAX_GLOBAL_BATCH) in micro-batches of 1: a pipeline task graph far above its guard;
    # DP still runs
    p = plan_parallelism(TINY, 2, "10Gbit/s", global_batch=10**9)
    pp = [c for c in p.candidates if c.strategy == "PP"]
    assert len(pp) == 1 and math.isnan(pp[0].throughput) and not pp[0].fits and pp[0].note
    assert p.candidates[0].strategy == "DP" and p.candidates[0].throughput > 0


def test_plan_parallelism_is_exported_at_top_level():
    import queuesgd

    assert queuesgd.plan_parallelism is plan_parallelism
    assert "plan_parallelism" in queuesgd.__all__ and "TransformerShape" in queuesgd.__all__


def test_pipeline_stages_hold_their_blocks_activations():
    # audit 2026-11-28: the strategies planner gave Pipeline the blocks' activations as its stash, which
    # Pipeline splits in proportion to forward time, the output layer's included: stage 0 of GPT-3 XL on
    # 8 stages held 10.70 GB where its 3 blocks hold 3 x 8 x A/24 = 11.48 GB (Korthikanti per block,
    # 1F1B keeps min(M, S - s) micro-batches on stage s: Narayanan et al. SC'21, 2.2.1)
    plan = plan_parallelism(GPT3_XL, 8, "10Gbit/s", global_batch=64)
    pp = next(c for c in plan.candidates if c.strategy == "PP")
    work = GPT3_XL.workload(1)
    counts = pp.scheme.profile(work).counts  # layers per stage, forward order: embedding first, head last
    names = [layer.name for layer in reversed(work.layers)]
    per_block = GPT3_XL.activation_bytes(1) / GPT3_XL.layers
    memory = pp.scheme.memory(work)
    S, M, start = pp.stages, pp.microbatches, 0
    for s, count in enumerate(counts):
        blocks = sum(name.startswith("block") for name in names[start : start + count])
        start += count
        own = blocks * min(M, S - s) * per_block
        if s < S - 1:
            assert memory[s].activations == pytest.approx(own, rel=1e-12)
        else:  # the output layer's stage: its forward time's worth more, at the blocks' bytes per second
            assert memory[s].activations > own
    assert memory[0].activations == pytest.approx(3 * 8 * per_block, rel=1e-12)


@pytest.mark.parametrize("limit", [0, "0GB", -1, float("nan"), None, True])
@pytest.mark.parametrize("space", ["strategies", "hybrid"])
def test_both_planners_read_the_memory_limit_alike(limit, space):
    # audit 2026-11-28: space="strategies" took memory_limit=0 (and returned no plan) where the hybrid
    # space refused it; negative limits were refused saying ">= 0"
    with pytest.raises(InvalidParameterError, match=r"^memory_limit: got .*; accepted: bytes per GPU > 0"):
        plan_parallelism(GPT3_XL, 8, "10Gbit/s", global_batch=64, memory_limit=limit, space=space)
