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
