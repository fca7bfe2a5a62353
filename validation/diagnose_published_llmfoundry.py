"""Diagnosis of the preregistered LLM Foundry rows (published/llmfoundry.json): what the H100 miss is made of.

    python validation/diagnose_published_llmfoundry.py    # writes published/llmfoundry-diagnosis.json

Written after the run, so **not evidence**: nothing here changes a stored prediction. For every H100 row
it solves the factor on the H100 table's GEMM efficiencies that would make that row exact (the row's
*implied factor*; the preregistered anchor is one of them, 13b/2048/8 GPUs), and groups them by what
the preregistered breakdowns split on. One factor for the whole series (the rule) can only be right
if the implied factors agree; where they part, the model's shape dependence is what misses.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy.optimize import brentq
from scipy.stats import spearmanr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_published_llmfoundry as lf  # noqa: E402

OUT = HERE / "published" / "llmfoundry-diagnosis.json"
XTOL = 1e-6


def implied_factor(row: dict[str, Any]) -> float:
    """The GEMM factor that makes ``row``'s predicted tokens/s its measured (None outside 0.2-1.6)."""
    return float(brentq(lambda f: lf.predict_row(row, f)["tps"] / row["tps"] - 1.0, 0.2, 1.6, xtol=XTOL))


def _stats(values: list[float]) -> dict[str, Any]:
    return {"rows": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


def groups(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Implied factors by checkpointing, sequence band, scale, and checkpointing x sequence band."""
    keys = {
        "checkpointing": lambda r: "full" if r["activation_checkpointing"] else "none",
        "sequence": lambda r: lf.band(r["seq"]),
        "GPUs": lambda r: "8" if r["gpus"] <= 8 else ("16-64" if r["gpus"] <= 64 else "128-512"),
        "checkpointing x sequence": lambda r: (
            f"{'full' if r['activation_checkpointing'] else 'none'}, {lf.band(r['seq'])}"
        ),
    }
    out: dict[str, Any] = {}
    for name, fn in keys.items():
        names = sorted({fn(r) for r in rows}, key=[fn(r) for r in rows].index)
        out[name] = {k: _stats([r["implied_factor"] for r in rows if fn(r) == k]) for k in names}
    return out


def _scale_loss(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Per model of the large-scale table: 1 - implied factor at 512 GPUs / at 128 (min and max)."""
    big = [r for r in rows if r["gpus"] >= 128]
    losses = []
    for model in {r["model"] for r in big}:
        f = {r["gpus"]: r["implied_factor"] for r in big if r["model"] == model}
        losses.append(1.0 - f[512] / f[128])
    return min(losses), max(losses)


def build() -> dict[str, Any]:
    table = [r for r in lf.read_tables() if r["gpu"].startswith("h100")]
    keep = ("table", "model", "seq", "gpus", "microbatch", "grad_accum", "activation_checkpointing")
    stored_record = json.loads(lf.OUT.read_text())["h100"]
    stored, factor = stored_record["rows"], stored_record["factor"]
    implied = [
        {**{k: r[k] for k in keep}, "implied_factor": implied_factor(r),
         "collective_ratio": lf.predict_row(r, factor)["collective_ratio"]}
        for r in table
    ]
    corr = {}
    for ac in (True, False):
        sub = [r for r in implied if r["seq"] <= 2048 and r["activation_checkpointing"] == ac]
        rho = spearmanr([r["collective_ratio"] for r in sub], [r["implied_factor"] for r in sub])
        corr["full" if ac else "none"] = {"rows": len(sub), "spearman": float(rho.statistic),
                                          "p": float(rho.pvalue)}  # fmt: skip
    g = groups(implied)
    ac, none, cross = g["checkpointing"]["full"], g["checkpointing"]["none"], g["checkpointing x sequence"]
    factors = [r["implied_factor"] for r in implied]
    where = [(r["table"], r["model"], r["seq"], r["gpus"]) for r in implied]
    anchor = implied[where.index(lf.ANCHOR)]["implied_factor"]
    short = [r for r in stored if r["seq"] <= 2048 and r["activation_checkpointing"]]
    ac_err = [r["error_pct"] for r in short]
    hfu = [float(r["hfu"]) for r in table if r["seq"] <= 2048 and r["activation_checkpointing"]]
    mfu = [float(r["mfu"]) for r in table if r["seq"] <= 2048 and not r["activation_checkpointing"]]
    lo, hi = _scale_loss(implied)
    mem = [r["memory_gb"] for r in stored if not r["activation_checkpointing"]]
    note = " ".join([
        "each H100 row's implied GEMM factor (the factor that would make it exact; the rule's anchor row,",
        f"13b/2048/8 GPUs, gives {anchor:.3f}) ranges {min(factors):.3f}-{max(factors):.3f}.",
        "Rows with activation checkpointing imply a higher factor",
        f"(median {ac['median']:.3f}, {ac['min']:.3f}-{ac['max']:.3f}) than rows without",
        f"(median {none['median']:.3f}, {none['min']:.3f}-{none['max']:.3f}); at sequences <= 2048",
        f"{cross['full, <= 2048']['median']:.3f} against {cross['none, <= 2048']['median']:.3f}.",
        "So with one factor the checkpointed rows at those sequences come out",
        f"{-max(ac_err):.0f}-{-min(ac_err):.0f}% slow: the model charges a full recomputed forward at the",
        "GEMM speed of the rows without it, where the measured steps with checkpointing run their (larger)",
        "micro-batches at a higher hardware utilization",
        f"(the table's HFU {min(hfu):.0f}-{max(hfu):.0f}% with checkpointing,",
        f"MFU = HFU {min(mfu):.0f}-{max(mfu):.0f}% without, sequences <= 2048).",
        "Which of the model's terms is wrong there (recomputation's cost, the efficiency of large",
        "micro-batches, or a cost of the rows without checkpointing, whose micro-batch the submit script",
        "leaves to Composer's 'auto', the largest that fits; the model puts them at",
        f"{min(mem):.0f}-{max(mem):.0f} GB of 80) these rows cannot tell.",
        "The implied factor also falls with the sequence length",
        f"(>= 16384: median {g['sequence']['>= 16384']['median']:.3f}, against",
        f"{g['sequence']['<= 2048']['median']:.3f} at <= 2048): the flash core, timed at the GEMM table's",
        "efficiency of its scores product (a stand-in), is faster in the model than FlashAttention in Triton",
        "ran. And in the large-scale table each model's implied factor is",
        f"{100 * lo:.0f}-{100 * hi:.0f}% lower at 512 GPUs than at 128, where the model (ZeRO-3 hidden",
        "behind the compute) loses nothing: a cost that grows with the ranks is missing,",
        "as in SC'21's ZeRO-3 rows.",
        "Within each group the implied factor falls as the model's collectives grow against the compute",
        "(Spearman's rho between the model's collective time over compute and the implied factor, sequences",
        f"<= 2048: {corr['full']['spearman']:.2f} over {corr['full']['rows']} checkpointed rows,",
        f"{corr['none']['spearman']:.2f} over {corr['none']['rows']} without): consistent with collectives",
        "slowing the compute they overlap (NCCL's kernels take SMs and memory bandwidth; the model assumes",
        "they share nothing) -- or with a cost per micro-batch, since both grow as the micro-batch shrinks;",
        "a hypothesis, not measured.",
        "Nothing was changed for these rows; a model change drawn from them needs rows it was not",
        "diagnosed on.",
    ])
    return {"rows": implied, "groups": g, "correlation": corr, "note": note}


def main() -> int:
    record = build()
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(record["note"])
    for name, groups_ in record["groups"].items():
        print(name, {k: (v["rows"], round(v["median"], 3)) for k, v in groups_.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
