"""Validation results on disk: JSON, CSV, a measured-vs-predicted plot, and the accuracy report.

A validation row is a plain dict with at least ``scheme``, ``workers``,
``measured`` (samples/s, mean), ``measured_low`` / ``measured_high`` (its 95%
interval), ``predicted`` (samples/s) and ``error`` (``predicted / measured -
1``), plus the configuration (``steps``, ``workload``, ``straggler``,
``bandwidth``, ``emulation``, ``method`` ...). These functions need no torch.

Examples
--------
>>> rows = [{"scheme": "ring-allreduce", "workers": 2, "measured": 100.0, "predicted": 103.0, "error": 0.03},
...         {"scheme": "ring-allreduce", "workers": 4, "measured": 180.0, "predicted": 171.0, "error": -0.05}]
>>> summary(rows)["ring-allreduce"]
{'configurations': 2, 'median_abs_error': 0.04, 'max_abs_error': 0.05}
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, MissingDependencyError

__all__ = ["format_table", "jsonable", "plot_rows", "read_rows", "summary", "write_report", "write_rows"]

#: Columns printed by :func:`format_table`, in order.
TABLE_COLUMNS = ("scheme", "workers", "configuration", "measured", "interval", "predicted", "error")


def _abs_errors(rows: Iterable[Mapping[str, Any]]) -> np.ndarray:
    return np.array([abs(float(r["error"])) for r in rows if r.get("error") is not None], dtype=float)


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scheme: the number of configurations and the median and max absolute relative error.

    Rows without a prediction (``error`` None, a failed run) count as configurations but not in the errors.
    """
    out: dict[str, dict[str, Any]] = {}
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        mine = [r for r in rows if r["scheme"] == scheme]
        errs = _abs_errors(mine)
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
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidParameterError(
            "out", os.fspath(out_dir), f"a writable directory ({err.strerror})"
        ) from None
    clean = [jsonable(dict(r)) for r in rows]
    written = []
    path = out / f"{stem}.json"
    path.write_text(json.dumps(clean, indent=1) + "\n", encoding="utf-8")
    written.append(path)
    keys = list(dict.fromkeys(k for r in clean for k in r))
    path = out / f"{stem}.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for r in clean:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    written.append(path)
    try:
        written.append(plot_rows(rows, out / f"{stem}.png"))
    except MissingDependencyError:
        pass
    return written


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows from a JSON file written by :func:`write_rows`."""
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


def plot_rows(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], title: str = "") -> Path:
    """Measured against predicted samples/s, one marker per scheme, with the y = x line and a ±15% band."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("matplotlib", "plot") from err
    done = [r for r in rows if r.get("predicted") is not None and r.get("measured") is not None]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    markers = "osD^v<>pX*"
    for i, scheme in enumerate(dict.fromkeys(r["scheme"] for r in done)):
        mine = [r for r in done if r["scheme"] == scheme]
        x = [float(r["predicted"]) for r in mine]
        y = [float(r["measured"]) for r in mine]
        lo = [float(r["measured"]) - float(r.get("measured_low", r["measured"])) for r in mine]
        hi = [float(r.get("measured_high", r["measured"])) - float(r["measured"]) for r in mine]
        ax.errorbar(x, y, yerr=[lo, hi], fmt=markers[i % len(markers)], ms=5, capsize=2, label=scheme)
    if done:
        top = 1.1 * max(max(float(r["predicted"]), float(r["measured"])) for r in done)
        grid = np.linspace(0, top, 2)
        ax.plot(grid, grid, "k-", lw=0.8, label="measured = predicted")
        ax.fill_between(grid, grid / 1.15, grid / 0.85, color="0.85", alpha=0.5, label="±15%")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
    ax.set_xlabel("predicted samples/s")
    ax.set_ylabel("measured samples/s")
    ax.set_title(title or "queuesgd: measured against predicted")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out, dpi=120)
    except OSError as err:
        raise InvalidParameterError(
            "out", os.fspath(path), f"a writable file path ({err.strerror})"
        ) from None
    finally:
        plt.close(fig)
    return out


def _markdown_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """Every row as a Markdown table with the whole configuration."""
    from queuesgd.units import format_bandwidth, format_bytes

    out = [
        "| scheme | n | gradient | compute law | network | parameters | measured (95% interval) | predicted "
        "| method | error |",
        "|---|---:|---:|---|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        grad = format_bytes(float(r["gradient_bytes"])) if r.get("gradient_bytes") else "-"
        bw = r.get("bandwidth")
        emulation = r.get("emulation", "none")
        net = f"{format_bandwidth(float(bw))}, {emulation}" if bw else emulation
        params = ", ".join(f"{k}={v}" for k, v in dict(r.get("params") or {}).items()) or "-"
        law = str(r.get("straggler", "-")) + (
            f", random delay {r['random_delay']}" if r.get("random_delay") else ""
        )
        if r.get("measured") is None:
            meas, pred, err = f"failed: {r.get('failure', '?')}", "-", "-"
        else:
            meas = f"{r['measured']:.1f} [{r.get('measured_low', 0):.1f}, {r.get('measured_high', 0):.1f}]"
            pred = f"{r['predicted']:.1f}"
            err = f"{100 * r['error']:+.1f}%"
        out.append(
            f"| {r['scheme']} | {r['workers']} | {grad} | {law} | {net} | {params} | "
            f"{meas} | {pred} | {r.get('method', '-')} | {err} |"
        )
    return "\n".join(out)


def write_report(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    ran: str,
    command: str,
    machine: str,
    notes: Mapping[str, str] | None = None,
    plot: str | None = None,
) -> Path:
    """Write the accuracy report (Markdown): per-scheme median and max error, every row, and the notes.

    Parameters
    ----------
    rows : sequence of dict
        Validation rows.
    path : path-like
        The ``REPORT.md`` to write.
    ran : str
        When the campaign ran (ISO date and time).
    command : str
        The command that produced the rows.
    machine : str
        What it ran on (cores, torch version, other load).
    notes : mapping of str to str, optional
        Per scheme, why the model misses where it does (what it leaves out).
    plot : str, optional
        Relative path of the measured-vs-predicted plot to embed.
    """
    stats = summary(rows)
    lines = [
        "# Validation report",
        "",
        "Generated by `queuesgd.harness.report.write_report`; do not edit by hand.",
        "",
        f"- Last run: {ran}",
        f"- Command: `{command}`",
        f"- Machine: {machine}",
        "",
        "## Accuracy per scheme",
        "",
        "Relative error = predicted / measured - 1 on samples per second. Target: median |error| <= 5% and "
        "max <= 15% across schemes for n in {2, 4, 8}.",
        "",
        "| scheme | configurations | median abs error | max abs error | target met |",
        "|---|---:|---:|---:|---|",
    ]
    for scheme, s in stats.items():
        med, mx = s["median_abs_error"], s["max_abs_error"]
        met = "yes" if med is not None and med <= 0.05 and mx <= 0.15 else "no"
        lines.append(
            f"| {scheme} | {s['configurations']} | {'-' if med is None else f'{100 * med:.1f}%'} | "
            f"{'-' if mx is None else f'{100 * mx:.1f}%'} | {met} |"
        )
    all_err = _abs_errors(rows)
    if all_err.size:
        lines += [
            "",
            f"All schemes: median {100 * float(np.median(all_err)):.1f}%, "
            f"max {100 * float(np.max(all_err)):.1f}% over {all_err.size} configurations.",
        ]
    if plot:
        lines += ["", f"![measured against predicted]({plot})"]
    lines += ["", "## Every configuration", "", _markdown_rows(rows)]
    if notes:
        lines += ["", "## Where the models miss, and why", ""]
        for scheme, text in notes.items():
            lines += [f"- **{scheme}**: {text}"]
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
