"""When and with which code a measurement was made: what every record and validation row carries.

Examples
--------
>>> import re
>>> bool(re.fullmatch(r"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d[+-]\\d{4}", stamp()))
True
>>> code_version() is None or bool(re.fullmatch(r"[0-9a-f]{40}(\\+dirty)?", code_version()))
True
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

__all__ = ["code_version", "stamp"]

#: The checkout the package runs from (``queuesgd/harness/`` is two levels below it).
_ROOT = Path(__file__).resolve().parents[2]


def stamp() -> str:
    """The current time as ISO 8601 with the offset (what every record carries)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def code_version() -> str | None:
    """The commit of the code that runs: ``QUEUESGD_COMMIT`` if set, else ``git rev-parse HEAD``.

    ``+dirty`` is appended when the package's files differ from that commit
    (a row made by uncommitted code cannot be rebuilt from the history).
    None where neither tells (an installed copy outside a git checkout).
    """
    given = os.environ.get("QUEUESGD_COMMIT")
    if given:
        return given
    try:
        head = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--", "queuesgd")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "") if head else None


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=_ROOT, capture_output=True, text=True, timeout=20, check=True)
    return out.stdout.strip()
