"""A validation row's fields mean one thing each (audit finding MEDIUM 5).

``latency`` is the emulated link's one-way latency (0 on ``netns-tbf`` and loopback: ``tc tbf`` adds
none); the network a prediction was given (the calibration's fit) is ``fit_bandwidth`` and
``fit_latency``. A prediction's field can no longer silently replace a field of the run's when a row
joins them: ``{**run, **prediction}`` did, so the parallel rows' ``latency`` was the fit. The committed
rows keep what they hold (measured data is never rewritten); the last test pins what their
``latency`` is, as ``docs/validation.md`` says, against the stored predictions beside them.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from queuesgd.errors import InvalidParameterError

VALIDATION = Path(__file__).resolve().parents[2] / "validation"


def _records(n: int = 20, batch_gap: float = 0.1) -> list[dict]:
    """Worker 0's steps, two of warm-up, one gradient of each step applied every ``batch_gap`` s."""
    return [
        {"role": "worker", "rank": 0, "step": i, "warmup": i < 2, "t0": batch_gap * i,
         "t_end": batch_gap * (i + 1), "applied": 1}
        for i in range(n)
    ]  # fmt: skip


def test_a_parallel_row_refuses_a_prediction_field_that_would_replace_the_runs():
    """run_parallel_apriori: a stored prediction that names another scheme is refused (it replaced the
    row's scheme); one that repeats the row's own value joins; the measured rate is 1 x 4 / 0.1 s."""
    from queuesgd.harness.apriori_parallel import run_parallel_apriori

    pred = {"predicted": 50.0, "predicted_at": "0"}
    row = run_parallel_apriori("pipeline", {**pred, "scheme": "pipeline"}, _records, 4)
    assert row["scheme"] == "pipeline" and row["measured"] == pytest.approx(40.0, rel=1e-12)
    assert row["error"] == pytest.approx(50.0 / 40.0 - 1.0, rel=1e-12)
    with pytest.raises(InvalidParameterError, match=r"^prediction\.scheme: got 'sharded-dp'"):
        run_parallel_apriori("pipeline", {**pred, "scheme": "sharded-dp"}, _records, 4)
    with pytest.raises(InvalidParameterError, match=r"^prediction\.measured: got 1\.0"):
        run_parallel_apriori("pipeline", {**pred, "measured": 1.0}, _records, 4)


def test_an_apriori_row_keeps_its_latency_and_refuses_the_fits(monkeypatch):
    """run_apriori with a prediction carrying ``latency`` (a calibrated fit's 0.6 ms): refused, where the
    row's ``latency`` (the emulated link's, 0) became 0.6 ms; the prediction's ``device``, the profile's
    own, joins. The run is stood in for (records of 4 samples every 0.1 s: 40 samples/s)."""
    import queuesgd.harness.netns as netns
    from queuesgd.harness.apriori import run_apriori

    monkeypatch.setattr(netns, "on_network", lambda world, rate, go: (_records(), "none"))
    profile = SimpleNamespace(
        model="mlp", batch_size=4, model_options={}, device="cpu", measured="then",
        workload=SimpleNamespace(gradient_bytes=1000.0),
    )  # fmt: skip
    pred = {"predicted": 44.0, "method": "fine", "predicted_at": "0", "device": "cpu"}
    row = run_apriori("ddp", profile, None, 1, prediction=pred)
    assert (row["latency"], row["device"], row["measured"]) == (0.0, "cpu", pytest.approx(40.0, rel=1e-12))
    assert row["error"] == pytest.approx(44.0 / 40.0 - 1.0, rel=1e-12)
    with pytest.raises(InvalidParameterError, match=r"^prediction\.latency: got 0\.0006; .* latency is 0\.0"):
        run_apriori("ddp", profile, None, 1, prediction={**pred, "latency": 6e-4})


def test_a_parallel_prediction_names_its_fit_apart_from_the_runs_link():
    """predict_pipeline and predict_fsdp record the network they were given as fit_bandwidth and
    fit_latency (a 0.5 ms, 100 MB/s calibration), and no ``latency`` or ``bandwidth`` a row would read
    as the run's link."""
    from queuesgd.harness.apriori import Calibration
    from queuesgd.harness.apriori_parallel import predict_pipeline
    from queuesgd.harness.pipelining import StageProfile

    prof = StageProfile("mlp", 4, {}, ("0", "2"), (0.001, 0.001), (0.002, 0.002), (400.0, 400.0),
                        (64.0, 40.0), (0.006, 0.006), 0.001, "then")  # fmt: skip
    link = Calibration("p2p", 2, 1e8, 5e-4, 1e8, 1.0, "netns-tbf", "before")
    got = predict_pipeline(prof, link, 2, 2, split=[1, 1])
    assert (got["fit_latency"], got["fit_bandwidth"]) == (5e-4, 1e8)
    assert "latency" not in got and "bandwidth" not in got


def _stored_predictions() -> dict[tuple, dict]:
    """Every stored prediction of the committed spec campaigns, by campaign, pass, scheme, model, rate,
    workers and params."""
    out = {}
    for path in sorted((VALIDATION / "campaigns").glob("*/predictions*.json")):
        for p in json.loads(path.read_text()):
            key = (path.parent.name, p["pass"], p["scheme"], p["model"], p["rate"], p["workers"],
                   json.dumps(p["params"], sort_keys=True), p["predicted_at"])  # fmt: skip
            out[key] = p
    return out


def test_committed_parallel_rows_latency_is_their_predictions_fit():
    """The committed FSDP and pipeline rows (those with ``input_files``) were written before
    ``fit_latency``: their ``latency`` is the stored prediction's network fit (what docs/validation.md
    says of them), not an emulated latency; their ``bandwidth`` is the emulated rate. Read from the
    stored predictions, an independent file."""
    stored = _stored_predictions()
    rows = [r for path in sorted((VALIDATION / "results").glob("*.json"))
            for r in json.loads(path.read_text()) if "input_files" in r]  # fmt: skip
    assert len(rows) >= 200
    fits = 0
    for r in rows:
        assert "fit_latency" not in r  # none written since; a new row would carry both names
        key = (r["campaign"], r["pass"], r["scheme"], r["model_label"], r["bandwidth"], r["workers"],
               json.dumps(r["params"], sort_keys=True), r["predicted_at"])  # fmt: skip
        if key not in stored:  # a paired row's params carry its split; matched by the rest
            (p,) = [v for k, v in stored.items() if k[:6] == key[:6] and k[7] == key[7]]
        else:
            p = stored[key]
        assert r["latency"] == p["latency"] and r["bandwidth"] == p["rate"]
        fits += r["latency"] > 0
    assert fits >= 200
