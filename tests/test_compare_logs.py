"""``compare`` on logs as they come, hardened (issue 23): bounded reads, checked arguments, a cost guard,
notes for implausible input, and the real formats (a Lightning ``metrics.csv``, a torchrun log).

Independent sources: the expected values are computed here from the input itself (samples over
elapsed time by hand, the step times parsed with ``str.split``), from ``predict`` of the same
configuration, and from ``predict``'s own CLI error for the same flag.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from compare_files import run_cli, write_runs

import queuesgd as q
from queuesgd import comparison, measured
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError, UnknownNameError

DATA = Path(__file__).resolve().parent / "data" / "compare"
W = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
C = q.Cluster(1, "1Gbit/s")
FLAGS = ["--scheme", "ring-allreduce", "--workload", "resnet50", "--bandwidth", "10Gbit/s"]


def _cli(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "queuesgd", *args], capture_output=True, text=True, input=stdin, timeout=120
    )


# ---- bounded reads ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, cell, column",
    [
        ("workers,samples_per_second", "8,{big}", "samples_per_second"),
        ("workers,samples_per_second", "{big},100", "workers"),
        ("workers,bandwidth,samples_per_second", "8,{big},100", "bandwidth"),
        ("workers,time", "8,{big}", "time"),
        ("workers,step_time", "8,{big}", "step_time"),
        ("workers,backups,step_time", "8,{big},0.1", "backups"),
        ("workers,run,step_time", "8,{big},0.1", "run"),
    ],
)
def test_a_5000_digit_cell_is_one_error_naming_line_and_column(tmp_path, header, cell, column):
    path = write_runs(tmp_path, f"{header}\n{cell.format(big='9' * 5000)}\n")
    with pytest.raises(InvalidParameterError) as err:
        q.compare(path, q.BackupWorkers(backups=1), W, C)
    text = str(err.value)
    assert text.startswith(
        f"log.csv line 2, column {column}: got '99999999999999999999... (5,000 characters)'"
    )
    assert len(text) < 300


def test_huge_numbers_from_python_are_errors_not_overflow():
    with pytest.raises(InvalidParameterError, match=r"measured row 0, column samples_per_second"):
        q.compare({"workers": [1], "samples_per_second": [10**400]}, q.AsyncPS(), W, C)
    with pytest.raises(InvalidParameterError, match=r"measured row 0, column workers: got 'an integer of"):
        q.compare({"workers": [10**400], "samples_per_second": [1.0]}, q.AsyncPS(), W, C)
    with pytest.raises(
        InvalidParameterError, match=r"row 0, column ps_shards: got 1025; accepted: .* to 1,024"
    ):
        q.compare({"workers": [1], "ps_shards": [1025], "samples_per_second": [1.0]}, q.SyncPS(), W, C)


@pytest.mark.parametrize("path, kind", [("/dev/zero", "character device"), ("/dev/null", "character device")])
def test_devices_are_refused_before_reading(path, kind):
    start = time.monotonic()
    with pytest.raises(InvalidParameterError, match=rf"accepted: a regular file .*\(it is a {kind}\)"):
        q.compare(path, q.AsyncPS(), W, C)
    assert time.monotonic() - start < 5


def test_a_fifo_and_a_directory_are_refused_without_waiting(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    proc = _cli(["compare", str(fifo), *FLAGS])  # no writer: reading would block forever
    assert proc.returncode == 2 and "(it is a FIFO)" in proc.stderr
    with pytest.raises(InvalidParameterError, match=r"\(it is a directory\)"):
        q.compare(tmp_path, q.AsyncPS(), W, C)


def test_size_and_row_bounds(tmp_path, monkeypatch):
    text = "workers,samples_per_second\n" + "1,100\n" * 50
    path = write_runs(tmp_path, text)
    monkeypatch.setattr(measured, "MAX_BYTES", len(text.encode()) - 1)
    with pytest.raises(InvalidParameterError, match=r"a regular file of at most .* \(it is larger\)"):
        q.compare(path, q.AsyncPS(), W, C)
    monkeypatch.setattr(measured, "MAX_BYTES", 10**6)
    monkeypatch.setattr(measured, "MAX_ROWS", 49)
    with pytest.raises(InvalidParameterError, match=r"at most 49 data rows"):
        q.compare(path, q.AsyncPS(), W, C)
    with pytest.raises(InvalidParameterError, match=r"at most 49 rows"):
        q.compare({"workers": [1] * 50, "samples_per_second": [1.0] * 50}, q.AsyncPS(), W, C)


def test_standard_input_is_bounded_too(monkeypatch):
    import io

    monkeypatch.setattr(measured, "MAX_BYTES", 20)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"workers,samples_per_second\n1,100\n")))
    with pytest.raises(InvalidParameterError, match=r"measured: got '<stdin>'; accepted: at most 20 bytes"):
        q.compare("-", q.AsyncPS(), W, C)


# ---- the cost guard -----------------------------------------------------------------------


def test_20000_configurations_are_refused_before_any_prediction(tmp_path, monkeypatch):
    path = write_runs(tmp_path, "workers,step_time\n" + "".join(f"{n},0.25\n" for n in range(1, 20_001)))

    def no_prediction(*args, **kwargs):
        raise AssertionError("predicted before the guard")

    monkeypatch.setattr(comparison, "predict", no_prediction)
    start = time.monotonic()
    with pytest.raises(InvalidParameterError, match=r"max_configurations: got 1000; .*20,000 configurations"):
        q.compare(path, q.AsyncPS(), W, C)
    assert time.monotonic() - start < 15
    # more configurations allowed: the time estimate (mva, growing with the workers) still refuses it
    with pytest.raises(
        InvalidParameterError, match=r"max_seconds: got 30.0; .*20,000 predictions \(method mva"
    ):
        q.compare(path, q.AsyncPS(), W, C, max_configurations=20_000)
    err = _cli(
        ["compare", str(path), "--scheme", "async-ps", "--workload", "resnet50", "--bandwidth", "1Gbit/s"]
    )
    assert err.returncode == 2 and "--max-configurations" in err.stderr


def test_the_estimate_is_configurations_times_the_method_cost(monkeypatch):
    sync = q.SyncPS()
    c4 = q.Cluster(4, "1Gbit/s")
    assert comparison.prediction_seconds(sync, W, c4, "closed_form", None) == 0.001
    assert comparison.prediction_seconds(sync, W, c4, "auto", None) == 0.001  # auto: closed_form here
    assert comparison.prediction_seconds(q.AsyncPS(), W, c4, "mva", None) == pytest.approx(0.003 + 2e-6 * 16)
    half = q.SyncPS.simulation_iterations // 2
    assert comparison.prediction_seconds(sync, W, c4, "simulate", half) == pytest.approx(1.0)
    # 20 configurations simulated at 2 s each: 40 s > 30 s, refused before the first simulation
    monkeypatch.setattr(comparison, "predict", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    log = {"workers": list(range(1, 21)), "samples_per_second": [1.0] * 20}
    with pytest.raises(InvalidParameterError, match=r"estimated 40 s of 20 predictions \(method simulate"):
        q.compare(log, sync, W, C, method="simulate")
    with pytest.raises(InvalidParameterError, match=r"max_seconds: got 0"):
        q.compare(log, sync, W, C, max_seconds=0)


# ---- every argument checked at the edge ------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--ps-shards", "0"),
        ("--ps-shards", "-1"),
        ("--ps-shards", "1.5"),
        ("--bandwidth", "0"),
        ("--latency", "-1ms"),
    ],
)
def test_cluster_flags_are_refused_as_predict_refuses_them(tmp_path, capsys, flag, value):
    path = write_runs(tmp_path, "workers,samples_per_second\n4,100\n")
    extra = [] if flag == "--bandwidth" else ["--bandwidth", "10Gbit/s"]
    mine = run_cli(
        ["compare", str(path), "--scheme", "sync-ps", "--workload", "resnet50", *extra, flag, value], capsys
    )
    theirs = run_cli(["predict", "--scheme", "sync-ps", *extra, flag, value], capsys)
    assert mine[0] == theirs[0] == 2
    assert mine[2] == theirs[2] and mine[2].startswith("queuesgd: error: ") and mine[2].count("\n") == 1


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--workers", "0"], "--workers: got '0'"),
        (["--workers", "2,4"], "--workers: got '2,4'; accepted: one value"),
        (["--batch-size", "-3"], "--batch-size: got '-3'"),
        (["--bandwidth", "1,10Gbit/s"], "--bandwidth: got '1,10Gbit/s'; accepted: one value"),
        (["--column", "time"], "--column: got 'time'; accepted: NAME=COLUMN"),
        (["--column", "time=a", "--column", "time=b"], "each NAME once"),
        (["--time-unit", "min"], "--time-unit: got 'min'"),
        (["--max-configurations", "0"], "--max-configurations: got 0"),
        (["--seed", "-1"], "--seed: got -1; accepted: an integer >= 0"),
        (["--iterations", "0"], "--iterations: got 0"),
        (["--method", "nope"], "--method: got 'nope'"),
        (["--log-pattern", "(unclosed"], "--log-pattern: got '(unclosed'"),
        (["--log-pattern", "(?P<loss>\\d+)"], "--log-pattern: got"),
        (["--warmup", "-1"], "--warmup: got -1"),
        (["--max-seconds", "0"], "--max-seconds: got 0"),
        (["--ignore", "nope"], "--ignore: got"),
    ],
)
def test_cli_flags_are_checked(tmp_path, capsys, flags, message):
    path = write_runs(tmp_path, "workers,samples_per_second\n4,100\n")
    args = ["compare", str(path), "--scheme", "sync-ps", "--workload", "resnet50", *flags]
    if "--bandwidth" not in flags:
        args += ["--bandwidth", "10Gbit/s"]
    if "--workers" in flags:
        args += ["--ignore", "workers"]
    status, out, err = run_cli(args, capsys)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith("queuesgd: error: --"), err  # every one names its flag, none a Python name


def test_arguments_are_checked_before_the_log_is_read(tmp_path):
    missing = tmp_path / "not-there.csv"  # reading it would be a different error
    for kwargs, message in [
        ({"method": "nope"}, r"method: got 'nope'"),
        ({"rng": -1}, r"rng: got -1"),
        ({"iterations": 0}, r"iterations: got 0"),
        ({"warmup": -1}, r"warmup: got -1"),
        ({"workers": 0}, r"workers: got 0"),
        ({"batch_size": 2.5}, r"batch_size: got 2.5"),
        ({"max_configurations": 0}, r"max_configurations: got 0"),
        ({"params": [1]}, r"params: got \[1\]"),
        ({"time_unit": "h"}, r"time_unit: got 'h'"),
        ({"columns": {"time": ""}}, r"columns\['time'\]: got ''"),
    ]:
        with pytest.raises(InvalidParameterError, match=message):
            q.compare(missing, q.AsyncPS(), W, C, **kwargs)
    with pytest.raises(UnknownNameError, match=r"workload: got 'resnet5'|got 'resnet5'"):
        q.compare(missing, q.AsyncPS(), "resnet5", C)


# ---- --ignore is applied, --workers and --batch-size fill in ------------------------------------


def test_ignore_workers_drops_the_column(tmp_path, capsys):
    path = write_runs(tmp_path, "workers,samples_per_second\n8,1000\n8,1100\n")
    base = ["compare", str(path), "--scheme", "sync-ps", "--workload", "resnet50", "--bandwidth", "10Gbit/s"]
    assert main([*base, "--ignore", "workers", "--json"]) == 2
    assert "workers: got None; accepted: a workers argument (CLI: --workers)" in capsys.readouterr().err
    assert main([*base, "--ignore", "workers", "--workers", "4", "--json"]) == 0
    import json

    (row,) = json.loads(capsys.readouterr().out)
    assert row["workers"] == 4  # not the file's 8
    assert row["predicted"] == pytest.approx(
        q.predict(q.SyncPS(), "resnet50", q.Cluster(4, "10Gbit/s")).throughput
    )
    assert main([*base, "--workers", "4"]) == 2  # a column and the flag: which one? refused
    assert "None when the measurements have a 'workers' column" in capsys.readouterr().err
    assert main([*base, "--ignore", "wrokers"]) == 2
    assert "ignore: got 'wrokers'; accepted: a column of runs.csv" in capsys.readouterr().err.replace(
        "log.csv", "runs.csv"
    )


def test_batch_size_flag_sets_the_workload_batch():
    log = {"samples_per_second": [100.0]}
    r = q.compare(log, q.AsyncPS(), W, C, workers=1, batch_size=64)
    assert r.rows()[0]["batch_size"] == 64
    # 64 samples / (0.1 s + 2 x 0.08 s)
    assert r.rows()[0]["predicted"] == pytest.approx(64 / 0.26, rel=1e-12)


# ---- plausibility: notes, and percentages that stay short --------------------------------------


def _times(origin: float, step: float, n: int = 201) -> str:
    return "workers,time,samples\n" + "".join(f"4,{origin + step * i!r},128\n" for i in range(n))


def test_unix_milliseconds_and_seconds_are_recognized_and_said(tmp_path):
    ms = q.compare(write_runs(tmp_path, _times(1714550400000, 250)), q.SyncPS(), W, C)
    assert ms.rows()[0]["measured"] == pytest.approx(128 / 0.25, rel=1e-9)  # not 0.512
    assert any("Unix milliseconds" in n and "2024-05-01 08:00:00 UTC" in n for n in ms.notes)
    s = q.compare(write_runs(tmp_path, _times(1714550400, 0.25)), q.SyncPS(), W, C)
    assert s.rows()[0]["measured"] == pytest.approx(512, rel=1e-6)
    assert any("Unix seconds" in n for n in s.notes)
    # told the times are seconds: 0.512 samples/s, and a note that it is 1000x off the model
    told = q.compare(write_runs(tmp_path, _times(1714550400000, 250)), q.SyncPS(), W, C, time_unit="s")
    assert told.rows()[0]["measured"] == pytest.approx(0.512, rel=1e-9)
    assert not any("Unix" in n for n in told.notes)
    ratio = told.rows()[0]["predicted"] / 0.512
    assert any(f"differ by {ratio:.3g}x" in n for n in told.notes)
    rel_ms = q.compare(write_runs(tmp_path, _times(0, 250)), q.SyncPS(), W, C, time_unit="ms")
    assert rel_ms.rows()[0]["measured"] == pytest.approx(512, rel=1e-9)


@pytest.mark.parametrize("step", ["1e-300", "1e300"])
def test_tiny_or_huge_step_times_print_short_percentages_with_notes(tmp_path, step):
    path = write_runs(tmp_path, "workers,step_time,samples\n" + f"4,{step},128\n" * 201)
    r = q.compare(path, q.SyncPS(), W, C)
    assert any("implausible for a training step" in n for n in r.notes)
    assert any("differ by" in n for n in r.notes)
    table = r.table()
    assert max(len(cell) for line in table.splitlines() for cell in line.split()) < 20, table
    assert "note: " in table


def test_percent_formats():
    assert comparison.percent(0.0123) == "+1.2%"
    assert comparison.percent(-0.99999) == "-100.0%"
    assert comparison.percent(1e300) == "+1e+302%"
    assert comparison.percent(float("inf")) == "+inf%"
    assert comparison.percent(99.994) == "+9999.4%" and comparison.percent(100.0) == "+1e+04%"


# ---- logs as they come ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\ufeffworkers,samples_per_second\n1,120\n1,124\n",
        "workers;samples_per_second\n1;120\n1;124\n",
        "workers\tsamples_per_second\n1\t120\n1\t124\n",
        "# a comment\r\nworkers;samples_per_second\r\n1;120\r\n1;124\r\n",
    ],
)
def test_bom_and_separators(tmp_path, text):
    r = q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C)
    assert r.rows()[0]["measured"] == 122.0 and r.rows()[0]["count"] == 2


def test_standard_input():
    proc = _cli(
        [
            "compare",
            "-",
            "--scheme",
            "async-ps",
            "--workload",
            "resnet50",
            "--bandwidth",
            "1Gbit/s",
            "--json",
        ],
        stdin="\ufeffworkers;samples_per_second\n1;120\n1;124\n",
    )
    assert proc.returncode == 0, proc.stderr
    import json

    (row,) = json.loads(proc.stdout)
    assert row["measured"] == 122.0 and row["where"] == "<stdin> lines 2-3"


def test_column_mapping(tmp_path):
    text = "nodes,train/throughput,loss\n2,230,1\n2,238,1\n"
    mapped = {"workers": "nodes", "samples_per_second": "train/throughput"}
    r = q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C, columns=mapped, ignore=["loss"])
    assert r.rows()[0]["workers"] == 2 and r.rows()[0]["measured"] == 234.0
    with pytest.raises(
        InvalidParameterError, match=r"columns\['time'\]: got 'train/time'; accepted: a column of"
    ):
        q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C, columns={"time": "train/time"})
    both = "workers,samples_per_second,thr\n2,1,2\n"
    with pytest.raises(InvalidParameterError, match=r"has a column 'samples_per_second': ignore it"):
        q.compare(write_runs(tmp_path, both), q.AsyncPS(), W, C, columns={"samples_per_second": "thr"})


def test_lightning_metrics_csv():
    path = DATA / "lightning_metrics.csv"
    rows = [line.split(",") for line in path.read_text().splitlines()]
    header, body = rows[0], rows[1:]
    train = [r for r in body if r[header.index("train/time")]]
    r = q.compare(
        path,
        "ring-allreduce",
        "resnet50",
        q.Cluster(1, "10Gbit/s"),
        workers=4,
        batch_size=32,
        columns={"time": "train/time"},
        ignore=["epoch", "train/samples_per_sec", "train_loss", "val_loss"],
    )
    row = r.rows()[0]
    # by hand from the file: intervals of (step difference) x 4 x 32 samples over the time difference,
    # after dropping the first 5% of the intervals
    t = np.array([float(x[header.index("train/time")]) for x in train])
    s = np.array([int(x[header.index("step")]) for x in train])
    cut = int(0.05 * (len(t) - 1))
    samples = np.diff(s)[cut:] * 4 * 32
    assert row["measured"] == pytest.approx(samples.sum() / np.diff(t)[cut:].sum(), rel=1e-12)
    assert row["count"] == np.diff(s)[cut:].sum()
    assert row["predicted"] == pytest.approx(
        q.predict(q.RingAllReduce(), "resnet50", q.Cluster(4, "10Gbit/s")).throughput, rel=1e-12
    )
    skipped = [n for n, x in enumerate(body, start=2) if not x[header.index("train/time")]]
    assert f"lightning_metrics.csv: {len(skipped)} rows with an empty time cell skipped (lines " in r.notes[0]
    assert ", ".join(map(str, skipped)) in r.notes[0]


def test_torchrun_log():
    path = DATA / "torchrun_ddp.log"
    rank0 = [line for line in path.read_text().splitlines() if line.startswith("[rank0]: step ")]
    ms = np.array([float(line.split("step_time ")[1].removesuffix("ms")) for line in rank0])
    r = q.compare(
        path,
        q.RingAllReduce(),
        "resnet50",
        q.Cluster(1, "10Gbit/s"),
        workers=2,
        batch_size=32,
        log_pattern="step-time",
    )
    row = r.rows()[0]
    kept = ms[int(0.05 * ms.size) :] / 1000
    assert row["measured"] == pytest.approx(kept.size * 2 * 32 / kept.sum(), rel=1e-12)
    assert row["count"] == kept.size == 114
    assert any("the lines of rank 0 only (120 of 240 matched lines" in n for n in r.notes)
    proc = _cli(
        ["compare", str(path), "--log-pattern", "step-time", *FLAGS, "--workers", "2", "--batch-size", "32"]
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].split()[7] == f"{row['measured']:.4g}"


def test_log_pattern_errors(tmp_path):
    log = write_runs(tmp_path, "nothing to see\n", "train.log")
    with pytest.raises(InvalidParameterError, match=r"none of 1 lines did"):
        q.compare(log, q.AsyncPS(), W, C, workers=1, log_pattern="step-time")
    with pytest.raises(InvalidParameterError, match=r"log_pattern: .*None unless measured is a text file"):
        q.compare({"workers": [1], "step_time": [1.0]}, q.AsyncPS(), W, C, log_pattern="step-time")
    custom = write_runs(tmp_path, "".join(f"it {i} took {0.25}s\n" for i in range(120)), "t.log")
    r = q.compare(custom, q.AsyncPS(), W, C, workers=1, log_pattern=r"took (?P<step_time>[0-9.]+s)")
    assert r.rows()[0]["measured"] == pytest.approx(32 / 0.25, rel=1e-12)


def test_step_column_counts_the_updates_between_logged_rows():
    # a row every 10 updates of 0.25 s each, 64 samples per update: 256 samples/s
    log = {"workers": [2] * 121, "time": [2.5 * i for i in range(121)], "step": [10 * i for i in range(121)]}
    r = q.compare({**log, "samples": [64] * 121}, q.SyncPS(), W, C, warmup=0)
    assert r.rows()[0]["measured"] == pytest.approx(256.0, rel=1e-12)
    assert r.rows()[0]["count"] == 1200
    back = {**log, "step": [10 * i for i in range(120)] + [5]}
    with pytest.raises(InvalidParameterError, match=r"steps that increase with the time"):
        q.compare(back, q.SyncPS(), W, C)


@pytest.mark.parametrize(
    "line, step, seconds",
    [
        ("[rank0]: step 12/120 | loss 6.1530 | step_time 252.0ms", 12, 0.252),
        ("step 12 loss=6.15 time=0.252s loss 3", 12, 0.252),
        ("[default1]:step: 12, dt: 252 ms", 12, 0.252),
        ("step=7 step time: 1.5e-1", 7, 0.15),
        ("step 2 time 2.5 loss 3", 2, 2.5),
        ("step 2 time 2 min", None, None),  # minutes are not read as seconds: the line is skipped
        ("step 2 time 2h", None, None),
    ],
)
def test_the_step_time_pattern(line, step, seconds):
    import re

    from queuesgd import units

    m = re.compile(measured.LOG_PATTERNS["step-time"]).search(line)
    if step is None:
        assert m is None
        return
    assert int(m["step"]) == step
    assert units.parse_seconds(m["step_time"], "t") == pytest.approx(seconds, rel=1e-12)


def test_the_interval_of_several_runs_does_not_depend_on_their_order():
    # audit 2026-11-28: the runs' kept intervals were joined in first-seen order and cut into 20 batches
    # across them, so listing two runs the other way round moved the interval ([443.07, 541.34] and
    # [443.88, 540.52]). Each run is now cut on its own, 20 batches shared by length: the hand count below
    # (run a: 143 intervals after the 5% warm-up, run b: 219; 20 x 143/362 = 7.90 and 12.10 -> 8 and 12)
    from scipy import stats

    rng = np.random.default_rng(5)
    w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    runs = {}
    for run, mean, n in (("a", 0.2, 150), ("b", 0.3, 230)):
        runs[run] = np.concatenate([[0.0], np.cumsum(rng.uniform(mean - 0.02, mean + 0.02, n))])
    rows = {}
    for r, t in runs.items():
        rows[r] = [{"workers": 4, "run": r, "time": x, "samples": 128} for x in t.tolist()]
    one = q.compare(rows["a"] + rows["b"], q.SyncPS(), w, q.Cluster(4, "1Gbit/s")).rows()[0]
    two = q.compare(rows["b"] + rows["a"], q.SyncPS(), w, q.Cluster(4, "1Gbit/s")).rows()[0]
    assert (one["measured_low"], one["measured_high"]) == (two["measured_low"], two["measured_high"])
    ratios = []
    for run, k in (("a", 8), ("b", 12)):
        d = np.diff(runs[run])
        d = d[int(0.05 * d.size) :]  # the 5% warm-up of each run
        size = d.size // k
        ratios += list(128 * size / d[: k * size].reshape(k, size).sum(axis=1))
    half = stats.t.ppf(0.975, len(ratios) - 1) * np.std(ratios, ddof=1) / np.sqrt(len(ratios))
    assert one["measured_high"] - one["measured_low"] == pytest.approx(2 * half, rel=1e-12)
