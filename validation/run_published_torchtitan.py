"""torchtitan's FSDP rows on 64 A100s, predicted a priori (rules: published/PREREG-2026-11-27-torchtitan.md).

    python validation/run_published_torchtitan.py      # writes validation/published/torchtitan.json

Three rows of pytorch/torchtitan's ``docs/performance.md`` (commit 0413364): Llama 3 70B with full
activation checkpointing, Llama 2 13B without, Llama 2 70B with full, FSDP2 on 64 A100 80GB, tokens per
second per GPU. The rules were committed before any prediction (240f8f0); nothing is solved for: the
compute model is the H100 table carried to the A100 with SC'21 Table 1's one anchor.
``tests/test_published_torchtitan.py`` recomputes every stored prediction exactly.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402

from queuesgd.model_shapes import LLAMA3_70B, LLAMA_STYLE, TransformerShape  # noqa: E402

OUT = HERE / "published" / "torchtitan.json"
GPUS = 64
SOURCE = (
    "pytorch/torchtitan docs/performance.md at 041336434916bdc0f88c1f89fda176fd3c2092e4: FSDP2 on 64 A100 "
    "(80GB); WPS per GPU"
)
SHAPES = {
    "llama3-70b": LLAMA3_70B,
    "llama2-13b": TransformerShape(
        40, 5120, 40, 4096, 32000, name="llama2-13b", ffn_hidden=13824, **LLAMA_STYLE
    ),
    "llama2-70b": TransformerShape(
        80, 8192, 64, 4096, 32000, name="llama2-70b", kv_heads=8, ffn_hidden=28672, **LLAMA_STYLE
    ),
}
#: (model, local batch, activation checkpointing, measured WPS per GPU, the quoted row)
ROWS = [
    ("llama3-70b", 1, "full", 331, "| 70B | 1 | full | 331 | 51.7% |"),
    ("llama2-13b", 2, None, 2162, "| 13B | 2 | no | 2162 | 61.1%\t|"),
    ("llama2-70b", 2, "full", 353, "| 70B | 2 | full | 353 | 50.5% |"),
]


def predict_row(model: str, batch: int, recompute: str | None, factor: float) -> float:
    """Predicted tokens per second per GPU (rules 2-6)."""
    shape = SHAPES[model]
    p = rp.hybrid_step(
        shape, rp.selene(GPUS), factor, batch, tensor=1, pipeline=1, microbatches=1, schedule="1f1b",
        virtual_stages=1, recompute=recompute, zero=3,
    )  # fmt: skip
    return p.throughput * shape.sequence / GPUS


def build() -> dict[str, Any]:
    factor = rp.table1_factor(rp.megatron_inputs())
    rows = []
    for model, batch, rc, measured, quote in ROWS:
        predicted = predict_row(model, batch, rc, factor)
        rows.append({
            "model": model, "local_batch": batch, "recompute": rc, "measured_wps": measured,
            "quote": quote, "predicted_wps": predicted, "error_pct": 100 * (predicted / measured - 1),
        })  # fmt: skip
    errs = [abs(r["error_pct"]) for r in rows]
    return {
        "source": SOURCE,
        "rules": "validation/published/PREREG-2026-11-27-torchtitan.md (240f8f0)",
        "factor": factor,
        "rows": rows,
        "summary": {"rows": len(rows), "median_abs_pct": statistics.median(errs), "max_abs_pct": max(errs)},
    }


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for r in record["rows"]:
        print(f"{r['model']:<11} b={r['local_batch']} ac={r['recompute']!s:<5} "
              f"measured {r['measured_wps']:>5} predicted {r['predicted_wps']:8.1f}  {r['error_pct']:+6.1f}%")
    print(record["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
