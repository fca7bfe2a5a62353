"""The parallel campaign's pipeline rows predicted again from an in-runtime stage profile: a diagnosis.

    python validation/diagnose_pipeline_runtime.py            # pass 2 of specs/parallel.json (a minute)

Not evidence: the rows are those the token bucket and the runtime's own work
were diagnosed on, and the runtime profiles are measured now, after their
runs. For each counted pipeline row of the campaign's second pass (mlp and
cnn, micro-batches of 16), the real model's pipeline at the row's stages,
schedule, micro-batches and balanced split runs on loopback with its passes,
posts and waits timed inside every step
(:func:`~queuesgd.harness.pipelining.runtime_profile.profile_runtime`); the
stage profile scaled to those passes and the stages' own work per pass
(:func:`~queuesgd.harness.pipelining.runtime_profile.runtime_inputs`) then
replace the stored profile and the tiny model's overhead, with and without
the link's token bucket (:func:`~queuesgd.harness.netns.tbf_burst`). The
stored calibration and exchange probe are kept. Writes
``parallel/diagnose_pipeline_runtime.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import predict_pipeline, stored_parallel_inputs  # noqa: E402
from queuesgd.harness.netns import tbf_burst  # noqa: E402
from queuesgd.harness.pipelining import balanced_split  # noqa: E402
from queuesgd.harness.pipelining.runtime_profile import profile_runtime, runtime_inputs  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import counted_rows  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402


def main() -> int:
    campaign = "parallel"
    root = HERE / "campaigns" / campaign
    rows = counted_rows(HERE / "results", campaign, Pipeline.key, passes=[2])
    measured, profiles, out = stamp(), {}, []
    for r in rows:
        inputs, calibration, probes = stored_parallel_inputs(r, root)
        prof, p = inputs["stages"], r["params"]
        S, M, sched = p["stages"], p["microbatches"], p["schedule"]
        split = balanced_split(prof.unit_times(), S)
        key = (r["workload"], S, M, sched)
        if key not in profiles:
            profiles[key] = profile_runtime(r["workload"], S, M, schedule=sched, microbatch=prof.microbatch,
                                            split=split)  # fmt: skip
        scaled, h = runtime_inputs(prof, profiles[key])
        errors = {"stored": float(r["error"])}
        for name, bucket in (("runtime", 0.0), ("runtime+bucket", float(tbf_burst(r["bandwidth"])))):
            v = predict_pipeline(scaled, calibration, S, M, schedule=sched, split=split, action_overhead=h,
                                 exchange=probes["exchange"], link_bucket=bucket)  # fmt: skip
            errors[name] = v["predicted"] / r["measured"] - 1.0
        label = f"{r['workload']} {sched} M={M} {r['bandwidth'] / 1e6:g} MB/s"
        out.append({"row": label, "overhead": h, "loopback_step": profiles[key]["step"], **errors})
        print(label, "  ".join(f"{k} {v:+.1%}" for k, v in errors.items()), flush=True)
    for k in ("stored", "runtime", "runtime+bucket"):
        errs = [abs(o[k]) for o in out]
        print(f"{k}: median {statistics.median(errs):.1%}, max {max(errs):.1%} over {len(errs)} rows")
    doc = {"measured": measured, "campaign": campaign, "pass": 2, "rows": out,
           "profiles": [{**v, "key": list(k)} for k, v in profiles.items()]}  # fmt: skip
    (HERE / "parallel" / "diagnose_pipeline_runtime.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
