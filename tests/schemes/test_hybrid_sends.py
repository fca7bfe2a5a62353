"""HybridParallel's pipeline sends priced boundary by boundary: NVLink inside a node, the rails between.

Where ``t c d < g < t c d p`` (``g`` GPUs per node) a node holds several stages: the boundaries between
them are inside it and those between nodes are not. The independent sources:

- a re-implementation written here from first principles: every rank placed in Megatron-Core's order
  (``tp-cp-ep-dp-pp``, ranks packed ``g`` to a node), each replica's boundaries read off the nodes of
  its ``t c`` ranks at both ends, each chunk's two messages priced by their own boundary, each chunk's
  forward pass with its forward message, its backward pass with its backward one, through a simulation
  of the schedule's order (interleaved: the pass-by-pass one of Megatron's order in
  ``tests/pipeline_schedule_sim.py``; GPipe and 1F1B: the event simulation of
  ``tests/schemes/test_stage_step.py``; the closed form ``sum_i tau_i + (m - 1) max_i tau_i`` before), the
  slowest replica: ``predict`` and the vectorized sweep (``batch_times``, ``evaluate_space``) against it
  to 1e-12 relative;
- a case computed by hand (8 GPUs per node, ``t = 2``, ``p = 8``: four stages a node, boundary 3 -> 4
  between nodes), its numbers written out;
- the pass-by-pass simulation of Megatron-LM's 1F1B and interleaved orders
  (``tests/pipeline_schedule_sim.py``) and the task graph of GPipe: what the closed forms are exact
  for, and by how much they miss otherwise; under the interleaved schedule the step is the simulation
  itself, each message on its own boundary, to 1e-12.

Before the per-boundary pricing every send of such a configuration was priced at NVLink: the
re-implementation, the hand case and the simulations all fail there. Before the chunks' passes were
timed over Megatron's order the interleaved step was the chunks' closed form, 4 to 24 crossings'
excess short of the simulation: the interleaved assertions fail there.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_batch import batch_times
from queuesgd.schemes.parallel.hybrid_layout import head_slot_layers
from queuesgd.schemes.parallel.hybrid_stages import chunk_layers
from queuesgd.schemes.parallel.megatron import SCHEDULES
from queuesgd.schemes.parallel.schedule_step import interleaved_chunk_time
from tests.hybrid_rows import A_E, A_I, B_I, B_R, rel
from tests.pipeline_schedule_sim import makespan
from tests.schemes.test_hybrid_stages import graph_makespan
from tests.schemes.test_stage_step import reference_blocks
from tests.schemes.test_stage_step import simulate as event_makespan

EVEN = TransformerShape(48, 512, 8, 256, 1000, name="even48")  # p v divides 48 for p <= 8, v = 2
SLOTS = TransformerShape(46, 512, 8, 256, 1000, name="slots46")  # (46 + 2) / p whole for p = 2, 3, 4, 6, 8


def cluster(workers: int, g: int | None) -> q.Cluster:
    """``g`` GPUs a node: NVLink 300 GB/s (2 us), ``g`` rails of 200 Gbit/s (5 us); flat without ``g``."""
    if g is None:
        return q.Cluster(workers, B_R, A_E)
    return q.Cluster(workers, B_R, A_E, gpus_per_node=g, node_bandwidth=B_I, node_latency=A_I, rails=g)


# ---- the re-implementation ----------------------------------------------------------------------------
def reference(s: q.HybridParallel, w: q.Workload, c: q.Cluster) -> tuple[float, float, bool]:
    """``(step, p2p, mixed)`` from first principles; ``mixed``: the boundaries are not all priced alike.

    The parts that are not sends (a stage's compute and collectives, the head, the data-parallel part
    and the update) are the scheme's own ``times``; the sends and the pipeline are computed here.
    """
    tm = s.times(w, c)
    t, cp, p, v, m = s.tensor, s.context, s.pipeline, s.virtual_stages, s.microbatches
    d = c.workers // (t * cp * p)
    g = c.gpus_per_node or 1
    A = s.message_bytes(w) / cp  # this rank's tokens' hidden states
    message = A / t  # scatter/gather: each rank sends its t-th
    regather = 0.0
    if not s.sequence_parallel and t > 1:  # the receivers' ring all-gather of A over t NVLink ranks
        assert c.gpus_per_node is not None and t <= g
        regather = (t - 1) / t * A / B_I + (t - 1) * A_I
    if c.gpus_per_node is None:  # every worker its own node: every message over its link
        inside = across = A_E + message / B_R + regather
    else:
        inside = A_I + message / B_I + regather
        across = A_E + message / (g * B_R / g) + regather  # the GPU's share of the node's g rails

    def node(stage: int, jd: int, jc: int, jt: int) -> int:
        return (stage * t * cp * d + jd * t * cp + jc * t + jt) // g  # tp fastest, then cp, dp; pp slowest

    layers = s.layer_count
    if s.stage_layers is None:
        shares = [[1 / v] * v for _ in range(p)]
    elif s.schedule == "interleaved":
        shares = [[x * p / layers for x in row] for row in chunk_layers(s.stage_layers, v)]
    else:
        shares = [[n * p / layers] for n in s.stage_layers]
    work = tm.compute + tm.tp + tm.cp + tm.ep
    blocks = reference_blocks(s, w, c, tm) if p > 1 else (work / 3, 2 * work / 3)  # each pass's own
    worst, most, prices = 0.0, 0.0, set()
    for jd in range(d):
        crossing = [
            any(node(r, jd, jc, jt) != node((r + 1) % p, jd, jc, jt) for jc in range(cp) for jt in range(t))
            for r in range(p)
        ]  # boundary r joins stage r and r + 1 (mod p: the interleaved chunks wrap to the first stage)
        price = [across if x else inside for x in crossing]
        chunks, fwd, bwd = [], [], []
        for r in range(p):
            row, frow, brow = [], [], []
            for k in range(v):
                u = k * p + r  # virtual stage
                forward = price[r] if u < p * v - 1 else None  # the model's last chunk sends nothing forward
                backward = price[(r - 1) % p] if u > 0 else None  # ... the first nothing backward
                prices |= {forward, backward} - {None}
                forward, backward = forward or 0.0, backward or 0.0
                if p == 1:  # no pipeline, no sends
                    forward = backward = 0.0
                row.append(shares[r][k] * work + forward + backward)
                frow.append(shares[r][k] * blocks[0] + forward)  # each message after its own pass
                brow.append(shares[r][k] * blocks[1] + backward)
            chunks.append(row)
            fwd.append(frow)
            bwd.append(brow)
        most = max([most] + [sum(row) - sum(shares[r]) * work for r, row in enumerate(chunks)])
        fwd[-1][-1] += tm.head / 3  # the head 1:2
        bwd[-1][-1] += 2 * tm.head / 3
        pipe = simulated(fwd, bwd, m, s.schedule)  # the schedule's order simulated pass by pass
        worst = max(worst, pipe)
    if p == 1:
        most, prices = 0.0, set()
    return worst + tm.dp + tm.update, most, len(prices) > 1


@functools.cache
def _simulated(fwd: tuple, bwd: tuple, m: int, sched: str) -> float:
    if sched == "interleaved":
        return makespan(fwd, bwd, m)
    zero = [0.0] * len(fwd)  # the sends are in the passes
    return event_makespan(sched, [x[0] for x in fwd], [x[0] for x in bwd], zero, zero, m)


def simulated(fwd: list, bwd: list, m: int, sched: str = "interleaved") -> float:
    """The simulated step, once per distinct set of passes: :func:`makespan` of Megatron's interleaved
    order, or the event simulation of GPipe and 1F1B of ``tests/schemes/test_stage_step.py``."""
    return _simulated(tuple(map(tuple, fwd)), tuple(map(tuple, bwd)), m, sched)


def grid():
    """(g, t, c, d, p, schedule, layout, sequence_parallel): stages of 1 to 24 GPUs on nodes of 4 and 8."""
    for g, t, cp, d, p in itertools.product((4, 8), (1, 2, 4), (1, 2), (1, 2, 3), (2, 3, 4, 6, 8)):
        n = t * cp * d * p
        if t > g or (n > g and n % g):
            continue
        for sched, layout, sp in itertools.product(("1f1b", "gpipe", "interleaved"), ("even", "head-slots"),
                                                   (False, True)):  # fmt: skip
            if not (sp and t == 1):
                yield g, t, cp, d, p, sched, layout, sp


def scheme_of(t, cp, p, sched, layout, sp) -> q.HybridParallel:
    shape = EVEN if layout == "even" else SLOTS
    v = 2 if sched == "interleaved" else 1
    stages = head_slot_layers(shape.layers, p) if layout == "head-slots" else None
    kw = dict(schedule=sched, virtual_stages=v, shape=shape, sequence_parallel=sp, stage_layers=stages)
    return q.HybridParallel(tensor=t, context=cp, pipeline=p, microbatches=2 * p, **kw)


def test_predict_and_the_sweep_equal_the_reimplementation_on_a_grid():
    rows = {"mixed": 0, "replicas differ": 0, "alike": 0, "interleaved head-slots, mixed": 0}
    cases: dict[tuple, list] = {}
    for g, t, cp, d, p, sched, layout, sp in grid():
        s = scheme_of(t, cp, p, sched, layout, sp)
        c = cluster(t * cp * d * p, g)
        w = s.shape.workload(1, flops=150e12)
        want, p2p, mixed = reference(s, w, c)
        got = q.predict(s, w, c)
        assert rel(got.iteration_time, want) <= 1e-12, (g, t, cp, d, p, sched, layout, sp)
        assert rel(got.details["p2p_per_microbatch"], p2p) <= 1e-12
        rows["mixed" if mixed else "alike"] += 1
        rows["replicas differ"] += mixed and (t * cp * d) % g != 0
        rows["interleaved head-slots, mixed"] += mixed and sched == "interleaved" and layout == "head-slots"
        cases.setdefault((g, s.shape.name), []).append((s, d, want, p2p, layout))
    assert rows["mixed"] >= 150 and rows["replicas differ"] >= 20 and rows["alike"] >= 100, rows
    assert rows["interleaved head-slots, mixed"] >= 40, rows  # uneven chunks and sends at once
    # the sweep: one vectorized evaluation per cluster size and shape, every row against the same reference
    for (g, _), group in cases.items():
        by_workers: dict[int, list] = {}
        for s, d, want, p2p, layout in group:
            by_workers.setdefault(s.tensor * s.context * d * s.pipeline, []).append((s, d, want, p2p, layout))
        for n, items in by_workers.items():
            shape = items[0][0].shape
            out = batch_times(
                shape, cluster(n, g), {1: shape.workload(1, flops=150e12)},
                tensor=[s.tensor for s, *_ in items], pipeline=[s.pipeline for s, *_ in items],
                data=[d for _, d, *_ in items], microbatch=1,
                microbatches=[s.microbatches for s, *_ in items],
                schedule=[SCHEDULES.index(s.schedule) for s, *_ in items],
                virtual_stages=[s.virtual_stages for s, *_ in items],
                sequence_parallel=[s.sequence_parallel for s, *_ in items], recompute=0, zero=0,
                context=[s.context for s, *_ in items], layout=[int(x[4] == "head-slots") for x in items],
            )  # fmt: skip
            for i, (s, d, want, p2p, _) in enumerate(items):
                assert rel(float(out["step"][i]), want) <= 1e-12, (n, g, s, d)
                assert rel(float(out["p2p"][i]), p2p) <= 1e-12, (n, g, s, d)


def test_the_planners_rows_equal_the_reimplementation():
    # three nodes of 8: d = 3 and stages of 6 GPUs straddle nodes; every recomputation and ZeRO stage
    c = cluster(24, 8)
    space = HybridSpace(schedule=("1f1b", "gpipe", "interleaved"), layout=("even", "head-slots"))
    table = evaluate_space(SLOTS, c, space, global_batch=48, memory_limit=1e12, flops=150e12)
    mixed = 0
    for i in range(len(table)):
        s, w = table.scheme(i)
        want, p2p, split = reference(s, w, c)
        assert rel(float(table["step"][i]), want) <= 1e-12, table.row(i)
        assert rel(float(table["p2p"][i]), p2p) <= 1e-12, table.row(i)
        mixed += split
    assert mixed >= 100, mixed


# ---- by hand --------------------------------------------------------------------------------------------
GPT = TransformerShape(16, 4096, 32, 2048, 51200)


def test_four_stages_a_node_by_hand():
    # 16 GPUs, 8 per node; t = 2, d = 1, p = 8: stage i on ranks 2i, 2i + 1, stages 0-3 on node 0 and 4-7 on
    # node 1. With sequence parallelism a message is A / t = 2 x 2048 x 4096 / 2 = 8,388,608 bytes:
    #   inside a node:  2 us + 8,388,608 / 300 GB/s            =  29.962 us
    #   between nodes:  5 us + 8,388,608 / (8 x 25 GB/s / 8)   = 340.544 us
    # 1F1B: stage i sends forward to i + 1 and backward to i - 1, so stages 1, 2, 5, 6 pay 2 x 29.962 =
    # 59.924 us a micro-batch, stages 3 and 4 (the boundary 3 -> 4) 29.962 + 340.544 = 370.506 us, and the
    # first and the last stage 29.962 us: their one message (no gradient from stage 0, no activation
    # from stage 7, as Megatron's send_backward / send_forward skip them).
    inside, across = 2e-6 + 8388608 / 300e9, 5e-6 + 8388608 / 25e9
    assert (round(inside * 1e6, 3), round(across * 1e6, 3)) == (29.962, 340.544)
    s = q.HybridParallel(tensor=2, pipeline=8, microbatches=16, shape=GPT, sequence_parallel=True)
    w = GPT.workload(1, flops=150e12)
    c = cluster(16, 8)
    p = q.predict(s, w, c)
    tm = s.times(w, c)
    work = tm.compute + tm.tp
    sends = [inside] + [2 * inside] * 2 + [inside + across] * 2 + [2 * inside] * 2 + [inside]
    taus = [work + x for x in sends]
    taus[-1] += tm.head  # the output layer: 8.59 ms of logits, far more than the 0.31 ms a crossing adds
    assert [round(x * 1e6, 3) for x in sends] == [29.962] + [59.924] * 2 + [370.506] * 2 + [59.924] * 2 + [
        29.962
    ]
    assert p.details["stage_times"] == pytest.approx(taus, rel=1e-12)
    assert p.details["p2p_per_microbatch"] == pytest.approx(370.506e-6, abs=1e-9)
    assert p.details["slowest_stage"] == 7
    step = sum(taus) + 15 * max(taus) + tm.dp + tm.update
    assert p.iteration_time == pytest.approx(step, rel=1e-12)
    # every send at NVLink (the former pricing) is two crossings' worth faster: 2 x 310.582 us
    nv = [work + x for x in [inside] + [2 * inside] * 6 + [inside]]
    nvlink = sum(nv) + tm.head + 15 * (nv[-1] + tm.head) + tm.dp + tm.update
    assert (p.iteration_time - nvlink) * 1e6 == pytest.approx(621.164, abs=1e-3)
    # two stages a node (d = 2): every other boundary crosses; four nodes (t = 1, p = 16 on 16): 3, 7, 11
    s2 = s.replace(data=2)
    assert q.predict(s2, w, cluster(32, 8)).details["stage_times"][1:3] == pytest.approx(
        [work + inside + across] * 2, rel=1e-12
    )


# ---- against a pass-by-pass simulation -------------------------------------------------------------------
def passes(s: q.HybridParallel, w: q.Workload, c: q.Cluster) -> tuple[list, list]:
    """The scheme's chunks split into passes (the blocks' as each pass issues its collectives,
    :func:`~tests.schemes.test_stage_step.reference_blocks`), each message in its own pass, none at the
    ends."""
    tm = s.times(w, c)
    p, v = s.pipeline, s.virtual_stages
    work = (tm.compute + tm.tp) / v
    fb, bb = (x / v for x in reference_blocks(s, w, c, tm))
    chunks = tm.chunk_times
    k = c.gpus_per_node // (s.tensor * s.replicas(c))  # stages a node (t d divides g here)
    A = s.message_bytes(w) / s.tensor  # with sequence parallelism (or t = 1): no all-gather
    price = [(5e-6 + A / B_R) if (r + 1) % k == 0 else (2e-6 + A / B_I) for r in range(p)]
    fwd = [[0.0] * v for _ in range(p)]
    bwd = [[0.0] * v for _ in range(p)]
    for r, j in itertools.product(range(p), range(v)):
        u = j * p + r
        f = price[r] if u < p * v - 1 else 0.0
        b = price[r - 1] if u > 0 else 0.0
        fwd[r][j], bwd[r][j] = fb + f, bb + b
        assert fwd[r][j] + bwd[r][j] == pytest.approx(chunks[r][j] - (tm.head if (r, j) == (p - 1, v - 1)
                                                                        else 0.0), rel=1e-12)  # fmt: skip
        assert fb + bb == pytest.approx(work, rel=1e-12)
    fwd[-1][-1] += tm.head / 3
    bwd[-1][-1] += 2 * tm.head / 3
    return fwd, bwd


#: (t, p, d) on nodes of 8, t d < 8 < t d p: 8 / (t d) stages a node; 32 layers (p v divides them for v = 2).
CASES = [(2, 8, 1), (2, 16, 1), (4, 8, 1), (4, 4, 1), (1, 16, 2), (1, 16, 1), (2, 4, 2)]
GPT32 = TransformerShape(32, 4096, 32, 2048, 51200)


@pytest.mark.parametrize(("t", "p", "d"), CASES)
def test_1f1b_and_gpipe_equal_the_simulation_where_the_last_stage_is_slowest(t, p, d):
    w = GPT32.workload(1, flops=150e12)
    for m in (p, 2 * p, 4 * p):
        s = q.HybridParallel(tensor=t, pipeline=p, microbatches=m, shape=GPT32, sequence_parallel=t > 1,
                             data=d)
        c = cluster(t * p * d, 8)
        tm = s.times(w, c)
        assert tm.slowest == p - 1
        fwd, bwd = passes(s, w, c)
        want = makespan(fwd, bwd, m, plain=True) + tm.dp + tm.update
        assert q.predict(s, w, c).iteration_time == pytest.approx(want, rel=1e-12)
        # GPipe: the task graph Pipeline solves (its forwards, then its backwards)
        gp = s.replace(schedule="gpipe")
        want = graph_makespan([x[0] for x in fwd], [x[0] for x in bwd], m, "gpipe") + tm.dp + tm.update
        assert q.predict(gp, w, c).iteration_time == pytest.approx(want, rel=1e-9)


def test_interleaved_is_the_simulation_each_message_on_its_own_boundary():
    # Interleaved, each chunk's forward pass carries its activation's message and its backward pass its
    # gradient's, each priced by the boundary it crosses: the step is the simulation of Megatron's order to
    # 1e-12, m = p to 4p. The chunks' closed form (interleaved_chunk_time, the step before) has the slowest
    # GPU's chunks exactly (its slope in m is the simulation's) but the fill and drain at (p - 1) of the
    # largest chunk, where the simulation's warm-up and cool-down run through more crossings: below it by a
    # number of crossings' excess that does not depend on m (4 to 24 here), at most 1.58% of the step
    # (v = 4, m = p), less than half of what pricing every send at NVLink left out (0.42% to 3.50%).
    w = GPT32.workload(1, flops=150e12)
    worst_form, worst_old, ratio, seen = 0.0, (1.0, 0.0), 0.0, set()
    for (t, p, d), v in itertools.product(CASES, (2, 4)):
        if 32 % (p * v):
            continue
        gaps = []
        for m in (p, 2 * p, 4 * p):
            s = q.HybridParallel(tensor=t, pipeline=p, microbatches=m, shape=GPT32, sequence_parallel=t > 1,
                                 schedule="interleaved", virtual_stages=v, data=d)  # fmt: skip
            c = cluster(t * p * d, 8)
            tm = s.times(w, c)
            fwd, bwd = passes(s, w, c)
            sim = makespan(fwd, bwd, m) + tm.dp + tm.update
            got = q.predict(s, w, c).iteration_time
            assert got == pytest.approx(sim, rel=1e-12), (t, p, d, v, m)
            np.testing.assert_allclose(np.array(tm.chunk_passes), [fwd, bwd], rtol=1e-12)
            form = interleaved_chunk_time(tm.chunk_times, m) + tm.dp + tm.update
            inside = 2e-6 + s.message_bytes(w) / t / B_I
            excess = 5e-6 + s.message_bytes(w) / t / B_R - inside
            assert form <= sim * (1 + 1e-12)
            gaps.append((sim - form) / excess)
            tau = tm.compute + tm.tp + 2 * v * inside  # every send at NVLink: equal stages
            nvlink = m * (tau + tm.head) + (p - 1) / v * tau + tm.dp + tm.update
            short, old = 1 - form / sim, 1 - nvlink / sim
            worst_form, ratio = max(worst_form, short), max(ratio, short / old)
            worst_old = (min(worst_old[0], old), max(worst_old[1], old))
        assert max(gaps) - min(gaps) == pytest.approx(0.0, abs=1e-6), gaps  # constant in m
        seen.add(round(gaps[0], 6))
    assert seen == {4.0, 8.0, 12.0, 20.0, 24.0}, seen  # 11 cases of (t, p, d, v), each 3 m
    assert round(worst_form, 4) == 0.0158 and ratio < 0.48
    assert (round(worst_old[0], 4), round(worst_old[1], 4)) == (0.0042, 0.035)


# ---- the formula ---------------------------------------------------------------------------------------
def test_the_formula_holds_where_every_boundary_crosses_and_refuses_where_some_do_not():
    # Its condition t >= g puts every stage on whole nodes: every boundary, the interleaved wrap too,
    # between nodes, which is the formula's one price B. Where t c d < g < t c d p it is refused.
    w = GPT.workload(1, flops=150e12)
    for t, p, sched, v in ((8, 4, "interleaved", 2), (8, 8, "1f1b", 1), (2, 8, "1f1b", 1)):
        s = q.HybridParallel(tensor=t, pipeline=p, microbatches=16, shape=GPT, schedule=sched,
                             virtual_stages=v, sequence_parallel=True)  # fmt: skip
        c = cluster(t * p, 8)
        pr = q.predict(s, w, c)
        f = q.derive(s, "deterministic")
        values = dict(
            t=t, p=p, d=1, M=16, m=1, l=16, v=v, C=w.compute_time, C_h=3 * 2 * 2048 * 4096 * 51200 / 150e12,
            A=GPT.boundary_bytes(1), B_intra=B_I, alpha_intra=A_I, B=B_R, alpha=A_E, G=w.gradient_bytes,
            u=w.update_time, g=8,
        )  # fmt: skip
        values = {k: x for k, x in values.items() if k in f.free_names + f.condition_names}
        if t >= 8:
            assert len(set(pr.details["stage_times"][1:-1])) == 1  # every boundary alike: equal middle stages
            assert float(f.evaluate(**values)) == pytest.approx(pr.throughput, rel=1e-12)
        else:
            assert len(set(pr.details["stage_times"][1:-1])) == 2  # boundary 3 -> 4 between nodes
            with pytest.raises(InvalidParameterError, match=r"t >= g"):
                f.evaluate(**values)


def test_the_layout_helpers_say_which_boundaries_cross():
    from queuesgd.schemes.parallel.hybrid_sends import chunk_crossings, crossing_patterns

    assert crossing_patterns(2, 1, 1, 8, 8) == ((False, False, False, True) * 2,)
    assert crossing_patterns(1, 1, 1, 16, 8) == (((False,) * 7 + (True,)) * 2,)
    # stages of 6 GPUs on nodes of 8: replica j's ranks 6 i + 2 j, + 1; it crosses where they change node
    assert crossing_patterns(2, 1, 3, 4, 8) == (
        (False, True, True, True), (True, False, True, True), (True, True, False, True),
    )  # fmt: skip
    assert crossing_patterns(4, 2, 1, 4, 8) == ((True,) * 4,)  # a stage fills a node
    assert crossing_patterns(1, 1, 2, 4, 8) == ((False,) * 4,)  # the pipeline fits in one
    # interleaved: the wrap 3 -> 0 crosses; chunk (0, 0) has no backward, (3, 1) no forward
    assert chunk_crossings((False, True, False, True), 2) == ((0, 1), (1, 1), (1, 1), (1, 0))
    assert chunk_crossings((False, True, False, True), 1) == ((0,), (1,), (1,), (0,))
