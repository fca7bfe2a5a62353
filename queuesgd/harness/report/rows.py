"""Validation rows on disk and in a terminal: JSON and CSV files, the per-scheme summary, the table."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, MissingDependencyError
from queuesgd.file_writes import make_folder, write_text
from queuesgd.harness.report.plots import plot_rows

#: Columns printed by :func:`format_table`, in order.
TABLE_COLUMNS = ("scheme", "workers", "configuration", "measured", "interval", "predicted", "error")


def abs_errors(rows: Iterable[Mapping[str, Any]]) -> np.ndarray:
    """``|error|`` of every row with a prediction (a row whose ``error`` is None, a failed run, is left out).

    Examples
    --------
    >>> abs_errors([{"error": -0.25}, {"error": None}, {"error": 0.5}])
    array([0.25, 0.5 ])
    """
    return np.array([abs(float(r["error"])) for r in rows if r.get("error") is not None], dtype=float)


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scheme: the number of configurations and the median and max absolute relative error.

    Rows without a prediction (``error`` None, a failed run) count as configurations but not in the errors.

    Examples
    --------
    >>> rows = [{"scheme": "async-ps", "error": 0.04}, {"scheme": "async-ps", "error": -0.1},
    ...         {"scheme": "sync-ps", "error": None}]
    >>> summary(rows)["async-ps"]
    {'configurations': 2, 'median_abs_error': 0.07, 'max_abs_error': 0.1}
    >>> summary(rows)["sync-ps"]
    {'configurations': 1, 'median_abs_error': None, 'max_abs_error': None}
    """
    out: dict[str, dict[str, Any]] = {}
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        mine = [r for r in rows if r["scheme"] == scheme]
        errs = abs_errors(mine)
        out[scheme] = {
            "configurations": len(mine),
            "median_abs_error": round(float(np.median(errs)), 6) if errs.size else None,
            "max_abs_error": round(float(np.max(errs)), 6) if errs.size else None,
        }
    return out


def _configuration(row: Mapping[str, Any]) -> str:
    parts = [str(row.get("workload", ""))]
    if row.get("straggler"):
        parts.append(f"straggler {row['straggler']}")
    if row.get("random_delay"):
        parts.append(f"random delay {row['random_delay']}")
    bw = row.get("bandwidth")
    if bw:
        from queuesgd.units import format_bandwidth

        parts.append(f"{format_bandwidth(float(bw))} ({row.get('emulation', '?')})")
    if row.get("params"):
        parts.append(", ".join(f"{k}={v}" for k, v in dict(row["params"]).items()))
    return "; ".join(p for p in parts if p)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a text table: configuration, measured samples/s (mean and 95% interval), predicted, error.

    Examples
    --------
    >>> print(format_table([{"scheme": "async-ps", "workers": 2, "workload": "emulated", "measured": 150.0,
    ...     "measured_low": 148.0, "measured_high": 152.0, "predicted": 153.0, "error": 0.02}]))
    scheme             n  configuration             measured      95% interval predicted   error
    async-ps           2  emulated                     150.0    [148.0, 152.0]     153.0   +2.0%
    """
    head = (
        f"{'scheme':<16} {'n':>3}  {'configuration':<24} {'measured':>9} {'95% interval':>17} "
        f"{'predicted':>9} {'error':>7}"
    )
    lines = [head]
    for r in rows:
        lo, hi = r.get("measured_low"), r.get("measured_high")
        interval = f"[{lo:.1f}, {hi:.1f}]" if lo is not None and hi is not None else "-"
        pred, err, meas = r.get("predicted"), r.get("error"), r.get("measured")
        lines.append(
            f"{r['scheme']:<16} {r['workers']:>3}  {_configuration(r)[:24]:<24} "
            f"{(f'{meas:.1f}' if meas is not None else 'failed'):>9} {interval:>17} "
            f"{(f'{pred:.1f}' if pred is not None else '-'):>9} "
            f"{(f'{100 * err:+.1f}%' if err is not None else '-'):>7}"
        )
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars as Python numbers, non-finite floats as None, tuples as lists.

    Examples
    --------
    >>> jsonable({"rate": np.float64(2.5), "cap": float("inf"), "sizes": (1, 2)})
    {'rate': 2.5, 'cap': None, 'sizes': [1, 2]}
    """
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def write_rows(
    rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str], stem: str = "results"
) -> list[Path]:
    """Write ``<stem>.json``, ``<stem>.csv`` and ``<stem>.png`` (measured against predicted) into ``out_dir``.

    The PNG is skipped, with no error, when matplotlib is missing; the
    returned list says which files were written.

    Examples
    --------
    >>> import tempfile
    >>> rows = [{"scheme": "async-ps", "workers": 2, "measured": 100.0, "predicted": 104.0, "error": 0.04}]
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     paths = write_rows(rows, folder)
    ...     back = read_rows(paths[0])
    >>> [p.name for p in paths[:2]], back == rows
    (['results.json', 'results.csv'], True)
    """
    out = make_folder("out", out_dir)
    clean = [jsonable(dict(r)) for r in rows]
    written = []
    written.append(write_text("out", out / f"{stem}.json", json.dumps(clean, indent=1) + "\n"))
    keys = list(dict.fromkeys(k for r in clean for k in r))
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=keys)
    writer.writeheader()
    for r in clean:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    written.append(write_text("out", out / f"{stem}.csv", table.getvalue()))
    try:
        written.append(plot_rows(rows, out / f"{stem}.png"))
    except MissingDependencyError:
        pass
    return written


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows from a JSON file written by :func:`write_rows` (its example writes and reads them back).

    Examples
    --------
    >>> read_rows("no/such/results.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got 'no/such/results.json'; accepted: a JSON file of ...
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InvalidParameterError(
            "path", os.fspath(path), f"a JSON file of validation rows ({err})"
        ) from None
    if not isinstance(data, list):
        raise InvalidParameterError("path", os.fspath(path), "a JSON list of validation rows")
    return data


def counted_rows(
    results: str | os.PathLike[str], campaign: str, scheme: str, *, passes: Any = None
) -> list[dict[str, Any]]:
    """The counted rows of one scheme in one spec campaign, from ``results/<campaign>-<scheme>-*.json``.

    A row is kept when its own ``campaign`` is ``campaign``, it is not marked ``counted: false`` and it
    has an ``error``; ``passes`` (an iterable of pass numbers) keeps only those passes.

    Examples
    --------
    >>> import json, tempfile
    >>> rows = [{"campaign": "c", "pass": 1, "error": 0.1}, {"campaign": "c", "pass": 2, "error": -0.2},
    ...         {"campaign": "c", "pass": 2, "error": 0.5, "counted": False}]
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "c-ddp-mlp-pass1.json").write_text(json.dumps(rows))
    ...     every, second = counted_rows(d, "c", "ddp"), counted_rows(d, "c", "ddp", passes=[2])
    >>> [r["error"] for r in every], [r["error"] for r in second]
    ([0.1, -0.2], [-0.2])
    """
    keep = None if passes is None else {int(x) for x in passes}
    return [
        r
        for path in sorted(Path(results).glob(f"{campaign}-{scheme}-*.json"))
        for r in read_rows(path)
        if r.get("campaign") == campaign
        and r.get("counted", True)
        and r.get("error") is not None
        and (keep is None or r.get("pass") in keep)
    ]
