"""The report's "Preregistered campaigns" table (queuesgd.harness.report.campaigns).

Every committed campaign's figures are recomputed here from its stored rows
(validation/results/<campaign>-*.json), independently of its summary.json,
and compared with what the table shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.report import read_rows, write_report
from queuesgd.harness.report.campaigns import campaign_lines, purpose, read_campaigns

VALIDATION = Path(__file__).resolve().parents[2] / "validation"
CAMPAIGNS = VALIDATION / "campaigns"
NAMES = sorted(p.parent.name for p in CAMPAIGNS.glob("*/summary.json"))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _table(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    """The table's rows keyed by (campaign, scheme), each as its list of cells."""
    rows = {}
    for line in lines:
        if line.startswith("| ") and not line.startswith("| campaign |"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[(cells[0], cells[1])] = cells
    return rows


def _counted(name: str) -> list[dict]:
    """The campaign's counted rows with an error, from its result files (not from summary.json).

    The glob ``parallel-*`` also matches ``parallel-heldout-*``: each row names its campaign.
    """
    rows = [
        r
        for path in sorted((VALIDATION / "results").glob(f"{name}-*.json"))
        for r in read_rows(path)
        if r.get("campaign") == name
    ]
    return [r for r in rows if r.get("counted") is not False and r.get("error") is not None]


def test_there_are_committed_campaigns():
    assert len(NAMES) >= 6 and "parallel" in NAMES and "parallel-heldout" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_campaign_row_shows_the_figures_of_its_own_rows(name):
    table = _table(campaign_lines(CAMPAIGNS))
    spec = json.loads((CAMPAIGNS / name / "spec.json").read_text())
    counted = _counted(name)
    assert counted, name
    schemes = sorted({r["scheme"] for r in counted})
    assert sorted(s for (c, s) in table if c == name) == schemes
    passes = sorted({int(r["pass"]) for r in counted})
    for scheme in schemes:
        mine = [r for r in counted if r["scheme"] == scheme]
        errs = np.abs([r["error"] for r in mine])
        cells = table[(name, scheme)]
        _, _, spec_hash, commits, n_passes, n_rows, each, pooled, target, met = cells
        assert spec_hash == f"`{spec['hash'][:12]}`"
        assert n_rows == str(len(mine))
        assert n_passes == str(spec["spec"]["passes"])
        assert pooled == f"{_pct(np.median(errs))} / {_pct(errs.max())}"
        expect = []
        for p in passes:
            e = np.abs([r["error"] for r in mine if int(r["pass"]) == p])
            expect.append(f"{p}: {_pct(np.median(e))} / {_pct(e.max())}" if e.size else f"{p}: -")
        assert each == "; ".join(expect)
        # The targets the spec registered, and the verdict on the pooled figures.
        tmed, tmax = spec["spec"]["targets"]["median"], spec["spec"]["targets"]["max"]
        assert target == f"<= {100 * tmed:g}% / <= {100 * tmax:g}%"
        assert met == ("yes" if np.median(errs) <= tmed and errs.max() <= tmax else "no")
    # Every commit the campaign's rows record (counted or not), shortened to 7 characters.
    every = {
        r["commit"]
        for path in (VALIDATION / "results").glob(f"{name}-*.json")
        for r in read_rows(path)
        if r.get("campaign") == name and r.get("commit")
    }
    shown = set(table[(name, schemes[0])][3].split(", "))
    assert shown == {c.split("+")[0][:7] + ("+dirty" if c.endswith("+dirty") else "") for c in every}


def test_campaigns_in_the_order_they_were_registered():
    registered = {n: json.loads((CAMPAIGNS / n / "spec.json").read_text())["registered"] for n in NAMES}
    order = [c["campaign"] for c in read_campaigns(CAMPAIGNS)]
    assert order == sorted(NAMES, key=lambda n: registered[n])
    # parallel (20:34) was registered before apriori-rerun (20:55), though its name sorts after.
    assert order.index("parallel") < order.index("apriori-rerun")
    table = list(_table(campaign_lines(CAMPAIGNS)))
    assert [c for i, (c, _) in enumerate(table) if i == 0 or table[i - 1][0] != c] == order


def _write(root: Path, name: str, summary: dict, spec: dict | None = None) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "summary.json").write_text(json.dumps(summary))
    if spec is not None:
        (root / name / "spec.json").write_text(json.dumps(spec))


SYNTHETIC = {
    "campaign": "demo",
    "spec_hash": "0123456789abcdef" * 4,
    "commits": ["fedcba9876543210", "aaaaaaaaaaaa+dirty"],
    "passes_registered": 2,
    "rows": 5,
    "discarded": 0,
    # Pass 2 is listed first: the table orders passes by number. Pass 2 has no pipeline row.
    "passes": [
        {"pass": 2, "by_scheme": {"ddp": {"rows": 2, "median_abs_error": 0.03, "max_abs_error": 0.04}}},
        {
            "pass": 1,
            "by_scheme": {
                "ddp": {"rows": 2, "median_abs_error": 0.026, "max_abs_error": 0.115},
                "pipeline": {"rows": 1, "median_abs_error": 0.25, "max_abs_error": 0.25},
            },
        },
    ],
    "pooled": {
        "rows": 5,
        "by_scheme": {
            "ddp": {"rows": 4, "median_abs_error": 0.1, "max_abs_error": 0.115},
            "pipeline": {"rows": 1, "median_abs_error": 0.25, "max_abs_error": 0.25},
        },
    },
    "targets": {"median": 0.1, "max": 0.2},
}


def test_a_synthetic_summary_renders_as_written_by_hand(tmp_path):
    spec = {
        "registered": "2026-11-26T10:00:00+00:00",
        "spec": {"description": "A demo campaign (issue 0). Fixed before anything runs: 2 passes."},
    }
    _write(tmp_path, "demo", SYNTHETIC, spec)
    lines = campaign_lines(tmp_path)
    assert lines[0] == "### Preregistered campaigns"
    assert "superseded models included" in lines[2]
    assert lines[-1] == "- `demo`: A demo campaign (issue 0)."
    rows = [line for line in lines if line.startswith("| demo |")]
    # ddp: median exactly at the 10% target counts as met.
    assert rows == [
        "| demo | ddp | `0123456789ab` | fedcba9, aaaaaaa+dirty | 2 | 4 | 1: 2.6% / 11.5%; 2: 3.0% / 4.0% "
        "| 10.0% / 11.5% | <= 10% / <= 20% | yes |",
        "| demo | pipeline | `0123456789ab` | fedcba9, aaaaaaa+dirty | 2 | 1 | 1: 25.0% / 25.0%; 2: - "
        "| 25.0% / 25.0% | <= 10% / <= 20% | no |",
    ]


def test_the_report_places_the_table_in_section_one(tmp_path):
    _write(tmp_path / "campaigns", "demo", SYNTHETIC)
    row = {
        "scheme": "ddp",
        "workers": 2,
        "workload": "cnn",
        "inputs": "a-priori",
        "emulation": "netns-tbf",
        "measured": 100.0,
        "predicted": 104.0,
        "error": 0.04,
    }
    text = write_report([row], tmp_path / "REPORT.md", machine="test").read_text()
    start = text.index("## 1. Real training, a-priori inputs")
    table = text.index("### Preregistered campaigns")
    rows = text.index("### Every configuration: real training, a-priori inputs")
    assert start < text.index("Campaign: ", start) < table < rows < text.index("## 2.")
    assert text.count("### Preregistered campaigns") == 1
    # Without a campaigns folder beside the report, no such subsection.
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert "Preregistered campaigns" not in write_report([row], other / "R.md", machine="t").read_text()


def test_bad_input_names_the_field(tmp_path):
    with pytest.raises(InvalidParameterError, match="folder"):
        campaign_lines(tmp_path / "missing")
    assert campaign_lines(tmp_path) == []
    broken = {k: v for k, v in SYNTHETIC.items() if k != "pooled"}
    _write(tmp_path, "demo", broken)
    with pytest.raises(InvalidParameterError, match="summary.json pooled"):
        campaign_lines(tmp_path)


def test_purpose_is_the_first_sentence_cut_at_a_word():
    assert purpose("One. Two.") == "One."
    assert purpose("e.g. lower case does not end it. Next.") == "e.g. lower case does not end it."
    # 'abcd efgh ijkl' cut past 10 characters at a word: 'abcd efgh' then the ellipsis.
    assert purpose("abcd efgh ijkl mnop", limit=10) == "abcd efgh..."
