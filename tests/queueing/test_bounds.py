"""ABA and BJB bounds: contain exact MVA, BJB tighter than ABA, closed-form values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuesgd import ClosedNetwork, Delay, Queue, mva
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.queueing.bounds import Bounds, asymptotic_bounds, balanced_bounds

demand = st.floats(min_value=0.01, max_value=10.0)


@st.composite
def nets(draw, multi_server=False):
    queues = draw(st.lists(demand, min_size=1, max_size=5))
    think = draw(st.lists(demand, min_size=0, max_size=2))
    servers = [draw(st.integers(1, 4)) if multi_server else 1 for _ in queues]
    stations = [Delay(f"z{i}", z) for i, z in enumerate(think)]
    stations += [Queue(f"q{k}", d, servers=c) for k, (d, c) in enumerate(zip(queues, servers))]
    return ClosedNetwork(stations, population=1)


POPS = list(range(1, 41)) + [60, 100]


def check_contains(b: Bounds, series) -> None:
    X = series.throughput
    rel = 1e-12
    assert np.all(b.throughput_lower <= X * (1 + rel))
    assert np.all(X <= b.throughput_upper * (1 + rel))
    assert np.all(b.response_lower <= series.response_time * (1 + rel))
    assert np.all(series.response_time <= b.response_upper * (1 + rel))


@settings(max_examples=60, deadline=None)
@given(nets())
def test_bounds_contain_exact_mva_and_bjb_is_tighter(net):
    series = mva(net, population=POPS)
    aba = asymptotic_bounds(net, POPS)
    bjb = balanced_bounds(net, POPS)
    check_contains(aba, series)
    check_contains(bjb, series)
    tiny = 1e-12
    assert np.all(bjb.throughput_lower >= aba.throughput_lower * (1 - tiny))
    assert np.all(bjb.throughput_upper <= aba.throughput_upper * (1 + tiny))


@settings(max_examples=40, deadline=None)
@given(nets(multi_server=True))
def test_asymptotic_bounds_contain_exact_mva_multi_server(net):
    check_contains(asymptotic_bounds(net, POPS), mva(net, population=POPS))


def test_textbook_values_repairman():
    # D = 1, Z = 2, N = 3: exact X = 15/19. BJB (Zahorjan et al. 1982):
    # lower 3/(3 + 2/(1 + 2/3)) = 5/7, upper 3/(3 + 2/(1 + 2)) = 9/11.
    net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=3)
    assert mva(net).throughput == pytest.approx(15 / 19)
    b = balanced_bounds(net)
    assert (b.throughput_lower, b.throughput_upper) == pytest.approx((5 / 7, 9 / 11))
    a = asymptotic_bounds(net)
    assert (a.throughput_lower, a.throughput_upper) == pytest.approx((3 / 5, 1.0))
    assert b.method == "balanced" and a.method == "asymptotic"
    assert isinstance(b.population, int) and b.population == 3
    # Cycle-time bounds are N / X bounds (delays included, like MVAResult.response_time).
    assert (b.response_lower, b.response_upper) == pytest.approx((3 * 11 / 9, 3 * 7 / 5))


def test_batch_no_think_time():
    # Z = 0: N/(D + (N-1) D_max) <= X <= N/(D + (N-1) D_avg), and min with 1/D_max.
    net = ClosedNetwork([Queue("a", 1.0), Queue("b", 3.0)], population=4)
    b = balanced_bounds(net)
    assert b.throughput_lower == pytest.approx(4 / (4 + 3 * 3))
    assert b.throughput_upper == pytest.approx(min(1 / 3, 4 / (4 + 3 * 2)))


def test_delays_only_are_exact():
    net = ClosedNetwork([Delay("a", 1.0), Delay("b", 3.0)], population=8)
    for f in (asymptotic_bounds, balanced_bounds):
        b = f(net)
        assert b.throughput_lower == pytest.approx(2.0) and b.throughput_upper == pytest.approx(2.0)


def test_population_iterable_gives_arrays():
    net = ClosedNetwork([Delay("think", 4.0), Queue("cpu", 1.0), Queue("disk", 2.0)], population=1)
    b = asymptotic_bounds(net, range(1, 4))
    assert b.population.tolist() == [1, 2, 3]
    assert b.throughput_upper.shape == (3,)


def test_multi_class_refused():
    net = ClosedNetwork([Delay("z", 1.0), Queue("q", 1.0)], population={"a": 1, "b": 2})
    for f in (asymptotic_bounds, balanced_bounds):
        with pytest.raises(InvalidParameterError, match="single-class"):
            f(net)


def test_bjb_refuses_multi_server():
    net = ClosedNetwork([Delay("z", 1.0), Queue("pool", 2.0, servers=2)], population=3)
    with pytest.raises(NotRepresentable, match="asymptotic_bounds"):
        balanced_bounds(net)
    asymptotic_bounds(net)  # fine


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", [1, 0], []])
def test_bad_population(bad):
    net = ClosedNetwork([Queue("q", 1.0)], population=1)
    with pytest.raises(InvalidParameterError, match="population"):
        asymptotic_bounds(net, bad)
