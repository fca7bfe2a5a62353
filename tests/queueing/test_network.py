"""ClosedNetwork as data: validation of every field, and the result objects."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

import queuesgd as q
from queuesgd.errors import InvalidParameterError, QueuesgdError, UnknownNameError


@pytest.mark.parametrize("bad", [-1.0, 0, 0.0, math.nan, math.inf, "fast", None, True])
def test_bad_demands_name_the_station(bad):
    with pytest.raises(InvalidParameterError, match=r"Queue\('cpu'\)\.demand") as err:
        q.Queue("cpu", bad)
    assert "accepted" in str(err.value)
    with pytest.raises(InvalidParameterError, match=r"Delay\('z'\)\.demand"):
        q.Delay("z", bad)


def test_bad_demand_in_class_mapping():
    with pytest.raises(InvalidParameterError, match=r"Queue\('cpu'\)\.demand\['b'\]"):
        q.Queue("cpu", {"a": 1.0, "b": -2.0})


@pytest.mark.parametrize("bad", [0, -3, 2.5, "4", None])
def test_bad_population(bad):
    with pytest.raises(InvalidParameterError, match="population"):
        q.ClosedNetwork([q.Queue("cpu", 1.0)], bad)


def test_bad_servers_and_names():
    with pytest.raises(InvalidParameterError, match="servers"):
        q.Queue("cpu", 1.0, servers=0)
    with pytest.raises(InvalidParameterError, match="name"):
        q.Queue("", 1.0)
    with pytest.raises(InvalidParameterError, match="unique station names"):
        q.ClosedNetwork([q.Queue("a", 1.0), q.Delay("a", 1.0)], 2)
    with pytest.raises(InvalidParameterError, match="stations"):
        q.ClosedNetwork([], 2)
    with pytest.raises(InvalidParameterError, match=r"stations\[1\]"):
        q.ClosedNetwork([q.Queue("a", 1.0), "disk"], 2)


def test_mismatched_class_keys():
    # a class in a demand that the population does not have
    with pytest.raises(UnknownNameError, match="'c'") as err:
        q.ClosedNetwork([q.Queue("cpu", {"a": 1.0, "c": 2.0})], {"a": 1, "b": 1})
    assert "'a', 'b'" in str(err.value)
    # a class mapping with a single-class population
    with pytest.raises(InvalidParameterError, match="population as"):
        q.ClosedNetwork([q.Queue("cpu", {"a": 1.0})], 3)
    # a class that visits nothing
    with pytest.raises(InvalidParameterError, match="visits at least one station"):
        q.ClosedNetwork([q.Queue("cpu", {"a": 1.0})], {"a": 1, "b": 1})


def test_unknown_station_lookup():
    net = q.ClosedNetwork([q.Delay("z", 1.0), q.Queue("cpu", 1.0)], 2)
    with pytest.raises(UnknownNameError, match="'gpu'.*'z', 'cpu'"):
        net.station("gpu")
    with pytest.raises(InvalidParameterError, match="method.*'exact'"):
        q.mva(net, method="fast")
    with pytest.raises(InvalidParameterError, match="population"):
        q.mva(net, population=[1, 0])


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        q.Queue("cpu", -1)
    assert issubclass(UnknownNameError, QueuesgdError)


def test_model_is_not_mutated_and_results_are_immutable():
    net = q.ClosedNetwork([q.Delay("z", 2.0), q.Queue("cpu", 1.0)], 2)
    r = q.mva(net)
    assert net.population == 2
    with pytest.raises(AttributeError):
        r.throughput = 1.0
    with pytest.raises(TypeError):
        r.queue_length["cpu"] = 0.0


def test_result_fields_by_hand():
    # Delay 2 + Queue 1, N = 2: X = 3/5, R_cpu = 4/3, Q_cpu = 4/5, U_cpu = 3/5, Q_z = 6/5
    r = q.mva(q.ClosedNetwork([q.Delay("z", 2.0), q.Queue("cpu", 1.0)], 2))
    assert r.throughput == pytest.approx(0.6, rel=1e-15)
    assert r.residence_time["cpu"] == pytest.approx(4 / 3, rel=1e-15)
    assert r.queue_length["cpu"] == pytest.approx(0.8, rel=1e-15)
    assert r.queue_length["z"] == pytest.approx(1.2, rel=1e-15)
    assert r.utilization["cpu"] == pytest.approx(0.6, rel=1e-15)
    assert r.response_time == pytest.approx(2 / 0.6, rel=1e-15)
    assert r.bottleneck == "cpu"
    assert "cpu" in r.table()


def test_multi_class_result_mappings_by_hand():
    # Two classes, one customer each, one shared queue of demand 1 and a think time of 1:
    # by product form the states are (cpu holds {}, {a}, {b}, {a,b}) with weights
    # 1, 1, 1, 2 (PS queue: 2!/(1!1!) orderings) -> G = 5; X_a = P(a thinking) / Z = (1 + 1)/5
    net = q.ClosedNetwork([q.Delay("z", 1.0), q.Queue("cpu", 1.0)], {"a": 1, "b": 1})
    r = q.mva(net)
    assert set(r.throughput) == {"a", "b"}
    assert r.throughput["a"] == pytest.approx(Fraction(2, 5), rel=1e-15)
    assert r.queue_length["cpu"]["b"] == pytest.approx(Fraction(3, 5), rel=1e-15)


def test_symbolic_result_is_rational_function():
    Z, D = sp.symbols("Z D", positive=True)
    r = q.mva(q.ClosedNetwork([q.Delay("z", Z), q.Queue("cpu", D)], 2))
    # by hand: X(2) = 2 / (Z + D (1 + D/(Z + D)))
    assert sp.simplify(r.throughput - 2 / (Z + D * (1 + D / (Z + D)))) == 0
    assert sp.simplify(r.throughput.subs({Z: 2, D: 1}) - sp.Rational(3, 5)) == 0


def test_population_series_indexing():
    net = q.ClosedNetwork([q.Delay("z", 1.0), q.Queue("cpu", 1.0)], 1)
    s = q.mva(net, population=[3, 1, 2])
    assert s.population.tolist() == [3, 1, 2]
    assert s.throughput.tolist() == pytest.approx([15 / 16, 0.5, 0.8], rel=1e-15)
    assert s.at(2).throughput == pytest.approx(0.8, rel=1e-15)
    with pytest.raises(InvalidParameterError, match="population"):
        s.at(7)
    assert isinstance(s.queue_length["cpu"], np.ndarray)
