"""Mixture-of-experts layers whose experts are gated MLPs of any inner size (Mixtral, Grok-1, DeepSeek).

Each expert is a copy of the shape's own MLP (``queuesgd.model_shapes_mlp``). Checked against Mistral
AI's published Mixtral 8x7B (the Hugging Face checkpoint's exact parameter count, less the routers the
model does not count), against closed forms of the experts' compute and activations, and against GPT's
MLP, whose numbers are what they were before.
With a compute model, each local expert's products are timed at their own (smaller) shapes, checked
against closed forms at one GEMM efficiency.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hybrid_rows import assert_rows_equal_predict, dgx

from queuesgd import Cluster, HybridParallel
from queuesgd.compute_model import ComputeModel
from queuesgd.gemm_table import GemmTable, load_gemm_table
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, LLAMA_STYLE, TransformerShape
from queuesgd.model_shapes_attention import step_flops
from queuesgd.model_shapes_mlp import mlp_activation_split
from queuesgd.schemes.parallel.hybrid_moe import expert_compute_share, mlp_bytes
from queuesgd.schemes.parallel.hybrid_overlap import (
    ALL_GEMMS,
    gemm_times,
    pipelined_exposed,
    scheme_exposed_per_layer,
)
from queuesgd.schemes.parallel.megatron import expert_activation_bytes, expert_mlp_parameters

#: Mixtral 8x7B (Jiang et al. 2024; its config.json): Mistral 7B's shape with 8 SwiGLU experts, top-2
MIXTRAL = TransformerShape(32, 4096, 32, 4096, 32000, "mixtral-8x7b", kv_heads=8, ffn_hidden=14336,
                           **LLAMA_STYLE)  # fmt: skip
#: the Hugging Face checkpoint mistralai/Mixtral-8x7B-v0.1 holds 46,702,792,704 parameters, of which the
#: routers (a 4096 x 8 gate in each of the 32 layers) are 1,048,576; the model does not count the routers
MIXTRAL_CHECKPOINT = 46_702_792_704
ROUTERS = 32 * 4096 * 8


def test_mixtrals_parameters_are_its_checkpoints_less_the_routers():
    memory = HybridParallel(shape=MIXTRAL, experts=8, top_k=2).memory(MIXTRAL.workload(1), Cluster(1, 1e9))
    assert memory.parameters == 2 * (MIXTRAL_CHECKPOINT - ROUTERS)  # 2 bytes each
    # and the active parameters of a token (top-2): the dense model and one more MLP a layer, "12.9B"
    active = MIXTRAL.parameters + 32 * MIXTRAL.mlp_parameters
    assert active / 1e9 == pytest.approx(12.9, abs=0.05)


def test_a_gated_experts_mlp_is_three_products_of_h_by_f():
    h, f = 4096, 14336
    assert MIXTRAL.mlp_parameters == 3 * h * f  # gate, up (h x f each), down (f x h); no biases
    assert MIXTRAL.mlp_flops(2) == 2 * 2 * 4096 * 3 * h * f  # 2 b s x the weights
    assert mlp_activation_split(MIXTRAL) == pytest.approx(6 * f / h)  # gate and up, the down's input


def test_the_experts_extra_compute_and_activations_follow_the_shapes_mlp():
    b, cf, k = 1, 1.25, 2
    mlp = 32 * 3 * (2 * b * 4096 * 3 * 4096 * 14336) / step_flops(MIXTRAL, b)  # 3 l M / F
    assert expert_compute_share(MIXTRAL, b, cf, k) == pytest.approx((cf * k - 1) * mlp, rel=1e-12)
    sbh = 4096.0 * b * 4096
    for t, sp in ((1, False), (4, False), (4, True)):
        got = expert_activation_bytes(4096, b, 4096, tensor=t, sequence_parallel=sp, capacity_factor=cf,
                                      top_k=k, mlp_split=mlp_activation_split(MIXTRAL))  # fmt: skip
        want = (cf * k - 1) * sbh * (6 * 14336 / 4096 / t + 2 / (t if sp else 1))
        assert got == pytest.approx(want, rel=1e-12)
    assert mlp_bytes(MIXTRAL, MIXTRAL.workload(1)) == 32 * 3 * 4096 * 14336 * 2


def test_gpts_mlp_keeps_the_closed_forms_it_had():
    h = GPT3_XL.hidden
    assert GPT3_XL.mlp_parameters == expert_mlp_parameters(h) == 8 * h * h + 5 * h
    assert GPT3_XL.mlp_flops(1) == 16 * GPT3_XL.sequence * h * h
    assert mlp_activation_split(GPT3_XL) == 16
    assert expert_activation_bytes(2048, 1, h, capacity_factor=1.5, top_k=2) == expert_activation_bytes(
        2048, 1, h, capacity_factor=1.5, top_k=2, mlp_split=mlp_activation_split(GPT3_XL))  # fmt: skip


# ---- the compute model with experts ------------------------------------------------------------------

SMALL = TransformerShape(2, 512, 8, 1024, 1000, kv_heads=2, ffn_hidden=1536, **LLAMA_STYLE)


def _mlp_seconds(cm, shape, rows, tensor=1):
    return sum(o.seconds for o in cm.operation_times(shape.mlp_operations(rows, tensor=tensor)))


def test_at_one_gemm_efficiency_the_experts_cost_capacity_times_top_k_mlps():
    # constant efficiency, no memory-bound time: an expert's products take their FLOPs' time, so E / e
    # experts on e buffers of c k T / E rows each (whole here) take c k times the dense MLP
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    for b, (n, e, cf, k) in ((1, (8, 2, 1.0, 2)), (2, (16, 4, 1.25, 2)), (1, (4, 4, 2.0, 1))):
        dense = cm.block_parts(SMALL, b)
        moe = cm.block_parts(SMALL, b, experts=(n, e, cf, k))
        extra = (cf * k - 1) * _mlp_seconds(cm, SMALL, b * 1024)
        assert moe[0] == pytest.approx(dense[0] + extra, rel=1e-12)  # forward
        assert moe[1] == pytest.approx(dense[1] + 2 * extra, rel=1e-12)  # backward: twice
        assert moe[2:] == dense[2:]  # the attention core and the head are not the experts'


def test_the_experts_capacity_is_megatrons_rounded_up_per_rank_and_expert():
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    n, e, cf, k = 6, 3, 1.0, 2  # 2 x 1024 / 6 = 341.33 tokens per expert per rank: 342 rows padded
    rows = e * math.ceil(cf * k * 1024 / n)
    dense = cm.block_parts(SMALL, 1)[0]
    want = dense + n // e * _mlp_seconds(cm, SMALL, rows) - _mlp_seconds(cm, SMALL, 1024)
    assert cm.block_parts(SMALL, 1, experts=(n, e, cf, k))[0] == pytest.approx(want, rel=1e-12)


def test_with_a_measured_table_the_experts_smaller_products_run_less_efficiently():
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    dense = cm.block_parts(MIXTRAL, 1, tensor=2)[0]
    moe = cm.block_parts(MIXTRAL, 1, tensor=2, experts=(8, 8, 1.0, 2))[0]
    # at least twice the dense MLP (top-2 at capacity 1), more since 1024-row products are slower per FLOP
    assert moe > dense + _mlp_seconds(cm, MIXTRAL, 4096, tensor=2)


def test_hybridparallel_times_experts_with_its_compute_model_and_full_recomputation_reruns_them():
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    kw = {"shape": SMALL, "compute_model": cm, "experts": 8, "expert_parallel": 2, "top_k": 2, "data": 2}
    w, cluster = SMALL.workload(1), Cluster(2, 1e12)
    f, bwd, _, head = cm.block_parts(SMALL, 1, experts=(8, 2, 1.0, 2))
    for recompute, r in ((None, 0.0), ("full", f)):
        times = HybridParallel(recompute=recompute, **kw).times(w, cluster)
        assert times.compute == pytest.approx(2 * (f + bwd + r), rel=1e-12)  # the two blocks
        assert times.head == pytest.approx(3 * head, rel=1e-12)


def test_the_mlps_tp_collectives_stay_exposed_with_experts():
    # tp_overlap="all": the attention's all-gather and reduce-scatter pipelined with QKV and the
    # projection; the MLP's, Megatron-Core's token dispatcher's, hide behind nothing
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    kw = {"tensor": 4, "sequence_parallel": True, "tp_overlap": "all", "shape": MIXTRAL, "data": 2,
          "compute_model": cm}  # fmt: skip
    ag, rs = 2e-4, 3e-4
    dense = HybridParallel(**kw)
    moe = HybridParallel(experts=8, expert_parallel=2, **kw)
    got_dense = scheme_exposed_per_layer(dense, 1, ag + rs, rs, ag, 1.0, 1.0)
    got_moe = scheme_exposed_per_layer(moe, 1, ag + rs, rs, ag, 1.0, 1.0)
    g = gemm_times(MIXTRAL, 1, ALL_GEMMS, tensor=4, sequence_parallel=True, context=1, compute=1.0,
                   model=cm, stretch=1.0)  # fmt: skip
    mlp = pipelined_exposed(ag, g[2], 4) + pipelined_exposed(rs, g[3], 4)
    assert got_moe == pytest.approx(got_dense - 2 * mlp + 2 * (ag + rs), rel=1e-12)


def test_the_space_with_experts_and_a_compute_model_is_predict_row_by_row():
    # the vectorized space times the experts with the compute model and exposes the MLP's TP collectives,
    # as HybridParallel does: every column of a sample of rows equals predict's
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    space = HybridSpace(tensor=(1, 2, 4), pipeline=(1, 2), context=(1,), tp_overlap=(False, True, "all"),
                        experts=8, top_k=2, capacity_factor=1.25)  # fmt: skip
    table = evaluate_space(MIXTRAL, dgx(16), space, global_batch=32, memory_limit=1e12, compute=cm)
    assert set(table["expert_parallel"].tolist()) > {1} and set(table["tp_overlap"].tolist()) > {False}
    rng = np.random.default_rng(7)
    assert_rows_equal_predict(table, dgx(16), rng.choice(len(table), size=min(60, len(table)), replace=False))


def test_zero_overlap_hides_the_data_parallel_collectives_behind_the_experts_forward_too():
    # ZeRO 0-2's gather hides behind the first micro-batch's forward, which with experts includes them:
    # predict timed that forward as the dense block's (the space did not), 5.7% apart on a small MoE
    cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    space = HybridSpace(tensor=(1, 2), pipeline=(1,), recompute=(None,), zero=(0, 1, 2),
                        zero_overlap=(True,), experts=8, top_k=2)  # fmt: skip
    table = evaluate_space(MIXTRAL, dgx(16), space, global_batch=32, memory_limit=1e12, compute=cm)
    assert set(table["zero"].tolist()) == {0, 1, 2}
    rng = np.random.default_rng(11)
    assert_rows_equal_predict(table, dgx(16), rng.choice(len(table), size=min(40, len(table)), replace=False))
