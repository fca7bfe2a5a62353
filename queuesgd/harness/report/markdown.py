"""The accuracy report in Markdown (:func:`write_report`): every section, its accuracy, every row."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import write_text
from queuesgd.harness.report.campaigns import campaign_lines
from queuesgd.harness.report.rows import abs_errors, summary
from queuesgd.harness.report.sections import (
    SECTIONS,
    by_section,
    campaign_runs,
    last_run,
    target_met,
)


# ------------------------------------------------------------------------------------ Markdown
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _when(value: Any) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM`` (other text as it is)."""
    text = str(value)
    if len(text) >= 16 and text[10] == "T":
        return f"{text[:10]} {text[11:16]}"
    return text


def _delay_text(value: Any) -> str:
    """A random delay in the current ``K:DELAY`` syntax (``1:50ms``)."""
    from queuesgd.specs import random_delay
    from queuesgd.units import format_seconds

    try:
        rd = random_delay(str(value), "random_delay")
    except InvalidParameterError:
        return str(value)
    return f"{rd.count}:{format_seconds(rd.delay).replace(' ', '')}"


def _law_text(row: Mapping[str, Any]) -> str:
    """The compute law and random delay of a row, in the current syntax.

    Rows written before random delays had their own field spelled eager-SGD's
    delay as a straggler, ``delay:K:DELAY`` (with deterministic compute).

    Examples
    --------
    >>> _law_text({"straggler": "delay:1:50ms", "random_delay": None})
    'none, random delay 1:50ms'
    >>> _law_text({"straggler": "lognormal:0.3", "random_delay": "2:0.32s"})
    'lognormal:0.3, random delay 2:320ms'
    """
    law = row.get("straggler")
    delay = row.get("random_delay")
    if isinstance(law, str) and law.lower().startswith("delay:"):
        law, delay = "none", delay or law[len("delay:") :]
    text = str(law) if law else "-"
    if delay:
        text += f", random delay {_delay_text(delay)}"
    return text


def _network_text(row: Mapping[str, Any]) -> str:
    from queuesgd.units import format_bandwidth

    bw = row.get("bandwidth")
    emulation = row.get("emulation") or "?"
    return f"{format_bandwidth(float(bw))}, {emulation}" if bw else str(emulation)


def _result_cells(row: Mapping[str, Any]) -> tuple[str, str, str]:
    if row.get("measured") is None:
        return f"failed: {row.get('failure', '?')}", "-", "-"
    lo, hi = row.get("measured_low"), row.get("measured_high")
    interval = f" [{lo:.1f}, {hi:.1f}]" if lo is not None and hi is not None else ""
    pred = "-" if row.get("predicted") is None else f"{row['predicted']:.1f}"
    err = "-" if row.get("error") is None else f"{100 * row['error']:+.1f}%"
    return f"{row['measured']:.1f}{interval}", pred, err


def _inputs_text(row: Mapping[str, Any]) -> str:
    """When the a-priori inputs were measured and when the prediction was made."""
    parts = []
    profile = row.get("profile")
    if isinstance(profile, Mapping):
        parts.append(f"profile {_when(profile['measured'])}" if profile.get("measured") else "profile")
    elif profile:
        parts.append(f"profile {profile}")
    calibration = row.get("calibration")
    if isinstance(calibration, Mapping) and calibration.get("measured"):
        parts.append(f"calibration {_when(calibration['measured'])}")
    if row.get("predicted_at"):
        parts.append(f"predicted {_when(row['predicted_at'])}")
    return "; ".join(parts) or "-"


def _markdown_rows(rows: Sequence[Mapping[str, Any]], section: str = "emulated-network") -> str:
    """Every row of one section: a table that leads with the result, then the provenance, collapsed.

    The first table is what a reader scans: scheme, workers, measured and
    predicted samples/s and the error first, then the model (or workload),
    the network and the method. The second, inside ``<details>``, gives for
    the same configurations, in the same order, everything else: batch,
    gradient, compute law, parameters, cores, when the inputs were measured
    and the measurement's 95% interval.
    """
    from queuesgd.units import format_bytes

    last = "difference" if section == "replay" else "error"
    real = section in ("real-apriori", "real-gpu")
    lead = [
        f"| scheme | n | measured | predicted | {last} | {'model' if real else 'workload'} "
        "| network | method |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    if real:
        more = [
            "| configuration | batch | gradient | parameters | cores | inputs measured "
            "| measured (95% interval) |",
            "|---|---:|---:|---|---|---|---:|",
        ]
    else:
        more = [
            "| configuration | gradient | compute law | parameters | inputs | measured (95% interval) |",
            "|---|---:|---|---|---|---:|",
        ]
    for r in rows:
        grad = format_bytes(float(r["gradient_bytes"])) if r.get("gradient_bytes") else "-"
        meas, pred, err = _result_cells(r)
        measured = meas.split(" [")[0]
        params = ", ".join(f"{k}={v}" for k, v in dict(r.get("params") or {}).items()) or "-"
        if real and r.get("random_delay"):  # the emulated rows show it with the law
            params = f"random delay {r['random_delay']}" + ("" if params == "-" else f"; {params}")
        cells: list[Any] = [r["scheme"], r["workers"], measured, pred, err, r.get("workload", "-")]
        cells += [_network_text(r), r.get("method", "-")]
        lead.append("| " + " | ".join(str(c) for c in cells) + " |")
        config = f"{r['scheme']}, n={r['workers']}, {r.get('workload', '-')}, {_network_text(r)}"
        if real:
            cores = r.get("cores", "-")
            cells = [
                config,
                r.get("batch_size", "-"),
                grad,
                params,
                f"{cores}, {r['device_name']}" if r.get("device_name") else cores,
                _inputs_text(r),
                meas,
            ]
        else:
            inputs = r.get("inputs") or "same-run (field absent)"
            cells = [config, grad, _law_text(r), params, inputs, meas]
        more.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(
        [
            *lead,
            "",
            '<details markdown="1">',
            "<summary>Provenance of these configurations (batch, gradient, parameters, "
            "inputs, the measurement's 95% interval)</summary>",
            "",
            *more,
            "",
            "</details>",
        ]
    )


def _pooled_line(rows: Sequence[Mapping[str, Any]], earlier: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """The section's pooled accuracy, one line in bold (none without an error); with ``earlier`` passes'
    rows, every pass pooled is the headline and the newest passes' figure follows it."""
    errs = abs_errors(rows)
    if not errs.size:
        return []
    if earlier:
        every = abs_errors([*rows, *earlier])
        return [
            f"**Every pass of this section pooled: median {_pct(float(np.median(every)))}, "
            f"max {_pct(float(np.max(every)))} over {every.size} rows** ({len(earlier)} of them from earlier "
            f"passes, not in the tables below; the rows below alone: median {_pct(float(np.median(errs)))}, "
            f"max {_pct(float(np.max(errs)))} over {errs.size} configurations)."
        ]
    return [
        f"**All schemes of this section: median {_pct(float(np.median(errs)))}, "
        f"max {_pct(float(np.max(errs)))} over {errs.size} configurations.**"
    ]


def _accuracy_lines(rows: Sequence[Mapping[str, Any]], target: tuple[float, float]) -> list[str]:
    lines = [
        "| scheme | configurations | median abs error | max abs error | target met |",
        "|---|---:|---:|---:|---|",
    ]
    for scheme, s in summary(rows).items():
        failed = sum(1 for r in rows if r["scheme"] == scheme and r.get("error") is None)
        count = f"{s['configurations']}" + (f" ({failed} without a result)" if failed else "")
        met = "yes" if target_met(s, target) else "no"
        lines.append(
            f"| {scheme} | {count} | {_pct(s['median_abs_error'])} | {_pct(s['max_abs_error'])} | {met} |"
        )
    return lines


def write_report(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    machine: str,
    built: str = "",
    notes: Mapping[str, str] | None = None,
    plots: Mapping[str, str] | None = None,
    ran: str | None = None,
    command: str | None = None,
    appendix: Sequence[str] = (),
    rebuildable: Callable[[Mapping[str, Any]], bool] | None = None,
    campaigns: str | os.PathLike[str] | None = None,
    specs: str | os.PathLike[str] | None = None,
    earlier: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Path:
    """Write the accuracy report (Markdown) in the sections of :data:`SECTIONS`.

    Each counted section (real training with a-priori inputs; emulated
    compute on a real network) has its own per-scheme accuracy table against
    its own target, its plot, when its campaign last ran (the latest
    ``started`` of its rows) and every configuration. The replay rows
    (application shaper) follow under a heading saying that they compare the
    model with itself, with no accuracy figure; real-training rows with
    same-run inputs, if any, are listed last as a diagnosis.

    Parameters
    ----------
    rows : sequence of dict
        Validation rows (any section).
    path : path-like
        The ``REPORT.md`` to write.
    machine : str
        What the report was built on (cores, torch version, load).
    built : str
        When the report was built.
    notes : mapping of str to str, optional
        Per scheme, why the model misses where it does (what it leaves out).
    plots : mapping of str to str, optional
        Section key to the relative path of its measured-vs-predicted plot.
    ran, command : str, optional
        When and with which command the rows were produced, for a report of
        one campaign (each section also says when its own rows last ran).
    appendix : sequence of str
        Markdown lines of sections that are not validation rows (the profile
        fidelity, :func:`queuesgd.harness.report.fidelity.fidelity_lines`),
        placed after the sections and before the notes.
    rebuildable : callable, optional
        ``rebuildable(row)``: whether the row's inputs are stored, so that its
        prediction can be rebuilt from them (each a-priori section then says
        how many of its rows are).
    campaigns : path-like, optional
        The folder of preregistered campaigns (one folder per campaign with its
        ``summary.json``); the a-priori section then judges each campaign on
        its own pooled figures (:func:`queuesgd.harness.report.campaigns.campaign_lines`)
        before listing its configurations. By default the ``campaigns`` folder
        beside ``path``, where there is one.
    specs : path-like, optional
        The folder of the committed specs, in the git repository: each
        campaign's ``NAME.json`` is checked to have been committed before the
        campaign's first row (:mod:`queuesgd.harness.preregistration`). By
        default the ``specs`` folder beside ``path``.
    earlier : mapping of str to rows, optional
        Per section key, the rows of its earlier passes (kept apart from
        ``rows``, whose configurations they repeat): the section's headline
        pools them with its own rows, as every pass is reported.
    """
    groups = by_section(rows)
    plots = dict(plots or {})
    campaign_folder = Path(path).parent / "campaigns" if campaigns is None else Path(campaigns)
    spec_folder = Path(path).parent / "specs" if specs is None else Path(specs)
    lines = [
        "# Validation report",
        "",
        "Generated by `queuesgd.harness.report.write_report` "
        "(`python validation/run_campaign.py --report-only`); do not edit by hand.",
        "",
    ]
    if built:
        lines.append(f"- Report built: {built}")
    if ran:
        lines.append(f"- Rows produced: {ran}")
    if command:
        lines.append(f"- Command: `{command}`")
    lines += [
        f"- Machine when the report was built: {machine}",
        "",
        "Live evidence of accuracy is a prediction made *before* a run from inputs measured elsewhere, "
        "compared with the run. The rows are therefore in sections by where their prediction's inputs "
        "came from, and each counted section has its own target. Relative error = predicted / measured - 1 "
        "on samples per second.",
        "",
        "| section | configurations | counted in accuracy | target (per scheme) | campaign last ran |",
        "|---|---:|---|---|---|",
    ]
    for sec in SECTIONS:
        mine = groups[sec.key]
        if sec.key == "diagnosis" and not mine:
            continue
        target = (
            f"median <= {100 * sec.target[0]:g}%, max <= {100 * sec.target[1]:g}%" if sec.target else "none"
        )
        lines.append(
            f"| {sec.title} | {len(mine)} | {'yes' if sec.target else 'no'} | {target} | "
            f"{last_run(mine) or 'never'} |"
        )
    for number, sec in enumerate(SECTIONS, start=1):
        mine = groups[sec.key]
        if sec.key == "diagnosis" and not mine:
            continue
        heading = f"## {number}. {sec.title}" if sec.key != "diagnosis" else f"## {sec.title} (not counted)"
        lines += ["", heading, ""]
        if sec.target is not None and mine:
            # What a reader looks for first: the pooled accuracy, the plot, the per-scheme accuracy.
            lines += [*_pooled_line(mine, (earlier or {}).get(sec.key, ())), ""]
            if plots.get(sec.key):
                lines += [
                    f"![{sec.title}: measured against predicted, band ±{100 * sec.target[1]:g}%]"
                    f"({plots[sec.key]})",
                    "",
                ]
            lines += [
                f"Target per scheme: median |error| <= {100 * sec.target[0]:g}% and "
                f"max |error| <= {100 * sec.target[1]:g}%.",
                "",
            ]
            lines += [*_accuracy_lines(mine, sec.target), ""]
        lines += [f"Inputs: {sec.inputs}", ""]
        runs = campaign_runs(mine)
        lines += [f"Campaign: `{sec.campaign}`; last ran: {last_run(mine) or 'never'}."]
        if len(runs) > 1:
            lines += ["", f"The section mixes {len(runs)} campaign runs: " + "; ".join(runs) + "."]
        if not mine:
            lines += ["", f"No configurations yet: `{sec.campaign}` produces them."]
            continue
        if sec.target is not None:
            apriori = [r for r in mine if r.get("inputs") == "a-priori"]
            if rebuildable is not None and apriori:
                kept = sum(bool(rebuildable(r)) for r in apriori)
                lost = "; the others' inputs were overwritten before they were kept"
                rest = "" if kept == len(apriori) else lost
                lines += [
                    "",
                    f"Inputs committed: {kept} of {len(apriori)} rows have their profile and calibration "
                    "files in the repository, and `tests/harness/test_rebuild_predictions.py` (FSDP and "
                    "pipeline rows: `tests/harness/test_pipeline_probes.py`) rebuilds their predictions from "
                    f"them exactly{rest}.",
                ]
        elif sec.key == "replay":
            lines += [
                "",
                "Not evidence of accuracy: the `difference` column is the model against its own replay.",
            ]
        if sec.key == "real-apriori" and campaign_folder.is_dir():
            lines += ["", *campaign_lines(campaign_folder, rows, spec_folder)]
        lines += ["", f"### Every configuration: {sec.title.split(':')[0].lower()}", ""]
        lines += [_markdown_rows(mine, sec.key)]
    if appendix:
        lines += ["", *appendix]
    if notes:
        lines += [
            "",
            "## Where the models miss, and why",
            "",
            "Written by people from the measurements above (the models are not tuned to them).",
            "",
        ]
        for scheme, text in notes.items():
            lines += [f"- **{scheme}**: {text}"]
    return write_text("path", path, "\n".join(lines) + "\n")
