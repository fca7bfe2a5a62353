"""H100 rows with every communication overlap, predicted a priori (published/PREREG-2026-11-27-h100.md).

    python validation/run_published_h100.py      # writes validation/published/h100.json

Two series, no anchor in either: the shipped H100 GEMM table is used as measured.

- ``megatron-core-weak`` (the headline, tier A): Megatron-Core r0.8.0's weak-scaling table on H100s
  (NVIDIA/Megatron-LM ``images/model_table.png``), 9 rows from 1.7B on 48 GPUs to 462B on 6144, with
  DP, TP and PP overlap as the README states (``zero=1, zero_overlap=True``, ``tp_overlap="all"`` with
  sequence parallelism). The unpublished micro-batch size, virtual stages and recomputation are chosen by
  the preregistered rule: the fitting candidate (memory <= 80 GB) the model predicts fastest.
- ``torchtitan-asynctp`` (tier B, beside): Llama 3 70B on 256 H100s, FSDP 32 x TP 8, vanilla and
  async TP (``tp_overlap=False`` / ``"all"``), full activation checkpointing.

``tests/test_published_h100.py`` recomputes every stored prediction exactly.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402

from queuesgd import Cluster, HybridParallel, Workload, predict  # noqa: E402
from queuesgd.compute_model import ComputeModel  # noqa: E402
from queuesgd.errors import QueuesgdError  # noqa: E402
from queuesgd.gemm_table import GemmTable, load_gemm_table  # noqa: E402
from queuesgd.model_shapes import LLAMA3_70B, TransformerShape  # noqa: E402

OUT = HERE / "published" / "h100.json"
RULES = "validation/published/PREREG-2026-11-27-h100.md"
SEQUENCE, VOCABULARY = 4096, 131072
HBM3, HBM2E = 3.35e12, 2.4e12
MEMORY_LIMIT = 80e9
MCORE_SOURCE = (
    "NVIDIA/Megatron-LM README.md and images/model_table.png (added in "
    "f2e5db402c44ae309aa6448bcb4ae87e8ae0f5f4, 2024-07-15; read at "
    "d98e8a64ddf34856e74b24714e3bedb2f5a39553): Megatron-Core r0.8.0 weak scaling on H100s"
)
TITAN_SOURCE = (
    "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (read at "
    "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a): Llama3 70b on 256 H100s, FSDP=32, TP=8, full AC, "
    "local batch 16"
)
#: (size, heads, hidden, layers, TP, PP, DP, GPUs, batch, measured TFLOP/s per GPU), the table's every row
MCORE_ROWS = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7),
    ("119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8),
    ("314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9),
]
#: (row, tp_overlap, measured tokens/s per GPU)
TITAN_ROWS = [("vanilla TP", False, 597.3), ("async TP", "all", 652.4)]
TITAN_GPUS, TITAN_TP, TITAN_BATCH = 256, 8, 16
MICROBATCHES = (1, 2, 4)
RECOMPUTE = (None, "selective", "full")


def dgx_h100(gpus: int) -> Cluster:
    """DGX H100 nodes (rule 4): 8 GPUs, NVLink 450 GB/s per direction (2 us), 8 rails of 400 Gbit/s (5 us)."""
    return Cluster(gpus, 400e9 / 8, "5us", gpus_per_node=8, node_bandwidth="450GB/s", node_latency="2us",
                   rails=8)  # fmt: skip


def h100_compute(
    memory_bandwidth: float = HBM3, factor: float = 1.0, table: GemmTable | None = None
) -> ComputeModel:
    """The shipped H100 table as measured (rule 5: ``factor`` 1, no anchor), or ``table`` in its place.

    Another ``factor`` multiplies every GEMM efficiency (capped at 1): the diagnosis's anchored variants
    (``validation/diagnose_published_h100.py``), never the preregistered rows. A table's flash rows, where
    it has them, are measured attention and keep their efficiencies.
    """
    table = load_gemm_table("h100-bf16") if table is None else table
    if factor != 1.0:
        scaled = tuple(min(1.0, e * factor) for e in table.efficiencies)
        meta = {**dict(table.provenance), "factor": factor}
        table = dataclasses.replace(table, efficiencies=scaled, provenance=meta)
    return ComputeModel(table, memory_bandwidth)


def fp32_gradients(w: Workload) -> Workload:
    """``w`` with its gradients (and every layer's) in 4 bytes per parameter, its parameters in 2."""
    return w.gradients_scaled(2)


def mcore_shape(layers: int, hidden: int, heads: int) -> TransformerShape:
    """Rule 1: GPT defaults, untied embeddings, flash attention, s = 4096, V = 131072."""
    return TransformerShape(layers, hidden, heads, SEQUENCE, VOCABULARY, tied_embeddings=False,
                            attention="flash")  # fmt: skip


def megatron_flops(layers: int, hidden: int) -> float:
    """Megatron's FLOPs per sequence (86d5aa5, MHA, 4h MLP): ``72 s l h^2 (1 + s/(6h) + V/(12 l h))``."""
    s, h, v = SEQUENCE, hidden, VOCABULARY
    return 72.0 * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))


def candidates(layers: int, pipeline: int, data: int, batch: int) -> list[dict[str, Any]]:
    """Rule 3's candidates for the unpublished micro-batch, virtual stages and recomputation."""
    out = []
    per = layers // pipeline
    for b in MICROBATCHES:
        if batch % (data * b):
            continue
        m = batch // (data * b)
        interleaved = pipeline > 1 and m % pipeline == 0
        vs = [1] + ([v for v in range(2, per + 1) if per % v == 0] if interleaved else [])
        for v in vs:
            for rc in RECOMPUTE:
                out.append({"microbatch": b, "microbatches": m, "virtual_stages": v, "recompute": rc,
                            "schedule": "interleaved" if v > 1 else "1f1b"})  # fmt: skip
    return out


def mcore_predict(
    row: tuple, config: dict[str, Any], overlap: bool = True, factor: float = 1.0
) -> dict[str, Any]:
    """One candidate's prediction: TFLOP/s per GPU (rule 6), memory per GPU (``factor``: h100_compute's)."""
    _, heads, hidden, layers, t, p, d, gpus, batch, _ = row
    shape = mcore_shape(layers, hidden, heads)
    scheme = HybridParallel(
        shape=shape, compute_model=h100_compute(factor=factor), tensor=t, pipeline=p, zero=1,
        zero_overlap=overlap,
        sequence_parallel=t > 1, tp_overlap=("all" if t > 1 else False) if overlap else False,
        microbatches=config["microbatches"], schedule=config["schedule"],
        virtual_stages=config["virtual_stages"], recompute=config["recompute"],
    )  # fmt: skip
    w = fp32_gradients(shape.workload(config["microbatch"], memory_bandwidth=HBM3))
    pred = predict(scheme, w, dgx_h100(gpus))
    return {"tflops": pred.throughput * megatron_flops(layers, hidden) / gpus / 1e12,
            "memory_gb": pred.details["memory"].total / 1e9}  # fmt: skip


def mcore_row(row: tuple) -> dict[str, Any]:
    """Rule 3: the fitting candidate predicted fastest, the spread over the fitting ones, the old rules."""
    size, _, _, layers, t, p, d, gpus, batch, measured = row
    scored = []
    for c in candidates(layers, p, d, batch):
        try:
            scored.append((c, mcore_predict(row, c)))
        except QueuesgdError:
            continue  # a combination the scheme refuses is not a candidate
    fitting = [(c, r) for c, r in scored if r["memory_gb"] * 1e9 <= MEMORY_LIMIT]
    flagged = not fitting
    if flagged:
        chosen, result = min(scored, key=lambda cr: cr[1]["memory_gb"])
    else:
        chosen, result = max(fitting, key=lambda cr: cr[1]["tflops"])
    spread = [r["tflops"] for _, r in fitting] or [result["tflops"]]
    without = mcore_predict(row, chosen, overlap=False)["tflops"]
    return {
        "size": size, "tp": t, "pp": p, "dp": d, "gpus": gpus, "batch": batch,
        "measured_tflops": measured, "chosen": chosen, "memory_gb": result["memory_gb"], "none_fit": flagged,
        "candidates": len(scored), "fitting": len(fitting),
        "predicted_tflops": result["tflops"], "error_pct": 100 * (result["tflops"] / measured - 1),
        "fitting_range_pct": [100 * (min(spread) / measured - 1), 100 * (max(spread) / measured - 1)],
        "without_overlaps_pct": 100 * (without / measured - 1),
    }  # fmt: skip


def titan_predict(tp_overlap: Any) -> float:
    """Series 2: tokens per second per GPU of Llama 3 70B, FSDP 32 x TP 8 (rules 2-5)."""
    shape = LLAMA3_70B
    scheme = HybridParallel(
        shape=shape, compute_model=h100_compute(HBM2E), tensor=TITAN_TP, pipeline=1, zero=3,
        zero_overlap=True, sequence_parallel=True, recompute="full", microbatches=1, tp_overlap=tp_overlap,
    )  # fmt: skip
    w = fp32_gradients(shape.workload(TITAN_BATCH, memory_bandwidth=HBM2E))
    return predict(scheme, w, dgx_h100(TITAN_GPUS)).throughput * shape.sequence / TITAN_GPUS


def build() -> dict[str, Any]:
    mcore = [mcore_row(r) for r in MCORE_ROWS]
    titan = []
    for name, ov, measured in TITAN_ROWS:
        pred = titan_predict(ov)
        titan.append({"row": name, "tp_overlap": ov, "measured_tps": measured, "predicted_tps": pred,
                      "error_pct": 100 * (pred / measured - 1)})  # fmt: skip
    return {
        "rules": RULES,
        "targets": dict(rp.TARGETS),
        "megatron-core-weak": {"source": MCORE_SOURCE, "rows": mcore,
                               "summary": rp.accuracy(mcore),
                               "without_overlaps": rp.accuracy(
                                   [{"error_pct": r["without_overlaps_pct"]} for r in mcore])},
        "torchtitan-asynctp": {"source": TITAN_SOURCE, "rows": titan,
                               "summary": rp.accuracy(titan),
                               "ratio": {"measured": TITAN_ROWS[1][2] / TITAN_ROWS[0][2],
                                         "predicted": titan[1]["predicted_tps"] / titan[0]["predicted_tps"]}},
    }  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for r in record["megatron-core-weak"]["rows"]:
        c = r["chosen"]
        print(f"{r['size']:>5} t={r['tp']} p={r['pp']} b={c['microbatch']} v={c['virtual_stages']} "
              f"rc={c['recompute']!s:<9} {r['memory_gb']:5.1f} GB  measured {r['measured_tflops']:6.1f} "
              f"predicted {r['predicted_tflops']:6.1f}  {r['error_pct']:+6.1f}%  (without overlaps "
              f"{r['without_overlaps_pct']:+6.1f}%, fitting {r['fitting_range_pct'][0]:+.1f}.."
              f"{r['fitting_range_pct'][1]:+.1f}%)")  # fmt: skip
    print(record["megatron-core-weak"]["summary"])
    for r in record["torchtitan-asynctp"]["rows"]:
        print(f"{r['row']:<11} measured {r['measured_tps']:6.1f} predicted {r['predicted_tps']:7.1f} "
              f"{r['error_pct']:+6.1f}%")  # fmt: skip
    print(record["torchtitan-asynctp"]["ratio"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
