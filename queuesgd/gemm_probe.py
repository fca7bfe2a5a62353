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
(``pip install queuesgd[validation]``).

Examples
--------
>>> table = probe_gemm(hidden=(16,), tokens=(8,), tensor=(1, 2), elementwise=(1024,), repeats=2,
...                    device="cpu", dtype="float32")
>>> len(table["gemm"]), sorted({r["op"] for r in table["gemm"]}), table["truncated"]
(8, ['fc1', 'fc2', 'proj', 'qkv'], False)
>>> from queuesgd.gemm_table import gemm_table_from_json
>>> gemm_table_from_json(table, peak_flops=1e15).provenance["dtype"]
'float32'
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from queuesgd import _checks
from queuesgd.command_line import Parser, run_command
from queuesgd.errors import InvalidParameterError, MissingDependencyError

__all__ = ["DTYPES", "MAX_DIMENSION", "build_parser", "main", "probe_gemm", "write_gemm_table"]

#: Data types the probe takes, by their PyTorch names.
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")
#: Largest hidden size or token count the probe takes.
MAX_DIMENSION = 2**17


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "validation") from None
    return torch


def _timer(torch: Any, device: str, warmup: int, repeats: int) -> Callable[[Callable[[], Any]], float]:
    cuda = device.startswith("cuda")

    def mean_seconds(fn: Callable[[], Any]) -> float:
        for _ in range(warmup):
            fn()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            for _ in range(repeats):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / repeats
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        return (time.perf_counter() - t0) / repeats

    return mean_seconds


def _shapes(h: int, t: int) -> dict[str, tuple[int, int]]:
    """``(K, N)`` of each product of a layer of hidden size ``h`` on one of ``t`` ranks."""
    return {"qkv": (h, 3 * h // t), "proj": (h // t, h), "fc1": (h, 4 * h // t), "fc2": (4 * h // t, h)}


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
        Seconds of wall time at most; shapes left are skipped (``"truncated": true``).
    max_elements : int
        Largest operand, in elements; a product with a larger one is skipped and listed in ``"skipped"``.
    peak_flops : float or None
        The device's peak FLOP/s for ``dtype``, stored as ``peak_tflops`` when given.

    Returns
    -------
    dict
        ``device``, ``torch``, ``date``, ``dtype``, ``how``, ``source``, ``gemm`` (rows ``op, h, tp,
        M, K, N, seconds, tflops``), ``elementwise`` (rows ``op, numel, seconds, GBps``), ``truncated``,
        ``skipped``, and ``peak_tflops`` if given.
    """
    hs = _checks.integers("hidden", hidden, maximum=MAX_DIMENSION, max_items=64)
    ms = _checks.integers("tokens", tokens, maximum=MAX_DIMENSION, max_items=64)
    ts = _checks.integers("tensor", tensor, maximum=1024, max_items=64)
    ns = _checks.integers("elementwise", elementwise, maximum=2**31, allow_empty=True, max_items=64)
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
    torch = _torch()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = _checks.device("device", device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidParameterError("device", device, "'cpu' (this machine has no CUDA device)")
    tdtype = getattr(torch, dtype)
    itemsize = torch.tensor([], dtype=tdtype).element_size()
    bench = _timer(torch, device, warm, reps)
    began = time.monotonic()
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    truncated = False
    with torch.no_grad():
        for h in hs:
            for m in ms:
                for t in ts:
                    for name, (k, n) in _shapes(h, t).items():
                        if time.monotonic() - began > limit:
                            truncated = True
                            break
                        if max(m * k, k * n, m * n) > most:
                            skipped.append(f"{name} h={h} t={t} M={m}: an operand over {most:,} elements")
                            continue
                        a = torch.randn(m, k, device=device, dtype=tdtype)
                        b = torch.randn(k, n, device=device, dtype=tdtype)
                        s = bench(lambda a=a, b=b: a @ b)
                        rows.append(
                            {"op": name, "h": h, "tp": t, "M": m, "K": k, "N": n, "seconds": s,
                             "tflops": 2 * m * k * n / s / 1e12}
                        )  # fmt: skip
                        del a, b
        ew: list[dict[str, Any]] = []
        for numel in ns:
            if time.monotonic() - began > limit:
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
                s = bench(fn)
                ew.append({"op": op, "numel": count, "seconds": s, "GBps": 2 * count * itemsize / s / 1e9})
            del x, y, z, ln
    name = (
        torch.cuda.get_device_name(device) if device.startswith("cuda") else (platform.processor() or "cpu")
    )
    clock = "CUDA events" if device.startswith("cuda") else "time.perf_counter"
    out: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "dtype": dtype,
        "how": f"mean of {reps} calls after {warm} warm-ups, random data, timed with {clock}",
        "source": "queuesgd.gemm_probe.probe_gemm",
        "gemm": rows,
        "elementwise": ew,
        "truncated": truncated,
        "skipped": skipped,
    }
    if peak is not None:
        out["peak_tflops"] = peak / 1e12
    return out


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
    ap.add_argument("--device", default=None, help="cpu, cuda or cuda:N; default: the GPU if there is one")
    ap.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--peak-tflops", type=float, default=None)
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
        repeats=a.repeats, budget=a.budget, peak_flops=peak,
    )  # fmt: skip
    write_gemm_table(out, table)
    best = max((r["tflops"] for r in table["gemm"]), default=float("nan"))
    print(f"{table['device']}: {len(table['gemm'])} products, best {best:.1f} TFLOP/s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
