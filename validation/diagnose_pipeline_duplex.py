"""A campaign's pipeline rows predicted again from their stored inputs with the exchange share set by hand.

    python validation/diagnose_pipeline_duplex.py          # pipeline-stream-heldout, shares 0.55 and 1

A what-if, not evidence (issue 22, point 5): the rows of
``specs/pipeline-stream-heldout.json`` were read before this ran. Every
counted pipeline row is predicted again from the files its prediction names
(:func:`~queuesgd.harness.apriori_parallel.stored_parallel_inputs`), once as
stored and once per ``--shares`` value with the exchange share (``duplex``)
set to it instead of the exchange probe's, to see how much of each link's
error the share could carry (1F1B fuses exchanges; GPipe does not, so its
rows must not move). Writes ``parallel/diagnose_pipeline_duplex-<campaign>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import (  # noqa: E402
    ExchangeCalibration,
    predict_parallel,
    stored_parallel_inputs,
)
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import counted_rows  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", default="pipeline-stream-heldout")
    ap.add_argument("--shares", default="0.55,1.0")
    args = ap.parse_args(argv)
    shares = [float(s) for s in args.shares.split(",")]
    root = HERE / "campaigns" / args.campaign
    out = []
    for r in counted_rows(HERE / "results", args.campaign, Pipeline.key):
        inputs, calibration, extra = stored_parallel_inputs(r, root)
        again = predict_parallel(r["scheme"], inputs, calibration, r["workers"], r["params"], **extra)
        row = {
            "row": f"{r['model_label']} {r['params']['schedule']} M={r['params']['microbatches']} "
            f"{r['bandwidth'] / 1e6:g} MB/s pass {r['pass']}",
            "bandwidth": r["bandwidth"],
            "schedule": r["params"]["schedule"],
            "probe_share": again["duplex"],
            "stored": r["error"],
            "rebuilt": again["predicted"] / r["measured"] - 1.0,
        }
        for share in shares:  # an exchange calibration whose share is `share` at every size
            both = (1 / share, 1 / share)
            flat = ExchangeCalibration(r["bandwidth"], (1, 1 << 30), (1.0, 1.0), both, "given", "now")
            v = predict_parallel(r["scheme"], inputs, calibration, r["workers"], r["params"], **{**extra,
                                 "exchange": flat})  # fmt: skip
            row[f"share {share:g}"] = v["predicted"] / r["measured"] - 1.0
        out.append(row)
        cells = ", ".join(f"{k} {v:+.1%}" for k, v in row.items() if k.startswith("share"))
        print(f"{row['row']}: probe {row['probe_share']} {row['stored']:+.1%}; {cells}")
    summary = {}
    for key in ["stored", *(f"share {s:g}" for s in shares)]:
        for bw in sorted({o["bandwidth"] for o in out}):
            errs = [abs(o[key]) for o in out if o["bandwidth"] == bw]
            summary[f"{key} at {bw / 1e6:g} MB/s"] = {"median": statistics.median(errs), "max": max(errs)}
    for k, v in summary.items():
        print(f"{k}: median {v['median']:.1%}, max {v['max']:.1%}")
    doc = {"made": stamp(), "campaign": args.campaign, "rows": out, "summary": summary}
    path = HERE / "parallel" / f"diagnose_pipeline_duplex-{args.campaign}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path.relative_to(HERE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
