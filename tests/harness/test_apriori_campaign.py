"""The a-priori protocol as a spec and a command: ``queuesgd validate --apriori SPEC.json``.

The spec's checks are tested field by field (no process starts); one live campaign runs a user's
own model (``apriori_user_model:TinyNet``, which the harness does not know) end to end through the
command line on loopback, and its records are checked against independent recomputations: the
spec's hash (sha256 of its canonical JSON, computed here), the commit (``git`` asked here), the
prediction stored before its run (the file on disk and the stamps), and the pooled figures
(recomputed from the per-pass rows).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from process_groups import run_group

from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import Campaign, load_spec, parse_spec
from queuesgd.harness.apriori.spec import MAX_SPEC_BYTES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: A user's model (a test helper module, importable by name), DDP on loopback, 2 workers, two passes.
SPEC = {
    "name": "user-loopback",
    "description": "CI: a user's own model through the a-priori protocol, DDP on loopback",
    "models": {
        "tiny": {
            "model": "apriori_user_model:TinyNet",
            "batch_size": 8,
            "input_shape": [16],
            "classes": 4,
            "model_args": {"inputs": 16, "hidden": 8, "classes": 4},
        }
    },
    "rates": ["loopback"],
    "steps": 24,
    "warmup": 4,
    "repetitions": 4,
    "passes": 2,
    "discard": {"rule": "none"},
    "lines": [{"scheme": "ddp", "models": ["tiny"], "workers": [2]}],
}


def _spec(**changes):
    return {**SPEC, **changes}


def _sha256_canonical(doc) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---- the spec, checked before anything runs ------------------------------------------------------------
def test_spec_hash_is_sha256_of_canonical_json_whatever_the_layout(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(SPEC))
    b.write_text(json.dumps(dict(reversed(list(SPEC.items()))), indent=4))  # other order, other spaces
    assert load_spec(a).hash == load_spec(b).hash == _sha256_canonical(SPEC)
    assert parse_spec(_spec(steps=25)).hash != _sha256_canonical(SPEC)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"passes": None}, "spec.passes"),
        ({"discard": {"rule": "best-of-three"}}, "spec.discard.rule"),
        ({"discard": {"rule": "none", "attempts": 3}}, "spec.discard.attempts"),
        ({"rates": ["1 Gbit/s", "fast"]}, "spec.rates[1]"),
        ({"latency": "5ms"}, "spec.latency"),
        ({"steps": 12}, "spec.steps"),
        ({"warmup": 24}, "spec.warmup"),  # warmup >= steps: it named "warmup"
        ({"warmup": -1}, "spec.warmup"),
        ({"pases": 2}, "spec.pases"),  # a misspelt field is refused, not ignored
        (
            {"lines": [{"scheme": "ddp", "models": ["tiny"], "workers": [2], "param": {}}]},
            "spec.lines[0].param",
        ),
        ({"lines": [{"scheme": "ring", "models": ["tiny"], "workers": [2]}]}, "spec.lines[0].scheme"),
        ({"lines": [{"scheme": "ddp", "models": ["big"], "workers": [2]}]}, "spec.lines[0].models[0]"),
        ({"lines": [{"scheme": "ddp", "models": ["tiny"], "workers": [0]}]}, "spec.lines[0].workers[0]"),
        (
            {
                "lines": [
                    {"scheme": "backup-workers", "models": ["tiny"], "workers": [2], "params": {"backups": 2}}
                ]
            },
            "spec.lines[0].params.backups",
        ),
        (
            {"lines": [{"scheme": "sync-ps", "models": ["tiny"], "workers": [2], "random_delay": "3:10ms"}]},
            "spec.lines[0].random_delay",
        ),
        ({"models": {"tiny": {"model": "apriori_user_model:", "batch_size": 8}}}, "spec.models.tiny.model"),
        (
            {"models": {"tiny": {"model": "apriori_user_model:TinyNet", "batch_size": 8}}},
            "spec.models.tiny.input_shape",
        ),
        (
            {"models": {"tiny": {"model": "mlp", "batch_size": 8, "input_shape": [4]}}},
            "spec.models.tiny.input_shape",
        ),
        (
            {"device": "cuda", "lines": [{"scheme": "sync-ps", "models": ["tiny"], "workers": [2]}]},
            "spec.lines[0].scheme",
        ),
    ],
)
def test_a_bad_spec_is_one_error_naming_its_field(change, field):
    doc = {k: v for k, v in _spec(**change).items() if v is not None}
    with pytest.raises(InvalidParameterError) as err:
        parse_spec(doc)
    assert err.value.field == field


def test_spec_reads_are_bounded_and_json_only(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_SPEC_BYTES + 1))
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(SPEC).replace('"steps": 24', '"steps": NaN'))
    for path, words in ((big, "at most"), (nan, "NaN"), (tmp_path, "directory"), ("/dev/zero", "device")):
        with pytest.raises(InvalidParameterError, match=words):
            load_spec(path)


def _refused_in_one_line(tmp_path, capsys, text: str, why: str) -> None:
    """``load_spec`` and ``validate --apriori`` both refuse ``text``: the same message, one line, status 2."""
    path = tmp_path / "spec.json"
    path.write_text(text)
    expected = f"spec: got {str(path)!r}; accepted: a JSON object ({why})"
    with pytest.raises(InvalidParameterError) as err:
        load_spec(path)
    assert str(err.value) == expected
    assert main(["validate", "--apriori", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"queuesgd: error: {expected}"]


def test_a_spec_with_an_integer_longer_than_python_reads_is_one_error(tmp_path, capsys):
    """Python's int() refuses more than 4,300 digits: a bare ValueError (a traceback on the CLI) before."""
    text = json.dumps(SPEC).replace('"steps": 24', '"steps": ' + "9" * 5000)
    column = text.index("9" * 5000) + 1
    why = f"an integer of 5,000 digits (at most 4,300 are read) at line 1, column {column}"
    _refused_in_one_line(tmp_path, capsys, text, why)


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_a_spec_number_past_the_float_range_is_refused_at_its_place(tmp_path, capsys, literal):
    """``1e400`` parsed as infinity: in a model's arguments it reached json.dumps, a ValueError traceback."""
    text = json.dumps(SPEC).replace('"hidden": 8', f'"hidden": {literal}')
    column = text.index(literal) + 1
    why = f"{literal} is no finite number (JSON has none) at line 1, column {column}"
    _refused_in_one_line(tmp_path, capsys, text, why)


def test_the_command_refuses_a_bad_spec_with_one_line_and_status_2(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec(passes=0)))
    assert main(["validate", "--apriori", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"queuesgd: error: {path}: spec.passes: got 0; accepted: an integer from 1 to 100"]
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written
    assert main(["validate", "--apriori", str(path), "--bandwidth", "1Gbit/s"]) == 2
    assert "--bandwidth" in capsys.readouterr().err


_VIT = {
    "model": "queuesgd.harness.zoo:vit", "batch_size": 4, "input_shape": [3, 8, 8], "classes": 3,
    "model_args": {"image": 8, "patch": 4, "width": 8, "layers": 1, "heads": 2, "classes": 3},
}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "name", "value", "accepted"),
    [
        ("queuesgd.harness.zoo:vit", "layers", 2.5, "an integer"),
        ("queuesgd.harness.zoo:vit", "layers", True, "an integer"),  # not 1
        ("queuesgd.harness.zoo:vit", "classes", "3", "an integer"),
        ("queuesgd:encoder", "width", [8], "an integer"),
    ],
)
def test_a_project_models_argument_of_another_type_is_refused_as_the_spec_is_read(
    tmp_path, capsys, model, name, value, accepted
):
    """The parameters the project's models declare (``layers: int``) are read as the spec is: one line
    naming the file, the field and what the model takes; before, only the build refused it, or nothing."""
    args = {**_VIT["model_args"], name: value} if "vit" in model else {name: value}
    entry = {**_VIT, "model": model, "model_args": args}
    doc = _spec(models={"vit": entry}, lines=[{"scheme": "ddp", "models": ["vit"], "workers": [2]}])
    with pytest.raises(InvalidParameterError) as err:
        parse_spec(doc)
    assert err.value.field == f"spec.models.vit.model_args.{name}"
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    assert main(["validate", "--apriori", str(path), "--out", str(tmp_path / "out")]) == 2
    got = json.dumps(value) if not isinstance(value, str) else repr(value)
    got = {"true": "True"}.get(got, got)
    assert capsys.readouterr().err.splitlines() == [
        f"queuesgd: error: {path}: spec.models.vit.model_args.{name}: got {got}; "
        f"accepted: {accepted} ({model} takes {name}: int)"
    ]
    assert not (tmp_path / "out").exists()


def test_a_name_a_project_model_does_not_take_is_refused_as_the_spec_is_read():
    entry = {**_VIT, "model_args": {**_VIT["model_args"], "depth": 2}}
    with pytest.raises(InvalidParameterError) as err:
        parse_spec(_spec(models={"vit": entry}, lines=[{"scheme": "ddp", "models": ["vit"], "workers": [2]}]))
    assert err.value.field == "spec.models.vit.model_args"
    takes = "the keyword arguments it takes (image, patch, width, layers, heads, classes;"
    assert err.value.accepted.startswith(takes) and "'depth'" in err.value.accepted


def test_a_project_models_arguments_of_their_declared_types_load_as_the_model_reads_them(tmp_path):
    """The preregistered held-out spec loads unchanged; ``6.0`` layers is read as 6, as vit reads it."""
    held = load_spec(ROOT / "validation" / "specs" / "apriori-heldout2.json")
    assert dict(held.models["vit"].options["model_args"]) == {
        "image": 32, "patch": 4, "width": 256, "layers": 6, "heads": 4, "classes": 10,
    }  # fmt: skip
    entry = {**_VIT, "model_args": {**_VIT["model_args"], "layers": 1.0}}
    doc = _spec(models={"vit": entry}, lines=[{"scheme": "ddp", "models": ["vit"], "workers": [2]}])
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    from queuesgd.harness.live import RealModel

    spec = load_spec(path)
    real = RealModel(spec.models["vit"].model, batch_size=4, **spec.models["vit"].options)
    assert real.model_args["layers"] == 1 and type(real.model_args["layers"]) is int


def test_a_users_model_argument_of_another_type_is_refused_before_anything_runs(monkeypatch):
    """A user's model is not imported as the spec is read; its declared types are checked where the
    campaign first builds it: ``TinyNet(hidden=True)`` built a one-unit hidden layer, silently."""
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(HERE))  # apriori_user_model, importable as a user's module is
    entry = {**SPEC["models"]["tiny"], "model_args": {"inputs": 16, "hidden": True, "classes": 4}}
    campaign = Campaign(_spec(models={"tiny": entry}))  # read: the module is not imported here
    with pytest.raises(InvalidParameterError) as err:
        campaign.check_models()
    assert str(err.value) == (
        "spec.models.tiny.model_args.hidden: got True; accepted: an integer "
        "(apriori_user_model:TinyNet takes hidden: int)"
    )
    Campaign(_spec(models={"tiny": {**entry, "model_args": {"hidden": 8.0}}})).check_models()


def test_a_folder_holding_a_campaigns_files_is_refused_before_anything_runs(tmp_path):
    campaign = Campaign(
        _spec(models={"mlp": {"batch_size": 8}}, lines=[{"scheme": "ddp", "models": ["mlp"], "workers": [2]}])
    )
    taken = campaign.planned(tmp_path)[2]  # pass 1's profile
    taken.parent.mkdir(parents=True)
    taken.write_text("{}")
    with pytest.raises(InvalidParameterError, match="exists"):
        campaign.run(tmp_path)
    assert not (tmp_path / "spec.json").exists()


def test_a_folder_with_a_drift_file_is_refused_when_the_spec_measures_drift(tmp_path, monkeypatch):
    """drift.json is one of the campaign's files when its spec measures drift, and none otherwise."""
    monkeypatch.setattr(Campaign, "check_models", lambda self: None)
    monkeypatch.setattr(Campaign, "_pass", lambda *a: pytest.fail("the campaign ran"))
    lines = [{"scheme": "ddp", "models": ["mlp"], "workers": [1]}]
    plain = Campaign(_spec(models={"mlp": {"batch_size": 8}}, lines=lines, passes=1))
    drift = Campaign(_spec(models={"mlp": {"batch_size": 8}}, lines=lines, passes=1, drift=True))
    assert tmp_path / "drift.json" in drift.planned(tmp_path)
    assert tmp_path / "drift.json" not in plain.planned(tmp_path)
    (tmp_path / "drift.json").write_text("[]")
    with pytest.raises(InvalidParameterError, match="drift.json exists"):
        drift.run(tmp_path)


def test_overwrite_starts_afresh_nothing_of_the_previous_campaign_is_merged(tmp_path, monkeypatch):
    """A folder a previous campaign of models ``old`` and ``mlp`` left, run again with ``overwrite`` by a
    spec of ``mlp`` alone: the drift file holds only ``mlp``'s entry (it held ``old``'s too, merged),
    and the previous campaign's calibration, probe, profile and predictions are gone before the passes
    run; the rows folder and a file of no campaign are kept."""
    import queuesgd.harness.contention as contention
    from queuesgd.harness.apriori.profile import DDP_STEP

    monkeypatch.setattr(contention, "measure_synchronized", lambda *a, **k: {1: {"span": [0.011]}})
    monkeypatch.setattr(Campaign, "check_models", lambda self: None)
    left = {
        "drift.json": [{"model": "old", "ratio": 2.0}, {"model": "mlp", "ratio": 3.0}],
        "predictions.json": [{"scheme": "ddp", "model": "old", "workers": 4}],
        "calibrations/allreduce-loopback-n4.json": {"kind": "allreduce"},
        "probes/runtime-1f1b-S2-M2-loopback.json": {"step": 0.1},
        "profiles/old.json": {"model": "old"},
        "spec.json": {"hash": "0" * 64},
        "results/elsewhere.json": [],
        "notes.txt": "kept",
    }
    for name, doc in left.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(doc if isinstance(doc, str) else json.dumps(doc))
    seen = {}

    def one_pass(self, number, root, rows_dir, predict_only, say, write_rows):
        seen["files"] = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        prof = type("P", (), {"sync_span": {DDP_STEP: {1: [0.010]}}, "device": "cpu"})()
        self._drift("mlp", prof, root, self._tag(number), say)
        return []

    monkeypatch.setattr(Campaign, "_pass", one_pass)
    lines = [{"scheme": "ddp", "models": ["mlp"], "workers": [1]}]
    campaign = Campaign(_spec(models={"mlp": {"batch_size": 8}}, lines=lines, passes=1, drift=True))
    campaign.run(tmp_path, overwrite=True, predict_only=True)
    assert seen["files"] == ["notes.txt", "results/elsewhere.json", "spec.json"]
    assert json.loads((tmp_path / "spec.json").read_text())["hash"] == campaign.spec.hash
    drift = json.loads((tmp_path / "drift.json").read_text())
    assert [d["model"] for d in drift] == ["mlp"] and drift[0]["ratio"] == pytest.approx(1.1, rel=1e-12)


# ---- a user's own model, end to end through the command line ----------------------------------------
def _head() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=20
        )
    except OSError:
        return None
    return out.stdout.strip() or None


@pytest.mark.slow
def test_validate_apriori_runs_a_users_model_end_to_end(tmp_path):
    pytest.importorskip("torch")
    spec_path, out = tmp_path / "spec.json", tmp_path / "campaign"
    spec_path.write_text(json.dumps(SPEC, indent=1))
    env = {k: v for k, v in os.environ.items() if k != "QUEUESGD_COMMIT"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        "-m",
        "queuesgd",
        "validate",
        "--apriori",
        str(spec_path),
        "--out",
        str(out),
        "--json",
    ]
    done = run_group(cmd, 240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)

    rows = [
        r
        for p in (1, 2)
        for r in json.loads((out / "results" / f"user-loopback-ddp-tiny-pass{p}.json").read_text())
    ]
    model = "apriori_user_model:TinyNet"
    assert [(r["pass"], r["workers"], r["workload"], r["counted"]) for r in rows] == [
        (1, 2, model, True),
        (2, 2, model, True),
    ]
    # Every row carries the spec's hash and the commit of the code that ran.
    assert {r["spec_hash"] for r in rows} == {_sha256_canonical(SPEC)} == {summary["spec_hash"]}
    head = _head()
    for r in rows:
        assert r["commit"] is None if head is None else r["commit"] in (head, head + "+dirty")
    registered = json.loads((out / "spec.json").read_text())
    assert registered["hash"] == _sha256_canonical(registered["spec"]) == summary["spec_hash"]

    # The prediction each run was compared with was stored on disk before the run started.
    for r in rows:
        stored = json.loads((out / f"predictions-pass{r['pass']}.json").read_text())
        (pred,) = [p for p in stored if p["workers"] == r["workers"] and p["scheme"] == r["scheme"]]
        assert pred["predicted"] == r["predicted"] and pred["predicted_at"] == r["predicted_at"]
        assert pred["stored"] == r["prediction_stored"] < r["run_started"]
        written = (out / f"predictions-pass{r['pass']}.json").stat().st_mtime
        assert written <= dt.datetime.fromisoformat(r["run_started"]).timestamp() + 1e-3
        assert r["predicted_at"] <= r["started"] and r["inputs"] == "a-priori"
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1.0, rel=1e-12)

    # Every pass is reported, and the pooled figures are those of the per-pass rows together.
    assert [p["pass"] for p in summary["passes"]] == [1, 2] and summary["passes_registered"] == 2
    for p in summary["passes"]:
        errs = [abs(r["error"]) for r in rows if r["pass"] == p["pass"] and r["counted"]]
        assert (p["rows"], p["median_abs_error"], p["max_abs_error"]) == (
            len(errs),
            np.median(errs),
            max(errs),
        )
    errs = [abs(r["error"]) for r in rows if r["counted"]]
    pooled = summary["pooled"]
    assert (pooled["rows"], pooled["max_abs_error"]) == (2, max(errs))
    assert pooled["median_abs_error"] == pytest.approx(float(np.median(errs)), rel=1e-15)
    assert json.loads((out / "summary.json").read_text()) == summary


def test_targets_are_judged_per_scheme_too():
    """Pooled over both passes: FSDP |errors| 0.30 and 0.30 (median 30%: NOT met), the pipeline 0.05, 0.10,
    0.05, 0.10 (median 7.5%, max 10%: met); overall median 10% (met) but max 30% (NOT met)."""
    from queuesgd.harness.apriori import CampaignResult

    spec = parse_spec(
        {"name": "t", "models": {"mlp": {"batch_size": 8}}, "rates": ["loopback"], "steps": 30, "warmup": 5,
         "passes": 2, "discard": {"rule": "none"}, "targets": {"median": 0.1, "max": 0.2},
         "lines": [{"scheme": "ddp", "models": ["mlp"], "workers": [2]}]}
    )  # fmt: skip
    rows = tuple(
        {"pass": p, "scheme": s, "error": e, "counted": True}
        for p in (1, 2)
        for s, e in (("sharded-dp", 0.3), ("pipeline", 0.05), ("pipeline", -0.1))
    )
    summary = CampaignResult(spec, rows, ".").summary()
    assert summary["target_met"] is False
    assert summary["target_met_by_scheme"] == {"sharded-dp": False, "pipeline": True}
    assert summary["pooled"]["by_scheme"]["pipeline"]["median_abs_error"] == pytest.approx(0.075)


def test_a_spec_past_the_process_limit_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """runners.run refuses a run of more processes than 8 per core; a campaign whose spec asks for one
    is refused at its start (it used to run its earlier passes, then fail at that run)."""
    import os

    from queuesgd.harness.process_limit import process_limit

    monkeypatch.setattr(Campaign, "check_models", lambda self: None)
    monkeypatch.setattr(Campaign, "_pass", lambda *a: pytest.fail("the campaign ran"))
    most = process_limit()
    assert most == 8 * (os.cpu_count() or 1)
    if most >= 64:  # the spec's own bound (64 workers) is within this machine's limit
        pytest.skip(f"{most} processes allowed here: no spec line exceeds it")
    lines = [{"scheme": "ddp", "models": ["mlp"], "workers": [2, 64]}]
    campaign = Campaign(_spec(models={"mlp": {"batch_size": 8}}, lines=lines, passes=1))
    refused = rf"^spec\.lines\.workers: got 64; accepted: at most {most} "
    with pytest.raises(InvalidParameterError, match=refused):
        campaign.run(tmp_path / "c")
    assert not (tmp_path / "c").exists()
