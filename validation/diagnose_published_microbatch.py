"""Diagnosis of the backward-prefetch test (published/microbatch.json): what the micro-batch sweep's cost is.

    python validation/diagnose_published_microbatch.py   # writes published/microbatch-diagnosis.json

Written after the run, so **not evidence**: nothing here changes a stored prediction. For the sweep's
7b rows (micro-batches 1, 2, 4, 6 on 8 A100 80GB, accumulation 2) a step's measured seconds are fitted
as a line in its tokens, ``a + c x tokens`` (least squares): the intercept per micro-batch, ``a / 2``,
is what a micro-batch costs whatever its size. Beside it: the model's ZeRO-3 collectives of one
micro-batch, ``Z = 2 g + r`` (``details["dp_per_step"] / m``), and the NVLink bus bandwidth at which
``Z``'s bytes would take the intercept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_published_microbatch as mb  # noqa: E402

OUT = HERE / "published" / "microbatch-diagnosis.json"


def collectives(row: dict[str, Any], factor: float) -> dict[str, float]:
    """The model's ZeRO-3 collectives of one micro-batch (seconds) and their bytes on one GPU's link."""
    p = mb.lf.predict_row(row, factor, overlap=False)
    n = row["gpus"]
    moved = (n - 1) / n * (2 * p["parameter_bytes"] + p["gradient_bytes"])  # two gathers, a reduce-scatter
    return {"seconds": p["dp_s"] / row["grad_accum"], "bytes": moved}


def model_slope(rows: list[dict[str, Any]], factor: float) -> float:
    """The model's seconds per token of compute over the sweep: its step less its collectives, fitted."""
    points = []
    for r in rows:
        p = mb.lf.predict_row(r, factor, overlap=False)
        points.append((r["global_batch"] * r["seq"], p["step_s"] - p["dp_s"]))
    x, y = np.array(points).T
    return float(np.polyfit(x, y, 1)[0])


def build() -> dict[str, Any]:
    record = json.loads(mb.OUT.read_text())
    rows = [r for r in mb.read_rows() if r["set"] == "M" and r["model"] == "7b"]
    tokens = np.array([r["global_batch"] * r["seq"] for r in rows], dtype=float)
    step = tokens / np.array([r["tps"] for r in rows], dtype=float)
    c, a = np.polyfit(tokens, step, 1)
    fitted = a + c * tokens
    per_mb = a / rows[0]["grad_accum"]
    z = collectives(rows[0], record["factor"])
    slope = model_slope(rows, record["factor"])
    flops = 6 * rows[0]["num_params"]  # per token, the model's 6 N
    note = " ".join([
        f"the 7b sweep's steps fit a + c x tokens with a = {a:.3f} s per step",
        f"({per_mb:.3f} s per micro-batch) and c = {c * 1e6:.2f} us per token",
        f"(largest residual {100 * np.max(np.abs(step / fitted - 1)):.2f}%).",
        f"The model's ZeRO-3 collectives of one micro-batch take {z['seconds']:.3f} s at the NVLink rule's",
        f"300 GB/s per direction ({z['bytes'] / 1e9:.1f} GB a GPU moves); the intercept equals them at",
        f"{z['bytes'] / per_mb / 1e9:.0f} GB/s. So the cost per micro-batch is about all of FSDP's",
        "collectives exposed, at a bus bandwidth below the rule's -- the forward's gathers too, which",
        "zero_overlap='post' still hides (Composer also leaves forward_prefetch off and limit_all_gathers",
        "on). The slope is the compute: measured, 6 N FLOPs per token at",
        f"{flops / c / rows[0]['gpus'] / 1e12:.0f} TFLOP/s per GPU; the model's compute over the same rows",
        f"{slope * 1e6:.2f} us per token ({flops / slope / rows[0]['gpus'] / 1e12:.0f} TFLOP/s),",
        f"{100 * (slope / c - 1):.0f}% slower -- the direction of the checkpointed rows' miss, whose",
        "micro-batches are large. A reading after the run, on 4 rows; not measured: the A100's NVLink",
        "all-gather bus bandwidth.",
    ])
    return {"fit": {"intercept_s": a, "per_token_s": c, "per_microbatch_s": per_mb,
                    "rows": [{"microbatch": r["microbatch"], "step_s": float(s), "fitted_s": float(f)}
                             for r, s, f in zip(rows, step, fitted, strict=True)]},
            "model_collectives": z, "model_per_token_s": slope, "note": note}  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(record["note"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
