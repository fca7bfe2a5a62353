"""Flash attention in TransformerShape: one fused attention kernel, its compute model and its memory.

The independent sources: the eager kernels' own FLOPs (the fused kernel runs the same two products),
the operands and statistics of the kernel counted by hand, the roofline and the interpolation of a
two-row GEMM table written out here, FlashAttention-2's five backward products against two (2.5), the
activations a flash block keeps listed tensor by tensor, and ``predict`` of each ``HybridParallel``
against the planner's array evaluation row by row.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hybrid_rows import assert_rows_equal_predict, dgx

from queuesgd import Cluster, HybridParallel
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, LLAMA_STYLE, TransformerShape
from queuesgd.model_shapes_llama import parse_shape_text
from queuesgd.schemes.parallel.megatron import layer_activation_bytes

#: A small Llama-like model with flash attention: 4 layers, hidden 512, 8 heads of 64, 2 key-value heads.
SMALL = TransformerShape(4, 512, 8, 1024, 32000, "small-flash", kv_heads=2, ffn_hidden=1376, **LLAMA_STYLE)
#: One that t = 8 splits: 16 heads of 64, 8 key-value heads, SwiGLU of 2816 (= 8 x 352).
WIDE = TransformerShape(4, 1024, 16, 2048, 32000, "wide-flash", kv_heads=8, ffn_hidden=2816, **LLAMA_STYLE)
H100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")


# ---- the field and its text form -----------------------------------------------------------------------
@pytest.mark.parametrize("value", ["Flash", "sdpa", None, 1, True])
def test_a_bad_attention_is_refused_by_name(value):
    with pytest.raises(InvalidParameterError) as err:
        TransformerShape(2, 64, 8, 16, 100, attention=value)
    assert str(err.value).startswith("TransformerShape.attention:")


def test_eager_is_the_default_and_the_llama_presets_train_with_flash():
    assert TransformerShape(2, 64, 8, 16, 100).attention == "eager" and GPT3_XL.attention == "eager"
    assert {s.attention for s in (LLAMA3_8B, LLAMA3_70B, LLAMA3_405B)} == {"flash"}
    # the text form: :flash sets it, :llama includes it, and anything else is still refused
    assert parse_shape_text("2:64:8:16:100:flash") == TransformerShape(2, 64, 8, 16, 100, attention="flash")
    llama = parse_shape_text("32:4096:32:8192:128256:kv=8:ffn=14336:llama")
    assert replace(llama, name="llama3-8b") == LLAMA3_8B
    assert HybridParallel(shape="4:512:8:1024:32000:kv=2:ffn=1376:llama").shape.attention == "flash"
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel.shape: .*:flash.*not 'flash2'"):
        HybridParallel(shape="2:64:8:16:100:flash2")


# ---- the kernel ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("t", "c"), [(1, 1), (2, 1), (2, 4)])
@pytest.mark.parametrize("b", [1, 3])
def test_one_attention_kernel_with_the_eager_products_flops(t, c, b):
    eager = replace(SMALL, attention="eager")
    flash_ops = SMALL.operations(b, tensor=t, context=c)
    eager_ops = {o.name: o for o in eager.operations(b, tensor=t, context=c)}
    (attention,) = [o for o in flash_ops if o.core]
    assert (attention.name, attention.kind) == ("attention", "flash")
    assert attention.flops == eager_ops["scores"].flops + eager_ops["context"].flops
    # by hand: b a / t heads of (s/c x 64) @ (64 x s), twice (scores, context)
    q, s, heads = 1024 // c, 1024, b * 8 // t
    assert attention.flops == 2 * (2 * heads * q * s * 64)
    assert (attention.m, attention.n, attention.k, attention.batch) == (q, s, 64, heads)
    # bytes: Q read and O written (b q h / t values each), K and V read at the 2 key-value heads' width
    # (b s x 2 x 64 / t each), 16-bit; the log-sum-exp, one fp32 per head and query
    assert attention.bytes == (2 * b * q * 512 / t + 2 * b * s * 128 / t) * 2 + 4 * heads * q
    # the other kernels are eager's, in order; the products still sum to the block's FLOPs
    rest = [o.name for o in flash_ops if not o.core]
    assert rest == [n for n, o in eager_ops.items() if not o.core]
    assert sum(o.flops for o in flash_ops) == SMALL.block_flops(b) / (t * c)
    assert SMALL.block_flops(b) == eager.block_flops(b)


def test_gpt_with_flash_runs_no_dropout_kernel_on_the_scores():
    ops = {o.name: o for o in replace(GPT3_XL, attention="flash").operations(1, tensor=2)}
    assert "attention_dropout" not in ops and "softmax" not in ops and ops["attention"].kind == "flash"
    assert "dropout_residual1" in ops and "dropout_residual2" in ops  # the block's own dropouts stay


# ---- the compute model ---------------------------------------------------------------------------------
TWO_ROWS = GemmTable.from_rows([(64, 64, 64, 0.2), (4096, 4096, 4096, 0.8)], peak_flops=1e15)


def two_row_efficiency(volume: float) -> float:
    """The two-row table by hand: 0.2 at 2^18, 0.8 at 2^36, linear in log2 between, clamped."""
    x = min(max(math.log2(volume), 18.0), 36.0)
    return 0.2 + 0.6 * (x - 18.0) / 18.0


@pytest.mark.parametrize("t", [1, 2])
def test_a_flash_kernels_time_is_its_flops_at_the_scores_products_efficiency(t):
    cm = ComputeModel(TWO_ROWS, memory_bandwidth=None)
    times = cm.operation_times(SMALL.operations(2, tensor=t))
    (attention,) = [o for o in times if o.operation.kind == "flash"]
    # the scores product: 2 x 8 / t heads of (1024 x 64) @ (64 x 1024)
    eff = two_row_efficiency(2 * 8 / t * 1024 * 1024 * 64)
    flops = 4 * 2 * 1024 * 1024 * 512 / t
    assert attention.efficiency == pytest.approx(eff, rel=1e-14)
    assert attention.seconds == pytest.approx(flops / (1e15 * eff), rel=1e-14)
    assert attention.bound == "compute" and not attention.clamped
    # a constant table: at its one efficiency; with a memory bandwidth the roofline still says compute
    constant = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth="3TB/s")
    (op,) = [o for o in constant.operation_times(SMALL.operations(1)) if o.operation.kind == "flash"]
    assert op.seconds == 4 * 1024 * 1024 * 512 / 0.5e15 and op.bound == "compute"


def test_the_backward_of_a_flash_kernel_is_two_and_a_half_forwards():
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    f, bwd, selective, head = cm.block_parts(SMALL, 1)
    core = 4 * 1024 * 1024 * 512 / 0.5e15  # the flash kernel's forward: 4 b s^2 h at 0.5 x 1e15
    others = f - core
    assert f == pytest.approx(SMALL.block_flops(1) / 0.5e15, rel=1e-14)  # memory traffic not counted
    assert bwd == pytest.approx(2 * others + 2.5 * core, rel=1e-14)
    assert selective == 0.0 and head == pytest.approx(SMALL.logits_flops(1) / 0.5e15, rel=1e-14)
    # a stage of 2 of the 4 blocks: (l / p)(3 f + 0.5 core) (+ f with full recomputation, + 0 selective)
    blocks, _ = cm.stage_times(SMALL, 1, pipeline=2)
    assert blocks == pytest.approx(2 * (3 * f + 0.5 * core), rel=1e-14)
    assert cm.stage_times(SMALL, 1, pipeline=2, recompute="selective")[0] == blocks
    full = cm.stage_times(SMALL, 1, pipeline=2, recompute="full")[0]
    assert full == pytest.approx(blocks + 2 * f, rel=1e-14)
    # eager: backward twice the forward, and selective reruns scores, softmax, context
    ef, ebwd, esel, _ = cm.block_parts(replace(SMALL, attention="eager"), 1)
    assert ebwd == 2 * ef and esel == core  # softmax free here: no bandwidth, no memory rows
    # the workloads carry the same backward
    w = SMALL.workload(1, compute=cm)
    assert (w.layers[1].forward_time, w.layers[1].backward_time) == (f, bwd)
    wf = SMALL.workload(1, flops=1e15)  # a rate: 2 x the block's FLOPs + (2.5 - 2) x 4 b s^2 h
    assert wf.layers[1].backward_time == pytest.approx(
        (2 * SMALL.block_flops(1) + 2 * 1024**2 * 512) / 1e15, rel=1e-14
    )


def test_without_a_compute_model_selective_recomputation_adds_nothing_to_flash():
    cluster = dgx(8)
    w = SMALL.workload(1, flops=150e12)
    none, sel = (
        HybridParallel(2, 2, 2, 4, recompute=rc, shape=SMALL).times(w, cluster) for rc in (None, "selective")
    )
    assert sel.compute == none.compute
    # the head: 3 x 2 b s h V of the kernels' FLOPs, which count the flash backward's recomputed scores
    hand = 3 * 2 * 1024 * 512 * 32000 / 150e12 / 2  # over t = 2
    assert none.head == pytest.approx(hand, rel=1e-12)
    eager = replace(SMALL, attention="eager")
    we = eager.workload(1, flops=150e12)
    e_none, e_sel = (
        HybridParallel(2, 2, 2, 4, recompute=rc, shape=eager).times(we, cluster) for rc in (None, "selective")
    )
    # eager selective: the 4 blocks' cores' forward, 4 x 4 b s^2 h, over t p = 4
    assert e_sel.compute - e_none.compute == pytest.approx(4 * 4 * 1024**2 * 512 / 150e12 / 4, rel=1e-9)


# ---- the planner equals predict ------------------------------------------------------------------------
@pytest.mark.parametrize("compute", [None, H100], ids=["flops", "h100-kernels"])
def test_a_flash_shape_evaluates_as_predict_row_by_row(compute):
    cluster = dgx(8)
    kw = {"tensor": (1, 2), "pipeline": (1, 2), "schedule": ("1f1b", "gpipe", "interleaved")}
    # selective is left out beside None for flash (a duplicate); asked for alone it is evaluated too
    for space, recomputes in (
        (HybridSpace(**kw), {None, "full"}),
        (HybridSpace(recompute=("selective",), **kw), {"selective"}),
    ):
        table = evaluate_space(
            SMALL, cluster, space, global_batch=16, memory_limit=80e9, flops=150e12, compute=compute
        )
        rows = [table.row(i) for i in range(len(table))]
        assert {r["tensor"] for r in rows} == {1, 2} and {r["pipeline"] for r in rows} == {1, 2}
        assert {r["recompute"] for r in rows} == recomputes
        assert {r["zero"] for r in rows} == {0, 1, 2, 3}
        assert {r["sequence_parallel"] for r in rows} == {False, True}
        assert_rows_equal_predict(table, cluster, range(len(table)))


# ---- memory --------------------------------------------------------------------------------------------
def flash_block_bytes(b: int, t: int, sp: bool, rc: str | None) -> float:
    """WIDE's activations per block and GPU, tensor by tensor (no dropout), flash attention."""
    s, h, a, g, f = 2048, 1024, 16, 8 * 64, 2816
    sb = s * b
    if rc == "full":
        return 2 * sb * h / (t if sp else 1)  # the block's input
    whole = 2 * sb * h + 2 * sb * h + 2 * sb * h + 2 * sb * h  # two norms' inputs, QKV's and fc1's inputs
    split = (
        2 * sb * h  # Q
        + 2 * sb * g  # K
        + 2 * sb * g  # V
        + 2 * sb * h  # the attention's output: the projection's input
        + 4 * a * s * b  # the log-sum-exp, fp32, one per head and query
        + 2 * sb * 2 * f  # gate and up
        + 2 * sb * f  # fc2's input
    )  # no s x s tensor: nothing for selective recomputation to drop
    return (whole + split) / t if sp else whole + split / t


@pytest.mark.parametrize("t", [1, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("rc", [None, "selective", "full"])
def test_flash_activations_tensor_by_tensor_in_the_hybrid_memory(t, sp, rc):
    b = 2
    hand = flash_block_bytes(b, t, sp, rc)
    kw = {"tensor": t, "sequence_parallel": sp, "recompute": rc, "terms": WIDE.activation_terms()}
    assert layer_activation_bytes(2048, b, 1024, 16, **kw) == pytest.approx(hand, rel=1e-14)
    # HybridParallel: one stage, one micro-batch in flight, the 4 layers
    scheme = HybridParallel(t, 1, 8 // t, 1, sequence_parallel=sp, recompute=rc, shape=WIDE)
    memory = scheme.memory(WIDE.workload(b, flops=150e12), dgx(8))
    assert memory.activations == pytest.approx(4 * hand, rel=1e-14)
    if t == 1 and rc is None:
        assert WIDE.activation_bytes(b) == pytest.approx(4 * hand, rel=1e-14)


def test_llama3_70b_at_8192_tokens_keeps_far_less_with_flash():
    s, b, h, a, g, f, t = 8192, 1, 8192, 64, 1024, 28672, 8
    sbh = s * b * h
    # per block, kept whole on each of 8 ranks: two norms' inputs, QKV's and fc1's inputs
    whole = 4 * 2 * sbh
    # split: Q, K, V, the projection's input, gate and up, fc2's input
    split = 2 * sbh + 2 * 2 * s * b * g + 2 * sbh + 2 * 2 * s * b * f + 2 * s * b * f
    eager = whole + split / t + 2 * a * s * s * b / t  # + the softmax output, 64 heads of 8192 x 8192
    flash = whole + (split + 4 * a * s * b) / t  # + the log-sum-exp
    assert (eager, flash) == (1_824_522_240, 751_042_560)
    got = {
        kind: layer_activation_bytes(
            s, b, h, a, tensor=t, terms=replace(LLAMA3_70B, attention=kind).activation_terms()
        )
        for kind in ("eager", "flash")
    }
    assert got == {"eager": eager, "flash": flash}
    assert got["eager"] / got["flash"] == pytest.approx(1_824_522_240 / 751_042_560, rel=1e-15)  # 2.43x
    # at t = 1 the s^2 term is 3.8 times the rest: 10.84 GB against 2.25 GB per block
    one = {k: replace(LLAMA3_70B, attention=k).activation_bytes(1) / 80 for k in ("eager", "flash")}
    assert one == {"eager": whole + split + 2 * a * s * s, "flash": whole + split + 4 * a * s}


def test_gpt_stays_korthikantis_count_bit_for_bit():
    s, h, a, l = GPT3_XL.sequence, GPT3_XL.hidden, GPT3_XL.heads, GPT3_XL.layers
    assert GPT3_XL.activation_terms() == (10, 24, 5)
    assert GPT3_XL.activation_bytes(2) == float(l * s * 2 * h * (34 + 5 * a * s / h))
    # flash GPT: the scores' mask and dropout's output go with the softmax output; 4 a / h comes in
    assert replace(GPT3_XL, attention="flash").activation_terms() == (10, 24 + 4 * 16 / 2048, 0)


def test_the_experts_share_of_a_flash_shape_is_of_what_its_micro_batch_computes():
    from queuesgd.schemes.parallel.hybrid_moe import expert_compute_share

    s = TransformerShape(2, 64, 4, 32, 100, attention="flash")
    l, b, n, h = 2, 1, 32, 64
    step = s.iteration_flops(1) + l * 2 * b * n * n * h  # + each block's rerun scores in the backward
    assert expert_compute_share(s, 1, 1.0, 2) == pytest.approx((2 - 1) * 3 * l * 16 * b * n * h * h / step)


def test_the_planner_leaves_out_selective_recomputation_of_a_flash_shape_as_a_duplicate():
    flash = TransformerShape(4, 512, 8, 256, 1000, attention="flash")
    c = Cluster(8, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s")
    kw = {"global_batch": 16, "memory_limit": 80e9, "flops": 1e14}
    every = evaluate_space(flash, c, HybridSpace(), **kw)
    assert "selective" not in set(every["recompute"]) and any("'selective'" in n for n in every.notes)
    sel = evaluate_space(flash, c, HybridSpace(recompute=("selective",)), **kw)
    none = evaluate_space(flash, c, HybridSpace(recompute=(None,)), **kw)
    assert len(sel) == len(none) > 0  # asked for alone, it is kept: the same configurations, the same times
    assert np.array_equal(sel["throughput"], none["throughput"])
    assert len(every) == len(none) + len(evaluate_space(flash, c, HybridSpace(recompute=("full",)), **kw))
