"""A campaign's pipeline rows run again with the paired protocol, on rows it was diagnosed on: a diagnosis.

    python validation/diagnose_pipeline_paired.py                      # specs/pipeline-runtime-heldout.json
    python validation/diagnose_pipeline_paired.py --spec validation/specs/parallel.json --passes 2

Not evidence: the configurations are those of a campaign already run and
read (issue 22, point 5). The spec is run as it stands except for
``"pipeline_profile": "runtime-paired"`` (each pipeline row profiled in
torch's runtime on loopback, predicted and its prediction stored right
before its own run; :mod:`queuesgd.harness.apriori_parallel.campaign_pass`)
and the number of passes (and, with ``--at-activations``, the exchange probe
also at the models' activations; with ``--exchange-statistic`` each size's
repeats summarised by their median or mean; with ``--exchange-stream`` k
messages back to back per repeat; with ``--profile-link`` the paired
profiles on an emulated link of that rate), into a temporary folder. Writes
``parallel/diagnose_pipeline_paired-<spec>.json``: every row's prediction,
measurement and error, and the figures per pass and pooled.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.apriori import Campaign  # noqa: E402
from queuesgd.harness.duplex import STATISTICS  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.schemes import Pipeline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(HERE / "specs" / "pipeline-runtime-heldout.json"))
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--at-activations", action="store_true", help="exchanges also at the models' activations")
    ap.add_argument("--exchange-statistic", choices=tuple(STATISTICS), default=None,
                    help="summarise each exchange size so (probes.exchange.statistic)")  # fmt: skip
    ap.add_argument("--exchange-stream", type=int, default=None, help="probes.exchange.stream")
    ap.add_argument("--profile-link", default=None, help="probes.runtime.link, e.g. 10Gbit/s")
    args = ap.parse_args(argv)
    doc = json.loads(Path(args.spec).read_text())
    name = doc["name"]
    doc.update(name=f"{name}-paired-diagnosis", pipeline_profile="runtime-paired", passes=args.passes)
    doc["lines"] = [line for line in doc["lines"] if line["scheme"] == Pipeline.key]
    # (probe, key, value, file-name suffix) of each switch given: the spec's own settings otherwise
    given = [
        ("exchange", "at_activations", True, "-at-activations") if args.at_activations else None,
        ("exchange", "statistic", args.exchange_statistic, f"-{args.exchange_statistic}")
        if args.exchange_statistic is not None else None,
        ("exchange", "stream", args.exchange_stream, f"-stream{args.exchange_stream}")
        if args.exchange_stream is not None else None,
        ("runtime", "link", args.profile_link, f"-profile{str(args.profile_link).replace('/', '')}")
        if args.profile_link is not None else None,
    ]  # fmt: skip
    tail = ""
    for probe, key, value, suffix in (g for g in given if g is not None):
        probes = doc.setdefault("probes", {})
        probes[probe] = {**probes.get(probe, {}), key: value}
        tail += suffix
    started = stamp()
    with tempfile.TemporaryDirectory() as tmp:
        result = Campaign(doc).run(tmp, progress=print)
        summary = result.summary()
    rows = [
        {
            "row": f"{r['model_label']} {r['params']['schedule']} M={r['params']['microbatches']} "
            f"{r['bandwidth'] / 1e6:g} MB/s",
            "pass": r["pass"],
            "counted": r["counted"],
            "predicted": r["predicted"],
            "measured": r["measured"],
            "error": r["error"],
            "loopback_step": r.get("probes", {}).get("loopback_step"),
            "duplex": r.get("duplex"),
        }
        for r in result.rows
    ]
    for r in rows:
        err = "failed" if r["error"] is None else f"{r['error']:+.1%}"
        print(f"  pass {r['pass']} {r['row']}: {err}")
    out = {"started": started, "spec": args.spec, "passes": args.passes, "rows": rows, "summary": summary}
    out["at_activations"] = args.at_activations
    out["exchange_statistic"] = args.exchange_statistic
    out["exchange_stream"] = args.exchange_stream
    out["profile_link"] = args.profile_link
    target = HERE / "parallel" / f"diagnose_pipeline_paired-{name}{tail}.json"
    target.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"wrote {target.relative_to(HERE)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
