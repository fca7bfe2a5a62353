"""Where does a live FSDP2 step's time go? Each rank's collectives timed inside the real step.

    python validation/diagnose_fsdp_step.py --model mlp --batch-size 32 --rate 1Gbit/s
    python validation/diagnose_fsdp_step.py --model encoder --batch-size 32            # loopback

A diagnosis, not evidence (issue 22, point 5: FSDP rows still predicted fast
after the busy calibration). Two ranks train the harness model with FSDP2
exactly as the campaign's runs do (:func:`~queuesgd.harness.fsdp.fsdp_worker`),
with its collectives timed on the rank that issues them
(:func:`~queuesgd.harness.fsdp.timed_collectives`). Per measured step and
rank: the step, the sum of its collectives (count and time per kind), and
the rest (the step less its collectives: the computation and FSDP's own
work). Medians and means over steps and ranks are printed, to set beside
what a campaign's stored inputs give for the same parts (the FSDP profile's
compute + update for the rest, the calibration's collectives). Writes
``parallel/diagnose_fsdp_step-<model>-<where>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.harness.fsdp import collective_seconds, fsdp_worker, timed_collectives  # noqa: E402
from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.schemes import ShardedDataParallel  # noqa: E402


def _worker(ctx, model: str, steps: int, warmup: int, batch: int) -> None:  # noqa: ANN001
    with timed_collectives() as calls:
        fsdp_worker(ctx, model, steps, batch_size=batch, warmup=warmup, seed=0, key=ShardedDataParallel.key)
    ctx.report({"role": "calls", "calls": [list(c) for c in calls]})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rate", default=None, help="an emulated link (netns), e.g. 1Gbit/s; default loopback")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args(argv)
    rate = None if args.rate is None else units.parse_bandwidth(args.rate, "rate")
    where = "loopback" if rate is None else args.rate.replace("/", "")
    measured = stamp()

    def go(setup, host):  # noqa: ANN001, ANN202
        def fn(ctx):  # noqa: ANN001, ANN202
            _worker(ctx, args.model, args.steps, args.warmup, args.batch_size)

        return run_workers(fn, 2, timeout=600, progress_timeout=None, setup=setup, host=host)

    records, emulation = on_network(2, rate, go)
    steps = [r for r in records if r.get("role") == "worker" and not r.get("warmup")]
    calls = {r["rank"]: r["calls"] for r in records if r.get("role") == "calls"}
    per = []
    for s in steps:
        mine = [c for c in calls[s["rank"]] if s["t0"] <= c[1] < s["t_end"]]
        by = {k: [c[2] - c[1] for c in mine if c[0] == k] for k in ("allgather", "reducescatter")}
        coll = collective_seconds(mine, s["t0"], s["t_end"])
        per.append(
            {
                "rank": s["rank"],
                "step": s["t_end"] - s["t0"],
                "collectives": coll,
                "rest": s["t_end"] - s["t0"] - coll,
                "allgather": sum(by["allgather"]),
                "reducescatter": sum(by["reducescatter"]),
                "count": {k: len(v) for k, v in by.items()},
            }
        )
    med = {k: statistics.median(p[k] for p in per) for k in ("step", "collectives", "rest", "allgather",
                                                             "reducescatter")}  # fmt: skip
    mean = {k: statistics.fmean(p[k] for p in per) for k in med}
    print(f"{args.model} batch {args.batch_size} at {where} ({emulation}): counts per step {per[0]['count']}")
    for k in med:
        print(f"  {k:<14} median {med[k] * 1e3:7.3f} ms   mean {mean[k] * 1e3:7.3f} ms")
    out = HERE / "parallel" / f"diagnose_fsdp_step-{args.model}-{where}.json"
    doc = {"measured": measured, "model": args.model, "batch_size": args.batch_size, "where": where,
           "emulation": emulation, "median": med, "mean": mean, "steps": per}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
