"""When and with which code a measurement was made: what every record and validation row carries.

A row joins fields from several sources (the run's configuration and measurement, a prediction made
before it); :func:`disjoint` keeps a prediction from silently replacing a field of the run's.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from queuesgd.errors import InvalidParameterError

__all__ = ["code_version", "disjoint", "stamp"]

#: The checkout the package runs from (``queuesgd/harness/`` is two levels below it).
_ROOT = Path(__file__).resolve().parents[2]


def stamp() -> str:
    """The current time as ISO 8601 with the offset (what every record carries).

    Examples
    --------
    >>> import time
    >>> t = stamp()
    >>> len(t), time.strptime(t, "%Y-%m-%dT%H:%M:%S%z").tm_year >= 2024
    (24, True)
    """
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def code_version() -> str | None:
    """The commit of the code that runs: ``QUEUESGD_COMMIT`` if set, else ``git rev-parse HEAD``.

    ``+dirty`` is appended when the package's files differ from that commit
    (a row made by uncommitted code cannot be rebuilt from the history).
    None where neither tells (an installed copy outside a git checkout).

    Examples
    --------
    >>> import os
    >>> saved = os.environ.pop("QUEUESGD_COMMIT", None)
    >>> os.environ["QUEUESGD_COMMIT"] = "0123abc"  # a copy of the code without .git, told its commit
    >>> code_version()
    '0123abc'
    >>> del os.environ["QUEUESGD_COMMIT"]
    >>> v = code_version()  # this checkout's: 40 hex digits, "+dirty" when the package differs
    >>> v is None or (len(v.removesuffix("+dirty")) == 40 and int(v[:40], 16) >= 0)
    True
    >>> if saved is not None:
    ...     os.environ["QUEUESGD_COMMIT"] = saved
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


def disjoint(name: str, fields: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` (a copy), refused if any of them would change a field of ``row``.

    A row is built from its run's fields and, e.g., the prediction made before
    the run (``{**run, **prediction}``): a prediction's field of the same name
    as one of the run's (``latency``: the calibrated fit, against the
    emulated link's one-way latency) replaced the run's without a word. A field
    both give with the same value is no conflict.

    Parameters
    ----------
    name : str
        What ``fields`` are (``"prediction"``): the error names ``name.FIELD``.
    fields, row : mapping
        The fields to join to ``row``, and the row's own.

    Examples
    --------
    >>> disjoint("prediction", {"predicted": 9.5, "device": "cpu"}, {"measured": 10.0, "device": "cpu"})
    {'predicted': 9.5, 'device': 'cpu'}
    >>> disjoint("prediction", {"latency": 6e-4}, {"latency": 0.0})
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: prediction.latency: got 0.0006; accepted: no field the row has \
already (the row's latency is 0.0)
    """
    for key, value in fields.items():
        if key in row and row[key] != value:
            raise InvalidParameterError(
                f"{name}.{key}", value, f"no field the row has already (the row's {key} is {row[key]!r})"
            )
    return dict(fields)
