"""The busy FSDP calibration (``mode="busy-mean"``): each rank's own times, reduced to means, fitted.

The expected values are computed here by hand from the synthetic records (a
straight line through two points, a mean minus a line's value), not by the
code under test.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.harness.apriori import parse_spec
from queuesgd.harness.apriori_parallel import ShardedCalibration, calibrate_parallel
from queuesgd.harness.apriori_parallel.calibration import _fit_collectives, _spans
from queuesgd.harness.apriori_parallel.predict import fsdp_busy_work

SIZES = [4096, 1 << 20]


def _records(op: str, size: int, own: list[list[float]], lag: list[float]) -> list[dict]:
    """One record per rank: rank r starts repeat i at ``10 i + lag[r]`` and waits ``own[r][i]``."""
    return [
        {
            "op": op,
            "size": size,
            "t0": [10.0 * i + lag[r] for i in range(len(own[r]))],
            "t1": [10.0 * i + lag[r] + t for i, t in enumerate(own[r])],
        }
        for r in range(len(own))
    ]


def _two_ranks() -> list[dict]:
    # all-gathers: rank 1 starts 1 ms late each time (rank 0 waits for it), plus a 4 ms tail once
    recs = _records("allgather", 4096, [[0.0015, 0.0055, 0.0015], [0.0005, 0.0045, 0.0005]], [0.0, 0.001])
    recs += _records("allgather", 1 << 20, [[0.0110, 0.0110, 0.0150], [0.0100, 0.0100, 0.0140]], [0.0, 0.001])
    recs += _records("reducescatter", 4096, [[0.0030] * 3, [0.0020] * 3], [0.0, 0.001])
    recs += _records("reducescatter", 1 << 20, [[0.0300] * 3, [0.0290] * 3], [0.0, 0.001])
    return recs


def test_own_spans_are_each_ranks_wait_averaged_over_the_ranks():
    recs = _two_ranks()
    b, t = _spans([r for r in recs if r["op"] == "allgather"], SIZES, own=True)
    assert b == [4096.0] * 3 + [float(1 << 20)] * 3
    np.testing.assert_allclose(t, [0.001, 0.005, 0.001, 0.0105, 0.0105, 0.0145], rtol=0, atol=1e-12)
    # the idle mode's span starts at the last rank's start: rank 1's own time here, the lag not counted
    _, t_idle = _spans([r for r in recs if r["op"] == "allgather"], SIZES)
    np.testing.assert_allclose(t_idle[:3], [0.0005, 0.0045, 0.0005], rtol=0, atol=1e-12)


def test_busy_mean_fits_the_line_through_each_sizes_mean():
    fit, extra = _fit_collectives(_two_ranks(), SIZES, 2, "busy-mean")
    # means per size: 4096 B -> 7/3 ms; 1 MiB -> 35.5/3 ms; two ranks: t = alpha + S / (2 B)
    t1, t2 = 0.007 / 3, 0.0355 / 3
    slope = (t2 - t1) / ((1 << 20) / 2 - 4096 / 2)
    alpha = t1 - slope * 4096 / 2
    assert fit.alpha == pytest.approx(alpha, rel=1e-9)
    assert fit.bandwidth == pytest.approx(1.0 / slope, rel=1e-9)
    # reduce-scatter extra: the mean of the ranks' own times minus the line at the size
    for size, mean in ((4096, 0.0025), (1 << 20, 0.0295)):
        line = alpha + (size / 2) * slope
        assert extra[str(size)] == pytest.approx(max(mean - line, 0.0), abs=1e-12)


def test_idle_median_is_unchanged_by_the_busy_mode():
    fit, extra = _fit_collectives(_two_ranks(), SIZES, 2)
    # last-start spans: 4096 B -> medians 0.5 ms; 1 MiB -> 10 ms (rank 1's own times)
    slope = (0.010 - 0.0005) / ((1 << 20) / 2 - 4096 / 2)
    assert fit.alpha == pytest.approx(0.0005 - slope * 4096 / 2, rel=1e-9)
    assert fit.bandwidth == pytest.approx(1.0 / slope, rel=1e-9)
    assert set(extra) == {"4096", str(1 << 20)}


def test_fsdp_busy_work_is_the_mean_compute_over_three_collectives_per_unit():
    from types import SimpleNamespace

    from queuesgd.workload import Layer, Workload

    layers = [Layer("2.weight", 8.0, 1e-4), Layer("1.bias", 8.0, 1e-4), Layer("1.weight", 8.0, 1e-4),
              Layer("0.weight", 8.0, 1e-4)]  # fmt: skip
    inputs = {"layers": SimpleNamespace(workload=Workload(0.01, None, layers=layers)),
              "own": {"compute": {2: [0.009, 0.027]}}}  # fmt: skip
    assert fsdp_busy_work(inputs, 2) == pytest.approx(0.018 / 9)  # 3 units: 9 collectives
    with pytest.raises(InvalidParameterError, match="inputs"):
        fsdp_busy_work(inputs, 4)


def test_calibrate_parallel_refuses_a_mode_and_work_that_disagree():
    with pytest.raises(InvalidParameterError, match="busy"):
        calibrate_parallel("sharded", 2, mode="busy-mean")
    with pytest.raises(InvalidParameterError, match="busy"):
        calibrate_parallel("sharded", 2, busy=0.001)
    with pytest.raises(InvalidParameterError, match="mode"):
        calibrate_parallel("p2p", 2, mode="busy-mean", busy=0.001)
    with pytest.raises(UnknownNameError, match="mode"):
        calibrate_parallel("sharded", 2, mode="mean")


def test_a_sharded_calibration_keeps_its_mode_through_save_and_load(tmp_path):
    c = ShardedCalibration("sharded", 2, None, 1e-4, math.inf, 1.0, "none", "now",
                           reduce_extra={"4096": 1e-4}, mode="busy-mean", busy_work=0.0011)  # fmt: skip
    back = ShardedCalibration.load(c.save(tmp_path / "c.json"))
    assert (back.mode, back.busy_work, back.reduce_extra) == ("busy-mean", 0.0011, {"4096": 1e-4})
    # a file written before the mode existed reads as the idle median
    doc = json.loads((tmp_path / "c.json").read_text())
    del doc["mode"], doc["busy_work"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert ShardedCalibration.load(tmp_path / "old.json").mode == "idle-median"


def test_the_spec_names_the_mode_or_takes_the_idle_median():
    doc = {"name": "demo", "models": {"mlp": {"batch_size": 8}}, "rates": ["loopback"], "steps": 30,
           "warmup": 5, "passes": 1, "discard": {"rule": "none"},
           "lines": [{"scheme": "sharded-dp", "models": ["mlp"], "workers": [2]}]}  # fmt: skip
    assert parse_spec(doc).sharded_calibration == "idle-median"
    assert parse_spec({**doc, "sharded_calibration": "busy-mean"}).sharded_calibration == "busy-mean"
    with pytest.raises(UnknownNameError, match="spec.sharded_calibration"):
        parse_spec({**doc, "sharded_calibration": "busy"})


@pytest.mark.slow
def test_a_group_profile_takes_out_each_steps_collectives():
    """FSDP2 (reshard after forward): per unit and step two all-gathers and a reduce-scatter; mlp has 3."""
    from queuesgd.harness.apriori_parallel import profile_fsdp

    d = profile_fsdp("mlp", batch_size=8, copies=(1, 2), steps=8, warmup=2, group=True,
                     model_options={"hidden": 16})  # fmt: skip
    assert d["group"] is True
    assert d["collective_calls"][2] == [9] * 12  # 2 ranks x 6 measured steps, 3 units x 3 collectives
    assert d["collective_calls"][1] == [0] * 6  # one rank is a single-rank group: nothing to take out
    assert all(c > 0 for c in d["collectives"][2]) and all(t > 0 for t in d["compute"][2])


@pytest.mark.slow
def test_a_parallel_rows_inputs_are_measured_on_the_model_with_its_sizes():
    from queuesgd.harness.apriori_parallel.run import measure_inputs

    got = measure_inputs("sharded-dp", "mlp", batch_size=8, workers=[2], repetitions=3,
                         model_options={"hidden": 16}, fsdp_profile="group")  # fmt: skip
    # mlp(784 -> 16 -> 16 -> 10): 4 bytes per parameter
    assert got["layers"].workload.gradient_bytes == 4 * (784 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10)
    assert got["own"]["group"] is True and set(got["own"]["compute"]) == {2}
    with pytest.raises(UnknownNameError, match="fsdp_profile"):
        measure_inputs("sharded-dp", "mlp", batch_size=8, workers=[2], fsdp_profile="pairs")
