"""Run the preregistered a-priori campaign of ``specs/parallel.json``: FSDP2 and pipelines on real models.

    python validation/run_parallel.py                  # every pass (about 25 minutes on 2 quiet cores)
    python validation/run_parallel.py --predict-only   # inputs, probes and predictions; no training run

The spec fixes, before anything runs, the models, links, lines, run length,
the number of passes, the discard rule and the targets; its sha256
(:func:`~queuesgd.harness.apriori.canonical_json`) and the code's commit are
written to ``parallel/spec.json`` first and recorded in every row. Then, for
every pass, each phase writing its records before the next starts:

1. **profile** every model in runs of their own (``parallel/profiles/``), as
   each line's row of the live table asks (its ``profile``;
   :func:`~queuesgd.harness.apriori_parallel.measure_inputs`): for FSDP the
   layer-wise profile with the bare model's lock-step span of ``k`` copies and
   FSDP2's own step of ``k`` single-rank copies without a network, for a
   pipeline one micro-batch through each unit;
2. **calibrate** every link (``parallel/calibrations/``) with the row's
   calibration: gloo's all-gather and reduce-scatter among the FSDP ranks,
   and batched point-to-point messages for the pipeline's activations, in
   network namespaces with ``tc tbf``;
3. **probe** what a pipeline costs besides its passes and one-way messages
   (``parallel/probes/``; :mod:`queuesgd.harness.apriori_parallel.probes`):
   the runtime's work per pass (the tiny MLP trained by the real runtime at
   each pipeline configuration's stages, schedule, micro-batches and link,
   then ``Pipeline(action_overhead=)`` solved from the row's model at the
   probe's step) and the link's fused exchanges both ways over a size sweep
   (``Pipeline(duplex=)`` at the activation's size);
4. **predict** every configuration from those files alone
   (``parallel/predictions-passN.json``, stored with the time it was written);
5. **run** every configuration live with the row's loop; a run during which
   other processes took more than the spec's share of the machine is kept,
   listed, uncounted and run again (up to ``attempts`` tries). Rows go to
   ``results/apriori-parallel-<scheme>[-<schedule>]-<model>-passN.json``.

Profiles, calibrations and probes measured under the discard rule's
disturbance are measured again (up to ``attempts`` tries). At the end:
``parallel/summary.json`` with every pass's figures and the pooled ones per
scheme, each judged against the targets, and ``REPORT.md`` rebuilt.

A line gives each of its row's parameters as a value or a list (under the
parameter's name, or its plural): every combination is a configuration. Its
``workers`` default to its ``stages`` (one pipeline replica); its live batch
is its ``microbatch`` (a pipeline's records count micro-batch gradients),
else the model's ``batch_size``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from queuesgd import units  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.harness.apriori.campaign import pass_figures  # noqa: E402
from queuesgd.harness.apriori.spec import DiscardRule, canonical_json  # noqa: E402
from queuesgd.harness.apriori_parallel import (  # noqa: E402
    action_overhead,
    calibrate_exchange,
    calibrate_parallel,
    calibration_ranks,
    measure_inputs,
    parallel_scheme,
    predict_parallel,
    probe_runtime,
    profile_tiny,
    run_parallel,
    run_parallel_apriori,
    save_inputs,
)
from queuesgd.harness.load import CpuMeter, disturbed  # noqa: E402
from queuesgd.harness.netns import on_network  # noqa: E402
from queuesgd.harness.provenance import code_version, stamp  # noqa: E402
from queuesgd.harness.report import jsonable, write_rows  # noqa: E402

SPEC = HERE / "specs" / "parallel.json"
_REQUIRED = ("name", "models", "rates", "steps", "warmup", "passes", "discard", "targets", "probes", "lines")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def load_spec(path: Path) -> tuple[dict, str, DiscardRule]:
    """The spec, its sha256 and its discard rule; a missing or wrong field is one error naming it."""
    doc = json.loads(path.read_text())
    for name in _REQUIRED:
        if name not in doc:
            raise InvalidParameterError(f"spec.{name}", None, "a required field (see the module docstring)")
    passes = doc["passes"]
    if not isinstance(passes, int) or isinstance(passes, bool) or passes < 1:
        raise InvalidParameterError("spec.passes", passes, "a whole number >= 1")
    d = doc["discard"]
    rule = DiscardRule(d["rule"], int(d.get("attempts", 1)), float(d.get("limit", 0.1)))
    if rule.rule not in ("disturbed", "none"):
        raise InvalidParameterError("spec.discard.rule", rule.rule, "'disturbed' or 'none'")
    return doc, hashlib.sha256(canonical_json(doc).encode()).hexdigest(), rule


def _rate(text: str) -> float | None:
    return None if text == "loopback" else float(units.parse_bandwidth(text, "rate"))


def _grid(line: dict) -> list[dict]:
    """Every combination of the line's values of its row's parameters (a list is a choice), in line order."""
    row = parallel_scheme(line["scheme"])
    given = {}
    for key, value in line.items():
        name = next((p for p in (key, key.removesuffix("s")) if p in row.params), None)
        if name is not None:
            given[name] = value if isinstance(value, list) else [value]
    return [dict(zip(given, combo)) for combo in itertools.product(*given.values())]


def _configurations(spec: dict) -> list[dict]:
    """One dict per configuration: scheme, model, rate, workers, the row's parameters and the live batch."""
    out = []
    for line in spec["lines"]:
        row = parallel_scheme(line["scheme"])
        for model in line["models"]:
            batch = line.get("microbatch", spec["models"][model]["batch_size"])
            for rate in line.get("rates", spec["rates"]):
                for params in _grid(line):
                    for n in line.get("workers", [line.get("stages")]):
                        row.check_params(params, n)  # refused here, before anything is measured
                        out.append(
                            {"scheme": line["scheme"], "model": model, "rate": rate, "workers": n,
                             "params": params, "batch": batch}
                        )  # fmt: skip
    return out


def _calibration_key(c: dict) -> tuple[str, str, int]:
    kind = parallel_scheme(c["scheme"]).calibration(c["params"])
    return kind, c["rate"], calibration_ranks(kind, c["workers"])


def _probe_key(c: dict) -> tuple[int, str, int, str]:
    p = c["params"]
    return p["stages"], p["schedule"], p["microbatches"], c["rate"]


def _stem(c: dict, number: int) -> str:
    """The rows' file: one per scheme, named variant (a string parameter: the schedule), model and pass."""
    tag = "".join(f"-{v}" for v in c["params"].values() if isinstance(v, str))
    return f"apriori-parallel-{c['scheme']}{tag}-{c['model']}-pass{number}"


def _where(rate: str) -> str:
    return rate.replace("/", "").replace(" ", "")


def _measured(what: str, fn: Callable[[], Any], rule: DiscardRule) -> tuple[Any, dict]:
    """``fn()`` under a CPU meter, again while the discard rule finds it disturbed (up to its attempts)."""
    for attempt in range(rule.attempts):
        with CpuMeter() as meter:
            value = fn()
        load = meter.result()
        if rule.rule != "disturbed" or not disturbed(load, rule.limit) or attempt == rule.attempts - 1:
            return value, load
        print(f"{what} disturbed by other processes ({load['foreign_share']:.0%} of the machine): again")
    raise AssertionError("unreachable")


def _pass(number: int, spec: dict, digest: str, rule: DiscardRule, predict_only: bool, out: Path,
          results: Path) -> list[dict]:  # fmt: skip
    tag = f"-pass{number}"
    configs = _configurations(spec)
    for sub in ("profiles", "calibrations", "probes"):
        (out / sub).mkdir(parents=True, exist_ok=True)

    # 1. profiles, in runs of their own: each row's profile of each model
    profiles: dict[tuple[str, str], dict] = {}
    for c in configs:
        key = (c["model"], parallel_scheme(c["scheme"]).profile)
        if key in profiles:
            continue
        mine = [d for d in configs if (d["model"], parallel_scheme(d["scheme"]).profile) == key]
        profiles[key], _ = _measured(
            f"profile of {c['model']}",
            lambda c=c, mine=mine: measure_inputs(
                c["scheme"], c["model"], batch_size=c["batch"], workers=[d["workers"] for d in mine],
                repetitions=spec.get("repetitions", 20),
            ),
            rule,
        )  # fmt: skip
        save_inputs(profiles[key], out / "profiles", f"{c['model']}{tag}")
        print(f"profiled {c['model']} ({key[1]})", flush=True)

    # 2. calibrations, in runs of their own
    cals: dict[tuple[str, str, int], Any] = {}
    for c in configs:
        key = _calibration_key(c)
        if key in cals:
            continue
        kind, rate, ranks = key
        cal, _ = _measured(
            f"calibration {kind} at {rate}",
            lambda kind=kind, ranks=ranks, rate=rate: calibrate_parallel(
                kind, ranks, _rate(rate), gap=spec.get("calibration_gap", 0.0)
            ),
            rule,
        )
        cal.save(out / "calibrations" / f"{kind}-{_where(rate)}-n{ranks}{tag}.json")
        cals[key] = cal
        print(f"calibrated {kind} n={ranks} at {rate}: alpha {cal.alpha:.3g} s, B {cal.bandwidth:.4g} B/s")

    # 3. the pipeline probes: the runtime's work per pass, and the link's fused exchanges
    pipes = [c for c in configs if parallel_scheme(c["scheme"]).profile == "stages"]
    runtime: dict[tuple, dict] = {}
    exchanges: dict[str, Any] = {}
    if pipes:
        settings, sweep = spec["probes"]["runtime"], spec["probes"]["exchange"]
        tiny, _ = _measured("tiny profile", lambda: profile_tiny(settings.get("repetitions", 50)), rule)
        tiny.save(out / "probes" / f"tiny{tag}.stages.json")
        for rate in dict.fromkeys(c["rate"] for c in pipes):
            ex, load = _measured(
                f"exchanges at {rate}",
                lambda rate=rate: calibrate_exchange(
                    _rate(rate), sizes=sweep["sizes"], repeats=sweep["repeats"]
                ),
                rule,
            )  # fmt: skip
            ex.save(out / "probes" / f"exchange-{_where(rate)}{tag}.json")
            exchanges[rate] = ex
            print(f"exchanges at {rate}: shares {ex.shares} at {ex.sizes} bytes", flush=True)
        for c in pipes:
            key = _probe_key(c)
            if key in runtime:
                continue
            S, sched, M, rate = key
            probe, load = _measured(
                f"runtime probe {key}",
                lambda S=S, sched=sched, M=M, rate=rate: probe_runtime(
                    S, sched, M, _rate(rate), profile=tiny, steps=settings["steps"],
                    warmup=settings["warmup"], runs=settings.get("runs", 1),
                ),
                rule,
            )  # fmt: skip
            # The probe's own link calibration is the row's (same kind, rate and ranks), measured above.
            solved = action_overhead(probe, tiny, cals[_calibration_key(c)], duplex=1.0)
            runtime[key] = {**probe, **solved, "load": load}
            path = out / "probes" / f"runtime-{sched}-S{S}-M{M}-{_where(rate)}{tag}.json"
            path.write_text(json.dumps(jsonable(runtime[key]), indent=1) + "\n")
            print(
                f"runtime probe S={S} {sched} M={M} at {rate}: step {probe['step'] * 1e3:.3f} ms "
                f"(model without overhead {solved['model_step_without'] * 1e3:.3f} ms) -> action_overhead "
                f"{solved['action_overhead'] * 1e3:.3f} ms per pass (self-consistency "
                f"{solved['self_consistency']:+.1e})",
                flush=True,
            )

    # 4. predictions, from those files alone, stored before any run
    preds = []
    for c in configs:
        inputs = profiles[(c["model"], parallel_scheme(c["scheme"]).profile)]
        extra: dict[str, Any] = {}
        if c in pipes:
            extra = {
                "action_overhead": runtime[_probe_key(c)]["action_overhead"],
                "exchange": exchanges[c["rate"]],
            }
        pred = predict_parallel(c["scheme"], inputs, cals[_calibration_key(c)], c["workers"], c["params"],
                                **extra)  # fmt: skip
        kind, rate, ranks = _calibration_key(c)
        pred["input_files"] = {  # relative to --out: what the prediction read (rebuild_parallel)
            "profiles": f"{c['model']}{tag}",
            "calibration": f"calibrations/{kind}-{_where(rate)}-n{ranks}{tag}.json",
        }
        if c in pipes:
            S, sched, M, _ = _probe_key(c)
            pred["input_files"].update(
                exchange=f"probes/exchange-{_where(rate)}{tag}.json",
                runtime=f"probes/runtime-{sched}-S{S}-M{M}-{_where(rate)}{tag}.json",
                tiny=f"probes/tiny{tag}.stages.json",
            )
            probe = runtime[_probe_key(c)]
            pred["probes"] = {
                k: probe[k] for k in ("step", "model_step_without", "self_consistency", "measured")
            }
        preds.append({**c, **pred, "pass": number})
    stored = _now()
    (out / f"predictions{tag}.json").write_text(
        json.dumps(jsonable([{**p, "stored": stored} for p in preds]), indent=1) + "\n"
    )
    print(f"{len(preds)} predictions stored in parallel/predictions{tag}.json before any run")
    if predict_only:
        return []

    # 5. live runs with the row's loop, each in network namespaces at its rate
    rows: list[dict] = []
    for c, pred in zip(configs, preds):
        bw = _rate(c["rate"])
        # The run takes the split the prediction chose (a pipeline's balanced split of its profile).
        params = {**c["params"], **({"split": pred["split"]} if "split" in pred else {})}

        def job(setup, host, c=c, params=params):  # noqa: ANN001, ANN202
            return run_parallel(c["scheme"], c["model"], c["workers"], spec["steps"], batch_size=c["batch"],
                                params=params, warmup=spec["warmup"], setup=setup, host=host)  # fmt: skip

        def run(job=job, n=c["workers"], bw=bw):  # noqa: ANN001, ANN202 - the records, in namespaces at the rate
            return on_network(n, bw, job)[0]

        cal = cals[_calibration_key(c)]
        for attempt in range(1, rule.attempts + 1):
            t0, started = time.time(), _now()
            with CpuMeter() as meter:
                try:
                    row = run_parallel_apriori(c["scheme"], pred, run, c["batch"])
                except Exception as exc:  # a failed run is a row, never hidden; the campaign goes on
                    row = {"scheme": c["scheme"], "failure": f"{type(exc).__name__}: {exc}",
                           "measured": None, "predicted": pred["predicted"], "error": None,
                           "commit": code_version()}  # fmt: skip
            layers = profiles[(c["model"], parallel_scheme(c["scheme"]).profile)].get("layers")
            row.update(
                workers=c["workers"], workload=c["model"], batch_size=c["batch"],
                gradient_bytes=None if layers is None else float(layers.workload.gradient_bytes),
                bandwidth=bw, emulation="netns-tbf" if bw is not None else "none", params=c["params"],
                profile={"measured": pred["profile_measured"]},
                calibration={"kind": cal.kind, "measured": cal.measured, "alpha": cal.alpha,
                             "bandwidth": cal.bandwidth},
                load=meter.result(), campaign=spec["name"], spec_hash=digest, run_started=started,
                prediction_stored=stored, attempt=attempt,
            )  # fmt: skip
            row["pass"] = number
            row["disturbed"] = disturbed(row["load"], rule.limit)
            reason = rule.reason(row)
            row.update(counted=reason is None, discarded=reason, stem=_stem(c, number))
            rows.append(row)
            write_rows([r for r in rows if r["stem"] == row["stem"]], results, stem=row["stem"])
            shown = "FAILED " + row["failure"] if row.get("failure") else f"error {100 * row['error']:+6.1f}%"
            print(
                f"pass {number} {c['scheme']:8s} {c['model']:5s} n={c['workers']} {c['rate']:9s} "
                f"{c['params']} "
                f"predicted {row['predicted']:8.1f} {shown} ({time.time() - t0:.0f} s)"
                + (f" not counted: {reason}" if reason else ""),
                flush=True,
            )
            if reason != "disturbed":
                break
    return rows


def summary(rows: list[dict], spec: dict, digest: str) -> dict:
    """Every pass's figures and the pooled ones (overall and per scheme), the targets judged pooled."""
    out = pass_figures(rows)
    med, top = spec["targets"]["median"], spec["targets"]["max"]

    def met(f: dict) -> bool | None:
        return None if not f["rows"] else f["median_abs_error"] <= med and f["max_abs_error"] <= top

    return {
        "campaign": spec["name"],
        "spec_hash": digest,
        "commits": sorted({str(r.get("commit")) for r in rows}),
        "passes_registered": spec["passes"],
        "rows": len(rows),
        "discarded": sum(1 for r in rows if not r.get("counted")),
        **out,
        "targets": spec["targets"],
        "target_met": {s: met(f) for s, f in out["pooled"]["by_scheme"].items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--spec", type=Path, default=SPEC, help="the campaign's spec (default: specs/parallel.json)"
    )
    parser.add_argument("--out", type=Path, default=HERE / "parallel", help="inputs, probes and predictions")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="the rows")
    parser.add_argument("--predict-only", action="store_true", help="stop every pass after its predictions")
    parser.add_argument("--no-report", action="store_true", help="do not rebuild REPORT.md at the end")
    args = parser.parse_args(argv)
    spec, digest, rule = load_spec(args.spec)
    _configurations(spec)  # every configuration checked before anything runs
    args.out.mkdir(parents=True, exist_ok=True)
    registration = {"hash": digest, "registered": _now(), "commit": code_version(), "spec": spec}
    (args.out / "spec.json").write_text(json.dumps(registration, indent=1) + "\n")
    rows: list[dict] = []
    for number in range(1, spec["passes"] + 1):
        print(f"pass {number} of {spec['passes']}", flush=True)
        rows += _pass(number, spec, digest, rule, args.predict_only, args.out, args.results)
    if args.predict_only:
        return 0
    result = summary(rows, spec, digest)
    (args.out / "summary.json").write_text(json.dumps(jsonable(result), indent=1) + "\n")
    for p in result["passes"] + [{"pass": "pooled", **result["pooled"]}]:
        for scheme, f in p["by_scheme"].items():
            if f["rows"]:
                print(f"pass {p['pass']}: {scheme}: {f['rows']} rows, median {f['median_abs_error']:.1%}, "
                      f"max {f['max_abs_error']:.1%}")  # fmt: skip
    print(f"targets (pooled, per scheme) {spec['targets']}: {result['target_met']}; campaign ended {stamp()}")
    if not args.no_report:
        subprocess.run([sys.executable, str(HERE / "run_campaign.py"), "--report-only"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
