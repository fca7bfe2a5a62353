"""Run the a-priori campaign of ``apriori.json``: profile, calibrate, predict, and only then train live.

    python validation/run_apriori.py                  # everything (about 20 minutes on 2 cores)
    python validation/run_apriori.py --only ddp       # one scheme's lines
    python validation/run_apriori.py --reprofile      # measure the profiles and calibrations again

The phases run in this order (profile, predict and run model by model, so
that a profile is measured shortly before the runs it predicts), and each
writes its records before the next starts, so that no prediction can use
anything measured in a run it predicts:

1. **profile** every model (``apriori/profiles/<model>.json``): one worker
   alone, layer-wise, and ``k`` concurrent copies for every worker count of
   the campaign (:func:`queuesgd.harness.apriori.make_profile`);
2. **calibrate** every network the runs use (``apriori/calibrations/``): ring
   all-reduces of ``n`` ranks for DDP, ping-pong messages and the duplex
   probe for the parameter server (beside ``n - 1`` busy processes for the
   asynchronous schemes, whose other workers compute during a transfer), in
   network namespaces with ``tc tbf`` at each rate;
3. **predict** every configuration from those files alone
   (``apriori/predictions.json``, with the time each prediction was made);
4. **run** every configuration live and compare with the stored prediction
   (``results/apriori-<scheme>-<model>.json``), then rebuild ``REPORT.md``
   (``python validation/run_campaign.py --report-only``);
5. **drift**: after each model's runs its one-worker DDP step is measured
   again (``apriori/drift.json``): how much the machine's own speed moved
   during the runs, a floor under any prediction's error (not used by any).

Profiles and calibrations already on disk are reused (their measurement
times are in every row) unless ``--reprofile`` is given.

``--spec FILE`` runs another campaign through the same protocol (the
held-out DDP campaign, ``apriori-heldout.json``), and ``--tag=-passN``
suffixes every file a pass writes (profiles, calibrations, predictions,
drift, rows), so that no pass overwrites another's inputs. A campaign with
``"calibrate_at_buckets": true`` profiles its models first and calibrates the
all-reduces at the sizes of the buckets DDP will send
(:func:`queuesgd.harness.apriori.ddp_calibration_sizes`).
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

import numpy as np  # noqa: E402

from queuesgd import units  # noqa: E402
from queuesgd.harness.apriori import (  # noqa: E402
    SCHEMES,
    Calibration,
    Profile,
    calibrate_network,
    ddp_calibration_sizes,
    make_profile,
    predict_apriori,
    run_apriori,
)
from queuesgd.harness.live_schemes import live_scheme  # noqa: E402
from queuesgd.harness.load import CpuMeter, disturbed  # noqa: E402
from queuesgd.harness.provenance import stamp  # noqa: E402
from queuesgd.harness.report import write_rows  # noqa: E402

#: Tries per configuration (and per profile) when other processes disturbed the machine.
ATTEMPTS = 3

#: The pass's tag (``--tag``): a suffix of every file a tagged pass writes, so that no pass overwrites
#: another's profiles, calibrations, predictions or rows.
TAG = ""


def _rate_tag(rate: str) -> str:
    return rate.replace("/", "").replace(" ", "")


def _configurations(spec: dict, only: str | None) -> list[tuple[str, str, str | None, int, dict]]:
    """``(scheme, model, rate, workers, extra)`` for every configuration (one worker: loopback, once).

    ``extra`` holds what a line adds to the cluster description and the scheme: ``params`` (the
    scheme's; ``model_params`` adds per-model ones, such as a cutoff on the scale of the model's
    step) and ``random_delay`` (the straggler recipe, ``"K:DELAY"``; per model, as a step of a few
    milliseconds and one of hundreds need delays of their own scale). A line's ``rates`` replace
    the campaign's.
    """
    out = []
    for line in spec["lines"]:
        if only and line["scheme"] != only:
            continue
        for model in line["models"]:
            delay = line.get("random_delay")
            extra = {
                "params": {**line.get("params", {}), **line.get("model_params", {}).get(model, {})},
                "random_delay": delay.get(model) if isinstance(delay, dict) else delay,
            }
            for n in line["workers"]:
                for rate in [None] if n == 1 else line.get("rates", spec["rates"]):
                    out.append((line["scheme"], model, rate, n, extra))
    return out


def _stem(scheme: str, model: str, extra: dict) -> str:
    """The results file of a configuration: one per scheme, model and scheme parameters."""
    tag = "".join(
        f"-{k}{v}" for k, v in sorted(extra["params"].items()) if k not in ("stragglers", "collective")
    )
    return f"apriori-{scheme}{tag}-{model}{TAG}".replace(":", "").replace("/", "")


def _profiles(spec: dict, configs: list, fresh: bool) -> dict[str, Profile]:
    folder = HERE / "apriori" / "profiles"
    profiles = {}
    for model in sorted({c[1] for c in configs}):
        path = folder / f"{model}{TAG}.json"
        if path.exists() and not fresh:
            profiles[model] = Profile.load(path)
            continue
        copies = sorted({c[3] for c in configs if c[1] == model})
        # eager-SGD's own loop on loopback, for the worker counts its lines run (its restarts and activations)
        eager = sorted({c[3] for c in configs if c[1] == model and live_scheme(c[0]).profile == "eager"})
        cfg = spec["models"][model]
        for _ in range(ATTEMPTS):
            t0 = time.time()
            with CpuMeter() as meter:
                prof = make_profile(
                    model,
                    batch_size=cfg["batch_size"],
                    copies=copies,
                    repetitions=spec["repetitions"],
                    model_options=cfg["model_options"],
                    eager=eager,
                )
            if not disturbed(meter.result()):
                break
            print(f"profile of {model} disturbed by other processes ({meter.result()}): again", flush=True)
        prof.save(path)
        profiles[model] = prof
        print(f"profiled {model} with copies {copies} ({time.time() - t0:.0f} s)", flush=True)
    return profiles


def _calibration_key(scheme: str, rate: str, n: int) -> tuple[str, str, int, int]:
    """``(kind, rate, ranks, busy)`` of the calibration a configuration uses."""
    kind = SCHEMES[scheme]
    if kind == "allreduce":
        return kind, rate, n, 0
    # Asynchronous schemes (not lock step): while one worker's message crosses the link the other
    # workers compute, so their point-to-point calibration runs beside n - 1 busy processes
    # (harness.busy); the barrier schemes' workers communicate in lock step, and theirs runs on idle cores.
    return kind, rate, 2, 0 if live_scheme(scheme).lock_step else n - 1


def _calibration_path(kind: str, rate: str, n: int, busy: int = 0) -> Path:
    tag = f"-busy{busy}" if busy else ""
    return HERE / "apriori" / "calibrations" / f"{kind}-{_rate_tag(rate)}-n{n}{tag}{TAG}.json"


def _calibrations(
    spec: dict, configs: list, fresh: bool, sizes: tuple[int, ...] | None = None
) -> dict[tuple, Calibration]:
    """The calibrations the configurations use; all-reduces at ``sizes`` when given (DDP's buckets)."""
    needed = {_calibration_key(scheme, rate, n) for scheme, _, rate, n, _ in configs if rate is not None}
    out = {}
    for key in sorted(needed):
        kind, rate, n, busy = key
        path = _calibration_path(kind, rate, n, busy)
        if path.exists() and not fresh:
            out[key] = Calibration.load(path)
            continue
        at = {"sizes": sizes} if sizes is not None and kind == "allreduce" else {}
        cal = calibrate_network(kind, n, rate, gap=spec["calibration_gap"], busy=busy, **at)
        cal.save(path)
        out[key] = cal
        print(
            f"calibrated {kind} n={n} at {rate} beside {busy} busy: alpha {units.format_seconds(cal.alpha)}, "
            f"B {units.format_bandwidth(cal.bandwidth)}, r2 {cal.r2:.4f}"
            + (f", duplex {cal.duplex['duplex']:.3f}" if cal.duplex else ""),
            flush=True,
        )
    return out


def _calibration_for(cals: dict, scheme: str, rate: str | None, n: int) -> Calibration | None:
    return None if rate is None else cals[_calibration_key(scheme, rate, n)]


def measure_drift(spec: dict, model: str, prof: Profile) -> dict:
    """The one-worker DDP step measured again after the model's runs, against the profile's.

    This machine's speed drifts (other tenants of the host): the ratio bounds how far any a-priori
    prediction made from the profile could be right, whatever the model. Measured on the profile's
    device (``run_gpu.py`` uses it too).
    """
    from queuesgd.harness.contention import measure_synchronized

    cfg = spec["models"][model]
    again = measure_synchronized(
        model,
        (1,),
        batch_size=cfg["batch_size"],
        repetitions=spec["repetitions"],
        model_options=cfg["model_options"],
        device=prof.device,
    )[1]["span"]
    before = float(np.mean(prof.sync_span["ddp"][1]))
    after = float(np.mean(again))
    print(f"drift of {model}: one-worker DDP step {before:.5f} s at profiling, {after:.5f} s after its runs")
    return {"model": model, "profiled": before, "after_runs": after, "ratio": after / before, "when": stamp()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SCHEMES), help="run only this scheme's lines")
    parser.add_argument("--reprofile", action="store_true", help="measure profiles and calibrations again")
    parser.add_argument("--predict-only", action="store_true", help="stop after writing the predictions")
    parser.add_argument("--spec", type=Path, default=HERE / "apriori.json", help="the campaign (JSON)")
    parser.add_argument("--tag", default="", help="a pass's suffix on every file it writes, e.g. -pass1")
    args = parser.parse_args(argv)
    global TAG
    TAG = args.tag
    spec = json.loads(args.spec.read_text())
    configs = _configurations(spec, args.only)

    profiles: dict[str, Profile] = {}
    if spec.get("calibrate_at_buckets"):
        # Profiles first, then the all-reduces calibrated at the sizes of the buckets DDP will send;
        # the predictions take these same profiles.
        profiles = _profiles(spec, configs, args.reprofile)
        sizes = ddp_calibration_sizes(profiles.values())  # a small size, every bucket, 4 MiB
        cals = _calibrations(spec, configs, args.reprofile, sizes)
    else:
        cals = _calibrations(spec, configs, args.reprofile)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    pred_path = HERE / "apriori" / f"predictions{TAG}.json"
    # With --only, the other schemes' stored predictions (and the other models' drift) are kept.
    kept = json.loads(pred_path.read_text()) if args.only and pred_path.exists() else []
    predictions: list[dict] = [r for r in kept if r.get("scheme") != args.only]
    drift_path = HERE / "apriori" / f"drift{TAG}.json"
    drift = json.loads(drift_path.read_text()) if args.only and drift_path.exists() else []
    # Model by model: its profile, then its predictions (stored), then its runs; so that the profile is
    # measured shortly before the runs it predicts (this machine's speed drifts over tens of minutes).
    for model in dict.fromkeys(c[1] for c in configs):
        mine = [c for c in configs if c[1] == model]
        prof = profiles[model] if model in profiles else _profiles(spec, mine, args.reprofile)[model]
        preds = []
        for scheme, _, rate, n, extra in mine:
            pred = predict_apriori(scheme, prof, _calibration_for(cals, scheme, rate, n), n, **extra)
            preds.append({"scheme": scheme, "model": model, "rate": rate, "workers": n, **extra, **pred})
        predictions.extend(preds)
        pred_path.write_text(json.dumps(predictions, indent=1) + "\n")
        print(f"{len(preds)} predictions of {model} written to {pred_path.relative_to(HERE)} before its runs")
        if args.predict_only:
            continue
        rows_by_file: dict[str, list] = {}
        for (scheme, _, rate, n, extra), pred in zip(mine, preds):
            # A run during which other processes took more than a tenth of the machine is disturbed
            # (harness.load.disturbed, from the kernel's counters, not from the error): it is kept as a
            # listed, uncounted row and the configuration runs again with the same stored prediction.
            for attempt in range(ATTEMPTS):
                t0 = time.time()
                row = run_apriori(
                    scheme,
                    prof,
                    _calibration_for(cals, scheme, rate, n),
                    n,
                    steps=spec["steps"],
                    warmup=spec["warmup"],
                    prediction=pred,
                    **extra,
                )
                row["disturbed"] = disturbed(row["load"])
                row["attempt"] = attempt + 1
                stem = _stem(scheme, model, extra)
                rows_by_file.setdefault(stem, []).append(row)
                write_rows(rows_by_file[stem], results, stem=stem)
                print(
                    f"{scheme:8s} {model:9s} n={n} {rate or 'loopback':10s} measured {row['measured']:9.1f} "
                    f"predicted {row['predicted']:9.1f} error {100 * row['error']:+6.1f}% "
                    f"({time.time() - t0:.0f} s){' DISTURBED' if row['disturbed'] else ''}",
                    flush=True,
                )
                if not row["disturbed"]:
                    break
        drift = [d for d in drift if d.get("model") != model] + [measure_drift(spec, model, prof)]
    if args.predict_only:
        return 0
    drift_path.write_text(json.dumps(drift, indent=1) + "\n")
    subprocess.run([sys.executable, str(HERE / "run_campaign.py"), "--report-only"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
