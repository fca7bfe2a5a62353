"""Fused-attention rows in a GEMM table: measured by queuesgd.flash_probe, used by the compute model.

Independent references: the FLOP count of a flash core (the whole square, ``4 batch heads s^2 d``), the
closed form of a flash kernel's time at one measured efficiency (``FLOPs / (efficiency x peak)``),
linear interpolation in ``log2`` of the scores product's volume, and the stand-in (the GEMM curve at
that volume) where a table has no flash rows.
"""

from __future__ import annotations

import json
import math

import pytest

from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.flash_probe import main, probe_flash
from queuesgd.gemm_table import GemmTable, gemm_table_from_json, load_gemm_table
from queuesgd.model_shapes import TransformerShape

torch = pytest.importorskip("torch")


def flash_op(shape: TransformerShape, b: int = 1):
    (op,) = [o for o in shape.operations(b) if o.kind == "flash"]
    return op


def test_probe_rows_count_the_whole_square():
    rec = probe_flash((16, 48), heads=2, head_dim=8, tokens=96, device="cpu", dtype="float32", repeats=2)
    assert [(r["batch"], r["sequence"], r["causal"]) for r in rec["flash"]] == [(6, 16, True), (2, 48, True)]
    for r in rec["flash"]:
        assert r["tflops"] == pytest.approx(4 * r["batch"] * 2 * r["sequence"] ** 2 * 8 / r["seconds"] / 1e12)
        if r["backward_seconds"] is None:  # the step timed no longer than the forward (a busy host)
            assert r["backward_ratio"] is None
        else:
            assert r["backward_ratio"] == pytest.approx(r["backward_seconds"] / r["seconds"])


def test_a_step_timed_no_longer_than_its_forward_gives_no_backward(monkeypatch):
    # the two means are timed apart; where noise makes the step's the shorter, no backward is made up (it
    # was recorded as 0 s, ratio 0)
    import queuesgd.flash_probe as fp

    times = iter([(2e-3, 1), (1.5e-3, 1), (2e-3, 1), (5e-3, 1)])  # (forward, step) per length
    monkeypatch.setattr(fp, "timed_mean", lambda *a, **k: next(times))
    rec = fp.probe_flash((16, 32), heads=1, head_dim=4, tokens=32, device="cpu", dtype="float32", repeats=1)
    first, second = rec["flash"]
    assert first["backward_seconds"] is None and first["backward_ratio"] is None
    assert second["backward_seconds"] == pytest.approx(3e-3)
    assert second["backward_ratio"] == pytest.approx(1.5)


def test_one_measured_row_times_every_flash_core_at_its_efficiency():
    base = {"gemm": [{"M": 64, "N": 64, "K": 64, "tflops": 500.0}], "peak_tflops": 1000.0}
    table = gemm_table_from_json({**base, "flash": [{"batch": 2, "heads": 16, "sequence": 2048,
                                                     "head_dim": 128, "tflops": 300.0}]})  # fmt: skip
    cm = ComputeModel(table, memory_bandwidth="1e18B/s")  # memory free: the compute bound shows
    shape = TransformerShape(1, 2048, 16, 4096, 100, attention="flash", dropout=False)
    (t,) = cm.operation_times([flash_op(shape, 3)])
    flops = 4 * 3 * 16 * 4096**2 * 128
    assert t.operation.flops == flops
    assert t.efficiency == pytest.approx(0.3) and t.seconds == pytest.approx(flops / 300e12, rel=1e-12)
    # without the row: the stand-in, the GEMM curve at the scores product's volume
    plain = ComputeModel(gemm_table_from_json(base), memory_bandwidth="1e18B/s")
    (s,) = plain.operation_times([flash_op(shape, 3)])
    assert s.efficiency == pytest.approx(0.5)


def test_two_rows_interpolate_in_the_log_volume():
    rows = [(16, 1024, 1024, 128, 0.2), (16, 4096, 4096, 128, 0.6)]  # volumes 2^31 and 2^35
    t = GemmTable.from_rows([(8, 8, 8, 0.9)], peak_flops=1e15, flash=rows)
    assert float(t.flash_efficiency(2048, 2048, 128, 16)) == pytest.approx(0.2 + 0.4 * (33 - 31) / (35 - 31))
    assert float(t.flash_efficiency(64, 64, 128, 1)) == pytest.approx(0.2)
    assert bool(t.flash_outside(64, 64, 128))
    assert t.flash[0] == (math.log2(16 * 1024 * 1024 * 128), math.log2(16 * 4096 * 4096 * 128))


def test_the_shipped_table_has_no_flash_rows_and_keeps_the_stand_in():
    table = load_gemm_table("h100-bf16")
    assert table.flash == ((), ())
    op = flash_op(TransformerShape(1, 4096, 32, 8192, 100, attention="flash"), 2)
    (t,) = ComputeModel(table, "3.35TB/s").operation_times([op])
    assert t.efficiency == float(table.efficiency(op.m, op.n, op.k, op.batch))


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"batch": 1, "heads": 2, "sequence": 16}, "table.flash[0]"),
        ({"batch": 1, "heads": 2, "sequence": 16, "head_dim": 8, "tflops": 2000.0}, "peak_flops"),
        ({"batch": 1, "heads": 2, "sequence": -16, "head_dim": 8, "tflops": 1.0}, "table.flash[0].sequence"),
    ],
)
def test_bad_flash_rows_name_their_field(row, field):
    data = {"gemm": [{"M": 8, "N": 8, "K": 8, "tflops": 1.0}], "peak_tflops": 1000.0, "flash": [row]}
    with pytest.raises(InvalidParameterError) as info:
        gemm_table_from_json(data)
    assert info.value.field == field


def test_a_table_refuses_flash_curves_out_of_order():
    with pytest.raises(InvalidParameterError, match="^GemmTable.flash"):
        GemmTable((1.0,), (0.5,), 1e15, flash=((3.0, 2.0), (0.1, 0.2)))


def test_the_cli_adds_rows_to_a_table_the_model_loads(tmp_path):
    table = tmp_path / "gemm.json"
    table.write_text(json.dumps({"device": "cpu", "gemm": [{"M": 8, "N": 8, "K": 8, "tflops": 0.01}],
                                 "peak_tflops": 100.0}))  # fmt: skip
    out = tmp_path / "with-flash.json"
    argv = [str(out), "--table", str(table), "--sequence", "16", "32", "--heads", "2", "--head-dim", "8",
            "--tokens", "64", "--device", "cpu", "--dtype", "float32", "--repeats", "1"]  # fmt: skip
    assert main(argv) == 0
    loaded = load_gemm_table(out)
    assert len(loaded.flash[0]) == 2 and loaded.peak_flops == 100e12
    assert json.loads(out.read_text())["gemm"] == [{"M": 8, "N": 8, "K": 8, "tflops": 0.01}]


@pytest.mark.parametrize(
    "argv",
    [
        ["x.txt"],
        ["x.json", "--heads", "0"],
        ["x.json", "--table", "missing.json"],
        ["x.json", "--device", "gpu"],
    ],
)
def test_the_cli_refuses_bad_arguments_in_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m queuesgd.flash_probe: error:")
    assert not (tmp_path / "x.json").exists()
