"""HybridParallel's checks across fields (queuesgd/schemes/parallel/hybrid_checks.py).

Each refusal names its field; each accepted neighbour gives the number the scheme's closed form gives.
"""

from __future__ import annotations

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError

SHAPE = q.TransformerShape(8, 256, 8, 128, 1000)


def dgx(n: int = 8) -> q.Cluster:
    return q.Cluster(n, "25GB/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s")


def test_hidden_bytes_beside_a_shape_is_refused_where_it_was_ignored():
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.hidden_bytes.*0 with shape="):
        q.HybridParallel(shape=SHAPE, tensor=8, hidden_bytes="10GB")
    # 0 (the default) and "0B" stay accepted
    assert q.HybridParallel(shape=SHAPE, tensor=8, hidden_bytes="0B").hidden_bytes == 0.0


def test_context_parallelism_needs_a_shape():
    # it used to be accepted and to fail inside predict with an AttributeError
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.context.*1 without shape="):
        q.HybridParallel(context=2)


@pytest.mark.parametrize(("pipeline", "virtual", "layers"), [(8, 1, 2), (4, 1, 6), (2, 2, 6), (2, 10**6, 2)])
def test_a_given_layer_count_must_split_into_p_v_chunks(pipeline, virtual, layers):
    schedule = "interleaved" if virtual > 1 else "1f1b"
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.layers.*multiple of p x v"):
        q.HybridParallel(pipeline=pipeline, virtual_stages=virtual, schedule=schedule, microbatches=pipeline,
                         layers=layers)  # fmt: skip


def test_uneven_stages_and_the_abstract_default_stay_accepted():
    # stage_layers gives the split itself; without layers one abstract layer's compute splits evenly
    assert q.HybridParallel(pipeline=2, layers=5, stage_layers=(2, 3)).stage_layers == (2, 3)
    w = q.Workload("80ms", "100MB", batch_size=8)
    s = q.HybridParallel(pipeline=4, microbatches=8)
    p = q.predict(s, w, dgx())
    assert p.details["bubble"] == pytest.approx(3 / 8, rel=1e-12)  # (p - 1) / m
    given = q.predict(s.replace(layers=8), w, dgx())
    assert given.details["bubble"] == pytest.approx(3 / 8, rel=1e-12)


def test_the_scaling_factor_of_a_compute_model_compares_with_one_gpu_under_the_same_model():
    # the baseline was the workload's own compute, which a compute model does not use: one GPU showed 1.087
    from queuesgd.compute_model import ComputeModel
    from queuesgd.gemm_table import load_gemm_table

    cm = ComputeModel(load_gemm_table("h100-bf16"), "3.35TB/s")
    s = q.HybridParallel(shape="24:1024:16:2048:51200", compute_model=cm)
    w = s.shape.workload(1)
    alone = q.predict(s, w, q.Cluster(1, "1TB/s")).throughput
    r = q.sweep(s, w, q.Cluster(1, "1TB/s"), workers=[1])
    assert r.columns["scaling_factor"][0] == pytest.approx(1.0, rel=1e-12)
    t8 = s.replace(tensor=8)
    r8 = q.sweep(t8, w, dgx(8), workers=[8])
    got = q.predict(t8, w, dgx(8)).throughput
    assert r8.columns["scaling_factor"][0] == pytest.approx(got / (8 * alone), rel=1e-12)
    # without a compute model the baseline is still the workload's compute
    w8 = q.Workload("80ms", "100MB", batch_size=8)
    plain = q.sweep(q.HybridParallel(tensor=8), w8, dgx(8), workers=[8])
    assert plain.columns["scaling_factor"][0] == pytest.approx(
        plain.columns["throughput"][0] / (8 * 8 / 0.08), rel=1e-12)  # fmt: skip


def test_the_interleaved_schedule_needs_stages_to_interleave():
    # with one stage it was accepted and changed nothing (v ignored: the step was 1F1B's)
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.schedule.*interleaving needs stages"):
        q.HybridParallel(shape=SHAPE, schedule="interleaved", virtual_stages=2, microbatches=4)
    s = q.HybridParallel(shape=SHAPE, pipeline=2, schedule="interleaved", virtual_stages=2, microbatches=4)
    p = q.predict(s, SHAPE.workload(1), dgx(2))
    assert p.details["bubble"] == pytest.approx((2 - 1) / (2 * 4), rel=1e-12)  # (p - 1) / (v m)
