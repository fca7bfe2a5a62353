"""Run the DDP campaign of ``specs/gpu.json`` on one CUDA device (the a-priori protocol, every pass).

    python validation/run_gpu.py                        # on a machine with a CUDA device
    python validation/run_gpu.py --bundle gpu.tar.gz    # also pack everything it wrote into one archive
    python validation/run_gpu.py --device cpu --out /tmp/gpu-dry
                                                        # a dry run of the same pipeline on the CPU

Several worker processes share the one device, each training the model with
``DistributedDataParallel`` on gloo (NCCL refuses two ranks on one device;
gloo all-reduces CUDA buckets through host memory, over loopback). The
protocol is the library's (:class:`queuesgd.harness.apriori.Campaign`): model
by model, the profile on the device (one worker layer by layer, and ``k``
copies in lock step with DDP's one-rank all-reduce and without any collective
call), the all-reduce of CUDA tensors among ``n`` ranks calibrated at the
sizes of the model's buckets after an idle gap of the profiled compute phase
of ``n`` workers, the predictions stored, then the runs and the drift probe.

Rows carry ``device`` (``"cuda"``) and ``device_name``; the report puts them
in a section of their own. The parent process never touches CUDA (the
launcher forks its workers, and CUDA cannot be used in a child of a process
that initialized it); the device's name comes from ``nvidia-smi``. A
``--device`` override is a different campaign: its spec, and so its hash,
says so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori import Campaign, load_spec, parse_spec  # noqa: E402


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
    parser.add_argument("--spec", type=Path, default=HERE / "specs" / "gpu.json", help="the campaign spec")
    parser.add_argument("--out", type=Path, default=None, help="inputs and rows (default: campaigns/<name>)")
    parser.add_argument("--device", default=None, help="another device than the spec's (cpu: a dry run)")
    parser.add_argument("--bundle", type=Path, default=None, help="pack the inputs and the rows (.tar.gz)")
    parser.add_argument("--overwrite", action="store_true", help="run again into the campaign's folder")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    if args.device is not None:
        spec = parse_spec({**spec.document, "device": args.device, "name": f"{spec.name}-{args.device}"})
    out = args.out or HERE / "campaigns" / spec.name
    results = HERE / "results" if args.out is None else out / "results"
    result = Campaign(spec).run(
        out,
        results=results,
        overwrite=args.overwrite,
        annotate={"device_name": device_name(spec.device)},
        progress=lambda line: print(line, flush=True),
    )
    print(result.table())
    if args.bundle is not None:
        with tarfile.open(args.bundle, "w:gz") as tar:
            tar.add(out, arcname=out.name)
            for path in sorted(results.glob(f"{spec.name}-*")):
                tar.add(path, arcname=f"results/{path.name}")
        print(f"bundled into {args.bundle}", flush=True)
    print(json.dumps(result.summary()["pooled"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
