"""Where does a live pipeline step's time go? Each stage's passes and waits timed inside the real step.

    python validation/diagnose_pipeline_step.py --model mlp --microbatch 16 --microbatches 4 --rate 1Gbit/s
    python validation/diagnose_pipeline_step.py --model cnn --schedule gpipe        # loopback

A diagnosis, not evidence (issue 22, point 5: the pipeline model misses on
the sub-millisecond stages of mlp and cnn, where the runtime's own work,
probed on a tiny model, does not carry over). Two ranks run the two stages
of ``torch.distributed.pipelining`` exactly as the campaign's runs do
(:func:`~queuesgd.harness.pipelining.pipeline_worker`), with four things
timed on the rank that does them: each stage's forward and backward passes
(``forward_one_chunk``, ``backward_one_chunk``), the posting of its
point-to-point operations (the schedules' ``_batch_p2p``) and its waits on
them (``_wait_batch_p2p``: the transfer, and the peer's lag). Per measured
step and stage: the schedule's step, each part's sum and count, and the rest
(the step less the four: the schedule's own work between them, the loss).
Writes ``parallel/diagnose_pipeline_step-<model>-<schedule>-M<M>-<where>.json``.
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
from queuesgd.harness.launch import run_workers  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.pipelining import pipeline_worker  # noqa: E402
from queuesgd.harness.pipelining.runtime_profile import PARTS, step_parts, timed_pipeline  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--microbatch", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"))
    ap.add_argument("--rate", default=None, help="an emulated link (netns), e.g. 1Gbit/s; default loopback")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args(argv)
    rate = None if args.rate is None else units.parse_bandwidth(args.rate, "rate")
    where = "loopback" if rate is None else args.rate.replace("/", "")
    M = args.microbatches
    measured = stamp()

    def go(setup, host):  # noqa: ANN001, ANN202
        def fn(ctx):  # noqa: ANN001, ANN202
            with timed_pipeline() as calls:
                pipeline_worker(ctx, args.model, 2, M, args.steps, schedule=args.schedule,
                                batch_size=M * args.microbatch, warmup=args.warmup, split=None,
                                key=Pipeline.key)  # fmt: skip
            ctx.report({"role": "calls", "calls": [list(c) for c in calls]})

        return run_workers(fn, 2, timeout=600, progress_timeout=None, setup=setup, host=host)

    records, emulation = on_network(2, rate, go)
    steps = [r for r in records if r.get("role") == "worker" and not r.get("warmup")]
    calls = {r["rank"]: r["calls"] for r in records if r.get("role") == "calls"}
    per = []
    for s in steps:
        parts = step_parts(s, calls[s["rank"]])
        row = {"stage": s["stage"], "update": s["t_update"], **parts}
        for part in PARTS:
            row[f"{part}_count"] = parts[f"count_{part}"]
        per.append(row)
    summary = {}
    print(f"{args.model} micro-batch {args.microbatch}, {args.schedule} M={M} at {where} ({emulation})")
    for st in (0, 1):
        mine = [p for p in per if p["stage"] == st]
        summary[st] = {k: statistics.median(p[k] for p in mine) for k in ("step", "update", *PARTS, "rest")}
        counts = {p: mine[0][f"{p}_count"] for p in PARTS}
        print(
            f"  stage {st}: "
            + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in summary[st].items())
            + f" ms; {counts}"
        )
    name = f"diagnose_pipeline_step-{args.model}-{args.schedule}-M{M}-{where}.json"
    doc = {
        "measured": measured,
        "model": args.model,
        "microbatch": args.microbatch,
        "microbatches": M,
        "schedule": args.schedule,
        "where": where,
        "emulation": emulation,
        "median": summary,
        "steps": per,
    }
    (HERE / "parallel" / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote parallel/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
