"""Grok-1 on H100s (validation/published/grok.json), recomputed from the committed rules.

As tests/test_published_dgxc.py: the predictions, not the source, are tested. The transcription is
checked against the tables' own other cells (tokens per second, the configuration table's DP and GA
columns), the frozen factor against the DGX Cloud record, and every stored prediction is recomputed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "grok.json").read_text())
TABLE = (ROOT / "validation" / "published" / "dgxc-grok-tables.md").read_text()


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_grok")


def _row(title: str) -> list[str]:
    line = next(ln for ln in TABLE.splitlines() if ln.startswith(f"| {title}"))
    return [c.strip() for c in line.strip().strip("|").split("|")][1:]


def _config() -> list[dict[str, str]]:
    lines = [ln for ln in TABLE.splitlines() if ln.startswith("|")][:11]
    head = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in ln.strip().strip("|").split("|")), strict=True))
            for ln in lines[2:]]  # fmt: skip


def test_the_transcription_agrees_with_the_tables_other_cells(run):
    rows = run.read_rows()
    assert [r["gpus"] for r in rows] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    tps = [int(x) for x in _row("Throughput in tokens per second") if x]
    for r, printed in zip(rows, tps, strict=True):
        assert r["gbs"] * r["sequence"] / r["step_s"] == pytest.approx(printed, abs=0.5)
    for r, c in zip(rows, _config(), strict=True):
        d = r["gpus"] // (r["tensor"] * r["pipeline"] * r["context"])
        assert int(c["DP"]) == d // r["expert_parallel"]  # the table's DP: data-parallel over EP
        if r["gpus"] >= 32:  # GA agrees from 32 GPUs up (the transcription note)
            assert int(c["GA"]) == r["gbs"] // (r["microbatch"] * d)


def test_the_factor_is_the_dgxc_tests_frozen():
    dgxc = json.loads((ROOT / "validation" / "published" / "dgxc.json").read_text())
    assert STORED["factor"] == dgxc["factor"]


def test_the_full_depth_model_has_grok_1s_size(run):
    # 64 layers of 8 experts: xAI's "314B" (the vocabulary here is Llama 3's 128256, padded to 128512)
    full = [r for r in STORED["rows"] if r["layers"] == 64]
    assert full and all(r["parameters"] / 1e9 == pytest.approx(314, rel=0.01) for r in full)


def test_every_stored_row_is_recomputed_exactly(run):
    assert json.loads(json.dumps(run.build())) == STORED


def test_the_summaries_are_the_stored_rows():
    errs = [abs(r["error_pct"]) for r in STORED["rows"]]
    within = sum(e <= 15 for e in errs)
    assert STORED["summary"] == {"rows": 9, "median_abs_pct": statistics.median(errs),
                                 "max_abs_pct": max(errs), "within_15": within}  # fmt: skip
    for r in STORED["rows"]:
        assert r["over_memory"] == (r["memory_gb"] > 80)
