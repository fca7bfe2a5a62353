"""Workload, Layer and Cluster: unit parsing, defaults, validation, copies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import InvalidParameterError, UnitError
from queuesgd.units import MAX_SECONDS
from queuesgd.workload import Cluster, CostCurve, Layer, PhaseTimes, RandomDelay, Workload

# ---------------------------------------------------------------- Layer


def test_layer_parses_units_and_ready_gap_equals_backward_time():
    layer = Layer("conv1.weight", "36KiB", "250us", forward_time="0.1ms")
    assert layer.gradient_bytes == 36 * 1024
    assert layer.backward_time == pytest.approx(250e-6)
    assert layer.forward_time == pytest.approx(1e-4)
    assert layer.ready_gap == layer.backward_time


def test_layer_forward_time_defaults_to_unknown_and_zero_gap_is_allowed():
    layer = Layer("bn.bias", 1024, 0)
    assert layer.forward_time is None
    assert layer.backward_time == 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "", "gradient_bytes": 1, "backward_time": 0}, "Layer.name"),
        ({"name": "x", "gradient_bytes": 0, "backward_time": 0}, "Layer('x').gradient_bytes"),
        ({"name": "x", "gradient_bytes": -4, "backward_time": 0}, "Layer('x').gradient_bytes"),
        ({"name": "x", "gradient_bytes": 4, "backward_time": -1e-6}, "Layer('x').backward_time"),
        ({"name": "x", "gradient_bytes": 4, "backward_time": "3 furlongs"}, "Layer('x').backward_time"),
        (
            {"name": "x", "gradient_bytes": 4, "backward_time": 0, "forward_time": -1},
            "Layer('x').forward_time",
        ),
        ({"name": "x", "gradient_bytes": 4, "backward_time": 2e9}, "Layer('x').backward_time"),
        (
            {"name": "x", "gradient_bytes": 4, "backward_time": 0, "forward_time": "100years"},
            "Layer('x').forward_time",
        ),
    ],
)
def test_layer_validation_names_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError) as info:
        Layer(**kwargs)
    assert info.value.field == field
    assert str(info.value).startswith(field + ":")


def test_layer_is_frozen():
    layer = Layer("x", 4, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.gradient_bytes = 8


# ---------------------------------------------------------------- Workload


def test_workload_unit_strings_and_defaults():
    w = Workload("128ms", "97.5MiB", batch_size=32, update_time="2ms", name="toy")
    assert isinstance(w.compute, Deterministic)
    assert w.compute_time == pytest.approx(0.128)
    assert w.gradient_bytes == 97.5 * 2**20
    assert w.parameter_bytes == w.gradient_bytes  # default: same size as the gradient
    assert w.update_time == pytest.approx(0.002)
    assert w.samples_per_second_single == pytest.approx(32 / 0.128)
    assert w.layers is None and w.backward_time is None and w.ready_times is None


def test_workload_bytes_not_bits():
    # 8 Mbit is one megabyte, 8 MB is eight.
    assert Workload(1.0, "8Mbit").gradient_bytes == 1e6
    assert Workload(1.0, "8MB").gradient_bytes == 8e6


def test_workload_accepts_a_distribution():
    dist = Exponential(mean=0.2)
    w = Workload(dist, 1e6, parameter_bytes="2MB", batch_size=4)
    assert w.compute is dist
    assert w.compute_time == pytest.approx(0.2)
    assert w.parameter_bytes == 2e6
    assert w.samples_per_second_single == pytest.approx(20.0)


def test_workload_gradient_bytes_from_layers_and_ready_times():
    layers = [Layer("a", 100, "1ms"), Layer("b", 300, 0), Layer("c", 600, "2ms")]
    w = Workload(0.01, None, layers=layers)
    assert w.gradient_bytes == 1000.0
    assert isinstance(w.layers, tuple)
    assert w.backward_time == pytest.approx(0.003)
    np.testing.assert_allclose(w.ready_times, [0.001, 0.001, 0.003])
    # Consistent explicit size is accepted too.
    assert Workload(0.01, "1kB", layers=layers).gradient_bytes == 1000.0


def test_workload_layers_must_add_up():
    layers = [Layer("a", 100, 0), Layer("b", 300, 0)]
    with pytest.raises(InvalidParameterError, match=r"Workload\.gradient_bytes.*sum of the layers") as info:
        Workload(0.01, 500, layers=layers)
    assert info.value.field == "Workload.gradient_bytes"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"compute": -1.0, "gradient_bytes": 1}, "Workload.compute"),
        ({"compute": 0, "gradient_bytes": 1}, "Workload.compute"),
        ({"compute": "fast", "gradient_bytes": 1}, "Workload.compute"),
        ({"compute": 1.0, "gradient_bytes": "-3MB"}, "Workload.gradient_bytes"),
        ({"compute": 1.0, "gradient_bytes": "10Gbit/s"}, "Workload.gradient_bytes"),
        ({"compute": 1.0, "gradient_bytes": None}, "Workload.gradient_bytes"),
        ({"compute": 1.0, "gradient_bytes": 1, "parameter_bytes": 0}, "Workload.parameter_bytes"),
        ({"compute": 1.0, "gradient_bytes": 1, "batch_size": -32}, "Workload.batch_size"),
        ({"compute": 1.0, "gradient_bytes": 1, "batch_size": 0}, "Workload.batch_size"),
        ({"compute": 1.0, "gradient_bytes": 1, "batch_size": 2.5}, "Workload.batch_size"),
        ({"compute": 1.0, "gradient_bytes": 1, "update_time": -1}, "Workload.update_time"),
        ({"compute": 1.0, "gradient_bytes": 1, "layers": []}, "Workload.layers"),
        ({"compute": 1.0, "gradient_bytes": 1, "layers": "abc"}, "Workload.layers"),
        ({"compute": 1.0, "gradient_bytes": 1, "layers": [("a", 1, 0)]}, "Workload.layers[0]"),
        ({"compute": 1.0, "gradient_bytes": 1, "name": ""}, "Workload.name"),
    ],
)
def test_workload_validation_names_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError) as info:
        Workload(**kwargs)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_workload_unit_error_is_a_unit_error():
    with pytest.raises(UnitError, match="Workload.compute"):
        Workload("3 parsecs", 1)


def test_workload_repr_is_short_and_frozen():
    layers = [Layer(f"t{i}", 10, 0) for i in range(200)]
    w = Workload(0.5, None, layers=layers, name="big", batch_size=8)
    text = repr(w)
    assert text.startswith("Workload(name='big', compute=")
    assert "layers=<200 layers>" in text
    assert "gradient_bytes=2000.0" in text and "batch_size=8" in text
    assert len(text) < 300
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.batch_size = 2


def test_workload_replace_revalidates():
    w = Workload(0.5, 1e6, batch_size=8)
    w2 = dataclasses.replace(w, batch_size=16)
    assert w2.batch_size == 16 and w.batch_size == 8
    assert isinstance(w2.compute, Distribution)
    with pytest.raises(InvalidParameterError, match="Workload.batch_size"):
        dataclasses.replace(w, batch_size=-1)


# ---------------------------------------------------------------- CostCurve


def test_cost_curve_by_hand():
    curve = CostCurve([10, 20, 40], [1e-3, 2e-3, 6e-3])
    assert curve.sizes == (10.0, 20.0, 40.0) and curve.times == (1e-3, 2e-3, 6e-3)
    assert curve(15) == pytest.approx(1.5e-3, rel=1e-12)  # halfway between 1 ms and 2 ms
    assert curve(30) == pytest.approx(4e-3, rel=1e-12)  # halfway between 2 ms and 6 ms
    assert curve(20) == 2e-3  # on a point
    assert curve(0) == 1e-3 and curve(5) == 1e-3  # below the first size: the first time
    # Above the last size: last segment's slope 4 ms / 20 B, so 60 B -> 6 ms + 20 * 0.2 ms = 10 ms.
    assert curve(60) == pytest.approx(10e-3, rel=1e-12)
    assert curve("30B") == pytest.approx(4e-3, rel=1e-12)
    assert isinstance(curve(15), float)


def test_cost_curve_matches_numpy_interp_inside_and_keeps_shape():
    rng = np.random.default_rng(7)
    sizes = np.cumsum(rng.uniform(1.0, 1e6, size=12))
    times = rng.uniform(0.0, 1e-3, size=12)
    curve = CostCurve(sizes, times)
    x = rng.uniform(sizes[0], sizes[-1], size=(4, 50))
    out = curve(x)
    assert isinstance(out, np.ndarray) and out.shape == (4, 50)
    np.testing.assert_allclose(out, np.interp(x, sizes, times), rtol=1e-12)


def test_cost_curve_falling_last_segment_is_clipped_at_zero():
    curve = CostCurve([0, 10], [5.0, 0.0])
    assert curve(4) == pytest.approx(3.0)  # 5 - 0.5 * 4
    assert curve(20) == 0.0  # the extrapolation 0 - 0.5 * 10 = -5 s is clipped
    np.testing.assert_array_equal(curve([10, 30]), [0.0, 0.0])


@pytest.mark.parametrize(
    ("sizes", "times", "field"),
    [
        ([0], [1.0], "CostCurve.sizes"),  # one point
        ([0, 0], [1.0, 1.0], "CostCurve.sizes"),  # not strictly increasing
        ([10, 5], [1.0, 1.0], "CostCurve.sizes"),
        ([-1, 5], [1.0, 1.0], "CostCurve.sizes[0]"),
        ("0,5", [1.0, 1.0], "CostCurve.sizes"),
        ([0, 5], [1.0], "CostCurve.times"),  # one time per size
        ([0, 5], [1.0, -1.0], "CostCurve.times[1]"),
        ([0, 5], [1.0, float("nan")], "CostCurve.times[1]"),
        ([0, 5], 3.0, "CostCurve.times"),
    ],
)
def test_cost_curve_validation_names_the_field(sizes, times, field):
    with pytest.raises(InvalidParameterError) as info:
        CostCurve(sizes, times)
    assert info.value.field == field


def test_cost_curve_sizes_message_says_what_is_accepted():
    with pytest.raises(InvalidParameterError, match="strictly increasing sizes in bytes"):
        CostCurve([1, 1], [0, 0])


@pytest.mark.parametrize("bad", [-1, float("inf"), [1.0, -2.0], "lots"])
def test_cost_curve_rejects_bad_sizes(bad):
    with pytest.raises(InvalidParameterError, match="nbytes"):
        CostCurve([0, 1], [0, 1])(bad)


def test_cost_curve_units_repr_and_value_semantics():
    curve = CostCurve(["0B", "1kB"], ["0s", "1ms"])
    assert curve.sizes == (0.0, 1000.0) and curve.times == (0.0, 0.001)
    assert repr(curve) == "CostCurve(sizes=(0.0, 1000.0), times=(0.0, 0.001))"
    assert curve == CostCurve((0.0, 1e3), (0.0, 1e-3)) and hash(curve) == hash(CostCurve([0, 1e3], [0, 1e-3]))
    long = CostCurve(range(0, 50, 10), [1, 2, 3, 4, 5])
    assert repr(long) == "CostCurve(<5 points: 0 B to 40 B, 1 s to 5 s>)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        curve.sizes = (1.0, 2.0)


def test_cost_curve_from_file(tmp_path):
    path = tmp_path / "add.log"
    path.write_text("0,1e-5\n1000000,1.1e-3\n")
    curve = CostCurve.from_file(path)
    assert curve == CostCurve([0, 1e6], [1e-5, 1.1e-3])
    assert curve(5e5) == pytest.approx(1e-5 + 0.5 * (1.1e-3 - 1e-5), rel=1e-12)


# ---------------------------------------------------------------- reduction, compression, phases


def test_add_cost_is_validated_and_shown_in_repr_only_when_set():
    w = Workload(0.1, 1000)
    assert w.add_cost is None and "add_cost" not in repr(w)
    curve = CostCurve([0, 1000], [0, 1e-3])
    w2 = Workload(0.1, 1000, add_cost=curve)
    assert w2.add_cost is curve
    assert repr(w2).endswith(", add_cost=CostCurve(sizes=(0.0, 1000.0), times=(0.0, 0.001)))")
    with pytest.raises(InvalidParameterError) as info:
        Workload(0.1, 1000, add_cost=([0, 1000], [0, 1e-3]))
    assert info.value.field == "Workload.add_cost"


def test_reduction_time_scales_the_update_without_a_curve():
    # 2 ms per 100 MB update: 25 MB cost 0.5 ms, 1 GB cost 20 ms (linear).
    w = Workload(0.1, "100MB", update_time="2ms")
    assert w.reduction_time("25MB") == pytest.approx(5e-4, rel=1e-12)
    assert isinstance(w.reduction_time(1e9), float)
    np.testing.assert_allclose(w.reduction_time([0, 25e6, 1e9]), [0.0, 5e-4, 0.02], rtol=1e-12)
    assert Workload(0.1, "100MB").reduction_time(5e7) == 0.0  # no update time: free reduction
    with pytest.raises(InvalidParameterError, match="nbytes"):
        w.reduction_time(-1)


def test_reduction_time_uses_the_curve_when_set():
    curve = CostCurve([0, 1e8], [1e-5, 1e-3])
    w = Workload(0.1, "100MB", update_time="2ms", add_cost=curve)
    assert w.reduction_time(5e7) == pytest.approx(1e-5 + 0.5 * (1e-3 - 1e-5), rel=1e-12)
    np.testing.assert_allclose(w.reduction_time([0.0, 1e8]), [1e-5, 1e-3])


def test_compressed_divides_wire_sizes_only():
    curve = CostCurve([0, 1e8], [0, 1e-3])
    layers = [Layer("a", 600, "1ms", "2ms"), Layer("b", 400, 0, "1ms")]
    w = Workload(0.5, None, parameter_bytes=2000, batch_size=4, update_time="3ms", layers=layers, name="m")
    w = dataclasses.replace(w, add_cost=curve)
    c = w.compressed(4)
    assert c.gradient_bytes == 250.0
    assert [x.gradient_bytes for x in c.layers] == [150.0, 100.0]
    assert [x.backward_time for x in c.layers] == [1e-3, 0.0]
    assert [x.forward_time for x in c.layers] == [2e-3, 1e-3]
    assert c.parameter_bytes == 2000.0
    assert (c.compute, c.update_time, c.add_cost, c.name, c.batch_size) == (w.compute, 3e-3, curve, "m", 4)
    assert w.gradient_bytes == 1000.0  # the original is untouched
    assert Workload(0.5, "1MB").compressed(2.5).gradient_bytes == 4e5
    assert w.compressed(1) == w


def test_compressed_keeps_the_per_byte_reduction_rate():
    # Without a curve the rate is update_time / parameter_bytes = 2 ms / 100 MB, before and after.
    w = Workload(0.1, "100MB", update_time="2ms")
    c = w.compressed(10)
    assert c.gradient_bytes == 1e7
    assert c.reduction_time(c.gradient_bytes) == pytest.approx(2e-4, rel=1e-12)
    assert c.reduction_time(1e7) == w.reduction_time(1e7)


@pytest.mark.parametrize("ratio", [0.5, 0, -2, float("inf"), float("nan"), True, "2", None])
def test_compressed_rejects_bad_ratios(ratio):
    with pytest.raises(InvalidParameterError, match=r"a ratio >= 1 \(1 = no compression\)") as info:
        Workload(0.1, 1000).compressed(ratio)
    assert info.value.field == "compression"


def test_gradients_scaled_doubles_what_a_ring_sends_and_nothing_else():
    from queuesgd import RingAllReduce, predict

    layers = [Layer("a", 600, "1ms", "2ms"), Layer("b", 400, 0, "1ms")]
    w = Workload(0.5, None, parameter_bytes=1000, update_time="3ms", layers=layers, name="m")
    f = w.gradients_scaled(2)
    assert (f.gradient_bytes, [x.gradient_bytes for x in f.layers]) == (2000.0, [1200.0, 800.0])
    assert (f.parameter_bytes, f.compute, f.update_time, f.name) == (1000.0, w.compute, 3e-3, "m")
    # the closed form of a ring all-reduce of 4 ranks, 2 (n - 1) / n S / B with alpha 0, on 2000 bytes
    c = Cluster(4, "1MB/s", 0)
    comm = predict(RingAllReduce(), f, c, "closed_form").iteration_time - f.compute_time - f.update_time
    assert comm == pytest.approx(2 * 3 / 4 * 2000 / 1e6, rel=1e-9)
    assert w.gradients_scaled(0.5) == w.compressed(2)


@pytest.mark.parametrize("factor", [0, -2, float("inf"), float("nan"), True, "2", None, 2e6])
def test_gradients_scaled_rejects_bad_factors(factor):
    with pytest.raises(InvalidParameterError) as info:
        Workload(0.1, 1000).gradients_scaled(factor)
    assert info.value.field == "gradients_scaled"


def test_forward_time_needs_every_layer():
    full = Workload(0.1, None, layers=[Layer("a", 4, 0, "2ms"), Layer("b", 4, 0, "3.5ms")])
    assert full.forward_time == pytest.approx(5.5e-3, rel=1e-12)
    part = Workload(0.1, None, layers=[Layer("a", 4, 0, "2ms"), Layer("b", 4, 0)])
    assert part.forward_time is None
    assert Workload(0.1, 8).forward_time is None


def test_phase_times_with_forward_times():
    # compute 100 ms = forward (20 + 30) + backward (10 + 15) + other 25.
    layers = [Layer("a", 4, "10ms", "20ms"), Layer("b", 4, "15ms", "30ms")]
    p = Workload("100ms", None, layers=layers).phase_times()
    assert isinstance(p, PhaseTimes) and p.derived is False
    assert p.forward == pytest.approx(0.050, rel=1e-12)
    assert p.backward == pytest.approx(0.025, rel=1e-12)
    assert p.other == pytest.approx(0.025, rel=1e-9)
    assert "other = compute (100.00 ms) - forward - backward = 25.00 ms" in p.note


def test_phase_times_derives_forward_without_forward_times():
    layers = [Layer("a", 4, "10ms"), Layer("b", 4, "15ms")]
    p = Workload("100ms", None, layers=layers).phase_times()
    assert p.derived is True and p.other == 0.0
    assert p.forward == pytest.approx(0.075, rel=1e-12)
    assert p.backward == pytest.approx(0.025, rel=1e-12)
    assert p.note == (
        "forward time derived from the single-worker step time: compute (100.00 ms) - backward (25.00 ms) "
        "= 75.00 ms; the profile has no forward times"
    )


def test_phase_times_tolerates_rounding_but_not_a_short_step():
    # 0.3 - 0.1 - 0.2 is -2.8e-17 in floating point: a step of exactly forward + backward is accepted,
    # and the rounding residue is clipped to 0.
    layers = [Layer("a", 4, 0.2, 0.1)]
    p = Workload(0.3, None, layers=layers).phase_times()
    assert p.other == 0.0 and p.forward == 0.1 and p.backward == 0.2
    with pytest.raises(InvalidParameterError, match=r"at least the profile's forward \+ backward") as info:
        Workload(0.29, None, layers=layers).phase_times()
    assert info.value.field == "Workload.compute" and info.value.got == 0.29
    with pytest.raises(InvalidParameterError) as info:
        Workload(0.15, None, layers=[Layer("a", 4, 0.2)]).phase_times()  # derived: compute < backward
    assert info.value.field == "Workload.compute"


def test_phase_times_needs_layers_with_forward_times_on_all_or_none():
    with pytest.raises(InvalidParameterError) as info:
        Workload(0.1, 8).phase_times()
    assert info.value.field == "Workload.layers"
    layers = [Layer("a", 4, 0, "2ms"), Layer("b", 4, 0)]
    with pytest.raises(InvalidParameterError, match="forward_time on every layer or on none") as info:
        Workload(0.1, None, layers=layers).phase_times()
    assert info.value.field == "Workload.layers"


# ---------------------------------------------------------------- Cluster


def test_cluster_bandwidth_bits_vs_bytes():
    assert Cluster(4, "10Gbit/s").bandwidth == 1.25e9
    assert Cluster(4, "10Gbps").bandwidth == 1.25e9
    assert Cluster(4, "10GB/s").bandwidth == 1e10
    assert Cluster(4, 3e8).bandwidth == 3e8


def test_cluster_defaults_and_latency_units():
    c = Cluster(8, "100Gbit/s", latency="50us", name="p3dn")
    assert c.latency == pytest.approx(5e-5)
    assert c.ps_shards == 1 and c.speeds is None
    np.testing.assert_array_equal(c.speed_factors, np.ones(8))
    assert repr(c) == (
        "Cluster(workers=8, bandwidth=12500000000.0, latency=5e-05, ps_shards=1, speeds=None, "
        "stragglers=None, name='p3dn')"
    )


def test_cluster_speeds_are_a_tuple_of_floats():
    c = Cluster(3, "1GB/s", speeds=np.array([1, 2, 0.5]))
    assert c.speeds == (1.0, 2.0, 0.5)
    np.testing.assert_array_equal(c.speed_factors, [1.0, 2.0, 0.5])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workers": 0, "bandwidth": 1}, "Cluster.workers"),
        ({"workers": 2.5, "bandwidth": 1}, "Cluster.workers"),
        ({"workers": True, "bandwidth": 1}, "Cluster.workers"),
        ({"workers": 2, "bandwidth": 0}, "Cluster.bandwidth"),
        ({"workers": 2, "bandwidth": "-1Gbit/s"}, "Cluster.bandwidth"),
        ({"workers": 2, "bandwidth": "10GB"}, "Cluster.bandwidth"),
        ({"workers": 2, "bandwidth": 1, "latency": -1e-6}, "Cluster.latency"),
        ({"workers": 2, "bandwidth": 1, "ps_shards": 0}, "Cluster.ps_shards"),
        ({"workers": 2, "bandwidth": 1, "speeds": [1.0]}, "Cluster.speeds"),
        ({"workers": 2, "bandwidth": 1, "speeds": [1.0, 1.0, 1.0]}, "Cluster.speeds"),
        ({"workers": 2, "bandwidth": 1, "speeds": [1.0, 0.0]}, "Cluster.speeds[1]"),
        ({"workers": 2, "bandwidth": 1, "speeds": "fast"}, "Cluster.speeds"),
        ({"workers": 2, "bandwidth": 1, "name": 3}, "Cluster.name"),
    ],
)
def test_cluster_validation_names_the_field(kwargs, field):
    with pytest.raises(InvalidParameterError) as info:
        Cluster(**kwargs)
    assert info.value.field == field


def test_cluster_speeds_wrong_length_message_says_what_is_accepted():
    with pytest.raises(InvalidParameterError, match=r"one speed factor per worker \(4 values\)"):
        Cluster(4, "1GB/s", speeds=[1, 1])


def test_with_workers_and_with_bandwidth_return_copies():
    c = Cluster(4, "10Gbit/s", latency="10us")
    c8 = c.with_workers(8)
    assert (c8.workers, c.workers) == (8, 4)
    assert c8.bandwidth == c.bandwidth and c8.latency == c.latency
    fast = c.with_bandwidth("100Gbit/s")
    assert fast.bandwidth == 1.25e10 and c.bandwidth == 1.25e9
    assert fast.workers == 4


def test_with_workers_and_speeds():
    c = Cluster(2, "1GB/s", speeds=[1.0, 2.0])
    assert c.with_workers(2).speeds == (1.0, 2.0)  # same count: kept
    assert c.with_workers(3, speeds=[1, 1, 2]).speeds == (1.0, 1.0, 2.0)
    assert c.with_workers(5, speeds=None).speeds is None
    with pytest.raises(InvalidParameterError, match="pass speeds= to with_workers") as info:
        c.with_workers(3)
    assert info.value.field == "Cluster.speeds"
    with pytest.raises(InvalidParameterError) as info:
        c.with_workers(3, speeds=[1, 1])
    assert info.value.field == "Cluster.speeds"
    with pytest.raises(InvalidParameterError) as info:
        c.with_workers(0)
    assert info.value.field == "Cluster.workers"


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Workload(1e30, 1024), "Workload.compute"),
        (lambda: Workload(Exponential(rate=1e-30), 1024), "Workload.compute"),
        (lambda: Workload(0.1, 1024, update_time=2e9), "Workload.update_time"),
        (lambda: Cluster(4, "10Gbit/s", stragglers=RandomDelay(1, 1e30)), "RandomDelay.delay"),
    ],
)
def test_every_duration_is_at_most_max_seconds(build, field):
    # one ceiling for every duration a user sets (units.MAX_SECONDS, 1e9 s), as Cluster.latency has had
    with pytest.raises(InvalidParameterError, match=r"at most 1e\+09 s") as info:
        build()
    assert info.value.field == field
    Workload(MAX_SECONDS, 1024, update_time=MAX_SECONDS)  # the ceiling itself is accepted
