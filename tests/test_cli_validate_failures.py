"""``queuesgd validate``: a failure during a run is a runtime failure, not an input error (audit finding
MEDIUM-LOW 7).

Every error a run raises (a worker's, or a measurement that refuses what it measured, such as a
calibration's fit of non-positive times) becomes that configuration's row with its ``failure``; the
other configurations still run, ``--out`` holds every row written as soon as its configuration ended,
and the command exits 1 with one ``failed`` line per failed run. An input error is still refused
before any run (one line, exit 2). The runs are stood in for (``campaign._run_one``), so the expected
rows and status follow from the stand-in alone.
"""

from __future__ import annotations

import json

import pytest

import queuesgd.harness.campaign as campaign
from queuesgd.cli import main
from queuesgd.errors import InvalidParameterError


def _row(n: int) -> dict:
    """What a finished configuration's run adds to its row: 100 samples/s per worker, predicted 5% high."""
    return {"measured": 100.0 * n, "predicted": 105.0 * n, "error": 0.05, "emulation": "none"}


def test_a_measurement_refused_during_a_run_is_that_runs_failure_and_the_others_are_kept(
    monkeypatch, tmp_path, capsys
):
    """n=4's calibration fit refuses its times: exit 1 (not 2), one ``failed`` line naming the run and
    the error, and --out holds n=2's and n=8's rows and n=4's failure row."""
    files_when: dict[int, list] = {}

    def run_one(key, n, *args):
        results = tmp_path / "out" / "results.json"
        files_when[n] = json.loads(results.read_text()) if results.exists() else None
        if n == 4:
            raise InvalidParameterError("seconds", [0.0, -1e-6], "times > 0 (the fit of a calibration)")
        return _row(n)

    monkeypatch.setattr(campaign, "_run_one", run_one)
    out = tmp_path / "out"
    code = main(["validate", "--workers", "2,4,8", "--steps", "20", "--out", str(out), "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    failure = "InvalidParameterError: seconds: got [0.0, -1e-06]; accepted: times > 0 (the fit of a "
    failure += "calibration)"
    assert err == [f"queuesgd: failed: ring-allreduce n=4: {failure}"]
    rows = json.loads((out / "results.json").read_text())
    assert [(r["workers"], r["measured"], r.get("failure")) for r in rows] == [
        (2, 200.0, None),
        (4, None, failure),
        (8, 800.0, None),
    ]
    # each row was on disk before the next configuration ran
    assert files_when[2] is None
    assert [r["workers"] for r in files_when[4]] == [2]
    assert [r["workers"] for r in files_when[8]] == [2, 4]


def test_an_interrupted_validate_keeps_the_rows_it_finished(monkeypatch, tmp_path, capsys):
    """Ctrl-C during n=4's run: status 130, and n=2's row is in --out."""

    def run_one(key, n, *args):
        if n == 4:
            raise KeyboardInterrupt
        return _row(n)

    monkeypatch.setattr(campaign, "_run_one", run_one)
    out = tmp_path / "out"
    assert main(["validate", "--workers", "2,4", "--steps", "20", "--out", str(out), "--json"]) == 130
    assert [r["workers"] for r in json.loads((out / "results.json").read_text())] == [2]


def test_an_input_error_is_still_refused_before_any_run(monkeypatch, capsys):
    """--network netns where no namespaces can be made: one line naming --network, exit 2, and no run
    started (it was refused inside the first run, so with the checks moved it must come first)."""
    import queuesgd.harness.netns as netns

    monkeypatch.setattr(netns, "available", lambda prefix="qsgd": (False, "not root"))
    monkeypatch.setattr(campaign, "_run_one", lambda *a: pytest.fail("a run started"))
    argv = ["--workers", "2", "--steps", "20", "--bandwidth", "1Gbit/s", "--network", "netns"]
    code = main(["validate", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["queuesgd: error: --network: got 'netns'; accepted: 'auto' or 'app' (not root)"]
