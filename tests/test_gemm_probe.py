"""The GEMM probe on the CPU with tiny sizes: the format the table loader reads, and its bounds."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.gemm_probe import main, probe_gemm, write_gemm_table  # noqa: E402
from queuesgd.gemm_table import load_gemm_table  # noqa: E402

TINY = {"hidden": (16, 32), "tokens": (8, 16), "tensor": (1, 2), "elementwise": (256,), "repeats": 2}


def test_probe_writes_the_shared_format_and_loads(tmp_path):
    table = probe_gemm(**TINY, device="cpu", dtype="float32", warmup=1, peak_flops=1e15)
    assert len(table["gemm"]) == 2 * 2 * 2 * 4 and not table["truncated"]
    for key in ("device", "torch", "date", "dtype", "how", "gemm", "elementwise"):
        assert key in table  # the fields of shared/data/gpu/measure_gemm.py's output
    r = next(r for r in table["gemm"] if (r["op"], r["h"], r["tp"], r["M"]) == ("proj", 32, 2, 16))
    assert (r["K"], r["N"]) == (16, 32)  # row-parallel: K split
    assert r["tflops"] == pytest.approx(2 * 16 * 16 * 32 / r["seconds"] / 1e12)
    assert {e["op"] for e in table["elementwise"]} == {"gelu", "layernorm", "softmax"}
    assert sorted(k for k, *_ in load_gemm_table(write_gemm_table(tmp_path / "a.json", table)).memory) == [
        "gelu",
        "layernorm",
        "softmax",
    ]  # the softmax rows are read back as a curve of their own
    path = write_gemm_table(tmp_path / "cpu.json", table)
    t = load_gemm_table(path)  # peak from the file's peak_tflops
    assert t.peak_flops == pytest.approx(1e15) and t.provenance["dtype"] == "float32"
    assert json.loads(path.read_text())["gemm"] == table["gemm"]


def test_probe_is_bounded_in_time_and_size():
    t = probe_gemm(**TINY, device="cpu", dtype="float32", budget=1e-9)
    assert t["truncated"] and t["gemm"] == []
    t = probe_gemm(hidden=(64,), tokens=(8,), tensor=(1,), elementwise=(), device="cpu", max_elements=600)
    assert t["gemm"] == [] and len(t["skipped"]) == 4  # every product has a 64 x 192+ operand


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"hidden": (30,), "tensor": (4,)}, "tensor"),
        ({"hidden": (2.5,)}, r"hidden\[0\]"),
        ({"tokens": (2**20,)}, r"tokens\[0\]"),
        ({"dtype": "int8"}, "dtype"),
        ({"device": "gpu"}, "device"),
        ({"budget": float("inf")}, "budget"),
        ({"repeats": 0}, "repeats"),
    ],
)
def test_probe_checks_its_arguments(kwargs, field):
    with pytest.raises(InvalidParameterError, match=field):
        probe_gemm(**{**TINY, **kwargs})


def test_command_line(tmp_path, capsys):
    out = tmp_path / "t.json"
    argv = [str(out), "--hidden", "8", "--tokens", "4", "--tensor", "1", "--device", "cpu"]
    assert main([*argv, "--dtype", "float32", "--repeats", "1", "--peak-tflops", "1"]) == 0
    assert "products" in capsys.readouterr().out
    assert len(load_gemm_table(out).volumes) >= 1
    assert main([str(tmp_path / "t.txt")]) == 2  # one line, not raised: more in tests/test_entry_points.py
    assert capsys.readouterr().err.startswith("python -m queuesgd.gemm_probe: error: out: ")
    with pytest.raises(InvalidParameterError, match="table"):
        write_gemm_table(tmp_path / "t.json", {"no": "gemm"})
