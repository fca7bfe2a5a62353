"""Measure fused attention (FlashAttention) on the device at hand, as rows a GEMM table can carry.

The compute model times a flash core (``TransformerShape(attention="flash")``)
at its table's ``flash`` rows where it has them, else at the GEMM curve's
efficiency at the scores product's volume -- a stand-in that the shipped
tables leave in place, because they measured plain products only.
:func:`probe_flash` measures the rows: for each sequence length it times
:func:`torch.nn.functional.scaled_dot_product_attention` (FlashAttention on a
GPU in 16-bit; causal by default, as a decoder trains) forward, and forward
with backward, over ``heads`` heads of ``head_dim`` and enough sequences to
make about ``tokens`` tokens.

Each row's ``tflops`` counts the whole ``s x s`` square's FLOPs, ``4 batch
heads s^2 d`` -- the model's count -- over the forward's seconds, so a causal
kernel, which skips about half the square, shows the speed the model needs
(its efficiency may pass the GEMM curve's for that reason). The backward's
seconds are recorded (``backward_seconds``, forward + backward less the
forward) but not used: the model keeps a flash backward at 2.5 times its
forward (:data:`~queuesgd.model_shapes_attention.FLASH_BACKWARD`); their ratio
(``backward_ratio``) shows how far that holds.

``python -m queuesgd.flash_probe OUT.json --table IN.json`` writes ``IN.json``
(a table of :mod:`queuesgd.gemm_probe`) with the rows added under ``"flash"``,
which :func:`~queuesgd.gemm_table.load_gemm_table` reads; without
``--table``, ``OUT.json`` holds the rows alone. PyTorch is imported only here
(``pip install -e ".[validation]"``).

The measuring is bounded by ``budget`` seconds, checked before every call
(:func:`~queuesgd.block_probe.timed_mean`): where it runs out, the row being
timed keeps the calls it timed (``calls``, ``step_calls``; a backward not
timed is ``None``), the lengths left are left out, and ``"truncated": true``
says so.

Examples
--------
>>> rec = probe_flash((16, 32), heads=2, head_dim=8, tokens=64, device="cpu", dtype="float32", repeats=1)
>>> [(r["batch"], r["sequence"], r["calls"], r["step_calls"]) for r in rec["flash"]], rec["truncated"]
([(4, 16, 1, 1), (2, 32, 1, 1)], False)
>>> all(r["tflops"] > 0 and (r["backward_seconds"] or 1) > 0 for r in rec["flash"])  # None: not measured
True
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from collections.abc import Sequence
from typing import Any

from queuesgd import _checks, json_text
from queuesgd.block_probe import DTYPES, timed_mean
from queuesgd.command_line import Parser, device_arguments, run_command
from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import write_text
from queuesgd.harness import check_device, require_torch

__all__ = ["build_parser", "main", "probe_flash"]


def probe_flash(
    sequences: Sequence[int] = (512, 1024, 2048, 4096, 8192, 16384, 32768),
    *,
    heads: int = 16,
    head_dim: int = 128,
    tokens: int = 32768,
    causal: bool = True,
    device: str | None = None,
    dtype: str = "bfloat16",
    warmup: int = 3,
    repeats: int = 10,
    budget: float = 120.0,
) -> dict[str, Any]:
    """Time fused attention at each sequence length; rows in the GEMM table's ``flash`` format.

    Parameters
    ----------
    sequences : sequence of int
        Sequence lengths, each one row.
    heads, head_dim : int
        Attention heads per sequence and their width ``d``.
    tokens : int
        Tokens per call: ``max(1, tokens // s)`` sequences of length ``s``.
    causal : bool
        A causal mask (a decoder's), as training runs it.
    device : str, optional
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; default the GPU if there is one.
    dtype : {"bfloat16", "float16", "float32"}
    warmup, repeats : int
        Untimed calls, then timed calls (their mean).
    budget : float
        Seconds, > 0, checked before every call: the row it cuts keeps the calls it timed (a
        forward not timed: no row), sequences not reached are left out, ``"truncated"`` is true.

    Returns
    -------
    dict
        ``device``, ``dtype``, ``torch``, ``date``, ``how`` and ``flash``: rows of ``batch``,
        ``heads``, ``sequence``, ``head_dim``, ``causal``, ``seconds``, ``backward_seconds``,
        ``backward_ratio`` (``None`` where the budget left the backward untimed, or where the step's
        mean came out no longer than the forward's, noise at a tiny size), ``tflops``,
        ``calls`` and ``step_calls`` (the timed calls of each); ``truncated``.

    Examples
    --------
    >>> rec = probe_flash((16, 32), heads=1, head_dim=4, device="cpu", dtype="float32", repeats=10_000,
    ...                   budget=0.2)
    >>> rec["truncated"], len(rec["flash"]) <= 1, all(r["calls"] < 10_000 for r in rec["flash"])
    (True, True, True)
    """
    torch = require_torch()
    seqs = [_checks.integer("sequences", s, maximum=2**20) for s in sequences]
    heads = _checks.integer("heads", heads, maximum=4096)
    head_dim = _checks.integer("head_dim", head_dim, maximum=1024)
    tokens = _checks.integer("tokens", tokens, maximum=2**24)
    causal = _checks.boolean("causal", causal)
    if dtype not in DTYPES:
        raise InvalidParameterError("dtype", dtype, f"one of {', '.join(DTYPES)}")
    warmup = _checks.integer("warmup", warmup, minimum=0, maximum=10_000)
    repeats = _checks.integer("repeats", repeats, maximum=10_000)
    budget = _checks.positive("budget", budget, maximum=86_400.0)  # as probe_gemm's and probe_busbw's
    device = str(check_device(device or ("cuda" if torch.cuda.is_available() else "cpu")))
    dt_ = getattr(torch, dtype)
    attend = torch.nn.functional.scaled_dot_product_attention
    stop = time.perf_counter() + budget
    rows, truncated = [], False
    for s in seqs:
        if truncated:  # the budget is spent: the lengths left are left out
            break
        b = max(1, tokens // s)
        shape = (b, heads, s, head_dim)
        q, k, v = (torch.randn(shape, device=device, dtype=dt_, requires_grad=True) for _ in "qkv")

        def forward(q: Any = q, k: Any = k, v: Any = v) -> Any:
            with torch.no_grad():
                return attend(q, k, v, is_causal=causal)

        def step(q: Any = q, k: Any = k, v: Any = v) -> None:
            for x in (q, k, v):
                x.grad = None
            attend(q, k, v, is_causal=causal).float().sum().backward()

        fwd, calls = timed_mean(torch, device, forward, warmup, repeats, stop)
        both, step_calls = None, 0
        if calls == repeats:  # the forward's calls all timed: the step's next
            both, step_calls = timed_mean(torch, device, step, warmup, repeats, stop)
        truncated = step_calls < repeats
        if fwd is None:  # not one forward timed: no row
            break
        # two separately timed means: at a tiny size a busy host can time the step no longer than the
        # forward, and a backward of 0 s would be a number nobody measured
        back = None if both is None or both <= fwd else both - fwd
        flops = 4.0 * b * heads * s * s * head_dim
        rows.append({
            "batch": b, "heads": heads, "sequence": s, "head_dim": head_dim, "causal": causal, "seconds": fwd,
            "backward_seconds": back, "backward_ratio": None if back is None else back / fwd,
            "tflops": flops / fwd / 1e12, "calls": calls, "step_calls": step_calls,
        })  # fmt: skip
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else platform.processor() or "cpu"
    how = (f"scaled_dot_product_attention{' causal' if causal else ''}, {warmup} warm-up + {repeats} timed "
           "calls; tflops = 4 batch heads s^2 d / forward seconds")  # fmt: skip
    return {"device": name, "dtype": dtype, "torch": torch.__version__, "date": dt.date.today().isoformat(),
            "how": how, "flash": rows, "truncated": truncated}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m queuesgd.flash_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the JSON file to write (a name ending in .json)")
    ap.add_argument("--table", default=None, help="a gemm_probe table to add the rows to")
    ap.add_argument("--sequence", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384, 32768])
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--no-causal", action="store_true", help="no causal mask")
    device_arguments(ap, DTYPES, repeats=10, budget=120.0)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m queuesgd.flash_probe OUT.json [--table IN.json]``: 0, or 2 and one error line.

    Examples
    --------
    >>> main(["t.txt"])   # on stderr: ...: error: out: got 't.txt'; accepted: a file name ending in .json ...
    2
    """
    return run_command(build_parser(), argv, _run)


def _run(a: argparse.Namespace) -> int:
    out = _checks.output_file("out", a.out, suffix=".json")
    _checks.positive("--budget", a.budget, maximum=86_400.0)  # named as given; probe_flash checks the rest
    base: dict[str, Any] = {}
    if a.table is not None:
        from queuesgd.gemm_table import gemm_table_from_json

        raw = _checks.read_bytes("--table", a.table)
        try:
            base = json_text.loads(raw.decode("utf-8"))
            gemm_table_from_json(base, peak_flops=1.0e30, where="--table")  # a GEMM table, checked whole
        except (ValueError, RecursionError) as err:  # not UTF-8 or JSON, an int of > 4,300 digits, too deep
            why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
            raise InvalidParameterError("--table", a.table, f"a JSON GEMM table ({why})") from None
    rec = probe_flash(a.sequence, heads=a.heads, head_dim=a.head_dim, tokens=a.tokens, causal=not a.no_causal,
                      device=a.device, dtype=a.dtype, repeats=a.repeats, budget=a.budget)  # fmt: skip
    doc = rec
    if base:
        how = rec["how"] + ("; cut by the budget (truncated)" if rec["truncated"] else "")  # the table's keys
        doc = {**base, "flash": rec["flash"], "flash_how": how, "flash_device": rec["device"]}
    write_text("out", out, json.dumps(doc, indent=1) + "\n")  # /proc: refused, not a traceback
    cut = " (cut by the budget)" if rec["truncated"] else ""
    best = f"best {max(r['tflops'] for r in rec['flash']):.1f} TFLOP/s" if rec["flash"] else "none measured"
    print(f"{rec['device']}: {len(rec['flash'])} sequence lengths{cut}, {best} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
