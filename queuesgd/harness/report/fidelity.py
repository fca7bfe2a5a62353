"""The report's "Profile fidelity" section: every pass of ``run_profile_fidelity.py``, pooled first.

A pass is the JSON document the script writes (its registered targets, the
device, the commit, every row). :func:`fidelity_lines` turns all passes into
Markdown: the pooled figures over the rows held to the targets, a table of
passes, the newest pass on each device row by row, each model's pair errors
pooled over the passes of one protocol (:func:`pooled_pairs`, with
:func:`median_interval`), and the GPU traces read by
:func:`queuesgd.read_trace` against the plain step recorded beside them
(:func:`trace_rows`). Memory: the measured peak (CUDA's ``max_memory_allocated``,
or the CPU allocator's count of one step) over the profile's
:class:`~queuesgd.Memory`, whose transient term predicts the backward pass's
peak from the step's structure (passes made before it show the sum without it).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.report.sections import short_commit

__all__ = ["fidelity_lines", "median_interval", "pooled_pairs", "read_passes", "trace_rows"]

#: Confidence of the interval of a model's median pair error, pooled over passes (:func:`pooled_pairs`).
POOLED_CONFIDENCE = 0.95


def read_passes(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every pass document (``*.json`` with ``rows``) in ``folder``, oldest first, each with its ``file``."""
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
            out.append({**doc, "file": path.name})
    return sorted(out, key=lambda d: str(d.get("started", "")))


def trace_rows(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Each ``<name>.json.gz`` trace with its ``<name>.meta.json``: read_trace's step against the plain one.

    The predicted step is ``compute + update`` of the Workload that
    :func:`queuesgd.read_trace` reads (the device's timeline); the reference
    is the sidecar's ``step_seconds``, a plain loop of the same step timed
    after the trace was recorded.
    """
    from queuesgd.profiler_trace import read_trace

    rows = []
    for meta_path in sorted(Path(folder).glob("*.meta.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        trace = meta_path.with_name(meta_path.name.replace(".meta.json", ".json.gz"))
        w = read_trace(trace, batch_size=int(meta.get("batch_size", 1)))
        predicted = w.compute_time + w.update_time
        rows.append(
            {
                "trace": trace.name,
                "scheduled": meta.get("scheduled", True),
                "device": meta.get("device"),
                "torch": meta.get("torch"),
                "steps": len(w.compute.samples),
                "layers": len(w.layers or ()),
                "predicted_s": predicted,
                "reference_s": meta["step_seconds"],
                "error": predicted / meta["step_seconds"] - 1.0,
            }
        )
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def _memory_cells(r: Mapping[str, Any]) -> tuple[str, str, str]:
    """The measured peaks over Memory's total (CUDA's, the CPU allocator's), and the transient's share."""
    total = r.get("memory_predicted_bytes")
    if not total:
        return "-", "-", "-"
    cuda = cpu = "-"
    if r.get("peak_memory_bytes"):
        cuda = f"{r['peak_memory_bytes'] / total:.2f}"
        if "memory_transient_bytes" not in r:
            cuda += " (no transient term)"
    if r.get("cpu_peak_memory_bytes"):
        cpu = f"{r['cpu_peak_memory_bytes'] / total:.2f}"
    transient = f"{r['memory_transient_bytes'] / total:.2f}" if "memory_transient_bytes" in r else "-"
    return cuda, cpu, transient


def _protocol(row: Mapping[str, Any]) -> str:
    """The row's protocol, and its held statistic when it is not the ratio of medians (pass 10 on).

    >>> _protocol({"protocol": "interleaved", "held": "paired", "blocks": 100, "block_steps": 4})
    'interleaved, 100 x 4 steps, paired'
    >>> _protocol({"protocol": "interleaved", "blocks": 6, "block_steps": 8}), _protocol({})
    ('interleaved, 6 x 8 steps', 'bracket')
    """
    name = row.get("protocol", "bracket")
    if name == "interleaved" and row.get("blocks"):
        name += f", {row['blocks']} x {row.get('block_steps')} steps"
    return name + (", paired" if row.get("held") == "paired" else "")


def _held(doc: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Is ``row`` held to the targets? Rows noted 'target' on the device the registration names."""
    return str(doc.get("device", "")).startswith("cuda") and str(row.get("notes", "")).startswith("target")


def _met(doc: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Did a row that ran meet both registered targets, its error and the profile's overhead?"""
    registered = doc.get("registered", {})
    error_ok = abs(float(row["error"])) <= float(registered.get("target_error", 0.03))
    return error_ok and float(row["overhead"]) <= float(registered.get("target_overhead", 2.0))


def _device_of(doc: Mapping[str, Any]) -> str:
    """The device a pass ran on, by name where the pass recorded one."""
    return str(doc.get("device_name") or doc.get("device"))


def _shown(passes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Per device: the newest pass with held rows (else the newest), and the passes after it."""
    out: list[Mapping[str, Any]] = []
    devices = dict.fromkeys(_device_of(d) for d in passes)
    for device in devices:
        mine = [d for d in passes if _device_of(d) == device]
        full = [i for i, d in enumerate(mine) if any(_held(d, r) for r in d["rows"])]
        out += mine[full[-1] if full else len(mine) - 1 :]
    return out


def median_interval(values: Any, units: int, confidence: float = POOLED_CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval of the median of ``values``, ``units`` independent groups of them.

    The order-statistic interval of a median (ranks ``r`` and ``n - r + 1``
    of ``n`` independent values, ``r`` the binomial ``(n, 1/2)`` law's
    ``(1 - confidence) / 2`` quantile) counted in groups: ``values`` holds
    ``c = len(values) / units`` values a group (a timed block's two pair
    errors share the block), so ``n = units``, and the bounds are the
    outermost values of the groups' ranks ``r`` and ``units - r + 1``. With
    one value a group it is :func:`scipy.stats.quantile_test`'s interval
    (18 values: the 5th and 14th smallest, coverage 96.9%). Infinite bounds
    where ``units`` is too small for ``confidence`` (5 or fewer at 95%).

    Examples
    --------
    >>> median_interval(range(18), 18)
    (4.0, 13.0)
    >>> median_interval(range(36), 18)    # two values a group: the outer values of ranks 5 and 14
    (8.0, 27.0)
    >>> median_interval(range(5), 5)
    (-inf, inf)
    >>> median_interval(range(18), 18, confidence=95)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: confidence: got 95; accepted: a number strictly between 0 and 1...
    """
    from scipy import stats

    v = np.sort(np.asarray(values, dtype=float))
    units = _checks.integer("units", units)
    if v.size % units:
        raise InvalidParameterError("units", units, f"a count of groups of equal size of the {v.size} values")
    if not 0.0 < _checks.real("confidence", confidence) < 1.0:
        raise InvalidParameterError("confidence", confidence, "a number strictly between 0 and 1, e.g. 0.95")
    c = v.size // units
    r = int(stats.binom.ppf((1.0 - confidence) / 2.0, units, 0.5))
    if r < 1:
        return -math.inf, math.inf
    return float(v[c * (r - 1)]), float(v[c * (units - r + 1) - 1])


def pooled_pairs(passes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each model's pair errors pooled over the passes of one protocol on one device, with their median.

    A row of an interleaved pass records its loop blocks and the profile's
    timed blocks between them; its pair errors
    (:func:`queuesgd.harness.fidelity.pair_errors`) are each timed block over
    each loop block beside it, less 1. Passes are pooled where the device,
    the blocks, the steps a block and the held statistic are the same (the
    same protocol run again); a model is pooled by its row's name. The
    median's interval is :func:`median_interval`'s, each timed block one
    group (its two pairs share it).

    Examples
    --------
    >>> row = {"name": "m", "notes": "target", "protocol": "interleaved", "blocks": 2, "block_steps": 8,
    ...        "loop_s": [1.0, 2.0, 1.0], "profile_s": [1.5, 1.5]}
    >>> doc = {"device": "cuda", "device_name": "H200", "file": "a.json", "rows": [row]}
    >>> [(g["model"], g["passes"], g["pairs"], g["median"]) for g in pooled_pairs([doc])]
    [('m', ['a.json'], 4, 0.125)]
    """
    from queuesgd.harness.fidelity import pair_errors

    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for d in passes:
        for r in d["rows"]:
            if not r.get("profile_s") or not r.get("loop_s"):
                continue
            key = (_device_of(d), _protocol(r), r["name"])
            g = groups.setdefault(
                key,
                {
                    "device": key[0],
                    "protocol": key[1],
                    "model": key[2],
                    "held": _held(d, r),
                    "target": float(d.get("registered", {}).get("target_error", 0.03)),
                    "passes": [],
                    "errors": [],
                    "blocks": 0,
                },
            )
            g["passes"].append(str(d.get("file", "")))
            g["errors"].extend(pair_errors(r["loop_s"], r["profile_s"]))
            g["blocks"] += len(r["profile_s"])
    out = []
    for g in groups.values():
        e = np.asarray(g.pop("errors"))
        out.append(
            {
                **g,
                "pairs": int(e.size),
                "median": float(np.median(e)),
                "interval": median_interval(e, g["blocks"]),
            }
        )
    return out


def _pooled_lines(passes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table of :func:`pooled_pairs`, with what it may and may not be read as."""
    pooled = pooled_pairs(passes)
    if not pooled:
        return []
    lines = [
        "",
        "### Pair errors pooled over the passes of one protocol",
        "",
        "Each model's pair errors (a timed block of the profile over each plain-loop block beside it, "
        "less 1: unbiased where both kinds of block share one law, however much the blocks spread), "
        "pooled over every pass that ran the same interleaved protocol on the same device: their median "
        f"and its {100 * POOLED_CONFIDENCE:g}% interval (order statistics, distribution-free, each timed "
        "block counted once). *Within the target* says whether the whole interval lies within the "
        "registered |error|. This pooled median was chosen after passes 7-9 had been seen (until pass 10 "
        "the held statistic was the ratio of medians; CPU passes 10-11 held the median of each block "
        "over the mean of its two neighbours): for those passes this table is a re-reading of their "
        "records, not evidence.",
        "",
        "| device | protocol | model | passes | timed blocks | median pair error | interval "
        "| within the target |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for g in pooled:
        lo, hi = g["interval"]
        inside = "yes" if -g["target"] <= lo and hi <= g["target"] else "no"
        lines.append(
            f"| {g['device']} | {g['protocol']} | {g['model']} | {len(g['passes'])} | {g['blocks']} | "
            f"{_pct(g['median'])} | {_pct(lo)}..{_pct(hi)} | {inside if g['held'] else 'not held'} |"
        )
    return lines


def fidelity_lines(
    passes: Sequence[Mapping[str, Any]],
    traces: Sequence[Mapping[str, Any]] = (),
    *,
    notes: Sequence[str] = (),
    number: int | None = None,
) -> list[str]:
    """The section's Markdown lines (see the module); ``notes``, written by people, close it.

    Examples
    --------
    >>> doc = {"device": "cuda", "device_name": "H100", "started": "2026-11-26T15:00:00Z", "commit": "abc",
    ...        "file": "p.json", "registered": {"target_error": 0.03, "target_overhead": 2.0},
    ...        "rows": [{"name": "m", "notes": "target", "predicted_s": 0.0101, "reference_s": 0.01,
    ...                  "error": 0.01, "overhead": 1.1, "reference_spread": 0.002}]}
    >>> print(fidelity_lines([doc])[4])  # doctest: +NORMALIZE_WHITESPACE
    Pooled over every pass: 1 of 1 rows held to the targets met both (|error| <= 3% and overhead <= 2x;
    over the 1 that ran, median |error| 1.0%, max 1.0%; profile overhead at most 1.10x a step).
    """
    head = f"## {number}. Profile fidelity" if number is not None else "## Profile fidelity"
    lines = [
        head,
        "",
        "Does `queuesgd.profile` predict one worker's step of real models? Each row profiles a model, "
        "predicts its one-worker step (`predict` on the profile: compute + update) and compares it with "
        "a plain loop of the same step, no hooks, timed before and after the profile "
        "(`validation/run_profile_fidelity.py`; from pass 5 the profile's timed blocks alternate with "
        "blocks of the plain loop, *interleaved*, and their medians are compared; from pass 10, "
        "*paired*, the error is the median of each timed block over each loop block beside it, less 1; "
        "CPU passes 10-11 held each timed block over the mean of the two). "
        "Targets, registered in the script before each pass: "
        "|error| <= 3% on the GPU rows noted *target*, the profile's wall time per step at most 2x a "
        "plain step.",
    ]
    held = [(d, r) for d in passes for r in d["rows"] if _held(d, r)]
    ok = [(d, r) for d, r in held if "error" in r]
    if ok:
        target = float(ok[0][0].get("registered", {}).get("target_error", 0.03))
        limit = float(ok[0][0].get("registered", {}).get("target_overhead", 2.0))
        errs = np.abs([r["error"] for _, r in ok])
        met = sum(_met(d, r) for d, r in ok)
        overhead = max(float(r["overhead"]) for _, r in ok)
        failed = len(held) - len(ok)
        lines += [
            "",
            f"Pooled over every pass: {met} of {len(held)} rows held to the targets met both (|error| <= "
            f"{100 * target:g}% and overhead <= {limit:g}x; over the {len(ok)} that ran, median |error| "
            f"{100 * float(np.median(errs)):.1f}%, max {100 * float(np.max(errs)):.1f}%; profile overhead "
            f"at most {overhead:.2f}x a step)." + (f" {failed} held rows did not run." if failed else ""),
            "",
        ]
    lines += [
        "| pass | device | commit | started | rows | held rows meeting both targets | median abs error "
        "(held, ran) | max (held, ran) |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for d in passes:
        targets = [r for r in d["rows"] if _held(d, r)]
        mine = [r for r in targets if "error" in r]
        e = np.abs([r["error"] for r in mine]) if mine else np.array([])
        lines.append(
            f"| `{d.get('file', '')}` | {_device_of(d)} | "
            f"`{short_commit(d.get('commit'))}` | {d.get('started', '')} | {len(d['rows'])} | "
            + (f"{sum(_met(d, r) for r in mine)} of {len(targets)} | " if targets else "not held | ")
            + (f"{100 * float(np.median(e)):.1f}% | {100 * float(np.max(e)):.1f}% |" if mine else "- | - |")
        )
    for d in _shown(passes):
        device = _device_of(d)
        which = "Newest pass with held rows" if any(_held(d, r) for r in d["rows"]) else "Pass"
        lines += [
            "",
            f"### {which} on {device} (`{d.get('file', '')}`, torch {d.get('torch', '?')})",
            "",
            "| model | held | protocol | predicted ms | plain loop ms | error | loop spread | overhead "
            "| CUDA peak / Memory | CPU allocator peak / Memory | transient / Memory |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in d["rows"]:
            if "error" not in r:
                lines.append(
                    f"| {r['name']} | {r.get('notes', '')} | | - | - | {r.get('failed', '')} | | | | | |"
                )
                continue
            cuda, cpu, transient = _memory_cells(r)
            lines.append(
                f"| {r['name']} | {r.get('notes', '')} | {_protocol(r)} | "
                f"{_ms(r['predicted_s'])} | {_ms(r['reference_s'])} | "
                f"{_pct(r['error'])} | {100 * r.get('reference_spread', float('nan')):.1f}% | "
                f"{r['overhead']:.2f}x | {cuda} | {cpu} | {transient} |"
            )
        if any(r.get("peak_memory_bytes") and "memory_transient_bytes" not in r for r in d["rows"]):
            lines += [
                "",
                "(no transient term): a pass made before the profile predicted the backward pass's "
                "transient peak; its Memory is the sum of parameters, gradients, optimizer state and the "
                "activations the allocator counted after the forward pass.",
            ]
    lines += _pooled_lines(passes)
    if traces:
        lines += [
            "",
            "### GPU traces read by `read_trace` (the device's timeline)",
            "",
            "| trace | schedule | steps | tensors | predicted ms | plain loop ms | error |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for t in traces:
            lines.append(
                f"| `{t['trace']}` ({t.get('device')}, torch {t.get('torch')}) | "
                f"{'ProfilerStep spans' if t['scheduled'] else 'none (cut at optimizer steps)'} | "
                f"{t['steps']} | "
                f"{t['layers']} | {_ms(t['predicted_s'])} | {_ms(t['reference_s'])} | {_pct(t['error'])} |"
            )
    if notes:
        lines += ["", "### What the passes show", "", *(f"- {n}" for n in notes)]
    return lines
