"""Input checks of the device probes and of two text forms, each refused before any work, by name.

- ``block_probe``: ``--table`` and ``--memory-bandwidth`` are checked before anything is timed (a
  missing table was refused only after the whole measurement), and ``--memory-bandwidth`` without
  ``--table`` (silently ignored) is refused.
- ``flash_probe``: ``budget`` bounds the measuring itself (it was checked only between sequence
  lengths, so one length ran past it by minutes), and a budget <= 0 is refused (it wrote an empty
  record and printed ``best nan TFLOP/s``).
- ``parse_shape_text``: a keyword given twice (``kv=4:kv=8``) is refused (the last one won).
- ``Pipeline.partition``: the command line's colon form ``80:81`` is taken, as ``--stage-layers``.

Probes run on the CPU at tiny sizes; the one test that starts a process ends its process group on
a timeout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from process_groups import run_group

from queuesgd import block_probe, flash_probe
from queuesgd.cli import main as cli_main
from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes_llama import parse_shape_text
from queuesgd.schemes.parallel.pipeline import Pipeline
from queuesgd.workload import Layer, Workload

ROOT = Path(__file__).resolve().parents[1]
BLOCK = "python -m queuesgd.block_probe: error: "
FLASH = "python -m queuesgd.flash_probe: error: "
SHAPE = ["x.json", "--hidden", "32", "--heads", "4", "--sequence", "16", "--device", "cpu"]
TINY_FLASH = [
    "--sequence",
    "16",
    "32",
    "--heads",
    "2",
    "--head-dim",
    "8",
    "--tokens",
    "64",
    "--device",
    "cpu",
    "--dtype",
    "float32",
]


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    return lines[0]


# ------------------------------------------------------------------------------------ block_probe
@pytest.fixture
def no_timing(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Replace the measurement by a recorder: a refusal must come before it."""
    calls: list[object] = []
    monkeypatch.setattr(block_probe, "probe_block", lambda *a, **k: calls.append(a) or {})
    return calls


@pytest.mark.parametrize(
    ("extra", "flag", "says"),
    [
        (["--table", "nope"], "--table", "a built-in table (h100-bf16)"),
        (["--table", "h100-bf16", "--memory-bandwidth", "3XB/s"], "--memory-bandwidth", "bytes per second"),
        (["--memory-bandwidth", "3TB/s"], "--memory-bandwidth", "only with --table"),
    ],
)
def test_block_probe_checks_the_comparison_before_timing(
    extra, flag, says, no_timing, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert block_probe.main([*SHAPE, *extra]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"{BLOCK}{flag}: got ") and says in line, line
    assert no_timing == [] and not (tmp_path / "x.json").exists()


def test_block_probe_with_a_good_table_reaches_the_timing(no_timing, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((KeyError, TypeError)):  # the recorder returns no record: the timing was reached
        block_probe.main([*SHAPE, "--table", "h100-bf16", "--memory-bandwidth", "3.35TB/s"])
    assert len(no_timing) == 1


def test_block_probe_stops_inside_a_variant_at_its_budget():
    from queuesgd.model_shapes import TransformerShape

    shape = TransformerShape(1, 32, 4, 16, 100, attention="flash", dropout=False)
    t0 = time.perf_counter()
    rec = block_probe.probe_block(
        shape, (1, 2), device="cpu", dtype="float32", repeats=10_000, warmup=0, budget=0.3
    )
    assert time.perf_counter() - t0 < 5.0  # 10,000 passes of each variant would take minutes
    assert rec["truncated"] and rec["rows"][1] == {
        "microbatch": 2,
        "forward": None,
        "step": None,
        "recompute_step": None,
    }


# ----------------------------------------------------------------------------------- timed_mean
def test_timed_mean_starts_no_call_past_its_deadline():
    torch = pytest.importorskip("torch")
    mean, calls = block_probe.timed_mean(
        torch, "cpu", lambda: time.sleep(0.01), 0, 10_000, stop=time.perf_counter() + 0.2
    )
    assert 1 <= calls < 100 and mean >= 0.01
    # a call of 0.15 s after one: the next would end past 0.25 s, so it is not started
    t0 = time.perf_counter()
    assert block_probe.timed_mean(torch, "cpu", lambda: time.sleep(0.15), 0, 10, stop=t0 + 0.25)[1] == 1
    assert time.perf_counter() - t0 < 0.25
    # cut in the warm-up: nothing timed
    assert block_probe.timed_mean(torch, "cpu", lambda: time.sleep(0.15), 3, 10, stop=t0 + 0.1) == (None, 0)
    # no deadline: every call, and mean_seconds is its mean
    assert block_probe.timed_mean(torch, "cpu", lambda: None, 2, 7)[1] == 7


# ----------------------------------------------------------------------------------- flash_probe
@pytest.mark.parametrize("budget", [0.0, -1.0, float("nan"), float("inf")])
def test_probe_flash_refuses_a_budget_that_is_not_positive(budget):
    pytest.importorskip("torch")
    with pytest.raises(InvalidParameterError) as info:
        flash_probe.probe_flash((16,), heads=1, head_dim=4, device="cpu", dtype="float32", budget=budget)
    assert info.value.field == "budget"


@pytest.mark.parametrize("budget", ["0", "-5"])
def test_the_flash_cli_refuses_a_budget_that_is_not_positive(budget, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert flash_probe.main(["x.json", *TINY_FLASH, "--budget", budget]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"{FLASH}--budget: got ") and "> 0" in line, line
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("text", "says"),
    [('{"peak_tflops": ' + "9" * 5000 + "}", "digits"), ("[" * 200_000 + "]" * 200_000, "nested too deeply")],
)
def test_the_flash_cli_refuses_a_table_python_cannot_parse_in_one_line(
    text, says, tmp_path, monkeypatch, capsys
):
    # an integer of more than 4,300 digits (a ValueError) or deep nesting (a RecursionError) was a traceback
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.json").write_text(text)
    assert flash_probe.main(["x.json", *TINY_FLASH, "--table", "t.json"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"{FLASH}--table: got ") and says in line, line


def test_probe_flash_stops_inside_a_length_and_keeps_what_it_timed():
    pytest.importorskip("torch")
    t0 = time.perf_counter()
    rec = flash_probe.probe_flash(  # calls of a millisecond or more: 10,000 of them never fit the budget
        (256, 512),
        heads=2,
        head_dim=32,
        tokens=1024,
        device="cpu",
        dtype="float32",
        warmup=0,
        repeats=10_000,
        budget=0.5,
    )
    assert time.perf_counter() - t0 < 5.0  # 10,000 forward calls and 10,000 steps per length: minutes
    assert rec["truncated"]
    (row,) = rec["flash"]  # the first length, cut in its forward's calls; the second not reached
    assert row["sequence"] == 256 and 1 <= row["calls"] < 10_000 and row["step_calls"] == 0
    assert row["backward_seconds"] is None and row["backward_ratio"] is None and row["tflops"] > 0


def test_probe_flash_rows_say_how_many_calls_they_timed():
    pytest.importorskip("torch")
    rec = flash_probe.probe_flash(
        (16,), heads=1, head_dim=4, tokens=16, device="cpu", dtype="float32", warmup=0, repeats=3
    )
    (row,) = rec["flash"]
    assert (row["calls"], row["step_calls"], rec["truncated"]) == (3, 3, False)
    assert row["backward_ratio"] == pytest.approx(row["backward_seconds"] / row["seconds"])


def _env() -> dict[str, str]:
    """This checkout first on the child's path."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }


def test_python_m_flash_probe_ends_at_its_budget_and_says_it_was_cut(tmp_path):
    pytest.importorskip("torch")
    # about 10 ms a forward call on a CPU: 10,000 calls of each kind per length would take many minutes
    sizes = ["--sequence", "64", "128", "--heads", "4", "--head-dim", "16", "--tokens", "1024"]
    cmd = [sys.executable, "-m", "queuesgd.flash_probe", "f.json", *sizes, "--device", "cpu"]
    cmd += ["--dtype", "float32", "--repeats", "10000", "--budget", "1"]
    t0 = time.perf_counter()
    done = run_group(cmd, 60.0, env=_env(), cwd=tmp_path)
    assert time.perf_counter() - t0 < 45.0  # the import and one second of calls
    assert done.returncode == 0, done.stderr
    assert "(cut by the budget)" in done.stdout and "nan" not in done.stdout, done.stdout
    rec = json.loads((tmp_path / "f.json").read_text())
    assert rec["truncated"] and len(rec["flash"]) <= 1
    assert all(r["calls"] < 10_000 for r in rec["flash"])


# -------------------------------------------------------------------------------- parse_shape_text
@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("24:1024:16:2048:51200:kv=4:kv=8", "kv"),
        ("24:1024:16:2048:51200:kv=4:kv=4", "kv"),  # the same value twice: still a repeat
        ("24:1024:16:2048:51200:ffn=4096:gated:ffn=2048", "ffn"),
        ("24:1024:16:2048:51200:flash:flash", "flash"),
        ("24:1024:16:2048:51200:llama:llama", "llama"),
    ],
)
def test_a_shape_keyword_given_twice_is_refused_by_name(text, keyword):
    with pytest.raises(InvalidParameterError) as info:
        parse_shape_text(text, "--shape")
    assert info.value.field == "--shape" and f"not {keyword!r} twice" in str(info.value)


def test_distinct_shape_keywords_are_still_taken():
    s = parse_shape_text("24:1024:16:2048:51200:kv=4:ffn=2816:llama:gated")  # llama sets gated too
    assert (s.kv_heads, s.ffn_hidden, s.gated, s.attention) == (4, 2816, True, "flash")
    with pytest.raises(InvalidParameterError, match="not 'kvv=4'"):  # an unknown one: named as before
        parse_shape_text("24:1024:16:2048:51200:kvv=4:kvv=4")


# ------------------------------------------------------------------------------ Pipeline.partition
def three_layers() -> Workload:
    return Workload("6ms", None, layers=[Layer(f"l{i}", 1e6, "1ms", "1ms") for i in range(3)])


@pytest.mark.parametrize("text", ["1:2", " 1 : 2 "])
def test_the_partition_takes_the_command_lines_colon_form(text):
    assert Pipeline(2, 4, partition=text).partition == (1, 2) == Pipeline(2, 4, partition=[1, 2]).partition
    assert Pipeline(2, 4, partition=text).profile(three_layers()).counts == (1, 2)
    assert Pipeline(2, 4, partition="2:1").profile(three_layers()).counts == (2, 1)


@pytest.mark.parametrize(
    "text", ["3", "1:1:1", "1:", "0:3", "1:-2", "a:b", "1.5:1.5", "9" * 40 + ":1", "none"]
)
def test_a_bad_colon_partition_names_the_field(text):
    with pytest.raises(InvalidParameterError) as info:
        Pipeline(2, 4, partition=text)
    assert info.value.field == "Pipeline.partition" and "N1:N2:..." in str(info.value)


def test_the_cli_predicts_with_a_colon_partition(capsys):
    argv = ["predict", "--scheme", "pipeline", "--workers", "2", "--stages", "2", "--microbatches", "4"]
    assert cli_main([*argv, "--partition", "80:81"]) == 0  # resnet50: 161 layers
    assert "partition=80:81" in capsys.readouterr().out
    assert cli_main([*argv, "--partition", "80:80"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("queuesgd: error: --partition: got (80, 80)") and "161" in line, line


def test_a_cut_flash_table_says_so_and_still_loads(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from queuesgd.gemm_table import load_gemm_table

    table = tmp_path / "gemm.json"
    table.write_text(json.dumps({"gemm": [{"M": 8, "N": 8, "K": 8, "tflops": 0.01}], "peak_tflops": 100.0}))
    out = tmp_path / "with-flash.json"
    argv = [str(out), "--table", str(table), *TINY_FLASH]
    assert flash_probe.main([*argv, "--repeats", "10000", "--budget", "0.3"]) == 0
    assert "(cut by the budget)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["flash_how"].endswith("; cut by the budget (truncated)") and len(doc["flash"]) <= 1
    assert len(load_gemm_table(out).flash[0]) == len(doc["flash"])  # a row without its backward loads
