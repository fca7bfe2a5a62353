"""validation/run_profile_fidelity.py on a CPU: what pass 6 records of a row, and what a killed run leaves.

Pass 5 on an H200 spent 204 s in one row and wrote nothing until the row ended; pass 6 must say where a
slow row's time went even when a time limit ends it. The device warm-up's steps are timed one by one:
each step's forward, backward and update are disjoint parts of it, so their sum is at most the step,
and the steps and the setup are disjoint parts of the warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from validation_scripts import VALIDATION, load_script

pytest.importorskip("torch")

CASE = "transformer-encoder small fp32"
SMALL = ["--warmup", "1", "--blocks", "1", "--block-steps", "1", "--repetitions", "2"]


@pytest.fixture(scope="module")
def script():
    return load_script("run_profile_fidelity")


def test_a_row_records_each_device_warmup_step_and_the_environment(script, tmp_path):
    out = tmp_path / "pass"
    argv = ["--device", "cpu", "--out", str(out), "--only", CASE, "--device-warmup", "2", *SMALL]
    assert script.main(argv) == 0
    doc = json.loads((out / "fidelity.json").read_text())
    (row,) = doc["rows"]
    assert row["name"] == CASE and "failed" not in row
    steps = row["device_warmup_steps"]
    assert len(steps) == 2
    for s in steps:
        assert set(s) == {"forward_s", "backward_s", "update_s", "step_s"}
        assert all(v > 0 for v in s.values())
        assert s["forward_s"] + s["backward_s"] + s["update_s"] <= s["step_s"]
    assert row["device_warmup_setup_s"] + sum(s["step_s"] for s in steps) <= row["device_warmup_s"]
    assert doc["running"] is None  # the row ended
    env = doc["environment"]
    assert set(script.ENVIRONMENT) == set(env["variables"]) and env["torch_cuda"] is None
    assert "jit_cache_bytes_start" in env and "jit_cache_bytes_after" in row and "jit_cache_bytes_now" in doc
    assert (out / "stacks.txt").exists()


def test_a_run_ended_by_sigterm_keeps_the_row_it_was_in_and_every_stack(tmp_path):
    out = tmp_path / "killed"
    # many warm-up steps so that the row is still in its device warm-up when the signal comes
    argv = [sys.executable, str(VALIDATION / "run_profile_fidelity.py"), "--device", "cpu", "--out", str(out),
            "--only", CASE, "--device-warmup", "100000", *SMALL]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(VALIDATION.parent)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    doc: dict = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                doc = json.loads((out / "fidelity.json").read_text())
            except (OSError, ValueError):  # not written yet, or caught mid-write
                continue
            if len((doc.get("running") or {}).get("device_warmup_steps", ())) >= 3:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    running = doc["running"]
    assert running["name"] == CASE and len(running["device_warmup_steps"]) >= 3
    assert doc["rows"] == []
    stacks = Path(out / "stacks.txt").read_text()
    assert "_device_warmup" in stacks  # where it was when the signal came


def test_the_cuda_environment_names_the_builds_gpu_code_beside_the_devices(script, monkeypatch):
    # no GPU here: torch's CUDA calls answered as an H200 with an sm_90 build would answer them
    import torch

    monkeypatch.setattr(torch, "zeros", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_80", "sm_90", "sm_100"])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002)
    monkeypatch.setenv("CUDA_CACHE_PATH", "/nonexistent/cache")
    env = script._environment(torch, True)
    assert env["arch_list"] == ["sm_80", "sm_90", "sm_100"] and env["capability"] == [9, 0]
    assert env["cudnn"] == 91002 and env["context_s"] >= 0
    assert env["jit_cache"] == "/nonexistent/cache" and env["jit_cache_bytes_start"] is None
    assert env["variables"]["CUDA_CACHE_PATH"] == "/nonexistent/cache"


def test_the_jit_cache_is_counted_in_bytes(script, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"0" * 1000)
    (tmp_path / "y.bin").write_bytes(b"0" * 24)
    monkeypatch.setenv("CUDA_CACHE_PATH", str(tmp_path))
    assert script.jit_cache_bytes() == 1024


def test_the_runs_commit_is_provenances_and_says_dirty(script, monkeypatch):
    # The document's commit is queuesgd.harness.provenance.code_version()'s: "+dirty" where the package's
    # files differ from the commit (the script's own copy left it out, and a record could claim a clean
    # commit from uncommitted code). git's answers are given here, as a dirty checkout would give them.
    from queuesgd.harness import provenance

    head = "0123456789abcdef" * 2 + "01234567"
    answers = {"rev-parse": head, "status": " M queuesgd/profiler.py"}
    monkeypatch.delenv("QUEUESGD_COMMIT", raising=False)
    monkeypatch.setattr(provenance, "_git", lambda *args: answers[args[0]])
    settings = {"device": "cpu", "warmup": 1, "repetitions": 2, "steps": 3, "protocol": "interleaved",
                "device_warmup": 0, "blocks": 1, "block_steps": 1, "pin": "none", "held": "ratio",
                "targets_only": False, "affinity": None}  # fmt: skip
    doc = script._document(argparse.Namespace(**settings), [], "now")
    assert doc["commit"] == head + "+dirty"
    monkeypatch.setenv("QUEUESGD_COMMIT", "given")  # a copy without .git: the commit it was given
    assert script._document(argparse.Namespace(**settings), [], "now")["commit"] == "given"


def test_paired_held_error_is_the_median_pair_error_of_the_rows_own_blocks(script, tmp_path):
    # pass 10's statistic, recomputed here from the blocks the row records: each profile block over each
    # loop block beside it, their median; the ratio of medians is kept beside it
    import statistics

    out = tmp_path / "pass"
    argv = ["--device", "cpu", "--out", str(out), "--only", CASE, "--held", "paired", "--targets-only",
            "--warmup", "1", "--blocks", "3", "--block-steps", "1", "--repetitions", "2"]  # fmt: skip
    assert script.main(argv) == 0
    doc = json.loads((out / "fidelity.json").read_text())
    (row,) = doc["rows"]
    loop, prof = row["loop_s"], row["profile_s"]
    assert len(loop) == 4 and len(prof) == 3
    paired = statistics.median([prof[i] / loop[i + j] - 1 for i in range(3) for j in (0, 1)])
    ratio = statistics.median(prof) / statistics.median(loop) - 1
    assert row["held"] == "paired" and row["error"] == pytest.approx(paired, rel=1e-12)
    assert row["error_ratio"] == pytest.approx(ratio, rel=1e-12)
    assert (
        doc["settings"]["held"] == "paired"
        and "median of the pair errors" in doc["registered"]["held_error"]
    )


def test_check_profile_refuses_an_unknown_held_statistic():
    from queuesgd.errors import InvalidParameterError
    from queuesgd.harness.fidelity import FidelityCase, check_profile

    with pytest.raises(InvalidParameterError, match="^held: got 'mean'; accepted: one of 'ratio', 'paired'"):
        check_profile(FidelityCase("x", "queuesgd:mlp", 2, (4,)), held="mean", blocks=2)


def test_targets_only_leaves_the_extra_rows_out(script, tmp_path, monkeypatch):
    import dataclasses

    (case,) = [c for c in script.cpu_cases() if c.name == CASE]
    extra = dataclasses.replace(case, name=f"{CASE}, as an extra", notes="extra")
    monkeypatch.setattr(script, "cpu_cases", lambda: [case, extra])
    runs = {}
    for only in (False, True):
        out = tmp_path / f"pass-{only}"
        assert script.main(["--device", "cpu", "--out", str(out), *SMALL, *(["--targets-only"] * only)]) == 0
        runs[only] = [r["name"] for r in json.loads((out / "fidelity.json").read_text())["rows"]]
    assert runs == {False: [CASE, extra.name], True: [CASE]}
