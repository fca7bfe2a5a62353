"""The held-out published rows (validation/published/heldout.json), recomputed from their stored inputs.

As ``tests/test_published.py``, these tests check the predictions, not the papers: the
GEMM factor is the one SC'21 Table 1's anchor row sets (no new anchor), every row's inputs
are recomputed from ``heldout-sources.json`` by the written rules, every prediction is
recomputed from the stored inputs and compared exactly, and the accuracy figures from the
stored rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "validation" / "published"


def _script():
    return load_script("run_published_heldout")


@pytest.fixture(scope="module")
def run():
    return _script()


@pytest.fixture(scope="module")
def stored():
    return json.loads((STORED / "heldout.json").read_text())


def test_the_factor_is_table1s_anchor_no_new_one(run, stored):
    published = json.loads((STORED / "inputs.json").read_text())
    factor = run.rp.table1_factor(run.rp.megatron_inputs())
    assert factor == stored["factor"]["value"] == published["anchors"]["megatron-table1"]["value"]


def test_inputs_follow_the_rules_from_the_sources_file(run, stored):
    rows = run.load_rows()
    by_id = {r["id"]: r for r in rows}
    for point in stored["points"]:
        assert run.row_inputs(by_id[point["id"].split(":")[0]]) == point["inputs"]
    # every row is predicted but NeMo FP8 (4) and OPT (1); a layer row gives two points
    predicted = {p["id"].split(":")[0] for p in stored["points"]}
    skipped = {r["id"] for r in rows} - predicted
    assert {by_id[i]["series"] for i in skipped} == set(run.NOT_PREDICTED) and len(skipped) == 5
    assert len(stored["points"]) == 31 + 2 * 5
    # BLOOM production's stages as its README quotes them: 5 layers, 6 x 10, 5
    prod = next(p for p in stored["points"] if p["id"] == "bloom-176b-production")
    assert prod["inputs"]["stage_layers"]["value"] == [5] + [6] * 10 + [5]


def test_predictions_recomputed_exactly_from_stored_inputs(run, stored):
    k = stored["factor"]["value"]
    for point in stored["points"]:
        x = {name: v["value"] for name, v in point["inputs"].items()}
        if point["series"] in run.LAYERS:
            got = run.predict_layer(x, k)[point["quantity"]]
        else:
            pred = run.predict_row(x, k)
            got = pred["iteration_time_s"]
            assert pred["slowest_stage"] == point["slowest_stage"]
            assert pred["breakdown_s"] == point["breakdown_s"]
        assert got == point["predicted"]
        assert point["error_pct"] == 100.0 * (got / point["measured"] - 1.0)


def test_the_ratio_is_the_sources_own_tflops_ratio(run, stored):
    """Rule 7: BLOOM's logged TFLOP/s (eq. 3, factor 4, the source's formula) give the same error."""
    rows = {r["id"]: r for r in run.load_rows()}
    checked = 0
    for point in stored["points"]:
        row = rows.get(point["id"])
        if row is None or not point["series"].startswith("bloom"):
            continue
        x = {name: v["value"] for name, v in point["inputs"].items()}
        s, L, h, V, B = x["sequence"], x["layers"], x["hidden"], x["vocabulary"], x["global_batch"]
        flops = 96.0 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
        predicted_tflops = flops / (point["predicted"] * x["gpus"]) / 1e12
        logged = row["measured"]["tflops_per_gpu"]["value"]
        assert predicted_tflops / logged - 1 == pytest.approx(point["throughput_error_pct"] / 100, abs=2e-4)
        checked += 1
    assert checked == 18


def test_stored_accuracy_equals_recomputed_from_points(run, stored):
    assert run.summary(stored["points"]) == stored["summary"]
    assert stored["summary"]["pooled"]["rows"] == 28
