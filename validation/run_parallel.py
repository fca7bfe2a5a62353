"""Run the a-priori campaign of ``parallel.json``: FSDP2 and pipeline-parallel training of real models.

    python validation/run_parallel.py                 # everything (about 10 minutes on 2 cores)
    python validation/run_parallel.py --only fsdp     # one scheme's lines

As :mod:`run_apriori` does for DDP and the parameter servers, and in this
order, each phase writing its records before the next starts:

1. **profile** every model in runs of their own (``parallel/profiles/``): the
   layer-wise profile with the bare model's lock-step span of ``k`` copies
   (:func:`queuesgd.harness.apriori.make_profile`), FSDP2's own step of ``k``
   single-rank copies without a network (:func:`~queuesgd.harness.apriori_parallel.profile_fsdp`),
   and one micro-batch through each unit (:func:`~queuesgd.harness.pipelining.profile_stages`);
2. **calibrate** every rate (``parallel/calibrations/``): gloo's all-gather and
   reduce-scatter among the FSDP ranks, and batched point-to-point messages
   for the pipeline's activations, in network namespaces with ``tc tbf``;
3. **predict** every configuration from those files alone
   (``parallel/predictions.json``, with the time each was made):
   :class:`~queuesgd.ShardedDataParallel` (stage 3, FSDP's units) and
   :class:`~queuesgd.Pipeline`, ``method="fine"``;
4. **run** every configuration live (``results/apriori-fsdp-<model>.json``,
   ``results/apriori-pipeline-<schedule>-<model>.json``), each row with the
   machine's load during it (a run that other processes disturbed is run
   again and kept as an uncounted row), then rebuild ``REPORT.md``.

Profiles and calibrations are measured anew on every run of this script.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.harness.apriori import make_profile  # noqa: E402
from queuesgd.harness.apriori_parallel import (  # noqa: E402
    calibrate_parallel,
    predict_fsdp,
    predict_pipeline,
    profile_fsdp,
    run_parallel_apriori,
)
from queuesgd.harness.load import CpuMeter, disturbed  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.pipelining import profile_stages  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import jsonable, write_rows  # noqa: E402

ATTEMPTS = 3
OUT = HERE / "parallel"


def _configurations(spec: dict, only: str | None) -> list[dict]:
    """One dict per configuration: scheme, model, rate, workers and the scheme's parameters."""
    out = []
    for line in spec["lines"]:
        if only and line["scheme"] != only:
            continue
        for model in line["models"]:
            for rate in line.get("rates", spec["rates"]):
                if line["scheme"] == "fsdp":
                    for n in line["workers"]:
                        out.append(
                            {"scheme": "fsdp", "model": model, "rate": rate, "workers": n, "params": {}}
                        )
                    continue
                for schedule in line["schedules"]:
                    for m in line["microbatches"]:
                        params = {"schedule": schedule, "stages": line["stages"], "microbatches": m}
                        out.append(
                            {
                                "scheme": "pipeline",
                                "model": model,
                                "rate": rate,
                                "workers": line["stages"],
                                "params": params,
                                "microbatch": line["microbatch"],
                            }
                        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("fsdp", "pipeline"), help="run only this scheme's lines")
    args = parser.parse_args(argv)
    spec = json.loads((HERE / "parallel.json").read_text())
    configs = _configurations(spec, args.only)
    (OUT / "profiles").mkdir(parents=True, exist_ok=True)
    (OUT / "calibrations").mkdir(parents=True, exist_ok=True)

    # 1. profiles, in runs of their own
    profiles: dict[str, dict] = {}
    for model in dict.fromkeys(c["model"] for c in configs):
        cfg = spec["models"][model]
        mine = [c for c in configs if c["model"] == model]
        entry: dict = {}
        if any(c["scheme"] == "fsdp" for c in mine):
            copies = sorted({c["workers"] for c in mine if c["scheme"] == "fsdp"})
            entry["layers"] = make_profile(
                model,
                batch_size=cfg["batch_size"],
                copies=copies,
                repetitions=spec["repetitions"],
                synchronized=("plain",),
            )
            entry["layers"].save(OUT / "profiles" / f"{model}.json")
            entry["fsdp"] = profile_fsdp(model, batch_size=cfg["batch_size"], copies=copies)
            (OUT / "profiles" / f"{model}.fsdp.json").write_text(
                json.dumps(jsonable(entry["fsdp"]), indent=1)
            )
        if any(c["scheme"] == "pipeline" for c in mine):
            mb = next(c["microbatch"] for c in mine if c["scheme"] == "pipeline")
            entry["stages"] = profile_stages(model, microbatch=mb, repetitions=spec["repetitions"])
            entry["stages"].save(OUT / "profiles" / f"{model}.stages.json")
        profiles[model] = entry
        print(f"profiled {model}", flush=True)

    # 2. calibrations, in runs of their own
    cals: dict[tuple[str, str, int], object] = {}
    for c in configs:
        kind = "sharded" if c["scheme"] == "fsdp" else "p2p"
        key = (kind, c["rate"], c["workers"] if kind == "sharded" else 2)
        if key in cals:
            continue
        cal = calibrate_parallel(kind, key[2], c["rate"], gap=spec["calibration_gap"])
        tag = c["rate"].replace("/", "")
        cal.save(OUT / "calibrations" / f"{kind}-{tag}-n{key[2]}.json")
        cals[key] = cal
        print(
            f"calibrated {kind} n={key[2]} at {c['rate']}: alpha {cal.alpha:.3g} s, B {cal.bandwidth:.4g} B/s"
        )

    # 3. predictions, from those files alone, written before any run
    preds = []
    for c in configs:
        prof = profiles[c["model"]]
        if c["scheme"] == "fsdp":
            cal = cals[("sharded", c["rate"], c["workers"])]
            pred = predict_fsdp(prof["layers"], cal, c["workers"], fsdp=prof["fsdp"])
        else:
            cal = cals[("p2p", c["rate"], 2)]
            p = c["params"]
            pred = predict_pipeline(
                prof["stages"], cal, p["stages"], p["microbatches"], schedule=p["schedule"]
            )
        preds.append({**c, **pred})
    # With --only, the other scheme's stored predictions are kept.
    path = OUT / "predictions.json"
    kept = json.loads(path.read_text()) if args.only and path.exists() else []
    kept = [p for p in kept if p.get("scheme") != args.only]
    path.write_text(json.dumps(jsonable(kept + preds), indent=1) + "\n")
    print(f"{len(preds)} predictions written to {OUT.relative_to(HERE)}/predictions.json before any run")

    # 4. live runs, each in network namespaces at its rate
    results = HERE / "results"
    rows_by_file: dict[str, list] = {}
    for c, pred in zip(configs, preds):
        from queuesgd.harness.fsdp import run_fsdp
        from queuesgd.harness.pipelining import run_pipeline

        cfg = spec["models"][c["model"]]
        bw = float(units.parse_bandwidth(c["rate"], "rate"))
        if c["scheme"] == "fsdp":
            batch = cfg["batch_size"]

            def job(setup, host, c=c, batch=batch):  # noqa: ANN001, ANN202
                return run_fsdp(
                    c["model"],
                    c["workers"],
                    spec["steps"],
                    batch_size=batch,
                    warmup=spec["warmup"],
                    setup=setup,
                    host=host,
                )
        else:
            batch = c["microbatch"]

            def job(setup, host, p=c["params"], c=c, pred=pred):  # noqa: ANN001, ANN202
                return run_pipeline(
                    c["model"],
                    p["stages"],
                    p["microbatches"],
                    spec["steps"],
                    schedule=p["schedule"],
                    batch_size=p["microbatches"] * c["microbatch"],
                    warmup=spec["warmup"],
                    split=pred["split"],
                    setup=setup,
                    host=host,
                )

        def run(job=job, n=c["workers"], bw=bw):  # noqa: ANN001, ANN202 - the records, in namespaces at the rate
            return on_network(n, bw, job)[0]

        for attempt in range(ATTEMPTS):
            t0 = time.time()
            with CpuMeter() as meter:
                row = run_parallel_apriori(c["scheme"], pred, run, batch)
            cal_kind = "sharded" if c["scheme"] == "fsdp" else "p2p"
            cal = cals[(cal_kind, c["rate"], c["workers"] if cal_kind == "sharded" else 2)]
            layers = profiles[c["model"]].get("layers")
            row.update(
                {
                    "workers": c["workers"],
                    "workload": c["model"],
                    "batch_size": batch,
                    "gradient_bytes": None if layers is None else float(layers.workload.gradient_bytes),
                    "bandwidth": bw,
                    "emulation": "netns-tbf",
                    "params": c["params"],
                    "profile": {"measured": pred["profile_measured"]},
                    "calibration": {
                        "kind": cal_kind,
                        "measured": cal.measured,
                        "alpha": cal.alpha,
                        "bandwidth": cal.bandwidth,
                    },
                    "load": meter.result(),
                    "attempt": attempt + 1,
                }
            )
            row["disturbed"] = disturbed(row["load"])
            tag = "" if c["scheme"] == "fsdp" else f"-{c['params']['schedule']}"
            stem = f"apriori-{c['scheme']}{tag}-{c['model']}"
            rows_by_file.setdefault(stem, []).append(row)
            write_rows(rows_by_file[stem], results, stem=stem)
            print(
                f"{c['scheme']:8s} {c['model']:5s} n={c['workers']} {c['rate']:9s} {c['params']} measured "
                f"{row['measured']:8.1f} predicted {row['predicted']:8.1f} error {100 * row['error']:+6.1f}% "
                f"({time.time() - t0:.0f} s){' DISTURBED' if row['disturbed'] else ''}",
                flush=True,
            )
            if not row["disturbed"]:
                break
    print(f"campaign ended {stamp()}")
    subprocess.run([sys.executable, str(HERE / "run_campaign.py"), "--report-only"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
