"""Shared by the tests of ``compare``: a measured-runs file written for a test, and the CLI run in-process.

(tests/test_compare_logs.py, tests/test_compare_input_checks.py)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from queuesgd.cli import main


def write_runs(tmp_path: Path, text: str, name: str = "log.csv") -> Path:
    """``text`` written to ``tmp_path / name`` (UTF-8): a CSV or a log for ``compare`` to read."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``queuesgd ARGS`` in this process: (status, stdout, stderr)."""
    try:
        status = main(args)
    except SystemExit as stop:  # argparse refusing a flag
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err
