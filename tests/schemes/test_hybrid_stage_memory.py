"""HybridParallel's memory per GPU is its busiest pipeline stage's, every part from that stage.

Each expected number is a hand count from the formulas written out here: a stage's parameters
(its blocks ``12 h^2 + 13 h`` each, the embeddings ``(V + s) h`` on the first, the final LayerNorm
``2 h`` and Megatron-LM's copy of the tied word embedding ``V h`` on the last), ZeRO 0's
``P + G + 6 P``, and Korthikanti's per-layer activations times the micro-batches each stage keeps at
its peak (GPipe ``m``, 1F1B ``p - i``, counted by hand per stage). The interleaved rule is checked
against a walk of Megatron-LM's interleaved order written out in this file.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hybrid_rows import assert_rows_equal_predict, dgx

import queuesgd as q
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.megatron import layers_in_flight, stage_layers_in_flight

# GPT-6.7B (Brown et al. 2020, Table 2.1): 32 layers, h 4096, 32 heads, 2048 tokens, tied embeddings
GPT67 = TransformerShape(layers=32, hidden=4096, heads=32, sequence=2048, vocabulary=51200)
H, V, S = 4096, 51200, 2048
BLOCK = 12 * H * H + 13 * H  # GPT's block: QKV, projection, MLP 4h, biases, two LayerNorms
EMB = (V + S) * H  # first stage: token and position embeddings
OUT = 2 * H + V * H  # last stage (p > 1): final LayerNorm, Megatron's copy of the tied word embedding
PER_LAYER = S * H * 34 / 8  # Korthikanti Table 2, t = 8, sequence parallel + selective: s b h 34 / t


def hand_stages(layers, held):
    """(total, parameters, activations) per stage: 16-bit weights over t = 8, ZeRO 0 (P + G + 6 P)."""
    p = len(layers)
    out = []
    for i, (n, k) in enumerate(zip(layers, held)):
        count = n * BLOCK + (EMB if i == 0 else 0) + (OUT if i == p - 1 else 0)
        params = count * 2 / 8
        act = k * n * PER_LAYER  # k micro-batches' activations of the stage's n layers
        out.append((8 * params + act, params, act))
    return out


@pytest.mark.parametrize(
    "schedule, layers, held, busiest",
    [
        ("gpipe", (7, 9, 9, 7), (8, 8, 8, 8), 1),  # GPipe: all m = 8 micro-batches on every stage
        ("1f1b", (2, 10, 10, 10), (4, 3, 2, 1), 1),  # 1F1B: p - i (warm-up p - i - 1, plus one)
        ("1f1b", (1, 31), (2, 1), 1),
    ],
)
def test_the_audits_uneven_layouts_report_their_busiest_stage(schedule, layers, held, busiest):
    p = len(layers)
    s = q.HybridParallel(tensor=8, pipeline=p, data=32 // (8 * p), microbatches=8, schedule=schedule,
                         shape=GPT67, stage_layers=layers, sequence_parallel=True,
                         recompute="selective")  # fmt: skip
    got = q.predict(s, GPT67.workload(1, flops=150e12), dgx(32)).memory
    stages = hand_stages(layers, held)
    total, params, act = stages[busiest]
    assert total == max(x[0] for x in stages)  # the hand count's busiest stage is the one named
    assert got.total == pytest.approx(total, rel=1e-12)
    assert got.parameters == pytest.approx(params, rel=1e-12)
    assert got.gradients == pytest.approx(params, rel=1e-12)
    assert got.optimizer == pytest.approx(6 * params, rel=1e-12)
    assert got.activations == pytest.approx(act, rel=1e-12)
    assert got.total > stages[0][0] * (1 + 1e-3)  # the first stage's, reported before, is less


def test_the_audit_layouts_in_gigabytes():
    # the audit's own figures (GB): GPipe 7,9,9,7 busiest 6.19; 1F1B 2,10,10,10 busiest 5.10
    w, c = GPT67.workload(1, flops=150e12), dgx(32)
    kw = {"tensor": 8, "microbatches": 8, "shape": GPT67, "sequence_parallel": True, "recompute": "selective"}
    a = q.HybridParallel(pipeline=4, schedule="gpipe", stage_layers=(7, 9, 9, 7), **kw).memory(w, c)
    b = q.HybridParallel(pipeline=4, schedule="1f1b", stage_layers=(2, 10, 10, 10), **kw).memory(w, c)
    assert round(a.total / 1e9, 2) == 6.19 and round(b.total / 1e9, 2) == 5.10


def test_the_last_stage_holds_the_tied_word_embeddings_copy():
    # 1F1B, m = 1: every stage keeps one micro-batch; stages (6, 6, 6, 14): the last is busiest with
    # its 14 blocks, the final LayerNorm and, tied with p > 1, Megatron's copy of the word embedding
    w, c = GPT67.workload(1, flops=150e12), dgx(32)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=1, shape=GPT67, stage_layers=(6, 6, 6, 14),
                         sequence_parallel=True, recompute="selective")  # fmt: skip
    stages = hand_stages((6, 6, 6, 14), (1, 1, 1, 1))
    total, params, act = stages[3]
    assert total == max(x[0] for x in stages)
    got = s.memory(w, c)
    assert got.parameters == pytest.approx(params, rel=1e-12)
    assert got.activations == pytest.approx(act, rel=1e-12)
    # without the copy it would hold V h / 8 x 2 bytes x 8 (P + G + 6 P) less: 0.42 GB
    assert got.total - (total - V * H * 2 / 8 * 8) == pytest.approx(V * H * 2.0, rel=1e-12)
    # untied: its own output matrix V h and the final norm, the same count as the tied copy's
    untied = dataclasses.replace(GPT67, tied_embeddings=False)
    u = s.replace(shape=untied).memory(untied.workload(1, flops=150e12), c)
    assert u.parameters == pytest.approx(params, rel=1e-12)
    # one stage (p = 1) holds the tied matrix once: V h + s h + l blocks + 2 h
    one = q.HybridParallel(tensor=8, pipeline=1, microbatches=1, data=4, shape=GPT67).memory(w, c)
    assert one.parameters == pytest.approx((32 * BLOCK + EMB + 2 * H) * 2 / 8, rel=1e-12)


def test_interleaved_at_m_equal_p_holds_the_model_once():
    # m = p: Megatron runs every forward first, all m v chunks: stage 0 holds l layers, not
    # l (1 + (p - 1)/(p v)) = 44 for l = 32, p = 4, v = 2
    assert layers_in_flight(32, 4, 4, "interleaved", 2) == 32
    assert layers_in_flight(32, 4, 8, "interleaved", 2) == 32 * (1 + 3 / 8)  # m > p: W_0 = 11 chunks of 4
    w, c = GPT67.workload(1, flops=150e12), dgx(32)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=4, schedule="interleaved", virtual_stages=2,
                         shape=GPT67, sequence_parallel=True, recompute="selective")  # fmt: skip
    got = s.memory(w, c)
    # every stage keeps m = 4 micro-batches of its 8 layers; the first has the most parameters
    stages = hand_stages((8, 8, 8, 8), (4, 4, 4, 4))
    assert stages[0][0] == max(x[0] for x in stages)
    assert got.activations == pytest.approx(32 * PER_LAYER, rel=1e-12)
    assert got.total == pytest.approx(stages[0][0], rel=1e-12)


# ---- the in-flight rule against a walk of Megatron's orders -------------------------------------------
def megatron_interleaved(p, v, m, rank):
    """Rank ``rank``'s passes in Megatron-LM's interleaved order: (kind, chunk, micro-batch)."""
    total = m * v
    # warm-up: all forwards when m = p, else 2 (p - rank - 1) + (v - 1) p, capped at m v
    warm = total if m == p else min((p - rank - 1) * 2 + (v - 1) * p, total)
    steps = [("F", k) for k in range(warm)]
    for k in range(total - warm):  # steady state: forward k + warm, then backward k
        steps += [("F", k + warm), ("B", k)]
    steps += [("B", k) for k in range(total - warm, total)]
    out = []
    for kind, k in steps:
        chunk = (k % (p * v)) // p  # get_model_chunk_id; backwards run the chunks in reverse
        out.append((kind, chunk if kind == "F" else v - 1 - chunk, (k // (p * v)) * p + k % p))
    return out


def one_f_one_b(p, m, rank):
    warm = min(p - rank - 1, m)
    steps = [("F", 0, j) for j in range(warm)]
    for k in range(m - warm):
        steps += [("F", 0, k + warm), ("B", 0, k)]
    return steps + [("B", 0, j) for j in range(m - warm, m)]


def peak_layers(order, chunks):
    """The most layers' activations alive at once: a forward's live until its own backward."""
    alive, held, peak = set(), 0, 0
    for kind, chunk, j in order:
        if kind == "F":
            assert (chunk, j) not in alive
            alive.add((chunk, j))
            held += chunks[chunk]
            peak = max(peak, held)
        else:
            alive.remove((chunk, j))  # its forward ran before
            held -= chunks[chunk]
    assert not alive
    return peak


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("v", [2, 3])
def test_interleaved_in_flight_equals_a_walk_of_megatrons_order(p, v):
    for m in (p, 2 * p, 3 * p):
        for rank in range(p):
            even = (3,) * v
            short_first = (2,) + (3,) * (v - 1)  # head-slots: the first stage's first chunk a layer short
            short_last = (3,) * (v - 1) + (2,)  # and the last stage's last
            for chunks in (even, short_first, short_last):
                want = peak_layers(megatron_interleaved(p, v, m, rank), chunks)
                got = stage_layers_in_flight(chunks, rank, p, m, "interleaved")
                assert got == want, (p, v, m, rank, chunks)
            if m > p:  # equal chunks: W_i = 2 (p - i - 1) + (v - 1) p + 1 forwards, capped at m v
                assert stage_layers_in_flight(even, rank, p, m, "interleaved") == 3 * min(
                    2 * (p - rank - 1) + (v - 1) * p + 1, m * v
                )


def test_the_last_stages_short_chunk_is_freed_first():
    # p = 4, v = 2, m = 8, last stage chunks (4, 3): its first 5 forwards hold 4 x 4 + 3 = 19 layers,
    # but its first backwards free the short chunk while forwards of it go on: the peak is 5 x 4
    assert peak_layers(megatron_interleaved(4, 2, 8, 3), (4, 3)) == 20
    assert stage_layers_in_flight((4, 3), 3, 4, 8, "interleaved") == 20


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_one_f_one_b_and_gpipe_in_flight_equal_a_walk(p):
    for m in (1, 2, p, 3 * p):
        for rank in range(p):
            want = peak_layers(one_f_one_b(p, m, rank), (5,))
            assert stage_layers_in_flight((5,), rank, p, m, "1f1b") == want
            gpipe = [("F", 0, j) for j in range(m)] + [("B", 0, j) for j in range(m)]
            assert stage_layers_in_flight((5,), rank, p, m, "gpipe") == peak_layers(gpipe, (5,))


# ---- the planner ------------------------------------------------------------------------------------
SMALL = TransformerShape(layers=30, hidden=1024, heads=16, sequence=1024, vocabulary=51200, name="small")


def test_the_planner_refuses_a_head_slots_gpipe_row_whose_middle_stage_does_not_fit():
    # 30 layers on p = 4 as 7, 8, 8, 7; t = 2, d = 1, b = 1, m = 8, GPipe, no recomputation:
    # per layer s b h (10 + 24/t + 5 a s/(h t)) = s h (22 + 5 x 16 x 1024 / 2048) = 62 s h bytes
    h, s, V = 1024, 1024, 51200
    block = 12 * h * h + 13 * h
    per = 62 * s * h
    first = 8 * (7 * block + (V + s) * h) * 2 / 2 + 8 * 7 * per  # ZeRO 0: 8 bytes per 2-byte weight / t
    middle = 8 * (8 * block) * 2 / 2 + 8 * 8 * per
    last = 8 * (7 * block + 2 * h + V * h) * 2 / 2 + 8 * 7 * per
    assert middle > first > last
    limit = (first + middle) / 2  # the first stage fits it, the middle one does not
    space = HybridSpace(tensor=(2,), pipeline=(4,), microbatch=(1,), schedule=("gpipe",), recompute=(None,),
                        zero=(0,), sequence_parallel=(False,), layout=("even", "head-slots"))  # fmt: skip
    cluster = dgx(8)
    table = evaluate_space(SMALL, cluster, space, global_batch=8, memory_limit=limit, flops=150e12)
    rows = np.flatnonzero(table["layout"] == "head-slots")
    assert len(rows) == 1
    i = int(rows[0])
    assert table["memory"][i] == pytest.approx(middle, rel=1e-12)
    assert not table["fits"][i]  # accepted before, when the first stage's memory was reported
    assert_rows_equal_predict(table, cluster, range(len(table)))
    table = evaluate_space(SMALL, cluster, space, global_batch=8, memory_limit=middle * 1.001, flops=150e12)
    assert table["fits"][i]


@pytest.mark.parametrize("tied", [True, False])
def test_planner_rows_equal_predict_on_every_schedule_and_layout(tied):
    shape = SMALL if tied else TransformerShape(30, 1024, 16, 1024, 51200, tied_embeddings=False)
    space = HybridSpace(tensor=(2,), microbatch=(1,), schedule=("1f1b", "gpipe", "interleaved"),
                        recompute=(None, "full"), zero=(0, 3), sequence_parallel=(False,),
                        layout=("even", "head-slots"))  # fmt: skip
    cluster = dgx(16)
    table = evaluate_space(shape, cluster, space, global_batch=16, memory_limit=80e9, flops=150e12)
    assert len(table) > 0 and set(table["layout"].tolist()) == {"even", "head-slots"}
    assert_rows_equal_predict(table, cluster, range(len(table)))


def test_without_a_shape_the_stage_with_the_most_layers_is_the_busiest():
    # 8 GB of 16-bit parameters, 8 layers as 2 and 6: the second stage holds 6/8 of them, 6 GB, and
    # as much again in gradients and 6 x in Adam's state (ZeRO 0, one replica); no activations counted
    w, c = q.Workload(1.0, "8GB"), q.Cluster(2, "1GB/s")
    m = q.HybridParallel(pipeline=2, microbatches=4, layers=8, stage_layers=(2, 6)).memory(w, c)
    assert (m.parameters, m.gradients, m.optimizer, m.activations) == (6e9, 6e9, 36e9, 0.0)
    first = q.HybridParallel(pipeline=2, microbatches=4, layers=8, stage_layers=(6, 2)).memory(w, c)
    assert first.total == m.total == 48e9
