"""HybridParallel with a compute model (issue 24, point 3): the micro-batch's compute follows the shape."""

from __future__ import annotations

import dataclasses

import pytest

import queuesgd as q
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.model_shapes import TransformerShape

GPT3 = TransformerShape(96, 12288, 96, 2048, 51200, name="gpt3-175b")
SMALL = TransformerShape(24, 1024, 16, 2048, 51200, name="h1024")
PEAK, EFF = 989.4e12, 0.5


def dgx(workers: int) -> q.Cluster:
    return q.Cluster(workers, 25e9, 5e-6, gpus_per_node=8, node_bandwidth=300e9, node_latency=2e-6, rails=8)


@pytest.mark.parametrize("recompute", [None, "selective"])
def test_a_constant_table_is_the_flop_rate_model(recompute):
    # Without memory traffic, a constant efficiency is one sustained rate PEAK x EFF: the scheme's own
    # C / (t p) model with the workload at that rate (selective: the attention core's 4 b s^2 h FLOPs).
    cm = ComputeModel(GemmTable.constant(EFF, peak_flops=PEAK), memory_bandwidth=None)
    w = GPT3.workload(1, flops=PEAK * EFF)
    base = q.HybridParallel(tensor=8, pipeline=8, microbatches=16, shape=GPT3, recompute=recompute)
    shaped = dataclasses.replace(base, compute_model=cm)
    c = dgx(128)
    assert shaped.times(w, c).compute == pytest.approx(base.times(w, c).compute, rel=1e-12)
    assert q.predict(shaped, w, c).throughput == pytest.approx(q.predict(base, w, c).throughput, rel=1e-12)


def test_full_recompute_reruns_the_blocks_not_the_output_layer():
    cm = ComputeModel(GemmTable.constant(EFF, peak_flops=PEAK), memory_bandwidth=None)
    s = q.HybridParallel(
        tensor=8, pipeline=8, microbatches=16, shape=GPT3, recompute="full", compute_model=cm
    )
    b, sq, l, h, V = 1, 2048, 96, 12288, 51200
    eq3 = 96 * b * sq * l * h**2 * (1 + sq / (6 * h) + V / (16 * l * h))  # Narayanan et al. eq. 3
    logits = 3 * 2 * b * sq * h * V  # forward + backward of the output layer, never recomputed
    tm = s.times(GPT3.workload(1), dgx(128))
    # every stage runs l/p blocks four times (t = 8 ranks), the last stage the output layer too
    assert tm.compute == pytest.approx((eq3 - logits) / 64 / (PEAK * EFF), rel=1e-12)
    assert tm.head == pytest.approx(logits / 8 / (PEAK * EFF), rel=1e-12)


def test_h100_table_is_used_per_tensor_degree_and_said():
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    w = SMALL.workload(1)
    c = dgx(8)
    per = {}
    for t in (1, 8):
        s = q.HybridParallel(tensor=t, data=8 // t, microbatches=4, shape=SMALL, compute_model=cm)
        sol = q.predict(s, w, c)
        per[t] = sol.breakdown["compute"] / 4
        assert per[t] == pytest.approx(cm.microbatch_time(SMALL, 1, tensor=t), rel=1e-12)
        assert "GEMM table" in sol.reason
    # h = 1024 split 8 ways: each rank's products run far less efficiently, so TP 8 is not 8x faster
    assert per[8] > 3 * per[1] / 8
    # a slower GPU paces the compute as before
    slow = dataclasses.replace(c, speeds=[0.5] + [1.0] * 7)
    s = q.HybridParallel(tensor=8, microbatches=4, shape=SMALL, compute_model=cm)
    tm = s.times(w, slow)
    assert tm.compute + tm.head == pytest.approx(2 * per[8], rel=1e-12)


def test_compute_model_is_checked_at_the_edge():
    cm = ComputeModel(GemmTable.constant(EFF, peak_flops=PEAK), memory_bandwidth=None)
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.compute_model"):
        q.HybridParallel(layers=4, compute_model=cm)  # no shape: no kernels
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.compute_model"):
        q.HybridParallel(shape=GPT3, compute_model="h100-bf16")
