"""The FSDP and pipeline lines of a campaign pass, as :class:`~queuesgd.harness.apriori.Campaign` runs them.

A :class:`~queuesgd.harness.apriori.Campaign` hands the configurations of
its FSDP and pipeline lines to :func:`parallel_pass`, which follows the same
protocol with the rows' own inputs (the profile, calibration and probes of
:mod:`queuesgd.harness.apriori_parallel`), each phase written before the
next starts:

1. **profile** every model as its row asks (:func:`measure_inputs`:
   ``profiles/<label>-<profile>-passN*.json``);
2. **calibrate** every link (:func:`calibrate_parallel`:
   ``calibrations/parallel-<kind>-<rate>-nK-passN.json``; with the spec's
   ``"sharded_calibration": "busy-mean"`` an FSDP line's is made per model,
   ``parallel-sharded-<label>-...``, each collective after the model's
   compute between two collectives, :func:`fsdp_busy_work`);
3. **probe** what a pipeline costs besides its passes and one-way messages
   (``probes/``): the tiny model's stage profile, the link's fused exchanges
   at each rate (:func:`calibrate_exchange`; with the spec's
   ``probes.exchange.at_activations`` also at every activation the pipeline
   rows' models can send there; with ``probes.exchange.statistic`` ``"mean"``
   each size's mean times, not medians; with ``probes.exchange.stream`` k,
   k messages back to back per repeat), and the runtime at each
   pipeline configuration's stages, schedule, micro-batches and link
   (:func:`probe_runtime`), solved for ``Pipeline(action_overhead=)``
   (:func:`action_overhead`; its residual is a self-consistency check);
4. **predict** from those files alone (:func:`predict_parallel`); every
   prediction names the files it read (``input_files``, relative to the
   campaign's folder: :func:`rebuild_parallel` makes it again) and is
   stored (``predictions-passN.json``) before any run;
5. **run** each configuration live with the campaign's discard rule
   (:meth:`~queuesgd.harness.apriori.Campaign.attempts` around
   :func:`run_parallel_apriori`).

Profiles, calibrations and probes that the discard rule finds disturbed are
measured again (up to its attempts:
:meth:`~queuesgd.harness.apriori.discard.DiscardRule.measure`); every stored
prediction records those of its inputs still disturbed after their last try
(``inputs_disturbed``), which the rule's ``inputs`` makes uncounted. A model of a parallel line is a harness
model, with its sizes (``model_options``) if the spec gives them; its ``batch_size`` is the row's live
batch (a worker's batch for FSDP, a micro-batch for a pipeline). With the spec's ``"fsdp_profile":
"group"`` FSDP's own step is profiled in one group of the row's ranks, its collectives taken out
(:func:`~queuesgd.harness.apriori_parallel.profile_fsdp`).

With ``"pipeline_profile": "runtime-paired"`` a pipeline row's in-runtime
stage profile (on loopback, the spec's ``probes.runtime`` steps and warm-up;
``probes/inruntime-<model>-<schedule>-S-M-<rate>-passN.json``) is measured
right before that row's run (on an emulated link of its own with the spec's
``probes.runtime.link``, e.g. ``"10Gbit/s"``, which must differ from the
row's), its prediction made and stored (appended to
``predictions-passN.json`` with its own time) and only then the run
started: on these shared cores the machine's speed drifts by tens of
percent over tens of seconds while two measurements a few seconds apart
agree within about 5% (``validation/diagnose_pipeline_spread.py``), so a
profile taken minutes before its run reads another machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from queuesgd.file_writes import make_folder
from queuesgd.harness.apriori_parallel.calibration import calibrate_parallel, calibration_ranks
from queuesgd.harness.apriori_parallel.predict import fsdp_busy_work
from queuesgd.harness.apriori_parallel.probes import (
    action_overhead,
    calibrate_exchange,
    probe_runtime,
    profile_tiny,
)
from queuesgd.harness.apriori_parallel.run import (
    measure_inputs,
    parallel_scheme,
    predict_parallel,
    run_parallel,
    run_parallel_apriori,
    save_inputs,
)
from queuesgd.harness.netns import tbf_burst
from queuesgd.harness.pipelining import balanced_split
from queuesgd.harness.pipelining.runtime_profile import profile_runtime, runtime_inputs
from queuesgd.harness.provenance import disjoint
from queuesgd.harness.records_json import read_json, write_json

__all__ = ["BUSY_REPEATS", "HINGE_SIZES", "parallel_pass"]

#: Sizes of a point-to-point calibration that models the link's token bucket (the hinge fit needs sizes
#: within the bucket and beyond it: 1 KB to 4 MB).
HINGE_SIZES = (1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20)

#: Timed collectives per op and size of a busy calibration: a mean of times with a heavy tail (on two
#: cores about one gloo collective in ten waits for the scheduler's 4 ms tick) needs more than a median.
BUSY_REPEATS = 40


def _where(rate: float | None) -> str:
    from queuesgd import units

    return "loopback" if rate is None else units.format_bandwidth(rate).replace("/", "").replace(" ", "")


def parallel_pass(
    campaign: Any,
    number: int,
    tag: str,
    configs: Sequence[Any],
    root: Path,
    rows_dir: Path,
    predict_only: bool,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """One pass of a campaign's FSDP and pipeline configurations (see the module docstring); its rows."""
    from queuesgd import units
    from queuesgd.harness.load import CpuMeter
    from queuesgd.harness.report import jsonable, write_rows

    spec, rule = campaign.spec, campaign.spec.discard
    for sub in ("profiles", "calibrations", "probes"):
        make_folder("out", root / sub)

    def row_of(c: Any) -> Any:
        return parallel_scheme(c.scheme)

    # 1. profiles, in runs of their own: each row's profile of each model
    profiles: dict[tuple[str, str], dict] = {}
    loads: dict[str, dict] = {}  # each input's measurement record (DiscardRule.measure), by its file
    for c in configs:
        key = (c.model, row_of(c).profile)
        if key in profiles:
            continue
        m = spec.models[c.model]
        counts = [d.workers for d in configs if (d.model, row_of(d).profile) == key]
        profiles[key], loads[f"profiles/{c.model}-{key[1]}{tag}"] = rule.measure(
            f"profiles/{c.model}-{key[1]}{tag}",
            lambda m=m, c=c, counts=counts: measure_inputs(
                c.scheme,
                m.model,
                batch_size=m.batch_size,
                workers=counts,
                repetitions=spec.repetitions,
                model_options=m.options,
                fsdp_profile=spec.fsdp_profile,
            ),  # fmt: skip
            say,
        )
        save_inputs(profiles[key], root / "profiles", f"{c.model}-{key[1]}{tag}")
        say(f"profiled {c.model} ({m.model}, {key[1]})")

    # 2. calibrations, in runs of their own (a busy "sharded" one per model: its work is the model's)
    busy = spec.sharded_calibration == "busy-mean"

    def cal_key(c: Any) -> tuple[str, float | None, int, str | None]:
        kind = row_of(c).calibration(row_of(c).check_params(c.params, c.workers))
        model = c.model if busy and kind == "sharded" else None
        return kind, c.rate, calibration_ranks(kind, c.workers), model

    def cal_file(c: Any) -> str:
        kind, rate, ranks, model = cal_key(c)
        label = kind if model is None else f"{kind}-{model}"
        return f"calibrations/parallel-{label}-{_where(rate)}-n{ranks}{tag}.json"

    cals: dict[tuple, Any] = {}
    gap = float(spec.calibration_gap)
    for c in configs:
        key = cal_key(c)
        if key in cals:
            continue
        kind, rate, ranks, model = key
        mode, work = "idle-median", 0.0
        if model is not None:
            mode, work = "busy-mean", fsdp_busy_work(profiles[(c.model, row_of(c).profile)], ranks)
        sizes = HINGE_SIZES if spec.link_bucket and kind == "p2p" else (4096, 1 << 20, 4 << 20)
        cals[key], loads[cal_file(c)] = rule.measure(
            cal_file(c),
            lambda kind=kind, ranks=ranks, rate=rate, mode=mode, work=work, sizes=sizes: calibrate_parallel(
                kind, ranks, rate, gap=gap, mode=mode, busy=work, repeats=BUSY_REPEATS if work else 10,
                sizes=sizes,
            ),
            say,
        )  # fmt: skip
        cals[key].save(root / cal_file(c))
        say(
            f"calibrated {kind}{'' if model is None else f' (busy {work * 1e3:.3f} ms, {model})'} n={ranks} "
            f"at {_where(rate)}: {cals[key].fit_text()}"
        )

    # 3. the pipeline probes: the link's fused exchanges, and the runtime's work per pass
    pipes = [c for c in configs if row_of(c).profile == "stages"]

    def bucket_of(c: Any) -> float:
        """The emulated link's token bucket (bytes) where the spec models it: netns links only."""
        return float(tbf_burst(c.rate)) if spec.link_bucket and c.rate is not None else 0.0

    settings = spec.probes
    exchanges: dict[float | None, Any] = {}
    runtime: dict[tuple, dict] = {}

    def probe_key(c: Any) -> tuple[int, str, int, float | None]:
        p = row_of(c).check_params(c.params, c.workers)
        return p["stages"], p["schedule"], p["microbatches"], c.rate

    def probe_file(c: Any) -> str:
        S, sched, M, rate = probe_key(c)
        return f"probes/runtime-{sched}-S{S}-M{M}-{_where(rate)}{tag}.json"

    in_runtime = spec.pipeline_profile in ("runtime", "runtime-paired")
    paired = spec.pipeline_profile == "runtime-paired"
    staged: dict[tuple, dict] = {}  # in-runtime stage profiles, by model and pipeline (and rate, paired)

    def staged_key(c: Any) -> tuple:
        S, sched, M, rate = probe_key(c)
        return (c.model, S, sched, M, rate) if paired else (c.model, S, sched, M)

    def staged_file(c: Any) -> str:
        model, S, sched, M = staged_key(c)[:4]
        where = f"-{_where(c.rate)}" if paired else ""
        return f"probes/inruntime-{model}-{sched}-S{S}-M{M}{where}{tag}.json"

    def measure_staged(c: Any) -> None:
        """The in-runtime stage profile of ``c``'s pipeline (once per key), written: on loopback, or paired on
        the spec's ``probes.runtime.link`` (which :func:`~queuesgd.harness.apriori.parse_spec` keeps apart
        from every pipeline row's rate)."""
        key = staged_key(c)
        if key in staged:
            return
        model, S, sched, M = key[:4]
        m = spec.models[model]
        split = balanced_split(profiles[(model, "stages")]["stages"].unit_times(), S)
        # paired: the spec's probes.runtime steps and warm-up (an unpaired profile keeps its defaults)
        length = {k: settings["runtime"][k] for k in ("steps", "warmup")} if paired else {}
        link = settings["runtime"]["link"]
        if paired and link != "loopback":  # the profile's own emulated link (never the row's: see the module)
            length["rate"] = units.parse_bandwidth(link, "spec.probes.runtime.link")
        staged[key], loads[staged_file(c)] = rule.measure(
            staged_file(c),
            lambda m=m, S=S, sched=sched, M=M, split=split: profile_runtime(
                m.model, S, M, schedule=sched, microbatch=m.batch_size, split=split,
                model_options=m.options, **length,
            ),
            say,
        )  # fmt: skip
        write_json(root / staged_file(c), jsonable(staged[key]))
        say(
            f"in-runtime profile of {model} S={S} {sched} M={M}: passes {staged[key]['forward']} / "
            f"{staged[key]['backward']} s, own work per pass {staged[key]['overhead']} s"
        )

    if pipes:
        run_, sweep = settings["runtime"], settings["exchange"]
        if not in_runtime:
            tiny, loads[f"probes/tiny{tag}.stages.json"] = rule.measure(
                f"probes/tiny{tag}.stages.json", lambda: profile_tiny(run_["repetitions"]), say
            )
            tiny.save(root / "probes" / f"tiny{tag}.stages.json")
        for rate in dict.fromkeys(c.rate for c in pipes):
            sizes = set(sweep["sizes"])
            if sweep["at_activations"]:  # every activation a split of the rows' models can send
                for c in (d for d in pipes if d.rate == rate):
                    acts = profiles[(c.model, "stages")]["stages"].activation_bytes[:-1]
                    sizes |= {int(a) for a in acts if a > 0}
            swept = sorted(sizes)
            exchanges[rate], loads[f"probes/exchange-{_where(rate)}{tag}.json"] = rule.measure(
                f"probes/exchange-{_where(rate)}{tag}.json",
                lambda rate=rate, s=swept: calibrate_exchange(
                    rate, sizes=s, **{k: sweep[k] for k in ("repeats", "statistic", "stream")}
                ),
                say,
            )
            exchanges[rate].save(root / "probes" / f"exchange-{_where(rate)}{tag}.json")
            say(
                f"exchanges at {_where(rate)}: shares {exchanges[rate].shares} at "
                f"{exchanges[rate].sizes} bytes"
            )
        for c in pipes if in_runtime and not paired else ():
            measure_staged(c)
        for c in () if in_runtime else pipes:
            key = probe_key(c)
            if key in runtime:
                continue
            S, sched, M, rate = key
            probe, loads[probe_file(c)] = rule.measure(
                probe_file(c),
                lambda S=S, sched=sched, M=M, rate=rate: probe_runtime(
                    S, sched, M, rate, profile=tiny, steps=run_["steps"], warmup=run_["warmup"],
                    runs=run_["runs"],
                ),
                say,
            )  # fmt: skip
            # The probe's link is the row's: its calibration (same kind, rate and ranks), measured above.
            solved = action_overhead(probe, tiny, cals[cal_key(c)], link_bucket=bucket_of(c))
            runtime[key] = {**probe, **solved, "load": loads[probe_file(c)]["load"]}
            write_json(root / probe_file(c), jsonable(runtime[key]))
            say(
                f"runtime probe S={S} {sched} M={M} at {_where(rate)}: step {probe['step'] * 1e3:.3f} ms "
                f"(model without overhead {solved['model_step_without'] * 1e3:.3f} ms) -> action_overhead "
                f"{solved['action_overhead'] * 1e3:.3f} ms per pass (self-consistency "
                f"{solved['self_consistency']:+.1e})"
            )

    # 4. predictions, from those files alone, stored before any run (a paired pipeline row's: before its own)
    def predict_one(c: Any) -> dict[str, Any]:
        files: dict[str, Any] = {
            "profiles": f"{c.model}-{row_of(c).profile}{tag}",
            "calibration": cal_file(c),
        }
        extra: dict[str, Any] = {}
        inputs = profiles[(c.model, row_of(c).profile)]
        if c in pipes and in_runtime:
            scaled, h = runtime_inputs(inputs["stages"], staged[staged_key(c)])
            inputs = {**inputs, "stages": scaled}
            extra = {"action_overhead": h, "exchange": exchanges[c.rate]}
            files.update(
                exchange=f"probes/exchange-{_where(c.rate)}{tag}.json", runtime_profile=staged_file(c)
            )
        elif c in pipes:
            probe = runtime[probe_key(c)]
            extra = {"action_overhead": probe["action_overhead"], "exchange": exchanges[c.rate]}
            files.update(
                exchange=f"probes/exchange-{_where(c.rate)}{tag}.json",
                runtime=probe_file(c),
                tiny=f"probes/tiny{tag}.stages.json",
            )
        if c in pipes and bucket_of(c) > 0:
            extra["link_bucket"] = bucket_of(c)
        value = predict_parallel(c.scheme, inputs, cals[cal_key(c)], c.workers, c.params, **extra)
        value["input_files"] = files
        # Decided with the prediction, before its run: the inputs it read that were still disturbed.
        names = [f"profiles/{files['profiles']}", *(v for k, v in files.items() if k != "profiles")]
        value["inputs_disturbed"] = rule.still_disturbed(loads[name] for name in names)
        if c in pipes and in_runtime:
            value["probes"] = {
                "loopback_step": staged[staged_key(c)]["step"],
                "measured": staged[staged_key(c)]["measured"],
            }
        elif c in pipes:
            value["probes"] = {
                k: probe[k] for k in ("step", "model_step_without", "self_consistency", "measured")
            }
        return value

    path = root / f"predictions{tag}.json"

    def store(pairs: Sequence[tuple[Any, dict[str, Any]]]) -> str:
        """Append predictions to the pass's file (its other lines' were written before); the time stored."""
        stored = campaign.now()
        kept = read_json(path, list, "predictions", "predictions", document=list) if path.exists() else []
        mine = [{**campaign.identity(c, number), **v, "stored": stored} for c, v in pairs]
        write_json(path, jsonable(kept + mine))
        return stored

    later = [c for c in pipes if paired]  # predicted right before their own runs
    values: dict[int, dict[str, Any]] = {i: predict_one(c) for i, c in enumerate(configs) if c not in later}
    stored_at = dict.fromkeys(values, store([(configs[i], v) for i, v in values.items()]))
    say(f"{len(values)} predictions of the parallel lines stored before their runs")
    if predict_only:
        if later:
            say(f"{len(later)} paired pipeline rows are predicted only right before their runs: none made")
        return []

    # 5. live runs with the row's loop, each in network namespaces at its rate
    from queuesgd.harness.netns import on_network

    rows: list[dict[str, Any]] = []
    for i, c in enumerate(configs):
        if c in later:  # its profile now, on loopback; its prediction stored; then its run
            measure_staged(c)
            values[i] = predict_one(c)
            stored_at[i] = store([(c, values[i])])
            say(f"prediction of {c.stem(spec.name)} at {_where(c.rate)} stored before its run")
        pred, stored = values[i], stored_at[i]
        m = spec.models[c.model]
        params = {**c.params, **({"split": pred["split"]} if "split" in pred else {})}
        cal = cals[cal_key(c)]
        layers = profiles[(c.model, row_of(c).profile)].get("layers")

        def once(c: Any = c, m: Any = m, params: Mapping = params, pred: Mapping = pred, cal: Any = cal,
                 layers: Any = layers) -> dict[str, Any]:  # fmt: skip
            def job(setup: Any, host: str) -> list[dict]:
                return run_parallel(c.scheme, m.model, c.workers, spec.steps, batch_size=m.batch_size,
                                    params=params, warmup=spec.warmup, setup=setup, host=host,
                                    model_options=m.options)  # fmt: skip

            with CpuMeter() as meter:
                row = run_parallel_apriori(
                    c.scheme, pred, lambda: on_network(c.workers, c.rate, job)[0], m.batch_size
                )
            # The run's link: the emulated rate, and no added one-way latency (tc tbf, or loopback, adds
            # none); the network the model was given is the prediction's fit_bandwidth and fit_latency.
            run = dict(
                workers=c.workers, workload=m.model, batch_size=m.batch_size, bandwidth=c.rate, latency=0.0,
                gradient_bytes=None if layers is None else float(layers.workload.gradient_bytes),
                emulation="none" if c.rate is None else "netns-tbf", params=dict(c.params),
                profile={"measured": pred["profile_measured"]},
                calibration={"kind": cal.kind, "measured": cal.measured, "alpha": cal.alpha,
                             "bandwidth": cal.bandwidth},
                load=meter.result(),
            )  # fmt: skip
            disjoint("prediction", pred, run)
            row.update(run)
            return row

        rows += campaign.attempts(c, pred, stored, number, say, once, m.model)
        stem = c.stem(spec.name)
        write_rows([r for r in rows if r["stem"] == stem], rows_dir, stem=f"{stem}{tag}")
    return rows
