"""LLM Foundry's exploratory H100 runs of 2023-08, predicted with the frozen H100 anchor (tier C).

    python validation/run_published_llmfoundry_h100old.py    # writes published/llmfoundry-h100old.json

Rules: ``validation/published/PREREG-2026-11-27-h100old.md`` (committed before any row was predicted).
The 66 bf16 rows of ``published/llmfoundry-h100old.md`` (22 configurations, three runs each) are
predicted by ``run_published_llmfoundry.predict_row`` with the H100 series' factor stored in
``published/llmfoundry.json`` -- nothing is solved from these rows -- and unanchored beside.
``tests/test_published_llmfoundry_h100old.py`` recomputes every stored prediction exactly.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_llmfoundry as lf  # noqa: E402

OUT = HERE / "published" / "llmfoundry-h100old.json"
ROWS = HERE / "published" / "llmfoundry-h100old.md"
RULES = "validation/published/PREREG-2026-11-27-h100old.md"
SOURCE = (
    "mosaicml/llm-foundry scripts/train/benchmarking/h100old.md at beb8dee6922c5e31d27a24a713a1315b4013185d "
    "(2023-08-22, a development branch): MPT on 8 H100s, amp_bf16, FSDP PURE, Throughput (T/s)"
)
#: the file's columns: the README's without Model TFLOP, with the run's image at the end
COLUMNS = (*lf.COLUMNS[:6], *lf.COLUMNS[7:], "image")
KEY = ("model", "seq", "gpus", "microbatch", "grad_accum", "activation_checkpointing")


def configurations() -> list[dict[str, Any]]:
    """Rules 1-2: each configuration's three runs, their median, and whether the README has it."""
    readme = {tuple(r[k] for k in KEY) for r in lf.read_tables() if r["gpu"].startswith("h100")}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in lf.read_tables(ROWS, COLUMNS):
        groups.setdefault(tuple(r[k] for k in KEY), []).append(r)
    out = []
    for key, runs in groups.items():
        first = runs[0]
        out.append({**{k: first[k] for k in (*KEY, "gpu", "mp_mode", "sharding", "num_params", "table")},
                    "runs_tps": [r["tps"] for r in runs], "tps": statistics.median(r["tps"] for r in runs),
                    "new": key not in readme})  # fmt: skip
    return out


def build() -> dict[str, Any]:
    factor = json.loads(lf.OUT.read_text())["h100"]["factor"]
    rows = []
    for c in configurations():
        pred = lf.predict_row(c, factor)
        rows.append({
            **{k: v for k, v in c.items() if k != "table"}, "measured_tps": c["tps"],
            "predicted_tps": pred["tps"], "error_pct": 100 * (pred["tps"] / c["tps"] - 1),
            "memory_gb": pred["memory_gb"],
            "unanchored_pct": 100 * (lf.predict_row(c, 1.0)["tps"] / c["tps"] - 1),
            "spread_pct": 100 * (max(c["runs_tps"]) / min(c["runs_tps"]) - 1),
        })  # fmt: skip
    new = [r for r in rows if r["new"]]
    repeated = [r for r in rows if not r["new"]]
    return {
        "source": SOURCE, "rules": RULES, "targets": dict(rp.TARGETS), "factor": factor, "rows": rows,
        "summary": rp.accuracy(new), "repeated": rp.accuracy(repeated),
        "unanchored": rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in new]),
    }  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for r in record["rows"]:
        ac = "ac" if r["activation_checkpointing"] else "  "
        print(f"{'new' if r['new'] else 'rep':<3} {r['model']:>5} s={r['seq']:<6} b={r['microbatch']:<4} "
              f"ga={r['grad_accum']:<3} {ac} measured {r['measured_tps']:>9} "
              f"predicted {r['predicted_tps']:10.0f} {r['error_pct']:+6.1f}% "
              f"(unanchored {r['unanchored_pct']:+6.1f}%, "
              f"runs spread {r['spread_pct']:.1f}%)")  # fmt: skip
    print("new", record["summary"], "repeated", record["repeated"], "unanchored new", record["unanchored"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
