"""Why do host-bound steps move so much from chunk to chunk? (issue 21, profile fidelity pass 3)

    python validation/measure_host_noise.py --device cuda --out DIR

For two host-bound models (DenseNet-121 fp32, ViT-B/16 bf16, torchvision) and
one device-bound one (ResNet-50 fp32), the plain loop of
:func:`queuesgd.plain_step_time` in 8 chunks of 8 steps, with Python's garbage
collector on and then off, alternated twice; and the GPU's SM clock read by
``nvidia-smi`` around each loop. A diagnosis: nothing here feeds a prediction.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from nvidia_smi import SMI_TIMEOUT, query  # noqa: E402

from queuesgd.profiler import plain_step_time  # noqa: E402


def _clock() -> str:
    """The SM clock (``SMI_TIMEOUT`` read at the call: a test may shorten it)."""
    return query("clocks.sm", timeout=SMI_TIMEOUT)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    cuda = args.device.startswith("cuda")
    if cuda:
        cases = [
            ("densenet121 fp32", "torchvision:densenet121", 32, None),
            ("vit_b_16 bf16", "torchvision:vit_b_16", 32, torch.bfloat16),
            ("resnet50 fp32", "torchvision:resnet50", 64, None),
        ]
    else:
        cases = [("resnet18s", "queuesgd:resnet18s", 8, None)]
    rows = []
    for name, model, batch, amp in cases:
        shape = (3, 224, 224) if cuda else (3, 32, 32)
        for collector in ("on", "off", "on", "off"):
            (gc.enable if collector == "on" else gc.disable)()
            before = _clock()
            t0 = time.perf_counter()
            per = plain_step_time(
                model,
                batch_size=batch,
                input_shape=shape,
                autocast=amp,
                device=args.device,
                threads=None if cuda else 1,
                warmup=5,
                steps=64,
                chunks=8,
            )
            rows.append(
                {
                    "name": name,
                    "gc": collector,
                    "chunks_s": list(per),
                    "sm_clock_before": before,
                    "sm_clock_after": _clock(),
                    "seconds": time.perf_counter() - t0,
                }
            )
            gc.enable()
            print(
                name,
                collector,
                [round(x * 1e3, 1) for x in per],
                before,
                rows[-1]["sm_clock_after"],
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host_noise.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
