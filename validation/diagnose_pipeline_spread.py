"""How much does the in-runtime stage profile move from one minute to the next, and against the run's passes?

    python validation/diagnose_pipeline_spread.py          # cnn h64, 1F1B, M=4, 1 Gbit/s, 5 rounds
    python validation/diagnose_pipeline_spread.py --model mlp --option hidden=1024 --schedule gpipe

A diagnosis, not evidence (issue 22, point 5). On the held-out campaign
``specs/pipeline-runtime-heldout.json`` the two passes ran the same
configurations a minute apart and measured the same throughputs (within
2%), while the loopback profiles taken for them (in-runtime,
:func:`~queuesgd.harness.pipelining.runtime_profile.profile_runtime`) gave
stage passes 20-30% shorter in the second pass, and its predictions were
that much too fast. Here the same configuration is profiled on loopback and
then run on the emulated link with its passes timed inside the run the same
way (``profile_runtime(rate=...)``), ``--rounds`` times in alternation, so
that the spread of each and their ratio are measured side by side.
Writes ``parallel/diagnose_pipeline_spread-<model>-<schedule>-M<M>-<rate>.json``.
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
from queuesgd.harness.pipelining.runtime_profile import profile_runtime  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402


def _option(text: str) -> tuple[str, int]:
    key, _, value = text.partition("=")
    return key, int(value)


def _summary(doc: dict) -> dict:
    return {
        "forward_ms": [round(x * 1e3, 4) for x in doc["forward"]],
        "backward_ms": [round(x * 1e3, 4) for x in doc["backward"]],
        "overhead_ms": [round(x * 1e3, 4) for x in doc["overhead"]],
        "wait_ms": [round(x * 1e3, 4) for x in doc["wait"]],
        "step_ms": round(doc["step"] * 1e3, 4),
        "passes_ms": round(sum(doc["forward"]) * 1e3 + sum(doc["backward"]) * 1e3, 4),
        "measured": doc["measured"],
        "emulation": doc["emulation"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--option", action="append", type=_option, default=None,
                    help="a model option, e.g. hidden=64 (repeatable); default hidden=64")  # fmt: skip
    ap.add_argument("--microbatch", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--schedule", default="1f1b", choices=("1f1b", "gpipe"))
    ap.add_argument("--split", default="1,3", help="units per stage, e.g. 1,3")
    ap.add_argument("--rate", default="1Gbit/s")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=15)
    args = ap.parse_args(argv)
    options = dict(args.option or [("hidden", 64)])
    rate = units.parse_bandwidth(args.rate, "rate")
    split = [int(x) for x in args.split.split(",")]
    M = args.microbatches
    started = stamp()
    common = dict(schedule=args.schedule, microbatch=args.microbatch, split=split, model_options=options,
                  steps=args.steps, warmup=args.warmup)  # fmt: skip
    rounds = []
    for k in range(args.rounds):
        loop = _summary(profile_runtime(args.model, 2, M, **common))
        link = _summary(profile_runtime(args.model, 2, M, rate=rate, **common))
        ratio = link["passes_ms"] / loop["passes_ms"]
        rounds.append({"loopback": loop, "link": link, "passes_link_over_loopback": round(ratio, 4)})
        a, b = loop, link
        print(
            f"round {k}: loopback passes {a['passes_ms']:.3f} ms (step {a['step_ms']:.2f}), on the link "
            f"{b['passes_ms']:.3f} ms (step {b['step_ms']:.2f}); ratio {ratio:.3f}",
            flush=True,
        )
    loops = [r["loopback"]["passes_ms"] for r in rounds]
    links = [r["link"]["passes_ms"] for r in rounds]
    summary = {
        "loopback_passes_ms": {"median": statistics.median(loops), "min": min(loops), "max": max(loops)},
        "link_passes_ms": {"median": statistics.median(links), "min": min(links), "max": max(links)},
        "link_steps_ms": [r["link"]["step_ms"] for r in rounds],
    }
    print(json.dumps(summary))
    where = args.rate.replace("/", "")
    name = f"diagnose_pipeline_spread-{args.model}-{args.schedule}-M{M}-{where}.json"
    doc = {"started": started, "model": args.model, "model_options": options, "microbatch": args.microbatch,
           "microbatches": M, "schedule": args.schedule, "split": split, "rate": args.rate,
           "steps": args.steps, "warmup": args.warmup, "rounds": rounds, "summary": summary}  # fmt: skip
    (HERE / "parallel" / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote parallel/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
