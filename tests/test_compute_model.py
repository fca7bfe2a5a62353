"""The shape-following compute model against the textbook FLOP count, a constant table and the H100 table.

Independent sources: Narayanan et al. (SC 2021), eq. 3 for the FLOPs of an
iteration; the raw rows of the measured H100 table (read here with ``json``,
not through :mod:`queuesgd.gemm_table`) for the efficiencies.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.model_shapes import GPT3_XL, TransformerShape

TABLE = Path(__file__).resolve().parents[1] / "queuesgd" / "data" / "gemm" / "h100-bf16.json"
GPT3_175B = TransformerShape(96, 12288, 96, 2048, 51200, name="gpt3-175b")
SMALL = TransformerShape(24, 1024, 16, 2048, 51200, name="h1024")
ONE_T = TransformerShape(128, 25600, 160, 2048, 51200, name="1t")  # Narayanan et al. Table 1's largest


def whole_model_flops(shape: TransformerShape, b: int, t: int, recompute: bool) -> float:
    """Every rank's operations over the blocks (3 or 4 passes) and the output layer (3 passes)."""
    block = t * sum(o.flops for o in shape.operations(b, tensor=t))
    head = t * sum(o.flops for o in shape.head_operations(b, tensor=t))
    return shape.layers * (4 if recompute else 3) * block + 3 * head


# ---- (a) FLOPs: the textbook count ---------------------------------------------------------------
@pytest.mark.parametrize("shape", [GPT3_175B, ONE_T, SMALL])
@pytest.mark.parametrize(("b", "t"), [(1, 1), (1, 8), (4, 2)])
def test_operation_flops_are_narayanans_eq3_for_the_whole_model(shape, b, t):
    B, s, l, h, V = b, shape.sequence, shape.layers, shape.hidden, shape.vocabulary
    with_recompute = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    without = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    assert whole_model_flops(shape, b, t, recompute=True) == pytest.approx(with_recompute, rel=1e-12)
    assert whole_model_flops(shape, b, t, recompute=False) == pytest.approx(without, rel=1e-12)


def test_the_six_products_and_their_split_over_tensor_ranks():
    ops = {o.name: o for o in GPT3_175B.operations(2, tensor=8) if o.kind == "gemm"}
    M, h = 2 * 2048, 12288
    assert (ops["qkv"].m, ops["qkv"].n, ops["qkv"].k) == (M, 3 * h // 8, h)  # column-parallel
    assert (ops["proj"].m, ops["proj"].n, ops["proj"].k) == (M, h, h // 8)  # row-parallel
    assert (ops["fc1"].n, ops["fc2"].k) == (4 * h // 8, 4 * h // 8)
    assert (ops["scores"].batch, ops["scores"].k, ops["context"].n) == (2 * 96 // 8, 128, 128)
    assert {o.name for o in GPT3_175B.operations(1) if o.core} == {
        "scores",
        "softmax",
        "attention_dropout",
        "context",
    }


# ---- (b) a constant-efficiency table: FLOPs / (peak x eff) exactly ------------------------------
@pytest.mark.parametrize("recompute", [None, "full"])
def test_constant_table_gives_flops_over_peak_times_efficiency(recompute):
    peak, eff = 989.4e12, 0.42
    cm = ComputeModel(GemmTable.constant(eff, peak_flops=peak), memory_bandwidth=None)
    for o in cm.operation_times(GPT3_175B.operations(1, tensor=4)):
        assert o.seconds == pytest.approx(o.operation.flops / (peak * eff), rel=1e-12)
    t, p = 4, 8
    total = whole_model_flops(GPT3_175B, 1, t, recompute=recompute == "full")
    head = 3 * 2.0 * 2048 * 12288 * 51200  # the logits 2 b s h V, forward + backward, never recomputed
    got = cm.microbatch_time(GPT3_175B, 1, tensor=t, pipeline=p, recompute=recompute)
    # the last stage: its l/p blocks, and the whole output layer (vocabulary-parallel over t)
    assert got == pytest.approx(((total - head) / p + head) / t / (peak * eff), rel=1e-12)


def test_memory_bound_kernels_at_the_memory_bandwidth_without_table_rows():
    t = TransformerShape(1, 64, 4, 32, 100)
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e12), memory_bandwidth="1GB/s")
    times = {o.operation.name: o for o in cm.operation_times(t.operations(1))}
    # layer norm: read and write 32 x 64 values of 2 bytes = 8192 B at 1e9 B/s
    assert times["layernorm1"].seconds == pytest.approx(8192 / 1e9)
    # softmax over b a s^2 = 4 x 32 x 32 scores, read + write, 2 bytes
    assert times["softmax"].seconds == pytest.approx(2 * 4 * 32 * 32 * 2 / 1e9)
    # a product here is memory bound at 1 GB/s: (32x64 + 64x192 + 32x192) x 2 bytes
    assert times["qkv"].bound == "memory"
    assert times["qkv"].seconds == pytest.approx((32 * 64 + 64 * 192 + 32 * 192) * 2 / 1e9)


# ---- (c) the H100 table: small products run less efficiently ------------------------------------
def raw_rows() -> tuple[list[dict], list[dict]]:
    data = json.loads(TABLE.read_text())
    return data["gemm"], data["elementwise"]


def hand_rate(volume: float) -> float:
    """FLOP/s at a product's volume, by hand: the mean of the rows of that volume (it is measured)."""
    gemm, _ = raw_rows()
    same = [r["tflops"] for r in gemm if r["M"] * r["N"] * r["K"] == volume]
    assert same, f"no measured row of volume {volume}"
    return sum(same) / len(same) * 1e12


def hand_bandwidth(kind: str, nbytes: float) -> float:
    """Bytes/s of a memory-bound kernel by hand: linear in log2(bytes) between the table's two rows."""
    _, ew = raw_rows()
    pts = sorted((math.log2(4 * r["numel"]), r["GBps"] * 1e9) for r in ew if r["op"] == kind)
    x = math.log2(nbytes)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    raise AssertionError("outside the measured sizes")


@pytest.mark.parametrize("shape", [SMALL, GPT3_175B])
def test_h100_layer_time_is_the_hand_evaluation_of_the_table(shape):
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    times = cm.operation_times(shape.operations(1, tensor=8))
    hand = 0.0
    for o in times:
        op = o.operation
        assert not o.clamped
        if op.kind == "gemm":
            compute = op.flops / hand_rate(op.batch * op.m * op.n * op.k)
            hand += max(compute, op.bytes / 3.35e12)
        else:  # the H100 table measured no softmax: the attention's softmax streams like a GeLU
            hand += op.bytes / hand_bandwidth("gelu" if op.kind == "softmax" else op.kind, op.bytes)
    assert {o.operation.kind for o in times} >= {"softmax", "gelu", "layernorm"}
    assert sum(o.seconds for o in times) == pytest.approx(hand, rel=1e-12)
    assert cm.forward_times(shape, 1, tensor=8)[0] == pytest.approx(hand, rel=1e-12)


def test_h1024_at_tp8_runs_its_products_far_below_gpt3s():
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")

    def product_rate(shape: TransformerShape) -> float:
        ops = [o for o in cm.operation_times(shape.operations(1, tensor=8)) if o.operation.kind == "gemm"]
        return sum(o.operation.flops for o in ops) / sum(o.seconds for o in ops)

    small, big = product_rate(SMALL), product_rate(GPT3_175B)
    # h = 1024, t = 8: qkv 84-86, proj 26-28, fc1/fc2 102-116 TFLOP/s measured; GPT-3: 578-716
    assert 50e12 < small < 90e12 and 550e12 < big < 700e12
    # hence the same compute model predicts the small model's layer 8x slower per FLOP
    assert big / small > 8
    # and one rate per model would not: FLOPs per layer scale by 144x, time by far less
    flops_ratio = GPT3_175B.block_flops(1) / SMALL.block_flops(1)
    time_ratio = cm.forward_times(GPT3_175B, 1, tensor=8)[0] / cm.forward_times(SMALL, 1, tensor=8)[0]
    assert flops_ratio == pytest.approx(144 * (1 + 2048 / 73728) / (1 + 2048 / 6144), rel=1e-12)
    assert time_ratio < flops_ratio / 5


def test_another_micro_batch_and_tensor_degree_without_a_new_anchor():
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    # a larger micro-batch makes every product larger: each runs at least as efficiently here
    for t in (1, 2, 4, 8):
        one = {o.operation.name: o.efficiency for o in cm.operation_times(SMALL.operations(1, tensor=t))}
        four = {o.operation.name: o.efficiency for o in cm.operation_times(SMALL.operations(4, tensor=t))}
        assert all(four[k] >= one[k] for k in one if not math.isnan(one[k]))
    # splitting h = 1024 over more ranks: each rank's time falls far less than 1/t
    f1 = cm.forward_times(SMALL, 1, tensor=1)[0]
    f8 = cm.forward_times(SMALL, 1, tensor=8)[0]
    assert f8 > f1 / 8 * 3


def test_selective_recompute_adds_the_attention_core_forward():
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    ops = cm.operation_times(GPT3_175B.operations(1, tensor=8))
    core = sum(o.seconds for o in ops if o.operation.core)
    base = cm.microbatch_time(GPT3_175B, 1, tensor=8, pipeline=8)
    sel = cm.microbatch_time(GPT3_175B, 1, tensor=8, pipeline=8, recompute="selective")
    full = cm.microbatch_time(GPT3_175B, 1, tensor=8, pipeline=8, recompute="full")
    assert sel - base == pytest.approx(96 / 8 * core, rel=1e-12)
    assert full - base == pytest.approx(96 / 8 * sum(o.seconds for o in ops), rel=1e-12)


def test_workload_from_the_compute_model():
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    w = GPT3_XL.workload(2, compute=cm)
    assert w.compute_time == pytest.approx(GPT3_XL.iteration_flops(2) / 0.5e15, rel=1e-12)
    assert w.layers[1].backward_time == pytest.approx(2 * w.layers[1].forward_time)
    with pytest.raises(InvalidParameterError, match="compute"):
        GPT3_XL.workload(1, compute="h100")


def test_edges_are_checked_by_name():
    table = GemmTable.constant(0.5, peak_flops=1e15)
    with pytest.raises(InvalidParameterError, match="ComputeModel.table"):
        ComputeModel("h100-bf16", "1TB/s")
    with pytest.raises(InvalidParameterError, match="ComputeModel.memory_bandwidth"):
        ComputeModel(table, "fast")
    cm = ComputeModel(table, "1TB/s")
    with pytest.raises(InvalidParameterError, match="tensor"):
        cm.forward_times(SMALL, 1, tensor=3)  # 16 heads
    with pytest.raises(InvalidParameterError, match="recompute"):
        cm.microbatch_time(SMALL, 1, recompute="some")
    with pytest.raises(InvalidParameterError, match="shape"):
        cm.forward_times("24:1024:16:2048:51200")
    with pytest.raises(InvalidParameterError, match=r"operations\[0\]"):
        cm.operation_times([1])


def test_plan_parallelism_takes_the_compute_model():
    from queuesgd import plan_parallelism

    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    # a constant table without memory traffic is one rate: the plan at flops = 0.5e15, row by row
    shaped = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64, compute=cm)
    flat = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64, flops=0.5e15)
    # (PP, 26 layers on 8 stages, is left out: its balanced split has ties that 1e-16 differences in the
    # layer times break differently -- counts (4,3,3,3,3,3,4,3) vs (4,3,3,3,3,4,3,3) -- 2.7% apart)
    assert [c.strategy for c in shaped.candidates][-1] == "PP"
    got, want = ([c.throughput for c in p.candidates[:-1]] for p in (shaped, flat))
    assert got == pytest.approx(want, rel=1e-9)
    h100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    p = plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64, compute=h100)
    assert p.best is not None and p.best.throughput > 0
    with pytest.raises(InvalidParameterError, match="compute"):
        plan_parallelism(GPT3_XL, 8, "100Gbit/s", global_batch=64, compute="h100")
