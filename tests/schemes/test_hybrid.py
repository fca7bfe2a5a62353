"""HybridParallel (issue 24) against Megatron's and ZeRO's own formulas, hand computations and Pipeline."""

from __future__ import annotations

import itertools

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.megatron import (
    bubble_fraction,
    hybrid_memory,
    layer_activation_bytes,
    layers_in_flight,
)
from tests.hybrid_rows import A_E, A_I, B_I, B_R, dgx


def ring(n, S, B, a):
    return 2 * (n - 1) / n * S / B + 2 * (n - 1) * a


def test_pipeline_only_equals_the_pipeline_scheme_and_megatrons_bubble():
    w = q.Workload("12ms", "400MB", batch_size=8)
    c = q.Cluster(4, "10GB/s")
    h = q.predict(q.HybridParallel(pipeline=4, microbatches=8), w, c)
    p = q.predict(q.Pipeline(4, 8), w, c)  # (M + S - 1)(t_f + t_b), another model of the same pipeline
    assert h.iteration_time == pytest.approx(p.iteration_time, rel=1e-12)
    assert h.throughput == pytest.approx(p.throughput, rel=1e-12)
    assert h.breakdown["waiting"] / h.breakdown["compute"] == pytest.approx(3 / 8)  # (p - 1)/m


def test_interleaved_bubble_is_p_minus_1_over_v_m():
    w = q.Workload("80ms", "1GB", batch_size=1)
    s = q.HybridParallel(pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2)
    sol = q.predict(s, w, q.Cluster(4, "1TB/s"))
    ideal = sol.breakdown["compute"] + sol.breakdown["communication"] - sol.details["dp_per_step"]
    assert sol.breakdown["waiting"] / ideal == pytest.approx(3 / 16, rel=1e-12)
    assert bubble_fraction(4, 8, 2) == 3 / 16 == sol.details["bubble"]
    # p2p: 2 v sends of A/t per micro-batch, v times as many as 1F1B
    a = q.HybridParallel(pipeline=4, microbatches=8, hidden_bytes="8MB")
    b = q.HybridParallel(
        pipeline=4, microbatches=8, hidden_bytes="8MB", schedule="interleaved", virtual_stages=2
    )
    c = q.Cluster(4, "1GB/s", latency="10us")
    pa, pb = q.predict(a, w, c), q.predict(b, w, c)
    assert pa.details["p2p_per_microbatch"] == pytest.approx(2 * (10e-6 + 8e6 / 1e9))
    assert pb.details["p2p_per_microbatch"] == pytest.approx(2 * pa.details["p2p_per_microbatch"])


def test_tensor_parallel_communication_per_layer_by_hand():
    A, l = 2048 * 12288 * 2.0, 4  # one micro-batch of GPT-3 175B hidden states (b s h x 2 bytes)
    w = q.Workload("1s", "10GB", batch_size=1)
    s = q.HybridParallel(tensor=8, layers=l, hidden_bytes=A)
    sol = q.predict(s, w, dgx(8))
    per_layer = 4 * ring(8, A, B_I, A_I)  # 2 all-reduces forward, 2 backward, NVLink
    assert sol.details["tp_per_microbatch"] == pytest.approx(l * per_layer, rel=1e-12)
    sp = q.predict(s.replace(sequence_parallel=True), w, dgx(8))  # RS + AG: the same ring volume
    assert sp.details["tp_per_microbatch"] == pytest.approx(l * per_layer, rel=1e-12)
    full = q.predict(s.replace(recompute="full"), w, dgx(8))  # the forward again: 2 more all-reduces
    assert full.details["tp_per_microbatch"] == pytest.approx(l * 6 / 4 * per_layer, rel=1e-12)
    assert full.breakdown["compute"] == pytest.approx(sol.breakdown["compute"] * 4 / 3, rel=1e-12)  # 4 passes


def test_data_parallel_and_zero_collectives_by_hand():
    w = q.Workload("1s", "16GB", batch_size=1, update_time="80ms")
    c = dgx(64)
    base = q.HybridParallel(tensor=8, microbatches=4)  # d = 8, one rank per node: each its own rail
    G = 16e9 / 8
    z0 = q.predict(base, w, c)
    assert z0.details["dp_per_step"] == pytest.approx(ring(8, G, B_R, A_E), rel=1e-12)
    assert z0.breakdown["update"] == pytest.approx(0.08 / 8)
    z1 = q.predict(base.replace(zero=1), w, c)
    assert z1.details["dp_per_step"] == pytest.approx(ring(8, G, B_R, A_E), rel=1e-12)  # RS + AG
    assert z1.breakdown["update"] == pytest.approx(0.08 / 64)
    z3 = q.predict(base.replace(zero=3), w, c)
    half = ring(8, G, B_R, A_E) / 2
    assert z3.details["dp_per_step"] == pytest.approx(4 * 3 * half, rel=1e-12)  # per micro-batch 2 AG + RS


def test_zero_figure_1_memory():
    # Rajbhandari et al. SC'20, Figure 1: 7.5B parameters, N_d = 64, K = 12
    got = [hybrid_memory(15e9, 15e9, 64, z, optimizer=6).total / 1e9 for z in range(4)]
    assert [round(x, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]
    w = q.Workload(1.0, "15GB")
    for z, want in zip(range(3), (120e9, 31.40625e9, 16.640625e9)):
        assert q.HybridParallel(zero=z).memory(w, q.Cluster(64, "1GB/s")).total == pytest.approx(want)
    # stage 3 through the scheme also holds two gathered layers (prefetch): 60 layers of 0.25 GB
    m3 = q.HybridParallel(zero=3, layers=60).memory(w, q.Cluster(64, "1GB/s"))
    assert m3.total == pytest.approx(120e9 / 64 + 2 * 15e9 / 60)
    # without layers: two of the ceil(15e9 / 25 MiB) = 573 equal units (ShardedDataParallel's rule)
    m3 = q.HybridParallel(zero=3).memory(w, q.Cluster(64, "1GB/s"))
    assert m3.total == pytest.approx(120e9 / 64 + 2 * 15e9 / 573)
    sharded = q.ShardedDataParallel(stage=3, optimizer=6).memory(w, q.Cluster(64, "1GB/s"))
    assert m3.total == pytest.approx(sharded.total)


def test_korthikanti_activations():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert layer_activation_bytes(s, b, h, a) == sbh * (34 + 5 * a * s / h)
    assert layer_activation_bytes(s, b, h, a, tensor=t) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t))
    )
    sp = layer_activation_bytes(s, b, h, a, tensor=t, sequence_parallel=True, recompute="selective")
    assert sp == pytest.approx(sbh * 34 / t)
    assert layer_activation_bytes(s, b, h, a, tensor=t, recompute="full") == 2 * sbh
    # GPT-3 175B, t = p = 8, SP + selective, 1F1B: the first stage holds l layers' worth (Section 4.2.3)
    assert layers_in_flight(96, 8, 64, "1f1b") == 96 and layers_in_flight(96, 8, 4, "1f1b") == 48
    assert layers_in_flight(96, 8, 64, "interleaved", 3) == pytest.approx(96 * (1 + 7 / 24))
    gpt3 = TransformerShape(96, 12288, 96, 2048, 51200)
    scheme = q.HybridParallel(
        tensor=8, pipeline=8, microbatches=64, shape=gpt3, sequence_parallel=True, recompute="selective"
    )
    mem = scheme.memory(gpt3.workload(1), dgx(64))
    assert mem.activations == pytest.approx(96 * sbh * 34 / 8)  # Korthikanti: 34 sbhL/t, about 10.7 GB
    per_gpu = (12 * gpt3.block_parameters + gpt3.embedding_parameters) * 2 / 8
    assert mem.parameters == pytest.approx(per_gpu) and mem.optimizer == pytest.approx(6 * per_gpu)


def test_selective_recompute_adds_the_attention_cores():
    gpt = TransformerShape(4, 1024, 16, 2048, 50000)
    w = gpt.workload(2, flops=1e14)
    sel = q.predict(q.HybridParallel(shape=gpt, recompute="selective"), w, q.Cluster(1, "1GB/s"))
    core = 4 * 4 * 2 * 2048**2 * 1024 / 1e14  # l x 4 b s^2 h FLOPs at 1e14 FLOP/s
    assert sel.breakdown["compute"] == pytest.approx(w.compute_time + core, rel=1e-12)


def test_formula_equals_predict_where_the_ring_is_chosen():
    gpt = TransformerShape(8, 4096, 32, 2048, 51200)
    w = gpt.workload(1, flops=150e12)
    w = w.__class__(
        w.compute_time,
        w.gradient_bytes,
        parameter_bytes=w.parameter_bytes,
        batch_size=1,
        update_time=w.update_time,
    )  # no layers: backward twice the forward, as the formula
    for kw in (
        {},
        {"recompute": "full", "zero": 1},
        {"schedule": "interleaved", "virtual_stages": 2, "zero": 3},
        {"sequence_parallel": True, "recompute": "full"},  # no all-gather after the sends
    ):
        s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, shape=gpt, **kw)
        c = dgx(64)
        p = q.predict(s, w, c)
        assert set(p.details["algorithms"].values()) == {"ring"}
        values = dict(
            t=8,
            p=2,
            d=4,
            M=4,
            m=1,
            l=8,
            C=w.compute_time,
            C_h=3 * 2 * 2048 * 4096 * 51200 / 150e12,  # the logits 2 b s h V, forward + backward
            A=gpt.boundary_bytes(1),
            B_intra=B_I,
            alpha_intra=A_I,
            B=B_R,
            alpha=A_E,
            G=w.gradient_bytes,
            u=w.update_time,
            g=8,
        )
        if s.schedule == "interleaved":
            values["v"] = 2
        f = q.derive(s, "deterministic")
        x = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names + f.condition_names})
        assert float(x) == pytest.approx(p.throughput, rel=1e-12)


def test_formula_refuses_where_a_tensor_group_is_smaller_than_a_node():
    # audit 2026-11-28: where t < g predict places a data-parallel group's ranks inside a node (gcd(d, g/t)
    # of them, over NVLink) and pipeline sends between stages of one node over NVLink; the formula sends
    # them all at B over the network, and was up to 97.5% off on 508 of 1,506 random configurations.
    # It states t >= g now; where it holds (and on a flat cluster, g = 1) it equals predict's ring.
    gpt = TransformerShape(8, 1024, 16, 512, 32000)
    w = gpt.workload(1, flops=150e12)
    seen = {"equal": 0, "refused": 0}
    for g, t, p, d, zero in itertools.product((None, 2, 8), (1, 2, 8), (1, 2), (1, 2, 4), (0, 3)):
        n = t * p * d
        if g is not None and (n % g and n > g or t > g):
            continue
        fields = dict(gpus_per_node=g, node_bandwidth=300e9, node_latency=2e-6, rails=g) if g else {}
        c = q.Cluster(n, 25e9, 5e-6, **fields)
        s = q.HybridParallel(tensor=t, pipeline=p, microbatches=4, shape=gpt, zero=zero)
        pr = q.predict(s, w, c)
        if set(pr.details["algorithms"].values()) != {"ring"}:
            continue
        f = q.derive(s, "deterministic")
        values = dict(
            t=t, p=p, d=d, M=4, m=1, l=8, C=w.compute_time, C_h=3 * 2 * 512 * 1024 * 32000 / 150e12,
            A=gpt.boundary_bytes(1), B_intra=c.intra_bandwidth, alpha_intra=c.intra_latency,
            B=c.bandwidth * (c.rails / g if g else 1), alpha=c.latency, G=w.gradient_bytes, u=w.update_time,
            g=g or 1,
        )  # fmt: skip
        values = {k: v for k, v in values.items() if k in f.free_names + f.condition_names}
        if t < (g or 1):
            with pytest.raises(InvalidParameterError, match=r"t >= g.*predict places them inside a node"):
                f.evaluate(**values)
            seen["refused"] += 1
        else:
            assert float(f.evaluate(**values)) == pytest.approx(pr.throughput, rel=1e-12)
            seen["equal"] += 1
    assert seen["equal"] >= 10 and seen["refused"] >= 10, seen


def test_formula_refuses_the_configurations_the_scheme_refuses():
    # audit 2026-11-28: the interleaved formula evaluated M = 3 micro-batches on 4 stages and 6 layers on
    # p v = 8 chunks, both refused by HybridParallel itself; its conditions say so now
    values = dict(t=1, p=4, d=1, M=8, m=1, l=8, C=0.1, C_h=0.0, A=0.0, B_intra=1e11, alpha_intra=0.0,
                  B=1e10, alpha=0.0, G=1e9, u=0.0, v=2, g=1)  # fmt: skip
    gpt = TransformerShape(8, 1024, 16, 512, 32000)  # without a shape the formula refuses p > 1 (below)
    s = q.HybridParallel(pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2, shape=gpt)
    f = q.derive(s, "deterministic")
    with pytest.raises(InvalidParameterError, match="HybridParallel.microbatches"):
        q.HybridParallel(pipeline=4, microbatches=3, schedule="interleaved", virtual_stages=2, layers=8)
    with pytest.raises(InvalidParameterError, match="HybridParallel.layers"):
        q.HybridParallel(pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2, layers=6)
    for bad in (dict(M=3), dict(l=6)):
        with pytest.raises(InvalidParameterError, match="accepted: Eq"):
            f.evaluate(**{**values, **bad})
    # inside them, the formula is the scheme's closed form: one stage's time C / (t p) per micro-batch, the
    # interleaved bubble (p - 1) / v of it, no communication at A = 0, alpha = 0: d M m / (M + 3/2) tau
    tau = 0.1 / 4
    assert float(f.evaluate(**values)) == pytest.approx(8 / ((8 + 3 / 2) * tau), rel=1e-12)
    bubble = q.derive(s, "deterministic", quantity="bubble")
    assert bubble.evaluate(p=4, M=8, v=2) == 3 / 16
    with pytest.raises(InvalidParameterError, match="M,p: got 'M=6, p=4'"):
        bubble.evaluate(p=4, M=6, v=2)


def test_formula_of_a_flash_shape_recomputes_its_own_forward_share():
    # Flash attention's backward reruns the scores, so the forward is less than a third of a micro-batch:
    # full recomputation adds (C - C_h) x F_fwd / F_step, the share predict reads off the layered workload.
    gpt = TransformerShape(8, 4096, 32, 2048, 51200, attention="flash")
    w = gpt.workload(1, flops=150e12)
    fwd = gpt.iteration_flops(1) / 3
    step = fwd * 3 + 8 * 2 * 2048**2 * 4096  # + per block the backward's rerun scores, 2 b s^2 h
    assert w.forward_time / (w.forward_time + w.backward_time) == pytest.approx(fwd / step, rel=1e-12)
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, shape=gpt, recompute="full", zero=1)
    c = dgx(64)
    p = q.predict(s, w, c)
    assert set(p.details["algorithms"].values()) == {"ring"}
    f = q.derive(s, "deterministic")
    values = dict(
        t=8, p=2, d=4, M=4, m=1, l=8, C=w.compute_time, C_h=3 * 2 * 2048 * 4096 * 51200 / 150e12,
        A=gpt.boundary_bytes(1), B_intra=B_I, alpha_intra=A_I, B=B_R, alpha=A_E, G=w.gradient_bytes,
        u=w.update_time, g=8,
    )  # fmt: skip
    x = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names + f.condition_names})
    assert float(x) == pytest.approx(p.throughput, rel=1e-12)


def test_derive_gives_the_interleaved_bubble_and_tp_per_layer():
    import sympy

    s = q.HybridParallel(pipeline=4, microbatches=8, schedule="interleaved", virtual_stages=2)
    f = q.derive(s, "deterministic", quantity="bubble")
    p, M, v = (f.symbols[k] for k in ("p", "M", "v"))
    assert sympy.simplify(f.expr - (p - 1) / (v * M)) == 0
    tp = q.derive(q.HybridParallel(tensor=8), "deterministic", quantity="tp_communication")
    assert float(tp.evaluate(t=8, A=1e8, B_intra=B_I, alpha_intra=A_I)) == pytest.approx(
        4 * ring(8, 1e8, B_I, A_I)
    )


def test_sweep_equals_predict_on_a_two_level_cluster():
    w = q.Workload("0.5s", "8GB", batch_size=1)
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=8, hidden_bytes="50MB")
    t = q.sweep(s, w, dgx(64), workers=[16, 32, 64])
    for i, n in enumerate(t["workers"]):
        assert t["throughput"][i] == pytest.approx(q.predict(s, w, dgx(int(n))).throughput, rel=1e-12)


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"virtual_stages": 2}, "virtual_stages"),
        ({"schedule": "interleaved", "pipeline": 4, "microbatches": 6}, "microbatches"),
        ({"recompute": "selective"}, "recompute"),
        ({"recompute": "some"}, "recompute"),
        ({"zero": 4}, "zero"),
        ({"schedule": "zb"}, "schedule"),
        ({"shape": "1:2:3"}, "shape"),
        ({"shape": "4:64:4:32:100", "pipeline": 3}, "pipeline"),
        ({"shape": "4:64:4:32:100", "tensor": 3}, "tensor"),
    ],
)
def test_bad_parameters_name_the_field(kw, field):
    with pytest.raises(InvalidParameterError, match=f"HybridParallel.{field}"):
        q.HybridParallel(**kw)


def test_workers_must_be_t_p_d_and_tensor_groups_pack_into_nodes():
    w = q.Workload(1.0, "1GB")
    with pytest.raises(InvalidParameterError, match="tensor x pipeline x data"):
        q.predict(q.HybridParallel(tensor=2, pipeline=2), w, q.Cluster(6, "1GB/s"))
    with pytest.raises(InvalidParameterError, match="HybridParallel.tensor"):
        q.predict(
            q.HybridParallel(tensor=3), w, q.Cluster(24, "1GB/s", gpus_per_node=8, node_bandwidth="1TB/s")
        )


def test_formula_without_a_shape_refuses_1f1b_and_interleaved_pipelines_and_holds_for_gpipe():
    # Megatron does not send the first stage's gradient nor the last stage's activation, so p > 1 stages
    # are unequal; the closed form holds where the output layer covers a message, and without a shape
    # there is none: formula() says so (it returned a formula whose condition no positive send meets).
    # GPipe's adds the shortfall back, (M - 1) max(0, s - C_h/3t), and holds without a shape:
    # there it equals predict's pass timing (the longest path through GPipe's passes)
    for kw in ({}, {"schedule": "interleaved", "virtual_stages": 2}):
        s = q.HybridParallel(tensor=8, pipeline=4, microbatches=8, layers=8, hidden_bytes=2**24, **kw)
        with pytest.raises(NotRepresentable, match=r"needs a shape \(shape=\.\.\.\).*predict times"):
            s.formula()
        assert q.derive(s, "deterministic", quantity="bubble").evaluate(p=4, M=8, **kw and {"v": 2}) > 0
    # and 1F1B's two stages, which send one message each: the last is the slower whatever the head
    w = q.Workload("40ms", "2GB", batch_size=1)
    for p_, sched in ((4, "gpipe"), (2, "1f1b")):
        kw = dict(layers=8, hidden_bytes=2**24, schedule=sched)
        s = q.HybridParallel(tensor=8, pipeline=p_, microbatches=8, **kw)
        c = dgx(8 * p_ * 8)
        p = q.predict(s, w, c)
        assert set(p.details["algorithms"].values()) == {"ring"}
        values = dict(t=8, p=p_, d=8, M=8, m=1, l=8, C=0.04, A=2**24, B_intra=B_I, alpha_intra=A_I, B=B_R,
                      alpha=A_E, G=2e9, u=w.update_time, g=8)  # fmt: skip
        f = s.formula()
        x = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names + f.condition_names})
        assert float(x) == pytest.approx(p.throughput, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="1F1B on p <= 2 stages any"):  # p = 4 of p = 2's formula
        f.evaluate(**{k: v for k, v in {**values, "p": 4}.items() if k in f.free_names + f.condition_names})
