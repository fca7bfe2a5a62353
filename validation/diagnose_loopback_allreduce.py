"""Where does a 2-rank loopback DDP step lose its time? The in-loop all-reduce, with and without a barrier.

    python validation/diagnose_loopback_allreduce.py

A diagnosis, not evidence (it explains the loopback bias in
``validation/diagnose_ci_ddp_band.py``). Two ranks train the CNN (batch 32,
one thread each) with a plain loop: forward and backward, then the
gradient's ``all_reduce`` (819 KB), then the update; in ``barrier`` mode a
barrier comes before the all-reduce (the wait for the other rank is taken
out of it), in ``plain`` mode not. Then the all-reduce alone: after the
calibration's 10 ms idle gap (``calibrate_network(..., gap=0.01)``) and back
to back after a barrier.

Recorded (2026-11-28, this 2-core machine, medians in ms; rank 0 | rank 1):

- first run (an earlier form of this script, same loop, commit 252afbf):
  all-reduce alone after the idle gap 1.15 | 1.10, back to back 2.36 | 2.20;
  in the loop after a barrier 1.03-2.04 | 1.03-2.32, without one 3.34-3.97
  | 2.73-3.25; forward and backward 6.8-7.6 | 6.8-7.4; a step 11.7-12.2.
- second run, a minute later (this script): alone 1.20 | 1.08 after the gap,
  0.86 | 0.89 back to back; after a barrier 1.15-3.11 | 1.22-2.86 (the
  barrier 2.29-3.15 | 0.46-0.52: rank 1 computed 6.9-8.5 ms where rank 0
  took 5.1-6.1), without one 4.87-4.90 | 2.32-2.92; a step 11.0-12.5.

So the time the calibration gives the all-reduce (about 1.1 ms, after an
idle gap) is at the low end of what the same 819 KB take inside the loop
(1.0-3.1 ms after a barrier), and the two ranks' compute differs by up to
2 ms from one run to the next, whose wait falls on the faster rank. Both
move between runs a minute apart. The a-priori model takes the calibrated
time and the lock-step profile's span, which is why loopback's predictions
are fast and spread; neither effect is modelled.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.models import build_seeded  # noqa: E402
from queuesgd.training_optimizer import default_optimizer  # noqa: E402


def _ms(values) -> float:
    return 1e3 * float(np.median(values))


def fn(ctx) -> None:  # type: ignore[no-untyped-def]
    """One rank: the loop in both modes (twice each), then the all-reduce alone."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    net, shape = build_seeded("cnn", 0)
    opt = default_optimizer(net.parameters())
    x = torch.randn(32, *shape)
    y = torch.randint(0, 10, (32,))
    flat = torch.zeros(sum(p.numel() for p in net.parameters()))
    out: dict = {}
    for mode in ("barrier", "plain", "barrier", "plain"):
        rec = []
        for step in range(60):
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            t1 = time.perf_counter()
            if mode == "barrier":
                dist.barrier()
            t2 = time.perf_counter()
            dist.all_reduce(flat)
            t3 = time.perf_counter()
            opt.step()
            t4 = time.perf_counter()
            if step >= 10:
                rec.append((t0, t1, t2, t3, t4))
        out.setdefault(mode, []).append(rec)
    alone: dict = {"idle": [], "back to back": []}
    for kind in alone:
        for _ in range(40):
            dist.barrier()
            if kind == "idle":
                time.sleep(0.01)  # the calibration's gap
            a = time.perf_counter()
            dist.all_reduce(flat)
            alone[kind].append(time.perf_counter() - a)
    ctx.report({"rank": ctx.rank, "out": out, "alone": {k: v[5:] for k, v in alone.items()}})


def main() -> None:
    for r in sorted(run_workers(fn, 2), key=lambda r: r["rank"]):
        idle, b2b = (_ms(r["alone"][k]) for k in ("idle", "back to back"))
        print(f"rank {r['rank']}: all-reduce alone after the idle gap {idle:.2f} ms, back to back {b2b:.2f}")
        for mode, recs in r["out"].items():
            for rec in recs:
                a = np.array(rec)
                step = 1e3 * np.diff(a[:, 0]).mean()
                parts = (_ms(a[:, k + 1] - a[:, k]) for k in range(4))
                print(f"  {mode:8s} step {step:.2f}  " + "  ".join(
                    f"{name} {v:.2f}" for name, v in zip(("fwdbwd", "barrier", "allreduce", "update"), parts)
                ))  # fmt: skip


if __name__ == "__main__":
    main()
