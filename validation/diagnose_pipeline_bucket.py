"""The pipeline rows predicted again with the emulated link's token bucket: a diagnosis, not evidence.

    python validation/diagnose_pipeline_bucket.py

Every counted pipeline row of ``specs/parallel.json`` (mlp and cnn, where the
bucket was diagnosed) and of ``specs/parallel-heldout.json`` (resnet18s) is
predicted again from its own stored inputs with ``link_bucket`` set to
:func:`~queuesgd.harness.netns.tbf_burst` of its rate, the runtime probe's
overhead solved again against that model. Prints each row's error before and
after and the pooled figures; writes ``parallel/diagnose_pipeline_bucket.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import action_overhead, stored_parallel_inputs  # noqa: E402
from queuesgd.harness.apriori_parallel.run import predict_parallel, stored_input_paths  # noqa: E402
from queuesgd.harness.netns import tbf_burst  # noqa: E402
from queuesgd.harness.pipelining import StageProfile  # noqa: E402
from queuesgd.harness.report import counted_rows  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402


def again(row: dict, root: Path) -> tuple[float, float]:
    """The row's stored error, and its error predicted again with the bucket (and the overhead re-solved)."""
    inputs, calibration, probes = stored_parallel_inputs(row, root)
    paths = stored_input_paths(row, root)
    bucket = float(tbf_burst(row["bandwidth"]))
    probe = json.loads(paths["runtime"].read_text())
    h = action_overhead(probe, StageProfile.load(paths["tiny"]), calibration, link_bucket=bucket)
    value = predict_parallel(
        Pipeline.key, inputs, calibration, row["workers"], row["params"],
        action_overhead=h["action_overhead"], exchange=probes["exchange"], link_bucket=bucket,
    )  # fmt: skip
    return float(row["error"]), value["predicted"] / row["measured"] - 1.0


def main() -> int:
    out = {}
    for campaign in ("parallel", "parallel-heldout"):
        root = HERE / "campaigns" / campaign
        rows = counted_rows(HERE / "results", campaign, Pipeline.key)
        pairs = []
        for r in rows:
            before, after = again(r, root)
            p = r["params"]
            label = f"{r['workload']} {p['schedule']} M={p['microbatches']} {r['bandwidth'] / 1e6:g} MB/s"
            pairs.append({"row": f"{label} pass {r['pass']}", "stored": before, "bucket": after})
            print(f"{campaign}: {pairs[-1]['row']}: {before:+.1%} -> {after:+.1%}")
        for key in ("stored", "bucket"):
            errs = [abs(x[key]) for x in pairs]
            print(f"{campaign} {key}: median {statistics.median(errs):.1%}, max {max(errs):.1%}")
        out[campaign] = pairs
    (HERE / "parallel" / "diagnose_pipeline_bucket.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
