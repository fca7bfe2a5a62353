"""How much a model's one-process step moves between processes here (a floor under a-priori errors).

    python validation/measure_step_modes.py            # cnn and mlp, 10 processes each

Each block is a fresh process timing 20 steps of the model alone
(:func:`queuesgd.harness.contention.measure_synchronized` with one copy, as
the profile measures it), one after the other on the idle machine. If the
blocks' means differ by more than the target error, no profile measured in
one process can predict a short run made in another to within it, whatever
the model. Writes ``apriori/step_modes.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd.harness.contention import measure_synchronized  # noqa: E402
from queuesgd.harness.load import CpuMeter  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402


def main() -> int:
    spec = json.loads((HERE / "apriori.json").read_text())
    out = []
    for model in ("cnn", "mlp"):
        cfg = spec["models"][model]
        means = []
        with CpuMeter() as meter:
            for _ in range(10):
                span = measure_synchronized(
                    model,
                    (1,),
                    batch_size=cfg["batch_size"],
                    repetitions=20,
                    model_options=cfg["model_options"],
                )[1]["span"]
                means.append(float(np.mean(span)))
        m = np.asarray(means)
        row = {
            "model": model,
            "when": stamp(),
            "block_means": means,
            "spread": float(m.max() / m.min() - 1.0),
            "load": meter.result(),
        }
        out.append(row)
        print(f"{model}: block means {np.round(m * 1e3, 2).tolist()} ms; max/min - 1 = {row['spread']:.1%}")
    (HERE / "apriori" / "step_modes.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
