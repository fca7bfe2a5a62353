"""Run the validation campaign of ``campaign.json`` and regenerate ``REPORT.md``.

    python validation/run_campaign.py                 # everything (about 30 minutes on 2 cores)
    python validation/run_campaign.py --only sync-ps  # one scheme
    python validation/run_campaign.py --report-only   # rebuild REPORT.md from results/

Results go to ``validation/results/<scheme>-<i>.json`` (one file per
configuration line, so a partial campaign keeps what it measured); the report
combines every file found there. Notes on where a model misses come from
``notes.json`` (written by people, from the measurements, not tuned to them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd.harness.report import plot_rows, read_rows, write_report, write_rows  # noqa: E402


def _machine() -> str:
    import torch

    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, torch {torch.__version__}; "
        f"load average {load:.2f} when the report was built"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only this scheme's lines")
    parser.add_argument("--report-only", action="store_true", help="rebuild REPORT.md from results/")
    args = parser.parse_args(argv)
    spec = json.loads((HERE / "campaign.json").read_text())
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    if not args.report_only:
        from queuesgd.harness.campaign import validate

        for i, line in enumerate(spec["configurations"]):
            if args.only and line["scheme"] != args.only:
                continue
            cfg = {**spec["defaults"], **line}
            scheme = cfg.pop("scheme")
            t0 = time.time()
            result = validate(scheme, **cfg)
            write_rows(result.rows, results, stem=f"{scheme}-{i}")
            print(result.table(), f"\n({time.time() - t0:.0f} s)", flush=True)
    rows = []
    for path in sorted(results.glob("*.json")):
        rows += read_rows(path)
    plot_rows(rows, HERE / "measured-vs-predicted.png")
    notes_path = HERE / "notes.json"
    notes = json.loads(notes_path.read_text()) if notes_path.exists() else None
    ran = max((r.get("started", "") for r in rows), default="never")
    write_report(
        rows,
        HERE / "REPORT.md",
        ran=f"{ran} (latest configuration); report built {dt.datetime.now().isoformat(timespec='seconds')}",
        command="python validation/run_campaign.py",
        machine=_machine(),
        notes=notes,
        plot="measured-vs-predicted.png",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
