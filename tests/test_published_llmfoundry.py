"""LLM Foundry's MPT benchmarks (validation/published/llmfoundry.json), recomputed from the committed rules.

As tests/test_published_h100.py: the predictions, not the sources, are tested. The transcription of the
four tables is checked against their own other columns (``NumParams`` against the MPT shapes' parameter
counts, the global batch against micro-batch x accumulation x GPUs, tokens/s against tokens/s per GPU),
the anchor's factor is checked to reproduce its row, every stored prediction is recomputed exactly by the
script's rules, and the summaries are recomputed from the stored rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "llmfoundry.json").read_text())


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_llmfoundry")


@pytest.fixture(scope="module")
def rows(run):
    return run.read_tables()


def test_the_four_tables_are_read_whole(rows):
    counts = {}
    for r in rows:
        counts[r["table"]] = counts.get(r["table"], 0) + 1
    assert list(counts.values()) == [18, 52, 61, 78]
    assert {r["precision"] for r in rows} == {"amp_bf16", "bf16"}


def test_the_transcription_agrees_with_the_tables_other_columns(run, rows):
    for r in rows:
        # the shape of rule 1 has the published parameter count, position embedding included
        assert run.mpt_shape(r["model"], r["seq"]).parameters == r["num_params"]
        assert r["microbatch"] * r["grad_accum"] * r["gpus"] == r["global_batch"]
        assert int(r["global_tokens"]) == r["global_batch"] * r["seq"]
        # tokens/s per GPU is the total over the GPUs, rounded by the table to an integer
        assert abs(r["tps"] / r["gpus"] - int(r["tps_per_gpu"])) < 1.0


def test_mpt_shapes_are_the_yamls_own_counts(run):
    # 12 l h^2 + 13 l h (biases, two LayerNorms) + 2 h (final norm) + (V + s) h: a closed form per size
    for model, (l, h, _) in run.SIZES.items():
        expected = 12 * l * h * h + 13 * l * h + 2 * h + (run.VOCABULARY + 2048) * h
        assert run.mpt_shape(model, 2048).parameters == expected


def test_the_anchor_factor_reproduces_its_row_and_is_the_only_anchor(run, rows):
    h = STORED["h100"]
    anchors = [r for r in h["rows"] if r["anchor"]]
    assert [(r["table"], r["model"], r["seq"], r["gpus"]) for r in anchors] == [run.ANCHOR]
    assert anchors[0]["error_pct"] == pytest.approx(0.0, abs=1e-9)
    assert not any(r["anchor"] for r in STORED["a100"]["rows"])
    assert h["factor"] == run.h100_factor([r for r in rows if r["gpu"].startswith("h100")])


def test_every_stored_row_is_recomputed_exactly(run, rows):
    record = json.loads(json.dumps(run.build()))
    assert record == STORED
    assert len(STORED["h100"]["rows"]) + len(STORED["a100"]["rows"]) == len(rows) == 209


def test_the_a100_series_takes_sc21s_factor(run):
    assert STORED["a100"]["factor"] == run.rp.table1_factor(run.rp.megatron_inputs())


def test_the_summaries_are_the_stored_rows():
    for key in ("h100", "a100"):
        counted = [r for r in STORED[key]["rows"] if not r["anchor"]]
        errs = [abs(r["error_pct"]) for r in counted]
        s = STORED[key]["summary"]
        expected = (len(errs), statistics.median(errs), max(errs))
        assert (s["rows"], s["median_abs_pct"], s["max_abs_pct"]) == expected
        assert s["within_15"] == sum(e <= 15.0 for e in errs)
    unanchored = [abs(r["unanchored_pct"]) for r in STORED["h100"]["rows"]]
    assert STORED["h100"]["unanchored"]["median_abs_pct"] == statistics.median(unanchored)
    assert STORED["h100"]["summary"]["rows"] == 69


def test_the_stored_diagnosis_is_recomputed_exactly():
    diag = load_script("diagnose_published_llmfoundry")
    stored = json.loads((ROOT / "validation" / "published" / "llmfoundry-diagnosis.json").read_text())
    assert json.loads(json.dumps(diag.build())) == stored
    run = load_script("run_published_llmfoundry")
    # an implied factor makes its row exact; the anchor's is the series' factor
    row = next(r for r in run.read_tables() if r["model"] == "70b" and r["gpus"] == 512)
    f = next(r["implied_factor"] for r in stored["rows"] if r["model"] == "70b" and r["gpus"] == 512)
    assert run.predict_row(row, f)["tps"] == pytest.approx(row["tps"], rel=1e-5)
    anchor = next(r for r in stored["rows"] if (r["table"], r["model"], r["seq"], r["gpus"]) == run.ANCHOR)
    assert anchor["implied_factor"] == pytest.approx(STORED["h100"]["factor"], abs=1e-5)
