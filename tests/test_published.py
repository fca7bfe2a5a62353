"""The published-measurements table (validation/published/) against a recomputation from its stored inputs.

These tests check the predictions, not the papers: every prediction and every
anchored number is recomputed from ``validation/published/inputs.json`` with
``validation/run_published.py`` and compared exactly with the stored table, and
the stored accuracy figures must equal those recomputed from the stored rows.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "validation" / "published"


def _script():
    return load_script("run_published")


@pytest.fixture(scope="module")
def stored():
    return json.loads((STORED / "published.json").read_text())


@pytest.fixture(scope="module")
def inputs():
    return json.loads((STORED / "inputs.json").read_text())


def test_predictions_recomputed_exactly_from_stored_inputs(stored, inputs):
    run = _script()
    rows = inputs["rows"]
    anchored = run.anchors(rows)
    assert anchored == {s: a["value"] for s, a in inputs["anchors"].items()}
    preds = run.predictions(rows, anchored)
    assert preds == [r["predicted"] for r in stored["rows"]]
    for r, p in zip(stored["rows"], preds):
        assert r["error_pct"] == 100.0 * (p / r["measured"] - 1.0)


def test_anchor_rows_reproduce_their_measurement(stored):
    for r in stored["rows"]:
        if r["anchor"]:
            assert r["predicted"] == pytest.approx(r["measured"], rel=1e-9)
    # at most one anchor per series
    series = {r["series"] for r in stored["rows"]}
    assert all(sum(r["anchor"] for r in stored["rows"] if r["series"] == s) <= 1 for s in series)


def test_stored_accuracy_equals_recomputed_from_rows(stored):
    run = _script()
    assert run.summary(stored["rows"]) == stored["summary"]


def test_csv_and_inputs_agree_with_the_record(stored, inputs):
    with open(STORED / "predictions.csv", newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert [float(x["predicted"]) for x in lines] == [r["predicted"] for r in stored["rows"]]
    assert [float(x["error_pct"]) for x in lines] == [r["error_pct"] for r in stored["rows"]]
    keep = ("predicted", "error_pct")
    assert inputs["rows"] == [{k: v for k, v in r.items() if k not in keep} for r in stored["rows"]]
    # every row names a source the record describes
    assert all(r["source"] in stored["sources"] for r in stored["rows"])
    assert all(a in {**stored["sources"], **stored["assumptions"]} for r in stored["rows"] for a in r["also"])


def test_report_section_renders_the_stored_record(stored):
    from queuesgd.harness.report.published import published_lines

    lines = published_lines(stored)
    assert lines[0] == "## Published measurements"
    assert sum(line.startswith("| megatron-table1 | ") for line in lines) == 10 + 1  # rows + series line
