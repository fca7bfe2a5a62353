"""What torch.distributed.pipelining costs on this machine beyond the computation and the messages.

    python validation/measure_pipeline_runtime.py                 # loopback, about a minute
    python validation/measure_pipeline_runtime.py --rate 1Gbit/s  # on an emulated link

The runtime probe of the a-priori protocol
(:func:`queuesgd.harness.apriori_parallel.probe_runtime`) over a grid: the
harness MLP shrunk to almost no arithmetic is trained with the real runtime,
one stage (no messages) and two stages (both schedules), for several numbers
of micro-batches; beside it, the batched point-to-point calibration of the
link. For each configuration the row's model is solved for the runtime's
work per pass (:func:`~queuesgd.harness.apriori_parallel.action_overhead`;
its residual is a self-consistency check of the inversion, nothing more).
Then, as a diagnosis of how the cost enters, the ``h`` solved at each ``M``
predicts the probe's step at every other ``M`` of the same stages and
schedule: were the work a constant per pass, these cross-predictions would
hold. Writes ``parallel/runtime.json``. A campaign's predictions take the
probe at exactly their own configuration (``specs/parallel.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import (  # noqa: E402
    action_overhead,
    calibrate_parallel,
    predict_pipeline,
    probe_runtime,
    profile_tiny,
)
from queuesgd.harness.load import CpuMeter  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402

GRID = ((1, "gpipe"), (2, "1f1b"), (2, "gpipe"))
MICROBATCHES = (2, 4, 8, 16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default=None, help="an emulated link's rate (default: loopback)")
    args = parser.parse_args(argv)
    rows = []
    with CpuMeter() as meter:
        tiny = profile_tiny()
        link = calibrate_parallel("p2p", 2, args.rate, sizes=(64, 4096, 65536), repeats=20)
        for stages, schedule in GRID:
            mine = []
            for m in MICROBATCHES:
                probe = probe_runtime(stages, schedule, m, args.rate, profile=tiny)
                solved = action_overhead(probe, tiny, link)
                mine.append({**probe, **solved})
                print(
                    f"S={stages} {schedule:5s} M={m:2d}: step {probe['step'] * 1e3:6.2f} ms "
                    f"({probe['step'] / m * 1e3:.3f} ms per micro-batch); model without overhead "
                    f"{solved['model_step_without'] * 1e3:6.2f} ms; action_overhead "
                    f"{solved['action_overhead'] * 1e3:.3f} ms per pass"
                )
            for row in mine:  # the h of one M, predicting the probes of the others
                row["cross"] = {}
                for other in mine:
                    pred = predict_pipeline(
                        tiny, link, stages, other["microbatches"], schedule=schedule, split=other["split"],
                        action_overhead=row["action_overhead"],
                    )  # fmt: skip
                    row["cross"][other["microbatches"]] = pred["iteration_time"] / other["step"] - 1.0
                shown = ", ".join(f"M={k}: {v:+.0%}" for k, v in row["cross"].items())
                print(f"  h of M={row['microbatches']} predicts the probes' steps at {shown}")
            rows += mine
    out = {
        "when": stamp(),
        "rate": args.rate,
        "p2p_alpha": link.alpha,
        "p2p_bandwidth": link.bandwidth,
        "steps": rows,
        "load": meter.result(),
    }
    (HERE / "parallel").mkdir(exist_ok=True)
    (HERE / "parallel" / "runtime.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"batched p2p one-way latency (calibration): {link.alpha * 1e3:.3f} ms; load {meter.result()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
