"""What did the busy calibration change? The FSDP rows of a campaign predicted again with an idle one.

    python validation/diagnose_fsdp_busy.py [--campaign fsdp-busy-heldout]

A diagnosis, not evidence: the idle calibrations are measured now, after
the runs, one per link (``calibrate_parallel("sharded", 2, rate)``, the
mode every campaign before ``specs/fsdp-busy-heldout.json`` used), and each
counted FSDP row of the campaign is predicted from its own stored profile
with it (``stored_parallel_inputs``), beside its stored prediction (the busy
calibration). Writes ``parallel/diagnose_fsdp_busy.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import calibrate_parallel, stored_parallel_inputs  # noqa: E402
from queuesgd.harness.apriori_parallel.run import predict_parallel  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import counted_rows  # noqa: E402
from queuesgd.schemes import ShardedDataParallel  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", default="fsdp-busy-heldout")
    args = ap.parse_args(argv)
    folder = HERE / "campaigns" / args.campaign
    rows = counted_rows(HERE / "results", args.campaign, ShardedDataParallel.key)
    measured = stamp()
    idle = {rate: calibrate_parallel("sharded", 2, rate) for rate in sorted({r["bandwidth"] for r in rows})}
    out = []
    for r in rows:
        inputs, calibration, probes = stored_parallel_inputs(r, folder)
        key, link = ShardedDataParallel.key, idle[r["bandwidth"]]
        again = predict_parallel(key, inputs, link, r["workers"], {}, **probes)
        out.append(
            {
                "row": f"{r['workload']} {r['bandwidth'] / 1e6:g} MB/s pass {r['pass']}",
                "measured": r["measured"],
                "busy": r["predicted"] / r["measured"] - 1,
                "idle": again["predicted"] / r["measured"] - 1,
                "busy_alpha": calibration.alpha,
                "idle_alpha": idle[r["bandwidth"]].alpha,
            }
        )
        print(f"{out[-1]['row']:<28} busy {out[-1]['busy']:+.1%}  idle (measured now) {out[-1]['idle']:+.1%}")
    for key in ("busy", "idle"):
        errs = [abs(o[key]) for o in out]
        print(f"{key}: median {statistics.median(errs):.1%}, max {max(errs):.1%} over {len(errs)} rows")
    doc = {"campaign": args.campaign, "idle_measured": measured, "rows": out}
    (HERE / "parallel" / "diagnose_fsdp_busy.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
