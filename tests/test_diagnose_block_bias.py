"""validation/diagnose_block_bias.py on a CPU: each arm's summary is recomputed from the blocks it records."""

from __future__ import annotations

import json
import statistics
import sys

import pytest
from validation_scripts import load_script

pytest.importorskip("torch")


def test_the_summary_is_each_arm_against_the_loop_of_its_round(tmp_path, monkeypatch):
    script = load_script("diagnose_block_bias")
    out = tmp_path / "bias.json"
    argv = ["x", "--device", "cpu", "--out", str(out), "--rounds", "6", "--steps", "2", "--budget", "60"]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    (case,) = json.loads(out.read_text())["cases"]
    blocks = case["blocks_s"]
    assert case["rounds"] == 6 and set(blocks) == set(script.ARMS)
    assert all(sorted(order) == sorted(script.ARMS) for order in case["orders"])
    for arm, got in case["summary"].items():
        own = case["timed_events_s"] if arm == "timed_events" else blocks[arm]
        rel = [a / b - 1 for a, b in zip(own, blocks["loop"], strict=True)]
        assert got["median_vs_loop"] == pytest.approx(statistics.median(rel), rel=1e-12)
        assert got["negative"] == sum(r < 0 for r in rel) and got["of"] == 6
