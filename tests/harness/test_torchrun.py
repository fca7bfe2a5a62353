"""The torchrun entry point: the same worker loops under torchrun, then --compare."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from process_groups import run_group

from queuesgd.harness.torchrun import compare_folder, main

pytest.importorskip("torch")


@pytest.mark.timing
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not on PATH")
def test_torchrun_ring_allreduce_then_compare(tmp_path, capsys):
    out = tmp_path / "records"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "queuesgd.harness.torchrun",
        "--scheme",
        "ring-allreduce",
        "--steps",
        "30",
        "--compute",
        "20ms",
        "--gradient-bytes",
        "256KB",
        "--out",
        str(out),
    ]
    done = run_group(cmd, 240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
    # 30 steps per rank were recorded, and rank 0 wrote the run's description
    lines = [json.loads(x) for x in (out / "rank0.jsonl").read_text().splitlines()]
    assert lines[0]["meta"]["workers"] == 2
    assert sum(1 for r in lines if r.get("role") == "worker") == 30
    row = compare_folder(out)
    assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1, rel=1e-12)
    assert abs(row["error"]) <= 0.25  # loopback, a short run on a shared 2-core machine
    assert main(["--compare", str(out)]) == 0
    assert "ring-allreduce" in capsys.readouterr().out


def test_compare_of_an_empty_folder_is_one_clear_error(tmp_path, capsys):
    assert main(["--compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rank<r>.jsonl" in err[0]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--random-delay", "delay:1:50ms"], "--random-delay"),
        (["--straggler", "delay:1:50ms"], "--straggler"),
    ],
)
def test_random_delay_is_k_delay_here_too(argv, field, capsys):
    # Refused before any process group is joined: one line showing the accepted K:DELAY form.
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"python -m queuesgd.harness.torchrun: error: {field}: got 'delay:1:50ms'")
    assert "K:DELAY" in line
