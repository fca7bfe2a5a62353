"""Run the a-priori campaign of ``parallel.json``: FSDP2 and pipeline-parallel training of real models.

    python validation/run_parallel.py                 # everything (about 10 minutes on 2 cores)
    python validation/run_parallel.py --only fsdp     # one scheme's lines

As :mod:`run_apriori` does for DDP and the parameter servers, and in this
order, each phase writing its records before the next starts:

1. **profile** every model in runs of their own (``parallel/profiles/``), as
   each line's row of the live table asks (its ``profile``;
   :func:`~queuesgd.harness.apriori_parallel.measure_inputs`): for FSDP the
   layer-wise profile with the bare model's lock-step span of ``k`` copies and
   FSDP2's own step of ``k`` single-rank copies without a network, for a
   pipeline one micro-batch through each unit;
2. **calibrate** every rate (``parallel/calibrations/``) with the row's
   calibration: gloo's all-gather and reduce-scatter among the FSDP ranks,
   and batched point-to-point messages for the pipeline's activations, in
   network namespaces with ``tc tbf``;
3. **predict** every configuration from those files alone
   (``parallel/predictions.json``, with the time each was made): the row's
   model (:class:`~queuesgd.ShardedDataParallel`, stage 3, FSDP's units;
   :class:`~queuesgd.Pipeline`), ``method="fine"``
   (:func:`~queuesgd.harness.apriori_parallel.predict_parallel`);
4. **run** every configuration live with the row's loop
   (:func:`~queuesgd.harness.apriori_parallel.run_parallel`;
   ``results/apriori-fsdp-<model>.json``,
   ``results/apriori-pipeline-<schedule>-<model>.json``), each row with the
   machine's load during it (a run that other processes disturbed is run
   again and kept as an uncounted row), then rebuild ``REPORT.md``.

A line of ``parallel.json`` gives each of its row's parameters as a value or a
list (under the parameter's name, or its plural): every combination is a
configuration. Its ``workers`` default to its ``stages`` (one pipeline
replica); its live batch is its ``microbatch`` (a pipeline's records count
micro-batch gradients), else the model's ``batch_size``.

Profiles and calibrations are measured anew on every run of this script.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.harness.apriori_parallel import (  # noqa: E402
    calibrate_parallel,
    calibration_ranks,
    measure_inputs,
    parallel_scheme,
    predict_parallel,
    run_parallel,
    run_parallel_apriori,
    save_inputs,
)
from queuesgd.harness.load import CpuMeter, disturbed  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import jsonable, write_rows  # noqa: E402

ATTEMPTS = 3
OUT = HERE / "parallel"


def _grid(line: dict) -> list[dict]:
    """Every combination of the line's values of its row's parameters (a list is a choice), in line order."""
    row = parallel_scheme(line["scheme"])
    given = {}
    for key, value in line.items():
        name = next((p for p in (key, key.removesuffix("s")) if p in row.params), None)
        if name is not None:
            given[name] = value if isinstance(value, list) else [value]
    return [dict(zip(given, combo)) for combo in itertools.product(*given.values())]


def _configurations(spec: dict, only: str | None) -> list[dict]:
    """One dict per configuration: scheme, model, rate, workers, the row's parameters and the live batch."""
    out = []
    for line in spec["lines"]:
        row = parallel_scheme(line["scheme"])
        if only and row is not parallel_scheme(only):
            continue
        for model in line["models"]:
            batch = line.get("microbatch", spec["models"][model]["batch_size"])
            for rate in line.get("rates", spec["rates"]):
                for params in _grid(line):
                    for n in line.get("workers", [line.get("stages")]):
                        row.check_params(params, n)  # refused here, before anything is measured
                        out.append(
                            {
                                "scheme": line["scheme"],
                                "model": model,
                                "rate": rate,
                                "workers": n,
                                "params": params,
                                "batch": batch,
                            }
                        )
    return out


def _calibration_key(c: dict) -> tuple[str, str, int]:
    kind = parallel_scheme(c["scheme"]).calibration(c["params"])
    return kind, c["rate"], calibration_ranks(kind, c["workers"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", help="run only this scheme's lines (a scheme of parallel.json: fsdp, pipeline)"
    )
    args = parser.parse_args(argv)
    spec = json.loads((HERE / "parallel.json").read_text())
    configs = _configurations(spec, args.only)
    (OUT / "profiles").mkdir(parents=True, exist_ok=True)
    (OUT / "calibrations").mkdir(parents=True, exist_ok=True)

    # 1. profiles, in runs of their own: each row's profile of each model
    profiles: dict[tuple[str, str], dict] = {}
    for c in configs:
        key = (c["model"], parallel_scheme(c["scheme"]).profile)
        if key in profiles:
            continue
        mine = [d for d in configs if (d["model"], parallel_scheme(d["scheme"]).profile) == key]
        profiles[key] = measure_inputs(
            c["scheme"],
            c["model"],
            batch_size=c["batch"],
            workers=[d["workers"] for d in mine],
            repetitions=spec["repetitions"],
        )
        save_inputs(profiles[key], OUT / "profiles", c["model"])
        print(f"profiled {c['model']} ({key[1]})", flush=True)

    # 2. calibrations, in runs of their own
    cals: dict[tuple[str, str, int], object] = {}
    for c in configs:
        key = _calibration_key(c)
        if key in cals:
            continue
        kind, rate, ranks = key
        cal = calibrate_parallel(kind, ranks, rate, gap=spec["calibration_gap"])
        cal.save(OUT / "calibrations" / f"{kind}-{rate.replace('/', '')}-n{ranks}.json")
        cals[key] = cal
        print(f"calibrated {kind} n={ranks} at {rate}: alpha {cal.alpha:.3g} s, B {cal.bandwidth:.4g} B/s")

    # 3. predictions, from those files alone, written before any run
    preds = []
    for c in configs:
        inputs = profiles[(c["model"], parallel_scheme(c["scheme"]).profile)]
        pred = predict_parallel(c["scheme"], inputs, cals[_calibration_key(c)], c["workers"], c["params"])
        preds.append({**c, **pred})
    # With --only, the other schemes' stored predictions are kept.
    path = OUT / "predictions.json"
    kept = json.loads(path.read_text()) if args.only and path.exists() else []
    kept = [p for p in kept if parallel_scheme(p["scheme"]) is not parallel_scheme(args.only)]
    path.write_text(json.dumps(jsonable(kept + preds), indent=1) + "\n")
    print(f"{len(preds)} predictions written to {OUT.relative_to(HERE)}/predictions.json before any run")

    # 4. live runs with the row's loop, each in network namespaces at its rate
    results = HERE / "results"
    rows_by_file: dict[str, list] = {}
    for c, pred in zip(configs, preds):
        bw = float(units.parse_bandwidth(c["rate"], "rate"))
        # The run takes the split the prediction chose (a pipeline's balanced split of its profile).
        params = {**c["params"], **({"split": pred["split"]} if "split" in pred else {})}

        def job(setup, host, c=c, params=params):  # noqa: ANN001, ANN202
            return run_parallel(
                c["scheme"],
                c["model"],
                c["workers"],
                spec["steps"],
                batch_size=c["batch"],
                params=params,
                warmup=spec["warmup"],
                setup=setup,
                host=host,
            )

        def run(job=job, n=c["workers"], bw=bw):  # noqa: ANN001, ANN202 - the records, in namespaces at the rate
            return on_network(n, bw, job)[0]

        for attempt in range(ATTEMPTS):
            t0 = time.time()
            with CpuMeter() as meter:
                row = run_parallel_apriori(c["scheme"], pred, run, c["batch"])
            cal = cals[_calibration_key(c)]
            layers = profiles[(c["model"], parallel_scheme(c["scheme"]).profile)].get("layers")
            row.update(
                {
                    "workers": c["workers"],
                    "workload": c["model"],
                    "batch_size": c["batch"],
                    "gradient_bytes": None if layers is None else float(layers.workload.gradient_bytes),
                    "bandwidth": bw,
                    "emulation": "netns-tbf",
                    "params": c["params"],
                    "profile": {"measured": pred["profile_measured"]},
                    "calibration": {
                        "kind": cal.kind,
                        "measured": cal.measured,
                        "alpha": cal.alpha,
                        "bandwidth": cal.bandwidth,
                    },
                    "load": meter.result(),
                    "attempt": attempt + 1,
                }
            )
            row["disturbed"] = disturbed(row["load"])
            # One file per scheme, named variant (a string parameter: the schedule) and model.
            tag = "".join(f"-{v}" for v in c["params"].values() if isinstance(v, str))
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
