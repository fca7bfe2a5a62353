"""``queuesgd compare FILE.csv`` and ``queuesgd --version``."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import queuesgd as q
from queuesgd.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_the_package_version():
    proc = subprocess.run(
        [sys.executable, "-m", "queuesgd", "--version"], capture_output=True, text=True, timeout=60
    )
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert proc.returncode == 0
    assert proc.stdout == f"queuesgd {version}\n"
    assert q.__version__ == version


def _log(tmp_path: Path, text: str) -> str:
    path = tmp_path / "runs.csv"
    path.write_text(text)
    return str(path)


def test_compare_table(tmp_path, capsys):
    # resnet50 on 8 workers at 10 Gbit/s: two runs of 1000 and 1100 samples/s, mean 1050
    path = _log(tmp_path, "workers,samples_per_second\n8,1000\n8,1100\n")
    args = ["compare", path, "--scheme", "sync-ps", "--workload", "resnet50", "--bandwidth", "10Gbit/s"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    p = q.predict(q.SyncPS(), "resnet50", q.Cluster(8, "10Gbit/s")).throughput
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["scheme", "workload", "workers", "bandwidth"]
    assert lines[1].split()[:5] == ["sync-ps", "resnet50", "8", "10", "Gbit/s"]
    assert f"{p:.4g}" in lines[1] and "1050 [" in lines[1]
    assert f"{100 * (p / 1050 - 1):+.1f}%" in lines[1]
    assert lines[2].startswith("median |error|")
    assert err == ""


def test_compare_json_and_the_model_samples_note(tmp_path, capsys):
    times = "".join(f"2,{0.25 * i}\n" for i in range(121))
    path = _log(tmp_path, "workers,time\n" + times)
    w = ["--scheme", "sync-ps", "--workload", "resnet50", "--bandwidth", "10Gbit/s", "--warmup", "0"]
    assert main(["compare", path, *w, "--json"]) == 0
    out, err = capsys.readouterr()
    (row,) = json.loads(out)
    # sync PS applies 2 gradients of resnet50's batch (32) per update: 64 samples every 0.25 s
    assert q.load_workload("resnet50").batch_size == 32
    assert row["measured"] == pytest.approx(256.0, rel=1e-9)
    assert row["count"] == 120 and row["samples_from"] == "model"
    assert row["predicted_low"] is None  # no simulation interval: null, not NaN
    assert err.startswith("queuesgd: note: no 'samples' column")


@pytest.mark.parametrize(
    "args, message",
    [
        (["compare", "nope.csv", "--scheme", "sync-ps"], "measured: got 'nope.csv'; accepted: a regular"),
        (["compare", "x.csv", "--latency", "1ms"], "--latency: got '1ms'; accepted: a value together with"),
        (["compare", "x.csv", "--bandwidth", "fast"], "--bandwidth: got 'fast'"),
        (["compare", "x.csv", "--param", "backups"], "--param: got 'backups'; accepted: NAME=VALUE"),
        (  # the last value won, silently (specs.parse_params now refuses it for every command)
            ["compare", "x.csv", "--param", "backups=1", "--param", "backups=0"],
            "--param: got 'backups'; accepted: each scheme parameter once",
        ),
        # the run options were named by compare()'s Python arguments ('iterations: got 0', 'rng: got -1;
        # accepted: a numpy.random.Generator ...'), not by the flags; predict names them --iterations, --seed
        (["compare", "x.csv", "--iterations", "0"], "error: --iterations: got 0; accepted: an integer >= 1"),
        (["compare", "x.csv", "--iterations", "-5"], "error: --iterations: got -5; accepted: an integer"),
        (["compare", "x.csv", "--seed", "-1"], "queuesgd: error: --seed: got -1; accepted: an integer >= 0"),
    ],
)
def test_compare_errors_are_one_line(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("workers,samples_per_second\n1,100\n")
    proc = subprocess.run(
        [sys.executable, "-m", "queuesgd", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("queuesgd: error: ")
    assert message in proc.stderr


def test_compare_malformed_file_names_line_and_column(tmp_path, capsys):
    path = _log(tmp_path, "workers,samples_per_second\n8,1000\n8,lots\n")
    assert main(["compare", path, "--scheme", "sync-ps", "--workload", "resnet50"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "queuesgd: error: runs.csv line 3, column samples_per_second: got 'lots'; accepted: a number > 0\n"
    )


HEADERS = ["workers", "samples_per_second", "time", "step_time", "samples", "scheme", "workload", "bandwidth"]
HEADERS += ["latency", "backups", "run", "loss", "batch_size", "ps_shards", ""]
CELLS = ["1", "2", "4", "0", "-1", "2.5", "1e400", "nan", "", "abc", "10Gbit/s", "1ms", "sync-ps", "nope"]
CELLS += ["backup-workers", "static-cutoff", "resnet50", "missing.json", "100", "0.25", "1e-300", '"', "é"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    header=st.lists(st.sampled_from(HEADERS), min_size=1, max_size=5),
    rows=st.lists(st.lists(st.sampled_from(CELLS), min_size=0, max_size=6), min_size=0, max_size=6),
    repeat=st.sampled_from([1, 30]),
    flags=st.lists(
        st.sampled_from(
            [
                ["--scheme", "sync-ps"],
                ["--scheme", "nope"],
                ["--workload", "resnet50"],
                ["--bandwidth", "10Gbit/s"],
                ["--bandwidth", "1e-300"],
                ["--latency", "1ms"],
                ["--warmup", "0"],
                ["--warmup", "-3"],
                ["--ignore", "loss"],
                ["--ignore", ""],
                ["--param", "backups=1"],
                ["--method", "mva"],
                ["--json"],
            ]
        ),
        max_size=5,
    ),
)
def test_random_files_and_flags_never_give_a_traceback(tmp_path, header, rows, repeat, flags):
    """Exit 0, or exit 2 with one line on stderr; never a traceback (rows repeated to reach 100 steps)."""
    import contextlib
    import io
    import time

    path = tmp_path / "fuzz.csv"
    path.write_text("\n".join(",".join(r) for r in [header, *rows * repeat]) + "\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["compare", str(path), *(x for f in flags for x in f)])
        except SystemExit as stop:  # argparse refusing a flag
            status = stop.code
    assert time.monotonic() - start < 20
    text = err.getvalue()
    assert status in (0, 2), text
    if status == 2:
        assert text.count("\n") == 1 and "error: " in text, text
