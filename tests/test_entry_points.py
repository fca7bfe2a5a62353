"""Every command-line entry point refuses bad input the same way: one line on stderr, status 2.

The entry points: the ``queuesgd`` console script (``python -m queuesgd``) and the modules run with
``python -m``: ``queuesgd.gemm_probe``, ``queuesgd.block_probe``, ``queuesgd.flash_probe``,
``queuesgd.busbw_probe`` and ``queuesgd.harness.torchrun``.
All go through :func:`queuesgd.command_line.run_command`. Each case is refused before anything is
measured or started (no probe runs, no process group is joined), so every call takes milliseconds;
one case per module also runs in a process of its own, as a user would.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from queuesgd import block_probe, busbw_probe, cli, flash_probe, gemm_probe
from queuesgd.harness import torchrun

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = (ROOT / "docs" / "cli.md").read_text()
HAS_TORCH = importlib.util.find_spec("torch") is not None
NEEDS_TORCH = pytest.mark.skipif(not HAS_TORCH, reason="checked after PyTorch is imported")

GEMM = "python -m queuesgd.gemm_probe"
BUSBW = "python -m queuesgd.busbw_probe"
BLOCK = "python -m queuesgd.block_probe"
FLASH = "python -m queuesgd.flash_probe"
TORCHRUN = "python -m queuesgd.harness.torchrun"
#: What torchrun sets in each rank's environment.
TORCHRUN_ENV = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
#: Rank 0's meta record with every field, one of them out of its bounds.
BAD_META = {"scheme": "ring-allreduce", "workers": -1, "steps": 1, "batch": 1, "gradient_bytes": 1,
            "params": {}, "seed": 0}  # fmt: skip
TINY = ["--hidden", "8", "--tokens", "4", "--tensor", "1", "--repeats", "1", "--budget", "1"]


def _refused(capsys: pytest.CaptureFixture[str], prog: str, field: str) -> str:
    """The one line on stderr, checked: the program's prefix, the field named, no traceback."""
    out, err = capsys.readouterr()
    assert out == "", out
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"{prog}: error: "), err
    assert field in err, (field, err)
    return err


# ------------------------------------------------------------------------------------- gemm_probe
@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["t.txt"], "out"),  # not a .json file
        (["missing/t.json"], "out"),  # in a folder that does not exist
        ([], "out"),  # no file at all
        (["t.json", "--hidden", "-8"], "hidden[0]"),  # a negative size
        (["t.json", "--hidden", "x"], "--hidden"),
        (["t.json", "--tokens", "0"], "tokens[0]"),
        (["t.json", "--hidden", "8", "--tensor", "3"], "tensor"),
        (["t.json", "--repeats", "0"], "repeats"),
        (["t.json", "--budget", "-1"], "budget"),
        (["t.json", "--budget", "nan"], "budget"),
        (["t.json", "--dtype", "int8"], "--dtype"),
        (["t.json", "--peak-tflops", "-1"], "--peak-tflops"),
        (["t.json", "--peak-tflops", "1e300"], "--peak-tflops"),  # no overflow to inf FLOP/s
        (["t.json", "--bogus"], "--bogus"),
        pytest.param(["t.json", *TINY, "--device", "gpu"], "device", marks=NEEDS_TORCH),  # a bad name
        pytest.param(["t.json", *TINY, "--device", "cuda:x"], "device", marks=NEEDS_TORCH),
    ],
)
def test_gemm_probe_refuses_bad_input_in_one_line(argv, field, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert gemm_probe.main(argv) == 2
    _refused(capsys, GEMM, field)
    assert not (tmp_path / "t.json").exists()


# ------------------------------------------------------------------------------------ busbw_probe
@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["t.txt"], "out"),
        (["missing/t.json"], "out"),
        (["t.json", "--ranks", "-2"], "ranks"),  # a negative count
        (["t.json", "--sizes", "-1KiB"], "--sizes[0]"),  # a negative size
        (["t.json", "--warmup", "-1"], "warmup"),
        (["t.json", "--repeats", "0"], "repeats"),
        (["t.json", "--budget", "inf"], "budget"),
        (["t.json", "--device", "tpu"], "--device"),  # a bad device name
        (["t.json", "--operations", "allreduce", "allreduce"], "operations"),
    ],
)
def test_busbw_probe_refuses_bad_input_in_one_line(argv, field, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert busbw_probe.main(argv) == 2
    _refused(capsys, BUSBW, field)
    assert not (tmp_path / "t.json").exists()


# --------------------------------------------------------------------------------------- torchrun
@pytest.fixture
def outside_torchrun(monkeypatch, tmp_path):
    """A process torchrun did not start: none of the variables it sets."""
    for name in (*TORCHRUN_ENV, "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--steps", "x"], "--steps"),
        (["--steps", "-3"], "--steps"),  # a negative count
        (["--warmup", "-1"], "--warmup"),
        (["--batch-size", "0"], "--batch-size"),
        (["--repeats", "0"], "--repeats"),
        (["--seed", "-1"], "--seed"),
        (["--scheme", "tree-allreduce"], "--scheme"),  # not run live
        (["--compute", "-1ms"], "--compute"),
        (["--gradient-bytes", "lots"], "--gradient-bytes"),
        (["--workload", "foo"], "--workload"),
        ([], "RANK"),  # good arguments, but not under torchrun: refused before init_process_group
    ],
)
def test_torchrun_refuses_bad_input_in_one_line(argv, field, outside_torchrun, capsys):
    assert torchrun.main(argv) == 2
    _refused(capsys, TORCHRUN, field)
    assert not (outside_torchrun / "records").exists()


@pytest.mark.parametrize(
    ("argv", "field", "kwargs"),
    [
        (["--steps", "5", "--warmup", "100"], "--steps", {"steps": 5, "warmup": 100}),  # steps >= 20
        (["--steps", "30", "--warmup", "100"], "--warmup", {"steps": 30, "warmup": 100}),  # < steps - 10
        (["--steps", "30", "--warmup", "20"], "--warmup", {"steps": 30, "warmup": 20}),
        (["--compute", "0"], "--compute", {"compute": "0"}),
        (["--steps", "1000000", "--compute", "1h"], "--compute", {"steps": 1_000_000, "compute": "1h"}),
        (["--workload", "bogus"], "--workload", {"workload": "bogus"}),
        (["--steps", "1000000", "--random-delay", "1:1h"], "--random-delay",
         {"steps": 1_000_000, "random_delay": "1:1h"}),
    ],
)  # fmt: skip
def test_torchrun_checks_a_run_as_validate_does(argv, field, kwargs, outside_torchrun, capsys):
    # Each of these passed torchrun's checks and reached the environment check (on a cluster: the whole
    # job ran, then --compare failed on too few measured updates); validate() refuses each.
    from queuesgd.errors import InvalidParameterError
    from queuesgd.harness.campaign import validate

    assert torchrun.main(argv) == 2
    err = _refused(capsys, TORCHRUN, field)
    assert err.startswith(f"{TORCHRUN}: error: {field}: got "), err
    with pytest.raises(InvalidParameterError) as refused:
        validate("ring-allreduce", workers=2, **kwargs)
    assert refused.value.field == field.lstrip("-").replace("-", "_")
    assert err.rstrip("\n").split("; accepted: ", 1)[1] in refused.value.accepted  # one checker, one text


def test_torchrun_refuses_an_out_folder_it_cannot_make(outside_torchrun, capsys, monkeypatch):
    for name, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(name, value)
    (outside_torchrun / "file").write_text("")
    assert torchrun.main(["--out", str(outside_torchrun / "file")]) == 2  # a file, not a folder
    _refused(capsys, TORCHRUN, "--out")


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (None, "rank<r>.jsonl"),  # no such folder
        ([], "rank<r>.jsonl"),  # a folder without records
        (['{"meta": '], "rank0.jsonl:1"),  # a line cut short
        (['{"role": "worker"}', "[1, 2]"], "rank0.jsonl:2"),  # a line that is not an object
        (['{"role": "worker"}'], "rank 0"),  # no meta record
        (['{"meta": {"scheme": "ring-allreduce"}}'], "workers"),  # a meta record without its fields
        ([json.dumps({"meta": BAD_META})], "meta.workers"),
    ],
)
def test_torchrun_compare_refuses_a_missing_or_invalid_folder(lines, said, tmp_path, capsys):
    folder = tmp_path / "records"
    if lines is not None:
        folder.mkdir()
        if lines:
            (folder / "rank0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert torchrun.main(["--compare", str(folder)]) == 2
    err = _refused(capsys, TORCHRUN, "--compare" if "meta." not in said else said)
    assert said in err


def test_torchrun_compare_refuses_a_file_that_is_not_utf8(tmp_path, capsys):
    (tmp_path / "rank0.jsonl").write_bytes(b"\xff\xfe\x00")
    assert torchrun.main(["--compare", str(tmp_path)]) == 2
    assert "not UTF-8" in _refused(capsys, TORCHRUN, "--compare")


# ---------------------------------------------------------------------------------- the queuesgd CLI
@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["predict", "--workers", "0"], "--workers"),
        (["predict", "--workers", "x"], "--workers"),
        (["predict", "--bogus"], "--bogus"),
        (["compare", "missing.csv"], "missing.csv"),  # a missing file
        (["nope"], "nope"),
    ],
)
def test_queuesgd_refuses_bad_input_in_one_line(argv, field, capsys):
    assert cli.main(argv) == 2
    _refused(capsys, "queuesgd", field)


def test_help_still_exits_0(capsys):
    assert gemm_probe.main(["--help"]) == 0
    assert "--peak-tflops" in capsys.readouterr().out


# ------------------------------------------------------------------------ as a user runs them
@pytest.mark.parametrize(
    ("module", "argv", "field"),
    [
        ("queuesgd", ["predict", "--workers", "-1"], "--workers"),
        ("queuesgd.gemm_probe", ["t.json", *TINY, "--device", "gpu"], "device"),
        ("queuesgd.gemm_probe", ["t.json", "--hidden", "-8"], "hidden[0]"),
        ("queuesgd.busbw_probe", ["t.json", "--ranks", "-2"], "ranks"),
        ("queuesgd.flash_probe", ["t.json", "--sequence", "16", "--device", "gpu"], "device"),
        ("queuesgd.block_probe", ["t.json", "--hidden", "8", "--heads", "2", "--sequence", "4",
                                  "--device", "gpu", "--budget", "1"], "device"),  # fmt: skip
        ("queuesgd.harness.torchrun", ["--compare", "missing"], "--compare"),
    ],
)
def test_python_m_refuses_bad_input_in_one_line(module, argv, field, tmp_path):
    if "--device" in argv and not HAS_TORCH:
        pytest.skip("the device is checked after PyTorch is imported")
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    prog = "queuesgd" if module == "queuesgd" else f"python -m {module}"
    assert line.startswith(f"{prog}: error: ") and field in line, line
    assert not (tmp_path / "t.json").exists()


# --------------------------------------------------------------------------------- docs/cli.md
@pytest.mark.parametrize(
    ("parser", "heading"),
    [
        (gemm_probe.build_parser, "## Measuring GEMM tables: `python -m queuesgd.gemm_probe`"),
        (block_probe.build_parser, "## Checking the compute model on a device: `" + BLOCK + "`"),
        (flash_probe.build_parser, "## Measuring fused attention: `" + FLASH + "`"),
        (torchrun.build_parser, "## Under torchrun: `python -m queuesgd.harness.torchrun`"),
    ],
)
def test_every_flag_is_in_the_cli_docs(parser, heading):
    section = CLI_MD.split(heading)[1].split("\n## ")[0]
    flags = [s for a in parser()._actions for s in a.option_strings if s not in ("-h", "--help")]
    assert flags
    for flag in flags:
        assert f"`{flag}" in section or f"[{flag}" in section, flag
    assert "status 2" in section
