"""The parallel rows' a-priori protocol by the live table: stored predictions rebuilt, dispatch, live runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.harness.apriori import Calibration, Profile
from queuesgd.harness.apriori_parallel import (
    ShardedCalibration,
    calibration_ranks,
    parallel_scheme,
    predict_parallel,
    save_inputs,
)
from queuesgd.harness.pipelining import StageProfile
from queuesgd.harness.report import read_rows
from queuesgd.schemes import Pipeline, ShardedDataParallel

VALIDATION = Path(__file__).resolve().parents[2] / "validation"
PARALLEL = VALIDATION / "parallel"


def _stored_inputs(model: str) -> dict:
    own = json.loads((PARALLEL / "profiles" / f"{model}.fsdp.json").read_text())
    own = {**own, **{k: {int(n): v for n, v in own[k].items()} for k in ("compute", "update")}}
    return {
        "layers": Profile.load(PARALLEL / "profiles" / f"{model}.json"),
        "own": own,
        "stages": StageProfile.load(PARALLEL / "profiles" / f"{model}.stages.json"),
    }


def test_every_stored_parallel_prediction_is_rebuilt_exactly_through_the_table():
    """validation/parallel holds the inputs of every FSDP and pipeline row; the rows' model is the table's.

    Each stored prediction, made by the code before the rows joined the table, is rebuilt to the last bit
    by :func:`predict_parallel` (the row's model and parameters) from the files with its stamps, and every
    result row of the section carries one of them.
    """
    preds = json.loads((PARALLEL / "predictions.json").read_text())
    cals = {}
    for path in (PARALLEL / "calibrations").glob("*.json"):
        cal = ShardedCalibration.load(path)
        cals[(cal.kind, cal.measured)] = cal
    inputs = {m: _stored_inputs(m) for m in {p["model"] for p in preds}}
    rebuilt = 0
    for p in preds:
        mine = inputs[p["model"]]
        stamp = mine["stages" if parallel_scheme(p["scheme"]).profile == "stages" else "layers"].measured
        kind = parallel_scheme(p["scheme"]).calibration(p["params"])
        assert p["profile_measured"] == stamp  # the stored inputs are the prediction's own
        new = predict_parallel(
            p["scheme"], mine, cals[(kind, p["calibration_measured"])], p["workers"], p["params"]
        )
        assert (new["predicted"], new["method"]) == (p["predicted"], p["method"])
        rebuilt += 1
    assert rebuilt == 20 and {p["scheme"] for p in preds} == {"fsdp", "pipeline"}
    stored = {(p["predicted_at"], p["predicted"]) for p in preds}
    rows = [
        r
        for path in sorted((VALIDATION / "results" / "history").glob("apriori-*.json"))
        for r in read_rows(path)
        if r.get("scheme") in ("fsdp", "pipeline")
    ]
    assert len(rows) == 20 and all((r["predicted_at"], r["predicted"]) in stored for r in rows)


def _two_unit_profile() -> StageProfile:
    # Units of 1 ms forward and 2 ms backward each; unit 0 outputs 64 bytes (test_pipelining_live's).
    return StageProfile(
        "mlp", 4, {}, ("0", "2"), (0.001, 0.001), (0.002, 0.002), (400.0, 400.0), (64.0, 40.0),
        (0.006, 0.006), 0.001, "prof",
    )  # fmt: skip


def test_the_protocol_asks_the_row():
    assert parallel_scheme("fsdp").key == parallel_scheme("zero").key == ShardedDataParallel.key
    assert parallel_scheme("pipeline").scheme is Pipeline
    with pytest.raises(UnknownNameError, match="profile"):
        parallel_scheme("sync-ps")  # not a row of the parallel protocol
    assert calibration_ranks("p2p", 6) == 2 and calibration_ranks("sharded", 6) == 6
    link = Calibration("p2p", 2, None, 5e-4, float("inf"), 1.0, "none", "cal")
    # GPipe, 2 stages, 2 micro-batches of 4 samples with gloo's rendezvous messages: 11.5 ms by hand
    # (tests/harness/test_pipelining_live.py draws the timeline).
    params = {"stages": 2, "microbatches": 2, "schedule": "gpipe", "split": [1, 1]}
    pred = predict_parallel("pipeline", {"stages": _two_unit_profile()}, link, 2, params)
    assert pred["predicted"] == pytest.approx(2 * 4 / 0.0115, rel=1e-9) and pred["p2p"] == "rendezvous"
    one_f1b = {**params, "schedule": "1f1b", "microbatches": 1}
    with pytest.raises(InvalidParameterError, match="microbatches"):  # torch's 1F1B needs M >= S
        predict_parallel("pipeline", {"stages": _two_unit_profile()}, link, 2, one_f1b)
    with pytest.raises(InvalidParameterError, match="workers"):
        predict_parallel("pipeline", {"stages": _two_unit_profile()}, link, 3, params)


def test_save_inputs_round_trips(tmp_path):
    prof = _two_unit_profile()
    paths = save_inputs({"stages": prof, "own": {"compute": {2: [0.01]}, "measured": "m"}}, tmp_path, "mlp")
    assert sorted(p.name for p in paths) == ["mlp.fsdp.json", "mlp.stages.json"]
    assert StageProfile.load(tmp_path / "mlp.stages.json") == prof
    assert json.loads((tmp_path / "mlp.fsdp.json").read_text())["compute"] == {"2": [0.01]}


def test_a_parallel_row_runs_live_with_its_loop_and_gives_a_row():
    """A two-stage pipeline of the default MLP and FSDP, on loopback, through the table (bounded runs)."""
    pytest.importorskip("torch")
    from queuesgd.harness.apriori_parallel import run_parallel, run_parallel_apriori

    params = {"stages": 2, "microbatches": 2, "schedule": "gpipe", "split": [1, 2]}
    row = run_parallel_apriori(
        "pipeline",
        {"predicted": 1.0, "predicted_at": "0"},
        lambda: run_parallel("pipeline", "mlp", 2, 14, batch_size=4, params=params, warmup=2, timeout=120),
        4,
    )
    # By hand: stage 0 (Linear(784, 256) + ReLU) sends 4 samples x 256 floats x 4 bytes per micro-batch.
    assert row["run_info"]["split"] == [1, 2] and row["run_info"]["activation_bytes"] == [4096]
    assert row["scheme"] == "pipeline" and row["measured"] > 0 and row["updates"] >= 10
    recs = run_parallel("fsdp", "mlp", 2, 3, batch_size=4, warmup=1, timeout=120)
    units = next(r for r in recs if r.get("role") == "units")
    # By hand: 4 bytes x (784*256 + 256), (256*256 + 256), (256*10 + 10).
    assert units["unit_bytes"] == [803840, 263168, 10280]
    assert {r["scheme"] for r in recs if r.get("role") == "worker"} == {ShardedDataParallel.key}
