"""Unequal pipeline stages and the scatter/gather all-gather in HybridParallel (issue 24).

The closed form :func:`~queuesgd.schemes.parallel.megatron.pipeline_time` (the
last stage runs the output layer and paces the pipeline) is held against two
other methods: the task graph of 1F1B and GPipe that ``Pipeline`` solves
(:func:`~queuesgd.schemes.parallel.pipeline_graph.pipeline_graph`, max-plus
over every pass), and, for the interleaved schedule, which that graph does not
have, a simulation written here of Megatron-LM's interleaved 1F1B order
(``forward_backward_pipelining_with_interleaving``: warm-up, steady 1F1B,
cool-down; chunk ``(k mod p v) // p`` at the ``k``-th step).
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd.dag import schedule as run_graph
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_memory import stage_memory
from queuesgd.schemes.parallel.megatron import pipeline_time, stage_pipeline_time
from queuesgd.schemes.parallel.pipeline_graph import StageSplit, pipeline_graph
from tests.hybrid_rows import A_E, A_I, B_I, B_R, dgx
from tests.pipeline_schedule_sim import makespan
from tests.schemes.test_stage_step import reference_blocks


def graph_makespan(forward, backward, microbatches: int, sched: str) -> float:
    """One replica's step in the task graph, free sends, no collective or update."""
    S = len(forward)
    split = StageSplit(None, tuple(forward), tuple(backward), (1.0,) * S, (1.0,) * S, "test")
    w = q.Workload(sum(forward) + sum(backward), 1e6)
    g = pipeline_graph(w, q.Cluster(S, "1GB/s"), split, microbatches=microbatches, schedule=sched,
                       send_costs=[0.0] * (S - 1), gather_costs=None, collective_costs=[0.0] * S,
                       update_costs=[0.0] * S, replicas=1)  # fmt: skip
    return run_graph(g).makespan


# ---- the closed form against the task graph and the interleaved simulation ------------------------
@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
def test_last_stage_slower_equals_the_task_graph(sched):
    rng = np.random.default_rng(24)
    for _ in range(60):
        S, M = int(rng.integers(2, 7)), int(rng.integers(1, 13))
        f, b = rng.uniform(0.2, 2.0, 2)  # any forward/backward split: sends and TP sit in both
        hf, hb = rng.uniform(0.0, 2.0, 2)  # the head's forward and backward on the last stage
        fwd, bwd = [f] * S, [b] * S
        fwd[-1] += hf
        bwd[-1] += hb
        want = graph_makespan(fwd, bwd, M, sched)
        assert pipeline_time(f + b, hf + hb, S, M) == pytest.approx(want, rel=1e-9)
        tau = [x + y for x, y in zip(fwd, bwd)]  # the textbook form: sum_i tau_i + (m - 1) max_i tau_i
        assert sum(tau) + (M - 1) * max(tau) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(("p", "v", "m"), [(2, 2, 4), (4, 2, 8), (4, 3, 8), (3, 2, 6), (4, 2, 4),
                                           (8, 4, 16), (4, 4, 12), (2, 3, 2), (3, 4, 9)])  # fmt: skip
def test_interleaved_equals_a_simulation_of_megatrons_order(p, v, m):
    rng = np.random.default_rng(p * 100 + v * 10 + m)
    for _ in range(5):
        f, b = rng.uniform(0.2, 2.0, 2)
        hf, hb = rng.uniform(0.0, 2.0, 2)
        fwd = [[f / v] * v for _ in range(p)]
        bwd = [[b / v] * v for _ in range(p)]
        equal = makespan(fwd, bwd, m)
        assert pipeline_time(f + b, 0.0, p, m, v) == pytest.approx(equal, rel=1e-9)
        assert (m + (p - 1) / v) * (f + b) == pytest.approx(equal, rel=1e-9)  # Megatron, Section 2.2.2
        fwd[p - 1][v - 1] += hf  # the head: in the last GPU's last chunk (the model's last layers)
        bwd[p - 1][v - 1] += hb
        got = makespan(fwd, bwd, m)
        assert pipeline_time(f + b, hf + hb, p, m, v) == pytest.approx(got, rel=1e-9)


def test_equal_stages_are_the_former_form_bit_for_bit():
    for tau, p, m, v in [(0.0123, 8, 64, 1), (1 / 3, 35, 2520 // 35, 3), (7e-3, 4, 8, 2)]:
        assert pipeline_time(tau, 0.0, p, m, v) == m * tau + (p - 1) / v * tau


# ---- the scheme -------------------------------------------------------------------------------------
GPT = TransformerShape(16, 4096, 32, 2048, 51200)


def test_the_last_stage_runs_the_head_as_its_flops_say():
    w = GPT.workload(1, flops=150e12)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT)
    tm = s.times(w, dgx(64))
    b, sq, h, V, l = 1, 2048, 4096, 51200, 16
    logits = 3 * 2 * b * sq * h * V / 150e12  # 2 b s h V forward, twice that backward
    blocks = 3 * l * (24 * b * sq * h * h + 4 * b * sq * sq * h) / 150e12
    assert tm.head == pytest.approx(logits / 8, rel=1e-12)
    assert tm.compute == pytest.approx(blocks / (8 * 4), rel=1e-12)
    # full recomputation re-runs the blocks' forward only (Narayanan et al., eq. 3)
    full = s.replace(recompute="full").times(w, dgx(64))
    assert full.compute == pytest.approx(blocks * 4 / 3 / 32, rel=1e-12) and full.head == tm.head
    # without a shape there is no head: the stages stay equal
    A = GPT.boundary_bytes()
    plain = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, layers=16, hidden_bytes=A)
    assert plain.times(w, dgx(64)).head == 0.0


def test_the_step_equals_the_task_graph_of_its_own_stage_times():
    w = GPT.workload(1, flops=150e12)
    c = dgx(64)
    for kw in ({}, {"schedule": "gpipe"}, {"recompute": "full", "zero": 1}):
        s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT, **kw)
        tm = s.times(w, c)
        sched = "gpipe" if s.schedule == "gpipe" else "1f1b"
        fb, bb = reference_blocks(s, w, c, tm)  # each pass's compute and the collectives it issues
        msg = tm.p2p / 2  # every boundary between nodes; no gradient from stage 0, no activation from 3
        fwd = [fb + msg] * 3 + [fb]
        bwd = [bb] + [bb + msg] * 3
        fwd[-1] += tm.head / 3
        bwd[-1] += 2 * tm.head / 3
        want = graph_makespan(fwd, bwd, 8, sched) + tm.dp + tm.update
        assert q.predict(s, w, c).iteration_time == pytest.approx(want, rel=1e-9)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT, schedule="interleaved",
                         virtual_stages=2)  # fmt: skip
    tm = s.times(w, c)
    fb, bb = reference_blocks(s, w, c, tm)
    msg = tm.p2p / 4
    fwd = [[fb / 2 + msg] * 2 for _ in range(4)]
    bwd = [[bb / 2 + msg] * 2 for _ in range(4)]
    fwd[3][1] -= msg  # the last virtual stage sends no activation, the first no gradient
    bwd[0][0] -= msg
    fwd[3][1] += tm.head / 3
    bwd[3][1] += 2 * tm.head / 3
    want = makespan(fwd, bwd, 8) + tm.dp + tm.update
    assert q.predict(s, w, c).iteration_time == pytest.approx(want, rel=1e-9)


def test_scatter_gather_all_gathers_each_received_message_over_nvlink():
    A = GPT.boundary_bytes(1)
    w = GPT.workload(1, flops=150e12)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT)
    ring_ag = 7 / 8 * A / B_I + 7 * A_I  # ring all-gather of A over the 8 ranks of a node
    send = A_E + A / 8 / (8 * B_R / 8)  # A/t over the GPU's rail (the next stage is in another node)
    got = q.predict(s, w, dgx(64)).details["p2p_per_microbatch"]
    assert got == pytest.approx(2 * (send + ring_ag), rel=1e-12)
    inter = q.predict(s.replace(schedule="interleaved", virtual_stages=2), w, dgx(64))
    assert inter.details["p2p_per_microbatch"] == pytest.approx(4 * (send + ring_ag), rel=1e-12)
    # sequence parallelism keeps each rank's shard: nothing to gather
    sp = q.predict(s.replace(sequence_parallel=True), w, dgx(64))
    assert sp.details["p2p_per_microbatch"] == pytest.approx(2 * send, rel=1e-12)


# ---- uneven partitions (stage_layers=): sum tau_i + (m - 1) max tau_i ---------------------------------
@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
def test_uneven_stages_with_the_last_slowest_equal_the_task_graph(sched):
    rng = np.random.default_rng(70)
    for _ in range(80):
        S, M = int(rng.integers(2, 9)), int(rng.integers(1, 17))
        tau = rng.uniform(0.2, 2.0, S)
        if sched == "1f1b":  # any forward/backward split per stage
            fwd = list(tau * rng.uniform(0.1, 0.9, S))
        else:  # GPipe: the last stage the slowest forward and backward (the blocks a third forward)
            fwd = list(tau / 3)
        bwd = [x - f for x, f in zip(tau, fwd)]
        hf, hb = rng.uniform(0.0, 1.0, 2)  # the last stage: the slowest stage's blocks, plus a head
        k = int(np.argmax(tau))
        fwd[-1], bwd[-1] = fwd[k] + hf, bwd[k] + hb
        tau = [f + b for f, b in zip(fwd, bwd)]
        want = graph_makespan(fwd, bwd, M, sched)
        assert stage_pipeline_time(tau, M) == pytest.approx(want, rel=1e-9)


def test_uneven_gpipe_with_backward_a_fixed_multiple_of_forward_equals_the_task_graph():
    rng = np.random.default_rng(71)
    for _ in range(80):
        S, M = int(rng.integers(2, 9)), int(rng.integers(1, 17))
        tau = rng.uniform(0.2, 2.0, S)  # any stage the slowest
        want = graph_makespan(list(tau / 3), list(2 * tau / 3), M, "gpipe")
        assert stage_pipeline_time(list(tau), M) == pytest.approx(want, rel=1e-9)


def test_uneven_1f1b_with_an_earlier_stage_slowest_is_an_upper_bound():
    rng = np.random.default_rng(72)
    gaps = []
    for _ in range(80):
        S, M = int(rng.integers(2, 9)), int(rng.integers(1, 17))
        tau = rng.uniform(0.2, 2.0, S)
        tau[-1] = rng.uniform(0.1, 0.9) * tau[:-1].max()  # the last stage is not the slowest
        got = graph_makespan(list(tau / 3), list(2 * tau / 3), M, "1f1b")
        bound = stage_pipeline_time(list(tau), M)
        assert got <= bound * (1 + 1e-12)
        gaps.append(bound / got - 1)
    assert max(gaps) > 0.01  # not exact: the later stages' fill and drain overlap the warm-up


def scheme_stage_graph(s, w, c):
    """The task graph of the scheme's own passes (each stage's forward and backward, its sends in them)."""
    tm = s.times(w, c)
    F, B = tm.chunk_passes
    return graph_makespan(list(F[:, 0]), list(B[:, 0]), s.microbatches, s.schedule) + tm.dp + tm.update


GPT22 = TransformerShape(22, 4096, 32, 2048, 51200)


@pytest.mark.parametrize("sched", ["1f1b", "gpipe"])
def test_the_scheme_with_uneven_stages_equals_the_task_graph(sched):
    w, c = GPT22.workload(1, flops=150e12), dgx(64)
    for layers in [(5, 5, 5, 7), (4, 6, 6, 6), (7, 5, 5, 5)]:
        s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT22, stage_layers=layers,
                             schedule=sched, recompute="full")  # fmt: skip
        tm = s.times(w, c)
        p = q.predict(s, w, c)
        got = p.iteration_time
        # the blocks, their TP collectives scale with a stage's layers; the sends do not
        one = GPT22.layers / 4
        sends = [tm.p2p / 2] + [tm.p2p] * 2 + [tm.p2p / 2]  # the end stages send one message
        for n, tau, x in zip(layers, tm.stage_taus[:-1], sends):
            assert tau == pytest.approx(n / one * (tm.compute + tm.tp) + x, rel=1e-12)
        last = layers[-1] / one * (tm.compute + tm.tp) + sends[-1] + tm.head
        assert tm.stage_taus[-1] == pytest.approx(last)
        # the longest path through the schedule's passes: the task graph Pipeline solves, whichever stage
        # paces (an earlier one, under 1F1B, ran below sum tau_i + (m - 1) max tau_i, the step before)
        assert got == pytest.approx(scheme_stage_graph(s, w, c), rel=1e-9)
        assert sum(p.breakdown.values()) == pytest.approx(got, rel=1e-12)


def test_equal_stage_layers_are_the_equal_stages_bit_for_bit():
    w, c = GPT.workload(1, flops=150e12), dgx(64)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT, recompute="full", zero=1)
    assert (
        q.predict(s, w, c).iteration_time
        == q.predict(s.replace(stage_layers=(4, 4, 4, 4)), w, c).iteration_time
    )


def test_the_memory_is_the_busiest_stages_each_counting_its_own_layers():
    w, c = GPT22.workload(1, flops=150e12), dgx(64)
    s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT22, stage_layers=(4, 6, 6, 6))
    GPT16 = TransformerShape(16, 4096, 32, 2048, 51200)  # 4 layers a stage: the same first stage
    equal = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=GPT16)
    first, ref = stage_memory(s, w, c, 0), stage_memory(equal, GPT16.workload(1, flops=150e12), c, 0)
    assert first.parameters == pytest.approx(ref.parameters, rel=1e-12)
    assert first.activations == pytest.approx(ref.activations, rel=1e-12)
    h, V, sq = 4096, 51200, 2048
    block = 12 * h * h + 13 * h
    per = sq * h * (10 + 24 / 8 + 5 * 32 * sq / (h * 8))  # Korthikanti, t = 8: 23 s h bytes a layer
    ends = ((V + sq) * h, 0, 0, 2 * h + V * h)  # embeddings; final LayerNorm and the tied copy of V h
    flight = (4, 3, 2, 1)  # 1F1B: stage i keeps p - i micro-batches (m = 8)
    hand = [(n * block + e) * 2 / 8 for n, e in zip((4, 6, 6, 6), ends)]
    acts = [k * n * per for n, k in zip((4, 6, 6, 6), flight)]
    totals = [8 * P + A for P, A in zip(hand, acts)]  # ZeRO 0: P + G + 6 P
    assert first.parameters == pytest.approx(hand[0], rel=1e-12)
    assert first.activations == pytest.approx(acts[0], rel=1e-12)
    got = s.memory(w, c)
    assert max(totals) == totals[1]  # 6 layers x 3 micro-batches: the second stage is the busiest
    assert got.total == pytest.approx(totals[1], rel=1e-12)
    assert got.parameters == pytest.approx(hand[1], rel=1e-12)
    assert got.activations == pytest.approx(acts[1], rel=1e-12)


def test_stage_layers_refuses_what_it_cannot_represent():
    s = q.HybridParallel(pipeline=4, microbatches=8, shape=GPT22, stage_layers="5:6:6:5")
    assert s.stage_layers == (5, 6, 6, 5)
    for bad in [(5, 6, 6), (5, 6, 6, 6), (0, 6, 8, 8), "5:6:x:5", 5.5]:
        with pytest.raises(q.errors.InvalidParameterError, match="stage_layers"):
            q.HybridParallel(pipeline=4, microbatches=8, shape=GPT22, stage_layers=bad)
    with pytest.raises(q.errors.InvalidParameterError, match="interleaved"):
        q.HybridParallel(pipeline=2, microbatches=8, shape=GPT22, stage_layers=(10, 12),
                         schedule="interleaved", virtual_stages=4)  # fmt: skip
    with pytest.raises(q.errors.NotRepresentable, match="equal stages"):
        q.HybridParallel(pipeline=4, microbatches=8, shape=GPT22, stage_layers=(5, 6, 6, 5)).formula()
