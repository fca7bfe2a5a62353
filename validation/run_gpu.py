"""Run the DDP campaign of ``gpu.json`` on one CUDA device: profile, calibrate, predict, and only then train.

    python validation/run_gpu.py                        # on a machine with a CUDA device
    python validation/run_gpu.py --bundle gpu.tar.gz    # also pack everything it wrote into one archive
    python validation/run_gpu.py --device cpu --models mlp --workers 1 2 --steps 12 --out /tmp/gpu-dry
                                                        # a dry run of the same pipeline on the CPU

Several worker processes share the one device, each training the model with
``DistributedDataParallel`` on gloo (NCCL refuses two ranks on one device;
gloo all-reduces CUDA buckets through host memory, over loopback). The
protocol is the a-priori one of ``run_apriori.py``:

model by model,

1. **profile** the model on the device (``gpu/profiles/``): one worker
   alone, layer by layer, and ``k`` copies in lock step through DDP on
   one-rank groups (the sharing of the one GPU and the host's cores by ``k``
   workers), for every ``k`` of the campaign, with DDP's one-rank all-reduce
   (``"ddp"``, for one worker) and without any collective call
   (``"ddp-local"``, for ``n > 1``: the calibrated all-reduce of ``n`` ranks
   already counts the copies of each CUDA bucket to the host and back);
2. **calibrate** the all-reduce of CUDA tensors among ``n`` ranks for every
   worker count (``gpu/calibrations/``), with the overlap probe on the
   device: at the sizes of the buckets DDP will send (known from the
   profile, :func:`queuesgd.harness.apriori.ddp_calibration_sizes`), each
   after an idle gap as long as the profiled compute phase of ``n`` workers;
3. **predict** every configuration from those files alone
   (``gpu/predictions.json``, with the time each prediction was made);
4. **run** every configuration live and compare with the stored prediction
   (``results/gpu-ddp-<model>.json``), then measure the one-worker step
   again (``gpu/drift.json``: how much the device's speed moved meanwhile).

Rows carry ``device`` (``"cuda"``) and ``device_name``; the report puts them
in a section of their own (``queuesgd.harness.report.section_of``). The
parent process never touches CUDA (the launcher forks its workers, and CUDA
cannot be used in a child of a process that initialized it); the device's
name comes from ``nvidia-smi``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from run_apriori import measure_drift  # noqa: E402

from queuesgd import units  # noqa: E402
from queuesgd.harness.apriori import (  # noqa: E402
    Calibration,
    calibrate_network,
    ddp_calibration_sizes,
    make_profile,
    predict_apriori,
    run_apriori,
)
from queuesgd.harness.live_schemes.ddp import DDP  # noqa: E402
from queuesgd.harness.report import write_rows  # noqa: E402


def device_name(device: str) -> str:
    """The CUDA device's name from ``nvidia-smi`` (no CUDA call in this process), or ``device``."""
    if device == "cpu" or shutil.which("nvidia-smi") is None:
        return device
    index = device.partition(":")[2] or "0"
    out = subprocess.run(
        ["nvidia-smi", f"--id={index}", "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.stdout.strip() or device


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=HERE / "gpu.json", help="the campaign's spec")
    parser.add_argument("--out", type=Path, default=HERE / "gpu", help="profiles, calibrations, predictions")
    parser.add_argument("--results", type=Path, default=None, help="result rows (default: see the code)")
    parser.add_argument("--device", default=None, help="override the spec's device (cpu: a dry run)")
    parser.add_argument("--models", nargs="*", default=None, help="only these models")
    parser.add_argument("--workers", nargs="*", type=int, default=None, help="only these worker counts")
    parser.add_argument("--steps", type=int, default=None, help="override the spec's steps")
    parser.add_argument("--bundle", type=Path, default=None, help="pack --out and the results (.tar.gz)")
    args = parser.parse_args(argv)

    spec = json.loads(args.spec.read_text())
    device = args.device or spec["device"]
    name = device_name(device)
    models = args.models or list(spec["models"])
    workers = sorted(args.workers or spec["workers"])
    steps = args.steps or spec["steps"]
    warmup = min(spec["warmup"], steps // 3)
    out = args.out
    results = args.results or (HERE / "results" if out == HERE / "gpu" else out / "results")
    for folder in (out / "profiles", out / "calibrations", results):
        folder.mkdir(parents=True, exist_ok=True)
    print(f"device {device} ({name}); {os.cpu_count()} cores; models {models}; workers {workers}", flush=True)

    predictions: list[dict] = []
    drifts: list[dict] = []
    for model in models:
        cfg = spec["models"][model]
        # 1. The profile: one worker layer by layer, and k copies in lock step, on the device.
        t0 = time.time()
        prof = make_profile(
            model,
            batch_size=cfg["batch_size"],
            copies=workers,
            repetitions=spec["repetitions"],
            model_options=cfg["model_options"],
            synchronized=("ddp", "ddp-local"),
            device=device,
            independent=(1,),
            ps=device == "cpu",
        )
        prof.save(out / "profiles" / f"{model}.json")
        spans = {k: float(np.mean(v)) for k, v in prof.sync_span["ddp"].items()}
        local = {k: round(float(np.mean(v)) * 1e3, 3) for k, v in prof.sync_span["ddp-local"].items()}
        shown = {k: round(v * 1e3, 3) for k, v in spans.items()}
        print(
            f"profiled {model} on {device}: lock-step DDP step (ms) {shown}, without its collective {local} "
            f"({time.time() - t0:.0f} s)"
        )

        # 2. Calibrations, after the profile and before any run: all-reduces of tensors on the device
        # among n ranks, at the sizes of the buckets DDP will send (from the profile) and after an idle
        # gap of the profiled compute phase of n workers (gloo's threads sleep that long in the run).
        sizes = ddp_calibration_sizes([prof])
        cals: dict[int, Calibration] = {}
        for n in workers:
            if n < 2:
                continue
            t0 = time.time()
            cal = calibrate_network("allreduce", n, None, gap=spans[n], sizes=sizes, device=device)
            cal.save(out / "calibrations" / f"allreduce-{model}-n{n}.json")
            cals[n] = cal
            print(
                f"calibrated all-reduce n={n} on {device} at {sizes} B after {spans[n] * 1e3:.2f} ms idle: "
                f"alpha {units.format_seconds(cal.alpha)}, B {units.format_bandwidth(cal.bandwidth)}, "
                f"r2 {cal.r2:.4f}, overlap eta {cal.overlap['eta'] if cal.overlap else None} "
                f"({time.time() - t0:.0f} s)",
                flush=True,
            )

        # 3. Predictions, stored before any of this model's runs.
        preds = []
        for n in workers:
            pred = predict_apriori(DDP.key, prof, cals.get(n), n)
            preds.append({"scheme": DDP.key, "model": model, "rate": None, "workers": n, **pred})
        predictions.extend(preds)
        (out / "predictions.json").write_text(json.dumps(predictions, indent=1) + "\n")

        # 4. The runs, each compared with its stored prediction.
        rows = []
        for n, pred in zip(workers, preds):
            t0 = time.time()
            try:
                row = run_apriori(DDP.key, prof, cals.get(n), n, steps=steps, warmup=warmup, prediction=pred)
            except Exception as exc:  # keep the campaign going: a failed run is reported, not hidden
                print(f"ddp {model} n={n} FAILED: {type(exc).__name__}: {exc}", flush=True)
                continue
            row["device_name"] = name
            row["campaign"] = "gpu"
            rows.append(row)
            write_rows(rows, results, stem=f"gpu-ddp-{model}")
            phases = {k: round(v * 1e3, 3) for k, v in row["measured_phases"].items()}
            print(
                f"ddp {model:9s} n={n} on {name}: measured {row['measured']:9.1f} predicted "
                f"{row['predicted']:9.1f} error {100 * row['error']:+6.1f}% (phases, ms: {phases}) "
                f"({time.time() - t0:.0f} s)",
                flush=True,
            )
        drifts.append(measure_drift(spec, model, prof))
        (out / "drift.json").write_text(json.dumps(drifts, indent=1) + "\n")

    if args.bundle is not None:
        with tarfile.open(args.bundle, "w:gz") as tar:
            tar.add(out, arcname=out.name)
            for path in sorted(results.glob("gpu-ddp-*")):
                tar.add(path, arcname=f"results/{path.name}")
        print(f"bundled into {args.bundle}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
