"""Is the fused-exchange share of a shaped link bimodal, and within or between sweeps? A diagnosis.

    python validation/diagnose_exchange_modes.py                       # 100 Mbit/s, 128 and 182 KB, 6 sweeps
    python validation/diagnose_exchange_modes.py --rate 1Gbit/s --sizes 131072,185856

Not evidence (issue 22, point 5). In ``specs/pipeline-exchange-heldout.json``
the 100 Mbit/s 1F1B rows followed the exchange probe's share at their own
activation: where it read about 0.51 they were within -8..+3%, where it
read 0.76-0.87 they were predicted 11-54% fast. Here the probe
(:func:`~queuesgd.harness.duplex.exchange_probe`, as
:func:`~queuesgd.harness.apriori_parallel.calibrate_exchange` runs it: a
fresh two-rank group per size) runs ``--sweeps`` times at each size on the
emulated link, and every repeat's ``alone`` and ``both`` times are kept, so
that the share of each repeat (``alone`` median over ``both``) shows whether
the modes mix inside one group or switch between groups. Writes
``parallel/diagnose_exchange_modes-<rate>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.harness.duplex import exchange_probe  # noqa: E402
from queuesgd.harness.launch import run_probe  # noqa: E402
from queuesgd.harness.netns import Namespaces  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="100Mbit/s")
    ap.add_argument("--sizes", default="131072,185856")
    ap.add_argument("--sweeps", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--gap", type=float, default=0.01, help="idle seconds before each timed phase")
    ap.add_argument("--stream", type=int, default=1, help="messages back to back per timed phase")
    args = ap.parse_args(argv)
    rate = units.parse_bandwidth(args.rate, "rate")
    sizes = [int(s) for s in args.sizes.split(",")]
    started, out = stamp(), []
    for sweep in range(args.sweeps):
        for nbytes in sizes:
            with Namespaces(2, rate=rate) as net:
                extra = (args.gap, args.stream)
                _, records = run_probe(exchange_probe, 2, nbytes, args.repeats, 2, setup=net.setup,
                                       host=net.bridge_address, timeout=120, args=extra)  # fmt: skip
            rec = next(r for r in records if "alone" in r)
            alone = statistics.median(rec["alone"])
            shares = [round(min(1.0, alone / b), 3) for b in rec["both"]]
            low = sum(1 for s in shares if s < 0.65)
            out.append({"sweep": sweep, "nbytes": nbytes, "alone_median": alone, "alone": rec["alone"],
                        "both": rec["both"], "shares": shares})  # fmt: skip
            print(f"sweep {sweep} {nbytes:>8} B: median share {statistics.median(shares):.3f}; "
                  f"{low}/{len(shares)} repeats below 0.65; shares {shares}", flush=True)  # fmt: skip
    where = args.rate.replace("/", "") + ("" if args.gap == 0.01 else f"-gap{args.gap:g}")
    where += "" if args.stream == 1 else f"-stream{args.stream}"
    doc = {"started": started, "rate": args.rate, "repeats": args.repeats, "gap": args.gap,
           "stream": args.stream, "runs": out}  # fmt: skip
    (HERE / "parallel" / f"diagnose_exchange_modes-{where}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote parallel/diagnose_exchange_modes-{where}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
