"""The documentation site builds with ``mkdocs build --strict`` and no warning.

Strict mode fails on a broken link or anchor, a page of ``docs/`` that is
neither in the nav nor excluded, and a docstring that mkdocstrings cannot
parse (griffe's warnings). Skipped only where MkDocs is not installed: the
``docs`` extra is part of ``dev``, which CI installs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", site],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert result.returncode == 0 and not warnings, log[-6000:]
    # The API reference rendered the docstrings, and the carried repository files are in the site.
    api = (site / "api" / "predict" / "index.html").read_text()
    assert "queuesgd.prediction.predict" in api and "Parameters" in api
    assert (site / "repository" / "CHANGELOG" / "index.html").is_file()
    assert (site / "repository" / "examples" / "index.html").is_file()


def test_docs_point_at_nothing_outside_the_repository() -> None:
    # The notes of the machines queuesgd was developed on are not something users have: the docs say it.
    outside = re.compile(r"/work/|harness-notes")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "docs").rglob("*.md"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert not offenders, "\n".join(offenders)
