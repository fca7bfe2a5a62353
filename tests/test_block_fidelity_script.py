"""validation/run_block_fidelity.py runs on a CPU at its scaled-down shapes (a test of the script).

The GPU run is preregistered (validation/published/PREREG-2026-11-27-block.md); here only that every
shape of its rule 1 is timed and compared, with the comparison's ratios the measured over the model's.
"""

from __future__ import annotations

import pytest
from validation_scripts import load_script

pytest.importorskip("torch")


def test_every_shape_is_timed_and_compared_on_a_cpu():
    run = load_script("run_block_fidelity")
    record = run.run("cpu", budget=120.0, small=True, repeats=1)
    assert [(r["model"], r["sequence"]) for r in record["rows"]] == [
        (name, max(16, s // 64)) for name, _, _, s, _ in run.SHAPES
    ]
    for row, (_, h, _, _, mbs) in zip(record["rows"], run.SHAPES, strict=True):
        assert row["hidden"] == h // 32
        assert [c["microbatch"] for c in row["comparison"]] == list(mbs)
        for c in row["comparison"]:
            assert c["ratio_step"] == c["measured_step"] / c["predicted_step"]
            assert c["predicted_recompute_step"] > c["predicted_step"] > c["predicted_forward"] > 0
