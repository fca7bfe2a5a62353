"""The command line: tables, JSON, plots, and one-line errors with status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import queuesgd as q
from queuesgd.cli import main, split_list


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "queuesgd", *args], capture_output=True, text=True, timeout=120
    )


def test_predict_json_rows_match_python(capsys):
    assert (
        main(
            ["predict", "--workload", "resnet50", "--workers", "1,8,64", "--bandwidth", "10Gbit/s", "--json"]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["workers"] for r in rows] == [1, 8, 64]
    for r in rows:
        assert {"scheme", "workers", "throughput", "scaling_factor", "bottleneck", "bandwidth"} <= set(r)
        assert r["bandwidth"] == 1.25e9  # 10 Gbit/s in bytes/s
        p = q.predict(q.AsyncPS(), "resnet50", q.Cluster(workers=r["workers"], bandwidth="10Gbit/s"))
        assert r["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    w = q.load_workload("resnet50")
    for r in rows:  # against one worker computing alone, no communication (Zhang et al.)
        assert r["scaling_factor"] == pytest.approx(
            r["throughput"] / (r["workers"] * w.batch_size / w.compute_time)
        )


def test_predict_table_grid(capsys):
    assert main(["predict", "--workers", "1,2", "--bandwidth", "1,10Gbit/s", "--latency", "50us"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 + 4  # title, header, 2 x 2 rows
    assert "samples/s" in out[1]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "scaling.png"
    assert main(["predict", "--workers", "1,2,4", "--plot", str(f)]) in (0,)
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["predict", "--workload", "alexnet9"], "workload"),
        (["predict", "--workers", "0,2"], "--workers"),
        (["predict", "--bandwidth", "10parsec"], "--bandwidth"),
        (["predict", "--scheme", "sync-magic"], "--scheme"),
        (["predict", "--latency", "-1ms"], "--latency"),
    ],
)
def test_bad_input_one_line_exit_2(args, field):
    r = run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert field in lines[0]
    assert "Traceback" not in r.stderr


def test_argparse_errors_are_one_line():
    r = run("predict", "--nonsense")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1


def test_catalog_list():
    r = run("catalog", "list")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert {"resnet50", "resnet101", "vgg16"} <= set(names)


def test_split_list_units():
    assert split_list("1, 2.5 ,25Gbit/s") == ["1Gbit/s", "2.5Gbit/s", "25Gbit/s"]
    assert split_list("1Gbit/s,100MB/s") == ["1Gbit/s", "100MB/s"]


def test_sweep_scheme_parameter_lists_match_python(capsys):
    args = [
        "sweep",
        "--scheme",
        "backup-workers",
        "--workers",
        "8",
        "--backups",
        "0,2",
        "--stragglers",
        "cancel",
    ]
    assert main([*args, "--compute", "exponential", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["backups"] for r in rows] == [0, 2]
    w = q.load_workload("resnet50")
    w = q.Workload(
        q.Exponential(mean=w.compute_time),
        w.gradient_bytes,
        batch_size=w.batch_size,
        update_time=w.update_time,
    )
    for r in rows:
        p = q.predict(q.BackupWorkers(backups=r["backups"], stragglers="cancel"), w, q.Cluster(8, "10Gbit/s"))
        assert r["throughput"] == pytest.approx(p.throughput, rel=1e-12)
        assert r["gradients_per_update"] == 8 - r["backups"] and r["method"] == "closed_form"


def test_alias_and_random_delay(capsys):
    assert (
        main(
            [
                "predict",
                "--scheme",
                "sync-allreduce",
                "--workers",
                "4",
                "--compute",
                "deterministic",
                "--random-delay",
                "1:50ms",
                "--json",
            ]
        )
        == 0
    )
    (row,) = json.loads(capsys.readouterr().out)
    w = q.load_workload("resnet50")
    # deterministic compute, one worker 50 ms late every step: the barrier waits t + 50 ms
    comm = 2 * 3 / 4 * w.gradient_bytes / 1.25e9 + w.update_time
    assert row["iteration_rate"] == pytest.approx(1 / (w.compute_time + 0.05 + comm), rel=1e-9)


def test_derive_prints_formula_and_latex():
    r = run("derive", "sync-ps", "--compute", "deterministic")
    assert r.returncode == 0 and "harmonic" not in r.stdout and "m*n/" in r.stdout
    r = run("derive", "ring-allreduce", "--latex", "--limit", "n")
    assert r.returncode == 0 and r.stdout.startswith("X = \\frac") and "\\frac{m}{2 \\alpha}" in r.stdout


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["predict", "--scheme", "sync-ps", "--backups", "2"], "--backups"),
        (["predict", "--scheme", "static-cutoff"], "--timeout"),
        (
            ["predict", "--scheme", "backup-workers", "--workers", "4", "--backups", "4"],
            "BackupWorkers.backups",
        ),
        (["predict", "--scheme", "static-cutoff", "--timeout", "0"], "StaticCutoff.timeout"),
        (["predict", "--scheme", "eager-sgd", "--mode", "majority", "--workers", "1"], "EagerSGD"),
        (["predict", "--scheme", "stale-synchronous", "--staleness", "-1"], "StaleSynchronous.staleness"),
        (["predict", "--random-delay", "two:1s"], "--random-delay"),
        (["predict", "--compute", "weibull:2"], "--compute"),
        (["derive", "backup-workers"], "finish"),
        (["derive", "no-such-scheme"], "--scheme"),
    ],
)
def test_scheme_errors_one_line_exit_2(args, field):
    r = run(*args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert field in lines[0]
