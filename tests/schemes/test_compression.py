"""Compressed all-reduce against timelines and costs worked by hand, the plain all-reduce on a workload with
halved gradients (a second method), the closed form against the fine model where both apply, and the
SymPy formula against the numeric breakeven."""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd.catalog import load_workload
from queuesgd.dag import schedule
from queuesgd.distributions import Exponential
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError
from queuesgd.schemes.allreduce.allreduce import RingAllReduce
from queuesgd.schemes.allreduce.compression import (
    CompressedAllReduce,
    compression_breakeven,
    fine_breakeven,
    measure_compression,
)
from queuesgd.workload import Cluster, CostCurve, Layer, Workload

#: Two tensors of 4 MB (1e6 fp32 elements each); 50 ms step, backward 30 ms, so the forward is 20 ms.
#: No update time and no add_cost: the ring's reductions cost nothing.
TWO = Workload(0.05, None, layers=[Layer("b", 4e6, "10ms"), Layer("a", 4e6, "20ms")])
#: One message per tensor.
PER_TENSOR = {"fusion_bytes": None, "fusion_time": None}


def fp16(**kw):
    return CompressedAllReduce("fp16", compress_time="1ns", decompress_time="0.5ns", **PER_TENSOR, **kw)


# ----------------------------------------------------------------------------- the task graph by hand
def test_two_bucket_timeline_by_hand():
    # fp16, n = 2, B = 1 GB/s: compress 1 ns/B x 4e6 B = 4 ms, decompress 0.5 ns/B x 4e6 B = 2 ms,
    # collective: ring all-reduce of 2e6 B, 2 (n-1)/n x 2e6 / 1e9 = 2 ms.
    #   forward        0 - 20
    #   backward b    20 - 30
    #   compress0     30 - 34     (in the compute chain: delays backward a)
    #   backward a    34 - 54
    #   compress1     54 - 58
    #   allreduce0    34 - 36     (network)
    #   allreduce1    58 - 60
    #   decompress0   58 - 60     (after the chain's end at 58 and allreduce0)
    #   decompress1   60 - 62     (after decompress0 and allreduce1)
    #   update        62 - 62     -> makespan 62 ms
    g = fp16().task_graph(TWO, Cluster(2, "1GB/s"))
    s = schedule(g)
    expected = {
        "w0/forward": 0,
        "w0/backward/b": 20,
        "w0/compress0": 30,
        "w0/backward/a": 34,
        "w0/compress1": 54,
        "allreduce0": 34,
        "allreduce1": 58,
        "w0/decompress0": 58,
        "w0/decompress1": 60,
        "w0/update": 62,
    }
    assert set(g.names) == set(expected)
    for name, start_ms in expected.items():
        assert s.start[g.index(name)] == pytest.approx(start_ms * 1e-3, abs=1e-12), name
    assert s.makespan == pytest.approx(0.062, abs=1e-12)
    sol = fp16().solve(TWO, Cluster(2, "1GB/s"), "fine")
    assert sol.iteration_time == pytest.approx(0.062, abs=1e-12)
    # on the critical path: forward 20 + backward 30 + compressions 8 + decompressions 4 = 62 ms
    assert sol.breakdown["compression"] == pytest.approx(0.012, abs=1e-12)
    assert sol.breakdown["compute"] == pytest.approx(0.050, abs=1e-12)


def test_two_bucket_timeline_without_overlap_by_hand():
    # As above, but the collectives wait for the chain's end (58 ms): allreduce0 58-60, allreduce1 60-62,
    # decompress0 60-62, decompress1 62-64 -> 64 ms.
    s = fp16(overlap=False)
    g = s.task_graph(TWO, Cluster(2, "1GB/s"))
    sched = schedule(g)
    assert sched.start[g.index("allreduce0")] == pytest.approx(0.058, abs=1e-12)
    assert sched.start[g.index("w0/decompress1")] == pytest.approx(0.062, abs=1e-12)
    assert sched.makespan == pytest.approx(0.064, abs=1e-12)


def test_every_worker_compresses_and_the_collective_waits_for_the_slowest():
    # Two workers, the second at half speed (its forward and backward take twice as long; compression does
    # not stretch). Worker 1: forward 0-40, backward b 40-60, compress0 60-64, backward a 64-104,
    # compress1 104-108. allreduce0 starts when both compress0 are done: max(34, 64) = 64, ends 66;
    # allreduce1 108-110. Worker 0: decompress0 max(58, 66) = 66-68, decompress1 max(68, 110) = 110-112.
    # Worker 1: decompress0 max(108, 66) = 108-110, decompress1 110-112. Updates at 112 ms.
    g = fp16().task_graph(TWO, Cluster(2, "1GB/s", speeds=(1, 0.5)))
    s = schedule(g)
    expected = {
        "w1/compress0": 60,
        "w1/backward/a": 64,
        "allreduce0": 64,
        "allreduce1": 108,
        "w0/decompress0": 66,
        "w0/decompress1": 110,
        "w1/decompress0": 108,
        "w1/update": 112,
    }
    for name, start_ms in expected.items():
        assert s.start[g.index(name)] == pytest.approx(start_ms * 1e-3, abs=1e-12), name
    assert s.makespan == pytest.approx(0.112, abs=1e-12)


def test_topk_allgather_cost_by_hand():
    # n = 4, one 4e6 B message, d = 0.05: each rank sends 2 d S = 4e5 B (values + int32 indices);
    # ring all-gather: (n-1) x 4e5 / 1e9 + (n-1) x 10 us = 1.2 ms + 30 us = 1.23 ms
    w = Workload(0.1, None, layers=[Layer("a", 4e6, "5ms")])
    s = CompressedAllReduce("topk", density=0.05)
    c = Cluster(4, "1GB/s", latency="10us")
    g = s.task_graph(w, c)
    assert g.mean_durations[g.index("allreduce0")] == pytest.approx(1.23e-3, rel=1e-12)


def test_topk_closed_form_by_hand():
    # S = 100 MB, n = 4, d = 0.01, B = 1 GB/s, alpha = 10 us, u = 2 ms, t = 0.1 s (deterministic):
    # compress 0.1 ns/B x 1e8 = 10 ms; decompress 4 sparse vectors x 0.01 ns/B x 1e8 = 4 ms;
    # all-gather 3 x 2e6 B / 1e9 + 3 x 10 us = 6.03 ms; T = 0.1 + 0.010 + 0.00603 + 0.004 + 0.002 = 0.12203
    s = CompressedAllReduce("topk", density=0.01, compress_time="0.1ns", decompress_time="0.01ns")
    w = Workload(0.1, "100MB", update_time="2ms")
    sol = s.solve(w, Cluster(4, "1GB/s", latency="10us"), "closed_form")
    assert sol.iteration_time == pytest.approx(0.12203, rel=1e-12)
    assert sol.breakdown["compression"] == pytest.approx(0.014, rel=1e-12)
    assert sol.breakdown["communication"] == pytest.approx(0.00603, rel=1e-12)
    # memory: residual S + own 2dS + 4 gathered 2dS = 1e8 + 5 x 2e6 on top of the 1e8 B gradient
    assert sol.details["memory"].gradients == pytest.approx(2.1e8)


def test_powersgd_sizes_and_collectives_by_hand():
    # one message of two tensors: 4e6 B = 1e6 elements -> a 1000 x 1000 matrix, P and Q of 1000 x 4 fp32
    # = 16,000 B each; 64 B = 16 elements: 2 r sqrt(16) = 32 >= 16, sent raw with P: 16,064 B.
    # n = 2, B = 1 GB/s, alpha = 0, no reductions: P all-reduce 2 (1/2) 16064 / 1e9 = 16.064 us,
    # Q all-reduce 16 us -> 32.064 us.
    w = Workload(0.1, None, layers=[Layer("w", 4e6, "1ms"), Layer("bias", 64, "0ms")])
    s = CompressedAllReduce("powersgd", rank=4, fusion_bytes="1GB", fusion_time="10s")
    assert s.wire_bytes([4e6, 64]) == (16064.0, 16000.0)
    g = s.task_graph(w, Cluster(2, "1GB/s"))
    assert g.mean_durations[g.index("allreduce0")] == pytest.approx(32.064e-6, rel=1e-12)
    # with latency each all-reduce adds 2 (n-1) alpha: two of them, 4 x 5 us = 20 us more
    g = s.task_graph(w, Cluster(2, "1GB/s", latency="5us"))
    assert g.mean_durations[g.index("allreduce0")] == pytest.approx(52.064e-6, rel=1e-12)


# ----------------------------------------------------------------------------- a second method
@pytest.mark.parametrize("overlap", [True, False])
def test_free_fp16_equals_ring_on_halved_gradients(overlap):
    # Zero-cost fp16 is Zhang et al.'s what-if with ratio 2: RingAllReduce on Workload.compressed(2). The
    # buckets are formed by backward time only (5 ms), so halving the bytes does not change them.
    w = load_workload("resnet50")
    fine = {"fusion_bytes": None, "overlap": overlap}
    c = Cluster(8, "10Gbit/s", latency="20us")
    mine = CompressedAllReduce("fp16", **fine)
    ring = RingAllReduce(**fine)
    assert mine.solve(w, c, "fine").iteration_time == pytest.approx(
        ring.solve(w.compressed(2), c, "fine").iteration_time, rel=1e-12
    )
    assert mine.solve(w, c, "closed_form").iteration_time == pytest.approx(
        ring.solve(w.compressed(2), c, "closed_form").iteration_time, rel=1e-12
    )


@pytest.mark.parametrize("method", ["topk", "powersgd", "fp16"])
def test_closed_form_equals_fine_model_for_one_message_without_overlap(method):
    # The closed form's assumptions realized in the task graph: one message, no overlap, deterministic
    # compute, no reductions (update_time 0, no add_cost).
    layers = [Layer("c", 6e6, "8ms"), Layer("b", 2e6, "4ms"), Layer("a", 256, "1ms")]
    w = Workload(0.04, None, layers=layers, update_time=0.0)
    s = CompressedAllReduce(
        method,
        compress_time="0.2ns",
        decompress_time="0.05ns",
        fusion_bytes="1GB",
        fusion_time="10s",
        overlap=False,
    )
    for c in (Cluster(4, "1GB/s", latency="10us"), Cluster(3, "100MB/s")):
        assert s.solve(w, c, "fine").iteration_time == pytest.approx(
            s.solve(w, c, "closed_form").iteration_time, rel=1e-12
        )


def test_closed_form_agrees_with_ctmc_and_costcurve_costs():
    # Exponential compute: the barrier's CTMC (another road) gives the closed form's rate; costs from a
    # CostCurve are read at the gradient's size: curve(2e6) = 1 ms + 2e6 x 1e-9 = 3 ms.
    curve = CostCurve([0, 1e9], [1e-3, 1.001])
    s = CompressedAllReduce("fp16", compress_time=curve, decompress_time=0.0)
    assert s.compress_cost(2e6) == pytest.approx(3e-3)
    w = Workload(Exponential(mean=0.1), "2MB", batch_size=32, update_time="1ms")
    c = Cluster(3, "1Gbit/s", latency="50us")
    cf = s.solve(w, c, "closed_form")
    assert cf.breakdown["compression"] == pytest.approx(3e-3)
    assert s.solve(w, c, "ctmc").iteration_rate == pytest.approx(cf.iteration_rate, rel=1e-9)


def test_throughput_formula_matches_closed_form():
    # SymPy's formula (deterministic compute) evaluated against the numeric closed form, each method.
    w = Workload(0.1, "100MB", batch_size=16, update_time="2ms")
    c = Cluster(4, "1GB/s", latency="10us")
    for s, extra in [
        (
            CompressedAllReduce("topk", density=0.01, compress_time="0.1ns", decompress_time="0.01ns"),
            {"d": 0.01},
        ),
        (CompressedAllReduce("powersgd", rank=2, compress_time="0.1ns", decompress_time="0.01ns"), {"r": 2}),
        (CompressedAllReduce("fp16", compress_time="0.1ns", decompress_time="0.01ns"), {}),
    ]:
        f = s.formula("deterministic")
        values = {"n": 4, "m": 16, "t": 0.1, "S": 1e8, "B": 1e9, "alpha": 1e-5, "u": 2e-3, "c_c": 1e-10}
        values.update({"c_d": 1e-11, **extra})
        got = f.evaluate(**{k: v for k, v in values.items() if k in f.free_names})
        assert got == pytest.approx(16 * 4 / s.solve(w, c, "closed_form").iteration_time, rel=1e-9)


# ----------------------------------------------------------------------------- breakeven
def test_topk_breakeven_by_hand_and_against_the_plain_ring():
    # n = 4, S = 1e8, d = 0.01, alpha = 10 us; extra = 10 ms + 4 ms = 14 ms.
    # ring: 2 (3/4) S / B + 6 alpha = 1.5e8 / B + 60 us; top-k: 3 x 2e6 / B + 30 us + 14 ms
    # equal when 1.44e8 / B = 14 ms - 30 us -> B* = 1.44e8 / 0.01397 = 1.030780243e10 B/s
    s = CompressedAllReduce("topk", density=0.01, compress_time="0.1ns", decompress_time="0.01ns")
    w = Workload(0.1, "100MB", update_time="2ms")
    c = Cluster(4, "1GB/s", latency="10us")
    b = compression_breakeven(w, c, s)
    assert b == pytest.approx(1.44e8 / 0.01397, rel=1e-12)

    def t(scheme, bw):
        return scheme.solve(w, Cluster(4, bw, latency="10us"), "closed_form").iteration_time

    ring = RingAllReduce()
    assert t(s, b) == pytest.approx(t(ring, b), rel=1e-12)
    assert t(s, 0.9 * b) < t(ring, 0.9 * b) and t(s, 1.1 * b) > t(ring, 1.1 * b)
    # the SymPy formula of the same quantity
    f = s.formula("deterministic", quantity="breakeven")
    assert f.evaluate(n=4, S=1e8, d=0.01, c_c=1e-10, c_d=1e-11, alpha=1e-5) == pytest.approx(b, rel=1e-12)


def test_fp16_breakeven_does_not_depend_on_the_gradient_size():
    # fp16: (2 (n-1)/n S - 2 (n-1)/n S/2) / ((c_c + c_d) S) = (n-1) / (n (c_c + c_d)): n = 8, c = 0.03 ns/B
    # -> 7 / (8 x 3e-11) = 2.916666e10 B/s, for any S.
    s = CompressedAllReduce("fp16", compress_time="0.02ns", decompress_time="0.01ns")
    for size in ("1MB", "100MB"):
        b = compression_breakeven(Workload(0.1, size), Cluster(8, "1GB/s", latency="1ms"), s)
        assert b == pytest.approx(7 / (8 * 3e-11), rel=1e-12)


def test_powersgd_breakeven_formula_against_numeric():
    # Without layers the gradient is one square matrix: P = Q = 4 r sqrt(S/4) = 2 r sqrt(S) bytes.
    # S = 1e8, r = 4: P = Q = 80,000 B. n = 4, alpha = 20 us, c_c + c_d = 0.1 + 0.02 ns/B -> 12 ms.
    # gain = 1.5 (1e8 - 1.6e5) = 1.4976e8; latency: two all-reduces, 2 x 2 (n-1) alpha = 240 us, against
    # the ring's 2 (n-1) alpha = 120 us; cost = 12 ms + 120 us
    s = CompressedAllReduce("powersgd", rank=4, compress_time="0.1ns", decompress_time="0.02ns")
    b = compression_breakeven(Workload(0.1, "100MB"), Cluster(4, "1GB/s", latency="20us"), s)
    assert b == pytest.approx(1.4976e8 / 0.01212, rel=1e-12)
    f = s.formula("deterministic", quantity="breakeven")
    assert f.evaluate(n=4, S=1e8, r=4, c_c=1e-10, c_d=2e-11, alpha=2e-5) == pytest.approx(b, rel=1e-12)


def test_breakeven_edges():
    w = Workload(0.05, "8MB")
    # no cost and no extra latency: compression pays at every bandwidth
    assert compression_breakeven(w, Cluster(2, "1GB/s"), CompressedAllReduce("fp16")) == math.inf
    # one worker: nothing to send, so compression only costs
    assert compression_breakeven(w, Cluster(1, "1GB/s"), fp16()) == 0.0
    # top-k with d >= 1/n sends more bytes than the ring: with no cost, its n - 1 fewer latency steps make
    # it pay only above a bandwidth, which the function refuses to report as a breakeven below
    with pytest.raises(NotRepresentable, match="pays only above"):
        compression_breakeven(w, Cluster(4, "1GB/s", latency="1ms"), CompressedAllReduce("topk", density=0.5))
    # ... and with a cost above those latency steps it never pays
    dense = CompressedAllReduce("topk", density=0.5, compress_time="1ns")
    assert compression_breakeven(w, Cluster(4, "1GB/s", latency="1ms"), dense) == 0.0


def test_fine_breakeven_two_buckets_by_hand():
    # The timeline of test_two_bucket_timeline_by_hand with a free bandwidth B; x = 2e6 / B the fp16
    # collective, y = 2x the plain ring's (4e6 B). Compressed: allreduce0 34..34+x, allreduce1 from
    # max(58, 34+x); decompressions from 58: T = max(62, 60 + x) ms for x <= 24 ms.
    # Plain: ready at 30 and 50 ms, T_0 = max(50, 30 + y) + y = 50 + 2x for y <= 20 ms.
    # Equal at 60 + x = 50 + 2x: x = 10 ms (y = 20 ms, x >= 2: both branches hold) -> B* = 2e6 / 0.01 = 2e8.
    # Below it (x > 10 ms, y > 20 ms): T = 60 + x < T_0 = 30 + 4x, so compression pays there.
    b = fine_breakeven(TWO, Cluster(2, "1GB/s"), fp16())
    assert b == pytest.approx(2e8, rel=1e-8)
    # The closed form (no overlap, one 8 MB message): 4e6 B saved / (8 + 4 ms) = 3.33e8 B/s.
    assert compression_breakeven(TWO, Cluster(2, "1GB/s"), fp16()) == pytest.approx(4e6 / 0.012, rel=1e-12)


@pytest.mark.parametrize("method", ["topk", "powersgd", "fp16"])
def test_fine_breakeven_equals_closed_form_where_the_closed_form_is_exact(method):
    layers = [Layer("c", 6e6, "8ms"), Layer("b", 2e6, "4ms"), Layer("a", 256, "1ms")]
    w = Workload(0.04, None, layers=layers)
    s = CompressedAllReduce(
        method,
        compress_time="0.2ns",
        decompress_time="0.05ns",
        fusion_bytes="1GB",
        fusion_time="10s",
        overlap=False,
    )
    c = Cluster(4, "1GB/s", latency="10us")
    assert fine_breakeven(w, c, s) == pytest.approx(compression_breakeven(w, c, s), rel=1e-7)


def test_fine_breakeven_limits_and_errors():
    c = Cluster(2, "1GB/s")
    assert fine_breakeven(TWO, c, CompressedAllReduce("fp16", **PER_TENSOR)) == math.inf
    assert fine_breakeven(TWO, Cluster(1, "1GB/s"), fp16()) == 0.0
    random = Workload(Exponential(mean=0.05), None, layers=TWO.layers)
    with pytest.raises(NotRepresentable, match="deterministic"):
        fine_breakeven(random, c, fp16())
    with pytest.raises(InvalidParameterError, match="upper"):
        fine_breakeven(TWO, c, fp16(), lower="1Gbit/s", upper="1Mbit/s")
    with pytest.raises(InvalidParameterError, match="scheme"):
        fine_breakeven(TWO, c, RingAllReduce())
    with pytest.raises(InvalidParameterError, match="scheme"):
        compression_breakeven(TWO, c, RingAllReduce())


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("density", [0, -0.1, 1.5, "a", True, float("nan")])
def test_density_outside_the_unit_interval(density):
    with pytest.raises(InvalidParameterError, match=r"CompressedAllReduce\.density.*\(0, 1\]"):
        CompressedAllReduce("topk", density=density)


@pytest.mark.parametrize("rank", [0, -1, 1.5, "four"])
def test_rank_below_one(rank):
    with pytest.raises(InvalidParameterError, match=r"CompressedAllReduce\.rank.*>= 1"):
        CompressedAllReduce("powersgd", rank=rank)


def test_unknown_method_and_other_errors():
    with pytest.raises(UnknownNameError, match=r"CompressedAllReduce\.compressor.*'topk', 'powersgd'"):
        CompressedAllReduce("qsgd")
    # a parameter the method does not read must keep its default (it would be ignored silently)
    with pytest.raises(InvalidParameterError, match=r"CompressedAllReduce\.density.*compressor='topk'"):
        CompressedAllReduce("fp16", density=0.1)
    with pytest.raises(InvalidParameterError, match=r"CompressedAllReduce\.rank.*compressor='powersgd'"):
        CompressedAllReduce("topk", rank=8)
    for bad in (-1e-9, "fast", float("inf"), [1e-9]):
        with pytest.raises(InvalidParameterError, match=r"CompressedAllReduce\.compress_time"):
            CompressedAllReduce("fp16", compress_time=bad)
    with pytest.raises(UnknownNameError, match="quantity"):
        CompressedAllReduce().formula("deterministic", quantity="ratio")
    with pytest.raises(InvalidParameterError, match="overlap"):
        CompressedAllReduce("fp16", overlap="maybe")
    assert CompressedAllReduce().methods == ("closed_form", "ctmc", "simulate", "fine")


# ----------------------------------------------------------------------------- measurement
def test_measure_compression_arithmetic_with_a_fake_clock():
    # A clock that advances 1 ms per reading: every timing is one step, so every point is 1 ms.
    ticks = iter(np.arange(0, 10, 1e-3))
    comp, dec = measure_compression("topk", [4096, 16384], repeats=3, timer=lambda: float(next(ticks)))
    assert comp.sizes == (4096.0, 16384.0)
    assert comp.times == pytest.approx((1e-3, 1e-3)) and dec.times == pytest.approx((1e-3, 1e-3))


@pytest.mark.parametrize("method", ["topk", "powersgd", "fp16"])
def test_measure_compression_runs_on_small_sizes(method):
    pytest.importorskip("torch")
    comp, dec = measure_compression(method, ["4KiB", "64KiB"], repeats=3)
    assert comp.sizes == (4096.0, 65536.0) == dec.sizes
    assert all(0 < t < 1.0 for t in comp.times + dec.times)
    # the curves plug into the scheme: its cost at a size is the curve's
    s = CompressedAllReduce(method, compress_time=comp, decompress_time=dec)
    assert s.compress_cost(65536.0) == pytest.approx(comp.times[1])
    with pytest.raises(InvalidParameterError, match="sizes"):
        measure_compression(method, ["64KiB", "4KiB"])


def test_breakeven_edge_cases_as_the_docs_state_them():
    """docs/compression.md: top-k at d = 1/n sends the ring's bytes (costs decide); PowerSGD per tensor."""
    import queuesgd as q
    from queuesgd.schemes.allreduce.compression import CompressedAllReduce, compression_breakeven

    w = q.Workload(0.05, "8MB")
    topk = CompressedAllReduce("topk", density=0.25)  # d = 1/n for n = 4
    assert compression_breakeven(w, q.Cluster(4, "1GB/s", latency="1ms"), topk) == float("inf")
    slow = CompressedAllReduce("topk", density=0.25, compress_time="1ns")  # 8 ms > (n - 1) alpha = 3 ms
    assert compression_breakeven(w, q.Cluster(4, "1GB/s", latency="1ms"), slow) == 0.0
    assert compression_breakeven(w, q.Cluster(4, "1GB/s"), topk) == 0.0  # a tie does not pay
    # PowerSGD: two tensors of 4 MB send factors each; one 8 MB matrix sends fewer (sqrt is subadditive)
    ps = CompressedAllReduce("powersgd", rank=4, compress_time="0.05ns")
    layered = q.Workload(0.05, None, layers=[q.Layer("a", 4e6, 0.01), q.Layer("b", 4e6, 0.01)])
    c = q.Cluster(4, "1GB/s")
    e = 1e6  # elements per tensor
    gain_two = 2 * 3 / 4 * (8e6 - 2 * 2 * 4 * 4 * e**0.5)  # 2 tensors x (P + Q) x 4 r sqrt(E) bytes
    gain_one = 2 * 3 / 4 * (8e6 - 2 * 4 * 4 * (2 * e) ** 0.5)
    cost = 0.05e-9 * 8e6  # compression seconds (no latency, no decompression cost)
    assert compression_breakeven(layered, c, ps) == pytest.approx(gain_two / cost, rel=1e-12)
    assert compression_breakeven(w, c, ps) == pytest.approx(gain_one / cost, rel=1e-12)


def test_topk_at_one_over_n_in_floating_point_is_the_tie_for_every_n():
    # docs/compression.md: at d = 1/n the costs decide, inf where c_c S + n c_d S < (n - 1) alpha, else
    # 0.0. With d = 1.0 / n the two byte counts, computed apart, differed by about 3e-8 of 1e8 bytes:
    # 73 of 396 cases gave a tiny B* or a NotRepresentable (audit 2026-11-27).
    from queuesgd.schemes.allreduce.compression import compression_breakeven

    w = Workload(0.05, 1e8)
    for n in range(2, 200):
        for alpha, cc in ((1e-3, 1e-12), (1e-9, 1e-9)):
            s = CompressedAllReduce("topk", density=1.0 / n, compress_time=cc)
            expected = math.inf if cc * 1e8 < (n - 1) * alpha else 0.0
            assert compression_breakeven(w, Cluster(n, "1GB/s", latency=alpha), s) == expected, (n, alpha)
