"""A diagnosis, not evidence: what each pipeline probe did to the counted rows of the preregistered campaign.

    python validation/diagnose_parallel_probes.py

Every counted pipeline row of ``specs/parallel.json``'s campaign (``campaigns/parallel/``) is predicted
again from its own stored inputs four ways: as stored (the runtime probe's ``action_overhead`` and the
exchange probe's ``duplex``), without the duplex share, without the overhead, and with neither (the model
of the 2026-11-25 campaigns). The stored variant must rebuild the stored prediction (asserted). The other
three were chosen after seeing the campaign's errors: they say which probe helped where, and are not a
prediction of anything.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori_parallel import predict_parallel, stored_parallel_inputs  # noqa: E402
from queuesgd.harness.report import read_rows  # noqa: E402

ROOT = HERE / "campaigns" / "parallel"
VARIANTS = ("stored", "no_duplex", "no_overhead", "neither")


def main() -> int:
    errors: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for path in sorted((HERE / "results").glob("parallel-pipeline-*.json")):
        for r in read_rows(path):
            if not r.get("counted"):
                continue
            inputs, cal, probes = stored_parallel_inputs(r, ROOT)
            h, ex = probes["action_overhead"], probes["exchange"]
            kws = {
                "stored": {"action_overhead": h, "exchange": ex},
                "no_duplex": {"action_overhead": h},
                "no_overhead": {"exchange": ex},
                "neither": {},
            }
            got = {}
            for k, kw in kws.items():
                p = predict_parallel(r["scheme"], inputs, cal, r["workers"], r["params"], **kw)["predicted"]
                got[k] = p / r["measured"] - 1
                errors[k].append(abs(got[k]))
            assert got["stored"] == r["predicted"] / r["measured"] - 1
            pr = r["params"]
            print(
                f"pass {r['pass']} {r['model_label']:9s} {pr['schedule']:5s} M={pr['microbatches']} "
                f"{r['bandwidth'] * 8 / 1e6:6.0f} Mbit/s h={h * 1e3:.3f} ms duplex={r['duplex']:.2f}: "
                + " ".join(f"{k} {v:+.1%}" for k, v in got.items())
            )
    for k, v in errors.items():
        print(f"{k:12s} rows {len(v)}: median {statistics.median(v):.1%}, max {max(v):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
