"""The point-to-point link fitted with its token bucket: does a per-message cost appear? A diagnosis.

    python validation/diagnose_pipeline_hinge.py     # after diagnose_pipeline_runtime.py (a few minutes)

Not evidence. The p2p calibration fits ``t = alpha + S / B`` to ping-pong
messages of a few sizes after an idle gap; on a ``tc tbf`` link the first
``b`` bytes after an idle gap pass at once, so the points lie on
``alpha + max(0, S - b) / B`` and the line's intercept, ``alpha - b / B``, is
clipped at 0: the per-message cost of the emulated path is lost. Here the
link is calibrated now at both rates over sizes from 1 KB to 4 MB
(``calibrate_parallel("p2p", 2, rate, ...)``, each size's median), fitted
both ways (the line, and the hinge at ``b = tbf_burst(rate)``), and the
pipeline rows of the parallel campaign's second pass are predicted again
with the in-runtime stage profiles that ``diagnose_pipeline_runtime.py``
stored, the bucket, and each fit. Writes ``parallel/diagnose_pipeline_hinge.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from queuesgd.harness.apriori_parallel import (  # noqa: E402
    calibrate_parallel,
    predict_pipeline,
    stored_parallel_inputs,  # noqa: E402
)
from queuesgd.harness.netns import tbf_burst  # noqa: E402
from queuesgd.harness.pipelining import balanced_split  # noqa: E402
from queuesgd.harness.pipelining.runtime_profile import runtime_inputs  # noqa: E402
from queuesgd.harness.report import counted_rows  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402

SIZES = (1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20)


def hinge(samples: list[tuple[float, float]], bucket: float) -> tuple[float, float]:
    """``(alpha, B)`` of ``t = alpha + max(0, S - bucket) / B``, least squares on relative errors."""
    s = np.array([x for x, _ in samples], dtype=float)
    t = np.array([y for _, y in samples], dtype=float)
    a = np.column_stack([np.ones_like(s), np.maximum(s - bucket, 0.0)]) / t[:, None]
    (alpha, slope), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return max(float(alpha), 0.0), (1.0 / float(slope) if slope > 0 else float("inf"))


def main() -> int:
    campaign = "parallel"
    root = HERE / "campaigns" / campaign
    runtime = json.loads((HERE / "parallel" / "diagnose_pipeline_runtime.json").read_text())
    profiles = {tuple(p["key"]): p for p in runtime["profiles"]}
    links = {}
    for rate in (125e6, 12.5e6):
        cal = calibrate_parallel("p2p", 2, rate, sizes=SIZES, repeats=20, gap=0.01)
        bucket = float(tbf_burst(rate))
        alpha, bw = hinge([tuple(x) for x in cal.samples], bucket)
        links[rate] = {"line": cal, "hinge": replace(cal, alpha=alpha, bandwidth=bw), "bucket": bucket}
        print(f"{rate / 1e6:g} MB/s: line alpha {cal.alpha * 1e3:.3f} ms B {cal.bandwidth / 1e6:.1f} MB/s; "
              f"hinge (b {bucket:.0f} B) alpha {alpha * 1e3:.3f} ms B {bw / 1e6:.1f} MB/s; "
              f"samples {[(int(s), round(t * 1e3, 3)) for s, t in cal.samples]}", flush=True)  # fmt: skip
    rows = counted_rows(HERE / "results", campaign, Pipeline.key, passes=[2])
    out = []
    for r in rows:
        inputs, _, probes = stored_parallel_inputs(r, root)
        prof, p = inputs["stages"], r["params"]
        S, M, sched = p["stages"], p["microbatches"], p["schedule"]
        split = balanced_split(prof.unit_times(), S)
        scaled, h = runtime_inputs(prof, profiles[(r["workload"], S, M, sched)])
        link = links[r["bandwidth"]]
        errors = {"stored": float(r["error"])}
        for name in ("line", "hinge"):
            v = predict_pipeline(scaled, link[name], S, M, schedule=sched, split=split, action_overhead=h,
                                 exchange=probes["exchange"], link_bucket=link["bucket"])  # fmt: skip
            errors[name] = v["predicted"] / r["measured"] - 1.0
        label = f"{r['workload']} {sched} M={M} {r['bandwidth'] / 1e6:g} MB/s"
        out.append({"row": label, **errors})
        print(label, "  ".join(f"{k} {v:+.1%}" for k, v in errors.items()), flush=True)
    for k in ("stored", "line", "hinge"):
        errs = [abs(o[k]) for o in out]
        print(f"{k}: median {statistics.median(errs):.1%}, max {max(errs):.1%} over {len(errs)} rows")
    doc = {"links": {str(k): {"line": [v["line"].alpha, v["line"].bandwidth],
                              "hinge": [v["hinge"].alpha, v["hinge"].bandwidth],
                              "samples": v["line"].samples, "bucket": v["bucket"]} for k, v in links.items()},
           "rows": out}  # fmt: skip
    (HERE / "parallel" / "diagnose_pipeline_hinge.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
