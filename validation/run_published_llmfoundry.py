"""LLM Foundry's MPT benchmarks (FSDP under Composer, bf16), predicted a priori.

    python validation/run_published_llmfoundry.py      # writes validation/published/llmfoundry.json

Rules: ``validation/published/PREREG-2026-11-27-llmfoundry.md`` (committed before any row was
predicted). Every row of the four bf16 tables of mosaicml/llm-foundry's
``scripts/train/benchmarking/README.md``, stored verbatim in ``published/llmfoundry-tables.md``:

- ``h100`` (the headline, tier A): the two H100 80GB BF16 tables, 70 rows, with one anchor (a factor on
  every GEMM's efficiency of the shipped H100 table, solved on the rule's row: 13b, 2048, 8 GPUs); the
  same rows unanchored (the table as measured) beside it.
- ``a100`` (tier B): the A100 80GB and 40GB tables, 139 rows, with SC'21 Table 1's factor (no new anchor).

``tests/test_published_llmfoundry.py`` recomputes every stored prediction exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scipy.optimize import brentq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_h100 as h100  # noqa: E402

from queuesgd import Cluster, HybridParallel, predict  # noqa: E402
from queuesgd.compute_model import ComputeModel  # noqa: E402
from queuesgd.model_shapes import TransformerShape  # noqa: E402

OUT = HERE / "published" / "llmfoundry.json"
TABLES = HERE / "published" / "llmfoundry-tables.md"
RULES = "validation/published/PREREG-2026-11-27-llmfoundry.md"
SOURCE = (
    "mosaicml/llm-foundry scripts/train/benchmarking/README.md at 495218376830947dce625efabc4d86be7c47cc45: "
    "MPT training benchmarks (Composer, FSDP), Throughput (T/s)"
)
VOCABULARY = 50368
#: (layers, d_model, heads) of the MPT yamls (rule 1)
SIZES = {
    "125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12), "1b": (24, 2048, 16),
    "3b": (32, 2560, 20), "7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56),
    "70b": (80, 8192, 64),
}  # fmt: skip
#: GPU memory in bytes and HBM bandwidth in bytes/s (rules 3-4)
GPUS = {"h100_80gb": (80e9, h100.HBM3), "a100_80gb": (80e9, rp.A100_MEMORY), "a100_40gb": (40e9, 1.555e12)}
#: the anchor row of the H100 series (rule 5): table, model, SeqLen, GPUs
ANCHOR = ("H100 80GB BF16", "13b", 2048, 8)
COLUMNS = ("model", "seq", "gpus", "gpu", "mfu", "hfu", "model_tflop", "microbatch", "grad_accum",
           "global_batch", "sps", "tps", "tps_per_gpu", "global_tokens", "precision", "mp_mode", "sharding",
           "activation_checkpointing", "cpu_offload", "num_params")  # fmt: skip


def read_tables(
    path: Path = TABLES, columns: tuple[str, ...] | dict[str, tuple[str, ...]] = COLUMNS
) -> list[dict[str, Any]]:
    """Every row of the stored tables, in order, with its table's title and the row's text.

    ``columns`` names the cells, or, by table title, each table's (tables of different columns).
    """
    rows: list[dict[str, Any]] = []
    table = None
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            table = line[3:].strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not cells[0][:1].isdigit():
            continue
        names = columns[table] if isinstance(columns, dict) else columns
        row: dict[str, Any] = dict(zip(names, cells, strict=True))
        for k in ("seq", "gpus", "microbatch", "grad_accum", "global_batch", "tps", "num_params"):
            row[k] = int(row[k])
        row["activation_checkpointing"] = row["activation_checkpointing"] == "True"
        rows.append({"table": table, **row, "quote": line})
    return rows


def mpt_shape(model: str, seq: int) -> TransformerShape:
    """Rule 1: GPT defaults, tied embeddings, learned positions, no dropout, flash attention."""
    layers, hidden, heads = SIZES[model]
    return TransformerShape(layers, hidden, heads, seq, VOCABULARY, name=f"mpt-{model}", tied_embeddings=True,
                            dropout=False, attention="flash")  # fmt: skip


def a100_compute(factor: float, memory_bandwidth: float) -> ComputeModel:
    """Rule 5 (A100): ``run_published.a100_compute``, its memory-bound curves at ``memory_bandwidth``."""
    base = rp.a100_compute(factor)
    scale = memory_bandwidth / rp.A100_MEMORY
    t = base.table
    memory = tuple((k, s, tuple(b * scale for b in bws)) for k, s, bws in t.memory)
    table = type(t)(t.volumes, t.efficiencies, t.peak_flops, memory, {**dict(t.provenance), "memory": scale})
    return ComputeModel(table, memory_bandwidth)


def compute_model(row: dict[str, Any], factor: float) -> ComputeModel:
    """The row's device: the H100 table x ``factor``, or the A100 model of ``factor``."""
    bandwidth = GPUS[row["gpu"]][1]
    if row["gpu"].startswith("h100"):
        return h100.h100_compute(bandwidth, factor)
    return a100_compute(factor, bandwidth)


def cluster(row: dict[str, Any]) -> Cluster:
    """Rules 3-4: DGX H100 nodes, or the A100 nodes of SC'21 (8 x 200 Gbit/s)."""
    return h100.dgx_h100(row["gpus"]) if row["gpu"].startswith("h100") else rp.selene(row["gpus"])


def predict_row(row: dict[str, Any], factor: float, overlap: bool = True) -> dict[str, Any]:
    """Rule 2: the row's predicted tokens per second over all GPUs and memory per GPU.

    Also, for the diagnoses: the step's and its data-parallel collectives' seconds, their ratio to the
    compute (``collective_ratio``), and the workload's parameter and gradient bytes.
    """
    shape = mpt_shape(row["model"], row["seq"])
    model = compute_model(row, factor)
    scheme = HybridParallel(
        shape=shape, compute_model=model, tensor=1, pipeline=1,
        zero=3 if row["sharding"] == "FULL_SHARD" else 2, zero_overlap=overlap,
        microbatches=row["grad_accum"], recompute="full" if row["activation_checkpointing"] else None,
    )  # fmt: skip
    w = shape.workload(row["microbatch"], memory_bandwidth=GPUS[row["gpu"]][1])
    if row["mp_mode"] == "DEFAULT":
        w = h100.fp32_gradients(w)
    p = predict(scheme, w, cluster(row))
    d = p.details  # the collectives of a step over its compute: the diagnosis's collective ratio
    ratio = d["dp_per_step"] / (p.iteration_time - d["dp_exposed_per_step"])
    return {"tps": p.throughput * row["seq"], "memory_gb": d["memory"].total / 1e9, "collective_ratio": ratio,
            "step_s": p.iteration_time, "dp_s": d["dp_per_step"], "parameter_bytes": w.parameter_bytes,
            "gradient_bytes": w.gradient_bytes}  # fmt: skip


def is_anchor(row: dict[str, Any]) -> bool:
    return (row["table"], row["model"], row["seq"], row["gpus"]) == ANCHOR


def h100_factor(rows: list[dict[str, Any]]) -> float:
    """Rule 5: the factor on every GEMM's efficiency that makes the anchor row's tokens/s its measured."""
    (row,) = [r for r in rows if is_anchor(r)]
    return float(brentq(lambda f: predict_row(row, f)["tps"] / row["tps"] - 1.0, 0.2, 1.5,
                        xtol=1e-14, rtol=1e-14, maxiter=200))  # fmt: skip


def band(seq: int) -> str:
    return "<= 2048" if seq <= 2048 else ("4096-8192" if seq <= 8192 else ">= 16384")


def breakdown(rows: list[dict[str, Any]], key: str = "error_pct") -> dict[str, Any]:
    """Rule 8: accuracy by table, sequence band, checkpointing and nodes (counted rows only)."""
    counted = [r for r in rows if not r["anchor"]]
    groups: dict[str, Any] = {
        "table": lambda r: r["table"], "sequence": lambda r: band(r["seq"]),
        "checkpointing": lambda r: "full" if r["activation_checkpointing"] else "none",
        "nodes": lambda r: "one node" if r["gpus"] <= 8 else "several nodes",
    }  # fmt: skip
    out = {}
    for name, fn in groups.items():
        keys = sorted({fn(r) for r in counted}, key=[fn(r) for r in counted].index)
        out[name] = {k: rp.accuracy([{"error_pct": r[key]} for r in counted if fn(r) == k]) for k in keys}
    return out


def series(rows: list[dict[str, Any]], factor: float, unanchored: bool) -> dict[str, Any]:
    out = []
    for row in rows:
        pred = predict_row(row, factor)
        rec = {k: row[k] for k in ("table", "model", "seq", "gpus", "gpu", "microbatch", "grad_accum",
                                   "sharding", "mp_mode", "activation_checkpointing", "num_params",
                                   "quote")}  # fmt: skip
        rec.update({
            "anchor": is_anchor(row), "measured_tps": row["tps"],
            "predicted_tps": pred["tps"], "error_pct": 100 * (pred["tps"] / row["tps"] - 1),
            "memory_gb": pred["memory_gb"], "over_memory": pred["memory_gb"] * 1e9 > GPUS[row["gpu"]][0],
            "without_overlap_pct": 100 * (predict_row(row, factor, overlap=False)["tps"] / row["tps"] - 1),
        })  # fmt: skip
        if unanchored:
            rec["unanchored_pct"] = 100 * (predict_row(row, 1.0)["tps"] / row["tps"] - 1)
        out.append(rec)
    counted = [r for r in out if not r["anchor"]]
    record: dict[str, Any] = {
        "factor": factor, "rows": out, "summary": rp.accuracy(counted),
        "without_overlap": rp.accuracy([{"error_pct": r["without_overlap_pct"]} for r in counted]),
        "breakdown": breakdown(out),
    }  # fmt: skip
    if unanchored:
        record["unanchored"] = rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in out])
        record["unanchored_breakdown"] = breakdown([{**r, "anchor": False} for r in out], "unanchored_pct")
    return record


def build() -> dict[str, Any]:
    rows = read_tables()
    h = [r for r in rows if r["gpu"].startswith("h100")]
    a = [r for r in rows if r["gpu"].startswith("a100")]
    return {
        "source": SOURCE, "rules": RULES, "targets": dict(rp.TARGETS),
        "h100": {"anchor": dict(zip(("table", "model", "seq", "gpus"), ANCHOR, strict=True)),
                 **series(h, h100_factor(h), unanchored=True)},
        "a100": series(a, rp.table1_factor(rp.megatron_inputs()), unanchored=False),
    }  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for name in ("h100", "a100"):
        s = record[name]
        print(f"== {name}: factor {s['factor']:.4f}")
        for r in s["rows"]:
            extra = f" unanchored {r['unanchored_pct']:+6.1f}%" if "unanchored_pct" in r else ""
            print(f"{r['table'][:14]:<14} {r['model']:>5} s={r['seq']:<6} n={r['gpus']:<4} "
                  f"b={r['microbatch']:<3} ga={r['grad_accum']:<3} ac={r['activation_checkpointing']!s:<5} "
                  f"{r['sharding']:<13} measured {r['measured_tps']:>9} predicted {r['predicted_tps']:11.0f} "
                  f"{r['error_pct']:+6.1f}%{' (anchor)' if r['anchor'] else ''}{extra}")  # fmt: skip
        print(s["summary"], "without overlap", s["without_overlap"])
        if "unanchored" in s:
            print("unanchored", s["unanchored"])
        for k, v in s["breakdown"].items():
            print(" ", k, {g: (a["rows"], round(a["median_abs_pct"], 1), round(a["max_abs_pct"], 1))
                            for g, a in v.items()})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
