"""Do the profile's timed blocks run faster than the plain loop's on host-bound steps? (issue 21) A diagnosis.

    PYTHONPATH=. python validation/diagnose_block_bias.py --device cuda --out OUT.json [--budget S]
    PYTHONPATH=. python validation/diagnose_block_bias.py --device cpu --out OUT.json   # tiny MLP

In pass 7 (``validation/fidelity/h200-pass7.json``) 5 of DenseNet-121's 6
block errors and all 6 of the activation-checkpointing row's were negative:
the profile's timed blocks faster than the plain-loop blocks around them,
with the host's own wall clock agreeing with the events (so the events miss
nothing). ``profile_interleaved`` alternates in a fixed order (loop, timed,
loop, ...), six timed blocks of 8 steps. Here one training step per case
(the same :func:`queuesgd.profiler_step.training_step` and
:class:`~queuesgd.profiler_recorder.Recorder` the profile uses) runs, after a
warm-up, ``rounds`` rounds of five arms of ``steps`` steps each, in an order
shuffled per round (seeded), each arm timed on the host from a device
synchronize to a device synchronize:

- ``loop``: ``profiler._loop_block`` (the plain loop of the fidelity check);
- ``timed``: ``Recorder.timed`` (the profile's timed steps), also its events
  (``timed_events``: mean compute + mean update, the block as
  ``profile_interleaved`` reads it from pass 10; the probes recorded in
  passes 8 and 9 also carry ``timed_profile``, with the median update the
  profile read then);
- ``inline``: the timed steps' code without the events (``run_micro``,
  ``backward``, ``update`` called as ``Recorder.timed`` calls them);
- ``inline_del``: ``inline`` with the loss (and so its graph) let go right
  after ``backward`` returns, as ``step.run()`` let it go until pass 10
  (``inline`` and ``Recorder.timed`` hold it until the next micro-step's
  forward pass ends, as ``step.run()`` now does);
- ``marked``: the plain loop's ``step.run()`` with the timed steps' four events
  per micro-step recorded around it.

Per case: each arm's block means, and per round each arm over that round's
``loop`` less 1 (median, mean, how many negative). Nothing here feeds a
prediction; its run is recorded under ``validation/fidelity/probes/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from queuesgd.profiler import _loop_block  # noqa: E402
from queuesgd.profiler_recorder import Recorder  # noqa: E402

ARMS = ("loop", "timed", "inline", "inline_del", "marked")


def _cases(device: str, names: list[str] | None = None) -> list[Any]:
    """The cases probed: a host-bound MLP on a CPU; on CUDA ``names`` (default: five of the GPU rows).

    A name ``"NAME@accK"`` is the case ``NAME`` with ``accumulation=K``.
    """
    if device == "cpu":
        import torch

        from queuesgd.harness.fidelity import FidelityCase

        def mlp() -> Any:
            return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(30)])

        return [FidelityCase("mlp 30x16 (host-bound)", mlp, 2, (16,))]
    from profile_fidelity_cases import gpu_cases

    wanted = (
        "densenet121 fp32",
        "gpt2-small bf16, activation checkpointing",
        "convnext_tiny bf16, accumulation 2",
        "vit_b_16 bf16",
        "resnet50 fp32",
    )
    by_name = {c.name: c for c in gpu_cases()}
    chosen = []
    for name in names or wanted:
        base, _, acc = name.partition("@acc")
        case = by_name[base]
        chosen.append(dataclasses.replace(case, name=name, accumulation=int(acc)) if acc else case)
    return chosen


def _probe(
    case: Any,
    device: str,
    rounds: int,
    steps: int,
    deadline: float,
    seed: int,
    arms_run: tuple[str, ...] = ARMS,
) -> dict[str, Any]:
    import torch

    step = case.build_step(device)
    cuda = step.dev.type == "cuda"
    rec = Recorder(torch, step.net, step.params, cuda=cuda, forward_hooks=not step.compiled)
    clock = rec.clock
    wait = torch.cuda.synchronize if cuda else (lambda: None)
    args = (step.run_micro, step.update, step.accumulation)

    def timed() -> float:
        wait()
        t0 = time.perf_counter()
        rec.timed(*args, steps, skip=0, holder=step)  # ends with one synchronize; the loss handed on
        return (time.perf_counter() - t0) / steps

    def inline(drop: bool) -> float:
        wait()
        t0 = time.perf_counter()
        for _ in range(steps):
            for j in range(step.accumulation):
                backward = step.run_micro(j == step.accumulation - 1)
                backward()
                if drop:  # the loss and its graph go now, as step.run() let them go before pass 10
                    del backward
            step.update()
        wait()
        return (time.perf_counter() - t0) / steps

    def marked() -> float:
        wait()
        t0 = time.perf_counter()
        held = []
        for _ in range(steps):
            for _j in range(step.accumulation):
                held.append((clock.mark(), clock.mark(), clock.mark()))
            step.run()
            held.append(clock.mark())
        wait()
        return (time.perf_counter() - t0) / steps

    arms = {
        "loop": lambda: _loop_block(step, steps, wait),
        "timed": timed,
        "inline": lambda: inline(False),
        "inline_del": lambda: inline(True),
        "marked": marked,
    }
    with step.modes_kept(), step.errors():
        _loop_block(step, 5, wait)  # warm-up
        blocks: dict[str, list[float]] = {a: [] for a in arms_run}
        events: list[float] = []
        orders = []
        rng = random.Random(seed)
        for _ in range(rounds):
            if time.perf_counter() > deadline:
                break
            order = list(arms_run)
            rng.shuffle(order)
            orders.append(order)
            for arm in order:
                first = len(rec.samples["compute"])
                blocks[arm].append(arms[arm]())
                if arm == "timed":
                    events.append(
                        statistics.fmean(rec.samples["compute"][first:])
                        + statistics.fmean(rec.samples["update"][first:])
                    )
    done = len(blocks["timed"])
    out: dict[str, Any] = {
        "name": case.name,
        "rounds": done,
        "steps": steps,
        "orders": orders,
        "blocks_s": {a: blocks[a][:done] for a in arms_run},
        "timed_events_s": events,
    }
    summary = {}
    for arm in (*arms_run[1:], "timed_events"):
        own = events if arm == "timed_events" else blocks[arm]
        rel = [x / y - 1.0 for x, y in zip(own[:done], blocks["loop"][:done], strict=True)]
        summary[arm] = {
            "median_vs_loop": statistics.median(rel) if rel else None,
            "mean_vs_loop": statistics.fmean(rel) if rel else None,
            "negative": sum(r < 0 for r in rel),
            "of": len(rel),
            "median_block_over_median_loop": statistics.median(own[:done])
            / statistics.median(blocks["loop"][:done])
            - 1.0
            if done
            else None,
        }
    out["summary"] = summary
    out["loop_spread"] = (
        (max(blocks["loop"]) - min(blocks["loop"])) / statistics.median(blocks["loop"]) if done else None
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--budget", type=float, default=150.0, help="seconds for all cases; rounds stop at it"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", nargs="*", help="CUDA: case names (NAME@accK: with accumulation K)")
    parser.add_argument("--arms", nargs="*", choices=ARMS, help="arms to run (loop always)")
    opts = parser.parse_args()
    import gc

    import torch

    doc: dict[str, Any] = {
        "device": opts.device,
        "device_name": torch.cuda.get_device_name(0) if opts.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cases": [],
    }
    cases = _cases(opts.device, opts.cases)
    arms_run = ("loop", *[a for a in (opts.arms or ARMS) if a != "loop"])
    began = time.perf_counter()
    for k, case in enumerate(cases):
        share = (opts.budget - (time.perf_counter() - began)) / (len(cases) - k)
        t0 = time.perf_counter()
        try:
            row = _probe(case, opts.device, opts.rounds, opts.steps, t0 + share, opts.seed + k, arms_run)
        except Exception as exc:  # a diagnosis: record the failure, go on to the next case
            row = {"name": case.name, "error": f"{type(exc).__name__}: {exc}"[:500]}
        row["seconds"] = time.perf_counter() - t0
        doc["cases"].append(row)
        opts.out.write_text(json.dumps(doc, indent=1))
        s = row.get("summary", {})
        print(
            f"{row['name']}: {row.get('rounds')} rounds, {row['seconds']:.0f} s, loop spread "
            f"{row.get('loop_spread') or float('nan'):.3f}; "
            + "; ".join(
                f"{a} {v['median_vs_loop']:+.2%} ({v['negative']}/{v['of']} neg, "
                f"med/med {v['median_block_over_median_loop']:+.2%})"
                for a, v in s.items()
                if v["median_vs_loop"] is not None
            )
            + (f" ERROR {row['error']}" if "error" in row else ""),
            flush=True,
        )
        gc.collect()
        if opts.device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
