"""The validation report: sections, accuracy figures, committed plots, and the docs' scheme table."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from queuesgd.harness.report import (
    SECTIONS,
    by_section,
    last_run,
    plot_rows,
    section_of,
    summary,
    target_met,
    write_report,
)

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = ROOT / "validation"

# Every method name a queuesgd scheme offers (a word in the docs' table is one of these, or prose).
METHODS = {"closed_form", "coarse", "ctmc", "fine", "fine+overlap", "mva", "simulate"}


def _row(scheme, workers, error, *, workload="emulated", emulation="netns-tbf", inputs=None, started=None):
    measured = 100.0 * workers
    row = {
        "scheme": scheme,
        "workers": workers,
        "workload": workload,
        "emulation": emulation,
        "bandwidth": 125e6,
        "measured": measured,
        "measured_low": measured - 1.0,
        "measured_high": measured + 1.0,
        "predicted": measured * (1.0 + error),
        "error": error,
        "method": "simulate",
        "started": started or "2026-11-20T10:00:00+0000",
    }
    if inputs is not None:
        row["inputs"] = inputs
    return row


# ---- classification ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "section"),
    [
        ({"workload": "cnn", "inputs": "a-priori", "emulation": "netns-tbf"}, "real-apriori"),
        ({"workload": "resnet18s", "inputs": "a-priori", "emulation": "none"}, "real-apriori"),
        (
            {"workload": "resnet18s", "inputs": "a-priori", "emulation": "none", "device": "cpu"},
            "real-apriori",
        ),
        ({"workload": "mlp", "inputs": "a-priori", "emulation": "none", "device": "cuda"}, "real-gpu"),
        ({"workload": "mlp", "inputs": "a-priori", "emulation": "none", "device": "cuda:1"}, "real-gpu"),
        # a GPU run with same-run inputs is a diagnosis like any other
        ({"workload": "mlp", "inputs": "same-run", "emulation": "none", "device": "cuda"}, "diagnosis"),
        ({"workload": "emulated", "emulation": "netns-tbf"}, "emulated-network"),
        ({"workload": "emulated", "emulation": "none"}, "emulated-network"),
        # an old emulated row: no inputs field, same-run compute; the network decides
        (
            {"workload": "emulated", "emulation": "netns-tbf", "straggler": "lognormal:0.3"},
            "emulated-network",
        ),
        ({"workload": "emulated", "emulation": "app-shaper"}, "replay"),
        # the shaper makes any row a replay, a-priori inputs or not
        ({"workload": "mlp", "inputs": "a-priori", "emulation": "app-shaper"}, "replay"),
        ({"workload": "mlp", "inputs": "same-run", "emulation": "none"}, "diagnosis"),
        ({"workload": "cnn", "emulation": "netns-tbf"}, "diagnosis"),  # real, inputs missing
        # a failed emulated run has no emulation field: still its section, with no error to count
        ({"workload": "emulated", "measured": None, "error": None}, "emulated-network"),
    ],
)
def test_section_of_hand_made_rows(fields, section):
    assert section_of(fields) == section


def _campaign_row(spec_path: Path, load: dict) -> dict:
    """A row as the spec's campaign records it (Campaign.attempts): a run whose machine had ``load``."""
    from queuesgd.harness.apriori import Campaign

    campaign = Campaign(spec_path)
    c = campaign.spec.configurations()[0]
    row = {"scheme": c.scheme, "workers": c.workers, "workload": "resnet18s", "inputs": "a-priori",
           "emulation": "none", "device": campaign.spec.device, "measured": 100.0, "predicted": 95.0,
           "error": -0.05, "load": load}  # fmt: skip
    (out,) = campaign.attempts(c, {"predicted": 95.0}, "0", 1, lambda line: None, lambda: dict(row), "x")
    return out


def test_a_spec_campaigns_row_is_set_aside_by_its_registered_rule_alone(tmp_path):
    """validation/specs/gpu.json registers ``"rule": "none"``: a run with 30% of the machine taken by
    others stays counted there and in the report (it went to the diagnosis by the report's own 10% rule,
    a discard decided after the run). Under a spec registering ``"disturbed"`` at 10% the same run is
    not counted, and a row of no spec campaign with that load is still set aside by the 10% default."""
    busy = {"foreign_share": 0.3, "steal": 0.0}
    kept = _campaign_row(VALIDATION / "specs" / "gpu.json", busy)
    assert kept["campaign"] == "gpu" and kept["counted"] is True and kept["disturbed"] is True
    assert section_of(kept) == "real-gpu"

    doc = json.loads((VALIDATION / "specs" / "gpu.json").read_text())
    doc["discard"] = {"rule": "disturbed", "attempts": 1, "limit": 0.1}
    (tmp_path / "strict.json").write_text(json.dumps(doc))
    dropped = _campaign_row(tmp_path / "strict.json", busy)
    assert (dropped["counted"], dropped["discarded"]) == (False, "disturbed")
    assert section_of(dropped) == "diagnosis"

    loose = {k: v for k, v in kept.items() if k not in ("spec_hash", "campaign", "counted", "disturbed")}
    assert section_of(loose) == "diagnosis"
    assert section_of({**loose, "load": {"foreign_share": 0.05, "steal": 0.0}}) == "real-gpu"


def test_sections_are_in_report_order_and_only_three_are_counted():
    assert [s.key for s in SECTIONS] == [
        "real-apriori",
        "real-gpu",
        "emulated-network",
        "replay",
        "diagnosis",
    ]
    targets = {s.key: s.target for s in SECTIONS}
    assert targets == {
        "real-apriori": (0.10, 0.20),
        "real-gpu": (0.10, 0.20),
        "emulated-network": (0.05, 0.15),
        "replay": None,
        "diagnosis": None,
    }


def test_target_met_at_the_bounds():
    assert target_met({"median_abs_error": 0.10, "max_abs_error": 0.20}, (0.10, 0.20))
    assert not target_met({"median_abs_error": 0.1001, "max_abs_error": 0.05}, (0.10, 0.20))
    assert not target_met({"median_abs_error": None, "max_abs_error": None}, (0.10, 0.20))


# ---- the report ----------------------------------------------------------------------------------


def _hand_rows():
    apriori = [
        _row("ddp", n, e, workload="cnn", inputs="a-priori", started=f"2026-11-24T2{i}:00:00+0000")
        for i, (n, e) in enumerate([(1, 0.07), (2, -0.13), (4, -0.02), (8, 0.19)])
    ]
    emulated = [
        _row("sync-ps", 2, -0.011, started="2026-11-22T04:15:41+0000"),
        _row("sync-ps", 4, -0.028),
        _row("sync-ps", 8, -0.063),
        _row("async-ps", 2, 0.02),
        _row("async-ps", 4, 0.09),
    ]
    replay = [
        _row("eager-sgd", n, 0.03, emulation="app-shaper", started="2026-11-23T00:00:00+0000") for n in (2, 4)
    ]
    replay[0].update(straggler="delay:1:50ms", random_delay=None)
    diagnosis = [_row("ring-allreduce", 2, 0.43, workload="mlp", inputs="same-run", emulation="none")]
    return apriori, emulated, replay, diagnosis


def _gpu_rows():
    rows = [
        _row(
            "ddp",
            n,
            e,
            workload="mlp",
            inputs="a-priori",
            emulation="none",
            started=f"2026-11-26T06:2{n}:00+0000",
        )
        for n, e in [(1, -0.05), (2, 0.12), (4, -0.21)]
    ]
    for r in rows:
        r.update(device="cuda", device_name="Test GPU", cores=16)
    return rows


def _section_text(text, number_or_title):
    """The Markdown of one '## ' section of the report."""
    parts = re.split(r"^## ", text, flags=re.M)
    (part,) = [p for p in parts if p.startswith(number_or_title)]
    return part


def _accuracy(part):
    """scheme -> (configurations, median %, max %, met) from a section's accuracy table."""
    out = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[2].endswith("%") and cells[4] in ("yes", "no"):
            out[cells[0]] = (int(cells[1].split()[0]), float(cells[2][:-1]), float(cells[3][:-1]), cells[4])
    return out


def test_report_sections_medians_and_targets(tmp_path):
    apriori, emulated, replay, diagnosis = _hand_rows()
    rows = replay + emulated + diagnosis + apriori  # any order in: the report orders the sections
    groups = by_section(rows)
    gpu = _gpu_rows()
    rows += gpu
    groups = by_section(rows)
    assert [
        len(groups[k]) for k in ("real-apriori", "real-gpu", "emulated-network", "replay", "diagnosis")
    ] == [
        4,
        3,
        5,
        2,
        1,
    ]
    path = write_report(rows, tmp_path / "REPORT.md", machine="test", plots={"real-apriori": "a.svg"})
    text = path.read_text()
    heads = re.findall(r"^## (.*)$", text, flags=re.M)
    assert heads[:4] == [
        "1. Real training, a-priori inputs",
        "2. Real training on one GPU, a-priori inputs",
        "3. Emulated compute on a real network (a diagnosis: compute from the same run)",
        "4. Model replay (application shaper): the model compared with itself",
    ]
    assert heads[4].startswith("Diagnosis")

    # One GPU: |errors| 0.05, 0.12, 0.21 -> median 12%, max 21%: not met; the device's name is shown.
    part = _section_text(text, "2.")
    assert _accuracy(part) == {"ddp": (3, 12.0, 21.0, "no")}
    assert "| 16, Test GPU |" in part and "last ran: 2026-11-26T06:24:00+0000" in part
    assert "Test GPU" not in _section_text(text, "1.")

    # Real training, a-priori: |errors| 0.07, 0.13, 0.02, 0.19 -> median 0.10, max 0.19: met (<= 10%, 20%).
    acc = _accuracy(_section_text(text, "1."))
    med = statistics.median(abs(r["error"]) for r in apriori)
    assert acc == {"ddp": (4, round(100 * med, 1), 19.0, "yes")}
    assert "![" in _section_text(text, "1.") and "(a.svg)" in text
    assert "last ran: 2026-11-24T23:00:00+0000" in _section_text(text, "1.")

    # Emulated network: per scheme against the 5% / 15% target.
    acc = _accuracy(_section_text(text, "3."))
    sync = [abs(r["error"]) for r in emulated if r["scheme"] == "sync-ps"]
    asyn = [abs(r["error"]) for r in emulated if r["scheme"] == "async-ps"]
    assert acc["sync-ps"] == (3, round(100 * statistics.median(sync), 1), 6.3, "yes")
    assert acc["async-ps"] == (2, round(100 * statistics.median(asyn), 1), 9.0, "no")  # median 5.5% > 5%
    all_emulated = statistics.median(abs(r["error"]) for r in emulated)
    assert f"median {100 * all_emulated:.1f}%, max 9.0% over 5 configurations" in _section_text(text, "3.")
    assert "last ran: 2026-11-22T04:15:41+0000" in _section_text(text, "3.")

    # Replay: the rows, and no accuracy figure at all; the old straggler spelling in the current syntax.
    part = _section_text(text, "4.")
    assert _accuracy(part) == {}
    assert "median" not in part and "target met" not in part
    assert "random delay 1:50ms" in part and "delay:1:50ms" not in part
    assert part.count("| eager-sgd |") == 2
    # The diagnosis rows are listed, not counted.
    part = _section_text(text, "Diagnosis")
    assert "| ring-allreduce | 2 |" in part and _accuracy(part) == {}
    # No replay or diagnosis row enters a counted table.
    counted = _section_text(text, "1.") + _section_text(text, "2.") + _section_text(text, "3.")
    assert "eager-sgd" not in counted and "+43.0%" not in counted


def test_an_empty_section_says_which_campaign_fills_it(tmp_path):
    _, emulated, _, _ = _hand_rows()
    text = write_report(emulated, tmp_path / "REPORT.md", machine="test").read_text()
    part = _section_text(text, "1.")
    assert "No configurations yet: `python validation/run_apriori.py` produces them." in part
    assert "last ran: never" in part
    assert "Diagnosis" not in text  # no diagnosis rows, no section
    assert "No configurations yet: `python validation/run_gpu.py" in _section_text(text, "2.")
    assert "## 4." in text and "No configurations yet" in _section_text(text, "4.")


def test_summary_and_last_run_by_hand():
    rows = [_row("a", 2, 0.01), _row("a", 4, -0.05, started="2026-11-25T00:00:00+0000"), _row("b", 2, 0.2)]
    rows.append({**_row("a", 8, 0.0), "measured": None, "predicted": None, "error": None})
    s = summary(rows)
    assert s["a"] == {
        "configurations": 3,
        "median_abs_error": pytest.approx(statistics.median([0.01, 0.05]), abs=1e-6),  # rounded to 6 places
        "max_abs_error": 0.05,
    }
    assert last_run(rows) == "2026-11-25T00:00:00+0000"
    assert last_run([{"scheme": "a"}]) is None


def test_svg_plot_is_deterministic(tmp_path):
    pytest.importorskip("matplotlib")
    apriori, emulated, _, _ = _hand_rows()
    a = plot_rows(apriori + emulated, tmp_path / "a.svg", band=0.2)
    b = plot_rows(apriori + emulated, tmp_path / "b.svg", band=0.2)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes().lstrip().startswith(b"<?xml")
    assert b"<dc:date>" not in a.read_bytes()


# ---- the committed report and docs ---------------------------------------------------------------


def _tracked():
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # pragma: no cover - not a git checkout
        pytest.skip("not a git checkout")
    return set(out.splitlines())


def test_every_image_of_the_report_is_a_tracked_file():
    text = (VALIDATION / "REPORT.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert links, "the report shows its plots"
    tracked = _tracked()
    for link in links:
        target = (VALIDATION / link).resolve()
        assert target.is_file(), link
        assert target.relative_to(ROOT).as_posix() in tracked, f"{link} is not committed"


def test_committed_report_has_no_accuracy_figure_for_the_replay():
    text = (VALIDATION / "REPORT.md").read_text()
    assert _accuracy(_section_text(text, "4. Model replay")) == {}
    assert "delay:1:50ms" not in text  # the straggler spelling that random delays replaced


def _docs_methods():
    """Scheme -> method names in docs/validation.md's table 'Schemes run live'."""
    text = (ROOT / "docs" / "validation.md").read_text()
    table = text.split("## Schemes run live", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        scheme = re.match(r"`([a-z-]+)`", cells[0]).group(1)
        out[scheme] = {w for w in re.findall(r"`([a-z_+]+)`", cells[-1]) if w in METHODS}
    return out


def test_docs_scheme_table_names_the_methods_that_ran():
    documented = _docs_methods()
    assert documented["sync-ps"] == {"fine", "closed_form"}
    assert documented["async-ps"] == {"simulate"}
    ran: dict[str, set[str]] = {}
    for path in sorted((VALIDATION / "results").glob("*.json")):
        for row in json.loads(path.read_text()):
            if row.get("method"):
                ran.setdefault(row["scheme"], set()).add(row["method"])
    assert ran, "validation/results holds the campaign's rows"
    for scheme, methods in ran.items():
        assert scheme in documented, f"{scheme} ran but is not in the table"
        assert methods == documented[scheme], scheme
    # sync-ps: fine on a real network, the closed form with the shaper, as the table says.
    for path in sorted((VALIDATION / "results").glob("sync-ps-*.json")):
        for row in json.loads(path.read_text()):
            assert row["method"] == ("closed_form" if row["emulation"] == "app-shaper" else "fine")


def test_a_priori_sections_count_the_rows_whose_inputs_are_kept(tmp_path):
    rows = [
        {"scheme": "ddp", "workers": w, "workload": "cnn", "inputs": "a-priori", "emulation": "netns-tbf",
         "measured": 100.0, "predicted": 100.0 * (1 + e), "error": e,
         "started": f"2026-11-26T1{w}:00:00+0000"}
        for w, e in ((1, 0.01), (2, -0.02), (4, 0.03))
    ]  # fmt: skip
    text = write_report(
        rows, tmp_path / "R.md", machine="test", rebuildable=lambda r: r["workers"] != 2
    ).read_text()
    assert "Inputs committed: 2 of 3 rows" in text
    # three rows hours apart: three campaign runs, none with its code recorded
    assert "mixes 3 campaign runs" in text and text.count("code not recorded") == 3
