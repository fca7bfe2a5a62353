"""queuesgd.compare: measured throughput from the user's logs against the predictions.

Independent sources: throughputs and intervals computed by hand in each test
(samples over elapsed time; the batch-means and Student-t intervals written
out here with SciPy's t quantile), and predict() of the same configuration.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import queuesgd as q
from queuesgd.errors import InvalidParameterError, UnitError, UnknownNameError

#: One worker alone: 32 samples / (0.1 s + 2 x 10 MB / 125 MB/s) = 123.0769 samples/s (AsyncPS).
W = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
C = q.Cluster(1, "1Gbit/s")


def _t_half(values: np.ndarray) -> float:
    """Half-width of the 95% Student-t interval on the mean of ``values`` (written here)."""
    v = np.asarray(values, dtype=float)
    return stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)


def _write(tmp_path, text: str, name: str = "log.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- samples per second per configuration ----------------------------------------------


def test_throughput_table_mean_and_t_interval_of_the_runs(tmp_path):
    path = _write(
        tmp_path,
        "workers,samples_per_second\n1,120\n1,124\n1,122.5\n2,230\n2,238\n",
    )
    r = q.compare(path, q.AsyncPS(), W, C)
    assert len(r) == 2
    assert r["workers"].tolist() == [1, 2]
    one = r.rows()[0]
    assert one["measured"] == pytest.approx((120 + 124 + 122.5) / 3, rel=1e-12)
    half = _t_half([120, 124, 122.5])
    assert one["measured_low"] == pytest.approx(one["measured"] - half, rel=1e-12)
    assert one["measured_high"] == pytest.approx(one["measured"] + half, rel=1e-12)
    assert one["predicted"] == pytest.approx(32 / 0.26, rel=1e-12)
    assert one["error"] == pytest.approx((32 / 0.26) / one["measured"] - 1, rel=1e-12)
    assert one["error_low"] == pytest.approx((32 / 0.26) / one["measured_high"] - 1, rel=1e-12)
    assert one["error_high"] == pytest.approx((32 / 0.26) / one["measured_low"] - 1, rel=1e-12)
    assert one["count"] == 3 and one["measurement"] == "samples_per_second"
    two = r.rows()[1]
    assert two["measured"] == 234.0
    assert two["predicted"] == pytest.approx(q.predict(q.AsyncPS(), W, q.Cluster(2, "1Gbit/s")).throughput)


def test_one_run_has_no_interval():
    r = q.compare({"workers": [1], "samples_per_second": [100.0]}, q.AsyncPS(), W, C)
    row = r.rows()[0]
    assert row["measured"] == 100.0
    assert math.isnan(row["measured_low"]) and math.isnan(row["error_low"]) and math.isnan(row["error_high"])
    assert row["error"] == pytest.approx(32 / 0.26 / 100 - 1)
    assert "[" not in r.table().splitlines()[1]  # no interval printed


# ---- step timestamps ------------------------------------------------------------------------


def test_timestamps_equal_steps_by_hand(tmp_path):
    # a step every 0.2 s applying 64 samples: 320 samples/s; equal steps: a zero-width interval
    lines = ["workers,time,samples"] + [f"2,{100 + 0.2 * i:.1f},64" for i in range(201)]
    r = q.compare(_write(tmp_path, "\n".join(lines) + "\n"), q.SyncPS(), W, q.Cluster(2, "1Gbit/s"))
    row = r.rows()[0]
    assert row["measured"] == pytest.approx(320.0, rel=1e-9)
    assert row["measured_low"] == pytest.approx(320.0, rel=1e-6)
    assert row["measured_high"] == pytest.approx(320.0, rel=1e-6)
    assert row["count"] == 190  # 200 intervals, the first 5% (10) dropped as warm-up
    assert row["samples_from"] == "measured" and row["measurement"] == "time"
    assert row["where"] == "log.csv lines 2-202"


def test_timestamps_batch_means_interval_by_hand():
    # 200 steps of 64 samples in 20 batches of 10; batch j lasts 1 + 0.1 j seconds (steps equal within it)
    rng = np.random.default_rng(3)
    lengths = np.repeat((1 + 0.1 * np.arange(20)) / 10, 10)
    order = rng.permutation(201)  # rows in any order: the reader sorts the times
    times = np.concatenate([[0.0], np.cumsum(lengths)])
    log = {"workers": [2] * 201, "time": times[order].tolist(), "samples": [64] * 201}
    row = q.compare(log, q.SyncPS(), W, q.Cluster(2, "1Gbit/s"), warmup=0).rows()[0]
    batch_rates = 640 / (1 + 0.1 * np.arange(20))
    assert row["measured"] == pytest.approx(200 * 64 / lengths.sum(), rel=1e-12)
    half = _t_half(batch_rates)
    assert row["measured_high"] - row["measured"] == pytest.approx(half, rel=1e-9)
    assert row["measured"] - row["measured_low"] == pytest.approx(half, rel=1e-9)
    assert row["count"] == 200


def test_runs_restart_the_clock_and_warm_up_per_run():
    # run a: 101 times 0.1 s apart; run b: 101 times 0.3 s apart, starting later; 5 intervals dropped in each
    a = [1000 + 0.1 * i for i in range(101)]
    b = [5 + 0.3 * i for i in range(101)]
    log = {"workers": [4] * 202, "run": ["a"] * 101 + ["b"] * 101, "time": a + b, "samples": [128] * 202}
    row = q.compare(log, q.SyncPS(), W, q.Cluster(4, "1Gbit/s")).rows()[0]
    assert row["count"] == 190
    assert row["measured"] == pytest.approx(190 * 128 / (95 * 0.1 + 95 * 0.3), rel=1e-9)


def test_step_times_with_units_and_samples_from_the_model():
    # SyncPS with 2 workers applies 2 gradients of 32 samples per update: 64 samples every 250 ms
    log = {"workers": [2] * 120, "step_time": ["250ms"] * 120}
    r = q.compare(log, q.SyncPS(), W, q.Cluster(2, "1Gbit/s"), warmup=10)
    row = r.rows()[0]
    assert row["samples_from"] == "model" and row["count"] == 110
    assert row["measured"] == pytest.approx(64 / 0.25, rel=1e-12)
    p = q.predict(q.SyncPS(), W, q.Cluster(2, "1Gbit/s"))
    assert p.gradients_per_update == 2
    assert row["error"] == pytest.approx(p.throughput / 256 - 1, rel=1e-12)


# ---- configurations ---------------------------------------------------------------------------


def test_configuration_columns_scheme_parameters_and_bandwidth_units(tmp_path):
    text = (
        "# measured on our cluster\n"
        "scheme,workload,workers,bandwidth,backups,samples_per_second\n"
        "backup-workers,resnet50,8,10Gbit/s,1,900\n"
        "backup-workers,resnet50,8,10Gbit/s,2,950\n"
        "sync-ps,resnet50,8,25Gbit/s,,1000\n"
    )
    r = q.compare(_write(tmp_path, text))
    assert r["scheme"].tolist() == ["backup-workers", "backup-workers", "sync-ps"]
    assert r["backups"].tolist() == [1, 2, None]
    assert r["bandwidth"].tolist() == [1.25e9, 1.25e9, 3.125e9]
    expect = [
        q.predict(q.BackupWorkers(backups=1), "resnet50", q.Cluster(8, "10Gbit/s")).throughput,
        q.predict(q.BackupWorkers(backups=2), "resnet50", q.Cluster(8, "10Gbit/s")).throughput,
        q.predict(q.SyncPS(), "resnet50", q.Cluster(8, "25Gbit/s")).throughput,
    ]
    np.testing.assert_allclose(r["predicted"], expect, rtol=1e-12)
    np.testing.assert_allclose(r["error"], np.array(expect) / [900, 950, 1000] - 1, rtol=1e-12)


def test_batch_size_column_overrides_the_workload():
    r = q.compare({"workers": [1], "batch_size": [64], "samples_per_second": [200.0]}, q.AsyncPS(), W, C)
    assert r.rows()[0]["predicted"] == pytest.approx(64 / 0.26, rel=1e-12)


def test_scheme_by_name_with_params():
    r = q.compare(
        {"workers": [4], "samples_per_second": [300.0]},
        "static-cutoff",
        W,
        q.Cluster(4, "1Gbit/s"),
        params={"timeout": "0.5s"},
    )
    p = q.predict(q.StaticCutoff(timeout=0.5), W, q.Cluster(4, "1Gbit/s"))
    assert r.rows()[0]["predicted"] == pytest.approx(p.throughput, rel=1e-12)


def test_dataframe_and_list_of_rows_read_as_the_dict():
    pd = pytest.importorskip("pandas")
    data = {"workers": [1, 1, 2], "samples_per_second": [120.0, 124.0, 230.0]}
    a = q.compare(data, q.AsyncPS(), W, C)
    b = q.compare(pd.DataFrame(data), q.AsyncPS(), W, C)
    c = q.compare([dict(zip(data, v)) for v in zip(*data.values())], q.AsyncPS(), W, C)
    for other in (b, c):
        np.testing.assert_array_equal(other["measured"], a["measured"])
        np.testing.assert_array_equal(other["predicted"], a["predicted"])


def test_ignored_columns(tmp_path):
    text = "workers,time,loss\n" + "".join(f"1,{0.26 * i},{1 / (i + 1)}\n" for i in range(121))
    path = _write(tmp_path, text)
    with pytest.raises(InvalidParameterError, match=r"measured column 'loss'.*ignore="):
        q.compare(path, q.AsyncPS(), W, C)
    row = q.compare(path, q.AsyncPS(), W, C, ignore=["loss"]).rows()[0]
    # one update of 32 samples every 0.26 s: the model's own rate
    assert row["measured"] == pytest.approx(32 / 0.26, rel=1e-9)
    assert row["error"] == pytest.approx(0.0, abs=1e-9)


# ---- results --------------------------------------------------------------------------------------


def test_table_html_and_pandas():
    data = {"workers": [1, 1, 2, 2], "samples_per_second": [120.0, 124.0, 230.0, 238.0]}
    r = q.compare(data, q.AsyncPS(), W, C)
    lines = r.table().splitlines()
    assert lines[0].split()[:3] == ["scheme", "workload", "workers"]
    err = 32 / 0.26 / 122 - 1
    assert f"{100 * err:+.1f}%" in lines[1] and "122 [" in lines[1]
    errors = [abs(err), abs(r.rows()[1]["error"])]
    assert r.median_abs_error == pytest.approx(np.median(errors))
    assert lines[-1] == f"median |error| {np.median(errors):.1%}, max {max(errors):.1%} over 2 configurations"
    assert "<caption>measured against predicted</caption>" in r._repr_html_()
    pytest.importorskip("pandas")
    df = r.to_pandas()
    np.testing.assert_array_equal(df["measured"].to_numpy(), r["measured"])
    np.testing.assert_array_equal(df["error"].to_numpy(), r["error"])
    assert df.attrs["units"]["measured"] == "samples/s"


# ---- malformed input: one clear error each -----------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"measured: got '.*log.csv'; accepted: a CSV file with a header row"),
        ("# only a comment\n\n", r"accepted: a CSV file with a header row"),
        ("workers,samples_per_second\n", r"accepted: a CSV file with data rows below its header"),
        ("workers,samples_per_second\n1,100\n2\n", r"log.csv line 3: got '1 cells'; accepted: 2 cells"),
        ("workers,samples_per_second\n1,fast\n", r"log.csv line 2, column samples_per_second: got 'fast'"),
        (
            "workers,samples_per_second\n1,-5\n",
            r"samples_per_second: got '-5'; accepted: a number > 0",
        ),
        (
            "workers,samples_per_second\n0,100\n",
            r"log.csv line 2, column workers: got 0; accepted: an integer",
        ),
        ("workers,samples_per_second\n2.5,100\n", r"column workers: got 2.5; accepted: an integer >= 1"),
        (
            "workers,samples_per_second\n,100\n",
            r"workers: got None; accepted: a workers argument .*log.csv line 2",
        ),
        (
            "workers,samples_per_second\n1,\n",
            r"got 'no measurement'; accepted: at least one row with a samples_per",
        ),
        (
            "workers,workers,time\n1,1,0\n",
            r"measured columns: got 'workers'; accepted: each column named once",
        ),
        (
            "workers,throughput\n1,100\n",
            r"accepted: exactly one of 'samples_per_second', 'time', 'step_time'",
        ),
        ("workers,time,step_time\n1,0,1\n", r"accepted: exactly one of"),
        ("nodes,samples_per_second\n1,100\n", r"or a 'workers' column"),
        ("workers,samples_per_second,samples\n1,100,32\n", r"a 'samples' column only with 'time'"),
        ("workers,time\n1,0\n1,nan\n", r"line 3, column time: got 'nan'; accepted: a time in seconds"),
        ("workers,time\n1,0\n", r"at least two timestamps per run"),
        (
            "workers,bandwidth,samples_per_second\n1,10 furlongs,100\n",
            r"line 2, column bandwidth: got '10 furlong",
        ),
        ("workers,step_time\n1,0\n", r"column step_time: got '0'; accepted: a duration > 0"),
        (
            "workers,time\n" + "".join(f"1,{i}\n" for i in range(51)),
            r"measured updates after the warm-up \(log.csv lines 2-52\): got 48; accepted: an integer >= 100",
        ),
    ],
)
def test_malformed_csv_is_one_clear_error(tmp_path, text, message):
    with pytest.raises(InvalidParameterError, match=message):
        q.compare(_write(tmp_path, text), q.AsyncPS(), W, C)


def test_unreadable_files(tmp_path):
    with pytest.raises(InvalidParameterError, match=r"nope.csv'; accepted: a regular file .*\(No such"):
        q.compare(tmp_path / "nope.csv", q.AsyncPS(), W, C)
    with pytest.raises(InvalidParameterError, match=r"accepted: a regular file .*\(it is a directory\)"):
        q.compare(tmp_path, q.AsyncPS(), W, C)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"workers,time\n\xff\xfe\x00\n")
    with pytest.raises(InvalidParameterError, match=r"accepted: UTF-8 text \(byte 13 is not UTF-8\)"):
        q.compare(binary, q.AsyncPS(), W, C)


def test_missing_or_doubled_configuration():
    data = {"workers": [1], "samples_per_second": [100.0]}
    with pytest.raises(
        InvalidParameterError, match=r"scheme: got None; accepted: a scheme argument .*or a 'scheme' column"
    ):
        q.compare(data, None, W, C)
    with pytest.raises(InvalidParameterError, match=r"workload: got None; accepted: a workload argument"):
        q.compare(data, q.AsyncPS(), None, C)
    with pytest.raises(
        InvalidParameterError, match=r"bandwidth: got None; accepted: a 'bandwidth' column or a cluster"
    ):
        q.compare(data, q.AsyncPS(), W)
    both = {"scheme": ["sync-ps"], **data}
    with pytest.raises(
        InvalidParameterError, match=r"accepted: None when the measurements have a 'scheme' column"
    ):
        q.compare(both, q.AsyncPS(), W, C)
    with pytest.raises(UnknownNameError, match=r"scheme: got 'sync-pss'"):
        q.compare({"scheme": ["sync-pss"], **data}, None, W, C)
    with pytest.raises(InvalidParameterError, match=r"measured column 'backups'.*parameter of AsyncPS"):
        q.compare({"backups": [1], **data}, q.AsyncPS(), W, C)


def test_other_bad_arguments():
    data = {"workers": [1] * 200, "step_time": [0.25] * 200}
    with pytest.raises(InvalidParameterError, match=r"warmup: got -1; accepted: an integer >= 0"):
        q.compare(data, q.AsyncPS(), W, C, warmup=-1)
    with pytest.raises(
        InvalidParameterError, match=r"warmup: got 200; accepted: fewer updates than a run has"
    ):
        q.compare(data, q.AsyncPS(), W, C, warmup=200)
    with pytest.raises(InvalidParameterError, match=r"measured: got 'int'; accepted: a CSV file path"):
        q.compare(5, q.AsyncPS(), W, C)
    with pytest.raises(InvalidParameterError, match=r"measured: got 'workers: 2, step_time: 1'"):
        q.compare({"workers": [1, 1], "step_time": [1.0]}, q.AsyncPS(), W, C)
    with pytest.raises(UnitError, match=r"column latency"):
        q.compare({"workers": [1], "latency": ["5 parsecs"], "samples_per_second": [1.0]}, q.AsyncPS(), W, C)


@pytest.mark.parametrize("cell", ["1ms", 0.001, "0.001"])
def test_a_latency_column_sets_the_clusters_latency(cell):
    """A latency cell in seconds or with a unit is the configuration's latency: the prediction equals
    predict's at that latency (the cell was once passed to the parser with field and value swapped)."""
    cmp = q.compare({"workers": [2], "latency": [cell], "samples_per_second": [1.0]}, q.AsyncPS(), W, C)
    expected = q.predict(q.AsyncPS(), W, q.Cluster(2, "1Gbit/s", latency=0.001)).throughput
    assert cmp.rows()[0]["predicted"] == pytest.approx(expected, rel=1e-12)
