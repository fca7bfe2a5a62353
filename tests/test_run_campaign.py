"""``validation/run_campaign.py``: the emulated campaign keeps what it measured (audit finding MEDIUM 4).

A line's result file is named by its configuration (scheme and a hash of everything it runs with), not
by its place in ``campaign.json``; a file that exists already is refused, naming it, before any line
runs (a rerun, or ``--only SCHEME``, silently replaced the earlier rows); each file is written again as
each worker count finishes. The live runs are stood in for: the expected stems are computed here from
sha256 of the canonical JSON, and the rows from the stand-in.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from validation_scripts import VALIDATION, load_script

from queuesgd.errors import InvalidParameterError

SPEC = {
    "defaults": {"workers": [2, 4], "steps": 150, "compute": "50ms", "bandwidth": "1Gbit/s"},
    "configurations": [
        {"scheme": "ring-allreduce", "straggler": "lognormal:0.05"},
        {"scheme": "sync-ps", "straggler": "lognormal:0.05"},
        {"scheme": "ring-allreduce", "straggler": "lognormal:0.3", "gradient_bytes": "4MB"},
    ],
}


def _stem(line: dict) -> str:
    """The stem by hand: sha256 of the sorted, compact JSON of the defaults with the line over them."""
    doc = {**SPEC["defaults"], **line}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{line['scheme']}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


class _Run:
    """A stand-in for ``validate``: one row per worker count, each handed to ``on_row`` as it is made;
    records which files existed when each row was made."""

    def __init__(self, results: Path):
        self.results, self.calls, self.seen = results, [], []

    def __call__(self, scheme, *, workers, on_row, **cfg):
        from queuesgd.harness.campaign import ValidationResult

        self.calls.append((scheme, cfg.get("straggler")))
        rows = []
        for n in workers:
            self.seen.append(sorted(p.name for p in self.results.glob("*.json")))
            row = {"scheme": scheme, "workers": n, "measured": 10.0 * n, "predicted": 10.0 * n, "error": 0.0,
                   "load": {"foreign_share": 0.01, "steal": 0.0}}  # fmt: skip
            rows.append(row)
            on_row(row)
        return ValidationResult(tuple(rows))


def test_a_lines_file_is_named_by_its_configuration_not_its_place(tmp_path, capsys):
    mod = load_script("run_campaign")
    run = _Run(tmp_path)
    written = mod.run_lines(SPEC, tmp_path, run=run)
    assert [p.name for p in written] == [f"{_stem(line)}.json" for line in SPEC["configurations"]]
    # the same lines in another order: the same names
    turned = {**SPEC, "configurations": SPEC["configurations"][::-1]}
    assert [s for s, _, _ in mod.planned_lines(turned)] == [_stem(line) for line in turned["configurations"]]
    # each file was written as each worker count finished: n=4 of the first line saw n=2's file
    first = f"{_stem(SPEC['configurations'][0])}.json"
    assert run.seen[0] == [] and run.seen[1] == [first]
    rows = json.loads((tmp_path / first).read_text())
    assert [(r["workers"], r["load"]["foreign_share"]) for r in rows] == [(2, 0.01), (4, 0.01)]


def test_an_existing_result_file_is_refused_naming_it_before_any_line_runs(tmp_path, capsys):
    """A rerun of --only sync-ps where its file exists: refused naming the file, nothing run, the earlier
    rows untouched; with --overwrite it runs. Through the script's main: one line on stderr, status 2."""
    mod = load_script("run_campaign")
    old = tmp_path / f"{_stem(SPEC['configurations'][1])}.json"
    old.write_text('[{"scheme": "sync-ps", "workers": 2, "measured": 1.0}]\n')
    run = _Run(tmp_path)
    with pytest.raises(InvalidParameterError) as info:
        mod.run_lines(SPEC, tmp_path, only="sync-ps", run=run)
    assert str(info.value).startswith(f"results: got '{old}'; accepted: a result file not written yet")
    assert run.calls == [] and json.loads(old.read_text())[0]["measured"] == 1.0
    mod.run_lines(SPEC, tmp_path, only="sync-ps", overwrite=True, run=run)
    assert run.calls == [("sync-ps", "lognormal:0.05")]
    assert [r["measured"] for r in json.loads(old.read_text())] == [20.0, 40.0]

    # the script: its own campaign.json's first sync-ps line, its file already in (a stand-in) results/
    spec = json.loads((VALIDATION / "campaign.json").read_text())
    stem = mod.planned_lines(spec, "sync-ps")[0][0]
    (tmp_path / "script").mkdir()
    taken = tmp_path / "script" / f"{stem}.json"
    taken.write_text("[]\n")
    mod.RESULTS = tmp_path / "script"
    mod.build_report = lambda *a, **k: pytest.fail("the report was rebuilt")
    capsys.readouterr()
    assert mod.main(["--only", "sync-ps"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"run_campaign.py: error: results: got '{taken}'")


def test_only_and_repeated_lines_are_refused(tmp_path):
    mod = load_script("run_campaign")
    with pytest.raises(InvalidParameterError, match=r"^--only: got 'sync_ps'; accepted: .*ring-allreduce"):
        mod.planned_lines(SPEC, "sync_ps")
    twice = {**SPEC, "configurations": [*SPEC["configurations"], dict(SPEC["configurations"][0])]}
    with pytest.raises(InvalidParameterError, match=r"^configurations\[3\]: .*configurations\[0\]"):
        mod.planned_lines(twice)


def test_the_committed_campaign_names_each_line_apart():
    """campaign.json's lines are distinct configurations: one file each."""
    mod = load_script("run_campaign")
    spec = json.loads((VALIDATION / "campaign.json").read_text())
    stems = [s for s, _, _ in mod.planned_lines(spec)]
    assert len(set(stems)) == len(spec["configurations"]) == 17
