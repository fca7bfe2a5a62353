"""Rows and records carry the code version that made them (issue 22): the commit, +dirty when it differs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from queuesgd.harness import provenance

ROOT = Path(provenance.__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_code_version_is_the_checkouts_commit(monkeypatch):
    monkeypatch.delenv("QUEUESGD_COMMIT", raising=False)
    try:
        head = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--", "queuesgd")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    assert provenance.code_version() == head + ("+dirty" if dirty else "")


def test_the_environment_names_the_commit_where_no_checkout_does(monkeypatch):
    monkeypatch.setenv("QUEUESGD_COMMIT", "0123abc")
    assert provenance.code_version() == "0123abc"
