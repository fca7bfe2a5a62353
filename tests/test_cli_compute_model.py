"""``--compute-model`` on the command line: a GEMM table by name or file gives HybridParallel a ComputeModel.

The independent reference is the Python API: the same ``HybridParallel(..., compute_model=ComputeModel(...))``
predicted on the same workload and cluster must give the CLI's number, to the last bit. Bad values are one
line on stderr, exit status 2, naming the option and what it accepts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest

import queuesgd as q
from queuesgd.cli import main
from queuesgd.compute_model import ComputeModel
from queuesgd.gemm_table import load_gemm_table
from queuesgd.model_shapes_llama import parse_shape
from queuesgd.schemes.parallel.hybrid import HybridParallel

SHAPE = "24:1024:16:2048:51200"  # GPT-3 Medium's shape: h = 1024, where GEMM efficiency falls with t
HYBRID = ["--scheme", "hybrid", "--shape", SHAPE, "--bandwidth", "100Gbit/s"]  # the shape's own workload


def cli(*argv: str) -> tuple[int, str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue().splitlines()


def api(tensor: int, workers: int, compute_model: ComputeModel | None) -> float:
    scheme = HybridParallel(tensor=tensor, shape=SHAPE, compute_model=compute_model)
    return q.predict(scheme, parse_shape(SHAPE).workload(1), q.Cluster(workers, "100Gbit/s")).throughput


def test_predict_with_a_shipped_table_equals_the_python_api():
    h100 = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
    status, out, err = cli(
        "predict", *HYBRID, "--tensor", "2", "--workers", "2,8", "--json",
        "--compute-model", "h100-bf16", "--memory-bandwidth", "3.35TB/s",
    )  # fmt: skip
    assert status == 0, err
    rows = json.loads(out)
    assert [r["throughput"] for r in rows] == [api(2, 2, h100), api(2, 8, h100)]
    # the table is read: without it (one FLOP/s rate from the workload) the number differs
    assert rows[1]["throughput"] != pytest.approx(api(2, 8, None), rel=1e-3)
    # no --memory-bandwidth: the compute-only model, ComputeModel(table, None)
    status, out, _ = cli("predict", *HYBRID, "--tensor", "2", "--workers", "8", "--json",
                         "--compute-model", "h100-bf16")  # fmt: skip
    only = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth=None)
    assert status == 0 and json.loads(out)[0]["throughput"] == api(2, 8, only)
    # the title names the table as given, not the object
    status, out, _ = cli("predict", *HYBRID, "--tensor", "2", "--workers", "8",
                         "--compute-model", "h100-bf16")  # fmt: skip
    assert status == 0 and "compute_model=h100-bf16)" in out.splitlines()[0]


def test_sweep_with_a_table_file_equals_the_python_api(tmp_path):
    # a table as the probe writes it (queuesgd.gemm_probe with --peak-tflops): two products, one peak
    table = {
        "device": "test", "dtype": "bfloat16", "peak_tflops": 1000.0,
        "gemm": [{"M": 512, "N": 512, "K": 512, "tflops": 50.0},
                 {"M": 8192, "N": 8192, "K": 8192, "tflops": 700.0}],
    }  # fmt: skip
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(table))
    cm = ComputeModel(load_gemm_table(path), memory_bandwidth=2e12)
    status, out, err = cli(
        "sweep", *HYBRID, "--tensor", "1,2,4", "--workers", "8", "--json",
        "--compute-model", str(path), "--memory-bandwidth", "2TB/s",
    )  # fmt: skip
    assert status == 0, err
    rows = json.loads(out)
    assert [(r["tensor"], r["throughput"]) for r in rows] == [(t, api(t, 8, cm)) for t in (1, 2, 4)]


@pytest.mark.parametrize(
    "extra, flag, says",
    [
        (["--compute-model", "h200"], "--compute-model", "a shipped GEMM table (h100-bf16)"),
        (["--compute-model", "missing.json"], "--compute-model", "No such file"),
        (
            ["--compute-model", "h100-bf16", "--memory-bandwidth", "0"],
            "--memory-bandwidth",
            "at least 1 bit/s",
        ),
        (["--compute-model", "h100-bf16", "--memory-bandwidth", "1e-300"], "--memory-bandwidth", "1 bit/s"),
        (["--compute-model", "h100-bf16", "--memory-bandwidth", "0.1bit/s"], "--memory-bandwidth", "1 bit/s"),
        (["--compute-model", "h100-bf16", "--memory-bandwidth", "fast"], "--memory-bandwidth", "10Gbit/s"),
        (["--memory-bandwidth", "3TB/s"], "--memory-bandwidth", "only with --compute-model"),
        (["--compute-model", "none", "--memory-bandwidth", "3TB/s"], "--memory-bandwidth", "only with"),
    ],
)
def test_bad_values_are_one_line(extra, flag, says):
    status, out, err = cli("predict", *HYBRID, "--tensor", "2", "--workers", "8", *extra)
    assert status == 2 and out == "" and len(err) == 1
    assert err[0].startswith(f"queuesgd: error: {flag}: got ") and says in err[0], err[0]


def test_a_bare_memory_bandwidth_is_bytes_per_second_and_warned_about():
    # 1e-300 printed NaN with status 0; a bare 3.35 (bytes/s) went without a word
    status, out, err = cli("predict", *HYBRID, "--workers", "8", "--compute-model", "h100-bf16",
                           "--memory-bandwidth", "3.35", "--json")  # fmt: skip
    assert status == 0
    assert any("warning: --memory-bandwidth 3.35 is 3.35 bytes/s" in line for line in err), err
    cm = ComputeModel(load_gemm_table("h100-bf16"), 3.35)
    assert json.loads(out)[0]["throughput"] == api(1, 8, cm)


def test_bad_combinations_are_one_line(tmp_path):
    nopeak = tmp_path / "nopeak.json"
    nopeak.write_text(json.dumps({"gemm": [{"M": 8, "N": 8, "K": 8, "seconds": 1e-6}]}))
    cases = [
        (["predict", *HYBRID, "--compute-model", str(nopeak)], "peak_tflops"),
        (["sweep", *HYBRID, "--compute-model", "h100-bf16,h100-bf16"], "one table per sweep"),
        (["predict", "--scheme", "ring-allreduce", "--compute-model", "h100-bf16"], "a parameter of ring"),
        (["predict", "--scheme", "hybrid", "--compute-model", "h100-bf16"], "without --shape"),
    ]
    for argv, says in cases:
        status, _, err = cli(*argv, "--workers", "8")
        assert status == 2 and len(err) == 1, err
        assert err[0].startswith("queuesgd: error: --compute-model: got ") and says in err[0], err[0]
        assert "ComputeModel(" not in err[0]  # the text given, not the object's repr


def test_a_table_row_whose_labels_are_not_its_shape_is_one_line_naming_row_value_and_shape(tmp_path):
    """Row 4 of the shipped table is qkv at h = 1024, tp = 2 (N = 3h/tp = 1536): tp 4 there is refused;
    the table with the row's own tp predicts as the shipped one does (it is the shipped one)."""
    from pathlib import Path

    data = json.loads((Path(q.__file__).parent / "data" / "gemm" / "h100-bf16.json").read_text())
    data["peak_tflops"] = 989.4
    assert (data["gemm"][4]["op"], data["gemm"][4]["h"], data["gemm"][4]["K"], data["gemm"][4]["N"]) == (
        "qkv", 1024, 1024, 1536,
    )  # fmt: skip
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    good.write_text(json.dumps(data))
    data["gemm"][4]["tp"] = 4
    bad.write_text(json.dumps(data))
    status, _, err = cli("predict", *HYBRID, "--workers", "8", "--compute-model", str(bad))
    assert status == 2 and len(err) == 1
    assert err[0].startswith(f"queuesgd: error: --compute-model: got '{bad}'")
    assert err[0].endswith(f"; {bad}.gemm[4].tp: got 4, expected 2, as qkv has K = h, N = 3h/tp "
                           "(the row's K = 1024, N = 1536)")  # fmt: skip
    status, out, _ = cli("predict", *HYBRID, "--workers", "8", "--compute-model", str(good), "--json")
    shipped = ComputeModel(load_gemm_table("h100-bf16"), None)
    assert status == 0 and json.loads(out)[0]["throughput"] == api(1, 8, shipped)


def test_a_shapes_workload_is_its_own_or_a_catalog_workload_of_its_size():
    # without --workload the shape's own workload (micro-batch 1), said in the title
    status, out, _ = cli("predict", *HYBRID, "--tensor", "2", "--workers", "8", "--json")
    assert status == 0 and json.loads(out)[0]["throughput"] == api(2, 8, None)
    status, out, _ = cli("predict", *HYBRID, "--tensor", "2", "--workers", "8")
    assert "the shape's own, micro-batch 1" in out.splitlines()[0]
    # a catalog workload of another model (resnet50: 102 MB over the shape's 357M parameters) is refused
    status, _, err = cli("predict", *HYBRID, "--workload", "resnet50", "--tensor", "2", "--workers", "8")
    assert status == 2 and len(err) == 1 and err[0].startswith("queuesgd: error: --workload: got 'resnet50'")
    assert "0.286 bytes per parameter" in err[0]
    # a sweep over several shapes needs --workload (each shape has its own)
    status, _, err = cli("sweep", "--scheme", "hybrid", "--shape", f"{SHAPE},4:1024:16:2048:51200",
                         "--workers", "8")  # fmt: skip
    assert status == 2 and err[0].startswith("queuesgd: error: --shape:")


def test_the_python_api_refuses_a_workload_of_another_model_too():
    from queuesgd.errors import InvalidParameterError

    scheme = HybridParallel(tensor=2, shape=SHAPE)
    with pytest.raises(InvalidParameterError, match=r"^workload: got 'resnet50'.*0\.286 bytes per parameter"):
        q.predict(scheme, "resnet50", q.Cluster(8, "100Gbit/s"))
    w = parse_shape(SHAPE).workload(1)  # 2 bytes a parameter; 1 and 4 (fp8, fp32) are accepted as well
    for factor in (0.5, 1.0, 2.0):
        held = dataclasses.replace(w, parameter_bytes=w.parameter_bytes * factor)
        assert q.predict(scheme, held, q.Cluster(8, "100Gbit/s")).throughput > 0
