"""Which pass issues a stage's TP, CP and EP collectives, and the sends the end stages skip: by hand.

Per transformer layer Megatron-LM issues 2 TP all-reduces in the forward and 2 in the backward (the ``f``
and ``g`` operators, Shoeybi et al. 2019, Figs. 3-4), with sequence parallelism 2 all-gathers + 2
reduce-scatters each way (Korthikanti et al. 2022, Sec. 4.2.2), the MoE dispatch and combine all-to-alls
forward and their transposes backward, and full recomputation re-issues the forward's in the backward.
The first stage sends no gradient, the last no activation (``send_backward`` / ``send_forward`` return on
the first / last stage). GPipe's step is ``sum f + (m - 1) max f + sum b + (m - 1) max b`` for any
passes; with two stages, the first's forward and the last's backward the longer:
``m (f_0 + b_1) + f_1 + b_0``. The numbers below are written by hand from the cluster's links (ring
collectives of two ranks inside a node: an all-reduce of ``n`` bytes ``n / B + 2 alpha``, an all-gather or
reduce-scatter ``n / 2B + alpha``).
"""

from __future__ import annotations

import pytest

import queuesgd as q
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.schemes.parallel.megatron import alltoall_bytes
from tests.hybrid_rows import A_E, A_I, B_I, B_R, dgx

A = 64e6  # hidden_bytes: large enough that NCCL's choice is the ring
C = 0.4  # compute of one micro-batch on one GPU, whole model


def two_stages(m: int, f0: float, f1: float, b0: float, b1: float) -> float:
    """GPipe of two stages whose first has the longer forward and the last the longer backward."""
    assert f0 >= f1 and b1 >= b0
    return m * (f0 + b1) + f1 + b0


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("recompute", [None, "full"])
def test_tp_collectives_split_as_each_pass_issues_them(sp, recompute):
    # t = 2, p = 2, d = 2 in one DGX node, 4 layers, no shape (no head): every link NVLink
    s = q.HybridParallel(tensor=2, pipeline=2, microbatches=4, schedule="gpipe", layers=4, hidden_bytes=A,
                         sequence_parallel=sp, recompute=recompute)  # fmt: skip
    w, c = q.Workload(C, "1GB", batch_size=1), dgx(8)
    pr = q.predict(s, w, c)
    assert set(pr.details["algorithms"].values()) == {"ring"}
    half = A / 2 / B_I + A_I  # an all-gather or a reduce-scatter of A over 2 ranks
    one = 2 * half if sp else A / B_I + 2 * A_I  # SP: reduce-scatter + all-gather; else the all-reduce
    n = 2  # layers a stage
    fwd = C / 4 / 3  # a stage's blocks' forward: C / (t p), a third
    extra = fwd if recompute == "full" else 0.0
    f = fwd + n * 2 * one  # 2 collective units a layer forward
    b = 2 * fwd + extra + n * (4 if recompute == "full" else 2) * one  # 2 backward (+ 2 recomputed)
    send = A_I + A / 2 / B_I + (0.0 if sp else half)  # A / t, then (no SP) the all-gather of A
    want = two_stages(4, f + send, f, b, b + send)  # the first sends no gradient, the last no activation
    want += pr.details["dp_exposed_per_step"] + pr.breakdown["update"]
    assert pr.iteration_time == pytest.approx(want, rel=1e-12)


def test_expert_all_to_alls_split_as_each_pass_issues_them():
    # 8 experts over e = 8 ranks, t = 1, p = 2: dispatch + combine forward, their transposes backward, and
    # the recomputed forward's two more in the backward; the head (1:2) on the last stage
    shape = TransformerShape(4, 1024, 16, 2048, 51200, name="moe")
    s = q.HybridParallel(pipeline=2, microbatches=4, schedule="gpipe", shape=shape, experts=8,
                         expert_parallel=8, recompute="full")  # fmt: skip
    w, c = shape.workload(1, flops=150e12), dgx(16)
    tm = s.times(w, c)
    a2a = collective_time("alltoall", alltoall_bytes(s.message_bytes(w)), c, 8, per_node=8).seconds
    assert tm.ep == pytest.approx(2 * 6 * a2a, rel=1e-12) and tm.tp == 0.0
    send = A_E + s.message_bytes(w) / B_R  # a stage fills a node: over its rail
    f0 = tm.forward + 2 * 2 * a2a + send
    f1 = tm.forward + 2 * 2 * a2a + tm.head / 3
    b0 = tm.compute - tm.forward + 2 * 4 * a2a
    b1 = b0 + send + 2 * tm.head / 3
    want = 4 * max(f0, f1) + min(f0, f1) + 4 * b1 + b0 + tm.dp + tm.update
    assert q.predict(s, w, c).iteration_time == pytest.approx(want, rel=1e-12)


def test_equal_stages_lose_the_two_messages_megatron_does_not_send():
    # 1F1B and the interleaved schedule, equal stages, one price s a message, the head h >= s (h / 3 >= s
    # interleaved): the textbook (m + (p - 1)/v) tau + m h less (m + 1) s; GPipe less the same while
    # h / 3 >= s. The reference is the event simulation of tests/pipeline_schedule_sim.py's orders.
    shape = TransformerShape(8, 1024, 16, 2048, 51200)
    w, c = shape.workload(1, flops=150e12), dgx(32)  # t = 8: every boundary between nodes
    for sched, v in (("1f1b", 1), ("gpipe", 1), ("interleaved", 2)):
        s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, shape=shape, schedule=sched,
                             virtual_stages=v)  # fmt: skip
        tm = s.times(w, c)
        msg = tm.sends[1][0][0]
        assert {x for row in tm.sends for pair in row for x in pair} == {0.0, msg}  # one price, ends 0
        assert tm.head / 3 >= msg
        tau = tm.compute + tm.tp + 2 * v * msg
        want = (8 + 3 / v) * tau + 8 * tm.head - 9 * msg + tm.dp + tm.update
        assert q.predict(s, w, c).iteration_time == pytest.approx(want, rel=1e-12)
