"""The workload catalog, checked against the numbers in the data's own README.

Independent source: ``models/traces/training-bottleneck/README.md`` (copied
from the netx-repo/training-bottleneck data) states the tensor counts, byte
totals and backward times; the single-GPU batch times are the authors'.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from queuesgd.catalog import (
    catalog_dirs,
    list_workloads,
    load_trace,
    load_vector_add_curve,
    load_workload,
    vector_add_time,
    workload_info,
)
from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.workload import CostCurve, Workload

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "models" / "traces" / "training-bottleneck"

# name: (tensors, gradient bytes, backward ms, single-GPU batch seconds), from the README.
README_TOTALS = {
    "resnet50": (161, 102_228_128, 64.81, 0.12808580219559176),
    "resnet101": (314, 178_196_640, 106.41, 0.19200599479476405),
    "vgg16": (58, 553_463_968, 111.62, 0.19452352295080985),
}


@pytest.fixture(autouse=True)
def _no_user_catalog(monkeypatch):
    monkeypatch.delenv("QUEUESGD_MODELS", raising=False)


def _vec_add_points() -> tuple[np.ndarray, np.ndarray]:
    """Parse cuda_vec_add.log independently of the library (plain str.split)."""
    rows = [line.split(",") for line in (TRACES / "cuda_vec_add.log").read_text().split("\n") if line]
    return np.array([float(r[0]) for r in rows]), np.array([float(r[1]) for r in rows])


def test_list_workloads_contains_the_three():
    names = list_workloads()
    assert {"resnet50", "resnet101", "vgg16"} <= set(names)
    assert names == sorted(names)


@pytest.mark.parametrize("name", sorted(README_TOTALS))
def test_trace_totals_match_readme(name):
    tensors, nbytes, backward_ms, _ = README_TOTALS[name]
    layers = load_trace(TRACES / f"{name}.bk.log")
    assert len(layers) == tensors
    assert sum(layer.gradient_bytes for layer in layers) == nbytes
    assert sum(layer.backward_time for layer in layers) * 1e3 == pytest.approx(backward_ms, abs=0.005)
    assert all(layer.forward_time is None for layer in layers)
    assert [layer.name for layer in layers[:2]] == ["tensor0", "tensor1"]


@pytest.mark.parametrize("name", sorted(README_TOTALS))
def test_load_workload_matches_readme(name):
    tensors, nbytes, backward_ms, batch_time = README_TOTALS[name]
    w = load_workload(name)
    assert isinstance(w, Workload)
    assert w.name == name
    assert w.batch_size == 32
    assert isinstance(w.compute, Deterministic)
    assert w.compute_time == batch_time
    assert w.samples_per_second_single == pytest.approx(32 / batch_time)
    assert len(w.layers) == tensors
    assert w.gradient_bytes == nbytes
    assert w.parameter_bytes == nbytes
    assert w.backward_time * 1e3 == pytest.approx(backward_ms, abs=0.005)
    assert w.ready_times[-1] == pytest.approx(w.backward_time)
    # The backward pass is part of, and shorter than, the whole step.
    assert w.backward_time < w.compute_time


def test_first_trace_line_parsed_in_seconds():
    # resnet50.bk.log line 4: "552.6383717854818,4000" -> 552.6 us, 4000 bytes (the fc bias).
    first = load_trace(TRACES / "resnet50.bk.log")[0]
    assert first.gradient_bytes == 4000.0
    assert first.backward_time == pytest.approx(552.6383717854818e-6, rel=1e-12)


@pytest.mark.parametrize("name", sorted(README_TOTALS))
def test_update_time_is_linear_interpolation_of_vec_add_curve(name):
    xs, ys = _vec_add_points()
    nbytes = README_TOTALS[name][1]
    assert xs[0] <= nbytes <= xs[-1]
    expected = float(np.interp(nbytes, xs, ys))
    assert load_workload(name).update_time == pytest.approx(expected, rel=1e-12)


def test_update_time_by_hand_for_vgg16():
    # 553,463,968 B lies between 335,544,320 B (1.22295 ms) and 671,088,640 B (2.43368 ms).
    frac = (553_463_968 - 335_544_320) / (671_088_640 - 335_544_320)
    expected = 0.00122295 + frac * (0.00243368 - 0.00122295)
    assert load_workload("vgg16").update_time == pytest.approx(expected, rel=1e-12)


def test_names_are_case_insensitive():
    assert load_workload("ResNet50").gradient_bytes == load_workload("RESNET50").gradient_bytes


def test_unknown_workload_lists_known_names():
    with pytest.raises(UnknownNameError) as info:
        load_workload("alexnet")
    err = info.value
    assert err.field == "workload"
    assert err.got == "alexnet"
    assert "'resnet50'" in str(err) and "'vgg16'" in str(err)
    assert isinstance(err, ValueError)


def test_workload_info_has_provenance():
    info = workload_info("resnet101")
    assert info["source"]["license"] == "Apache-2.0"
    assert "netx-repo/training-bottleneck" in info["source"]["repository"]
    assert info["framework"] == "PyTorch" and info["hardware"] == "NVIDIA V100"
    assert info["dtype"] == "float32"
    assert Path(info["path"]).name == "resnet101.json"


def test_license_and_attribution_shipped_with_traces():
    assert "Apache License" in (TRACES / "LICENSE").read_text()
    readme = (TRACES / "README.md").read_text()
    assert "netx-repo/training-bottleneck" in readme and "Apache License 2.0" in readme


# ---------------------------------------------------------------- vector-add curve


def test_vector_add_curve_matches_independent_parse():
    xs, ys = _vec_add_points()
    nbytes, seconds = load_vector_add_curve(TRACES / "cuda_vec_add.log")
    np.testing.assert_array_equal(nbytes, xs)
    np.testing.assert_array_equal(seconds, ys)
    default_bytes, _ = load_vector_add_curve()
    assert len(default_bytes) == 25


def test_vector_add_time_interpolates_clamps_and_extrapolates():
    xs, ys = _vec_add_points()
    curve = (xs, ys)
    sizes = np.array([40.0, 1e3, 5e7, 3e8])
    np.testing.assert_allclose(vector_add_time(sizes, curve), np.interp(sizes, xs, ys), rtol=1e-12)
    assert vector_add_time(0, curve) == ys[0]  # below the curve: launch cost
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    assert vector_add_time(2 * xs[-1], curve) == pytest.approx(ys[-1] + slope * xs[-1], rel=1e-12)
    assert vector_add_time("64MiB", curve) == pytest.approx(np.interp(2**26, xs, ys))
    with pytest.raises(InvalidParameterError, match="nbytes"):
        vector_add_time(-1, curve)


def test_vector_add_time_on_the_builtin_curve_is_unchanged():
    # The curve's last line is "671088640,0.00243368".
    assert vector_add_time(671088640) == 0.00243368
    assert vector_add_time(671088640, CostCurve.from_file()) == 0.00243368
    xs, ys = _vec_add_points()
    curve = CostCurve.from_file(TRACES / "cuda_vec_add.log")
    assert curve == CostCurve(xs, ys)
    sizes = np.array([100.0, 3e6, 5e8])
    np.testing.assert_allclose(vector_add_time(sizes), np.interp(sizes, xs, ys), rtol=1e-12)
    with pytest.raises(InvalidParameterError) as info:
        vector_add_time(10, "cuda_vec_add.log")
    assert info.value.field == "curve"
    with pytest.raises(InvalidParameterError) as info:
        vector_add_time(10, (np.array([5.0, 1.0]), np.array([1.0, 1.0])))  # sizes not increasing
    assert info.value.field == "CostCurve.sizes"


@pytest.mark.parametrize("name", sorted(README_TOTALS))
def test_builtin_workloads_carry_the_vector_add_curve(name):
    xs, ys = _vec_add_points()
    w = load_workload(name)
    assert w.add_cost == CostCurve(xs, ys)
    # The reduction of the whole gradient costs what the derived update costs.
    assert w.reduction_time(w.gradient_bytes) == w.update_time
    assert w.reduction_time(1e6) == pytest.approx(np.interp(1e6, xs, ys), rel=1e-12)


def test_resnet50_update_time_stays_0_380_ms():
    assert round(load_workload("resnet50").update_time * 1e3, 3) == 0.380


def test_resnet50_phase_times_derive_the_forward_pass():
    # Backward total from the raw trace (plain str.split), independent of load_trace.
    lines = (TRACES / "resnet50.bk.log").read_text().split("\n")
    gaps_us = [float(line.split(",")[0]) for line in lines[3:] if line.strip()]
    backward = sum(gaps_us) / 1e6
    p = load_workload("resnet50").phase_times()
    assert p.derived is True and p.other == 0.0
    assert p.backward == pytest.approx(backward, rel=1e-12)
    assert p.forward == pytest.approx(0.12808580219559176 - backward, rel=1e-12)
    assert "compute (128.09 ms) - backward (64.81 ms) = 63.28 ms" in p.note


# ---------------------------------------------------------------- malformed files


def _write_trace(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bad.bk.log"
    path.write_text("comment\n1\n" + body)
    return path


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("3\n1.0,4\n2.0,8\n", "bad.bk.log: tensor count"),  # says 3, has 2
        ("1\n1.0,4\n2.0,8\n", "bad.bk.log: tensor count"),  # says 1, has 2
        ("2\n1.0,4\n2.0\n", "bad.bk.log line 5"),  # missing field
        ("2\n1.0,4\n,8\n", "bad.bk.log line 5: gap_us"),  # empty field
        ("2\n1.0,4\n-2.0,8\n", "bad.bk.log line 5: gap_us"),  # negative time
        ("2\nabc,4\n2.0,8\n", "bad.bk.log line 4: gap_us"),  # non-numeric
        ("2\n1.0,4\n2.0,-8\n", "bad.bk.log line 5: bytes"),  # negative size
        ("2\n1.0,4\n2.0,0\n", "bad.bk.log line 5: bytes"),  # empty tensor
        ("2\n1.0,4\n2.0,nan\n", "bad.bk.log line 5: bytes"),  # not finite
        ("2\n1.0,4,7\n2.0,8\n", "bad.bk.log line 4"),  # extra field
        ("two\n1.0,4\n", "bad.bk.log line 3: tensor count"),
        ("2.5\n1.0,4\n", "bad.bk.log line 3: tensor count"),
    ],
)
def test_malformed_trace_names_line_and_field(tmp_path, body, field):
    with pytest.raises(InvalidParameterError) as info:
        load_trace(_write_trace(tmp_path, body))
    assert info.value.field == field


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("2\n1.0,4,5\n2.0,8,\n", "bad.bk.log line 5: forward_us"),  # missing field
        ("2\n1.0,4,,a\n2.0,8,6,b\n", "bad.bk.log line 4: forward_us"),  # empty on some lines only
        ("2\n1.0,4,5\n2.0,8,-3\n", "bad.bk.log line 5: forward_us"),  # negative
        ("2\n1.0,4,5\n2.0,8,soon\n", "bad.bk.log line 5: forward_us"),  # non-numeric
        ("3\n1.0,4,5\n2.0,8,6\n3.0,8\n", "bad.bk.log line 6"),  # column count differs
        ("3\n1.0,4,5,a\n2.0,8,6\n3.0,8,7,c\n", "bad.bk.log line 5"),
        ("2\n1.0,4,5,a\n2.0,8,6,a\n", "bad.bk.log line 5: name"),  # duplicate name
        ("2\n1.0,4,5,a\n2.0,8,6,\n", "bad.bk.log line 5: name"),  # empty name
        ("2\n1.0,4,5,a,x\n2.0,8,6,b,y\n", "bad.bk.log line 4"),  # five columns
        ("2\n1.0,-4,5,a\n2.0,8,6,b\n", "bad.bk.log line 4: bytes"),
    ],
)
def test_malformed_extended_trace_names_line_and_field(tmp_path, body, field):
    with pytest.raises(InvalidParameterError) as info:
        load_trace(_write_trace(tmp_path, body))
    assert info.value.field == field


WHOLE = "a whole number of bytes > 0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a fractional byte count was read as 4000.5 bytes
        ("c\n1\n1\n5,4000.5\n", f"bad.bk.log line 4: bytes: got '4000.5'; accepted: {WHOLE}"),
        # Arabic-Indic digits were read as 3 and 4000 (float() reads any script's digits)
        ("c\n1\n1\n\u0663,4000\n", "bad.bk.log line 4: gap_us: got '\u0663'; accepted: microseconds >= 0"),
        ("c\n1\n1\n5,\u0664\u0660\u0660\u0660\n",
         f"bad.bk.log line 4: bytes: got '\u0664\u0660\u0660\u0660'; accepted: {WHOLE}"),
        ("c\n1\n1\n5,4_000\n", f"bad.bk.log line 4: bytes: got '4_000'; accepted: {WHOLE}"),
        ("c\n1.5\n1\n5,4000\n", "bad.bk.log line 2: batches: got '1.5'; accepted: an integer >= 1"),
    ],
)  # fmt: skip
def test_a_number_that_is_no_ascii_decimal_or_a_fraction_of_a_byte_is_refused(tmp_path, text, message):
    path = tmp_path / "bad.bk.log"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidParameterError) as info:
        load_trace(path)
    assert str(info.value) == message


def test_a_whole_byte_count_written_as_a_decimal_is_read(tmp_path):
    path = tmp_path / "ok.bk.log"
    path.write_text("c\n1\n2\n5,4000.0\n0,4e3\n")
    assert [x.gradient_bytes for x in load_trace(path)] == [4000.0, 4000.0]


def test_extended_trace_messages_say_what_is_accepted(tmp_path):
    with pytest.raises(InvalidParameterError, match="3 comma-separated fields gap_us,bytes,forward_us like"):
        load_trace(_write_trace(tmp_path, "3\n1.0,4,5\n2.0,8,6\n3.0,8\n"))
    with pytest.raises(InvalidParameterError, match=r"a name not already used \(line 4 has it\)"):
        load_trace(_write_trace(tmp_path, "2\n1.0,4,5,a\n2.0,8,6,a\n"))


def test_extended_trace_columns(tmp_path):
    path = tmp_path / "ext.bk.log"
    path.write_text("c\n1\n2\n1000,4000,250\n0,6000,1500.5\n")
    layers = load_trace(path)
    assert [(x.name, x.gradient_bytes, x.backward_time) for x in layers] == [
        ("tensor0", 4000.0, 1e-3),
        ("tensor1", 6000.0, 0.0),
    ]
    assert [x.forward_time for x in layers] == [250e-6, 1500.5e-6]
    path.write_text("c\n1\n2\n1000,4000,250, fc.bias\n0,6000,0,fc.weight\n")
    layers = load_trace(path)
    assert [x.name for x in layers] == ["fc.bias", "fc.weight"]  # names are stripped
    assert [x.forward_time for x in layers] == [250e-6, 0.0]
    path.write_text("c\n1\n2\n1000,4000,,fc.bias\n0,6000,,fc.weight\n")  # names, no forward times
    layers = load_trace(path)
    assert [(x.name, x.forward_time) for x in layers] == [("fc.bias", None), ("fc.weight", None)]


def test_malformed_trace_header(tmp_path):
    path = tmp_path / "short.bk.log"
    path.write_text("comment\n1\n")
    with pytest.raises(InvalidParameterError, match="short.bk.log line 3"):
        load_trace(path)
    path.write_text("comment\n0\n1\n1.0,4\n")
    with pytest.raises(InvalidParameterError, match="short.bk.log line 2: batches"):
        load_trace(path)
    with pytest.raises(InvalidParameterError, match="path"):
        load_trace(tmp_path / "missing.bk.log")


def test_trailing_blank_lines_and_crlf_are_accepted(tmp_path):
    path = tmp_path / "ok.bk.log"
    path.write_bytes(b"comment\r\n1\r\n2\r\n10,4\r\n0,8\r\n\r\n")
    layers = load_trace(path)
    assert [(x.gradient_bytes, x.backward_time) for x in layers] == [(4.0, 1e-5), (8.0, 0.0)]


def test_malformed_vector_add_curve(tmp_path):
    path = tmp_path / "vec.log"
    path.write_text("40,1e-5\n20,2e-5\n")
    with pytest.raises(InvalidParameterError) as info:
        load_vector_add_curve(path)
    assert info.value.field == "vec.log line 2: bytes"
    path.write_text("40,1e-5\n80,x\n")
    with pytest.raises(InvalidParameterError) as info:
        load_vector_add_curve(path)
    assert info.value.field == "vec.log line 2: seconds"


# ---------------------------------------------------------------- user catalogs


def _user_catalog(tmp_path: Path, name: str, entry: dict) -> Path:
    (tmp_path / "workloads").mkdir(parents=True, exist_ok=True)
    (tmp_path / "workloads" / f"{name}.json").write_text(json.dumps(entry))
    return tmp_path


def test_user_directory_from_env_adds_and_shadows(tmp_path, monkeypatch):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "tiny.bk.log").write_text("c\n1\n2\n1000,4000\n500,6000\n")
    _user_catalog(
        tmp_path,
        "Tiny",
        {
            "name": "tiny",
            "compute": "20ms",
            "batch_size": 8,
            "trace": "../traces/tiny.bk.log",
            "update_time": "1ms",
        },
    )
    _user_catalog(tmp_path, "vgg16", {"name": "VGG16", "compute": 1.0, "gradient_bytes": "1MB"})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    assert catalog_dirs()[0] == tmp_path.resolve()
    assert {"tiny", "resnet50", "vgg16"} <= set(list_workloads())
    tiny = load_workload("TINY")
    assert tiny.gradient_bytes == 10_000.0
    assert tiny.backward_time == pytest.approx(1.5e-3)
    assert tiny.update_time == pytest.approx(1e-3)
    assert tiny.samples_per_second_single == pytest.approx(400.0)
    assert load_workload("vgg16").gradient_bytes == 1e6  # the user's entry wins
    # A JSON path works without the environment variable too.
    assert load_workload(tmp_path / "workloads" / "Tiny.json").batch_size == 8


def test_user_entry_with_distribution_and_derived_update(tmp_path, monkeypatch):
    curve = tmp_path / "curve.log"
    curve.write_text("0,1e-5\n1000000,1.1e-3\n")
    _user_catalog(
        tmp_path,
        "noisy",
        {
            "compute": {"distribution": "Exponential", "mean": 0.05},
            "gradient_bytes": "500kB",
            "update_time": {"vector_add_curve": "../curve.log"},
        },
    )
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("noisy")
    assert w.compute_time == pytest.approx(0.05)
    assert w.update_time == pytest.approx(1e-5 + 0.5 * (1.1e-3 - 1e-5))
    assert w.name == "noisy" and w.batch_size == 1


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "other", "compute": 1.0, "gradient_bytes": 1}, "bad.json: name"),
        ({"gradient_bytes": 1}, "bad.json: compute"),
        ({"compute": 1.0, "gradient_bytes": 1, "trace": "nope.log"}, "bad.json: trace"),
        ({"compute": {"distribution": "Cauchy"}, "gradient_bytes": 1}, "bad.json: compute.distribution"),
        ({"compute": 1.0, "gradient_bytes": 1, "update_time": {"curve": "x"}}, "bad.json: update_time"),
        ({"compute": 1.0, "gradient_bytes": "lots"}, "bad.json: gradient_bytes"),
        ({"compute": 1.0, "gradient_bytes": 1, "batch_size": 0}, "Workload.batch_size"),
    ],
)
def test_bad_user_entries_name_the_field(tmp_path, monkeypatch, entry, field):
    _user_catalog(tmp_path, "bad", entry)
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(InvalidParameterError) as info:
        load_workload("bad")
    assert info.value.field == field


def test_invalid_json_names_the_line(tmp_path, monkeypatch):
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "broken.json").write_text('{\n  "compute": 1.0,\n}\n')
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(InvalidParameterError, match="broken.json line 3"):
        load_workload("broken")


def test_missing_json_path():
    with pytest.raises(InvalidParameterError, match="workload"):
        load_workload("/nonexistent/model.json")


@pytest.mark.parametrize(
    ("spec", "mean", "scv"),
    [
        ({"distribution": "LogNormal", "mean": 0.31, "scv": 0.01}, 0.31, 0.01),
        ({"distribution": "Gamma", "shape": 100, "mean": 0.31}, 0.31, 0.01),
        ({"distribution": "Deterministic", "value": 0.31}, 0.31, 0.0),
    ],
)
def test_user_entry_distribution_specs(tmp_path, monkeypatch, spec, mean, scv):
    _user_catalog(tmp_path, "dist", {"compute": spec, "gradient_bytes": 1})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("dist")
    assert w.compute_time == pytest.approx(mean, rel=1e-12)
    assert float(w.compute.scv) == pytest.approx(scv, abs=1e-12)


def test_user_entry_bad_distribution_parameters(tmp_path, monkeypatch):
    _user_catalog(tmp_path, "dist", {"compute": {"distribution": "Normal", "mu": 1}, "gradient_bytes": 1})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(InvalidParameterError, match="parameters accepted by Normal") as info:
        load_workload("dist")
    assert info.value.field == "dist.json: compute"


def _extended_catalog(tmp_path: Path, entry: dict) -> Path:
    """A user catalog entry ``ext`` on a two-tensor trace named a, b without forward times."""
    (tmp_path / "traces").mkdir(exist_ok=True)
    (tmp_path / "traces" / "ext.bk.log").write_text("c\n1\n2\n1000,4000,,a\n500,6000,,b\n")
    base = {"compute": "20ms", "trace": "../traces/ext.bk.log"}
    return _user_catalog(tmp_path, "ext", {**base, **entry})


def test_user_trace_with_forward_and_name_columns(tmp_path, monkeypatch):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "fwd.bk.log").write_text("c\n1\n2\n1000,4000,3000,fc.bias\n500,6000,2000,fc.w\n")
    _user_catalog(tmp_path, "fwd", {"compute": "10ms", "trace": "../traces/fwd.bk.log"})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("fwd")
    assert [x.name for x in w.layers] == ["fc.bias", "fc.w"]
    assert w.forward_time == pytest.approx(5e-3, rel=1e-12)
    p = w.phase_times()
    # 10 ms step = forward 5 ms + backward 1.5 ms + other 3.5 ms.
    assert (p.derived, p.forward, p.backward) == (False, pytest.approx(5e-3), pytest.approx(1.5e-3))
    assert p.other == pytest.approx(3.5e-3, rel=1e-9)
    assert w.add_cost is None and w.update_time == 0.0


def test_user_forward_time_field_by_tensor_name(tmp_path, monkeypatch):
    _extended_catalog(tmp_path, {"forward_time": {"b": "2ms", "a": 0.004}})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("ext")
    assert [x.forward_time for x in w.layers] == [0.004, 0.002]
    assert w.forward_time == pytest.approx(6e-3, rel=1e-12)
    assert w.phase_times().other == pytest.approx(20e-3 - 6e-3 - 1.5e-3, rel=1e-9)


def test_user_forward_time_on_a_plain_trace_uses_default_names(tmp_path, monkeypatch):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "ext.bk.log").write_text("c\n1\n2\n1000,4000\n500,6000\n")
    _user_catalog(
        tmp_path,
        "ext",
        {"compute": 0.02, "trace": "../traces/ext.bk.log", "forward_time": {"tensor0": 1e-3, "tensor1": 0}},
    )
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    assert [x.forward_time for x in load_workload("ext").layers] == [1e-3, 0.0]


def test_user_forward_time_unknown_name(tmp_path, monkeypatch):
    _extended_catalog(tmp_path, {"forward_time": {"a": 1e-3, "b": 1e-3, "fc": 1e-3}})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(UnknownNameError) as info:
        load_workload("ext")
    assert info.value.field == "ext.json: forward_time"
    assert info.value.got == "fc"
    assert "one of 'a', 'b'" in str(info.value)


def test_user_forward_time_unknown_name_lists_some_of_many(tmp_path, monkeypatch):
    lines = "".join(f"10,4,,t{i}\n" for i in range(20))
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "many.bk.log").write_text(f"c\n1\n20\n{lines}")
    _user_catalog(
        tmp_path, "many", {"compute": 1, "trace": "../traces/many.bk.log", "forward_time": {"x": 0}}
    )
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(UnknownNameError, match=r"'t7', \.\.\. \(12 more\)$"):
        load_workload("many")


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"forward_time": {"a": 1e-3}}, "ext.json: forward_time"),  # b is not covered
        ({"forward_time": {"a": -1e-3, "b": 0}}, "ext.json: forward_time.a"),  # negative
        ({"forward_time": {"a": "-1ms", "b": 0}}, "ext.json: forward_time.a"),
        ({"forward_time": {"a": "soon", "b": 0}}, "ext.json: forward_time.a"),  # non-numeric
        ({"forward_time": [1e-3, 1e-3]}, "ext.json: forward_time"),  # not by name
        ({"add_cost": "../curve.log"}, "ext.json: add_cost"),
        ({"add_cost": {"curve": "../curve.log"}}, "ext.json: add_cost"),
        ({"add_cost": {"vector_add_curve": "nope.log"}}, "ext.json: add_cost.vector_add_curve"),
    ],
)
def test_bad_user_forward_time_and_add_cost(tmp_path, monkeypatch, entry, field):
    _extended_catalog(tmp_path, entry)
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(InvalidParameterError) as info:
        load_workload("ext")
    assert info.value.field == field


def test_user_forward_time_not_covering_says_which_are_missing(tmp_path, monkeypatch):
    _extended_catalog(tmp_path, {"forward_time": {"b": 1e-3}})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    with pytest.raises(InvalidParameterError, match="every tensor of the trace; missing 'a'") as info:
        load_workload("ext")
    assert info.value.got == "1 of 2 tensors"


def test_user_forward_time_needs_a_trace_and_not_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    _user_catalog(tmp_path, "notrace", {"compute": 1, "gradient_bytes": 8, "forward_time": {"a": 0}})
    with pytest.raises(InvalidParameterError, match="a trace to attach forward times to") as info:
        load_workload("notrace")
    assert info.value.field == "notrace.json: forward_time"
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "fwd.bk.log").write_text("c\n1\n1\n1000,4000,3000\n")
    _user_catalog(
        tmp_path, "twice", {"compute": 1, "trace": "../traces/fwd.bk.log", "forward_time": {"tensor0": 0}}
    )
    with pytest.raises(InvalidParameterError, match="not both") as info:
        load_workload("twice")
    assert info.value.field == "twice.json: forward_time"


def test_user_add_cost_field_keeps_the_given_update_time(tmp_path, monkeypatch):
    (tmp_path / "curve.log").write_text("0,1e-5\n1000000,1.1e-3\n")
    _extended_catalog(tmp_path, {"update_time": "3ms", "add_cost": {"vector_add_curve": "../curve.log"}})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("ext")
    assert w.update_time == pytest.approx(3e-3)
    assert w.add_cost == CostCurve([0, 1e6], [1e-5, 1.1e-3])
    assert w.reduction_time(5e5) == pytest.approx(1e-5 + 0.5 * (1.1e-3 - 1e-5), rel=1e-12)


def test_user_derived_update_time_also_sets_add_cost(tmp_path, monkeypatch):
    (tmp_path / "curve.log").write_text("0,1e-5\n1000000,1.1e-3\n")
    (tmp_path / "other.log").write_text("0,0\n1000000,1e-3\n")
    _extended_catalog(tmp_path, {"update_time": {"vector_add_curve": "../curve.log"}})
    monkeypatch.setenv("QUEUESGD_MODELS", str(tmp_path))
    w = load_workload("ext")
    # 10,000 B: 1e-5 + 0.01 * (1.1e-3 - 1e-5)
    assert w.update_time == pytest.approx(1e-5 + 0.01 * 1.09e-3, rel=1e-12)
    assert w.add_cost == CostCurve([0, 1e6], [1e-5, 1.1e-3])
    # An explicit add_cost wins over the update_time curve for reductions.
    _extended_catalog(
        tmp_path,
        {
            "update_time": {"vector_add_curve": "../curve.log"},
            "add_cost": {"vector_add_curve": "../other.log"},
        },
    )
    w = load_workload("ext")
    assert w.update_time == pytest.approx(1e-5 + 0.01 * 1.09e-3, rel=1e-12)
    assert w.reduction_time(5e5) == pytest.approx(5e-4, rel=1e-12)
