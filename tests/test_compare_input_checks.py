"""``compare``'s input checks (the audit of the measured-run reading): no silent misreading, no hang.

Independent sources: every expected number is computed here from the rows the test writes (samples
over elapsed time, means by hand, the Student-t quantile from scipy); refusals are matched by the
field they must name. Whatever could hang on a regression runs in a child process with a timeout
that kills the child's whole process group.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from compare_files import run_cli, write_runs
from process_groups import run_group
from scipy import stats

import queuesgd as q
from queuesgd import measured
from queuesgd.errors import InvalidParameterError

W = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
C = q.Cluster(1, "1Gbit/s")
FLAGS = ["--scheme", "sync-ps", "--workload", "resnet50", "--bandwidth", "10Gbit/s"]
STEP_TIME = re.compile(measured.LOG_PATTERNS["step-time"])


def _refused(args: list[str], capsys: pytest.CaptureFixture, message: str) -> None:
    """The CLI refuses ``args`` with one line that matches ``message``, status 2."""
    status, out, err = run_cli(args, capsys)
    assert status == 2 and out == "", (status, out, err)
    assert err.count("\n") == 1 and err.startswith("queuesgd: error: "), err
    assert re.search(message, err), err


def _bounded(code: str, timeout: float) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python process, bounded (process_groups.run_group)."""
    return run_group([sys.executable, "-c", textwrap.dedent(code)], timeout)


# ---- 1. a step column filled on every row or on none ---------------------------------------------


def _every_ten_steps(blank: int | None = None) -> str:
    rows = [f"4,{'' if i == blank else i},{i * 0.25!r},128\n" for i in range(0, 2011, 10)]
    return "workers,step,time,samples\n" + "".join(rows)


def test_a_partly_filled_step_column_is_refused_naming_the_line(tmp_path, capsys):
    full = q.compare(write_runs(tmp_path, _every_ten_steps()), q.SyncPS(), W, C)
    # by hand: 10 updates of 128 samples every 2.5 s
    assert full.rows()[0]["measured"] == pytest.approx(10 * 128 / 2.5, rel=1e-12)
    gap = write_runs(tmp_path, _every_ten_steps(blank=1000))  # step 1000 is data row 101: line 102
    with pytest.raises(InvalidParameterError, match=r"log\.csv line 102, column step: got 'an empty cell'"):
        q.compare(gap, q.SyncPS(), W, C)
    _refused(["compare", str(gap), *FLAGS], capsys, r"line 102, column step: .*a step on every row")


# ---- 2. samples_per_second: the rows of one run are one run ---------------------------------------


def test_throughput_rows_of_one_run_label_are_one_run(tmp_path):
    rows = [("a", 1, 100.0), ("a", 2, 100.0), ("a", 3, 100.0), ("b", 1, 200.0)]
    text = "run,step,workers,samples_per_second\n" + "".join(f"{r},{s},2,{v}\n" for r, s, v in rows)
    row = q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C).rows()[0]
    runs = [np.mean([v for r, _, v in rows if r == label]) for label in ("a", "b")]
    half = stats.t.ppf(0.975, 1) * np.std(runs, ddof=1) / np.sqrt(2)
    assert row["measured"] == pytest.approx(np.mean(runs), rel=1e-12) == 150.0
    assert row["count"] == 2
    assert row["measured_high"] == pytest.approx(np.mean(runs) + half, rel=1e-9)


def test_throughput_rows_with_steps_and_no_run_column_are_one_run(tmp_path):
    values = [100.0, 110.0, 130.0]
    text = "step,workers,samples_per_second\n" + "".join(f"{10 * i},2,{v}\n" for i, v in enumerate(values))
    r = q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C)
    row = r.rows()[0]
    assert row["measured"] == pytest.approx(sum(values) / 3, rel=1e-12)
    assert row["count"] == 1 and np.isnan(row["measured_low"])  # one run: no interval across runs
    assert any("logged steps of one run" in n for n in r.notes)


def test_a_partly_filled_run_column_with_throughputs_is_refused(tmp_path):
    text = "run,workers,samples_per_second\na,2,100\n,2,300\n"
    with pytest.raises(InvalidParameterError, match=r"log\.csv line 3, column run: got 'an empty cell'"):
        q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C)


# ---- 3. the built-in step-time pattern ------------------------------------------------------------


@pytest.mark.parametrize(
    "line, step_time",
    [
        ("step 3 | elapsed time 30.5s | step_time 250ms", "250ms"),  # the exact key, not the elapsed time
        ("step 3 | time 12:30:01 | step_time 250ms", "250ms"),  # not the clock's hours
        ("step 3 | data time 0.01s | dt: 0.25", "0.25"),  # a time after another word is not the step's
        ("step 3 | time 12:30:01", None),
        ("step 3 | time 2024-01-01", None),
        ("step 3 | dt 250 it/s", None),  # a rate, not 250 s
        ("step 3 | elapsed time 30.5s", None),
        ("step 3 | dt 1,5 s", None),  # a decimal comma is not read as 1
    ],
)
def test_the_step_time_pattern_reads_only_a_step_time(line, step_time):
    m = STEP_TIME.search(line)
    assert (m and m["step_time"]) == step_time


def test_a_thousands_separator_is_refused_not_read_as_1(tmp_path, capsys):
    text = "".join(f"[rank0]: step {i}/120 | loss 2.3 | step_time 1,250ms\n" for i in range(1, 121))
    log = write_runs(tmp_path, text, "train.log")
    with pytest.raises(InvalidParameterError, match=r"train\.log line 1, column step_time: got '1,250ms'"):
        q.compare(log, q.SyncPS(), W, C, workers=2, log_pattern="step-time")
    _refused(
        ["compare", str(log), "--log-pattern", "step-time", "--workers", "2", *FLAGS],
        capsys,
        r"no thousands separators",
    )


def test_a_clock_beside_the_step_time_gives_the_step_time(tmp_path):
    text = "".join(f"step {i} | time 12:{i % 60:02d}:01 | step_time 250ms\n" for i in range(1, 121))
    r = q.compare(write_runs(tmp_path, text, "t.log"), q.SyncPS(), W, C, workers=2, log_pattern="step-time")
    kept = 120 - int(0.05 * 120)
    assert r.rows()[0]["count"] == kept
    assert r.rows()[0]["measured"] == pytest.approx(2 * 32 / 0.25, rel=1e-12)  # SyncPS: 2 x batch 32


# ---- 4. warmup counts updates ----------------------------------------------------------------------


def test_warmup_counts_updates_with_a_step_column():
    # a row every 10 steps; the first interval is slow (5 s), the others 2.5 s
    times = [0.0] + [5.0 + 2.5 * i for i in range(120)]
    log = {"workers": [2] * 121, "time": times, "step": [10 * i for i in range(121)], "samples": [64] * 121}
    row = q.compare(log, q.SyncPS(), W, C, warmup=5).rows()[0]
    # 5 updates lie in the first interval: it is dropped whole, and nothing else
    intervals = np.diff(times)[1:]
    assert row["count"] == 10 * intervals.size == 1190
    assert row["measured"] == pytest.approx(10 * 64 * intervals.size / intervals.sum(), rel=1e-12)
    assert q.compare(log, q.SyncPS(), W, C, warmup=11).rows()[0]["count"] == 1180


# ---- 5. time_unit and warmup act, or are refused ---------------------------------------------------


def test_time_unit_applies_to_step_times_without_a_unit(tmp_path, capsys):
    path = write_runs(tmp_path, "workers,step_time,samples\n" + "2,250,64\n" * 120 + "2,0.5s,64\n")
    row = q.compare(path, q.SyncPS(), W, C, time_unit="ms", warmup=0).rows()[0]
    assert row["measured"] == pytest.approx(121 * 64 / (120 * 0.25 + 0.5), rel=1e-12)
    status, out, _ = run_cli(
        ["compare", str(path), "--time-unit", "ms", "--warmup", "0", "--json", *FLAGS], capsys
    )
    assert status == 0 and json.loads(out)[0]["measured"] == pytest.approx(row["measured"], rel=1e-12)


def test_flags_without_effect_on_throughputs_are_refused(tmp_path, capsys):
    path = write_runs(tmp_path, "workers,samples_per_second\n2,100\n2,110\n")
    with pytest.raises(
        InvalidParameterError, match=r"warmup: got 1000; accepted: None with samples_per_second"
    ):
        q.compare(path, q.AsyncPS(), W, C, warmup=1000)
    with pytest.raises(InvalidParameterError, match=r"time_unit: got 'ms'; accepted: 'auto' with samples"):
        q.compare(path, q.AsyncPS(), W, C, time_unit="ms")
    _refused(["compare", str(path), "--warmup", "1000", *FLAGS], capsys, r"--warmup: got 1000")
    _refused(["compare", str(path), "--time-unit", "ms", *FLAGS], capsys, r"--time-unit: got 'ms'")


# ---- 6. values too small (or large) for a finite error ---------------------------------------------


@pytest.mark.parametrize(
    "text, where",
    [
        ("workers,samples_per_second\n2,1e-320\n", r"line 2, column samples_per_second: got '1e-320'"),
        ("workers,step_time\n" + "2,0.25\n" * 150 + "2,1e-320\n", r"line 152, column step_time"),
        (
            "workers,time\n2,0\n2,1e-320\n" + "".join(f"2,{i}\n" for i in range(1, 150)),
            r"line 3, column time",
        ),
    ],
    ids=["samples_per_second", "step_time", "time"],
)
def test_a_subnormal_measurement_is_refused_naming_line_and_column(tmp_path, capsys, text, where):
    path = write_runs(tmp_path, text)
    with pytest.raises(InvalidParameterError, match=where):
        q.compare(path, q.SyncPS(), W, C)
    _refused(["compare", str(path), *FLAGS], capsys, where)


# ---- 7. no regular expression runs without bound ----------------------------------------------------


def test_a_nested_quantifier_is_refused_before_reading(tmp_path):
    log = write_runs(tmp_path, "a" * 30 + "!\n", "redos.log")
    code = f"""
        import queuesgd as q
        from queuesgd.errors import InvalidParameterError
        try:
            q.compare({str(log)!r}, "sync-ps", "resnet50", q.Cluster(1, "10Gbit/s"), workers=2,
                      log_pattern=r"(?P<step_time>(a+)+)$")
        except InvalidParameterError as err:
            print(err)
    """
    proc = _bounded(code, timeout=60)
    assert "log_pattern: got '(?P<step_time>(a+)+)$'; accepted: a pattern without a quantified group" in (
        proc.stdout
    ), proc.stderr


def test_a_slow_user_pattern_is_stopped_and_its_process_killed(tmp_path):
    log = write_runs(tmp_path, ("1" * 1999 + "\n") * 3, "poly.log")
    code = f"""
        import os, subprocess
        import queuesgd as q
        from queuesgd import measured
        from queuesgd.errors import InvalidParameterError
        started = []
        class Recorded(subprocess.Popen):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                started.append(self)
        subprocess.Popen = Recorded
        measured.PATTERN_SECONDS = 1.0
        try:  # polynomial (n^4), with no nested quantifier: only the time budget stops it
            q.compare({str(log)!r}, "sync-ps", "resnet50", q.Cluster(1, "10Gbit/s"), workers=2,
                      log_pattern=r"(?P<step_time>[0-9]*[0-9]*[0-9]*[0-9]*x)")
        except InvalidParameterError as err:
            print(err)
        (child,) = started
        assert child.poll() is not None
        try:
            os.killpg(child.pid, 0)
            print("process group alive")
        except ProcessLookupError:
            print("process group gone")
    """
    proc = _bounded(code, timeout=120)
    assert "accepted: a pattern that searches the log within 1 s" in proc.stdout, proc.stderr
    assert "process group gone" in proc.stdout


def test_a_user_pattern_skips_lines_over_2000_characters(tmp_path):
    lines = [f"it {i} took 0.25s" for i in range(120)] + ["it 0 took 0.25s" + " " * 2000]
    log = write_runs(tmp_path, "\n".join(lines) + "\n", "t.log")
    r = q.compare(log, q.AsyncPS(), W, C, workers=1, log_pattern=r"took (?P<step_time>[0-9.]+s)")
    assert r.rows()[0]["count"] == 120 - int(0.05 * 120)
    assert any("1 lines longer than 2,000 characters skipped" in n for n in r.notes)


def test_the_step_time_pattern_is_linear_on_long_lines(tmp_path):
    lines = [
        "step 1 time 1" + "2" * 9000 + "x",
        "step 1 time" + " " * 9000 + "x",
        "step 1 " + "time 1:" * 1400,
        "step 1 time 1" + ",000" * 2000 + "x",
        "[rank0]:" + " " * 9000 + "x",
    ] * 4
    log = write_runs(tmp_path, "\n".join(lines) + "\nstep 1 | step_time 250ms\n", "slow.log")
    code = f"""
        import time
        from queuesgd import measured
        t = time.perf_counter()
        header, rows, *_ = measured._table({str(log)!r}, "step-time")
        print(rows, round(time.perf_counter() - t, 3))
    """
    proc = _bounded(code, timeout=60)  # before: about 12 s a line
    rows, seconds = proc.stdout.rsplit(" ", 1)
    assert rows == "[['1', '250ms']]", proc.stderr
    assert float(seconds) < 5


# ---- 8. an endless iterator as a column --------------------------------------------------------------


def test_an_endless_column_is_refused_after_max_rows(monkeypatch):
    monkeypatch.setattr(measured, "MAX_ROWS", 1000)
    drawn = [0]

    def endless():
        while True:
            drawn[0] += 1
            if drawn[0] > 10_000:  # the old code read on: fail rather than hang
                raise RuntimeError("read without bound")
            yield 2

    with pytest.raises(InvalidParameterError, match=r"measured\['workers'\]: got 'more than 1,000 values'"):
        q.compare({"workers": endless(), "samples_per_second": [1.0] * 5}, q.AsyncPS(), W, C)
    assert drawn[0] == 1001


# ---- 9. comments and NaN cells -------------------------------------------------------------------------


def test_a_quoted_hash_is_a_value_not_a_comment(tmp_path, capsys):
    text = 'run,workers,samples_per_second\n"#1",2,100\n"#2",2,300\n# a comment\n'
    r = q.compare(write_runs(tmp_path, text), q.AsyncPS(), W, C)
    assert r.rows()[0]["measured"] == (100 + 300) / 2 and r.rows()[0]["count"] == 2
    multi = 'run,workers,samples_per_second\n"a\n#b",2,100\n#c,2,900\n'  # a quoted line break, then a comment
    assert q.compare(write_runs(tmp_path, multi), q.AsyncPS(), W, C).rows()[0]["measured"] == 100
    bad = write_runs(tmp_path, 'workers,samples_per_second\n"#2",100\n2,300\n')
    _refused(["compare", str(bad), *FLAGS], capsys, r"log\.csv line 2, column workers: got '#2'")


def test_float32_nan_cells_are_skipped_like_float_nan():
    values = [np.float32(100.0), np.float32("nan"), np.float32(110.0)]
    r = q.compare({"workers": [2, 2, 2], "samples_per_second": values}, q.AsyncPS(), W, C)
    assert r.rows()[0]["measured"] == pytest.approx(105.0, rel=1e-12)
    assert any("1 row with an empty samples_per_second cell skipped (rows 1)" in n for n in r.notes)


def test_a_bad_scheme_parameter_cell_is_named_with_its_line_and_column(tmp_path):
    # audit 2026-11-28: every other bad cell names its place; a backups cell of 'x' did not
    log = tmp_path / "log.csv"
    log.write_text("workers,backups,samples_per_second\n4,1,100\n4,1,101\n4,x,100\n")
    placed = r"^BackupWorkers\.backups: got 'x'; .*\(log\.csv line 4, column backups\)$"
    with pytest.raises(InvalidParameterError, match=placed):
        q.compare(str(log), q.BackupWorkers(), W, q.Cluster(4, "1Gbit/s"))
    plain = tmp_path / "plain.csv"  # the argument's own value: no place in the log to name
    plain.write_text("workers,samples_per_second\n4,100\n")
    with pytest.raises(InvalidParameterError, match=r"^BackupWorkers\.backups: got -1; accepted: [^(]*$"):
        q.compare(str(plain), q.BackupWorkers(), W, q.Cluster(4, "1Gbit/s"), params={"backups": -1})
