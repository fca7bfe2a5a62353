"""What torch.distributed.pipelining costs on this machine beyond the computation and the messages.

    python validation/measure_pipeline_runtime.py       # about a minute

A diagnosis of the pipeline rows' misses (validation/REPORT.md), not an input
of any prediction: the harness's MLP shrunk to almost no arithmetic (16
inputs, 8 hidden units, 2 samples per micro-batch) is trained with the real
runtime (:func:`queuesgd.harness.pipelining.run_pipeline`) on loopback, one
stage (no messages) and two stages (both schedules), for several numbers of
micro-batches; beside it, the batched point-to-point ping-pong that the
a-priori calibration times (:func:`~queuesgd.harness.apriori_parallel.calibrate_parallel`).
With no computation to speak of, the step is the runtime's own work and its
messages: what the Pipeline model would need besides the profile and alpha.
Writes ``parallel/runtime.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd.harness.apriori_parallel import calibrate_parallel  # noqa: E402
from queuesgd.harness.load import CpuMeter  # noqa: E402
from queuesgd.harness.pipelining import run_pipeline  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402

OPTIONS = {"inputs": 16, "hidden": 8}


def main() -> int:
    rows = []
    with CpuMeter() as meter:
        cal = calibrate_parallel("p2p", 2, None, sizes=(64, 4096, 65536), repeats=20)
        for stages, schedule in ((1, "gpipe"), (2, "1f1b"), (2, "gpipe")):
            for m in (2, 4, 8, 16):
                recs = run_pipeline(
                    "mlp",
                    stages,
                    m,
                    60,
                    schedule=schedule,
                    batch_size=2 * m,
                    warmup=15,
                    split=None if stages > 1 else [3],
                    model_options=OPTIONS,
                )
                t0 = sorted(
                    r["t0"] for r in recs if r.get("role") == "worker" and not r["warmup"] and r["rank"] == 0
                )
                step = float(np.median(np.diff(t0)))
                rows.append({"stages": stages, "schedule": schedule, "microbatches": m, "step": step})
                print(
                    f"S={stages} {schedule:5s} M={m:2d}: step {step * 1e3:6.2f} ms, "
                    f"{step / m * 1e3:.3f} ms per micro-batch"
                )
    out = {
        "when": stamp(),
        "model_options": OPTIONS,
        "p2p_alpha": cal.alpha,
        "p2p_bandwidth": cal.bandwidth,
        "steps": rows,
        "load": meter.result(),
    }
    print(f"batched p2p one-way latency (calibration, loopback): {cal.alpha * 1e3:.3f} ms")
    (HERE / "parallel" / "runtime.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
