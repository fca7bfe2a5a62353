"""The DGX Cloud rows again, with a GEMM table measured on a GPU (PREREG-2026-11-27-dgxc-gpu.md).

    python validation/run_published_dgxc_gpu.py TABLE.json [--out validation/published/dgxc-gpu.json]

``TABLE.json`` is the device tool's first ``gemm_probe --sustain`` table, with the flash rows of
``flash_probe --table`` where that step ran. Every row of ``published/dgxc.json`` is predicted with it in
the shipped H100 table's place, rules 1-4 and 6-7 of PREREG-2026-11-27-dgxc.md unchanged: **A**,
unanchored (the headline; **A'** when the table has no flash rows), and **B**, rule 5's anchor (Llama 3.1
8B on 8 GPUs) solved again with the new table. A table measured on an H200 keeps the shipped H100
table's memory-bound bandwidths (its HBM3e is faster; the GH100 chip's products and attention are
the H100's). The first run's errors are stored beside each row.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import run_published as rp  # noqa: E402
import run_published_dgxc as dg  # noqa: E402

from queuesgd.gemm_table import GemmTable, load_gemm_table  # noqa: E402

OUT = HERE / "published" / "dgxc-gpu.json"
RULES = "validation/published/PREREG-2026-11-27-dgxc-gpu.md"
H100_PEAK = 989.4e12


def measured_table(path: str | Path) -> GemmTable:
    """The measured table at the H100's dense bf16 peak; from an H200, the shipped memory-bound rows."""
    table = load_gemm_table(path, peak_flops=H100_PEAK)
    if "H200" in str(dict(table.provenance).get("device", "")):
        table = dataclasses.replace(table, memory=load_gemm_table("h100-bf16").memory)
    return table


def build(path: str | Path) -> dict[str, Any]:
    table = measured_table(path)
    first = json.loads(dg.OUT.read_text())
    rows = dg.read_rows()
    factor = dg.anchor_factor(rows, table)
    out = []
    for row, old in zip(rows, first["rows"], strict=True):
        tps = dg.measured_tps(row)
        a, b = dg.predict_row(row, 1.0, table)["tps"], dg.predict_row(row, factor, table)["tps"]
        out.append({"model": row["model"], "gpus": row["gpus"], "layers": row["layers"],
                    "anchor": dg.is_anchor(row), "measured_tps": tps,
                    "unanchored_tps": a, "unanchored_pct": 100 * (a / tps - 1),
                    "anchored_tps": b, "anchored_pct": 100 * (b / tps - 1),
                    "first_run_pct": old["error_pct"],
                    "first_run_unanchored_pct": old["unanchored_pct"]})  # fmt: skip
    flash_rows = len(table.flash[0])
    headline = "A" if flash_rows else "A'"
    return {
        "rules": RULES, "targets": dict(rp.TARGETS), "table": str(path),
        "table_provenance": dict(table.provenance), "flash_rows": flash_rows, "headline": headline,
        "factor": factor, "rows": out,
        "unanchored": rp.accuracy([{"error_pct": r["unanchored_pct"]} for r in out]),
        "anchored": rp.accuracy([{"error_pct": r["anchored_pct"]} for r in out if not r["anchor"]]),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="the measured GEMM table (JSON)")
    parser.add_argument("--out", default=str(OUT), help="where the record goes (default: %(default)s)")
    args = parser.parse_args(argv)
    record = build(args.table)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{record['headline']} (unanchored): {record['unanchored']}")
    print(f"B (factor {record['factor']:.4f}): {record['anchored']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
