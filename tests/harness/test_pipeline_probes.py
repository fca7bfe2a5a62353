"""The pipeline probes of the a-priori protocol: the runtime's work per pass and the link's fused exchanges.

Independent sources: the closed forms of the two-stage rendezvous pipeline (``(M + 1)(t_f + t_b + 2h + c)``
for 1F1B, ``(M + 1)(t_f + t_b + 2h) + 2 M c`` for GPipe; one stage: ``M (t_f + t_b + 2h)``), solved for
``h`` by hand; log-linear interpolation worked by hand; and, live on loopback, the probes' own runs (a
smoke test: the inversion reproduces the probe's step -- a self-consistency check, labelled so).
"""

from __future__ import annotations

import json
import math

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import Calibration
from queuesgd.harness.apriori_parallel import ExchangeCalibration, action_overhead, predict_pipeline
from queuesgd.harness.pipelining import StageProfile

MS = 1e-3


def _profile(t_f: float, t_b: float, update: float = 0.0) -> StageProfile:
    """Two units of ``t_f`` forward and ``t_b`` backward, deterministic (every repetition the same)."""
    return StageProfile(
        "mlp", 2, {}, ("0", "2"), (t_f, t_f), (t_b, t_b), (400.0, 400.0), (64.0, 40.0),
        (2 * (t_f + t_b),) * 3, update, "then",
    )  # fmt: skip


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
@pytest.mark.parametrize("M", [2, 4, 8])
def test_action_overhead_solves_the_two_stage_closed_form(schedule, M):
    t_f, t_b, c, h = 0.2 * MS, 0.5 * MS, 0.1 * MS, 0.37 * MS
    link = Calibration("p2p", 2, None, c, math.inf, 1.0, "none", "before")
    if schedule == "1f1b":
        step = (M + 1) * (t_f + t_b + 2 * h + c)
    else:
        step = (M + 1) * (t_f + t_b + 2 * h) + 2 * M * c
    probe = {"stages": 2, "schedule": schedule, "microbatches": M, "split": [1, 1], "step": step}
    out = action_overhead(probe, _profile(t_f, t_b), link)
    assert out["action_overhead"] == pytest.approx(h, rel=1e-6)
    assert abs(out["self_consistency"]) < 1e-6  # the inversion's residual (self-consistency, not evidence)
    # and the real model then takes it: a prediction with h is the closed form's step
    pred = predict_pipeline(_profile(t_f, t_b), link, 2, M, schedule=schedule, split=[1, 1],
                            action_overhead=out["action_overhead"])  # fmt: skip
    assert pred["iteration_time"] == pytest.approx(step, rel=1e-6)


def test_action_overhead_one_stage_and_floor():
    """One stage, no messages: ``M (t_f + t_b + 2h) + u`` (both units on the stage); a probe faster than
    the model without overhead gives h = 0, never a negative cost."""
    t_f, t_b, u, M = 0.1 * MS, 0.3 * MS, 0.05 * MS, 4
    prof = _profile(t_f, t_b, update=u)
    h = 0.2 * MS
    step = M * (2 * t_f + 2 * t_b + 2 * h) + u
    probe = {"stages": 1, "schedule": "gpipe", "microbatches": M, "split": [2], "step": step}
    assert action_overhead(probe, prof, None)["action_overhead"] == pytest.approx(h, rel=1e-6)
    fast = dict(probe, step=0.5 * step)
    out = action_overhead(fast, prof, None)
    assert out["action_overhead"] == 0.0 and out["model_step_without"] == pytest.approx(
        M * (2 * t_f + 2 * t_b) + u, rel=1e-9
    )


def test_exchange_calibration_share_and_file():
    # shares alone / both: 0.8, 0.5, 0.6 at 1 kB, 100 kB, 10 MB; 10 kB is halfway in log size: 0.65
    c = ExchangeCalibration(1.25e7, (1000, 100000, 10**7), (0.8, 1.0, 3.0), (1.0, 2.0, 5.0), "netns-tbf", "t")
    assert c.shares == (0.8, 0.5, 0.6)
    assert c.share(10_000) == pytest.approx(0.65)
    assert c.share(10) == 0.8 and c.share(10**9) == 0.6  # constant beyond the sweep
    assert c.share(10**6) == pytest.approx(0.55)
    with pytest.raises(InvalidParameterError, match="nbytes"):
        c.share(0)
    # faster together is noise: full duplex
    assert ExchangeCalibration(None, (1, 2), (1.0, 1.0), (0.9, 0.9), "none", "t").shares == (1.0, 1.0)


def test_exchange_calibration_load_refuses_other_files(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"rate": 1}')
    with pytest.raises(InvalidParameterError, match="ExchangeCalibration.save"):
        ExchangeCalibration.load(bad)


@pytest.mark.slow
def test_runtime_probe_smoke_on_loopback():
    """The real runtime with the tiny model, 2 stages, 1F1B, M = 2, on loopback, three runs: the median
    run's step is measured and
    the inversion reproduces it (self-consistency). The value of h itself is not asserted: it depends on
    the machine's load."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori_parallel import calibrate_parallel, probe_runtime, profile_tiny

    prof = profile_tiny(repetitions=5)
    probe = probe_runtime(2, "1f1b", 2, None, profile=prof, steps=16, warmup=4, runs=3)
    assert probe["step_low"] <= probe["step"] <= probe["step_high"] and probe["emulation"] == "none"
    assert len(probe["steps"]) == 3 and probe["step"] == sorted(probe["steps"])[1]  # the median run
    link = calibrate_parallel("p2p", 2, None, sizes=(64, 4096), repeats=5)
    out = action_overhead(probe, prof, link)
    assert out["action_overhead"] >= 0.0
    if out["action_overhead"] > 0:
        assert abs(out["self_consistency"]) < 1e-3


def test_prediction_reads_the_exchange_share_at_the_activation_size():
    """predict_pipeline(exchange=...) takes the share at the split's activation bytes (64 B here): the same
    step as duplex given by hand, which is the two-stage 1F1B closed form (M + 1)(t_f + t_b) + 2c +
    (M - 1)c / duplex."""
    t_f, t_b, c, M = 0.2 * MS, 0.5 * MS, 0.3 * MS, 4
    link = Calibration("p2p", 2, None, c, math.inf, 1.0, "none", "before")
    ex = ExchangeCalibration(None, (64, 6400), (1.0, 1.0), (2.0, 1.25), "none", "t")  # 0.5 at 64 B
    got = predict_pipeline(_profile(t_f, t_b), link, 2, M, split=[1, 1], exchange=ex)
    assert got["duplex"] == 0.5
    assert got["iteration_time"] == pytest.approx((M + 1) * (t_f + t_b) + 2 * c + (M - 1) * c / 0.5)
    with pytest.raises(InvalidParameterError, match="duplex"):
        predict_pipeline(_profile(t_f, t_b), link, 2, M, split=[1, 1], exchange=ex, duplex=0.9)


def test_the_preregistered_parallel_spec():
    """validation/specs/parallel.json as the campaign reads it: 2 passes, the discard rule, the targets and
    the probes fixed; 2 models x 2 rates of FSDP and 2 x 2 x (2 schedules x 2 M) pipelines: 20
    configurations a pass, each checked by its live row before anything runs."""
    from pathlib import Path

    from queuesgd.harness.apriori import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "validation" / "specs" / "parallel.json")
    assert spec.passes == 2 and (spec.discard.rule, spec.discard.attempts, spec.discard.limit) == (
        "disturbed", 3, 0.1,
    )  # fmt: skip
    assert spec.targets == (0.1, 0.2) and spec.probes["runtime"]["runs"] == 3
    configs = spec.configurations()
    assert len(configs) == 20 and sum(c.scheme == "pipeline" for c in configs) == 16
    assert {spec.models[c.model].batch_size for c in configs if c.scheme == "pipeline"} == {16}
    from queuesgd.harness.apriori import parse_spec

    # a harness model's sizes are taken by a parallel line; a named model is not
    doc = {**spec.document, "models": {**spec.document["models"], "mlp-mb16": {"model": "mlp",
           "batch_size": 16, "model_options": {"hidden": 8}}}}  # fmt: skip
    assert dict(parse_spec(doc).models["mlp-mb16"].options) == {"hidden": 8}
    with pytest.raises(InvalidParameterError, match="spec.lines.1..models.0."):
        parse_spec({**doc, "models": {**doc["models"], "mlp-mb16": {"model": "tests.nowhere:net",
                    "batch_size": 16, "input_shape": [8]}}})  # fmt: skip
    # the encoder averages over the sequence between its blocks and its head: no pipeline units
    with pytest.raises(InvalidParameterError, match="cuts into pipeline units"):
        parse_spec({**doc, "models": {**doc["models"], "mlp-mb16": {"model": "encoder", "batch_size": 16}}})


_TINY_CAMPAIGN = {
    "name": "rebuild", "models": {"mlp": {"batch_size": 16}, "mlp-mb8": {"model": "mlp", "batch_size": 8}},
    "rates": ["loopback"], "steps": 15, "warmup": 3, "repetitions": 5, "passes": 1,
    "discard": {"rule": "none"}, "targets": {"median": 0.1, "max": 0.2},
    "probes": {"runtime": {"steps": 14, "warmup": 4, "runs": 1, "repetitions": 5},
               "exchange": {"sizes": [4096, 65536], "repeats": 3}},
    "lines": [{"scheme": "sharded-dp", "models": ["mlp"], "workers": [2]}] + [
        {"scheme": "pipeline", "models": ["mlp-mb8"], "workers": [2],
         "params": {"stages": 2, "microbatches": 2, "schedule": s}} for s in ("1f1b", "gpipe")
    ],
}  # fmt: skip


@pytest.mark.slow
def test_predictions_are_rebuilt_exactly_from_their_stored_inputs(tmp_path):
    """A campaign of FSDP and both pipeline schedules on loopback, stopped once its predictions are stored;
    every stored prediction made again from the files it names alone (profiles, calibration, exchange
    sweep, tiny profile and runtime probe, the overhead solved again): equal to the last bit."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori import Campaign
    from queuesgd.harness.apriori_parallel import rebuild_parallel

    Campaign(_TINY_CAMPAIGN).run(tmp_path, predict_only=True)
    stored = json.loads((tmp_path / "predictions.json").read_text())
    assert [p["scheme"] for p in stored] == ["sharded-dp", "pipeline", "pipeline"]
    for p in stored:
        again = rebuild_parallel(p, tmp_path)
        assert again["predicted"] == p["predicted"], p["params"]
        if p["scheme"] == "pipeline":
            assert again["action_overhead"] == p["action_overhead"] and again["duplex"] == p["duplex"]
            schedule = p["params"]["schedule"]
            assert p["input_files"]["runtime"] == f"probes/runtime-{schedule}-S2-M2-loopback.json"


def _campaign_rows() -> list[dict]:
    from pathlib import Path

    from queuesgd.harness.report import read_rows

    results = Path(__file__).resolve().parents[2] / "validation" / "results"
    return [r for path in sorted(results.glob("*.json")) for r in read_rows(path)
            if isinstance(r, dict) and r.get("input_files") and r.get("error") is not None]  # fmt: skip


@pytest.mark.parametrize("row", _campaign_rows(), ids=lambda r: f"{r['stem']}-pass{r['pass']}-{r['attempt']}")
def test_committed_campaign_rows_are_rebuilt_exactly(row):
    """Every row of a committed FSDP/pipeline campaign (validation/results/, with the inputs it names under
    validation/campaigns/<campaign>/), predicted again from those inputs: its stored prediction, to the
    last bit. (None before the campaign of specs/parallel.json has run and been committed.)"""
    from pathlib import Path

    from queuesgd.harness.apriori_parallel import rebuild_parallel

    folder = Path(__file__).resolve().parents[2] / "validation" / "campaigns" / row["campaign"]
    assert rebuild_parallel(row, folder)["predicted"] == row["predicted"]


@pytest.mark.slow
def test_a_paired_pipeline_row_is_profiled_and_predicted_right_before_its_own_run(tmp_path):
    """``"pipeline_profile": "runtime-paired"``: each pipeline row's in-runtime profile (its own file, named
    for its link) and prediction come after the previous row's run and are stored before its own run
    starts; a predict-only pass makes none of them; every prediction is rebuilt exactly from its files."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori import Campaign
    from queuesgd.harness.apriori_parallel import rebuild_parallel

    doc = {**_TINY_CAMPAIGN, "name": "paired", "pipeline_profile": "runtime-paired",
           "lines": _TINY_CAMPAIGN["lines"][1:]}  # fmt: skip
    Campaign(doc).run(tmp_path / "none", predict_only=True)
    assert json.loads((tmp_path / "none" / "predictions.json").read_text()) == []
    rows = Campaign(doc).run(tmp_path / "run").rows
    rows = sorted((r for r in rows if r.get("error") is not None), key=lambda r: r["run_started"])
    assert [r["params"]["schedule"] for r in rows] == ["1f1b", "gpipe"]
    stored = json.loads((tmp_path / "run" / "predictions.json").read_text())
    assert len(stored) == 2 and stored[0]["stored"] < rows[0]["run_started"]
    assert rows[0]["run_started"] < stored[1]["stored"] < rows[1]["run_started"]
    for p, r in zip(stored, rows):
        assert p["input_files"]["runtime_profile"] == f"probes/inruntime-mlp-mb8-{p['params']['schedule']}" \
            "-S2-M2-loopback.json"
        assert rebuild_parallel(p, tmp_path / "run")["predicted"] == p["predicted"] == r["predicted"]


def test_the_runtime_probes_warmup_is_named_as_the_specs_field():
    # warmup >= steps named "warmup", not the field of the spec that holds it
    from queuesgd.harness.apriori_parallel.probes import probe_settings

    for warmup in (20, -1):
        with pytest.raises(InvalidParameterError) as err:
            probe_settings({"runtime": {"steps": 20, "warmup": warmup}})
        assert err.value.field == "spec.probes.runtime.warmup"


def test_the_exchange_probe_settings_take_the_activations_switch():
    from queuesgd.harness.apriori_parallel.probes import probe_settings

    assert probe_settings(None)["exchange"]["at_activations"] is False
    assert probe_settings({"exchange": {"at_activations": True}})["exchange"]["at_activations"] is True
    with pytest.raises(InvalidParameterError, match="spec.probes.exchange.at_activations"):
        probe_settings({"exchange": {"at_activations": 2}})


@pytest.mark.slow
def test_an_exchange_probe_at_the_activations_gives_the_rows_share_measured_at_their_own_size(tmp_path):
    """``probes.exchange.at_activations``: the link's exchanges are also timed at every activation the
    pipeline rows' models can send; a row's duplex share is then the one measured at its own activation's
    size (no interpolation), and its prediction is rebuilt exactly from the stored files."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori import Campaign
    from queuesgd.harness.apriori_parallel import rebuild_parallel

    doc = {**_TINY_CAMPAIGN, "name": "at-activations", "lines": _TINY_CAMPAIGN["lines"][1:2],
           "probes": {**_TINY_CAMPAIGN["probes"], "exchange": {"sizes": [4096, 65536], "repeats": 3,
                                                               "at_activations": True}}}  # fmt: skip
    Campaign(doc).run(tmp_path, predict_only=True)
    (p,) = json.loads((tmp_path / "predictions.json").read_text())
    exchange = ExchangeCalibration.load(tmp_path / p["input_files"]["exchange"])
    units = StageProfile.load(tmp_path / "profiles" / "mlp-mb8-stages.stages.json")
    sent = {int(a) for a in units.activation_bytes[:-1]}
    assert sent <= set(exchange.sizes) and set(exchange.sizes) - sent == {4096, 65536}
    (act,) = p["activation_bytes"]
    assert p["duplex"] == exchange.shares[exchange.sizes.index(int(act))]
    assert rebuild_parallel(p, tmp_path)["predicted"] == p["predicted"]


def test_an_exchange_probe_summarised_by_its_mean_pays_a_bimodal_exchange_as_a_run_does(monkeypatch):
    """``statistic="mean"``: of 5 exchanges, 3 serialized (2 ms) and 2 overlapped (1.2 ms) against 1 ms alone,
    the share is 1 / 1.68 (what 5 such exchanges cost a run), where the median reads the serialized mode
    (0.5); the settings refuse any other statistic and old files (without one) load as medians."""
    import queuesgd.harness.launch as launch
    from queuesgd.harness.apriori_parallel.probes import probe_settings
    from queuesgd.harness.duplex import measure_exchange

    both = [2e-3, 1.2e-3, 2e-3, 1.2e-3, 2e-3]
    monkeypatch.setattr(launch, "run_probe", lambda *a, **k: (4096, [{"alone": [1e-3] * 5, "both": both}]))
    assert measure_exchange(4096, 5)["duplex"] == pytest.approx(0.5)
    assert measure_exchange(4096, 5, statistic="mean")["duplex"] == round(1 / 1.68, 3)  # 3 digits kept
    with pytest.raises(InvalidParameterError, match="statistic"):
        measure_exchange(4096, 5, statistic="mode")
    assert probe_settings({"exchange": {"statistic": "mean"}})["exchange"]["statistic"] == "mean"
    with pytest.raises(InvalidParameterError, match="spec.probes.exchange.statistic"):
        probe_settings({"exchange": {"statistic": "max"}})
    old = ExchangeCalibration(1.25e7, (4096, 65536), (1e-3, 6e-3), (2e-3, 9e-3), "netns-tbf", "then")
    assert old.statistic == "median"


def test_a_streamed_exchange_probe_reports_the_time_per_message():
    """``stream=k``: k messages (and exchanges) back to back per repeat, the time divided by k; on loopback
    a 1 MB message in a stream of 12 takes 0.35-0.9 times what it takes alone (measured here: a stream
    saves the per-repeat start), where a missing division would read 4-11 times; the settings take an
    integer and old files (without one) load as 1."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori_parallel.probes import probe_settings
    from queuesgd.harness.duplex import measure_exchange

    one = measure_exchange(1 << 20, repeats=7)
    many = measure_exchange(1 << 20, repeats=7, stream=12)
    for key in ("alone", "both"):
        assert 0.1 < many[key] / one[key] < 2.5, (key, many, one)
    assert probe_settings({"exchange": {"stream": 8}})["exchange"]["stream"] == 8
    with pytest.raises(InvalidParameterError, match="spec.probes.exchange.stream"):
        probe_settings({"exchange": {"stream": 0}})
    old = ExchangeCalibration(1.25e7, (4096, 65536), (1e-3, 6e-3), (2e-3, 9e-3), "netns-tbf", "then")
    assert old.stream == 1


def test_the_runtime_probe_settings_take_the_paired_profiles_link():
    """``probes.runtime.link``: "loopback" by default, or a rate (the paired profile's own emulated link)."""
    from queuesgd.harness.apriori_parallel.probes import probe_settings

    assert probe_settings(None)["runtime"]["link"] == "loopback"
    assert probe_settings({"runtime": {"link": "10Gbit/s"}})["runtime"]["link"] == "10Gbit/s"
    with pytest.raises(InvalidParameterError, match="spec.probes.runtime.link"):
        probe_settings({"runtime": {"link": "fast"}})
