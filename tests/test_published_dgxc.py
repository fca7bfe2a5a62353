"""NVIDIA's DGX Cloud benchmarks (validation/published/dgxc.json), recomputed from the committed rules.

As tests/test_published_llmfoundry.py: the predictions, not the sources, are tested. The transcription of
the six tables is checked against their own text (each title's gradient accumulation against the number
of micro-batches the rules give), the shapes against the parameter counts their authors publish, the
anchor's factor is checked to reproduce its row, every stored prediction is recomputed exactly, and the
summaries are recomputed from the stored rows.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "dgxc.json").read_text())


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_dgxc")


@pytest.fixture(scope="module")
def rows(run):
    return run.read_rows()


def test_the_six_tables_are_read_whole(rows):
    counts = {}
    for r in rows:
        counts[r["model"]] = counts.get(r["model"], 0) + 1
    assert counts == {"gpt3-175b": 5, "llama3.1-8b": 5, "llama3.1-70b": 6, "llama3.1-405b": 6,
                      "nemotron4-15b": 8, "nemotron4-340b": 5}  # fmt: skip
    # the 405B table's malformed cell "8.7  5" is 8.75 s (its tokens/s: 126 x 8192 / 117965)
    (cell,) = [r["step_s"] for r in rows if r["model"] == "llama3.1-405b" and r["gpus"] == 96]
    assert cell == 8.75 == pytest.approx(126 * 8192 / 117965, abs=5e-4)


def test_the_micro_batches_are_the_titles_gradient_accumulation(run, rows):
    # the titles state GA; the rules give m = GBS / (MBS x d) with d = GPUs / (t p c)
    for r in rows:
        match = re.search(r"GA=(\d+)", _title(r))
        if match is None:
            continue  # GPT-3's title gives no GA
        d = r["gpus"] // (r["tensor"] * r["pipeline"] * r["context"])
        assert r["gbs"] // (r["microbatch"] * d) == int(match.group(1))
        assert r["gbs"] % (r["microbatch"] * d) == 0


def _title(row) -> str:
    text = (ROOT / "validation" / "published" / "dgxc-tables.md").read_text()
    return next(line for line in text.splitlines() if line.startswith(f"| {row['title']} ("))


def test_the_shapes_have_their_authors_parameter_counts(run, rows):
    by_model = {(r["model"], r["layers"]): run.shape_of(r) for r in rows}
    # Meta's Llama 3.1 checkpoints (8B, 70B; 405B with its 8 key-value heads)
    assert by_model[("llama3.1-8b", 32)].parameters == 8_030_261_248
    # t = 4 pads the vocabulary from 128256 to 128512 rows, in the untied input and output embeddings
    assert by_model[("llama3.1-70b", 80)].parameters == 70_553_706_496 + 2 * (128512 - 128256) * 8192
    yaml_405b = by_model[("llama3.1-405b", 126)]
    meta_405b = dataclasses.replace(yaml_405b, kv_heads=8, vocabulary=128256)
    assert meta_405b.parameters == 405_853_388_800
    # the yaml's 16 key-value heads add the k and v projections of 8 more heads in every layer, t = 8 the
    # padding of the two embeddings
    more_kv, padding = 2 * 126 * 16384 * 8 * 128, 2 * (129024 - 128256) * 16384
    assert yaml_405b.parameters - meta_405b.parameters == more_kv + padding
    # Nemotron-4 (NVIDIA's reports: 15.6B and 341B) and GPT-3 (SC'21 Table 2: 174.6B)
    assert by_model[("nemotron4-15b", 32)].parameters / 1e9 == pytest.approx(15.6, abs=0.05)
    assert by_model[("nemotron4-340b", 96)].parameters / 1e9 == pytest.approx(341.0, abs=0.05)
    assert by_model[("gpt3-175b", 96)].parameters / 1e9 == pytest.approx(174.6, abs=0.05)


def test_megatron_pads_the_vocabulary_to_128_t(run):
    assert run.padded_vocabulary(50257, 4) == 50688
    assert [run.padded_vocabulary(128256, t) for t in (1, 4, 8)] == [128256, 128512, 129024]
    assert run.padded_vocabulary(256000, 8) == 256000


def test_the_anchor_factor_reproduces_its_row_and_is_the_only_anchor(run, rows):
    anchors = [r for r in STORED["rows"] if r["anchor"]]
    assert [(r["model"], r["gpus"]) for r in anchors] == [run.ANCHOR]
    assert anchors[0]["error_pct"] == pytest.approx(0.0, abs=1e-9)
    assert STORED["factor"] == run.anchor_factor(rows)


def test_every_stored_row_is_recomputed_exactly(run, rows):
    assert json.loads(json.dumps(run.build())) == STORED
    assert len(STORED["rows"]) == len(rows) == 35


def test_the_summaries_are_the_stored_rows():
    counted = [r for r in STORED["rows"] if not r["anchor"]]
    errs = [abs(r["error_pct"]) for r in counted]
    within = sum(e <= 15 for e in errs)
    assert STORED["summary"] == {"rows": 34, "median_abs_pct": statistics.median(errs),
                                 "max_abs_pct": max(errs), "within_15": within}  # fmt: skip
    bare = [abs(r["unanchored_pct"]) for r in STORED["rows"]]
    assert STORED["unanchored"]["median_abs_pct"] == statistics.median(bare)
    for r in STORED["rows"]:
        assert r["measured_tps"] == pytest.approx(r["gbs"] * r["sequence"] / r["step_s"], rel=1e-12)
        assert r["over_memory"] == (r["memory_gb"] > 80)


def test_the_diagnosis_is_recomputed_and_its_implied_factors_reproduce_their_rows():
    diag = load_script("diagnose_published_dgxc")
    stored = json.loads((ROOT / "validation" / "published" / "dgxc-diagnosis.json").read_text())
    assert json.loads(json.dumps(diag.build())) == stored
    # the anchor's implied factor is the preregistered one, to brentq's tolerance
    (anchor,) = [r for r in stored["rows"] if (r["model"], r["gpus"]) == ("llama3.1-8b", 8)]
    assert anchor["implied_factor"] == pytest.approx(STORED["factor"], abs=1e-5)
    for r in stored["rows"]:
        assert r["gemm"] + r["flash"] + r["memory_bound"] == pytest.approx(1.0, abs=1e-12)


@pytest.fixture(scope="module")
def gpu_run():
    return load_script("run_published_dgxc_gpu")


def test_the_prepared_gpu_rerun_reproduces_the_first_run_with_the_shipped_table(gpu_run):
    # fed the shipped table itself, the dgxc-gpu preregistration's predictions are the first run's, row by row
    record = gpu_run.build(ROOT / "queuesgd" / "data" / "gemm" / "h100-bf16.json")
    assert record["headline"] == "A'" and record["flash_rows"] == 0
    assert record["factor"] == pytest.approx(STORED["factor"], abs=1e-12)
    for r in record["rows"]:
        assert r["unanchored_pct"] == pytest.approx(r["first_run_unanchored_pct"], abs=1e-9)
        assert r["anchored_pct"] == pytest.approx(r["first_run_pct"], abs=1e-9)
    assert record["anchored"] == pytest.approx(STORED["summary"])


def test_an_h200_table_keeps_the_h100_memory_rows_and_the_flash_rows_unscaled(gpu_run, run, tmp_path):
    data = json.loads((ROOT / "queuesgd" / "data" / "gemm" / "h100-bf16.json").read_text())
    data["device"] = "NVIDIA H200"
    for r in data["elementwise"]:
        r["GBps"] = 2 * r["GBps"]  # an HBM3e twice as fast: not to be used
    data["flash"] = [{"batch": 1, "heads": 32, "sequence": 4096, "head_dim": 128, "tflops": 400.0}]
    path = tmp_path / "h200.json"
    path.write_text(json.dumps(data))
    table = gpu_run.measured_table(path)
    shipped = gpu_run.load_gemm_table("h100-bf16")
    assert table.memory == shipped.memory and len(table.flash[0]) == 1
    scaled = run.h100.h100_compute(factor=0.5, table=table).table
    assert scaled.flash == table.flash  # measured attention is not scaled by the GEMM factor
    assert scaled.efficiencies == tuple(min(1.0, e * 0.5) for e in table.efficiencies)
    assert gpu_run.build(path)["headline"] == "A"
