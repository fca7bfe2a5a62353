"""FSDP's backward prefetch on LLM Foundry's exploratory A100 runs (validation/published/microbatch.json).

The transcription is checked against the rows' own columns (``NumParams`` against the MPT shapes, the
global batch against micro-batch x accumulation x GPUs), every stored prediction is recomputed exactly
by the script's rules, and the summaries and rule 5's ratios are recomputed from the stored rows.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from validation_scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "validation" / "published" / "microbatch.json").read_text())


@pytest.fixture(scope="module")
def run():
    return load_script("run_published_microbatch")


def test_the_rows_agree_with_their_own_columns(run):
    rows = run.read_rows()
    assert [r["set"] for r in rows].count("M") == 7 and [r["set"] for r in rows].count("T") == 24
    for r in rows:
        assert run.lf.mpt_shape(r["model"], r["seq"]).parameters == r["num_params"]
        assert r["microbatch"] * r["grad_accum"] * r["gpus"] == r["global_batch"]
        assert r["cpu_offload"] == "False" and r["sharding"] == "FULL_SHARD"


def test_every_stored_row_is_recomputed_exactly(run):
    assert json.loads(json.dumps(run.build())) == STORED
    assert STORED["factor"] == run.rp.table1_factor(run.rp.megatron_inputs())


def test_the_summaries_and_ratios_are_the_stored_rows():
    rows = STORED["rows"]
    for name in ("hidden", "serial", "post"):
        for part in ("all", "M", "T"):
            errs = [abs(r[f"{name}_pct"]) for r in rows if part in ("all", r["set"])]
            acc = STORED["accuracy"][name][part]
            assert (acc["rows"], acc["median_abs_pct"], acc["max_abs_pct"]) == (
                len(errs), statistics.median(errs), max(errs)
            )  # fmt: skip
    sweep = {(r["model"], r["microbatch"]): r for r in rows if r["set"] == "M" and r["gpu"] == "a100_80gb"}
    for x in STORED["ratios"]:
        hi, lo = sweep[(x["model"], x["microbatch"])], sweep[(x["model"], 1)]
        assert x["measured"] == hi["measured_tps"] / lo["measured_tps"]
        assert x["post"] == hi["post_tps"] / lo["post_tps"]
    wins = all(abs(x["post_error_pct"]) < abs(x["hidden_error_pct"]) for x in STORED["ratios"])
    assert STORED["post_explains_the_micro_batch_better"] is wins


def test_the_stored_diagnosis_is_recomputed_and_its_line_fits_the_rows():
    diag = load_script("diagnose_published_microbatch")
    stored = json.loads((ROOT / "validation" / "published" / "microbatch-diagnosis.json").read_text())
    assert json.loads(json.dumps(diag.build())) == stored
    fit = stored["fit"]
    for r in fit["rows"]:  # the least-squares line passes within 1% of every step of the sweep
        assert r["fitted_s"] == pytest.approx(r["step_s"], rel=0.01)
    # the bytes one GPU moves for two bf16 gathers and an fp32 reduce-scatter of MPT-7B over 8 ranks
    assert stored["model_collectives"]["bytes"] == pytest.approx(7 / 8 * (2 * 2 + 4) * 6658859008, rel=1e-12)
