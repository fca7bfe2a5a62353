"""HybridParallel's context and expert parallelism (issue 24, point 2) against hand computations.

Independent sources: the ring and pairwise alpha-beta formulas written out here, Korthikanti's
activation counts, the parameter counts of a transformer block, and ``predict`` row by row for the
vectorized path.
"""

from __future__ import annotations

import dataclasses
from itertools import product

import numpy as np
import pytest

import queuesgd as q
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.gemm_table import GemmTable
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_batch import batch_times
from tests.hybrid_rows import A_E, A_I, B_I, B_R, dgx

S = TransformerShape(layers=8, hidden=1024, heads=16, sequence=2048, vocabulary=51200, name="s")
L, H, SEQ, HEADS = 8, 1024, 2048, 16
A = SEQ * H * 2.0  # b s h x 2 bytes, b = 1


def ring_half(n, size, bw, lat):  # reduce-scatter or all-gather of a whole buffer `size` over n ranks
    return (n - 1) / n * size / bw + (n - 1) * lat


def test_defaults_are_off_and_change_nothing():
    s = q.HybridParallel(tensor=2, pipeline=2, microbatches=8, shape=S, recompute="full", zero=3)
    assert (s.context, s.experts, s.expert_parallel, s.capacity_factor, s.top_k) == (1, None, 1, 1.0, 1)
    explicit = dataclasses.replace(
        s, context=1, experts=None, expert_parallel=1, capacity_factor=1.0, top_k=1
    )
    c, w = dgx(16), S.workload(1, flops=150e12)
    a, b = q.predict(s, w, c), q.predict(explicit, w, c)
    assert a.throughput == b.throughput and a.memory == b.memory
    assert a.details["cp_per_microbatch"] == 0.0 == a.details["ep_per_microbatch"]


def test_context_parallelism_by_hand():
    # t = 2, c = 4 inside one node of 8: K/V of the whole sequence on a TP rank, 2 A / t, all-gathered
    # forward, again backward, gradients reduce-scattered (Megatron-Core's CP guide), ring over 4 NVLink ranks
    w = S.workload(1, flops=150e12)
    s = q.HybridParallel(tensor=2, context=4, microbatches=4, shape=S)
    sol = q.predict(s, w, dgx(8))
    kv = 2 * A / 2
    assert sol.details["cp_per_microbatch"] == pytest.approx(L * 3 * ring_half(4, kv, B_I, A_I), rel=1e-12)
    # TP on this rank's s/4 tokens: one ring all-reduce of A/4 over 2 ranks, 4 per layer
    tp = L * 4 * (2 * ring_half(2, A / 4, B_I, A_I))
    assert sol.details["tp_per_microbatch"] == pytest.approx(tp, rel=1e-12)
    assert sol.breakdown["compute"] == pytest.approx(4 * w.compute_time / (2 * 4), rel=1e-12)
    # activations: Korthikanti's s b h (10 + 24/t + 5 a s/(h t)) per layer, over c
    act = SEQ * H * (10 + 24 / 2 + 5 * HEADS * SEQ / (H * 2)) * L / 4
    assert sol.memory.activations == pytest.approx(act, rel=1e-12)
    # the parameters are not split over c: the same as without CP
    no_cp = q.HybridParallel(tensor=2, data=4, microbatches=4, shape=S)
    assert sol.memory.parameters == q.predict(no_cp, w, dgx(8)).memory.parameters
    assert sol.gradients_per_update == 4  # d = 1: the 4 context ranks share the micro-batches


def test_context_parallel_gradients_reduce_over_d_times_c():
    # t = 8 fills a node; c = 2, d = 4: one rank per node in the data x context group of 8 (its own rail)
    w = S.workload(1, flops=150e12)
    s = q.HybridParallel(tensor=8, context=2, microbatches=4, shape=S)
    sol = q.predict(s, w, dgx(64))
    G = w.gradient_bytes / 8
    assert sol.details["dp_per_step"] == pytest.approx(2 * ring_half(8, G, B_R, A_E), rel=1e-12)
    kv = 2 * A / 8  # across two nodes, one rank each
    assert sol.details["cp_per_microbatch"] == pytest.approx(L * 3 * ring_half(2, kv, B_R, A_E), rel=1e-12)


def test_expert_parallelism_by_hand():
    # 16 experts over e = 8 ranks in one node, capacity factor 1.25, top-2 (GShard); t = c = p = 1, d = 8
    w = S.workload(1, flops=150e12)
    s = q.HybridParallel(
        microbatches=2, shape=S, experts=16, expert_parallel=8, capacity_factor=1.25, top_k=2
    )
    c = dgx(8)
    sol = q.predict(s, w, c)
    buf = A * 1.25 * 2  # each GPU's dispatch buffer; 1/8 of it to each rank
    a2a = 7 * buf / (8 * B_I) + 7 * A_I
    assert sol.details["ep_per_microbatch"] == pytest.approx(L * 4 * a2a, rel=1e-12)
    # compute: the MLPs' 16 b s h^2 of every layer run 2.5 times
    mlp_share = L * 3 * 16 * SEQ * H**2 / S.iteration_flops(1)
    assert sol.breakdown["compute"] / 2 == pytest.approx(w.compute_time * (1 + 1.5 * mlp_share), rel=1e-12)
    # memory: the dense part whole (ZeRO 0), two experts of 8 h^2 + 5 h each per layer, 2 bytes each
    mlp = 8 * H * H + 5 * H
    dense = L * (S.block_parameters - mlp) + S.embedding_parameters + 2 * H
    params = (dense + L * 2 * mlp) * 2
    assert sol.memory.parameters == pytest.approx(params, rel=1e-12)
    assert sol.memory.optimizer == pytest.approx(6 * params, rel=1e-12)
    act = L * SEQ * H * (34 + 5 * HEADS * SEQ / H + 1.5 * 18)  # Korthikanti + the experts' MLP inputs
    assert sol.memory.activations == pytest.approx(act, rel=1e-12)
    # data parallelism: the dense gradients over d = 8 (ring in the node); the experts' over d / e = 1
    G = dense * 2
    assert sol.details["dp_per_step"] == pytest.approx(2 * ring_half(8, G, B_I, A_I), rel=1e-12)


def test_expert_states_shard_over_the_ranks_that_hold_them():
    # ZeRO 1 with e = 2 of d = 8: the experts' optimizer state over the d / e = 4 ranks holding them
    w = S.workload(1, flops=150e12)
    s = q.HybridParallel(microbatches=2, shape=S, experts=4, expert_parallel=2, zero=1)
    m = s.memory(w, dgx(8))
    mlp = 8 * H * H + 5 * H
    dense = (L * (S.block_parameters - mlp) + S.embedding_parameters + 2 * H) * 2
    local = L * 2 * mlp * 2
    assert m.parameters == pytest.approx(dense + local, rel=1e-12)
    assert m.optimizer == pytest.approx(6 * dense / 8 + 6 * local / 4, rel=1e-12)


def test_compute_model_follows_the_context_split():
    # a constant table without memory traffic is the rate model: C / (t p c) again
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
    w = S.workload(1, flops=0.5e15)
    base = q.HybridParallel(tensor=2, context=4, microbatches=4, shape=S)
    shaped = dataclasses.replace(base, compute_model=cm)
    assert shaped.times(w, dgx(8)).compute == pytest.approx(base.times(w, dgx(8)).compute, rel=1e-12)
    ops = S.operations(1, tensor=2, context=4)
    assert sum(o.flops for o in ops) == pytest.approx(S.block_flops(1) / 8, rel=1e-15)


@pytest.mark.parametrize("cluster", [dgx(64), q.Cluster(32, "25Gbit/s", "10us")], ids=["dgx", "flat"])
def test_the_vectorized_path_equals_predict_with_context_and_experts(cluster):
    n = cluster.workers
    rows = []
    for t, c, p, e, z, rc, sp in product((1, 2, 8), (1, 2, 4), (1, 2), (1, 2, 4), range(4), range(3), (0, 1)):
        if n % (t * c * p) or (sp and t == 1):
            continue
        d = n // (t * c * p)
        if d % e:
            continue
        rows.append((t, c, p, d, e, z, rc, sp))
    rng = np.random.default_rng(24)
    rows = [rows[i] for i in rng.choice(len(rows), size=min(120, len(rows)), replace=False)]
    cols = np.array(rows).T
    t, c, p, d, e, z, rc, sp = cols
    workloads = {2: S.workload(2, flops=150e12)}
    out = batch_times(
        S,
        cluster,
        workloads,
        tensor=t,
        pipeline=p,
        data=d,
        microbatch=2,
        microbatches=4,
        schedule=0,
        virtual_stages=1,
        sequence_parallel=sp.astype(bool),
        recompute=rc,
        zero=z,
        context=c,
        expert_parallel=e,
        experts=8,
        capacity_factor=1.25,
        top_k=2,
    )
    recompute = (None, "full", "selective")
    for i, (ti, ci, pi, di, ei, zi, ri, si) in enumerate(rows):
        s = q.HybridParallel(
            tensor=ti,
            pipeline=pi,
            data=di,
            microbatches=4,
            sequence_parallel=bool(si),
            recompute=recompute[ri],
            zero=zi,
            shape=S,
            context=ci,
            experts=8,
            expert_parallel=ei,
            capacity_factor=1.25,
            top_k=2,
        )
        sol = q.predict(s, workloads[2], cluster)
        for name, want in (
            ("throughput", sol.throughput),
            ("cp", sol.details["cp_per_microbatch"]),
            ("ep", sol.details["ep_per_microbatch"]),
            ("dp", sol.details["dp_per_step"]),
            ("update", sol.breakdown["update"]),
            ("memory", sol.memory.total),
            ("optimizer", sol.memory.optimizer),
            ("activations", sol.memory.activations),
        ):
            got = float(out[name][i])
            assert abs(got - want) <= 1e-12 * max(abs(want), 1e-300), (name, rows[i], got, want)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layers": 2, "top_k": 2}, "top_k"),
        ({"layers": 2, "expert_parallel": 2}, "expert_parallel"),
        ({"layers": 2, "capacity_factor": 1.5}, "capacity_factor"),
        ({"shape": S, "experts": 6, "expert_parallel": 4}, "expert_parallel"),
        ({"shape": S, "experts": 2, "top_k": 3}, "top_k"),
        ({"layers": 2, "experts": 4}, "experts"),
        ({"shape": S, "experts": 4, "capacity_factor": 0}, "capacity_factor"),
        ({"shape": S, "experts": 4, "capacity_factor": "1.5"}, "capacity_factor"),
        ({"shape": S, "context": 3}, "context"),
    ],
)
def test_bad_combinations_name_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError, match=rf"^HybridParallel\.{field}:"):
        q.HybridParallel(**kwargs)


def test_workers_are_t_c_p_d_and_experts_split_within_data_parallelism():
    w = S.workload(1)
    with pytest.raises(InvalidParameterError, match="tensor x context x pipeline x data"):
        q.predict(q.HybridParallel(tensor=2, context=4, data=2, shape=S), w, dgx(8))
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.expert_parallel"):
        q.predict(q.HybridParallel(context=4, shape=S, experts=8, expert_parallel=4), w, dgx(8))  # d = 2
    with pytest.raises(NotRepresentable, match="context or expert"):
        q.HybridParallel(context=2, shape=S).formula()
