"""FSDP's backward prefetch and the micro-batch, on LLM Foundry's exploratory A100 runs (tier C).

    python validation/run_published_microbatch.py      # writes validation/published/microbatch.json

Rules: ``validation/published/PREREG-2026-11-27-microbatch.md`` (committed before the variant was built
and before any row was predicted). Every row of ``published/llmfoundry-a100-exploratory.md`` (set M, a
micro-batch sweep, and set T, checkpointed configurations) is predicted three ways by
``run_published_llmfoundry.predict_row`` with SC'21 Table 1's factor: ``hidden`` (``zero_overlap=True``),
``serial`` (``False``) and ``post`` (``"post"``, FSDP's BACKWARD_POST).
``tests/test_published_microbatch.py`` recomputes every stored prediction exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_llmfoundry as lf  # noqa: E402

OUT = HERE / "published" / "microbatch.json"
ROWS = HERE / "published" / "llmfoundry-a100-exploratory.md"
RULES = "validation/published/PREREG-2026-11-27-microbatch.md"
SOURCE = (
    "mosaicml/llm-foundry scripts/train/benchmarking/larger_mb_1.md and torches.md at "
    "beb8dee6922c5e31d27a24a713a1315b4013185d (2023-08-22, a development branch): MPT on 8 A100s, "
    "Throughput (T/s)"
)
#: the sections' columns: the README's without Model TFLOP (set M), and with the run's image (set T)
_BASE = (*lf.COLUMNS[:6], *lf.COLUMNS[7:])
COLUMNS = {"larger_mb_1.md": _BASE, "torches.md": (*_BASE, "image")}
SETS = {"larger_mb_1.md": "M", "torches.md": "T"}
VARIANTS = {"hidden": True, "serial": False, "post": "post"}
#: rule 5's ratios: (model, micro-batch, over micro-batch 1)
RATIOS = [("7b", 2), ("7b", 4), ("7b", 6), ("13b", 2)]


def read_rows(path: Path = ROWS) -> list[dict[str, Any]]:
    """Every stored row with its set (M or T), parsed by its section's columns."""
    return [{"set": SETS[r["table"]], **r} for r in lf.read_tables(path, COLUMNS)]


def build() -> dict[str, Any]:
    factor = rp.table1_factor(rp.megatron_inputs())
    rows = []
    for r in read_rows():
        rec = {k: r[k] for k in ("set", "model", "seq", "gpus", "gpu", "microbatch", "grad_accum", "mp_mode",
                                 "activation_checkpointing", "num_params")}  # fmt: skip
        rec["image"] = r.get("image")
        rec["measured_tps"] = r["tps"]
        for name, overlap in VARIANTS.items():
            tps = lf.predict_row(r, factor, overlap=overlap)["tps"]
            rec[f"{name}_tps"], rec[f"{name}_pct"] = tps, 100 * (tps / r["tps"] - 1)
        rows.append(rec)
    accuracy = {
        name: {part: rp.accuracy([{"error_pct": r[f"{name}_pct"]} for r in rows if part in ("all", r["set"])])
               for part in ("all", "M", "T")}
        for name in VARIANTS
    }  # fmt: skip
    sweep = {(r["model"], r["microbatch"]): r for r in rows if r["set"] == "M" and r["gpu"] == "a100_80gb"}
    ratios = []
    for model, b in RATIOS:
        hi, lo = sweep[(model, b)], sweep[(model, 1)]
        measured = hi["measured_tps"] / lo["measured_tps"]
        item: dict[str, Any] = {"model": model, "microbatch": b, "measured": measured}
        for name in VARIANTS:
            item[name] = hi[f"{name}_tps"] / lo[f"{name}_tps"]
            item[f"{name}_error_pct"] = 100 * (item[name] / item["measured"] - 1)
        ratios.append(item)
    post_wins = all(abs(x["post_error_pct"]) < abs(x["hidden_error_pct"]) for x in ratios)
    return {"source": SOURCE, "rules": RULES, "targets": dict(rp.TARGETS), "factor": factor, "rows": rows,
            "accuracy": accuracy, "ratios": ratios,
            "post_explains_the_micro_batch_better": post_wins}  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for r in record["rows"]:
        ac = "ac" if r["activation_checkpointing"] else "  "
        print(f"{r['set']} {r['model']:>4} s={r['seq']:<6} b={r['microbatch']:<4} ga={r['grad_accum']:<3} "
              f"{r['gpu']} {r['mp_mode']:<7} {ac} measured {r['measured_tps']:>7} "
              f"hidden {r['hidden_pct']:+6.1f}% serial {r['serial_pct']:+6.1f}% "
              f"post {r['post_pct']:+6.1f}%")  # fmt: skip
    for name, acc in record["accuracy"].items():
        print(name, {k: (v["rows"], round(v["median_abs_pct"], 1), round(v["max_abs_pct"], 1))
                     for k, v in acc.items()})  # fmt: skip
    for x in record["ratios"]:
        print(x["model"], x["microbatch"], "measured", round(x["measured"], 3),
              {n: round(x[n], 3) for n in VARIANTS})  # fmt: skip
    print("post explains the micro-batch better:", record["post_explains_the_micro_batch_better"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
