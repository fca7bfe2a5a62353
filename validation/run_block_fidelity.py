"""The compute model against one transformer block on the device (rules: PREREG-2026-11-27-block.md).

    PYTHONPATH=. python validation/run_block_fidelity.py --device cuda --out OUT.json [--budget 150]

Times, with :func:`queuesgd.block_probe.probe_block`, the blocks of LLM Foundry's MPT shapes at the
micro-batches and sequences of its H100 rows (``SHAPES``): forward, forward + backward, and both under
activation checkpointing; and puts each beside the compute model with the shipped H100 table as measured
(no anchor): ``f``, ``f + b`` and ``2 f + b``. The rules (what each ratio would mean) were committed
before any GPU run. On a CPU (``--device cpu``) the same script runs the same shapes scaled down
(``--small``), to test the script, not the model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.block_probe import compare_block, probe_block  # noqa: E402
from queuesgd.compute_model import ComputeModel  # noqa: E402
from queuesgd.gemm_table import load_gemm_table  # noqa: E402
from queuesgd.model_shapes import TransformerShape  # noqa: E402

RULES = "validation/published/PREREG-2026-11-27-block.md"
#: (name, hidden, heads, sequence, micro-batches): the MPT blocks of the LLM Foundry H100 rows (rule 1)
SHAPES = [
    ("13b", 5120, 40, 2048, (2, 16)),
    ("7b", 4096, 32, 2048, (6,)),
    ("7b", 4096, 32, 8192, (8,)),
    ("7b", 4096, 32, 32768, (2,)),
    ("1b", 2048, 16, 2048, (14,)),
    ("1b", 2048, 16, 16384, (2,)),
    ("1b", 2048, 16, 65536, (1,)),
    ("760m", 1536, 12, 32768, (1,)),
]
HBM3 = 3.35e12


def shapes(small: bool) -> list[tuple[str, TransformerShape, tuple[int, ...]]]:
    """Rule 1's shapes; ``small``: hidden / 32, sequence / 64 (at least 16), for a CPU test of the script."""
    out = []
    for name, h, a, s, mbs in SHAPES:
        if small:
            h, a, s = h // 32, max(1, a // 8), max(16, s // 64)
        shape = TransformerShape(1, h, a, s, 50368, name=f"mpt-{name}", attention="flash", dropout=False)
        out.append((name, shape, mbs))
    return out


def run(device: str, budget: float, small: bool, repeats: int, save: Path | None = None) -> dict[str, Any]:
    """Every shape of rule 1 timed and compared (rule 2), within ``budget`` seconds in all.

    With ``save``, the record so far is written there after each shape (a run cut off keeps them).
    """
    model = ComputeModel(load_gemm_table("h100-bf16"), HBM3)
    stop = time.monotonic() + budget
    out: list[dict[str, Any]] = []
    head = {"rules": RULES, "device": device, "small": small, "table": "h100-bf16", "memory_bandwidth": HBM3}
    for name, shape, mbs in shapes(small):
        left = stop - time.monotonic()
        if left <= 0:
            out.append({"model": name, "sequence": shape.sequence, "skipped": "budget"})
            continue
        dtype = "float32" if device == "cpu" else "bfloat16"
        rec = probe_block(shape, mbs, device=device, dtype=dtype, repeats=repeats, budget=left)
        out.append({"model": name, "sequence": shape.sequence, "hidden": shape.hidden, "record": rec,
                    "comparison": compare_block(rec, model, shape)})  # fmt: skip
        if save is not None:
            save.write_text(json.dumps({**head, "rows": out, "complete": False}, indent=1) + "\n")
    return {**head, "rows": out, "complete": True}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=150.0)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--small", action="store_true", help="the shapes scaled down (a CPU test of the script)")
    a = ap.parse_args(argv)
    record = run(a.device, a.budget, a.small, a.repeats, save=Path(a.out))
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
    for row in record["rows"]:
        for c in row.get("comparison", []):
            ratios = " ".join(
                f"{k}={c[f'ratio_{k}']:.3f}" if c[f"ratio_{k}"] is not None else f"{k}=-"
                for k in ("forward", "step", "recompute_step")
            )
            print(f"{row['model']:>5} s={row['sequence']:<6} b={c['microbatch']:<3} {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
