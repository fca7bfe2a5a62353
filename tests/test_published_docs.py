"""docs/published.md is written by hand: its tables must say what the stored records hold, row by row.

The records (``validation/published/published.json`` and ``heldout.json``) are recomputed exactly by
tests/test_published.py and tests/test_published_heldout.py; this test keeps the page from drifting
from them after a model change regenerates them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "published.md").read_text()
PUBLISHED = json.loads((ROOT / "validation" / "published" / "published.json").read_text())
HELDOUT = json.loads((ROOT / "validation" / "published" / "heldout.json").read_text())


def table(header: str) -> list[list[str]]:
    """The cells of the table that starts with ``header`` (the first such table on the page)."""
    lines = PAGE[PAGE.index(header) :].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def number(cell: str) -> float:
    return float(cell.replace("%", "").replace("**", "").split()[0])


def test_the_sc21_and_horovod_table_is_the_stored_record():
    rows = table("| series | row | measured | predicted | error |")
    assert len(rows) == len(PUBLISHED["rows"])
    for cells, r in zip(rows, PUBLISHED["rows"]):
        assert cells[0] == r["series"] and cells[1].startswith(r["name"])
        assert number(cells[3]) == pytest.approx(r["predicted"], rel=5e-4)  # printed to 4 digits
        assert number(cells[4]) == pytest.approx(r["error_pct"], abs=0.051)


def test_the_held_out_tables_are_the_stored_record():
    rows = table("| series | row | tier | measured | predicted | error |")
    assert len(rows) == len(HELDOUT["points"])
    for cells, p in zip(rows, HELDOUT["points"]):
        assert cells[0] == p["series"] and cells[2] == p["tier"]
        assert number(cells[3]) == pytest.approx(p["measured"], rel=1e-9)
        assert number(cells[4]) == pytest.approx(p["predicted"], rel=5e-4)
        assert number(cells[5]) == pytest.approx(p["error_pct"], abs=0.051)
    summary = table("| series | points | median \\|error\\| | max \\|error\\| | within 15% |")
    series = HELDOUT["summary"]["series"]
    assert [c[0] for c in summary[:-1]] == list(series)
    for cells, s in zip(summary, [*series.values(), HELDOUT["summary"]["pooled"]]):
        assert int(cells[1]) == s["rows"] and int(cells[4]) == s["within_15"]
        assert number(cells[2]) == pytest.approx(s["median_abs_pct"], abs=0.051)
        assert number(cells[3]) == pytest.approx(s["max_abs_pct"], abs=0.051)


def test_the_pooled_sentences_are_the_stored_summaries():
    text = " ".join(PAGE.split())  # the page's line breaks fall anywhere in a sentence
    p = PUBLISHED["summary"]["pooled"]
    m, x, n = p["median_abs_pct"], p["max_abs_pct"], p["within_15"]
    assert f"median |error| {m:.1f}%, max {x:.1f}%, {n} within 15%" in text
    h = HELDOUT["summary"]["pooled"]
    assert f"is **{h['median_abs_pct']:.1f}%** and the max **{h['max_abs_pct']:.1f}%**" in text


def test_the_h100_tables_are_the_stored_record():
    h100 = json.loads((ROOT / "validation" / "published" / "h100.json").read_text())
    rows = table("| size | t/p/d | GPUs | batch | chosen b / v / recompute |")
    assert len(rows) == len(h100["megatron-core-weak"]["rows"])
    for cells, r in zip(rows, h100["megatron-core-weak"]["rows"]):
        c = r["chosen"]
        assert cells[0] == r["size"] and cells[1] == f"{r['tp']}/{r['pp']}/{r['dp']}"
        assert cells[4] == f"{c['microbatch']} / {c['virtual_stages']} / {c['recompute'] or 'none'}"
        assert number(cells[6]) == pytest.approx(r["predicted_tflops"], abs=0.05)
        assert number(cells[7]) == pytest.approx(r["error_pct"], abs=0.05)
        assert number(cells[8]) == pytest.approx(r["without_overlaps_pct"], abs=0.05)
    titan = table("| row | measured tokens/s/GPU | predicted | error |")
    for cells, r in zip(titan, h100["torchtitan-asynctp"]["rows"], strict=True):
        assert cells[0] == r["row"] and number(cells[2]) == pytest.approx(r["predicted_tps"], abs=0.05)
        assert number(cells[3]) == pytest.approx(r["error_pct"], abs=0.05)
    s = h100["megatron-core-weak"]["summary"]
    assert f"median\n{s['median_abs_pct']:.1f}%, max {s['max_abs_pct']:.1f}%" in PAGE


def test_the_llmfoundry_summary_is_the_stored_record():
    foundry = json.loads((ROOT / "validation" / "published" / "llmfoundry.json").read_text())
    h, a = foundry["h100"], foundry["a100"]
    expected = [h["summary"], h["unanchored"], h["without_overlap"], a["summary"], a["without_overlap"]]
    rows = table("| series | rows | median \\|error\\| | max \\|error\\| | within 15% |")
    assert len(rows) == len(expected)
    for cells, s in zip(rows, expected, strict=True):
        assert int(cells[1]) == s["rows"] and int(cells[4]) == s["within_15"]
        assert number(cells[2]) == pytest.approx(s["median_abs_pct"], abs=0.05)
        assert number(cells[3]) == pytest.approx(s["max_abs_pct"], abs=0.05)
    assert f"factor {h['factor']:.4f}" in rows[0][0]
    split = table("| split | group | H100, one anchor | H100, unanchored | A100 |")
    for cells in split:
        sources = (h["breakdown"], h["unanchored_breakdown"], a["breakdown"])
        for cell, src in zip(cells[2:], sources, strict=True):
            acc = src[cells[0]][cells[1]]
            n, rest = cell.split(": ")
            median, most = (number(x) for x in rest.split(" / "))
            assert int(n) == acc["rows"]
            assert (median, most) == pytest.approx((acc["median_abs_pct"], acc["max_abs_pct"]), abs=0.05)


def test_the_glance_table_is_every_stored_summary():
    stored = {
        name: json.loads((ROOT / "validation" / "published" / f"{name}.json").read_text())
        for name in ("torchtitan", "h100", "llmfoundry", "llmfoundry-h100old", "microbatch", "dgxc", "grok")
    }
    summaries = [
        PUBLISHED["summary"]["pooled"],
        HELDOUT["summary"]["pooled"],
        stored["torchtitan"]["summary"],
        stored["h100"]["megatron-core-weak"]["summary"],
        stored["h100"]["torchtitan-asynctp"]["summary"],
        stored["llmfoundry"]["h100"]["summary"],
        stored["llmfoundry"]["a100"]["summary"],
        stored["llmfoundry-h100old"]["summary"],
        stored["microbatch"]["accuracy"]["hidden"]["all"],
        stored["microbatch"]["accuracy"]["post"]["all"],
        stored["dgxc"]["summary"],
        stored["grok"]["summary"],
    ]
    rows = table("| test | GPUs | rows | anchor | median \\|error\\| | max \\|error\\| |")
    assert len(rows) == len(summaries)
    for cells, s in zip(rows, summaries, strict=True):
        assert int(cells[2]) == s["rows"]
        assert number(cells[4]) == pytest.approx(s["median_abs_pct"], abs=0.05)
        assert number(cells[5]) == pytest.approx(s["max_abs_pct"], abs=0.05)
        assert s["median_abs_pct"] > 5.0 or s["max_abs_pct"] > 15.0  # "no series below meets both"


def test_the_exploratory_h100_table_is_the_stored_record():
    old = json.loads((ROOT / "validation" / "published" / "llmfoundry-h100old.json").read_text())
    rows = table("| configurations | rows | median \\|error\\| | max \\|error\\| | within 15% |")
    for cells, s in zip(rows, (old["summary"], old["repeated"], old["unanchored"]), strict=True):
        assert int(cells[1]) == s["rows"] and int(cells[4]) == s["within_15"]
        assert number(cells[2]) == pytest.approx(s["median_abs_pct"], abs=0.05)
        assert number(cells[3]) == pytest.approx(s["max_abs_pct"], abs=0.05)


def test_the_microbatch_tables_are_the_stored_record():
    mb = json.loads((ROOT / "validation" / "published" / "microbatch.json").read_text())
    rows = table("| prediction | all 31: median / max | M: median / max | T: median / max |")
    assert [r[0] for r in rows] == ["hidden", "serial", "post"]
    for cells in rows:
        for cell, part in zip(cells[1:], ("all", "M", "T"), strict=True):
            acc = mb["accuracy"][cells[0]][part]
            median, most = (number(x) for x in cell.split(" / "))
            assert (median, most) == pytest.approx((acc["median_abs_pct"], acc["max_abs_pct"]), abs=0.05)
    ratios = table("| model | micro-batch | measured | hidden | serial | post |")
    for cells, x in zip(ratios, mb["ratios"], strict=True):
        assert (cells[0], int(cells[1])) == (x["model"], x["microbatch"])
        for cell, key in zip(cells[2:], ("measured", "hidden", "serial", "post"), strict=True):
            assert float(cell) == pytest.approx(x[key], abs=5e-4)
    assert mb["post_explains_the_micro_batch_better"] is True



def test_the_dgxc_tables_are_the_stored_record():
    dgxc = json.loads((ROOT / "validation" / "published" / "dgxc.json").read_text())
    diag = json.loads((ROOT / "validation" / "published" / "dgxc-diagnosis.json").read_text())
    rows = table("| model | GPUs | layers | t / p / c / v | measured s | predicted s | error | unanchored |")
    assert len(rows) == len(dgxc["rows"]) == 35
    for cells, r in zip(rows, dgxc["rows"], strict=True):
        assert cells[0] == r["model"] + (" (anchor)" if r["anchor"] else "")
        assert (int(cells[1]), int(cells[2])) == (r["gpus"], r["layers"])
        assert float(cells[4]) == r["step_s"]
        assert float(cells[5]) == pytest.approx(r["predicted_step_s"], abs=0.005)
        assert number(cells[6]) == pytest.approx(r["error_pct"], abs=0.051)
        assert number(cells[7]) == pytest.approx(r["unanchored_pct"], abs=0.051)
    per_model = table("| model | rows | median \\|error\\| | max \\|error\\| | implied factor |")
    assert [c[0] for c in per_model] == list(dgxc["by_model"])
    for cells in per_model:
        acc, d = dgxc["by_model"][cells[0]], diag["by_model"][cells[0]]
        assert int(cells[1]) == acc["rows"]
        assert number(cells[2]) == pytest.approx(acc["median_abs_pct"], abs=0.051)
        assert number(cells[3]) == pytest.approx(acc["max_abs_pct"], abs=0.051)
        assert float(cells[4]) == pytest.approx(d["implied_factor_median"], abs=5e-4)
    assert f"The factor is {dgxc['factor']:.4f}." in PAGE


def test_the_grok_table_is_the_stored_record():
    grok = json.loads((ROOT / "validation" / "published" / "grok.json").read_text())
    rows = table("| GPUs | layers | sequence | t / p / c / e / v | measured s | predicted s |")
    assert len(rows) == len(grok["rows"]) == 9
    for cells, r in zip(rows, grok["rows"], strict=True):
        assert (int(cells[0]), int(cells[1]), int(cells[2])) == (r["gpus"], r["layers"], r["sequence"])
        assert float(cells[4]) == r["step_s"]
        assert float(cells[5]) == pytest.approx(r["predicted_step_s"], abs=0.005)
        assert number(cells[6]) == pytest.approx(r["error_pct"], abs=0.051)
        assert number(cells[7]) == pytest.approx(r["unanchored_pct"], abs=0.051)
