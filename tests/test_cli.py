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
