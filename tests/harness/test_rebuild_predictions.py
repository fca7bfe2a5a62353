"""Every a-priori row whose inputs are committed is rebuilt from them, exactly (issue 22).

A row records when its profile and its calibration were measured; the files with those stamps under
``validation/*/profiles`` and ``validation/*/calibrations`` are its inputs. Where both are in the
repository, ``predict_apriori`` on them must give the row's prediction to the last bit: the prediction
was made from those files alone, and the code that made it still makes it. Rows whose inputs were
overwritten before any commit (most rows made before 2026-11-26) cannot be rebuilt; the test counts them
and rebuilds the others (29 on 2026-11-26: the held-out DDP passes, resnet18s' DDP rerun, eager-SGD,
and the GPU section).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from queuesgd.harness.apriori import StoredInputs, inputs_of, predict_apriori, stored_inputs
from queuesgd.harness.report import read_rows

VALIDATION = Path(__file__).resolve().parents[2] / "validation"


@functools.cache
def _stored() -> StoredInputs:
    return stored_inputs(VALIDATION)


def _rows() -> tuple[list[tuple[str, dict]], int]:
    """The a-priori rows with committed inputs (file, row), and how many a-priori rows have none."""
    found, missing = [], 0
    for path in sorted((VALIDATION / "results").glob("*.json")):
        for row in read_rows(path):
            if row.get("inputs") != "a-priori" or "profile" not in row:
                continue
            if "input_files" in row:  # an FSDP or pipeline row: tests/harness/test_pipeline_probes.py
                continue
            if inputs_of(row, _stored()) is None:
                missing += 1
            else:
                found.append((path.name, row))
    return found, missing


ROWS, MISSING = _rows()


#: Rows rebuilt to within a few units in the last place, not exactly: the second held-out campaign's ViT at
#: 8 workers, pass 1 (62.1134455534421 stored, 62.113445553442084 rebuilt, 2 ulp). The cause: the profile's
#: trace (vit-pass1.workload.bk.log) was written as repr(t * 1e6) and read as float / 1e6, which gave layer
#: 24's backward time back 1 ulp off (0.005375578901785001); the other reading of that line,
#: 0.005375578901785, rebuilds all three rows of the pass exactly. Traces are now written exactly
#: (tests/test_trace_exact.py); the stored trace is not edited, so the row stays here.
#: Listed so that the exact test stays exact for every other row and a new mismatch fails.
ULP_ONLY = {("apriori-heldout2-ddp-vit-pass1.json", 8)}


def test_the_held_out_campaigns_and_the_gpu_section_are_rebuildable():
    files = {name for name, _ in ROWS}
    assert {"apriori-ddp-encoder-heldout-pass1.json", "apriori-ddp-encoder-heldout-pass2.json"} <= files
    campaign = {f"apriori-heldout2-ddp-{m}-pass{p}.json" for m in ("encoder", "vit") for p in (1, 2)}
    assert campaign <= files  # a campaign run from a spec keeps its inputs beside it (validation/campaigns/)
    assert len(ROWS) >= 41 and MISSING >= 0


@pytest.mark.parametrize(
    "name, row", ROWS, ids=[f"{n}:{r['scheme']}:n{r['workers']}:{r.get('rate')}" for n, r in ROWS]
)
def test_the_stored_prediction_is_rebuilt_exactly_from_its_inputs(name, row):
    profile, calibration = inputs_of(row, _stored())
    rebuilt = predict_apriori(
        row["scheme"],
        profile,
        calibration,
        row["workers"],
        params=row.get("params") or {},
        random_delay=row.get("random_delay"),
    )
    if (name, row["workers"]) in ULP_ONLY:
        assert rebuilt["predicted"] != row["predicted"]  # fixed? then take it out of ULP_ONLY
        assert abs(rebuilt["predicted"] - row["predicted"]) <= 4 * math.ulp(row["predicted"])
    else:
        assert rebuilt["predicted"] == row["predicted"]
    assert rebuilt["method"] == row["method"]
