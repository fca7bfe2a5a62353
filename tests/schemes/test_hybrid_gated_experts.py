"""Mixture-of-experts layers whose experts are gated MLPs of any inner size (Mixtral, Grok-1, DeepSeek).

Each expert is a copy of the shape's own MLP (``TransformerShape.mlp_parameters``, ``mlp_flops``,
``mlp_activation_split``). Checked against Mistral AI's published Mixtral 8x7B (the Hugging Face
checkpoint's exact parameter count, less the routers the model does not count), against closed forms of
the experts' compute and activations, and against GPT's MLP, whose numbers are what they were before.
"""

from __future__ import annotations

import pytest

from queuesgd import Cluster, HybridParallel
from queuesgd.model_shapes import GPT3_XL, LLAMA_STYLE, TransformerShape
from queuesgd.model_shapes_attention import step_flops
from queuesgd.schemes.parallel.hybrid_moe import expert_compute_share, mlp_bytes
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
    assert MIXTRAL.mlp_activation_split == pytest.approx(6 * f / h)  # gate and up, the down's input


def test_the_experts_extra_compute_and_activations_follow_the_shapes_mlp():
    b, cf, k = 1, 1.25, 2
    mlp = 32 * 3 * (2 * b * 4096 * 3 * 4096 * 14336) / step_flops(MIXTRAL, b)  # 3 l M / F
    assert expert_compute_share(MIXTRAL, b, cf, k) == pytest.approx((cf * k - 1) * mlp, rel=1e-12)
    sbh = 4096.0 * b * 4096
    for t, sp in ((1, False), (4, False), (4, True)):
        got = expert_activation_bytes(4096, b, 4096, tensor=t, sequence_parallel=sp, capacity_factor=cf,
                                      top_k=k, mlp_split=MIXTRAL.mlp_activation_split)  # fmt: skip
        want = (cf * k - 1) * sbh * (6 * 14336 / 4096 / t + 2 / (t if sp else 1))
        assert got == pytest.approx(want, rel=1e-12)
    assert mlp_bytes(MIXTRAL, MIXTRAL.workload(1)) == 32 * 3 * 4096 * 14336 * 2


def test_gpts_mlp_keeps_the_closed_forms_it_had():
    h = GPT3_XL.hidden
    assert GPT3_XL.mlp_parameters == expert_mlp_parameters(h) == 8 * h * h + 5 * h
    assert GPT3_XL.mlp_flops(1) == 16 * GPT3_XL.sequence * h * h
    assert GPT3_XL.mlp_activation_split == 16
    assert expert_activation_bytes(2048, 1, h, capacity_factor=1.5, top_k=2) == expert_activation_bytes(
        2048, 1, h, capacity_factor=1.5, top_k=2, mlp_split=GPT3_XL.mlp_activation_split)  # fmt: skip
