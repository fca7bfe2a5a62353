"""NVIDIA's DGX Cloud benchmarks (NeMo on H100, BF16), predicted with one anchor (PREREG-2026-11-27-dgxc.md).

    python validation/run_published_dgxc.py            # writes validation/published/dgxc.json
    python validation/run_published_dgxc.py --check    # only: does HybridParallel accept every row?

Every BF16 column of the six pretraining tables stored verbatim in ``published/dgxc-tables.md``
(NVIDIA/dgxc-benchmarking at 35a9aec, "v24.11.1"): GPT-3 175B, Llama 3.1 8B / 70B / 405B, Nemotron-4
15B / 340B, 35 rows from 8 to 2304 H100s. Each row is ``HybridParallel`` with the recipe's own
parallelism, overlaps and recomputation (rule 3) on DGX H100 nodes (rule 4), its compute the shipped
H100 GEMM table times one factor solved on Llama 3.1 8B on 8 GPUs (rule 5); the table as measured
(unanchored) is reported beside. ``tests/test_published_dgxc.py`` recomputes every stored prediction.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_h100 as h100  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

from queuesgd import HybridParallel, predict  # noqa: E402
from queuesgd.gemm_table import GemmTable  # noqa: E402
from queuesgd.model_shapes import LLAMA_STYLE, TransformerShape  # noqa: E402

OUT = HERE / "published" / "dgxc.json"
TABLES = HERE / "published" / "dgxc-tables.md"
RULES = "validation/published/PREREG-2026-11-27-dgxc.md"
SOURCE = (
    "NVIDIA/dgxc-benchmarking at 35a9aecc8d5b17d99d80f52f38c75ade0dbab7ae (v24.11.1): the BF16 tables of "
    "nemo_megatron/README_175b.md, llama3.1/README_8b.md, README_70b.md and README_405b.md, and "
    "nemotron/README_15b.md and README_340b.md"
)
MEMORY_LIMIT = 80e9
ANCHOR = ("llama3.1-8b", 8)
#: rule 2's tokenizer vocabularies, padded by Megatron to a multiple of 128 x t
TOKENIZER = {"gpt3-175b": 50257, "llama3.1": 128256, "nemotron4": 256000}
#: Nemotron-4: squared ReLU (not gated), layernorm1p, no biases, rotary, untied, no dropout (rule 2)
NEMOTRON_STYLE = {"gated": False, "bias": False, "norm": "layernorm", "tied_embeddings": False,
                  "position_embedding": False, "dropout": False, "attention": "flash"}  # fmt: skip
#: rule 2's shapes (layers, hidden, heads, sequence, kv heads, ffn) and styles; rule 3's (t, p, c, v, MBS),
#: sequence parallelism and recomputation, by the table's title
RECIPES: dict[str, dict[str, Any]] = {
    "NeMo Megatron 24.11 BF16": {
        "model": "gpt3-175b", "tokenizer": "gpt3-175b", "shape": (96, 12288, 96, 2048, None, None),
        "style": {"attention": "flash"}, "parallel": (4, 8, 1, 12, 1), "sp": True, "recompute": None},
    "Llama 3.1 8b 24.09 BF16": {
        "model": "llama3.1-8b", "tokenizer": "llama3.1", "shape": (32, 4096, 32, 8192, 8, 14336),
        "style": LLAMA_STYLE, "parallel": (1, 1, 2, 1, 1), "sp": False, "recompute": None},
    "Llama 3.1 70b 24.09 BF16": {
        "model": "llama3.1-70b", "tokenizer": "llama3.1", "shape": (80, 8192, 64, 8192, 8, 28672),
        "style": LLAMA_STYLE, "parallel": (4, 4, 2, 5, 1), "sp": True, "recompute": None},
    "Llama 3.1 405b 24.09 BF16": {
        "model": "llama3.1-405b", "tokenizer": "llama3.1", "shape": (126, 16384, 128, 8192, 16, 53248),
        "style": LLAMA_STYLE, "parallel": (8, 9, 2, 7, 1), "sp": True, "recompute": None},
    "Nemotron4 15b 24.11 BF16": {
        "model": "nemotron4-15b", "tokenizer": "nemotron4", "shape": (32, 6144, 48, 4096, 8, 24576),
        "style": NEMOTRON_STYLE, "parallel": (4, 1, 1, 1, 4), "sp": True, "recompute": None},
    "Nemotron4 340b 24.11 BF16": {
        "model": "nemotron4-340b", "tokenizer": "nemotron4", "shape": (96, 18432, 96, 4096, 8, 73728),
        "style": NEMOTRON_STYLE, "parallel": (8, 8, 1, 12, 1), "sp": True, "recompute": "selective"},
}  # fmt: skip
STEP = "Training step time (seconds per step)"


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_rows(path: Path = TABLES) -> list[dict[str, Any]]:
    """Every BF16 column of the stored tables as a row (rule 1), with the recipe's fields (rules 2-3)."""
    rows = []
    for block in path.read_text().split("\n## `")[1:]:
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        head = cells(lines[0])
        title = head[0].split(" (")[0]
        recipe = RECIPES[title]
        table = {c[0]: c[1:] for c in map(cells, lines[2:])}
        gpus = [int(re.search(r"(\d+)x H100", h).group(1)) for h in head[1:] if "H100" in h]
        gbs = [int(g) for g in re.findall(r"GBS=(\d+)", lines[0])] or [int(x) for x in table["GBS"] if x]
        steps = [float(x.replace(" ", "")) for x in table[STEP] if x]
        layers = [int(x) for x in table.get("Layers", []) if x]
        pps = [int(x) for x in table.get("PP", []) if x]
        for i, (n, batch, step) in enumerate(zip(gpus, gbs, steps, strict=True)):
            t, p, c, v, mbs = recipe["parallel"]
            if pps:  # the 405B table gives each column's pipeline stages and layers
                p, v = pps[i], (v if pps[i] > 1 else 1)
            rows.append({
                "model": recipe["model"], "title": title, "gpus": n, "gbs": batch, "step_s": step,
                "layers": layers[i] if layers else recipe["shape"][0], "tensor": t, "pipeline": p,
                "context": c, "virtual_stages": v, "microbatch": mbs, "sequence_parallel": recipe["sp"],
                "recompute": recipe["recompute"], "sequence": recipe["shape"][3],
            })  # fmt: skip
    return rows


def padded_vocabulary(tokenizer: int, tensor: int) -> int:
    """Megatron's padding of the vocabulary: a multiple of ``make_vocab_size_divisible_by (128) x t``.

    >>> padded_vocabulary(50257, 4), padded_vocabulary(128256, 8), padded_vocabulary(256000, 8)
    (50688, 129024, 256000)
    """
    unit = 128 * tensor
    return -(-tokenizer // unit) * unit


def shape_of(row: dict[str, Any]) -> TransformerShape:
    """Rule 2: the recipe's shape at the row's layers and tensor-parallel degree."""
    recipe = next(r for r in RECIPES.values() if r["model"] == row["model"])
    _, hidden, heads, seq, kv, ffn = recipe["shape"]
    vocab = padded_vocabulary(TOKENIZER[recipe["tokenizer"]], row["tensor"])
    return TransformerShape(row["layers"], hidden, heads, seq, vocab, kv_heads=kv, ffn_hidden=ffn,
                            **recipe["style"])  # fmt: skip


def scheme_of(
    row: dict[str, Any],
    factor: float,
    table: GemmTable | None = None,
    *,
    shape: TransformerShape | None = None,
    **extra: Any,
) -> HybridParallel:
    """Rule 3: the recipe's parallelism, overlaps and recomputation, at the GEMM factor ``factor``.

    ``table``: a measured GEMM table in the shipped H100 table's place (PREREG-2026-11-27-dgxc-gpu.md);
    ``shape`` (default: the recipe's, :func:`shape_of`) and ``extra`` fields (experts) for another
    recipe of the same stack (``run_published_grok.py``).
    """
    t, p, c, v = row["tensor"], row["pipeline"], row["context"], row["virtual_stages"]
    d = row["gpus"] // (t * p * c)
    return HybridParallel(
        shape=shape_of(row) if shape is None else shape,
        compute_model=h100.h100_compute(factor=factor, table=table), tensor=t,
        pipeline=p, context=c, data=d, microbatches=row["gbs"] // (row["microbatch"] * d),
        schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
        sequence_parallel=row["sequence_parallel"], recompute=row["recompute"], zero=1, zero_overlap=True,
        tp_overlap="all" if t > 1 else False, **extra,
    )  # fmt: skip


def predict_row(row: dict[str, Any], factor: float, table: GemmTable | None = None) -> dict[str, Any]:
    """Tokens per second, memory per GPU and the step's breakdown of one row (rules 1 and 7)."""
    return predict_scheme(scheme_of(row, factor, table), row)


def predict_scheme(scheme: HybridParallel, row: dict[str, Any]) -> dict[str, Any]:
    """:func:`predict_row`'s figures of ``row`` under ``scheme``: its shape's workload, DGX H100 nodes."""
    w = scheme.shape.workload(row["microbatch"], memory_bandwidth=h100.HBM3)
    pred = predict(scheme, w, h100.dgx_h100(row["gpus"]))
    tps = pred.throughput * row["sequence"]
    return {"tps": tps, "step_s": row["gbs"] * row["sequence"] / tps,
            "memory_gb": pred.details["memory"].total / 1e9, "breakdown_s": dict(pred.breakdown)}  # fmt: skip


def measured_tps(row: dict[str, Any]) -> float:
    return row["gbs"] * row["sequence"] / row["step_s"]


def is_anchor(row: dict[str, Any]) -> bool:
    return (row["model"], row["gpus"]) == ANCHOR


def anchor_factor(rows: list[dict[str, Any]], table: GemmTable | None = None) -> float:
    """Rule 5: the GEMM factor that predicts the anchor row (Llama 3.1 8B on 8 GPUs) exactly."""
    (row,) = [r for r in rows if is_anchor(r)]
    return float(brentq(lambda f: predict_row(row, f, table)["tps"] / measured_tps(row) - 1.0, 0.2, 1.5,
                        xtol=1e-14, rtol=1e-14, maxiter=200))  # fmt: skip


def scaling(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rule 7: per model, tokens/s per GPU at its largest column over its smallest, measured and predicted."""
    out = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model and r["layers"] == max(
            x["layers"] for x in rows if x["model"] == model)]  # fmt: skip
        lo, hi = min(mine, key=lambda r: r["gpus"]), max(mine, key=lambda r: r["gpus"])
        per = {k: (hi[k] / hi["gpus"]) / (lo[k] / lo["gpus"]) for k in ("measured_tps", "predicted_tps")}
        out[model] = {"from_gpus": lo["gpus"], "to_gpus": hi["gpus"], **per}
    return out


def build() -> dict[str, Any]:
    rows = read_rows()
    factor = anchor_factor(rows)
    out = []
    for row in rows:
        pred, bare = predict_row(row, factor), predict_row(row, 1.0)
        tps = measured_tps(row)
        out.append({
            **row, "anchor": is_anchor(row), "measured_tps": tps, "predicted_tps": pred["tps"],
            "predicted_step_s": pred["step_s"], "error_pct": 100 * (pred["tps"] / tps - 1),
            "unanchored_pct": 100 * (bare["tps"] / tps - 1), "memory_gb": pred["memory_gb"],
            "over_memory": pred["memory_gb"] * 1e9 > MEMORY_LIMIT, "breakdown_s": pred["breakdown_s"],
            "parameters": shape_of(row).parameters,
            "layout": f"{row['tensor']} / {row['pipeline']} / {row['context']} / {row['virtual_stages']}",
        })  # fmt: skip
    counted = [r for r in out if not r["anchor"]]
    models = list(dict.fromkeys(r["model"] for r in out))
    return {
        "source": SOURCE, "rules": RULES, "targets": dict(rp.TARGETS),
        "anchor": dict(zip(("model", "gpus"), ANCHOR, strict=True)), "factor": factor, "rows": out,
        "summary": rp.accuracy(counted),
        "unanchored": rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in out]),
        "by_model": {m: rp.accuracy([r for r in counted if r["model"] == m]) for m in models},
        "unanchored_by_model": {m: rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in out
                                                if r["model"] == m]) for m in models},
        "scaling": scaling(out),
    }  # fmt: skip


def check() -> int:
    """Whether every row's configuration is accepted: builds each scheme, prints no prediction."""
    rows = read_rows()
    for row in rows:
        predict_row(row, 1.0)  # raises where a configuration is refused; its numbers are not shown
    print(f"{len(rows)} rows, every configuration accepted; parameters (B):",
          sorted({(r["model"], r["layers"], round(shape_of(r).parameters / 1e9, 2)) for r in rows}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="build every row's scheme; predict nothing")
    if parser.parse_args(argv).check:
        return check()
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"factor {record['factor']:.4f} (anchor {ANCHOR})")
    for r in record["rows"]:
        print(f"{r['model']:<15} {r['gpus']:>5} GPUs l={r['layers']:<3} measured {r['step_s']:6.2f} s "
              f"predicted {r['predicted_step_s']:6.2f} s {r['error_pct']:+6.1f}%  unanchored "
              f"{r['unanchored_pct']:+6.1f}%  {r['memory_gb']:5.1f} GB{'  anchor' if r['anchor'] else ''}")
    print("summary", record["summary"], "unanchored", record["unanchored"])
    for m, s in record["by_model"].items():
        print(f"  {m:<15} {s}  scaling {record['scaling'][m]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
