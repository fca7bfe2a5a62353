"""torchtitan's FSDP rows (validation/published/torchtitan.json), recomputed from the committed rules.

As tests/test_published_heldout.py: the predictions, not the source, are tested. Every stored
prediction is recomputed by the script's rules and compared exactly; the shapes' parameter counts
are Hugging Face's published counts (an independent check of the transcription), and the summary is
recomputed from the stored rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "torchtitan.json").read_text())


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_torchtitan")


def test_the_shapes_have_the_published_parameter_counts(run):
    counts = {"llama3-70b": 70_553_706_496, "llama2-13b": 13_015_864_320, "llama2-70b": 68_976_648_192}
    assert {m: s.parameters for m, s in run.SHAPES.items()} == counts


def test_every_stored_prediction_is_recomputed_exactly(run):
    assert STORED["factor"] == run.rp.table1_factor(run.rp.megatron_inputs())
    assert len(STORED["rows"]) == len(run.ROWS) == 3
    for r, (model, batch, rc, measured, quote) in zip(STORED["rows"], run.ROWS):
        assert (r["model"], r["local_batch"], r["recompute"], r["measured_wps"], r["quote"]) == (
            model, batch, rc, measured, quote,
        )  # fmt: skip
        assert r["predicted_wps"] == run.predict_row(model, batch, rc, STORED["factor"])
        assert r["error_pct"] == 100 * (r["predicted_wps"] / measured - 1)


def test_the_summary_is_the_stored_rows():
    errs = [abs(r["error_pct"]) for r in STORED["rows"]]
    s = STORED["summary"]
    assert (s["rows"], s["median_abs_pct"], s["max_abs_pct"]) == (3, statistics.median(errs), max(errs))
