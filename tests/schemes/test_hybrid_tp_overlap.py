"""HybridParallel(tp_overlap=True): the backward's TP collectives hidden behind QKV's and fc1's weight grads.

Every number below is computed by hand here (the collective from ``collective_time``, the GEMMs as
``2 m n k / (peak x efficiency)``) or is another road to the same model (``evaluate_space``, ``derive``).
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.collectives import collective_time
from tests.hybrid_rows import A_E, A_I, B_I, B_R, dgx, gemm_model

SHAPE = TransformerShape(4, 1024, 16, 2048, 51200)  # l, h, a, s, V
L, H, S = 4, 1024, 2048


def wgrads(b: int, t: int, rate: float) -> tuple[float, float]:
    """QKV's ``(b s x h) @ (h x 3h/t)`` and fc1's ``(b s x h) @ (h x 4h/t)``: ``2 m n k / rate``."""
    m = b * S
    return 2 * m * (3 * H // t) * H / rate, 2 * m * (4 * H // t) * H / rate


def run(cluster: q.Cluster, rate: float | None = None, *, b: int = 1, model: bool = True, **kw):
    cm = gemm_model(rate) if model and rate is not None else None
    w = SHAPE.workload(b, flops=rate or 150e12, compute=cm)
    s = q.HybridParallel(shape=SHAPE, compute_model=cm, **kw)
    return q.predict(s, w, cluster), s, w


def test_default_off_is_exactly_the_scheme_without_the_field():
    c = dgx(16)
    for kw in ({}, {"sequence_parallel": True, "recompute": "full"}, {"pipeline": 2, "microbatches": 4}):
        base = dict(tensor=8, shape=SHAPE, **kw)
        w = SHAPE.workload(1, flops=150e12)
        old = q.predict(q.HybridParallel(**base), w, c)
        off = q.predict(q.HybridParallel(**base, tp_overlap=False), w, c)
        assert off.throughput == old.throughput and off.iteration_time == old.iteration_time
        assert off.breakdown == old.breakdown
        assert off.details["tp_exposed_per_microbatch"] == off.details["tp_per_microbatch"]
    assert q.HybridParallel().tp_overlap is False


@pytest.mark.parametrize(
    "rate, hidden",
    [(1e13, (True, True)), (1e15, (False, False)), (3.5e13, (False, True))],
    ids=["gemms-longer", "gemms-shorter", "qkv-shorter-fc1-longer"],
)
def test_step_by_hand_with_a_constant_gemm_table(rate, hidden):
    c = dgx(8)
    t, m = 8, 2
    p, s, w = run(c, rate, tensor=t, microbatches=m, tp_overlap=True)
    A = 2.0 * S * H  # b s h x 2 bytes
    x = collective_time("allreduce", A, c, t, per_node=8).seconds
    wq, wf = wgrads(1, t, rate)
    assert ((x - wq) <= 0, (x - wf) <= 0) == hidden
    exposed = L * (2 * x + max(0.0, x - wq) + max(0.0, x - wf))
    assert p.details["tp_per_microbatch"] == pytest.approx(L * 4 * x, rel=1e-12)
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(exposed, rel=1e-12)
    # compute: each block 3 x its forward FLOPs / t, the head 3 x the logits; at one rate (memory free)
    compute = L * 3 * SHAPE.block_flops(1) / t / rate + 3 * SHAPE.logits_flops(1) / t / rate
    step = m * (compute + exposed) + w.update_time / t  # p = d = 1: no sends, no data-parallel
    assert p.iteration_time == pytest.approx(step, rel=1e-12)
    off = q.predict(
        q.HybridParallel(shape=SHAPE, compute_model=s.compute_model, tensor=t, microbatches=m), w, c
    )
    saved = m * L * (2 * x - max(0.0, x - wq) - max(0.0, x - wf))
    assert off.iteration_time - p.iteration_time == pytest.approx(saved, rel=1e-9)


def test_sequence_parallel_hides_the_reduce_scatter_and_leaves_the_all_gathers():
    c = dgx(8)
    rate = 1e15
    p, _, _ = run(c, rate, tensor=8, sequence_parallel=True, recompute="full", tp_overlap=True)
    A = 2.0 * S * H
    rs = collective_time("reduce_scatter", A, c, 8, per_node=8).seconds
    ag = collective_time("allgather", A, c, 8, per_node=8).seconds
    wq, wf = wgrads(1, 8, rate)
    assert rs > wq and rs > wf  # partly hidden
    # full recomputation: 4 units forward (2 + 2 recomputed), backward 2 all-gathers + the rest of the RS
    exposed = L * (4 * (rs + ag) + 2 * ag + (rs - wq) + (rs - wf))
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(exposed, rel=1e-12)
    assert p.details["tp_per_microbatch"] == pytest.approx(L * 6 * (rs + ag), rel=1e-12)


def test_flat_rate_without_a_compute_model_uses_the_workloads_rate():
    c = dgx(16)
    F = 150e12
    p, _, w = run(c, F, b=2, model=False, tensor=8, pipeline=2, microbatches=4, tp_overlap=True)
    x = collective_time("allreduce", 2.0 * 2 * S * H, c, 8, per_node=8).seconds
    wq, wf = wgrads(2, 8, F)  # C / step_flops = 1 / F: the products' FLOPs over F
    exposed = L / 2 * (2 * x + max(0.0, x - wq) + max(0.0, x - wf))
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(exposed, rel=1e-12)
    off = q.predict(q.HybridParallel(shape=SHAPE, tensor=8, pipeline=2, microbatches=4), w, c)
    tau_saved = off.details["tp_per_microbatch"] - exposed
    # m (tau + head) + (p - 1) tau: the saving counts (m + p - 1) times
    assert off.iteration_time - p.iteration_time == pytest.approx((4 + 1) * tau_saved, rel=1e-9)


def test_slower_gpus_stretch_the_weight_gradients_too():
    c = q.Cluster(8, B_R, A_E, gpus_per_node=8, node_bandwidth=B_I, node_latency=A_I, rails=8,
                  speeds=[1.0] * 7 + [0.5])  # fmt: skip
    rate = 1e15
    p, _, _ = run(c, rate, tensor=8, tp_overlap=True)
    x = collective_time("allreduce", 2.0 * S * H, c, 8, per_node=8).seconds
    wq, wf = (2 * y for y in wgrads(1, 8, rate))  # the slowest GPU at half speed paces them
    exposed = L * (2 * x + max(0.0, x - wq) + max(0.0, x - wf))
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(exposed, rel=1e-12)


def test_refused_without_a_shape_with_experts_and_for_non_booleans():
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.tp_overlap.*without shape="):
        q.HybridParallel(tensor=8, hidden_bytes="8MB", layers=4, tp_overlap=True)
    assert q.HybridParallel(shape=SHAPE, experts=4, tp_overlap=True).tp_overlap is True  # the MLP's exposed
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.tp_overlap"):
        q.HybridParallel(shape=SHAPE, tp_overlap=2)
    assert q.HybridParallel(shape=SHAPE, tp_overlap="on").tp_overlap is True
    with pytest.raises(InvalidParameterError, match=r"HybridSpace\.tp_overlap"):
        HybridSpace(tp_overlap=True)
    assert HybridSpace(tp_overlap=(False, True), experts=8).tp_overlap == (False, True)  # MLP's exposed


@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "compute-model"])
def test_evaluate_space_equals_predict_row_by_row_with_the_overlap(model):
    c = dgx(16)
    cm = gemm_model(3e14) if model else None
    space = HybridSpace(tensor=(1, 4, 8), pipeline=(1, 2), zero=(0, 1), schedule=("1f1b",),
                        tp_overlap=(False, True))  # fmt: skip
    table = evaluate_space(SHAPE, c, space, global_batch=8, memory_limit=80e9, flops=2e14, compute=cm)
    assert table["tp_overlap"].any() and not table["tp_overlap"].all()
    assert not (table["tp_overlap"] & (table["tensor"] == 1)).any()  # a duplicate without TP
    on = np.flatnonzero(table["tp_overlap"])
    assert (table["tp_exposed"][on] < table["tp"][on]).all()
    for i in range(len(table)):
        scheme, w = table.scheme(i)
        assert scheme.tp_overlap == bool(table["tp_overlap"][i])
        p = q.predict(scheme, w, c)
        assert float(table["throughput"][i]) == pytest.approx(p.throughput, rel=1e-12)
        assert float(table["step"][i]) == pytest.approx(p.iteration_time, rel=1e-12)
        assert float(table["tp"][i]) == pytest.approx(p.details["tp_per_microbatch"], rel=1e-12)
        assert float(table["tp_exposed"][i]) == pytest.approx(
            p.details["tp_exposed_per_microbatch"], rel=1e-12
        )


def test_default_space_has_no_overlap_rows():
    c = dgx(16)
    table = evaluate_space(SHAPE, c, HybridSpace(tensor=(8,)), global_batch=8, memory_limit=80e9)
    assert not table["tp_overlap"].any()
    assert (table["tp_exposed"] == table["tp"]).all()


@pytest.mark.parametrize("kw", [{}, {"sequence_parallel": True}, {"recompute": "full", "zero": 1}])
def test_formula_equals_predict_with_the_overlap(kw):
    F = 150e12
    w = SHAPE.workload(1, flops=F)
    w = w.__class__(w.compute_time, w.gradient_bytes, parameter_bytes=w.parameter_bytes, batch_size=1,
                    update_time=w.update_time)  # fmt: skip  # no layers: backward twice the forward
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, shape=SHAPE, tp_overlap=True, **kw)
    c = dgx(64)
    p = q.predict(s, w, c)
    assert set(p.details["algorithms"].values()) == {"ring"}
    wq, wf = wgrads(1, 8, F)
    f = q.derive(s, "deterministic")
    assert {"W_qkv", "W_fc1"} <= set(f.free_names)
    values = dict(
        t=8, p=2, d=4, M=4, m=1, l=L, C=w.compute_time, C_h=3 * 2 * S * H * 51200 / F, A=2.0 * S * H,
        B_intra=B_I, alpha_intra=A_I, B=B_R, alpha=A_E, G=w.gradient_bytes, u=w.update_time,
        W_qkv=wq, W_fc1=wf, g=8,
    )  # fmt: skip
    x = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names + f.condition_names})
    assert float(x) == pytest.approx(p.throughput, rel=1e-12)
    tp = q.derive(s, "deterministic", quantity="tp_communication")
    y = tp.evaluate(**{k: v for k, v in values.items() if k in tp.free_names})
    assert float(y) * L / 2 == pytest.approx(p.details["tp_exposed_per_microbatch"], rel=1e-12)
