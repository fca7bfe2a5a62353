"""Grok-1 314B, a mixture of experts, on H100s (DGX Cloud, NeMo), a priori (PREREG-2026-11-27-grok.md).

    python validation/run_published_grok.py            # writes validation/published/grok.json
    python validation/run_published_grok.py --check    # only: does HybridParallel accept every row?

The nine BF16 columns of ``published/dgxc-grok-tables.md`` (NVIDIA/dgxc-benchmarking at 143b90d,
"v25.01"), 8 to 2048 H100s, each with the recipe's layers, tensor / pipeline / context / expert
parallelism, virtual stages and sequence (rule 3), 8 gated experts, top-2, capacity factor 1 (rule 2),
on DGX H100 nodes; its compute the shipped H100 GEMM table times the DGX Cloud test's factor, frozen
(rule 4: no anchor here). ``tests/test_published_grok.py`` recomputes every stored prediction.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_dgxc as dg  # noqa: E402

from queuesgd import HybridParallel  # noqa: E402
from queuesgd.model_shapes import LLAMA_STYLE, TransformerShape  # noqa: E402

OUT = HERE / "published" / "grok.json"
TABLES = HERE / "published" / "dgxc-grok-tables.md"
RULES = "validation/published/PREREG-2026-11-27-grok.md"
SOURCE = (
    "NVIDIA/dgxc-benchmarking at 143b90dd91f9be958fed4773ae95d941a3356a82 (v25.01): grok1/README_314b.md, "
    "its configuration table and its BF16 table (training step time)"
)
MEMORY_LIMIT = 80e9
#: rule 2: Grok-1 (the yaml): h 6144, 48 heads, 8 key-value heads, experts of ffn 32768 (GeGLU: gated),
#: RMSNorm, no biases, rotary, untied, no dropout, flash; Llama 3's tokenizer (128256) padded to 128 x 4
HIDDEN, HEADS, KV_HEADS, FFN, TOKENIZER = 6144, 48, 8, 32768, 128256
EXPERTS, TOP_K, CAPACITY = 8, 2, 1.0


def read_rows(path: Path = TABLES) -> list[dict[str, Any]]:
    """Each column of the BF16 table with its configuration row (rule 1 and rule 3)."""
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("|")]
    config = [dict(zip(dg.cells(lines[0]), dg.cells(ln), strict=True)) for ln in lines[2:11]]
    steps = [float(x) for x in dg.cells(lines[13])[1:] if x]
    rows = []
    for c, step in zip(config, steps, strict=True):
        v = 1 if c["VP"] == "NA" else int(c["VP"])
        rows.append({"gpus": int(c["GPUs"]), "sequence": int(c["SeqLen"]), "layers": int(c["Layers"]),
                     "tensor": int(c["TP"]), "pipeline": int(c["PP"]), "context": int(c["CP"]),
                     "expert_parallel": int(c["EP"]), "virtual_stages": v, "microbatch": int(c["MBS"]),
                     "gbs": int(c["GBS"]), "step_s": step})  # fmt: skip
    return rows


def shape_of(row: dict[str, Any]) -> TransformerShape:
    vocab = dg.padded_vocabulary(TOKENIZER, row["tensor"])
    return TransformerShape(row["layers"], HIDDEN, HEADS, row["sequence"], vocab, "grok-1", kv_heads=KV_HEADS,
                            ffn_hidden=FFN, **LLAMA_STYLE)  # fmt: skip


def scheme_of(row: dict[str, Any], factor: float) -> HybridParallel:
    """Rule 3: the DGX Cloud test's scheme of the row (sequence parallelism, no recomputation, t = 4
    so ``tp_overlap="all"``) with Grok-1's shape and experts, at the GEMM factor ``factor``."""
    return dg.scheme_of({**row, "sequence_parallel": True, "recompute": None}, factor, shape=shape_of(row),
                        experts=EXPERTS, expert_parallel=row["expert_parallel"], top_k=TOP_K,
                        capacity_factor=CAPACITY)  # fmt: skip


def predict_row(row: dict[str, Any], factor: float) -> dict[str, Any]:
    return dg.predict_scheme(scheme_of(row, factor), row)


def build() -> dict[str, Any]:
    factor = json.loads(dg.OUT.read_text())["factor"]  # rule 4: the DGX Cloud test's, frozen
    out = []
    for row in read_rows():
        pred, bare = predict_row(row, factor), predict_row(row, 1.0)
        tps = dg.measured_tps(row)
        shape = shape_of(row)
        total = shape.parameters + (EXPERTS - 1) * shape.layers * shape.mlp_parameters  # all 8 experts
        out.append({**row, "measured_tps": tps, "predicted_tps": pred["tps"],
                    "predicted_step_s": pred["step_s"], "error_pct": 100 * (pred["tps"] / tps - 1),
                    "unanchored_pct": 100 * (bare["tps"] / tps - 1), "memory_gb": pred["memory_gb"],
                    "over_memory": pred["memory_gb"] * 1e9 > MEMORY_LIMIT, "breakdown_s": pred["breakdown_s"],
                    "parameters": total})  # fmt: skip
    return {"source": SOURCE, "rules": RULES, "targets": dict(rp.TARGETS), "factor": factor, "rows": out,
            "summary": rp.accuracy(out),
            "unanchored": rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in out])}  # fmt: skip


def check() -> int:
    """Whether every row's configuration is accepted: predicts each, shows no number."""
    rows = read_rows()
    for row in rows:
        predict_row(row, 1.0)
    print(f"{len(rows)} rows, every configuration accepted")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="predict every row; print and store nothing")
    if parser.parse_args(argv).check:
        return check()
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for r in record["rows"]:
        print(f"{r['gpus']:>5} GPUs l={r['layers']:<3} s={r['sequence']} e={r['expert_parallel']} measured "
              f"{r['step_s']:6.2f} s predicted {r['predicted_step_s']:6.2f} s {r['error_pct']:+6.1f}%  "
              f"unanchored {r['unanchored_pct']:+6.1f}%  {r['memory_gb']:5.1f} GB")  # fmt: skip
    print("summary", record["summary"], "unanchored", record["unanchored"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
