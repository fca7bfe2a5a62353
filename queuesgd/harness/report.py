"""Validation results on disk: JSON, CSV, measured-vs-predicted plots, and the accuracy report.

The report (:func:`write_report`) puts every row in a section by where its
prediction's inputs came from (:func:`section_of`, :data:`SECTIONS`): real
training predicted a priori, emulated compute on a real network, the
application shaper's replay of the model (not evidence of accuracy), and
real-training diagnoses with inputs from the same run.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, MissingDependencyError

__all__ = [
    "SECTIONS",
    "Section",
    "by_section",
    "campaign_runs",
    "format_table",
    "jsonable",
    "last_run",
    "plot_rows",
    "read_rows",
    "section_of",
    "summary",
    "target_met",
    "write_report",
    "write_rows",
]

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


def _band_limits(grid: np.ndarray, band: float) -> tuple[np.ndarray, np.ndarray]:
    """Measured values within ``|predicted / measured - 1| <= band`` of the predicted ``grid``."""
    return grid / (1.0 + band), grid / (1.0 - band)


def plot_rows(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    title: str = "",
    *,
    band: float = 0.15,
) -> Path:
    """Measured against predicted samples/s, one marker per scheme, with the y = x line and a ±``band`` band.

    The band holds the points whose error ``predicted / measured - 1`` is
    within ``±band``. Axes are logarithmic when the rates span more than a
    factor of 20. A path ending in ``.svg`` is written as SVG with a fixed
    hash salt and no date, so the same rows give the same file (it can be
    committed); any other suffix is written as a 120 dpi raster.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("matplotlib", "plot") from err
    if not 0 < band < 1:
        raise InvalidParameterError("band", band, "a fraction between 0 and 1")
    out = Path(path)
    svg = out.suffix.lower() == ".svg"
    rc = {"svg.hashsalt": "queuesgd", "svg.fonttype": "none"} if svg else {}
    done = [r for r in rows if r.get("predicted") is not None and r.get("measured") is not None]
    with matplotlib.rc_context(rc):
        fig, ax = plt.subplots(figsize=(5.5, 5))
        markers = "osD^v<>pX*"
        for i, scheme in enumerate(dict.fromkeys(r["scheme"] for r in done)):
            mine = [r for r in done if r["scheme"] == scheme]
            x = [float(r["predicted"]) for r in mine]
            y = [float(r["measured"]) for r in mine]
            lo = [float(r["measured"]) - float(r.get("measured_low") or r["measured"]) for r in mine]
            hi = [float(r.get("measured_high") or r["measured"]) - float(r["measured"]) for r in mine]
            ax.errorbar(x, y, yerr=[lo, hi], fmt=markers[i % len(markers)], ms=5, capsize=2, label=scheme)
        if done:
            values = [v for r in done for v in (float(r["predicted"]), float(r["measured"])) if v > 0]
            top, bottom = 1.1 * max(values), min(values) / 1.1
            log = top / bottom > 20
            grid = np.geomspace(bottom, top, 50) if log else np.linspace(0, top, 2)
            ax.plot(grid, grid, "k-", lw=0.8, label="measured = predicted")
            low, high = _band_limits(grid, band)
            ax.fill_between(grid, low, high, color="0.85", alpha=0.5, label=f"error within ±{100 * band:g}%")
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlim(bottom, top)
                ax.set_ylim(bottom, top)
            else:
                ax.set_xlim(0, top)
                ax.set_ylim(0, top)
        ax.set_xlabel("predicted samples/s")
        ax.set_ylabel("measured samples/s")
        ax.set_title(title or "queuesgd: measured against predicted", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        try:
            if svg:
                fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
            else:
                fig.savefig(out, dpi=120)
        except OSError as err:
            raise InvalidParameterError(
                "out", os.fspath(path), f"a writable file path ({err.strerror})"
            ) from None
        finally:
            plt.close(fig)
    return out


# ------------------------------------------------------------------------------------ sections
@dataclass(frozen=True)
class Section:
    """One section of the report: which rows, what their predictions were made from, and the target.

    Attributes
    ----------
    key : str
        What :func:`section_of` returns for its rows.
    title : str
        The section's heading.
    target : (float, float) or None
        Per scheme, the largest median and largest max absolute relative
        error that meet the target; None: the rows are not evidence of
        accuracy and get no accuracy figure.
    campaign : str
        The command that produces its rows.
    inputs : str
        What the predictions of its rows were made from (Markdown).
    """

    key: str
    title: str
    target: tuple[float, float] | None
    campaign: str
    inputs: str


#: The report's sections, in order. Only the first three are counted in accuracy figures.
SECTIONS: tuple[Section, ...] = (
    Section(
        "real-apriori",
        "Real training, a-priori inputs",
        (0.10, 0.20),
        "python validation/run_apriori.py",
        "Real models trained live (the `workload` column), each predicted *before* it ran from inputs "
        "measured elsewhere: a profile from a separate single-worker profiling run (with concurrent copies "
        "for the core sharing of k workers on this machine), a network calibration from a separate run "
        "made beforehand, and the cluster description (workers, cores). Every row records "
        "`inputs: a-priori`, when its profile and calibration were measured and when the prediction was "
        "made (`predicted_at`).",
    ),
    Section(
        "real-gpu",
        "Real training on one GPU, a-priori inputs",
        (0.10, 0.20),
        "python validation/run_gpu.py",
        "Run on a machine with a CUDA device. DDP on one CUDA device shared by n worker processes (gloo "
        "all-reduces the CUDA buckets through host memory over loopback; NCCL refuses two ranks on one "
        "device), each run predicted *before* it ran from a profile measured on the same device in "
        "separate runs (one worker layer by layer, and k copies in lock step for the sharing of the GPU "
        "by k workers) and an all-reduce calibration of CUDA tensors among n ranks made beforehand at the"
        " sizes of DDP's buckets. Rows record `inputs: a-priori`, `device` and the device's name (the "
        "`cores` column).",
    ),
    Section(
        "emulated-network",
        "Emulated compute on a real network",
        (0.05, 0.15),
        "python validation/run_campaign.py",
        "Compute is a timed wait drawn from the configured law (`compute law` column), replayed on a real "
        "network: network namespaces joined by a bridge with `tc tbf` (`netns-tbf`), or loopback (`none`). "
        "The prediction's inputs come from the same configuration: the compute law is the empirical law of "
        "the compute times measured in the run (the configured law's draws, injected delays subtracted), "
        "the parameter server's update time is measured in the run, and the network is an alpha-beta fit "
        "of timed operations on the same links just before the run. So this section tests the coordination "
        "and network models against a real network, not an a-priori estimate of compute. Rows written "
        "before rows carried an `inputs` field have none; they were made this way "
        "(`queuesgd.harness.campaign.compare_records`).",
    ),
    Section(
        "replay",
        "Model replay (application shaper): the model compared with itself",
        None,
        "python validation/run_campaign.py",
        "The campaign's lines with `network: app` (and every line where the harness cannot make network "
        "namespaces). With the application-level shaper (`app-shaper`) the harness does the real operation "
        "and then "
        "sleeps until the alpha-beta model's time for it (for the PS schemes, the phase model's round); "
        "the compute times and the update time are measured in the same run. The prediction therefore "
        "restates what the harness was told to wait: agreement checks the harness and the solvers' "
        "bookkeeping, not the model's accuracy. These rows get no accuracy figure and are counted in none.",
    ),
    Section(
        "diagnosis",
        "Diagnosis: real training with inputs from the same run",
        None,
        "queuesgd validate --workload mlp|cnn, or python -m queuesgd.harness.torchrun --compare",
        "Real models whose compute law and update time were measured in the run itself "
        "(`inputs: same-run`, or no `inputs` field): a diagnosis of where a model misses, listed and not "
        "counted.",
    ),
)

_SECTION_BY_KEY = {s.key: s for s in SECTIONS}


def section_of(row: Mapping[str, Any]) -> str:
    """The report section of a validation row: ``"real-apriori"``, ``"emulated-network"``, ``"replay"``
    or ``"diagnosis"``.

    - ``emulation == "app-shaper"`` (any workload): ``"replay"``, the network
      time was slept out from the model's own formula;
    - the emulated workload (``workload == "emulated"``, the default when the
      field is missing) on a real network (``emulation`` ``"netns-tbf"`` or
      ``"none"``, or missing on a failed run): ``"emulated-network"``;
    - real training (any other ``workload``) with ``inputs == "a-priori"``:
      ``"real-gpu"`` when it ran on a CUDA ``device``, else ``"real-apriori"``;
    - anything else (real training with ``inputs`` ``"same-run"`` or missing,
      or an emulation this report does not know), and any disturbed run
      (marked ``disturbed``, or whose recorded ``load`` shows that other
      processes and other guests of the host took more than a tenth of the
      machine during it, :func:`queuesgd.harness.load.disturbed`; the
      campaign ran it again): ``"diagnosis"``, never counted.

    Examples
    --------
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "netns-tbf"})
    'real-apriori'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "none", "device": "cuda"})
    'real-gpu'
    >>> section_of({"workload": "emulated", "emulation": "netns-tbf"})
    'emulated-network'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "app-shaper"})
    'replay'
    >>> section_of({"workload": "mlp", "inputs": "same-run", "emulation": "none"})
    'diagnosis'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "none", "disturbed": True})
    'diagnosis'
    >>> section_of({"workload": "mlp", "inputs": "a-priori", "emulation": "netns-tbf",
    ...             "load": {"foreign_share": 0.0, "steal": 0.39}})   # the host gave the CPUs away
    'diagnosis'
    """
    from queuesgd.harness.load import disturbed

    if row.get("disturbed") or disturbed(row.get("load")):
        return "diagnosis"
    emulation = row.get("emulation")
    if emulation == "app-shaper":
        return "replay"
    if (row.get("workload") or "emulated") == "emulated":
        return "emulated-network" if emulation in (None, "netns-tbf", "none") else "diagnosis"
    if row.get("inputs") == "a-priori" and emulation in (None, "netns-tbf", "none"):
        return "real-gpu" if str(row.get("device") or "cpu").startswith("cuda") else "real-apriori"
    return "diagnosis"


def by_section(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The rows grouped by :func:`section_of`, every section present, in the order of :data:`SECTIONS`.

    Examples
    --------
    >>> groups = by_section([{"workload": "emulated", "emulation": "app-shaper"}])
    >>> {k: len(v) for k, v in groups.items()}
    {'real-apriori': 0, 'real-gpu': 0, 'emulated-network': 0, 'replay': 1, 'diagnosis': 0}
    """
    out: dict[str, list[Mapping[str, Any]]] = {s.key: [] for s in SECTIONS}
    for r in rows:
        out[section_of(r)].append(r)
    return out


def target_met(stats: Mapping[str, Any], target: tuple[float, float]) -> bool:
    """Whether one scheme's :func:`summary` entry meets ``(median, max)``: both errors known and within.

    Examples
    --------
    >>> target_met({"median_abs_error": 0.08, "max_abs_error": 0.2}, (0.10, 0.20))
    True
    >>> target_met({"median_abs_error": 0.08, "max_abs_error": 0.21}, (0.10, 0.20))
    False
    """
    med, mx = stats.get("median_abs_error"), stats.get("max_abs_error")
    return med is not None and mx is not None and med <= target[0] and mx <= target[1]


#: Rows further apart than this (or made by other code) belong to different campaign runs.
RUN_GAP_MINUTES = 30.0


def campaign_runs(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The campaign runs a set of rows mixes: one entry per run, its time span and its code version.

    Rows sorted by ``started`` form one run while each starts within
    :data:`RUN_GAP_MINUTES` of the previous one and was made by the same
    code (``commit``; older rows record none).

    Examples
    --------
    >>> rows = [{"started": "2026-11-25T13:20:00+0000"}, {"started": "2026-11-25T13:49:00+0000"},
    ...         {"started": "2026-11-26T15:55:00+0000", "commit": "1f387f7aa"},
    ...         {"started": "2026-11-26T15:59:00+0000", "commit": "2e0000000"}]
    >>> campaign_runs(rows)  # doctest: +NORMALIZE_WHITESPACE
    ['2026-11-25 13:20-13:49 (code not recorded)', '2026-11-26 15:55 (commit 1f387f7)',
     '2026-11-26 15:59 (commit 2e00000)']
    """
    import datetime as dt

    dated = []
    for r in rows:
        try:
            when = dt.datetime.strptime(str(r.get("started")), "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            continue
        dated.append((when, r.get("commit")))
    dated.sort(key=lambda x: x[0])
    runs: list[list[tuple[Any, Any]]] = []
    for when, commit in dated:
        last = runs[-1][-1] if runs else None
        if last and commit == last[1] and (when - last[0]).total_seconds() <= 60 * RUN_GAP_MINUTES:
            runs[-1].append((when, commit))
        else:
            runs.append([(when, commit)])
    out = []
    for run in runs:
        first, end = run[0][0], run[-1][0]
        span = first.strftime("%Y-%m-%d %H:%M")
        if end.strftime("%H:%M") != first.strftime("%H:%M"):
            span += "-" + end.strftime("%H:%M" if end.date() == first.date() else "%Y-%m-%d %H:%M")
        code = f"commit {str(run[0][1])[:7]}" if run[0][1] else "code not recorded"
        out.append(f"{span} ({code})")
    return out


def last_run(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """The latest ``started`` of the rows (ISO strings of one format compare as times), or None."""
    times = [str(r["started"]) for r in rows if r.get("started")]
    return max(times) if times else None


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
    """Every row of one section as a Markdown table with the whole configuration."""
    from queuesgd.units import format_bytes

    last = "difference" if section == "replay" else "error"
    real = section in ("real-apriori", "real-gpu")
    if real:
        out = [
            "| scheme | n | model | batch | gradient | network | parameters | cores | inputs measured "
            "| measured (95% interval) | predicted | method | error |",
            "|---|---:|---|---:|---:|---|---|---:|---|---:|---:|---|---:|",
        ]
    else:
        out = [
            "| scheme | n | workload | gradient | compute law | network | parameters | inputs "
            f"| measured (95% interval) | predicted | method | {last} |",
            "|---|---:|---|---:|---|---|---|---|---:|---:|---|---:|",
        ]
    for r in rows:
        grad = format_bytes(float(r["gradient_bytes"])) if r.get("gradient_bytes") else "-"
        meas, pred, err = _result_cells(r)
        params = ", ".join(f"{k}={v}" for k, v in dict(r.get("params") or {}).items()) or "-"
        if real and r.get("random_delay"):  # the emulated rows show it with the law
            params = f"random delay {r['random_delay']}" + ("" if params == "-" else f"; {params}")
        if real:
            cores = r.get("cores", "-")
            cells = [
                r["scheme"],
                r["workers"],
                r.get("workload", "-"),
                r.get("batch_size", "-"),
                grad,
                _network_text(r),
                params,
                f"{cores}, {r['device_name']}" if r.get("device_name") else cores,
                _inputs_text(r),
            ]
        else:
            cells = [
                r["scheme"],
                r["workers"],
                r.get("workload", "-"),
                grad,
                _law_text(r),
                _network_text(r),
                params,
                r.get("inputs") or "same-run (field absent)",
            ]
        cells += [meas, pred, r.get("method", "-"), err]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(out)


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
    errs = _abs_errors(rows)
    if errs.size:
        lines += [
            "",
            f"All schemes of this section: median {_pct(float(np.median(errs)))}, "
            f"max {_pct(float(np.max(errs)))} over {errs.size} configurations.",
        ]
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
        fidelity, :func:`queuesgd.harness.fidelity_report.fidelity_lines`),
        placed after the sections and before the notes.
    """
    groups = by_section(rows)
    plots = dict(plots or {})
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
        lines += ["", heading, "", f"Inputs: {sec.inputs}", ""]
        runs = campaign_runs(mine)
        lines += [f"Campaign: `{sec.campaign}`; last ran: {last_run(mine) or 'never'}."]
        if len(runs) > 1:
            lines += ["", f"The section mixes {len(runs)} campaign runs: " + "; ".join(runs) + "."]
        if not mine:
            lines += ["", f"No configurations yet: `{sec.campaign}` produces them."]
            continue
        if sec.target is not None:
            lines += [
                "",
                f"Target per scheme: median |error| <= {100 * sec.target[0]:g}% and "
                f"max |error| <= {100 * sec.target[1]:g}%.",
                "",
            ]
            lines += _accuracy_lines(mine, sec.target)
            if plots.get(sec.key):
                lines += [
                    "",
                    f"![{sec.title}: measured against predicted, band ±{100 * sec.target[1]:g}%]"
                    f"({plots[sec.key]})",
                ]
        elif sec.key == "replay":
            lines += [
                "",
                "Not evidence of accuracy: the `difference` column is the model against its own replay.",
            ]
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
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
