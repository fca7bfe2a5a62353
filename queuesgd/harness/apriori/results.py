"""A campaign's figures: per-pass and pooled accuracy of its counted rows, and :class:`CampaignResult`.

:class:`~queuesgd.harness.apriori.Campaign` (:mod:`.campaign`) runs a spec and returns a
:class:`CampaignResult`; these functions only read rows, so a report or a test can judge stored rows
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.harness.apriori.spec import CampaignSpec

__all__ = ["CampaignResult", "figures", "pass_figures"]


def figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counted rows, and their median and max absolute relative error (None without rows).

    Examples
    --------
    >>> figures([{"error": 0.1, "counted": True}, {"error": -0.3, "counted": True},
    ...          {"error": 0.9, "counted": False}])
    {'rows': 2, 'median_abs_error': 0.2, 'max_abs_error': 0.3}
    """
    errs = np.array([abs(float(r["error"])) for r in rows if r.get("counted")], dtype=float)
    return {
        "rows": int(errs.size),
        "median_abs_error": float(np.median(errs)) if errs.size else None,
        "max_abs_error": float(np.max(errs)) if errs.size else None,
    }


def pass_figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every pass's figures and the pooled ones, overall and per scheme (see :func:`figures`).

    Examples
    --------
    >>> rows = [{"pass": 1, "scheme": "ddp", "error": 0.1, "counted": True},
    ...         {"pass": 2, "scheme": "ddp", "error": 0.3, "counted": True}]
    >>> out = pass_figures(rows)
    >>> [p["max_abs_error"] for p in out["passes"]], out["pooled"]["median_abs_error"]
    ([0.1, 0.3], 0.2)
    >>> pass_figures([*rows, {"pass": 2, "scheme": "ddp", "error": 0.9, "counted": False,
    ...                       "discarded": "inputs disturbed"}])["pooled"]["not_counted"]
    {'inputs disturbed': 1}
    """

    def of(mine: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        schemes = dict.fromkeys(r["scheme"] for r in mine)
        reasons = [str(r.get("discarded") or "failed") for r in mine if not r.get("counted")]
        return {
            **figures(mine),
            "not_counted": {k: reasons.count(k) for k in sorted(set(reasons))},
            "by_scheme": {s: figures([r for r in mine if r["scheme"] == s]) for s in schemes},
        }

    numbers = sorted({int(r["pass"]) for r in rows})
    return {
        "passes": [{"pass": p, **of([r for r in rows if r["pass"] == p])} for p in numbers],
        "pooled": of(rows),
    }


@dataclass(frozen=True)
class CampaignResult:
    """Every row of every pass, and the figures: per pass and pooled (targets are judged pooled)."""

    spec: CampaignSpec
    rows: tuple[dict[str, Any], ...]
    out: Path

    def summary(self) -> dict[str, Any]:
        """The campaign's record: its spec's hash, the commits, every pass's figures and the pooled ones."""
        out = pass_figures(self.rows)
        pooled = out["pooled"]

        def met_by(f: Mapping[str, Any]) -> bool | None:
            if self.spec.targets is None or not f["rows"]:
                return None
            med, top = self.spec.targets
            return f["median_abs_error"] <= med and f["max_abs_error"] <= top

        met = met_by(pooled)
        return {
            "campaign": self.spec.name,
            "spec_hash": self.spec.hash,
            "commits": sorted({str(r.get("commit")) for r in self.rows}),
            "passes_registered": self.spec.passes,
            "discard": {
                "rule": self.spec.discard.rule,
                "attempts": self.spec.discard.attempts,
                "inputs": self.spec.discard.inputs,
            },
            "rows": len(self.rows),
            "discarded": sum(1 for r in self.rows if not r.get("counted")),
            **out,
            "targets": None if self.spec.targets is None else dict(zip(("median", "max"), self.spec.targets)),
            "target_met": met,
            "target_met_by_scheme": {k: met_by(f) for k, f in pooled["by_scheme"].items()},
        }

    def table(self) -> str:
        """Per pass and pooled: counted rows, median and max absolute error, one line each."""

        def pct(x: float | None) -> str:
            return "-" if x is None else f"{100 * x:.1f}%"

        s = self.summary()
        lines = [
            f"campaign {s['campaign']} (spec {s['spec_hash'][:12]}): {s['rows']} rows, "
            f"{s['discarded']} not counted"
            + "".join(f"; {k}: {v}" for k, v in s["pooled"]["not_counted"].items())
        ]
        for p in [*s["passes"], {"pass": "pooled", **s["pooled"]}]:
            lines.append(
                f"  pass {p['pass']}: {p['rows']} counted, median {pct(p['median_abs_error'])}, "
                f"max {pct(p['max_abs_error'])}"
                + "".join(
                    f"; {k} {pct(f['median_abs_error'])} / {pct(f['max_abs_error'])}"
                    for k, f in p["by_scheme"].items()
                    if len(p["by_scheme"]) > 1
                )
            )
        if s["target_met"] is not None:
            lines.append(f"  targets (pooled) {'met' if s['target_met'] else 'NOT met'}")
            if len(s["target_met_by_scheme"]) > 1:
                lines.append(
                    "  by scheme: "
                    + ", ".join(
                        f"{k} {'met' if v else 'NOT met'}" for k, v in s["target_met_by_scheme"].items()
                    )
                )
        return "\n".join(lines)
