"""Measure a GEMM efficiency table on the device at hand (PyTorch), in the format queuesgd loads.

:func:`probe_gemm` times the matrix products of a transformer layer in
Megatron's layout -- ``(M x K) @ (K x N)`` with ``M`` tokens per
micro-batch, hidden size ``h`` and tensor-parallel degree ``t``: QKV ``(h,
3h/t)`` and the first MLP product ``(h, 4h/t)`` split by columns, the
projection ``(h/t, h)`` and the second MLP product ``(4h/t, h)`` by rows --
and two memory-bound kernels (GeLU, LayerNorm), and returns the JSON
document :func:`queuesgd.gemm_table.load_gemm_table` reads (the format of
``shared/data/gpu/measure_gemm.py``, with its provenance fields).

How it times: ``warmup`` calls first, then ``repeats`` calls between two
CUDA events on a GPU (the device's own clock; no host synchronization per
call), or :func:`time.perf_counter` on a CPU; the mean per call. What it
bounds: every dimension, every operand's elements (``max_elements``), and
the wall time (``budget`` seconds: shapes left when it runs out are not
measured, and ``"truncated": true`` says so). PyTorch is imported only here
(``pip install -e ".[validation]"``).

A sustained table (``sustain`` and ``window`` seconds, both 0 by default):
the default table times a few calls after a few warm-ups, so a GPU that
was idle runs them at its boost clock; a GPU under training load may run
slower, at the clock its power and temperature limits allow. With
``sustain > 0`` the probe first keeps the device busy for ``sustain``
seconds with the sweep's largest product back to back (a heat soak; every
half second ``soak_trace`` records its TFLOP/s, SM clock, power and
temperature), then times the table; with ``window > 0`` each entry is the
mean over at least ``window`` seconds of back-to-back calls (their number
in the entry's ``calls``), not over ``repeats`` calls. Both record the SM
clock, power draw and temperature before the soak, after it and at the
end (CUDA only; ``null``, with the reason, where they cannot be read).

Examples
--------
>>> table = probe_gemm(hidden=(16,), tokens=(8,), tensor=(1, 2), elementwise=(1024,), repeats=2,
...                    device="cpu", dtype="float32")
>>> len(table["gemm"]), sorted({r["op"] for r in table["gemm"]}), table["truncated"]
(8, ['fc1', 'fc2', 'proj', 'qkv'], False)
>>> from queuesgd.gemm_table import gemm_table_from_json
>>> gemm_table_from_json(table, peak_flops=1e15).provenance["dtype"]
'float32'
>>> hot = probe_gemm(hidden=(16,), tokens=(8,), tensor=(1,), elementwise=(), device="cpu",
...                  dtype="float32", sustain=0.02, window=0.01)
>>> hot["sustain"], hot["window"], hot["sustain_stopped"], all(r["calls"] >= 1 for r in hot["gemm"])
(0.02, 0.01, False, True)
>>> hot["gpu_state"]["after_soak"]["sm_clock_mhz"] is None   # a CPU: no clock to read
True
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from queuesgd import _checks
from queuesgd.command_line import Parser, device_arguments, run_command
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_layer import layer_products
from queuesgd.harness import check_device, require_torch

__all__ = ["DTYPES", "MAX_DIMENSION", "build_parser", "main", "probe_gemm", "write_gemm_table"]

#: Data types the probe takes, by their PyTorch names.
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
#: Largest hidden size or token count the probe takes.
MAX_DIMENSION = 2**17


#: Longest round of the heat soak between two synchronizations (its trace's resolution), in seconds.
SOAK_ROUND = 0.5
#: Most calls one window or soak round enqueues at once.
_MAX_CALLS = 10_000_000
#: What :func:`_gpu_state` reads: the field, the ``torch.cuda`` function, the factor to the field's unit.
_READINGS = (
    ("sm_clock_mhz", "clock_rate", 1.0),
    ("power_w", "power_draw", 1e-3),
    ("temperature_c", "temperature", 1.0),
)


def _run_calls(
    torch: Any, device: str, fn: Callable[[], Any], n: int, until: float | None = None
) -> tuple[int, float]:
    """``(calls, seconds)`` of ``n`` back-to-back calls of ``fn``: one synchronize before, one at the end.

    CUDA events time them on a GPU (no host synchronization per call, all
    ``n`` calls), :func:`time.perf_counter` on a CPU, where the calls stop
    early once ``until`` seconds have passed (if given).
    """
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return n, start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    if until is None:
        for _ in range(n):
            fn()
        return n, time.perf_counter() - t0
    done = 0
    while done < n:  # a CPU runs each call before the next: stop when the time is filled
        fn()
        done += 1
        if time.perf_counter() - t0 >= until:
            break
    return done, time.perf_counter() - t0


def _warm_estimate(torch: Any, device: str, fn: Callable[[], Any], warm: int) -> float:
    """Run the ``warm`` warm-up calls; seconds per call from all but the first (one timed call if < 2)."""
    if warm >= 1:
        fn()  # the first call pays for allocation, handles and kernel selection: not in the estimate
    n, spent = _run_calls(torch, device, fn, max(1, warm - 1))
    return spent / n


def _fill(
    torch: Any, device: str, fn: Callable[[], Any], seconds: float, per_call: float
) -> tuple[int, float]:
    """``(calls, seconds)`` of back-to-back calls of ``fn`` filling at least ``seconds``.

    As many calls as ``per_call`` (the estimate) says fill it, one
    synchronize at the end; again, for what is left, only if they fell short
    (on a CPU they stop when the time is filled, however wrong the estimate).
    """
    calls, spent = 0, 0.0
    while spent < seconds or calls == 0:
        left = seconds - spent
        n, took = _run_calls(
            torch, device, fn, min(_MAX_CALLS, max(1, math.ceil(left / max(per_call, 1e-9)))), left
        )
        spent, calls = spent + took, calls + n
        per_call = spent / calls
    return calls, spent


def _timer(
    torch: Any, device: str, warmup: int, repeats: int, window: float
) -> Callable[[Callable[[], Any]], tuple[float, int, float]]:
    """A function of ``fn``: ``(seconds per call, calls timed, seconds timed)`` after the warm-ups."""

    def measure(fn: Callable[[], Any]) -> tuple[float, int, float]:
        if window > 0:
            calls, spent = _fill(torch, device, fn, window, _warm_estimate(torch, device, fn, warmup))
            return spent / calls, calls, spent
        for _ in range(warmup):
            fn()
        _, spent = _run_calls(torch, device, fn, repeats)
        return spent / repeats, repeats, spent

    return measure


def _gpu_state(torch: Any, device: str) -> dict[str, Any]:
    """The SM clock (MHz), power draw (W) and temperature (C) now; ``None`` and the reason where unread.

    Through ``torch.cuda.clock_rate``, ``power_draw`` and ``temperature``
    (NVML through pynvml; torch >= 2.2). Never raises.

    Examples
    --------
    >>> _gpu_state(None, "cpu")["null_why"]["power_w"]
    'not a CUDA device'
    """
    state: dict[str, Any] = {key: None for key, _, _ in _READINGS}
    why: dict[str, str] = {}
    if not device.startswith("cuda"):
        return {**state, "null_why": {key: "not a CUDA device" for key in state}}
    try:
        index = torch.device(device).index
    except Exception as exc:  # a reading must never stop the probe
        index = None
        why["device"] = f"{type(exc).__name__}: {exc}"[:300]
    for key, name, factor in _READINGS:
        read = getattr(torch.cuda, name, None)
        if read is None:
            why[key] = f"torch {torch.__version__} has no torch.cuda.{name}"
            continue
        try:
            value = float(read(index)) * factor
        except Exception as exc:  # pynvml missing, NVML refusing: record why
            why[key] = f"torch.cuda.{name}: {type(exc).__name__}: {exc}"[:300]
            continue
        state[key] = value if math.isfinite(value) else None
        if state[key] is None:
            why[key] = f"torch.cuda.{name} returned {value!r}"
    return {**state, "null_why": why}


def _soak(
    torch: Any, device: str, fn: Callable[[], Any], seconds: float, flops: float, warm: int
) -> tuple[int, float, list[dict[str, Any]]]:
    """Call ``fn`` back to back for ``seconds`` of wall time: ``(calls, seconds, trace)``.

    The warm-up calls (their time counted), then rounds of at most
    :data:`SOAK_ROUND` seconds, one at least, one synchronize each; the
    trace has one entry per round: its end (seconds since the soak began),
    its TFLOP/s (``flops`` per call) and the SM clock, power and temperature
    read after it.
    """
    began = time.monotonic()
    per_call = _warm_estimate(torch, device, fn, warm)
    calls, trace = 0, []
    while (left := seconds - (time.monotonic() - began)) > 0 or calls == 0:  # one round at least
        n, spent = _fill(torch, device, fn, min(SOAK_ROUND, max(left, 0.0)), per_call)
        calls, per_call = calls + n, spent / n
        now = _gpu_state(torch, device)
        trace.append({"t": time.monotonic() - began, "tflops": flops * n / spent / 1e12})
        trace[-1].update((key, now[key]) for key, _, _ in _READINGS)
    return calls, time.monotonic() - began, trace


def probe_gemm(
    *,
    hidden: Sequence[int] = (1024, 2048, 4096, 8192, 12288),
    tokens: Sequence[int] = (512, 2048, 8192),
    tensor: Sequence[int] = (1, 2, 4, 8),
    elementwise: Sequence[int] = (2**20, 2**24, 2**27),
    device: str | None = None,
    dtype: str = "bfloat16",
    warmup: int = 3,
    repeats: int = 20,
    budget: float = 300.0,
    max_elements: int = 2**30,
    peak_flops: float | None = None,
    sustain: float = 0.0,
    window: float = 0.0,
) -> dict[str, Any]:
    """Time a layer's products and three memory-bound kernels; the table as a JSON-ready dict.

    Parameters
    ----------
    hidden, tokens, tensor : sequence of int
        Hidden sizes ``h``, tokens per micro-batch ``M`` and tensor-parallel
        degrees ``t`` (each ``t`` must divide ``h``); every combination is one
        row per product.
    elementwise : sequence of int
        Element counts of the GeLU, LayerNorm and softmax rows (LayerNorm over
        rows of ``min(1024, numel)`` values, softmax over rows of ``min(2048, numel)``).
    device : str or None
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; ``None``: the GPU if there is one.
    dtype : {"bfloat16", "float16", "float32"}
    warmup, repeats : int
        Calls before timing, and calls timed (their mean is the row's seconds).
    budget : float
        Seconds of wall time at most, the soak and the windows included: a soak
        stops when it is spent (``"sustain_stopped": true``), and a shape is not
        started unless its windows fit in what is left (``"truncated": true``).
    sustain : float
        Seconds of heat soak before the table (0: none): the sweep's largest
        product back to back, in rounds of at most :data:`SOAK_ROUND` seconds.
    window : float
        Seconds each entry is timed over at least (0: ``repeats`` calls): the
        calls are repeated until the window is filled, one synchronize at its
        end, and counted (the entry's ``calls``); the warm-ups before it give the
        estimate of how many fill it.
    max_elements : int
        Largest operand, in elements; a product with a larger one is skipped and listed in ``"skipped"``.
    peak_flops : float or None
        The device's peak FLOP/s for ``dtype``, stored as ``peak_tflops`` when given.

    Returns
    -------
    dict
        ``device``, ``torch``, ``date``, ``dtype``, ``how``, ``source``, ``gemm`` (rows ``op, h, tp,
        M, K, N, seconds, tflops``), ``elementwise`` (rows ``op, numel, seconds, GBps``), ``truncated``,
        ``skipped``, and ``peak_tflops`` if given. With ``sustain`` or ``window`` > 0 also
        ``sustain``, ``window``, ``sustain_stopped``, ``sustained_seconds``, ``soak_product``,
        ``soak_calls``, ``soak_trace`` (rows ``t, tflops, sm_clock_mhz, power_w, temperature_c``) and
        ``gpu_state`` (``before_soak``, ``after_soak``, ``end``: each ``sm_clock_mhz, power_w,
        temperature_c, null_why``), and in every entry ``calls`` and ``timed_seconds``; without them,
        the keys above only.
    """
    hs = _checks.integers("hidden", hidden, maximum=MAX_DIMENSION, max_items=64, distinct=True)
    ms = _checks.integers("tokens", tokens, maximum=MAX_DIMENSION, max_items=64, distinct=True)
    ts = _checks.integers("tensor", tensor, maximum=1024, max_items=64, distinct=True)
    ns = _checks.integers(
        "elementwise", elementwise, maximum=2**31, allow_empty=True, max_items=64, distinct=True
    )
    for h in hs:
        for t in ts:
            if h % t:
                raise InvalidParameterError("tensor", t, f"a divisor of every hidden size (not of {h})")
    dtype = _checks.choice("dtype", dtype, DTYPES)
    warm = _checks.integer("warmup", warmup, minimum=0, maximum=10_000)
    reps = _checks.integer("repeats", repeats, maximum=100_000)
    limit = _checks.positive("budget", budget, maximum=86_400.0)
    most = _checks.integer("max_elements", max_elements, maximum=2**40)
    peak = None if peak_flops is None else _checks.positive("peak_flops", peak_flops)
    soak = _checks.positive("sustain", sustain, allow_zero=True, maximum=86_400.0)
    win = _checks.positive("window", window, allow_zero=True, maximum=3_600.0)
    sustained = soak > 0 or win > 0
    torch = require_torch()
    device = str(check_device(device or ("cuda" if torch.cuda.is_available() else "cpu")))
    tdtype = getattr(torch, dtype)
    itemsize = torch.tensor([], dtype=tdtype).element_size()
    bench = _timer(torch, device, warm, reps, win)
    began = time.monotonic()
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    truncated = False
    state: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    with torch.no_grad():
        if sustained:
            state["before_soak"] = _gpu_state(torch, device)
            extra = _heat_soak(
                torch, device, hs, ms, ts, most, tdtype, warm, soak, limit - (time.monotonic() - began)
            )
            state["after_soak"] = _gpu_state(torch, device)
        for h in hs:
            for m in ms:
                for t in ts:
                    for name, (k, n) in layer_products(h, t).items():
                        if time.monotonic() - began + win > limit:
                            truncated = True
                            break
                        if max(m * k, k * n, m * n) > most:
                            skipped.append(f"{name} h={h} t={t} M={m}: an operand over {most:,} elements")
                            continue
                        a = torch.randn(m, k, device=device, dtype=tdtype)
                        b = torch.randn(k, n, device=device, dtype=tdtype)
                        s, calls, spent = bench(lambda a=a, b=b: a @ b)
                        rows.append(
                            {"op": name, "h": h, "tp": t, "M": m, "K": k, "N": n, "seconds": s,
                             "tflops": 2 * m * k * n / s / 1e12}
                        )  # fmt: skip
                        if sustained:
                            rows[-1].update(calls=calls, timed_seconds=spent)
                        del a, b
        ew: list[dict[str, Any]] = []
        for numel in ns:
            if time.monotonic() - began + 3 * win > limit:  # three kernels, a window each
                truncated = True
                break
            if numel > most:
                skipped.append(f"elementwise numel={numel}: over {most:,} elements")
                continue
            x = torch.randn(numel, device=device, dtype=tdtype)
            width = min(1024, numel)
            y = x[: numel // width * width].view(-1, width)
            ln = torch.nn.LayerNorm(width, device=device, dtype=tdtype)
            row = min(2048, numel)  # a row of attention scores at s = 2048
            z = x[: numel // row * row].view(-1, row)
            for op, fn, count in (
                ("gelu", lambda x=x: torch.nn.functional.gelu(x), numel),
                ("layernorm", lambda y=y, ln=ln: ln(y), y.numel()),
                ("softmax", lambda z=z: torch.softmax(z, dim=-1), z.numel()),
            ):
                s, calls, spent = bench(fn)
                ew.append({"op": op, "numel": count, "seconds": s, "GBps": 2 * count * itemsize / s / 1e9})
                if sustained:
                    ew[-1].update(calls=calls, timed_seconds=spent)
            del x, y, z, ln
    name = (
        torch.cuda.get_device_name(device) if device.startswith("cuda") else (platform.processor() or "cpu")
    )
    clock = "CUDA events" if device.startswith("cuda") else "time.perf_counter"
    how = f"mean of {reps} calls after {warm} warm-ups, random data, timed with {clock}"
    if win > 0:
        how = (
            f"mean over a window of at least {win:g} s of back-to-back calls (counted in each entry's "
            f"'calls', one synchronize at the window's end) after {warm} warm-ups, random data, timed with "
            f"{clock}"
        )
    if soak > 0:
        stopped = " (stopped by the budget)" if extra["sustain_stopped"] else ""
        what = extra["soak_product"] or f"none: no product within {most:,} elements"
        how = (
            f"after a heat soak of {extra['sustained_seconds']:.3g} s of {soak:g} s asked{stopped} "
            f"({what}, back to back), {how}"
        )
    out: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "dtype": dtype,
        "how": how,
        "source": "queuesgd.gemm_probe.probe_gemm",
        "gemm": rows,
        "elementwise": ew,
        "truncated": truncated,
        "skipped": skipped,
    }
    if peak is not None:
        out["peak_tflops"] = peak / 1e12
    if sustained:
        state["end"] = _gpu_state(torch, device)
        out.update(sustain=soak, window=win, **extra, gpu_state=state)
    return out


def _heat_soak(
    torch: Any, device: str, hs: Sequence[int], ms: Sequence[int], ts: Sequence[int], most: int,
    tdtype: Any, warm: int, sustain: float, left: float,
) -> dict[str, Any]:  # fmt: skip
    """Run the sweep's largest product (in FLOPs, operands within ``most``) for ``sustain`` seconds.

    At most ``left`` seconds (the budget's rest): the record says whether it stopped early.
    """
    fits = [
        (2 * m * k * n, name, h, t, m, k, n)
        for h in hs for m in ms for t in ts for name, (k, n) in layer_products(h, t).items()
        if max(m * k, k * n, m * n) <= most
    ]  # fmt: skip
    record: dict[str, Any] = {
        "sustain_stopped": sustain > max(left, 0.0), "sustained_seconds": 0.0, "soak_product": None,
        "soak_calls": 0, "soak_trace": [],
    }  # fmt: skip
    if sustain <= 0 or not fits:
        return record
    flops, name, h, t, m, k, n = max(fits)
    record["soak_product"] = f"{name} h={h} t={t} M={m} (K={k}, N={n})"
    if left <= 0:
        return record
    a = torch.randn(m, k, device=device, dtype=tdtype)
    b = torch.randn(k, n, device=device, dtype=tdtype)
    calls, spent, trace = _soak(torch, device, lambda: a @ b, min(sustain, left), flops, warm)
    record.update(sustained_seconds=spent, soak_calls=calls, soak_trace=trace)
    return record


def write_gemm_table(path: str | Path, table: dict[str, Any]) -> Path:
    """Write a table from :func:`probe_gemm` as JSON at ``path`` (a name ending in ``.json``).

    Examples
    --------
    >>> import tempfile
    >>> from queuesgd.gemm_table import load_gemm_table
    >>> t = probe_gemm(hidden=(8,), tokens=(4,), tensor=(1,), elementwise=(), repeats=1, device="cpu")
    >>> p = write_gemm_table(tempfile.mkdtemp() + "/cpu.json", t)
    >>> len(load_gemm_table(p, peak_flops=1e15).volumes) >= 1
    True
    """
    return _checks.write_probe_table(path, table, rows="gemm", probe="probe_gemm")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m queuesgd.gemm_probe`` (every flag is in docs/cli.md)."""
    ap = Parser(prog="python -m queuesgd.gemm_probe", description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the table's JSON file (a name ending in .json)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 12288])
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 2048, 8192])
    ap.add_argument("--tensor", type=int, nargs="+", default=[1, 2, 4, 8])
    device_arguments(ap, DTYPES, repeats=20, budget=300.0)
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--sustain", type=float, default=0.0, help="seconds of heat soak before the table")
    ap.add_argument("--window", type=float, default=0.0, help="seconds each entry is timed over at least")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m queuesgd.gemm_probe OUT.json [--hidden 1024 4096] ...``: 0, or 2 and one error line.

    Examples
    --------
    >>> main(["t.txt"])   # on stderr: ...: error: out: got 't.txt'; accepted: a file name ending in .json ...
    2
    """
    return run_command(build_parser(), argv, _run)


def _run(a: argparse.Namespace) -> int:
    """Check the file and ``--peak-tflops``, measure, write the table and print one line."""
    out = _checks.output_file("out", a.out, suffix=".json")
    peak = None
    if a.peak_tflops is not None:  # checked as given: its TFLOP/s, not the FLOP/s probe_gemm is passed
        peak = _checks.positive("--peak-tflops", a.peak_tflops, maximum=1e9) * 1e12
    table = probe_gemm(
        hidden=a.hidden, tokens=a.tokens, tensor=a.tensor, device=a.device, dtype=a.dtype,
        repeats=a.repeats, budget=a.budget, peak_flops=peak, sustain=a.sustain, window=a.window,
    )  # fmt: skip
    write_gemm_table(out, table)
    best = max((r["tflops"] for r in table["gemm"]), default=float("nan"))
    soaked = ""
    if a.sustain > 0:
        stop = ", stopped by the budget" if table["sustain_stopped"] else ""
        soaked = f" after a {table['sustained_seconds']:.3g} s soak{stop}"
    print(f"{table['device']}: {len(table['gemm'])} products{soaked}, best {best:.1f} TFLOP/s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
