"""Run an a-priori campaign spec (``specs/apriori.json`` by default), then rebuild ``REPORT.md``.

    python validation/run_apriori.py                                   # the a-priori campaign, every pass
    python validation/run_apriori.py --spec validation/specs/apriori-heldout.json
    python validation/run_apriori.py --predict-only                    # stop once the predictions are stored

The protocol is the library's (:class:`queuesgd.harness.apriori.Campaign`,
the same as ``queuesgd validate --apriori SPEC.json``): for every pass the
spec registered, model by model, profile, calibrate, predict and store the
predictions, and only then run each configuration live against its stored
prediction, with the spec's discard rule; then, if the spec asks, measure
the one-worker DDP step again (drift). Inputs, predictions, the registered
spec and the per-pass and pooled figures go to ``campaigns/<name>/``, the rows
to ``results/<name>-...-passN.json``. Profiles and calibrations are measured
afresh in every pass and never overwritten (``--overwrite`` to run a
campaign again into the same folder).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori import Campaign, load_spec  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spec", type=Path, default=HERE / "specs" / "apriori.json", help="the campaign spec"
    )
    parser.add_argument("--predict-only", action="store_true", help="stop after storing the predictions")
    parser.add_argument("--overwrite", action="store_true", help="run again into the campaign's folder")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    result = Campaign(spec).run(
        HERE / "campaigns" / spec.name,
        results=HERE / "results",
        overwrite=args.overwrite,
        predict_only=args.predict_only,
        progress=lambda line: print(line, flush=True),
    )
    if args.predict_only:
        return 0
    print(result.table())
    subprocess.run([sys.executable, str(HERE / "run_campaign.py"), "--report-only"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
