"""Llama-style TransformerShape: grouped-query attention, a gated MLP, no biases, RMSNorm, untied output.

The independent sources: Hugging Face's published parameter counts of Llama 3.1 8B and 70B, the
closed forms written out here by hand (parameters, FLOPs, Korthikanti et al.'s activations tensor by
tensor), and ``predict`` of each ``HybridParallel`` against the planner's array evaluation row by row.
"""

from __future__ import annotations

import pytest
from hybrid_rows import assert_rows_equal_predict, dgx, rel

from queuesgd import HybridParallel, predict
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import load_gemm_table
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, LLAMA_STYLE, TransformerShape
from queuesgd.model_shapes_llama import parse_shape_text
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.schemes.parallel.hybrid_batch import batch_times
from queuesgd.schemes.parallel.megatron import SCHEDULES, layer_activation_bytes

LLAMA = {**LLAMA_STYLE, "attention": "eager"}  # the eager layout: its kernels and s^2 activations
#: A small Llama-like model: 4 layers, hidden 512, 8 heads of 64, 2 key-value heads, SwiGLU of 1376.
SMALL = TransformerShape(4, 512, 8, 1024, 32000, "small-llama", kv_heads=2, ffn_hidden=1376, **LLAMA)
H100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")


# ---- parameter counts against the published ones ------------------------------------------------------
def test_llama3_8b_and_70b_have_hugging_faces_parameter_counts():
    # Hugging Face model cards / safetensors index: Llama-3.1-8B 8,030,261,248, Llama-3.1-70B
    # 70,553,706,496 parameters. By hand, per block: Q and O 2 h^2, K and V 2 h (8 x 128), gate/up/down
    # 3 h f, two RMSNorm weights 2 h; then the token embedding and the untied output layer 2 V h, and
    # the final RMSNorm h:
    #   8B  = 32 x (2*4096^2 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 2*128256*4096 + 4096
    #       = 32 x 218,112,000 + 1,050,673,152 + 4096 = 8,030,261,248
    #   70B = 80 x (2*8192^2 + 2*8192*1024 + 3*8192*28672 + 2*8192) + 2*128256*8192 + 8192
    #       = 80 x 855,654,400 + 2,101,346,304 + 8192 = 70,553,706,496
    assert LLAMA3_8B.parameters == 8_030_261_248
    assert LLAMA3_70B.parameters == 70_553_706_496
    assert 32 * 218_112_000 + 1_050_673_152 + 4096 == 8_030_261_248
    assert 80 * 855_654_400 + 2_101_346_304 + 8192 == 70_553_706_496


def test_llama3_405b_by_the_same_formula_written_independently():
    # Meta reports "405B"; no biases, K and V 8 heads of 128 = 1024 columns, SwiGLU of 53248
    layers, h, kv_columns, ffn, vocab = 126, 16384, 8 * 128, 53248, 128256
    attention = h * h + h * kv_columns + h * kv_columns + h * h
    mlp = h * ffn * 2 + ffn * h
    norms = h + h
    expected = layers * (attention + mlp + norms) + vocab * h + h * vocab + h
    assert LLAMA3_405B.parameters == expected == 405_853_388_800
    assert LLAMA3_405B.parameters / 1e9 == pytest.approx(405, abs=1)


def test_the_fields_change_the_counts_term_by_term():
    h, V, s = 64, 100, 16
    gpt = TransformerShape(2, h, 4, s, V)
    assert gpt.block_parameters == 12 * h * h + 13 * h  # the GPT default, unchanged
    assert gpt.parameters == 2 * (12 * h * h + 13 * h) + V * h + s * h + 2 * h
    # grouped-query attention, 1 key-value head of 16: K and V lose 2 (h - 16) columns and their biases
    assert TransformerShape(2, h, 4, s, V, kv_heads=1).block_parameters == gpt.block_parameters - 2 * (
        h * (h - 16) + (h - 16)
    )
    # a gated MLP of 100 with biases: 3 h 100 weights, 2 x 100 + h biases
    gated = TransformerShape(2, h, 4, s, V, ffn_hidden=100, gated=True)
    assert gated.block_parameters == 4 * h * h + 4 * h + 3 * h * 100 + 200 + h + 4 * h
    # no biases; RMSNorm; untied output; rotary positions
    assert TransformerShape(2, h, 4, s, V, bias=False).block_parameters == 12 * h * h + 4 * h
    assert TransformerShape(2, h, 4, s, V, norm="rmsnorm").parameters == gpt.parameters - 2 * 2 * h - h
    assert TransformerShape(2, h, 4, s, V, tied_embeddings=False).parameters == gpt.parameters + V * h
    assert TransformerShape(2, h, 4, s, V, position_embedding=False).parameters == gpt.parameters - s * h


# ---- FLOPs and kernels ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [LLAMA3_8B, LLAMA3_70B, SMALL])
@pytest.mark.parametrize("b", [1, 3])
def test_flops_are_twice_the_weights_per_token_plus_the_attention_core(shape, b):
    # without biases every weight of a block but the norms' is one multiply-add per token
    h, s = shape.hidden, shape.sequence
    weights = shape.block_parameters - 2 * h  # less the two RMSNorm weights
    assert shape.block_flops(b) == 2 * b * s * weights + 4 * b * s * s * h
    assert shape.logits_flops(b) == 2 * b * s * h * shape.vocabulary


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_the_kernels_on_a_rank_sum_to_the_block_flops(t):
    ops = LLAMA3_8B.operations(2, tensor=t)
    gemms = {o.name: o for o in ops if o.kind == "gemm"}
    M, h = 2 * 8192, 4096
    # Megatron's layout with 8 query groups: QKV (M x h) @ (h x (4096 + 2 x 1024)/t), fc1 2 x 14336 / t
    assert (gemms["qkv"].m, gemms["qkv"].n, gemms["qkv"].k) == (M, (4096 + 2048) // t, h)
    assert (gemms["fc1"].n, gemms["fc2"].k) == (2 * 14336 // t, 14336 // t)
    # the preset trains with flash attention: one fused kernel per rank, 2 x 32 / t heads of (s x d) @ (d x s)
    (attention,) = [o for o in ops if o.kind == "flash"]
    assert (attention.m, attention.n, attention.k, attention.batch) == (8192, 8192, 128, 2 * 32 // t)
    assert gemms["proj"].k == h // t and "scores" not in gemms and "context" not in gemms
    assert sum(o.flops for o in ops) == pytest.approx(LLAMA3_8B.block_flops(2) / t, rel=1e-15)
    memory = {o.name: o for o in ops if o.kind != "gemm"}
    # no dropout kernels; SiLU-and-multiply reads gate and up and writes one: 3 x M f / t x 2 bytes
    assert "attention_dropout" not in memory and "residual1" in memory and "rmsnorm1" in memory
    assert memory["swiglu"].kind == "gelu" and memory["swiglu"].bytes == 3 * M * 14336 / t * 2


def test_gpt_kernels_are_unchanged():
    names = [o.name for o in GPT3_XL.operations(1, tensor=2)]
    assert names == [
        "layernorm1",
        "qkv",
        "scores",
        "softmax",
        "attention_dropout",
        "context",
        "proj",
        "dropout_residual1",
        "layernorm2",
        "fc1",
        "gelu",
        "fc2",
        "dropout_residual2",
    ]
    qkv = GPT3_XL.operations(1, tensor=2)[1]
    assert (qkv.n, qkv.k) == (3 * 2048 // 2, 2048)


# ---- activations ---------------------------------------------------------------------------------------
GPTS = [GPT3_XL, TransformerShape(2, 8, 2, 4, 10), TransformerShape(3, 96, 12, 40, 7)]


@pytest.mark.parametrize("shape", GPTS)
@pytest.mark.parametrize("b", [1, 5])
def test_gpt_activations_are_korthikantis_eq_2_exactly(shape, b):
    s, h, a, l = shape.sequence, shape.hidden, shape.heads, shape.layers
    assert shape.activation_terms() == (10, 24, 5)
    assert shape.activation_bytes(b) == float(l * s * b * h * (34 + 5 * a * s / h))


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("rc", [None, "selective", "full"])
def test_layer_activation_bytes_keeps_table_2_for_gpt(t, sp, rc):
    s, b, h, a = 2048, 2, 12288, 96
    got = layer_activation_bytes(s, b, h, a, tensor=t, sequence_parallel=sp, recompute=rc)
    # Korthikanti et al. (2022), Table 2, written out again
    sbh = float(s) * b * h
    core = 0.0 if rc == "selective" else 5 * a * s / (h * t)
    table = 2 * sbh / (t if sp else 1) if rc == "full" else sbh * ((34 / t if sp else 10 + 24 / t) + core)
    assert got == table
    assert got == layer_activation_bytes(
        s, b, h, a, tensor=t, sequence_parallel=sp, recompute=rc, terms=GPT3_XL.activation_terms()
    )


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("rc", [None, "selective", "full"])
@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_llama_activations_tensor_by_tensor(t, sp, rc, attention):
    from dataclasses import replace

    shape, b = replace(LLAMA3_8B, attention=attention), 2  # the preset: flash (as Llama 3 trains)
    s, h, a, g, f = 8192, 4096, 32, 1024, 14336
    sb = s * b
    # 16-bit tensors the backward pass needs, no dropout (Korthikanti's Section 4.1 list, Llama's block):
    whole = 2 * sb * h + 2 * sb * h + 2 * sb * h + 2 * sb * h  # two norms' inputs, QKV's and fc1's inputs
    split = (
        2 * sb * h  # Q
        + 2 * sb * g  # K
        + 2 * sb * g  # V
        + 2 * sb * h  # the projection's input
        + 2 * sb * 2 * f  # gate and up (SiLU-and-multiply's input)
        + 2 * sb * f  # fc2's input
    )
    if attention == "flash":  # no s x s tensor; the fp32 log-sum-exp per head and query, split over t
        split += 4 * a * s * b
        core = 0
    else:
        core = 2 * a * s * s * b  # the softmax output (the context product's input)
    if rc == "full":
        expected = 2 * sb * h / (t if sp else 1)
    else:
        expected = (whole + split) / t if sp else whole + split / t
        expected += 0 if rc == "selective" else core / t
    kw = {"tensor": t, "sequence_parallel": sp, "recompute": rc, "terms": shape.activation_terms()}
    assert layer_activation_bytes(s, b, h, a, **kw) == pytest.approx(expected, rel=1e-14)
    if t == 1 and rc is None:
        assert shape.activation_bytes(b) == pytest.approx(shape.layers * (whole + split + core), rel=1e-14)


# ---- refusals ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kv_heads": 3}, "TransformerShape.kv_heads"),  # not a divisor of the 8 heads
        ({"kv_heads": 0}, "TransformerShape.kv_heads"),
        ({"ffn_hidden": 2.5}, "TransformerShape.ffn_hidden"),
        ({"ffn_hidden": 2**40}, "TransformerShape.ffn_hidden"),
        ({"gated": "maybe"}, "TransformerShape.gated"),
        ({"bias": None}, "TransformerShape.bias"),
        ({"norm": "batchnorm"}, "TransformerShape.norm"),
        ({"tied_embeddings": 2}, "TransformerShape.tied_embeddings"),
        ({"position_embedding": "x"}, "TransformerShape.position_embedding"),
        ({"dropout": 0.5}, "TransformerShape.dropout"),
    ],
)
def test_bad_llama_fields_are_refused_by_name(kwargs, field):
    with pytest.raises(InvalidParameterError) as err:
        TransformerShape(2, 64, 8, 16, 100, **kwargs)
    assert str(err.value).startswith(f"{field}:")


def test_tensor_must_divide_the_key_value_heads_and_the_mlp():
    with pytest.raises(InvalidParameterError, match=r"^tensor: .*8 key-value heads"):
        LLAMA3_8B.operations(1, tensor=16)  # 16 divides the 32 heads, not the 8 groups
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel.tensor: .*2 key-value heads"):
        HybridParallel(tensor=4, shape=SMALL)
    odd = TransformerShape(2, 64, 8, 16, 100, ffn_hidden=172)
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel.tensor: .*ffn_hidden \(= 172\)"):
        HybridParallel(tensor=8, shape=odd)
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel.tensor: .*the 96 heads"):
        HybridParallel(tensor=5, shape="96:12288:96:2048:51200")  # GPT: the message it always had
    HybridParallel(shape=SMALL, experts=8)  # experts copy the shape's own MLP, gated or not


# ---- the text form -------------------------------------------------------------------------------------
def test_the_text_form_gives_the_presets_fields():
    from dataclasses import replace

    text = "32:4096:32:8192:128256:kv=8:ffn=14336:llama"
    assert replace(parse_shape_text(text), name="llama3-8b") == LLAMA3_8B
    assert HybridParallel(shape=text).shape.parameters == 8_030_261_248
    flags = "4:512:8:1024:32000:kv=2:ffn=1376:gated:rmsnorm:nobias:untied:rope:nodropout"
    assert replace(parse_shape_text(flags), name="small-llama") == SMALL
    assert parse_shape_text("96:12288:96:2048:51200") == TransformerShape(96, 12288, 96, 2048, 51200)


@pytest.mark.parametrize(
    "text", ["96:12288:96:2048", "1:8:2:4:10:kv=x", "1:8:2:4:10:gelu", "1:8:2:4:10:kv", "a:8:2:4:10", 7]
)
def test_bad_shape_text_is_refused_saying_what_is_accepted(text):
    with pytest.raises(InvalidParameterError, match=r"^HybridParallel.shape: .*:kv=K, :ffn=F"):
        HybridParallel(shape=text)


# ---- the workload and the hybrid scheme ----------------------------------------------------------------
def test_the_workload_puts_the_untied_output_layer_with_the_final_norm():
    w = LLAMA3_8B.workload(1, flops=1e15)
    h, V = 4096, 128256
    assert w.layers[0].name == "final_norm" and w.layers[0].gradient_bytes == 2 * (h + V * h)
    assert w.layers[-1].name == "embedding" and w.layers[-1].gradient_bytes == 2 * V * h
    assert w.gradient_bytes == 2 * 8_030_261_248


@pytest.mark.parametrize("compute", [None, H100], ids=["flops", "h100-kernels"])
def test_a_llama_shape_evaluates_as_predict_row_by_row(compute):
    cluster = dgx(8)
    space = HybridSpace(tensor=(1, 2), pipeline=(1, 2), schedule=("1f1b", "gpipe", "interleaved"))
    table = evaluate_space(
        SMALL, cluster, space, global_batch=16, memory_limit=80e9, flops=150e12, compute=compute
    )
    rows = [table.row(i) for i in range(len(table))]
    # the sample covers every t, p, recomputation, SP and ZeRO stage
    assert {r["tensor"] for r in rows} == {1, 2} and {r["pipeline"] for r in rows} == {1, 2}
    assert {r["recompute"] for r in rows} == {None, "selective", "full"}
    assert {r["zero"] for r in rows} == {0, 1, 2, 3}
    assert {r["sequence_parallel"] for r in rows} == {False, True}
    assert_rows_equal_predict(table, cluster, range(len(table)))


def test_context_parallel_sends_the_grouped_keys_and_values():
    # batch_times with c = 2 against predict; K and V are each g = 2 x 64 of the 512 columns
    cluster = dgx(16)
    w = {2: SMALL.workload(2, flops=150e12)}
    out = batch_times(
        SMALL, cluster, w, tensor=[2, 1], pipeline=[2, 1], data=[2, 8], microbatch=2, microbatches=[4, 2],
        schedule=SCHEDULES.index("1f1b"), virtual_stages=1, sequence_parallel=[True, False],
        recompute=[1, 0], zero=[1, 3], context=[2, 2],
    )  # fmt: skip
    rows = [(2, 2, 2, 4, True, "full", 1), (1, 1, 8, 2, False, None, 3)]
    for i, (t, p, d, m, sp, rc, z) in enumerate(rows):
        s = HybridParallel(t, p, d, m, sequence_parallel=sp, recompute=rc, zero=z, shape=SMALL, context=2)
        pr = predict(s, w[2], cluster)
        assert rel(pr.details["cp_per_microbatch"], float(out["cp"][i])) <= 1e-12
        assert rel(pr.throughput, float(out["throughput"][i])) <= 1e-12
        assert rel(pr.memory.total, float(out["memory"][i])) <= 1e-12
    # by hand: per layer K and V all-gathered forward and backward, their gradients reduce-scattered,
    # 2 x b s g x 2 bytes / t with g = 2 x 64 (not GPT's 2 b s h x 2 / t), c = 2 ranks in the node
    kv = 2 * (2 * 1024 * 128 * 2) / 2
    ag = collective_time("allgather", kv, cluster, 2, per_node=2).seconds
    rs = collective_time("reduce_scatter", kv, cluster, 2, per_node=2).seconds
    gqa = HybridParallel(2, 2, 2, 4, shape=SMALL, context=2)
    assert rel(predict(gqa, w[2], cluster).details["cp_per_microbatch"], 4 / 2 * (2 * ag + rs)) <= 1e-12


def test_the_text_forms_llama_is_its_seven_flags_and_the_presets_fields():
    flags = parse_shape_text("4:512:8:1024:32000:gated:rmsnorm:nobias:untied:rope:nodropout:flash")
    assert flags == parse_shape_text("4:512:8:1024:32000:llama")
    expected = {"gated": True, "bias": False, "norm": "rmsnorm", "tied_embeddings": False,
                "position_embedding": False, "dropout": False, "attention": "flash"}  # fmt: skip
    assert dict(LLAMA_STYLE) == expected
    assert all(getattr(flags, k) == v and getattr(LLAMA3_8B, k) == v for k, v in expected.items())
