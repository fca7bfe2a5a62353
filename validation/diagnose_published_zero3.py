"""Diagnosis of SC'21 Table 2's ZeRO-3 rows (published/published.json): what one anchor cannot give.

    python validation/diagnose_published_zero3.py    # writes published/zero3-diagnosis.json

Written after the rows were predicted, so **not evidence**: nothing here changes a stored prediction
(the rule of ``run_published.py`` stays: two-level Selene, ZeRO-3's collectives not overlapped, one
factor on the inter-node bandwidth solved on 175B on 384 GPUs). It asks which mechanism the six rows'
structure admits, and how many numbers it takes. Each reading predicts every row with
``HybridParallel(t = p = 1, zero=3, recompute="full")`` on a cluster whose GPUs each send through one
200 Gbit/s NIC (``Cluster(n, 25 GB/s x link, 5 us)``: no node level, the volume each GPU moves crosses
its own NIC, as a flat ring does):

- ``rule``: the stored predictions (two-level cluster, no overlap, one link factor);
- ``overlap_one_anchor``: DeepSpeed's prefetch (``zero_overlap=True``), Table 1's GEMM factor, one
  link factor solved on the anchor row (the rule's count of anchors);
- ``overlap_two_numbers``: the same mechanism with *two* numbers solved: a GEMM factor of its own on the
  anchor row as if its collectives were free (the compute-bound row), then the link factor on 175B on
  768 GPUs. The rules forbid this second number (at most one anchor per series); it is here to show
  what the rows' structure asks for, and the four rows it was not solved on are its check.

The measured step is the same at 768 and 1536 GPUs (175B: 88 and 44 TFLOP/s per GPU, one micro-batch
per GPU at each), and at 1120 and 2240 (530B): a step paced by collectives whose volume per GPU does
not fall with the GPUs, behind a compute that halves. On the anchor row (384 GPUs) the compute paces,
and it is slower than Megatron's (Table 1's factor predicts it 191 TFLOP/s with the collectives hidden,
measured 144). So a prediction needs both DeepSpeed's compute rate and its collectives' rate.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy.optimize import brentq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402

from queuesgd import Cluster  # noqa: E402

OUT = HERE / "published" / "zero3-diagnosis.json"
SERIES = "megatron-table2-zero3"
NIC = 200e9 / 8  # one HDR InfiniBand HCA per GPU (§5), bytes/s
XTOL = 1e-12
#: a link factor large enough that the collectives of every row hide behind its compute
FREE = 1e4


def zero3_rows() -> list[dict[str, Any]]:
    """The six ZeRO-3 rows of Table 2 (the anchor first), as ``run_published`` stores their inputs."""
    return [r for r in rp.megatron_inputs() if r["series"] == SERIES]


def predict_overlapped(row: dict[str, Any], factor: float, link: float) -> float:
    """TFLOP/s per GPU of ``row`` with ZeRO-3 prefetched, GEMM ``factor`` and ``link`` x one NIC per GPU.

    Examples
    --------
    >>> row = zero3_rows()[2]                      # 175B on 1536 GPUs, one sequence per GPU
    >>> slow, slower = predict_overlapped(row, 0.9, 0.1), predict_overlapped(row, 0.9, 0.05)
    >>> round(slow / slower, 2)                    # paced by the collectives: half the link, half the rate
    2.0
    """
    shape = rp.TransformerShape(row["layers"], row["hidden"], row["heads"], rp.SEQUENCE, rp.VOCABULARY)
    n, b = row["gpus"], row["microbatch"]
    p = rp.hybrid_step(
        shape, Cluster(n, NIC * link, "5us"), factor, b, tensor=1, pipeline=1, schedule="1f1b",
        microbatches=row["batch"] // (b * n), virtual_stages=1, recompute="full", zero=3, zero_overlap=True,
    )  # fmt: skip
    return p.throughput * rp.eq3_flops(row["layers"], row["hidden"]) / n / 1e12


def _solve(f: Any) -> float:
    return float(brentq(f, 1e-3, 10.0, xtol=XTOL, rtol=1e-14))


def _reading(
    rows: list[dict[str, Any]], predicted: list[float], solved_on: list[int], **numbers: float
) -> dict:
    errs = [100 * (p / r["measured"] - 1) for p, r in zip(predicted, rows)]
    free = [abs(e) for i, e in enumerate(errs) if i not in solved_on]
    return {"numbers": numbers, "solved_on": [rows[i]["name"] for i in solved_on],
            "rows": [{"name": r["name"], "measured": r["measured"], "predicted": p, "error_pct": e}
                     for r, p, e in zip(rows, predicted, errs)],
            "median_abs_pct": statistics.median(free), "max_abs_pct": max(free)}  # fmt: skip


def build() -> dict[str, Any]:
    rows = zero3_rows()
    published = json.loads((HERE / "published" / "published.json").read_text())
    stored = {r["name"]: r["predicted"] for r in published["rows"] if r["series"] == SERIES}
    k1 = rp.table1_factor(rp.megatron_inputs())
    anchor, second = rows[0], rows[1]
    link1 = _solve(lambda f: predict_overlapped(anchor, k1, f) - anchor["measured"])
    k2 = _solve(lambda k: predict_overlapped(anchor, k, FREE) - anchor["measured"])
    link2 = _solve(lambda f: predict_overlapped(second, k2, f) - second["measured"])
    return {
        "note": "diagnosis after the rows were predicted (not evidence); the stored rule is unchanged",
        "compute_only_anchor_tflops": predict_overlapped(anchor, k1, FREE),
        "readings": {
            "rule": _reading(
                rows, [stored[r["name"]] for r in rows], [0], link=published["anchors"][SERIES]["value"]
            ),
            "overlap_one_anchor": _reading(
                rows, [predict_overlapped(r, k1, link1) for r in rows], [0], gemm_factor=k1, link=link1
            ),  # fmt: skip
            "overlap_two_numbers": _reading(
                rows, [predict_overlapped(r, k2, link2) for r in rows], [0, 1], gemm_factor=k2, link=link2
            ),  # fmt: skip
        },
    }


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    free = record["compute_only_anchor_tflops"]
    print(f"anchor row with its collectives free: {free:.1f} TFLOP/s (measured 144)")
    for name, rd in record["readings"].items():
        nums = ", ".join(f"{k} {v:.4g}" for k, v in rd["numbers"].items())
        cells = "  ".join(f"{r['error_pct']:+.1f}%" for r in rd["rows"])
        print(f"{name:<20} {nums:<40} {cells}   (others: median {rd['median_abs_pct']:.1f}%, "
              f"max {rd['max_abs_pct']:.1f}%)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
