"""LLM Foundry's exploratory H100 runs (validation/published/llmfoundry-h100old.json), recomputed.

The transcription is checked against the file's own columns (``NumParams`` against the MPT shapes, the
global batch against micro-batch x accumulation x GPUs, three runs per configuration), the frozen factor
against the stored H100 series', every stored prediction is recomputed exactly by the script's rules, and
the summaries are recomputed from the rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "llmfoundry-h100old.json").read_text())


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_llmfoundry_h100old")


def test_the_rows_agree_with_their_own_columns(run):
    rows = run.lf.read_tables(run.ROWS, run.COLUMNS)
    assert len(rows) == 66 and {r["precision"] for r in rows} == {"amp_bf16"}
    assert {r["gpus"] for r in rows} == {8}
    for r in rows:
        assert run.lf.mpt_shape(r["model"], r["seq"]).parameters == r["num_params"]
        assert r["microbatch"] * r["grad_accum"] * r["gpus"] == r["global_batch"]
        assert r["mp_mode"] == "PURE" and r["image"].startswith("mosaicml/pytorch:2.0.1")
    assert sorted(len(c["runs_tps"]) for c in run.configurations()) == [3] * 22


def test_the_factor_is_the_h100_series_and_nothing_is_solved(run):
    foundry = json.loads((ROOT / "validation" / "published" / "llmfoundry.json").read_text())
    assert STORED["factor"] == foundry["h100"]["factor"]


def test_every_stored_row_is_recomputed_exactly(run):
    assert json.loads(json.dumps(run.build())) == STORED
    assert sum(r["new"] for r in STORED["rows"]) == 11


def test_the_summaries_are_the_stored_rows():
    for key, new in (("summary", True), ("repeated", False)):
        errs = [abs(r["error_pct"]) for r in STORED["rows"] if r["new"] == new]
        s = STORED[key]
        expected = (len(errs), statistics.median(errs), max(errs))
        assert (s["rows"], s["median_abs_pct"], s["max_abs_pct"]) == expected
    for r in STORED["rows"]:
        assert r["measured_tps"] == statistics.median(r["runs_tps"])
