"""The report's "Preregistered campaigns" table: each spec campaign judged on its own pooled figures.

A campaign run from a spec (``validation/run_apriori.py --spec``) writes
``validation/campaigns/<name>/summary.json`` (every pass's and the pooled
median and max absolute error, per scheme, and the targets) beside its
``spec.json``. The report's per-scheme table of a section pools every row of
the section, superseded models included; this module renders, from those
records only, one row per campaign and scheme (:func:`campaign_lines`), so
that each campaign is read against its own targets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.preregistration import check_registration
from queuesgd.harness.report.sections import short_commit, target_met

__all__ = ["campaign_lines", "purpose", "read_campaigns", "registration_lines"]

#: The longest purpose (first sentence of the spec's description) shown before it is cut at a word.
PURPOSE_CHARS = 160


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def _pair(stats: Mapping[str, Any] | None) -> str:
    """``median / max`` of one scheme's figures, ``-`` where there are none."""
    if not stats:
        return "-"
    return f"{_pct(stats.get('median_abs_error'))} / {_pct(stats.get('max_abs_error'))}"


def purpose(description: str, limit: int = PURPOSE_CHARS) -> str:
    """The first sentence of a spec's description, cut at a word past ``limit`` characters.

    Examples
    --------
    >>> purpose("Held-out DDP on two new models (issue 22). Fixed before anything runs: 2 passes.")
    'Held-out DDP on two new models (issue 22).'
    >>> purpose("A long first sentence about many things", limit=20)
    'A long first...'
    """
    text = " ".join(str(description).split())
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text, maxsplit=1)[0]
    if len(first) <= limit:
        return first
    cut = first[: limit + 1].rsplit(" ", 1)[0].rstrip(",;:-( ")
    return cut + "..."


def _load(path: Path, field: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InvalidParameterError(field, os.fspath(path), f"a readable JSON file ({err})") from None
    if not isinstance(data, dict):
        raise InvalidParameterError(field, os.fspath(path), "a JSON object")
    return data


def read_campaigns(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every ``<folder>/*/summary.json``, in the order the campaigns were registered.

    Each entry is the summary with ``registered`` and ``description`` added
    from the campaign's ``spec.json`` (``None`` where it has none). The order
    is by ``registered`` (the time the spec was preregistered, before any of
    its runs), then by folder name; campaigns without a registration time
    come last, by name.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> for name, when in (("b", "2026-11-26T10:00:00"), ("a", "2026-11-26T11:00:00")):
    ...     (root / name).mkdir()
    ...     _ = (root / name / "summary.json").write_text(json.dumps({"campaign": name}))
    ...     _ = (root / name / "spec.json").write_text(json.dumps({"registered": when, "spec": {}}))
    >>> [c["campaign"] for c in read_campaigns(root)]
    ['b', 'a']
    """
    root = Path(folder)
    if not root.is_dir():
        raise InvalidParameterError("folder", os.fspath(folder), "a folder of campaign folders")
    found = []
    for path in sorted(root.glob("*/summary.json")):
        summary = _load(path, "summary.json")
        spec_path = path.parent / "spec.json"
        spec = _load(spec_path, "spec.json") if spec_path.exists() else {}
        inner = spec.get("spec") if isinstance(spec.get("spec"), Mapping) else {}
        summary.setdefault("campaign", path.parent.name)
        summary["registered"] = spec.get("registered")
        summary["description"] = inner.get("description")
        found.append(summary)
    found.sort(key=lambda s: (s["registered"] is None, str(s["registered"] or ""), str(s["campaign"])))
    return found


def _field(summary: Mapping[str, Any], name: str) -> Any:
    if name not in summary:
        raise InvalidParameterError(
            f"summary.json {name}", None, f"a field of campaign {summary.get('campaign')!r}'s summary"
        )
    return summary[name]


def _rows_of(summary: Mapping[str, Any]) -> list[str]:
    """One table row per scheme of one campaign."""
    name = summary["campaign"]
    pooled = _field(summary, "pooled")
    targets = _field(summary, "targets")
    try:
        target = (float(targets["median"]), float(targets["max"]))
    except (KeyError, TypeError, ValueError):
        raise InvalidParameterError(
            "summary.json targets", targets, "an object with numbers 'median' and 'max'"
        ) from None
    schemes = dict(pooled.get("by_scheme") or {})
    passes = sorted(_field(summary, "passes"), key=lambda p: int(p["pass"]))
    commits = ", ".join(short_commit(c) for c in summary.get("commits") or []) or "-"
    spec_hash = str(summary.get("spec_hash") or "-")[:12]
    wanted = f"<= {100 * target[0]:g}% / <= {100 * target[1]:g}%"
    out = []
    for scheme, stats in schemes.items():
        each = "; ".join(f"{p['pass']}: {_pair((p.get('by_scheme') or {}).get(scheme))}" for p in passes)
        cells = [
            name,
            scheme,
            f"`{spec_hash}`",
            commits,
            summary.get("passes_registered", "-"),
            stats.get("rows", "-"),
            each or "-",
            _pair(stats),
            wanted,
            "yes" if target_met(stats, target) else "no",
        ]
        out.append("| " + " | ".join(str(c) for c in cells) + " |")
    return out


def campaign_lines(
    folder: str | os.PathLike[str],
    rows: Sequence[Mapping[str, Any]] = (),
    specs: str | os.PathLike[str] | None = None,
) -> list[str]:
    """The "Preregistered campaigns" subsection: one row per campaign and scheme, from its summary.

    For every ``<folder>/*/summary.json`` (in the order of
    :func:`read_campaigns`: by the spec's registration time, then by name):
    the campaign, the scheme, the spec's hash (12 characters), the commits
    its rows record (7 characters), the passes registered, the rows counted,
    each pass's and the pooled median / max absolute error, the targets and
    whether the pooled figures meet them (median and max both within); below
    the table, each campaign's purpose (the first sentence of its spec's
    description, :func:`purpose`).
    No lines where the folder holds no summary.

    Parameters
    ----------
    folder : path-like
        The folder of campaign folders (``validation/campaigns``).
    rows : sequence of dict
        The validation rows (the campaigns' among them, told by their ``spec_hash``).
    specs : path-like, optional
        The folder of the committed specs (``validation/specs``, in the git
        repository): campaign ``NAME``'s spec is ``NAME.json`` there.

    Returns
    -------
    list of str
        Markdown lines, starting with the heading ``### Preregistered campaigns``.

    Raises
    ------
    InvalidParameterError
        If ``folder`` is not a folder, or a summary lacks ``pooled``,
        ``passes`` or ``targets``.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "demo").mkdir()
    >>> pass1 = {"median_abs_error": 0.026, "max_abs_error": 0.115}
    >>> summary = {"campaign": "demo", "spec_hash": "ab" * 32, "commits": ["0123456789ab"],
    ...            "passes_registered": 1, "passes": [{"pass": 1, "by_scheme": {"ddp": pass1}}],
    ...            "pooled": {"by_scheme": {"ddp": dict(pass1, rows=6)}},
    ...            "targets": {"median": 0.1, "max": 0.2}}
    >>> _ = (root / "demo" / "summary.json").write_text(json.dumps(summary))
    >>> print(campaign_lines(root)[-1])
    | demo | ddp | `abababababab` | 0123456 | 1 | 6 | 1: 2.6% / 11.5% | 2.6% / 11.5% | <= 10% / <= 20% | yes |
    """
    campaigns = read_campaigns(folder)
    if not campaigns:
        return []
    lines = [
        "### Preregistered campaigns",
        "",
        "These are the campaigns preregistered from specs (`validation/campaigns/*/summary.json`, "
        "in the order they were registered), each judged on its own pooled figures (all its passes, "
        "per scheme); the per-scheme lines above pool every campaign's rows of this section, superseded "
        "models included.",
        "",
    ]
    lines += [
        "| campaign | scheme | spec | commits | passes registered | rows counted "
        "| per pass: median / max | pooled: median / max | target | met |",
        "|---|---|---|---|---:|---:|---|---|---|---|",
    ]
    for summary in campaigns:
        lines += _rows_of(summary)
    purposes = [f"- `{c['campaign']}`: {purpose(c['description'])}" for c in campaigns if c["description"]]
    if purposes:
        lines += [
            "",
            "What each campaign is for (the first sentence of its spec's description):",
            "",
            *purposes,
        ]
    if specs is not None:
        lines += ["", *registration_lines(campaigns, rows, specs)]
    return lines


def registration_lines(
    campaigns: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    specs: str | os.PathLike[str],
) -> list[str]:
    """Whether each campaign's spec was committed before its first row, checked against the git history.

    Per campaign (a summary of :func:`read_campaigns`), its rows are those
    recording its ``spec_hash``, and its spec is ``<specs>/<campaign>.json``;
    the line is :meth:`~queuesgd.harness.preregistration.Registration.describe`
    of :func:`~queuesgd.harness.preregistration.check_registration`: the
    spec's first commit with that hash and its time, and the rows' first
    time; "not checked (no history)" where git or the history is missing.

    Examples
    --------
    >>> import tempfile
    >>> rows = [{"spec_hash": "ab" * 32, "started": "2026-11-26T21:10:32+0000"}]
    >>> registration_lines([{"campaign": "demo", "spec_hash": "ab" * 32}], rows, tempfile.mkdtemp())[-1]
    '- `demo`: not checked (no history)'
    """
    lines = [
        "Preregistration, checked against the git history (`queuesgd.harness.preregistration`): the first "
        "commit in which `validation/specs/<campaign>.json` has the hash the campaign's rows record, against "
        "the earliest time the rows record (an input measured, a prediction made, a run started).",
        "",
    ]
    for summary in campaigns:
        wanted = summary.get("spec_hash")
        mine = [r for r in rows if wanted and r.get("spec_hash") == wanted]
        name = str(summary["campaign"])
        if not mine:
            lines.append(f"- `{name}`: not checked (no row records its spec's hash)")
            continue
        found = check_registration(specs, Path(specs) / f"{name}.json", mine)
        lines.append(f"- `{name}`: {found.describe()}")
    return lines
