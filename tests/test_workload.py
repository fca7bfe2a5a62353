"""Workload, Layer and Cluster: unit parsing, defaults, validation, copies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import InvalidParameterError, UnitError
from queuesgd.workload import Cluster, Layer, Workload

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
