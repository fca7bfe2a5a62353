"""GemmTable: interpolation in log2(m n k), clamping outside the range, the JSON format and its checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import BUILTIN, STAND_INS, GemmTable, gemm_table_from_json, load_gemm_table

SHARED = Path(__file__).resolve().parents[1] / "queuesgd" / "data" / "gemm" / "h100-bf16.json"


def test_the_shipped_table_is_the_measurement_with_its_provenance():
    data = json.loads(SHARED.read_text())
    assert data["device"] == "NVIDIA H100 80GB HBM3" and data["dtype"] == "bfloat16"
    assert len(data["gemm"]) == 240 and len(data["elementwise"]) == 6
    t = load_gemm_table("h100-bf16")
    assert t.provenance == {k: data[k] for k in ("device", "torch", "date", "dtype", "how")}
    assert t.peak_flops == BUILTIN["h100-bf16"][1] == 989.4e12
    # a measured shape alone at its volume reads back its own rate: h = 8192's QKV at t = 1, M = 8192
    row = next(r for r in data["gemm"] if (r["op"], r["h"], r["tp"], r["M"]) == ("qkv", 8192, 1, 8192))
    same = [r for r in data["gemm"] if r["M"] * r["N"] * r["K"] == row["M"] * row["N"] * row["K"]]
    assert len(same) == 1
    eff = float(t.efficiency(row["M"], row["N"], row["K"]))
    assert eff * t.peak_flops == pytest.approx(row["tflops"] * 1e12, rel=1e-12)


def test_linear_in_log2_volume_between_rows_and_equal_volumes_averaged():
    t = GemmTable.from_rows(
        [(2, 2, 2, 0.1), (4, 2, 1, 0.3), (8, 8, 8, 0.4)], peak_flops=1.0
    )  # volumes 8, 8 (mean 0.2), 512
    assert t.volumes == (3.0, 9.0) and t.efficiencies == pytest.approx((0.2, 0.4))
    assert float(t.efficiency(4, 4, 4)) == pytest.approx(0.2 + 0.2 * (6 - 3) / 6)  # log2 64 = 6
    # a batch of products is read at batch x volume; the layout of m, n, k does not matter
    assert float(t.efficiency(4, 4, 4)) == float(t.efficiency(1, 64, 1)) == float(t.efficiency(2, 2, 2, 8))
    got = t.efficiency(np.array([2, 8, 16]), 2, 2)  # vectorized
    assert got.shape == (3,) and got[0] == pytest.approx(0.2)


def test_outside_the_range_is_clamped_and_said():
    t = GemmTable.from_rows([(8, 8, 8, 0.1), (64, 64, 64, 0.8)], peak_flops=1.0)
    assert float(t.efficiency(1, 1, 1)) == 0.1 and float(t.efficiency(1024, 1024, 1024)) == 0.8
    assert t.outside([1, 8, 32, 4096, 4097], 8, 8).tolist() == [True, False, False, False, True]
    assert not bool(GemmTable.constant(0.3, peak_flops=1.0).outside(1, 1, 1))


def test_h100_table_range_covers_a_layer_and_clamps_beyond():
    t = load_gemm_table("h100-bf16")
    assert 2.0 ** t.volumes[0] == 512 * 128 * 1024  # the smallest measured product
    assert bool(t.outside(64, 64, 64)) and not bool(t.outside(2048, 384, 1024))
    assert float(t.efficiency(64, 64, 64)) == t.efficiencies[0]


def test_memory_rows_interpolate_per_kind():
    t = load_gemm_table("h100-bf16")
    # layernorm rows: 2^20 elements (2^22 B) at 139.6 GB/s, 2^24 (2^26 B) at 1313.8 GB/s
    data = json.loads(SHARED.read_text())
    ln = {r["numel"]: r["GBps"] * 1e9 for r in data["elementwise"] if r["op"] == "layernorm"}
    mid = ln[2**20] + (ln[2**24] - ln[2**20]) / 4  # log2 bytes 23 is a quarter of the way from 22 to 26
    assert float(t.bandwidth("layernorm", 2**23)) == pytest.approx(mid, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="kind"):
        t.bandwidth("attention", 1e6)


def test_json_rows_by_seconds_dtype_and_peak(tmp_path):
    data = {
        "dtype": "float32",
        "peak_tflops": 1e-3,  # 1 GFLOP/s
        "gemm": [{"M": 10, "N": 10, "K": 10, "seconds": 1e-5}],  # 2000 FLOPs in 10 us: 0.2 GFLOP/s
        "elementwise": [{"op": "gelu", "numel": 100, "seconds": 1e-6}],  # 2 x 100 x 4 B in 1 us
    }
    t = gemm_table_from_json(data)
    assert t.efficiencies == pytest.approx((0.2,))
    assert float(t.bandwidth("gelu", 1)) == pytest.approx(800 / 1e-6)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    assert load_gemm_table(path).efficiencies == t.efficiencies
    assert load_gemm_table(path, peak_flops=2e9).efficiencies == pytest.approx((0.1,))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"gemm": []}, "source.gemm"),
        ({"gemm": [{"M": 1, "N": 1}]}, r"source.gemm\[0\]"),
        ({"gemm": [{"M": 1, "N": 1, "K": -2, "tflops": 1}]}, r"source.gemm\[0\].K"),
        ({"gemm": [{"M": 1, "N": 1, "K": 2, "tflops": float("nan")}]}, r"source.gemm\[0\].tflops"),
        ({"gemm": [{"M": 1, "N": 1, "K": 2, "tflops": 2000}]}, "peak_flops"),  # above the peak
        ({"gemm": [{"M": 1, "N": 1, "K": 1, "tflops": 1}], "elementwise": [{"op": "x"}]}, "elementwise"),
    ],
)
def test_bad_json_is_refused_naming_the_field(tmp_path, data, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidParameterError, match=field):
        load_gemm_table(path, peak_flops=989e12)


def test_files_are_read_bounded_and_a_peak_is_required(tmp_path):
    with pytest.raises(InvalidParameterError, match="source"):
        load_gemm_table("/dev/zero", peak_flops=1.0)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(InvalidParameterError, match="JSON"):
        load_gemm_table(tmp_path / "x.json", peak_flops=1.0)
    (tmp_path / "y.json").write_text(json.dumps({"gemm": [{"M": 1, "N": 1, "K": 1, "tflops": 1}]}))
    with pytest.raises(InvalidParameterError, match="peak_flops"):
        load_gemm_table(tmp_path / "y.json")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: GemmTable.constant(1.5, peak_flops=1.0), "efficiency"),
        (lambda: GemmTable.constant(0.5, peak_flops=-1.0), "peak_flops"),
        (lambda: GemmTable.from_rows("abc", peak_flops=1.0), "rows"),
        (lambda: GemmTable.from_rows([(1, 2, 3)], peak_flops=1.0), r"rows\[0\]"),
        (lambda: GemmTable.from_rows([], peak_flops=1.0), "rows"),
        (lambda: GemmTable.from_rows([(1, 1, 1, 0.5)], peak_flops=1.0, memory=[("x", 1, 1)]), "memory"),
        (lambda: GemmTable.constant(0.5, peak_flops=1.0).efficiency(0, 1, 1), "m"),
        (lambda: GemmTable.constant(0.5, peak_flops=1.0).efficiency(1, math.nan, 1), "n"),
    ],
)
def test_construction_and_queries_check_their_arguments(call, field):
    with pytest.raises(InvalidParameterError, match=field):
        call()


def test_a_softmax_is_timed_on_its_own_rows_else_on_the_element_wise_curve():
    # log2-linear interpolation by hand: 2**25 bytes sits halfway (in log2) between 2**20 and 2**30
    ew = [("gelu", 2**20, 1e11), ("gelu", 2**30, 2e12)]
    without = GemmTable.constant(0.5, peak_flops=1e15, memory=ew + [("layernorm", 2**20, 5e10)])
    assert float(without.bandwidth("softmax", 2**25)) == pytest.approx((1e11 + 2e12) / 2, rel=1e-12)
    assert float(without.bandwidth("layernorm", 2**25)) == 5e10  # one row: clamped, not the stand-in
    own = GemmTable.constant(
        0.5, peak_flops=1e15, memory=ew + [("softmax", 2**20, 3e11), ("softmax", 2**30, 9e11)]
    )
    assert float(own.bandwidth("softmax", 2**25)) == pytest.approx(6e11, rel=1e-12)
    assert GemmTable.constant(0.5, peak_flops=1e15).bandwidth("softmax", 2**25) is None  # no curves at all
    assert STAND_INS == {"softmax": "gelu"}
