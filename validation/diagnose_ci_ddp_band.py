"""How far does CI's short a-priori DDP run land from its prediction, on loopback and on an emulated link?

    python validation/diagnose_ci_ddp_band.py                      # 8 protocols each: loopback, 1 Gbit/s
    python validation/diagnose_ci_ddp_band.py --rounds 4 --rates loopback

A diagnosis, not evidence: it sizes the error band of the CI test
``tests/harness/test_apriori.py::test_short_real_ddp_run_is_predicted_before_it_runs``.
Each round runs that test's whole protocol once per rate, in alternation:
profile the CNN (batch 32, two lock-step copies), calibrate the network of two
ranks, predict, then train two DDP workers for 60 steps (10 warm-up). Nothing
is fitted to the runs; the errors are printed as measured.

Recorded (2026-11-28, this 2-core machine). By hand before this script
existed (the same calls; 8 on commit 3c1124e, 4 on 7b96391): on
**loopback** -1.1, +1.7, +2.1, +8.0, +20.9, +24.9, +25.4, +28.6, +29.6,
+33.4, +39.6 and +41.9%; at **1 Gbit/s** (``netns-tbf``) -7.0, -1.2, +2.9
and +7.1%. CI's machine, four loopback protocols: +37..+39%, which failed
the test's old 35% band. This script's run (8 rounds, commit 3c1124e plus
the script; ``apriori/diagnose_ci_ddp_band.json``): loopback median +33.5%,
+21.7..+49.3%; 1 Gbit/s median +1.9%, -5.1..+8.3%. So loopback (20
protocols: -1.1..+49.3%, median +27%) is predicted fast and spreads over 50
points: two ranks and gloo's threads share the two cores, and the same
plain loop run twice in a row took 7.9 and 11.7 ms a step (its in-loop
``all_reduce`` call, which includes the wait for the other rank, 2.0-5.1 ms
against 1.0-1.15 ms idle). The emulated link, where the a-priori campaigns
are validated (``validation/REPORT.md``: the CNN at 1 Gbit/s +12.5%; 12
protocols here -7.0..+8.3%), is not.

Writes ``apriori/diagnose_ci_ddp_band.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori import calibrate_network, make_profile, run_apriori  # noqa: E402
from queuesgd.harness.provenance import code_version, stamp  # noqa: E402


def protocol(rate: str) -> dict:
    """The CI test's protocol once: profile, calibrate, predict, run; the row's numbers."""
    prof = make_profile("cnn", batch_size=32, copies=(2,), repetitions=20, warmup=3)
    cal = calibrate_network("allreduce", 2, None if rate == "loopback" else rate, gap=0.01, repeats=5)
    row = run_apriori("ddp", prof, cal, 2, steps=60, warmup=10)
    keys = ("measured", "predicted", "error", "compute_mean", "update_time", "emulation")
    return {k: row[k] for k in keys} | {"rate": rate, "alpha": cal.alpha, "bandwidth": cal.bandwidth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--rates", nargs="+", default=["loopback", "1Gbit/s"])
    parser.add_argument("--out", type=Path, default=HERE / "apriori" / "diagnose_ci_ddp_band.json")
    args = parser.parse_args()
    rows = []
    for r in range(args.rounds):
        for rate in args.rates:
            rows.append(protocol(rate))
            print(f"round {r}, {rate}: error {100 * rows[-1]['error']:+.1f}%", flush=True)
    summary = {}
    for rate in args.rates:
        errors = sorted(100 * x["error"] for x in rows if x["rate"] == rate)
        summary[rate] = {"median": statistics.median(errors), "min": errors[0], "max": errors[-1]}
        print(f"{rate}: median {summary[rate]['median']:+.1f}%, {errors[0]:+.1f}..{errors[-1]:+.1f}%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"measured": stamp(), "commit": code_version(), "summary": summary, "rows": rows}, indent=1
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
