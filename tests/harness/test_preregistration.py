"""The preregistration check: a campaign's spec committed before its first row, read from a real git history.

Each test builds a git repository in a temporary folder, with commits made at
dates set through GIT_AUTHOR_DATE and GIT_COMMITTER_DATE, and rows whose
times are written out; the expected commit is the one the test made (its
sha from ``git rev-parse``), the expected times are the dates the test set,
and the spec's hash is computed here with hashlib from the canonical JSON
(sorted keys, no spaces), not by the harness.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.preregistration import (
    AFTER,
    BEFORE,
    UNKNOWN,
    check_registration,
    first_row_time,
    registering_commit,
)
from queuesgd.harness.report.campaigns import campaign_lines

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

UTC = dt.UTC
SPEC = {"name": "demo", "steps": 60, "warmup": 10, "passes": 2}
EDITED = {**SPEC, "passes": 3}


def _hash(document: dict) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def _commit(repo: Path, path: str, text: str, when: str) -> str:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", f"at {when}", when=when)
    return _git(repo, "rev-parse", "HEAD")


def _rows(document: dict, *times: str) -> list[dict]:
    h = _hash(document)
    return [{"spec_hash": h, "started": t, "predicted_at": t} for t in times]


def test_spec_committed_before_the_rows_is_verified_with_both_times(tmp_path):
    repo = _repo(tmp_path)
    sha = _commit(repo, "validation/specs/demo.json", json.dumps(SPEC, indent=1), "2026-11-26T18:06:48+00:00")
    _commit(repo, "other.txt", "later work", "2026-11-26T19:00:00+00:00")
    rows = _rows(SPEC, "2026-11-26T18:47:14+0000", "2026-11-26T18:41:43+0000")
    result = check_registration(repo, "validation/specs/demo.json", rows)
    assert result.status == BEFORE
    assert result.commit == sha and result.spec_hash == _hash(SPEC)
    assert result.committed == dt.datetime(2026, 11, 26, 18, 6, 48, tzinfo=UTC)
    assert result.first_row == dt.datetime(2026, 11, 26, 18, 41, 43, tzinfo=UTC)
    assert result.describe() == (
        f"committed before its first row: spec committed in `{sha[:7]}` at 2026-11-26 18:06:48 UTC; "
        "first row 2026-11-26 18:41:43 UTC"
    )


def test_spec_committed_after_the_first_row_is_flagged(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "README", "start", "2026-11-26T10:00:00+00:00")
    sha = _commit(repo, "specs/demo.json", json.dumps(SPEC), "2026-11-26T12:00:05+01:00")  # 11:00:05 UTC
    rows = _rows(SPEC, "2026-11-26T11:00:04+00:00")
    result = check_registration(repo / "specs", repo / "specs" / "demo.json", rows)
    assert (result.status, result.commit) == (AFTER, sha)
    assert result.committed == dt.datetime(2026, 11, 26, 11, 0, 5, tzinfo=UTC)
    assert result.first_row == dt.datetime(2026, 11, 26, 11, 0, 4, tzinfo=UTC)
    assert result.describe().startswith("**committed AFTER its first row**: spec committed in")


def test_the_registered_version_is_found_by_its_hash_across_edits(tmp_path):
    repo = _repo(tmp_path)
    draft = {**SPEC, "passes": 1}
    _commit(repo, "specs/demo.json", json.dumps(draft), "2026-11-26T09:00:00+00:00")  # a draft: not it
    sha = _commit(repo, "specs/demo.json", json.dumps(SPEC, indent=2), "2026-11-26T10:00:00+00:00")
    _commit(repo, "specs/demo.json", json.dumps(EDITED), "2026-11-26T12:00:00+00:00")  # edited after
    _commit(repo, "specs/demo.json", json.dumps(SPEC), "2026-11-26T13:00:00+00:00")  # and back: not first
    assert registering_commit(repo, "specs/demo.json", _hash(SPEC)) == (
        sha,
        dt.datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC),
    )
    before = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert (before.status, before.commit) == (BEFORE, sha)
    # The edited version, run at 11:00, was committed only at 12:00: flagged, not hidden by the older draft.
    edited = check_registration(repo, "specs/demo.json", _rows(EDITED, "2026-11-26T11:00:00+00:00"))
    assert edited.status == AFTER
    assert edited.committed == dt.datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def test_a_renamed_spec_is_followed_to_its_first_name(tmp_path):
    repo = _repo(tmp_path)
    sha = _commit(repo, "specs/old.json", json.dumps(SPEC), "2026-11-26T10:00:00+00:00")
    _git(repo, "mv", "specs/old.json", "specs/demo.json")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "rename", when="2026-11-26T12:00:00+00:00")
    result = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert (result.status, result.commit) == (BEFORE, sha)


def test_a_spec_never_committed_with_that_hash_is_unknown(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "specs/demo.json", json.dumps(EDITED), "2026-11-26T10:00:00+00:00")
    result = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert result.status == UNKNOWN and result.commit is None
    assert result.reason == f"no commit of specs/demo.json has the hash {_hash(SPEC)[:12]}"


def test_within_one_second_is_unknown(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "specs/demo.json", json.dumps(SPEC), "2026-11-26T10:00:00+00:00")
    # git's time is whole seconds: 10:00:00 may be 10:00:00.9, after a row at 10:00:00.5.
    result = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T10:00:00.500000+00:00"))
    assert result.status == UNKNOWN
    assert result.reason == "the spec's commit and the first row are within one second"
    later = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T10:00:01+00:00"))
    assert later.status == BEFORE


def test_no_git_repository_is_unknown_not_verified(tmp_path):
    folder = tmp_path / "plain"
    (folder / "specs").mkdir(parents=True)
    (folder / "specs" / "demo.json").write_text(json.dumps(SPEC))
    result = check_registration(folder, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert (result.status, result.reason, result.commit) == (UNKNOWN, "no history", None)
    assert result.describe() == "not checked (no history)"
    with pytest.raises(InvalidParameterError, match="repo: .*a folder in a git repository"):
        registering_commit(folder, "specs/demo.json", _hash(SPEC))


def test_git_not_installed_is_unknown(tmp_path, monkeypatch):
    repo = _repo(tmp_path)
    _commit(repo, "specs/demo.json", json.dumps(SPEC), "2026-11-26T10:00:00+00:00")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert (result.status, result.reason) == (UNKNOWN, "no history")


def test_a_shallow_clone_without_the_registering_commit_is_unknown(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "specs/demo.json", json.dumps(SPEC), "2026-11-26T10:00:00+00:00")
    tip = _commit(repo, "other.txt", "later", "2026-11-27T10:00:00+00:00")
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    assert _git(shallow, "rev-parse", "--is-shallow-repository") == "true"
    # The clone's one commit holds the spec, dated after the rows: its history cannot say when it came.
    result = check_registration(shallow, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert (result.status, result.reason, result.commit) == (UNKNOWN, "no history", tip)
    # The full history says it was committed before.
    full = check_registration(repo, "specs/demo.json", _rows(SPEC, "2026-11-26T11:00:00+00:00"))
    assert full.status == BEFORE


def test_first_row_time_is_the_earliest_of_every_recorded_time():
    rows = [
        {"started": "2026-11-26T21:10:32+0000", "profile": {"measured": "2026-11-26T20:29:59+00:00"}},
        {"predicted_at": "2026-11-26T21:30:00+01:00", "calibration_measured": "2026-11-26T21:00:00+00:00"},
        {"probes": {"measured": "2026-11-26T21:00:00+00:00"}, "started": None},
    ]
    assert first_row_time(rows) == dt.datetime(2026, 11, 26, 20, 29, 59, tzinfo=UTC)  # a nested time
    assert first_row_time(rows[1:]) == dt.datetime(2026, 11, 26, 20, 30, 0, tzinfo=UTC)  # 21:30 at +01:00
    assert first_row_time([{"scheme": "ddp"}]) is None
    with pytest.raises(InvalidParameterError, match="row run_started: got '2026-11-26T21:10:32'"):
        first_row_time([{"run_started": "2026-11-26T21:10:32"}])  # no offset: no order with a commit


def test_rows_of_two_specs_are_refused(tmp_path):
    rows = _rows(SPEC, "2026-11-26T11:00:00+00:00") + _rows(EDITED, "2026-11-26T11:00:00+00:00")
    with pytest.raises(InvalidParameterError, match="rows: got '2 spec hashes'"):
        check_registration(tmp_path, "specs/demo.json", rows)


def _campaign(folder: Path, document: dict) -> None:
    (folder / "demo").mkdir(parents=True)
    stats = {"median_abs_error": 0.02, "max_abs_error": 0.05}
    summary = {
        "campaign": "demo",
        "spec_hash": _hash(document),
        "commits": ["0123456789ab"],
        "passes_registered": 1,
        "passes": [{"pass": 1, "by_scheme": {"ddp": stats}}],
        "pooled": {"by_scheme": {"ddp": dict(stats, rows=1)}},
        "targets": {"median": 0.1, "max": 0.2},
    }
    (folder / "demo" / "summary.json").write_text(json.dumps(summary))


def test_the_report_says_when_each_campaign_was_registered(tmp_path):
    repo = _repo(tmp_path)
    sha = _commit(repo, "validation/specs/demo.json", json.dumps(SPEC), "2026-11-26T10:00:00+00:00")
    _campaign(repo / "validation" / "campaigns", SPEC)
    other = {"spec_hash": "ff" * 32, "started": "2000-01-01T00:00:00+00:00"}  # another campaign's row
    rows = [*_rows(SPEC, "2026-11-26T10:30:00+00:00"), other]
    lines = campaign_lines(repo / "validation" / "campaigns", rows, repo / "validation" / "specs")
    assert lines[-1] == (
        f"- `demo`: committed before its first row: spec committed in `{sha[:7]}` at "
        "2026-11-26 10:00:00 UTC; first row 2026-11-26 10:30:00 UTC"
    )
    plain = tmp_path / "copy"  # the same files without the history (a tarball, an export)
    shutil.copytree(repo / "validation", plain / "validation")
    lines = campaign_lines(plain / "validation" / "campaigns", rows, plain / "validation" / "specs")
    assert lines[-1] == "- `demo`: not checked (no history)"


def test_the_code_each_row_ran_is_checked_to_contain_the_spec_commit(tmp_path):
    # Clock-free: a row's recorded code commit was HEAD when it ran, so the spec's commit in its history
    # existed then. Rows of a commit made before the spec (on a side branch) do not contain it.
    repo = _repo(tmp_path)
    early = _commit(repo, "code.py", "v0", "2026-11-26T17:00:00+00:00")
    spec = _commit(repo, "validation/specs/demo.json", json.dumps(SPEC), "2026-11-26T18:00:00+00:00")
    later = _commit(repo, "code.py", "v1", "2026-11-26T18:30:00+00:00")
    rows = _rows(SPEC, "2026-11-26T18:40:00+0000", "2026-11-26T18:41:00+0000", "2026-11-26T18:42:00+0000")
    rows[0]["commit"], rows[1]["commit"], rows[2]["commit"] = spec, later + "+dirty", early
    rows.append({"spec_hash": _hash(SPEC), "started": "2026-11-26T18:43:00+0000", "commit": "f" * 40})
    result = check_registration(repo, "validation/specs/demo.json", rows)
    assert result.status == BEFORE and result.commit == spec
    assert result.code == (2, 4)  # the spec's own commit and a later one; not the earlier or an unknown one
    assert result.describe().endswith("; the code 2 of 4 rows ran contains that commit")
    without = check_registration(repo, "validation/specs/demo.json", _rows(SPEC, "2026-11-26T18:40:00+0000"))
    assert without.code == (0, 0) and "rows ran" not in without.describe()
