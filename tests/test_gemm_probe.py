"""The GEMM probe on the CPU with tiny sizes: the format the table loader reads, and its bounds."""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from queuesgd import gemm_probe  # noqa: E402
from queuesgd.errors import InvalidParameterError  # noqa: E402
from queuesgd.gemm_probe import _fill, _gpu_state, _soak, main, probe_gemm, write_gemm_table  # noqa: E402
from queuesgd.gemm_table import gemm_table_from_json, load_gemm_table  # noqa: E402

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
        ({"hidden": (16, 32, 16)}, r"hidden\[2\]: got 16; accepted: distinct integers, not hidden\[0\]"),
        ({"tokens": (8, 8)}, r"tokens\[1\]"),
        ({"tensor": (1, 2, 2)}, r"tensor\[2\]"),
        ({"elementwise": (256, 256)}, r"elementwise\[1\]"),
        ({"dtype": "int8"}, "dtype"),
        ({"device": "gpu"}, "device"),
        ({"budget": float("inf")}, "budget"),
        ({"repeats": 0}, "repeats"),
        ({"sustain": -1.0}, "sustain"),
        ({"sustain": float("nan")}, "sustain"),
        ({"sustain": float("inf")}, "sustain"),
        ({"sustain": "60"}, "sustain"),
        ({"sustain": True}, "sustain"),
        ({"window": -0.5}, "window"),
        ({"window": float("nan")}, "window"),
        ({"window": "0.5"}, "window"),
        ({"window": None}, "window"),
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


# ------------------------------------------------------------------- a sustained table (issue 24)
ONE = {
    "hidden": (16,),
    "tokens": (8,),
    "tensor": (1,),
    "elementwise": (256,),
    "device": "cpu",
    "dtype": "float32",
}
OLD_KEYS = {
    "device",
    "torch",
    "date",
    "dtype",
    "how",
    "source",
    "gemm",
    "elementwise",
    "truncated",
    "skipped",
}


def test_defaults_keep_the_old_table_format():
    for table in (probe_gemm(**ONE), probe_gemm(**ONE, sustain=0.0, window=0)):
        assert set(table) == OLD_KEYS
        assert {k for r in table["gemm"] for k in r} == {"op", "h", "tp", "M", "K", "N", "seconds", "tflops"}
        assert {k for r in table["elementwise"] for k in r} == {"op", "numel", "seconds", "GBps"}
        assert table["how"] == "mean of 20 calls after 3 warm-ups, random data, timed with time.perf_counter"


def test_a_soak_then_windows_records_its_settings_and_counts():
    t0 = time.monotonic()
    table = probe_gemm(**ONE, sustain=0.05, window=0.02, peak_flops=1e12)
    assert time.monotonic() - t0 < 3
    assert set(table) > OLD_KEYS and not table["truncated"]
    assert (table["sustain"], table["window"], table["sustain_stopped"]) == (0.05, 0.02, False)
    assert table["sustained_seconds"] >= 0.05 and table["soak_calls"] >= 1
    assert table["soak_product"].startswith(("fc1 h=16 t=1 M=8", "fc2 h=16 t=1 M=8"))  # 2 x 8 x 16 x 64 FLOPs
    assert table["soak_trace"] and all(
        r["tflops"] > 0 and r["sm_clock_mhz"] is None for r in table["soak_trace"]
    )
    assert "heat soak" in table["how"] and "window of at least 0.02 s" in table["how"]
    entries = table["gemm"] + table["elementwise"]
    assert len(entries) == 4 + 3
    for r in entries:
        assert r["seconds"] > 0 and r["calls"] >= 1 and isinstance(r["calls"], int)
        assert r["timed_seconds"] >= 0.02  # the window is filled
        assert r["seconds"] == pytest.approx(r["timed_seconds"] / r["calls"])
    assert all(r["tflops"] > 0 for r in table["gemm"]) and all(r["GBps"] > 0 for r in table["elementwise"])
    assert list(table["gpu_state"]) == ["before_soak", "after_soak", "end"]
    for reading in table["gpu_state"].values():  # a CPU: null, and why
        assert (
            reading["sm_clock_mhz"] is None
            and reading["power_w"] is None
            and reading["temperature_c"] is None
        )
        assert reading["null_why"]["sm_clock_mhz"] == "not a CUDA device"
    json.dumps(table, allow_nan=False)  # JSON as written
    assert gemm_table_from_json(table).provenance["how"] == table["how"]  # the loader reads it as before


def test_window_without_a_soak_and_repeats_with_one():
    table = probe_gemm(**ONE, window=0.01)
    assert table["sustain"] == 0.0 and table["soak_calls"] == 0 and table["soak_trace"] == []
    assert all(r["calls"] >= 1 and r["timed_seconds"] >= 0.01 for r in table["gemm"])
    assert table["how"].startswith("mean over a window of at least 0.01 s")
    table = probe_gemm(**ONE, sustain=0.01, repeats=3)  # no window: repeats calls, counted as such
    assert table["window"] == 0.0 and all(r["calls"] == 3 for r in table["gemm"])


def test_the_budget_stops_a_long_soak_and_the_windows():
    t0 = time.monotonic()
    table = probe_gemm(**ONE, sustain=30.0, window=0.5, budget=0.5)
    assert time.monotonic() - t0 < 2.5
    assert table["sustain_stopped"] and table["truncated"] and table["gemm"] == []
    assert 0.3 < table["sustained_seconds"] < 1.5 and "stopped by the budget" in table["how"]
    t0 = time.monotonic()
    table = probe_gemm(**ONE, window=0.2, budget=0.5)  # room for two windows at most
    assert time.monotonic() - t0 < 2.5
    assert table["truncated"] and 1 <= len(table["gemm"]) <= 3 and not table["sustain_stopped"]


def _fake_torch(**cuda):
    return SimpleNamespace(
        __version__="0.0-fake", device=lambda d: SimpleNamespace(index=0), cuda=SimpleNamespace(**cuda)
    )


def test_gpu_readings_record_null_and_why_and_never_raise():
    def broken(index):
        raise RuntimeError("pynvml does not seem to be installed")

    state = _gpu_state(_fake_torch(clock_rate=broken, power_draw=lambda i: 350_000), "cuda:0")
    assert state["sm_clock_mhz"] is None and "RuntimeError: pynvml" in state["null_why"]["sm_clock_mhz"]
    assert state["power_w"] == 350.0  # milliwatts to watts
    assert (
        state["temperature_c"] is None
        and "has no torch.cuda.temperature" in state["null_why"]["temperature_c"]
    )
    state = _gpu_state(
        _fake_torch(clock_rate=lambda i: 1755, power_draw=lambda i: math.nan, temperature=lambda i: 61),
        "cuda",
    )
    assert (state["sm_clock_mhz"], state["power_w"], state["temperature_c"]) == (1755.0, None, 61.0)
    assert set(state["null_why"]) == {"power_w"}


#: The stand-in device's clock (seconds): a kernel of the tests advances it by its own length, so the
#: events time it exactly, however busy the machine running the test is.
_DEVICE_CLOCK = [0.0]


def _kernel(seconds=1e-4):
    """A stand-in kernel of ``seconds`` on the device clock (and a sleep as long, on the host's)."""
    time.sleep(seconds)
    _DEVICE_CLOCK[0] += seconds


class _Event:
    """A stand-in for torch.cuda.Event on the stand-in device's clock."""

    def __init__(self, enable_timing=True):
        self.at = None

    def record(self):
        self.at = _DEVICE_CLOCK[0]

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


def test_the_cuda_path_with_a_stand_in_device():
    clocks = iter(range(1980, 0, -15))  # a clock falling as the soak goes on
    fake = _fake_torch(
        Event=_Event, synchronize=lambda d: None, clock_rate=lambda i: next(clocks), power_draw=lambda i: 7e5
    )
    calls, spent = _fill(fake, "cuda", _kernel, 0.01, per_call=1.0)  # the estimate far off
    # the first round: 1 call (0.01 / 1.0 rounded up); the second fills the 0.0099 s left at 1e-4 s a call
    assert spent >= 0.01 and calls >= 100 and spent == pytest.approx(1e-4 * calls, rel=1e-9)
    calls, spent, trace = _soak(fake, "cuda", _kernel, 0.02, flops=1e9, warm=3)
    assert (
        calls >= 1 and spent >= 0.02 and trace[0]["sm_clock_mhz"] == 1980.0 and trace[0]["power_w"] == 700.0
    )
    assert trace[0]["temperature_c"] is None and trace[0]["tflops"] > 0


def test_command_line_sustained(tmp_path, capsys, monkeypatch):
    probe = gemm_probe.probe_gemm
    monkeypatch.setattr(gemm_probe, "probe_gemm", lambda **kw: probe(**kw, elementwise=(256,)))  # fast
    out = tmp_path / "hot.json"
    argv = [
        str(out),
        "--hidden",
        "8",
        "--tokens",
        "4",
        "--tensor",
        "1",
        "--device",
        "cpu",
        "--dtype",
        "float32",
    ]
    assert main([*argv, "--sustain", "0.02", "--window", "0.01", "--peak-tflops", "1"]) == 0
    assert "soak" in capsys.readouterr().out
    table = json.loads(out.read_text())
    assert (table["sustain"], table["window"]) == (0.02, 0.01) and all(r["calls"] >= 1 for r in table["gemm"])
    for flag, value, field in (
        ("--sustain", "-1", "sustain"),
        ("--window", "nan", "window"),
        ("--window", "x", "--window"),
    ):
        assert main([str(tmp_path / "bad.json"), flag, value]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err and "Traceback" not in err, err
        assert not (tmp_path / "bad.json").exists()
