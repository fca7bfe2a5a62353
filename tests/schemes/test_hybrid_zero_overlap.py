"""HybridParallel(zero_overlap=True): the data-parallel collectives (any ZeRO stage) behind the compute.

Every number below is computed by hand here (the data-parallel collectives as ring all-gathers and
reduce-scatters, ``(n - 1)/n S/B + (n - 1) alpha``; the compute as ``3 x`` the blocks' forward FLOPs
over ``t`` at one rate) or is another road to the same model (``batch_times``).
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.gemm_table import GemmTable
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_batch import batch_times
from tests.hybrid_rows import A_E, B_R, dgx, gemm_model

SHAPE = TransformerShape(4, 1024, 16, 2048, 51200)  # l, h, a, s, V
L = 4


def half_ring(n: int, S: float) -> float:
    """A ring all-gather or reduce-scatter of ``S`` bytes over ``n`` ranks, one per node (a rail each)."""
    return (n - 1) / n * S / B_R + (n - 1) * A_E


def blocks(t: int, p: int, rate: float) -> float:
    """One micro-batch's forward + backward of a stage's blocks on one of ``t`` ranks (3 x forward)."""
    return L / p * 3 * SHAPE.block_flops(1) / t / rate


def test_default_off_is_exactly_the_scheme_without_the_field():
    c = dgx(64)
    w = SHAPE.workload(1, flops=150e12)
    for z in range(4):
        base = dict(tensor=8, pipeline=2, microbatches=4, zero=z, shape=SHAPE)
        old = q.predict(q.HybridParallel(**base), w, c)
        off = q.predict(q.HybridParallel(**base, zero_overlap=False), w, c)
        assert off.throughput == old.throughput and off.iteration_time == old.iteration_time
        assert off.breakdown == old.breakdown
        assert off.details["dp_exposed_per_step"] == off.details["dp_per_step"]
    assert q.HybridParallel().zero_overlap is False


@pytest.mark.parametrize(
    "rate, pipeline, longer",
    [(1e12, 1, False), (1e14, 1, True), (1e12, 2, False), (1e14, 2, True)],
    ids=["compute-longer", "collectives-longer", "compute-longer-p2", "collectives-longer-p2"],
)
@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "constant-gemm-table"])
def test_exposed_by_hand_in_both_regimes(rate, pipeline, longer, model):
    c = dgx(64)
    t, p, m = 8, pipeline, 4
    d = 64 // (t * p)
    cm = gemm_model(rate) if model else None
    w = SHAPE.workload(1, flops=rate, compute=cm)
    kw = dict(tensor=t, pipeline=p, microbatches=m, zero=3, shape=SHAPE, compute_model=cm)
    on = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    assert {on.details["algorithms"][k] for k in ("dp", "dp_ag")} == {"ring"}
    G = w.gradient_bytes / (t * p)  # = the parameters' bytes: 16 bits each
    gather, rs = half_ring(d, w.parameter_bytes / (t * p)), half_ring(d, G)
    Z = 2 * gather + rs
    C = blocks(t, p, rate)
    assert (Z > C) == longer and gather / (L / p) < C  # the cap at Z (no overlap) not reached
    exposed = (Z - C if longer else 0.0) + gather / (L / p)  # the first layer's forward gather
    assert on.details["dp_per_step"] == pytest.approx(m * Z, rel=1e-12)
    assert off.details["dp_per_step"] == off.details["dp_exposed_per_step"] == on.details["dp_per_step"]
    assert on.details["dp_exposed_per_step"] == pytest.approx(m * exposed, rel=1e-12)
    assert off.iteration_time - on.iteration_time == pytest.approx(m * (Z - exposed), rel=1e-9)
    # the rest of the step by hand: m (tau + head) + (p - 1) tau + exposed ZeRO + the update over t p d
    head = 3 * SHAPE.logits_flops(1) / t / rate
    tau = C + on.details["tp_per_microbatch"] + on.details["p2p_per_microbatch"]
    step = m * (tau + head) + (p - 1) * tau + m * exposed + w.update_time / (t * p * d)
    assert on.iteration_time == pytest.approx(step, rel=1e-12)


def test_never_more_than_without_overlap():
    c = dgx(64)
    w = SHAPE.workload(1, flops=1e18)  # compute shorter than one layer's gather: the cap at Z
    kw = dict(tensor=8, microbatches=2, zero=3, shape=SHAPE)
    on = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    Z = 2 * half_ring(8, w.parameter_bytes / 8) + half_ring(8, w.gradient_bytes / 8)
    assert half_ring(8, w.parameter_bytes / 8) / L > blocks(8, 1, 1e18)
    assert on.details["dp_exposed_per_step"] == pytest.approx(2 * Z, rel=1e-12)
    assert on.iteration_time == pytest.approx(
        q.predict(q.HybridParallel(**kw), w, c).iteration_time, rel=1e-12
    )


def test_full_recomputation_gives_the_collectives_more_compute_to_hide_behind():
    c = dgx(64)
    rate, t = 4.2e13, 8
    w = SHAPE.workload(1, flops=rate)
    s = q.HybridParallel(tensor=8, microbatches=2, zero=3, shape=SHAPE, zero_overlap=True)
    plain, full = q.predict(s, w, c), q.predict(s.replace(recompute="full"), w, c)
    gather = half_ring(8, w.parameter_bytes / t)
    Z = 2 * gather + half_ring(8, w.gradient_bytes / t)
    C = blocks(t, 1, rate)
    assert C < Z < 4 / 3 * C  # the recomputed forward (a third more) covers what was left
    assert plain.details["dp_exposed_per_step"] == pytest.approx(2 * (Z - C + gather / L), rel=1e-12)
    assert full.details["dp_exposed_per_step"] == pytest.approx(2 * gather / L, rel=1e-12)


@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "constant-gemm-table"])
def test_batch_times_equals_predict_row_by_row(model):
    c = dgx(64)
    cm = ComputeModel(GemmTable.constant(0.5, peak_flops=6e14), None) if model else None
    w = {b: SHAPE.workload(b, flops=3e14, compute=cm) for b in (1, 2)}
    rows = [  # t, p, b, m, zero, recompute, zero_overlap
        (8, 1, 1, 4, 3, 0, True), (8, 2, 2, 4, 3, 1, True), (4, 2, 1, 8, 3, 0, True),
        (8, 1, 1, 4, 3, 0, False), (8, 2, 1, 4, 1, 0, False), (2, 4, 2, 8, 3, 1, True),
        (8, 1, 1, 4, 0, 0, True), (8, 2, 2, 4, 0, 1, True), (4, 2, 1, 8, 1, 0, True),
        (2, 4, 2, 8, 2, 1, True), (8, 1, 1, 4, 2, 0, True), (4, 1, 1, 4, 0, 0, False),
    ]  # fmt: skip
    t, p, b, m, z, rc, zo = (np.array(col) for col in zip(*rows))
    out = batch_times(SHAPE, c, w, tensor=t, pipeline=p, data=64 // (t * p), microbatch=b, microbatches=m,
                      schedule=0, virtual_stages=1, sequence_parallel=False, recompute=rc, zero=z,
                      compute_model=cm, zero_overlap=zo)  # fmt: skip
    assert (out["dp_exposed"][zo] <= out["dp"][zo]).all() and (out["dp_exposed"][zo] < out["dp"][zo]).any()
    for i, row in enumerate(rows):
        s = q.HybridParallel(
            tensor=row[0], pipeline=row[1], microbatches=row[3], zero=row[4], shape=SHAPE,
            recompute=(None, "full")[row[5]], compute_model=cm, zero_overlap=row[6],
        )  # fmt: skip
        pr = q.predict(s, w[row[2]], c)
        assert float(out["step"][i]) == pytest.approx(pr.iteration_time, rel=1e-12)
        assert float(out["dp"][i]) == pytest.approx(pr.details["dp_per_step"], rel=1e-12)
        assert float(out["dp_exposed"][i]) == pytest.approx(pr.details["dp_exposed_per_step"], rel=1e-12)


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_experts_add_their_collectives_and_batch_agrees(zero):
    c = dgx(64)
    w = SHAPE.workload(1, flops=1e14)
    kw = dict(tensor=8, microbatches=2, zero=zero, shape=SHAPE, experts=8, expert_parallel=4)
    on = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    assert on.details["dp_per_step"] == off.details["dp_per_step"]
    assert on.details["dp_exposed_per_step"] < off.details["dp_per_step"]
    out = batch_times(SHAPE, c, {1: w}, tensor=8, pipeline=1, data=8, microbatch=1, microbatches=2,
                      schedule=0, virtual_stages=1, sequence_parallel=False, recompute=0, zero=zero,
                      experts=8, expert_parallel=4, zero_overlap=True)  # fmt: skip
    assert float(out["step"][0]) == pytest.approx(on.iteration_time, rel=1e-12)
    assert float(out["dp_exposed"][0]) == pytest.approx(on.details["dp_exposed_per_step"], rel=1e-12)


def test_every_zero_stage_takes_it_and_only_a_non_boolean_is_refused():
    for z in range(4):
        assert q.HybridParallel(zero=z, zero_overlap=True).zero_overlap is True
    for bad in (2, "maybe", None):
        with pytest.raises(InvalidParameterError, match=r"HybridParallel\.zero_overlap"):
            q.HybridParallel(zero=1, zero_overlap=bad)
    assert q.HybridParallel(zero=3, zero_overlap="on").zero_overlap is True
    assert q.HybridParallel(zero=1, zero_overlap="off").zero_overlap is False


def ring_allreduce(n: int, S: float) -> float:
    """A ring all-reduce of ``S`` bytes over ``n`` ranks, one per node: twice a half ring."""
    return 2 * (n - 1) / n * S / B_R + 2 * (n - 1) * A_E


def hidden(x: float, k: float, n: float) -> float:
    """``x`` behind ``k`` seconds of compute, one layer's share ``x / n`` never hidden, by hand."""
    return min((x - k if x > k else 0.0) + x / n, x)


@pytest.mark.parametrize("zero", [0, 1, 2])
@pytest.mark.parametrize(
    "rate, pipeline, longer",
    [(1e12, 1, False), (2e14, 1, True), (1e12, 2, False), (2e14, 2, True)],
    ids=["compute-longer", "collectives-longer", "compute-longer-p2", "collectives-longer-p2"],
)
@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "constant-gemm-table"])
@pytest.mark.parametrize("recompute", [None, "full"])
def test_zero_0_1_2_exposed_by_hand_in_both_regimes(zero, rate, pipeline, longer, model, recompute):
    # The gradient collective behind the last micro-batch's backward (2 forwards, 3 with a recomputed
    # forward), ZeRO 1-2's gather behind the next step's first forward; one layer's share of each exposed.
    c = dgx(64)
    t, p, m = 8, pipeline, 4
    d = 64 // (t * p)
    cm = gemm_model(rate) if model else None
    w = SHAPE.workload(1, flops=rate, compute=cm)
    kw = dict(tensor=t, pipeline=p, microbatches=m, zero=zero, shape=SHAPE, compute_model=cm)
    on = q.predict(q.HybridParallel(**kw, recompute=recompute, zero_overlap=True), w, c)
    off = q.predict(q.HybridParallel(**kw, recompute=recompute), w, c)
    n = L / p
    F = n * SHAPE.block_flops(1) / t / rate  # one micro-batch's forward of the stage's blocks
    B = (3 if recompute else 2) * F  # its backward, and the recomputed forward that runs in it
    G, P = w.gradient_bytes / (t * p), w.parameter_bytes / (t * p)
    if zero == 0:
        assert on.details["algorithms"]["dp"] == "ring"
        R, Gth = ring_allreduce(d, G), 0.0
    else:
        assert {on.details["algorithms"][k] for k in ("dp", "dp_ag")} == {"ring"}
        R, Gth = half_ring(d, G), half_ring(d, P)
    assert (R > B) == longer and (zero == 0 or (Gth > F) == longer)
    exposed = hidden(R, B, n) + (hidden(Gth, F, n) if zero else 0.0)
    if not longer:  # one layer's share of each
        assert exposed == pytest.approx((R + Gth) / n, rel=1e-12)
    assert on.details["dp_per_step"] == off.details["dp_per_step"] == pytest.approx(R + Gth, rel=1e-12)
    assert off.details["dp_exposed_per_step"] == off.details["dp_per_step"]
    assert on.details["dp_exposed_per_step"] == pytest.approx(exposed, rel=1e-12)
    assert off.iteration_time - on.iteration_time == pytest.approx(R + Gth - exposed, rel=1e-9)


def test_zero_1_longer_collectives_by_hand_with_numbers():
    # One case written out: p = 2 (n = 2 layers), 4 ranks, 1.2e14 FLOP/s.
    c = dgx(64)
    w = SHAPE.workload(1, flops=1.2e14)
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, zero=1, shape=SHAPE, zero_overlap=True)
    on = q.predict(s, w, c)
    X = 3 / 4 * w.gradient_bytes / 16 / B_R + 3 * A_E  # the reduce-scatter = the gather, 16-bit both
    F = 2 * SHAPE.block_flops(1) / 8 / 1.2e14
    assert X - 2 * F + X / 2 < X and X - F + X / 2 > X  # the gradients uncapped, the gather capped
    assert on.details["dp_exposed_per_step"] == pytest.approx((X - 2 * F + X / 2) + X, rel=1e-12)


@pytest.mark.parametrize("zero", [0, 1])
def test_zero_0_1_never_more_than_without_overlap(zero):
    c = dgx(64)
    w = SHAPE.workload(1, flops=1e18)  # compute shorter than one layer's share: the cap at R (and Gth)
    kw = dict(tensor=8, microbatches=2, zero=zero, shape=SHAPE)
    on = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    R = ring_allreduce(8, w.gradient_bytes / 8) if zero == 0 else half_ring(8, w.gradient_bytes / 8)
    Gth = half_ring(8, w.parameter_bytes / 8) if zero else 0.0
    B = 2 * L * SHAPE.block_flops(1) / 8 / 1e18  # the backward
    assert R / L > B and (zero == 0 or Gth / L > B / 2)
    assert on.details["dp_exposed_per_step"] == pytest.approx(R + Gth, rel=1e-12)
    assert on.iteration_time == pytest.approx(off.iteration_time, rel=1e-12)


def test_formula_says_the_throughput_is_not_representable_and_keeps_the_rest():
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, zero=3, zero_overlap=True)
    with pytest.raises(NotRepresentable, match="zero_overlap"):
        s.formula()
    bubble = s.formula(quantity="bubble")
    assert float(bubble.evaluate(p=2, M=4)) == pytest.approx((2 - 1) / 4)
    assert s.replace(zero_overlap=False).formula().expr is not None
