"""Diagnosis of the preregistered DGX Cloud rows (published/dgxc.json): what the miss is made of.

    python validation/diagnose_published_dgxc.py    # writes published/dgxc-diagnosis.json

Written after the run, so **not evidence**: nothing here changes a stored prediction. For every row it
solves the factor on the H100 table's GEMM efficiencies that would make that row exact (the row's
*implied factor*; the anchor's is the preregistered 0.98), and sets it beside what the compute model's
block is made of on that row's ranks: the share of the forward in matrix products, in the fused
attention core (timed by the table at the score product's volume: a stand-in, no measured attention
kernel) and in memory-bound kernels. One factor for the whole source (the rule) is right only if the
implied factors agree. Three one-rule what-ifs are printed and stored beside: the TP collectives
exposed (``tp_overlap=False``), the data-parallel ones exposed (``zero_overlap=False``), and no
interleaving (``virtual_stages=1``).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from scipy.optimize import brentq
from scipy.stats import spearmanr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_published_dgxc as dg  # noqa: E402
import run_published_h100 as h100  # noqa: E402

OUT = HERE / "published" / "dgxc-diagnosis.json"
XTOL = 1e-6
#: the what-ifs: one field of the preregistered scheme changed (rule 3's values otherwise)
WHAT_IFS = {"tp_exposed": {"tp_overlap": False}, "dp_exposed": {"zero_overlap": False},
            "no_interleaving": {"virtual_stages": 1, "schedule": "1f1b"}}  # fmt: skip


def implied_factor(row: dict[str, Any]) -> float:
    """The GEMM factor that makes ``row``'s predicted tokens/s its measured."""
    tps = dg.measured_tps(row)
    return float(brentq(lambda f: dg.predict_row(row, f)["tps"] / tps - 1.0, 0.2, 1.6, xtol=XTOL))


def shares(row: dict[str, Any], factor: float) -> dict[str, float]:
    """The block's forward on one rank by kind of kernel (``gemm``, ``flash``, memory-bound), as fractions."""
    ops = h100.h100_compute(factor=factor).operation_times(dg.shape_of(row).operations(
        row["microbatch"], tensor=row["tensor"], sequence_parallel=row["sequence_parallel"],
        context=row["context"]))  # fmt: skip
    kinds: Counter[str] = Counter()
    for o in ops:
        kind = o.operation.kind
        kinds[kind if kind in ("gemm", "flash") else "memory_bound"] += o.seconds
    total = sum(kinds.values())
    return {k: kinds[k] / total for k in ("gemm", "flash", "memory_bound")}


def what_if(row: dict[str, Any], factor: float, change: dict[str, Any]) -> float | None:
    """Error in percent of the row predicted with one field of its scheme changed (None: no pipeline)."""
    if change.get("virtual_stages") == 1 and row["pipeline"] == 1:
        return None
    tps = dg.predict_scheme(dg.scheme_of(row, factor).replace(**change), row)["tps"]
    return 100 * (tps / dg.measured_tps(row) - 1)


def build() -> dict[str, Any]:
    stored = json.loads(dg.OUT.read_text())
    factor = stored["factor"]
    rows = []
    for row in dg.read_rows():
        rec = {"model": row["model"], "gpus": row["gpus"], "layers": row["layers"],
               "implied_factor": implied_factor(row), **shares(row, factor)}  # fmt: skip
        rec.update({name: what_if(row, factor, change) for name, change in WHAT_IFS.items()})
        rows.append(rec)
    models = list(dict.fromkeys(r["model"] for r in rows))
    by_model = {}
    for m in models:
        mine = [r for r in rows if r["model"] == m]
        by_model[m] = {"implied_factor_median": statistics.median(r["implied_factor"] for r in mine),
                       **{k: mine[0][k] for k in ("gemm", "flash", "memory_bound")}}  # fmt: skip
    full = [r for r in rows if r["layers"] == max(x["layers"] for x in rows if x["model"] == r["model"])]
    rho = spearmanr([r["gemm"] for r in full], [r["implied_factor"] for r in full])
    return {"note": "diagnosis after the run (not evidence)", "factor": factor, "rows": rows,
            "by_model": by_model,
            "spearman_gemm_share_vs_implied_factor": {"rho": float(rho.statistic), "p": float(rho.pvalue),
                                                      "rows": len(full)}}  # fmt: skip


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    for m, s in record["by_model"].items():
        print(f"{m:<15} implied factor {s['implied_factor_median']:.3f}  forward: gemm {s['gemm']:.0%} "
              f"flash {s['flash']:.0%} memory-bound {s['memory_bound']:.0%}")  # fmt: skip
    print("spearman(gemm share, implied factor):", record["spearman_gemm_share_vs_implied_factor"])
    for r in record["rows"]:
        cells = "  ".join(f"{k} {'-' if r[k] is None else format(r[k], '+.1f') + '%'}" for k in WHAT_IFS)
        print(f"{r['model']:<15} {r['gpus']:>5}  implied {r['implied_factor']:.3f}  {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
