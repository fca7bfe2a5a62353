"""H100 rows with every overlap (validation/published/h100.json), recomputed from the committed rules.

As tests/test_published_torchtitan.py: the predictions, not the sources, are tested. Every stored
prediction (the chosen candidate, its range, the configuration without overlaps) is recomputed by the
script's rules and compared exactly; the transcription of the Megatron-Core table is checked against
its own other columns (the MFU column against the per-GPU teraFLOP/s at the H100's dense bf16 989 TFLOP/s, the
model sizes against the shapes' parameter counts), and the summaries are recomputed from the rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "h100.json").read_text())
#: the table's MFU column, in percent, row by row
MFU = [41, 47, 49, 46, 42, 43, 44, 48, 47]


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_h100")


def test_the_transcribed_rows_agree_with_the_tables_other_columns(run):
    assert [round(100 * r[-1] / 989) for r in run.MCORE_ROWS] == MFU
    for size, heads, hidden, layers, t, p, d, gpus, _, _ in run.MCORE_ROWS:
        assert t * p * d == gpus
        params = run.mcore_shape(layers, hidden, heads).parameters
        assert params == pytest.approx(float(size.rstrip("B")) * 1e9, rel=0.035)


def test_megatrons_flop_count_is_its_general_formula(run):
    # num_floating_point_operations (86d5aa5) with MHA, no gating, ffn = 4h, batch 1
    s, v = run.SEQUENCE, run.VOCABULARY
    for l, h in ((24, 2048), (112, 18432)):
        general = 12 * s * l * h * h * ((1 + 1 + s / h) + 4 + v / (2 * l * h))
        assert run.megatron_flops(l, h) == pytest.approx(general, rel=1e-14)


def test_every_stored_megatron_core_row_is_recomputed_exactly(run):
    rows = STORED["megatron-core-weak"]["rows"]
    assert len(rows) == len(run.MCORE_ROWS) == 9
    for stored, row in zip(rows, run.MCORE_ROWS):
        assert json.loads(json.dumps(run.mcore_row(row))) == stored


def test_the_chosen_candidate_is_the_fastest_that_fits(run):
    row = run.MCORE_ROWS[4]  # 70B, p = 2: interleaved candidates exist
    stored = STORED["megatron-core-weak"]["rows"][4]
    results = [run.mcore_predict(row, c) for c in run.candidates(row[3], row[5], row[6], row[8])]
    fitting = [r["tflops"] for r in results if r["memory_gb"] * 1e9 <= run.MEMORY_LIMIT]
    assert stored["predicted_tflops"] == max(fitting)


def test_every_stored_torchtitan_row_is_recomputed_exactly(run):
    rows = STORED["torchtitan-asynctp"]["rows"]
    stored = [(r["row"], r["tp_overlap"], r["measured_tps"]) for r in rows]
    assert stored == [tuple(x) for x in run.TITAN_ROWS]
    for r in rows:
        assert r["predicted_tps"] == run.titan_predict(r["tp_overlap"])
        assert r["error_pct"] == 100 * (r["predicted_tps"] / r["measured_tps"] - 1)


def test_the_summaries_are_the_stored_rows():
    for key, err in (("megatron-core-weak", "error_pct"), ("torchtitan-asynctp", "error_pct")):
        errs = [abs(r[err]) for r in STORED[key]["rows"]]
        s = STORED[key]["summary"]
        expected = (len(errs), statistics.median(errs), max(errs))
        assert (s["rows"], s["median_abs_pct"], s["max_abs_pct"]) == expected
    without = [abs(r["without_overlaps_pct"]) for r in STORED["megatron-core-weak"]["rows"]]
    assert STORED["megatron-core-weak"]["without_overlaps"]["max_abs_pct"] == max(without)


def test_the_stored_diagnosis_is_recomputed_exactly():
    diagnose = load_script("diagnose_published_h100")
    stored = json.loads((ROOT / "validation" / "published" / "h100-diagnosis.json").read_text())
    assert json.loads(json.dumps(diagnose.build())) == stored
    # the anchored variants' anchor row is predicted at its measured value by construction
    for name in ("fixed+anchor", "fixed+anchor, no overlaps"):
        assert stored["variants"][name]["rows"][0]["error_pct"] == pytest.approx(0.0, abs=1e-6)
