"""Is the host-bound steps' noise the launching thread's CPU? (issue 21, before pass 9) A diagnosis.

    PYTHONPATH=. python validation/diagnose_host_affinity.py --out OUT.json [--rounds 25] [--budget 80]

Pass 8's probe (``validation/fidelity/probes/h200-block-bias.json``) found
no bias of the profile's timed steps against the plain loop, but plain-loop
blocks of 4 steps of ViT-B/16 bf16 at 20-21 ms for eight rounds, then 24-38 ms
for the rest, whichever code ran. For two host-bound models (ViT-B/16 bf16,
DenseNet-121 fp32: the cases of ``profile_fidelity_cases.py``), after a
warm-up, ``rounds`` rounds of the plain loop (``profiler._loop_block``,
``steps`` steps a block) with the main thread allowed, in an order shuffled
per round:

- ``free``: every CPU the process was given;
- ``local``: the GPU's local CPUs (``host_affinity.gpu_local_cpus``);
- ``one_local``: one of them (the second, or the only one);
- ``remote``: one CPU outside them (left out when there is none).

Also recorded: ``nvidia-smi topo -m``, ``lscpu``, the load average before
and after, and the busiest processes. Nothing here feeds a prediction.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_affinity import gpu_local_cpus  # noqa: E402
from nvidia_smi import SMI_TIMEOUT  # noqa: E402

from queuesgd.profiler import _loop_block  # noqa: E402

CASES = ("vit_b_16 bf16", "densenet121 fp32")


def _shell(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=SMI_TIMEOUT).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"failed: {exc}"


def _arms() -> dict[str, list[int]]:
    allowed = sorted(os.sched_getaffinity(0))
    local = [c for c in gpu_local_cpus()["cpus"] if c in allowed]
    arms = {"free": allowed}
    if local:
        arms["local"] = local
        arms["one_local"] = [local[min(1, len(local) - 1)]]
    remote = [c for c in allowed if c not in local]
    if local and remote:
        arms["remote"] = [remote[min(1, len(remote) - 1)]]
    return arms


def _probe(
    case: Any, arms: dict[str, list[int]], rounds: int, steps: int, deadline: float, seed: int
) -> dict:
    import torch

    step = case.build_step("cuda")
    wait = torch.cuda.synchronize
    blocks: dict[str, list[float]] = {a: [] for a in arms}
    rng = random.Random(seed)
    try:
        with step.modes_kept(), step.errors():
            _loop_block(step, 5, wait)  # warm-up
            for _ in range(rounds):
                if time.perf_counter() > deadline:
                    break
                order = list(arms)
                rng.shuffle(order)
                for arm in order:
                    os.sched_setaffinity(0, arms[arm])
                    blocks[arm].append(_loop_block(step, steps, wait))
    finally:
        os.sched_setaffinity(0, arms["free"])
    summary = {
        a: {
            "median_s": statistics.median(v),
            "spread": (max(v) - min(v)) / statistics.median(v),
            "cv": statistics.pstdev(v) / statistics.fmean(v),
        }
        for a, v in blocks.items()
        if v
    }
    return {"name": case.name, "blocks_s": blocks, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--budget", type=float, default=80.0, help="seconds for both models")
    opts = parser.parse_args()
    import torch
    from profile_fidelity_cases import gpu_cases

    arms = _arms()
    doc: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "gpu": gpu_local_cpus(),
        "arms": arms,
        "loadavg_before": Path("/proc/loadavg").read_text().strip(),
        "topo": _shell(["nvidia-smi", "topo", "-m"]),
        "lscpu": _shell(["lscpu"]),
        "busiest": _shell(["ps", "-eo", "pcpu,pid,comm", "--sort=-pcpu"]).splitlines()[:12],
        "cases": [],
    }
    print(json.dumps({k: doc[k] for k in ("gpu", "arms", "loadavg_before")}), flush=True)
    print(doc["topo"], flush=True)
    by_name = {c.name: c for c in gpu_cases()}
    began = time.perf_counter()
    for k, name in enumerate(CASES):
        share = (opts.budget - (time.perf_counter() - began)) / (len(CASES) - k)
        try:
            row = _probe(by_name[name], arms, opts.rounds, opts.steps, time.perf_counter() + share, k)
        except Exception as exc:  # a diagnosis: record the failure, go on
            row = {"name": name, "error": f"{type(exc).__name__}: {exc}"[:500]}
        doc["cases"].append(row)
        doc["loadavg_after"] = Path("/proc/loadavg").read_text().strip()
        opts.out.write_text(json.dumps(doc, indent=1))
        shown = {a: f"{1e3 * v['median_s']:.1f} ms, spread {v['spread']:.0%}, cv {v['cv']:.1%}"
                 for a, v in row.get("summary", {}).items()}  # fmt: skip
        print(
            name,
            len(row.get("blocks_s", {}).get("free", [])),
            "rounds",
            shown,
            row.get("error", ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
