"""HybridParallel(tp_overlap="all"): every TP collective pipelined with its GEMM (Transformer Engine).

Every number below is computed by hand here: the collectives as ring all-gathers and reduce-scatters
inside one node, ``(t - 1)/t A / B + (t - 1) alpha``; the GEMMs as ``2 m n k / rate`` (a constant GEMM
table, or the workload's one FLOP rate); the pipelined pair as ``max(0, x - g) + min(x, g) / t``.
Or it is another road to the same model (``evaluate_space``, ``derive``, the command line).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import queuesgd as q
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import LLAMA_STYLE, TransformerShape
from queuesgd.schemes.parallel.hybrid_overlap import exposed_all_per_layer, pipelined_exposed
from tests.hybrid_rows import A_E, A_I, B_I, B_R, assert_rows_equal_predict, dgx, gemm_model

SHAPE = TransformerShape(4, 1024, 16, 2048, 51200)  # l, h, a, s, V
L, H, S = 4, 1024, 2048


def half_ring(t: int, nbytes: float) -> float:
    """A ring all-gather or reduce-scatter of ``nbytes`` over ``t`` ranks inside a node."""
    return (t - 1) / t * nbytes / B_I + (t - 1) * A_I


def gemms(b: int, t: int, rate: float, ffn: int = 4 * H, gated: bool = False) -> tuple[float, ...]:
    """QKV ``(M x h) @ (h x 3h/t)``, proj ``(M x h/t) @ (h/t x h)``, fc1 ``(M x h) @ (h x f/t)`` (2f/t
    gated: gate and up together), fc2 ``(M x f/t) @ (f/t x h)``: ``2 m n k / rate`` each."""
    m = b * S
    n_fc1 = (2 if gated else 1) * ffn // t
    return (2 * m * (3 * H // t) * H / rate, 2 * m * H * (H // t) / rate, 2 * m * n_fc1 * H / rate,
            2 * m * H * (ffn // t) / rate)  # fmt: skip


def e(x: float, g: float, t: int) -> float:
    """The exposed part of a collective ``x`` pipelined with a GEMM ``g`` in ``t`` chunks, by hand."""
    return (x - g if x > g else 0.0) + (g if x > g else x) / t


def test_pipelined_pair_by_hand_in_both_regimes():
    # x < g: only the first chunk's exchange shows, x / t; x > g: the excess plus the last chunk's GEMM.
    assert pipelined_exposed(1e-3, 3e-3, 8) == pytest.approx(1e-3 / 8, rel=1e-15)
    assert pipelined_exposed(3e-3, 1e-3, 8) == pytest.approx(2e-3 + 1e-3 / 8, rel=1e-15)
    assert pipelined_exposed(2.0, 2.0, 4) == pytest.approx(0.5, rel=1e-15)
    xs, gs = np.array([1.0, 3.0]), np.array([3.0, 1.0])
    assert pipelined_exposed(xs, gs, 4).tolist() == [0.25, 2.25]
    # a layer: 2 sets (3 with full recomputation) of the four pairs
    assert exposed_all_per_layer(1.0, 2.0, 4.0, 1.0, 0.5, 8.0, 4, False) == pytest.approx(
        2 * (1.0 / 4 + (1.0 + 1.0 / 4) + (0.5 + 0.5 / 4) + 2.0 / 4), rel=1e-15
    )
    full = exposed_all_per_layer(1.0, 2.0, 4.0, 1.0, 0.5, 8.0, 4, np.array([False, True]))
    assert full.tolist() == pytest.approx([2 * 2.625, 3 * 2.625], rel=1e-15)


@pytest.mark.parametrize(
    "rate, regime",
    [(1e13, "gemms-longer"), (1e15, "collectives-longer"), (4e13, "mixed")],
)
@pytest.mark.parametrize("recompute", [None, "full"])
def test_per_layer_total_by_hand_with_a_constant_gemm_table(rate, regime, recompute):
    c = dgx(8)
    t, m = 8, 2
    cm = gemm_model(rate)
    w = SHAPE.workload(1, flops=rate, compute=cm)
    kw = dict(
        tensor=t, microbatches=m, shape=SHAPE, compute_model=cm, sequence_parallel=True, recompute=recompute
    )
    p = q.predict(q.HybridParallel(**kw, tp_overlap="all"), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    assert {p.details["algorithms"][k] for k in ("tp", "tp_ag")} == {"ring"}
    A = 2.0 * S * H  # b s h x 2 bytes
    ag = rs = half_ring(t, A)
    g_qkv, g_proj, g_fc1, g_fc2 = gemms(1, t, rate)
    longer = [x > g for x, g in ((ag, g_qkv), (rs, g_proj), (ag, g_fc1), (rs, g_fc2))]
    assert longer == {"gemms-longer": [False] * 4, "collectives-longer": [True] * 4,
                      "mixed": [False, True, False, False]}[regime]  # fmt: skip
    sets = 3 if recompute else 2
    layer = sets * (e(ag, g_qkv, t) + e(rs, g_proj, t) + e(ag, g_fc1, t) + e(rs, g_fc2, t))
    assert p.details["tp_per_microbatch"] == pytest.approx(L * sets * 2 * (rs + ag), rel=1e-12)
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(L * layer, rel=1e-12)
    # p = 1: the step is m (tau + head) + update, so the saving counts m times
    saved = m * (p.details["tp_per_microbatch"] - L * layer)
    assert off.iteration_time - p.iteration_time == pytest.approx(saved, rel=1e-9)


def test_gated_mlp_pairs_the_gate_and_up_product_with_the_all_gather():
    # Llama-style: fc1 is one (M x h) @ (h x 2f/t) product (gate and up), fc2 (M x f/t) @ (f/t x h).
    shape = TransformerShape(2, H, 16, S, 32000, ffn_hidden=2816, **LLAMA_STYLE)
    c, t, rate = dgx(8), 8, 1e14
    cm = gemm_model(rate)
    w = shape.workload(1, flops=rate, compute=cm)
    s = q.HybridParallel(tensor=t, shape=shape, compute_model=cm, sequence_parallel=True, tp_overlap="all")
    p = q.predict(s, w, c)
    x = half_ring(t, 2.0 * S * H)
    g_qkv = 2 * S * ((H + 2 * shape.kv_hidden) // t) * H / rate  # grouped-query: h + 2g columns
    _, g_proj, g_fc1, g_fc2 = gemms(1, t, rate, ffn=2816, gated=True)
    layer = 2 * (e(x, g_qkv, t) + e(x, g_proj, t) + e(x, g_fc1, t) + e(x, g_fc2, t))
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(2 * layer, rel=1e-12)


def test_flat_rate_without_a_compute_model_uses_the_workloads_rate():
    c, F = dgx(16), 150e12
    w = SHAPE.workload(2, flops=F)
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, shape=SHAPE, sequence_parallel=True,
                         tp_overlap="all")  # fmt: skip
    p = q.predict(s, w, c)
    x = half_ring(8, 2.0 * 2 * S * H)
    g = gemms(2, 8, F)  # C / step_flops = 1 / F: each product's FLOPs over F
    layer = 2 * sum(e(x, gi, 8) for gi in g)
    assert p.details["tp_exposed_per_microbatch"] == pytest.approx(L / 2 * layer, rel=1e-12)


def test_all_hides_more_than_the_backward_only_overlap_when_every_pair_is_communication_bound():
    c, rate, t = dgx(8), 1e15, 8
    cm = gemm_model(rate)
    w = SHAPE.workload(1, flops=rate, compute=cm)
    base = dict(tensor=t, shape=SHAPE, compute_model=cm, sequence_parallel=True)
    exposed = {
        ov: q.predict(q.HybridParallel(**base, tp_overlap=ov), w, c).details["tp_exposed_per_microbatch"]
        for ov in (False, True, "all")
    }
    x = half_ring(t, 2.0 * S * H)
    g_qkv, g_proj, g_fc1, g_fc2 = gemms(1, t, rate)
    assert x > max(g_qkv, g_proj, g_fc1, g_fc2)  # every pair communication-bound
    # by hand: False 4 (rs + ag); True hides w_qkv and w_fc1 of the backward's two reduce-scatters;
    # "all" hides (1 - 1/t) of every GEMM, twice (forward and backward)
    assert exposed[False] == pytest.approx(L * 4 * 2 * x, rel=1e-12)
    assert exposed[True] == pytest.approx(L * (8 * x - g_qkv - g_fc1), rel=1e-12)
    hidden = (1 - 1 / t) * (g_qkv + g_proj + g_fc1 + g_fc2)
    assert exposed["all"] == pytest.approx(L * (8 * x - 2 * hidden), rel=1e-12)
    assert exposed["all"] < exposed[True] < exposed[False]


def test_one_tensor_rank_has_nothing_to_hide():
    w = SHAPE.workload(1, flops=1e14)
    s = q.HybridParallel(tensor=1, shape=SHAPE, sequence_parallel=True, tp_overlap="all")
    p = q.predict(s, w, dgx(8))
    assert p.details["tp_per_microbatch"] == p.details["tp_exposed_per_microbatch"] == 0.0
    assert p.throughput == q.predict(s.replace(tp_overlap=False), w, dgx(8)).throughput


def test_values_and_refusals_name_the_field():
    ok = dict(tensor=8, shape=SHAPE, sequence_parallel=True)
    assert q.HybridParallel(**ok, tp_overlap="backward").tp_overlap is True
    assert q.HybridParallel(**ok, tp_overlap="ALL").tp_overlap == "all"
    assert q.HybridParallel(**ok, tp_overlap="off").tp_overlap is False
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.tp_overlap.*sequence_parallel=True"):
        q.HybridParallel(tensor=8, shape=SHAPE, tp_overlap="all")
    for bad in ("some", "forward", 2, None):
        with pytest.raises(InvalidParameterError, match=r"HybridParallel\.tp_overlap.*'all'"):
            q.HybridParallel(**ok, tp_overlap=bad)
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.tp_overlap.*without shape="):
        q.HybridParallel(tensor=8, layers=4, hidden_bytes="8MB", sequence_parallel=True, tp_overlap="all")
    assert q.HybridParallel(**ok, experts=4, tp_overlap="all").tp_overlap == "all"  # the MLP's exposed
    assert HybridSpace(tp_overlap=(False, "backward", "all")).tp_overlap == (False, True, "all")
    for bad_axis in (("some",), "all", ()):
        with pytest.raises(InvalidParameterError, match=r"HybridSpace\.tp_overlap"):
            HybridSpace(tp_overlap=bad_axis)
    assert HybridSpace(tp_overlap=(False, "all"), experts=8).tp_overlap == (False, "all")  # MLP's exposed


@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "compute-model"])
def test_evaluate_space_equals_predict_row_by_row(model):
    c = dgx(16)
    cm = gemm_model(3e14) if model else None
    space = HybridSpace(tensor=(1, 4, 8), pipeline=(1, 2), zero=(0, 1), schedule=("1f1b",),
                        tp_overlap=(False, True, "all"))  # fmt: skip
    table = evaluate_space(SHAPE, c, space, global_batch=8, memory_limit=80e9, flops=2e14, compute=cm)
    ov = table["tp_overlap"]
    every = np.flatnonzero(ov == "all")
    assert len(every) and set(ov.tolist()) == {False, True, "all"}
    assert table["sequence_parallel"][every].all() and (table["tensor"][every] > 1).all()
    assert (table["tp_exposed"][every] < table["tp"][every]).all()
    assert {rc for rc in table["recompute"][every]} == {None, "full", "selective"}
    checked = assert_rows_equal_predict(table, c, range(len(table)))
    assert {s.tp_overlap for s, _ in checked} == {False, True, "all"}


@pytest.mark.parametrize("kw", [{}, {"recompute": "full", "zero": 1}])
def test_formula_equals_predict(kw):
    F = 150e12
    w = SHAPE.workload(1, flops=F)
    w = w.__class__(w.compute_time, w.gradient_bytes, parameter_bytes=w.parameter_bytes, batch_size=1,
                    update_time=w.update_time)  # fmt: skip  # no layers: backward twice the forward
    s = q.HybridParallel(tensor=8, pipeline=2, microbatches=4, shape=SHAPE, sequence_parallel=True,
                         tp_overlap="all", **kw)  # fmt: skip
    c = dgx(64)
    p = q.predict(s, w, c)
    assert set(p.details["algorithms"].values()) == {"ring"}
    f = q.derive(s, "deterministic")
    assert {"W_qkv", "W_proj", "W_fc1", "W_fc2"} <= set(f.free_names)
    g_qkv, g_proj, g_fc1, g_fc2 = gemms(1, 8, F)
    values = dict(
        t=8, p=2, d=4, M=4, m=1, l=L, C=w.compute_time, C_h=3 * 2 * S * H * 51200 / F, A=2.0 * S * H,
        B_intra=B_I, alpha_intra=A_I, B=B_R, alpha=A_E, G=w.gradient_bytes, u=w.update_time,
        W_qkv=g_qkv, W_proj=g_proj, W_fc1=g_fc1, W_fc2=g_fc2, g=8,
    )  # fmt: skip
    x = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names + f.condition_names})
    assert float(x) == pytest.approx(p.throughput, rel=1e-12)
    tp = q.derive(s, "deterministic", quantity="tp_communication")
    y = tp.evaluate(**{k: v for k, v in values.items() if k in tp.free_names})
    assert float(y) * L / 2 == pytest.approx(p.details["tp_exposed_per_microbatch"], rel=1e-12)


def test_command_line_takes_every_value():
    def cli(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(argv))
        return status, out.getvalue(), err.getvalue()

    base = ["predict", "--scheme", "hybrid", "--shape", "4:1024:16:2048:51200", "--workload", "resnet50"]
    base += ["--workers", "8", "--bandwidth", "100Gbit/s", "--tensor", "8", "--json"]
    args = [*base, "--sequence-parallel", "true"]
    seen = {}
    for text, value in (("false", False), ("true", True), ("backward", True), ("all", "all")):
        status, out, err = cli(*args, "--tp-overlap", text)
        assert status == 0, err
        s = q.HybridParallel(tensor=8, shape=SHAPE, sequence_parallel=True, tp_overlap=value)
        seen[text] = json.loads(out)[0]["throughput"]
        assert seen[text] == q.predict(s, "resnet50", q.Cluster(8, "100Gbit/s")).throughput
    assert seen["backward"] == seen["true"] and seen["all"] != seen["true"]
    status, _, err = cli(*base, "--tp-overlap", "all")  # no SP
    assert status == 2 and "--tp-overlap: got 'all'" in err and "--sequence-parallel" in err
    status, _, err = cli(*args, "--tp-overlap", "some")
    assert status == 2 and "--tp-overlap: got 'some'" in err and "'all'" in err
