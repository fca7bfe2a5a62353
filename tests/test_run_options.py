"""``iterations`` and ``rng`` checked up front by predict and sweep, whatever the method (fuzz audit F3).

``sweep`` read neither where nothing was simulated (``iterations="abc"``, ``-1``, ``2.5``, ``True``,
``10**400`` and ``rng=-1`` gave numbers), ``predict`` ignored a bad ``rng`` outside a simulation and took
``iterations=10**400`` with a closed form, and a simulation of ``10**400`` iterations raised
``OverflowError``. The cost guard's helpers (comparison_cost) and the table helpers (frames) checked
nothing. The good-input checks compare with the closed form by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd import comparison_cost, frames
from queuesgd.errors import InvalidParameterError

W = q.Workload(0.1, "100MB", batch_size=32)
C = q.Cluster(4, "1GB/s")
BAD_ITERATIONS = ["abc", -1, 0, 2.5, True, 10**400, 1j, [500]]
BAD_RNG = ["abc", -1, 2.5, True, np.random.RandomState(0), 1.0]


@pytest.mark.parametrize("iterations", BAD_ITERATIONS, ids=repr)
def test_sweep_refuses_bad_iterations_where_nothing_simulates(iterations):
    with pytest.raises(
        InvalidParameterError, match=r"^iterations: got .*; accepted: an integer >= 1, at most"
    ):
        q.sweep(q.RingAllReduce(), W, C, workers=[4], iterations=iterations)


@pytest.mark.parametrize("rng", BAD_RNG, ids=repr)
@pytest.mark.parametrize("call", ["predict", "sweep"])
def test_predict_and_sweep_refuse_a_bad_rng_where_nothing_simulates(call, rng):
    with pytest.raises(InvalidParameterError, match=r"^rng: got .*; accepted: a numpy.random.Generator"):
        if call == "predict":
            q.predict(q.RingAllReduce(), W, C, rng=rng)
        else:
            q.sweep(q.RingAllReduce(), W, C, workers=[4], rng=rng)


@pytest.mark.parametrize("method", ["closed_form", "auto"])
def test_predict_refuses_more_iterations_than_any_simulation_takes_with_a_closed_form(method):
    with pytest.raises(InvalidParameterError, match=r"^iterations: got an integer of 401 digits"):
        q.predict(q.RingAllReduce(), W, C, method, iterations=10**400)


def test_good_options_give_the_closed_form():
    # 0.1 + 2 x 3/4 x 0.1 s per step, 4 x 32 samples each
    by_hand = 4 * 32 / (0.1 + 2 * 3 / 4 * 0.1)
    for rng in (None, 0, np.int64(7), np.random.default_rng(1)):
        for iterations in (None, 500, 500.0, np.int64(500), 10**12):
            p = q.predict(q.RingAllReduce(), W, C, rng=rng, iterations=iterations)
            t = q.sweep(q.RingAllReduce(), W, C, workers=[4], rng=rng, iterations=iterations)
            assert p.throughput == pytest.approx(by_hand, rel=1e-12) == float(t["throughput"][0])


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), W, C, "simulate", -1), "iterations"),
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), W, C, "simulate", 1j), "iterations"),
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), W, C, "simulate", 10**400), "iterations"),
        (lambda: comparison_cost.prediction_seconds(3, W, C, "simulate", None), "scheme"),
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), 3, C, "simulate", None), "workload"),
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), W, "c", "simulate", None), "cluster"),
        (lambda: comparison_cost.prediction_seconds(q.SyncPS(), W, C, "exact", None), "method"),
        (lambda: comparison_cost.check_count("a", 3), "n"),
        (lambda: comparison_cost.check_count(4, None), "max_configurations"),
        (lambda: comparison_cost.check_time([1.0], ["mva"], "a"), "max_seconds"),
        (lambda: comparison_cost.check_time([1.0, float("nan")], ["mva", "mva"], 30.0), "seconds[1]"),
        (lambda: comparison_cost.check_time([-1.0], ["mva"], 30.0), "seconds[0]"),
        (lambda: comparison_cost.check_time([1.0], ["mva", "ctmc"], 30.0), "methods"),
        (lambda: comparison_cost.check_time(3.0, ["mva"], 30.0), "seconds"),
        (lambda: comparison_cost.check_time([1.0], "mva", 30.0), "methods"),
    ],
)
def test_the_cost_guard_helpers_refuse_bad_arguments_naming_them(call, field):
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert info.value.field == field


def test_the_cost_guard_helpers_estimate_as_before():
    twice = 2 * q.SyncPS.simulation_iterations  # 2.0 s per simulation at its default length
    assert comparison_cost.prediction_seconds(q.SyncPS(), W, C, "simulate", twice) == 4.0
    assert comparison_cost.prediction_seconds(q.SyncPS(), "resnet50", C, "ctmc", None) == 0.5
    comparison_cost.check_count(1000, 1000)
    comparison_cost.check_time([10.0, 20.0], ["ctmc", "simulate"], 30.0)
    with pytest.raises(
        InvalidParameterError, match="^max_seconds: got 29.0; accepted: at least the estimated 30 s"
    ):
        comparison_cost.check_time([10.0, 20.0], ["ctmc", "simulate"], 29.0)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: frames.column_rows(3), "columns"),
        (lambda: frames.column_rows({"a": [1, 2], "b": [1]}), "columns"),
        (lambda: frames.column_rows({"a": np.array(3)}), "columns['a']"),
        (lambda: frames.column_rows({1: [1]}), "columns"),
        (lambda: frames.to_frame(3, {}), "columns"),
        (lambda: frames.to_frame({"a": [1]}, None), "units"),
        (lambda: frames.html_table(3, [[1]]), "header"),
        (lambda: frames.html_table(["a"], 5), "rows"),
        (lambda: frames.html_table(["a"], [7]), "rows[0]"),
        (lambda: frames.html_table(["a"], [[1]], caption=None), "caption"),
        (lambda: frames.html_table(["a"], [[1]], note=3), "note"),
    ],
)
def test_the_table_helpers_refuse_bad_arguments_naming_them(call, field):
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert info.value.field == field


def test_the_table_helpers_give_the_cells_as_before():
    cols = {"workers": np.array([1, 2]), "method": np.array(["mva", "ctmc"], dtype=object)}
    assert frames.column_rows(cols) == [{"workers": 1, "method": "mva"}, {"workers": 2, "method": "ctmc"}]
    assert "<td>&lt;x&gt;</td>" in frames.html_table(("a",), ([("<x>")],))
