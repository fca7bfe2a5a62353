"""How long does a rank wait at a gloo collective, idle and after computing? A probe for the FSDP miss.

    python validation/measure_collective_tails.py            # 2 ranks on loopback (about a minute)

A diagnosis, not an input of any prediction (issue 22, point 5). FSDP2 on
the transformer encoder of ``specs/parallel-heldout.json`` ran 61-149%
slower than predicted; on loopback its two-rank step took 18.7 ms where the
model, with the collectives of an idle calibration, gives 9.7 ms. Two ranks
(one thread each, as the harness's workers) time each all-gather and
reduce-scatter of 26,240 bytes (the encoder's largest unit) and of 1 MiB:

1. ``idle``: back to back, after a barrier, as the calibration times them;
2. ``after work``: each rank first computes the same number of 128 x 128
   float32 matrix products, as long as 1.1 ms, 3 ms or 12 ms alone, then
   times the collective from the end of its own work (what a rank of a
   step waits: the operation, and a peer that reached it later).

Each row gives the percentiles and the mean of the two ranks' times.
Writes ``parallel/collective_tails.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402

SIZES = (26240, 1 << 20)
WORK = (0.0, 0.0011, 0.003, 0.012)
REPEATS, WARMUP = 200, 20


def _probe(ctx) -> None:  # noqa: ANN001
    import torch

    dist = torch.distributed
    n = ctx.world_size
    a, b = torch.rand(128, 128), torch.rand(128, 128)
    for _ in range(20):
        torch.mm(a, b)
    t0 = time.perf_counter()
    for _ in range(200):
        torch.mm(a, b)
    per = (time.perf_counter() - t0) / 200
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    for size in SIZES:
        full, shard = torch.ones(size // 4), torch.ones(size // 4 // n)
        for work in WORK:
            count = round(work / per)
            for op in ("allgather", "reducescatter"):
                times = []
                dist.barrier()
                for r in range(WARMUP + REPEATS):
                    for _ in range(count):
                        torch.mm(a, b)
                    t0 = time.perf_counter()
                    gather(full, shard) if op == "allgather" else scatter(shard, full)
                    if r >= WARMUP:
                        times.append(time.perf_counter() - t0)
                ctx.report({"size": size, "work": work, "op": op, "times": times})


def main() -> int:
    started = stamp()
    records = run_workers(_probe, 2, timeout=600, progress_timeout=None)
    rows = []
    for size in SIZES:
        for work in WORK:
            for op in ("allgather", "reducescatter"):
                key = (size, work, op)
                mine = [r for r in records if (r.get("size"), r.get("work"), r.get("op")) == key]
                t = np.concatenate([np.asarray(r["times"]) for r in mine]) * 1e3
                p10, p50, p90, p99 = np.percentile(t, [10, 50, 90, 99])
                row = {"size": size, "work_ms": work * 1e3, "op": op, "p10_ms": p10, "median_ms": p50,
                       "p90_ms": p90, "p99_ms": p99, "mean_ms": float(t.mean()),
                       "share_over_3ms": float((t > 3.0).mean())}  # fmt: skip
                rows.append(row)
                print(
                    f"{size:>8} B  work {work * 1e3:4.1f} ms  {op:<13} median {p50:.3f}  p90 {p90:.3f}  "
                    f"p99 {p99:.3f}  mean {t.mean():.3f} ms  over 3 ms {row['share_over_3ms']:.0%}",
                    flush=True,
                )
    out = HERE / "parallel" / "collective_tails.json"
    out.write_text(json.dumps({"measured": started, "ranks": 2, "link": "loopback", "repeats": REPEATS,
                               "rows": rows}, indent=1) + "\n")  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
