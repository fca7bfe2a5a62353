"""Time a transformer block on the device at hand and compare it with the compute model's prediction.

The compute model (:class:`~queuesgd.compute_model.ComputeModel`) predicts a
block's forward and backward from a GEMM table and memory-bound bandwidths,
kernel by kernel. :func:`probe_block` builds the block that
:class:`~queuesgd.model_shapes.TransformerShape` describes -- pre-LayerNorm,
QKV and projection, causal attention through
:func:`torch.nn.functional.scaled_dot_product_attention` (FlashAttention on a
GPU in 16-bit), the 4h GELU MLP, biases, no dropout -- and times, per block:

- ``forward``: the forward pass alone (no autograd graph kept);
- ``step``: forward and backward (``backward = step - forward``);
- ``recompute_step``: forward and backward with the block under
  :func:`torch.utils.checkpoint.checkpoint` (full recomputation, as FSDP's
  and Megatron's ``recompute="full"``).

:func:`compare_block` puts them beside the compute model's
:meth:`~queuesgd.compute_model.ComputeModel.block_parts`: forward ``f``,
step ``f + b``, recomputed step ``2 f + b``. The ratio measured / predicted of
each is what a GEMM-efficiency anchor would have to absorb; where the ratios
of the three differ, the model's structure (recomputation's cost, the flash
core's backward) and not its level is off.

How it times: ``layers`` blocks in a row (so no kernel sits at an edge),
``warmup`` passes first, then ``repeats`` passes between two synchronizations
(:func:`time.perf_counter`), the mean over passes and blocks. Bounded by
``budget`` seconds, checked before every pass (:func:`timed_mean`): a variant
cut short is the mean of the passes it timed, one not timed is ``None``, and
``"truncated": true`` says so. PyTorch is imported only here
(``pip install -e ".[validation]"``).

Examples
--------
>>> from queuesgd.model_shapes import TransformerShape
>>> shape = TransformerShape(2, 32, 4, 16, 100, attention="flash", dropout=False)
>>> rec = probe_block(shape, (1, 2), device="cpu", dtype="float32", repeats=2, warmup=1)
>>> [r["microbatch"] for r in rec["rows"]], rec["block_parameters"] == 12 * 32**2 + 13 * 32
([1, 2], True)
>>> all(r[k] > 0 for r in rec["rows"] for k in ("forward", "step", "recompute_step"))
True
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

from queuesgd import _checks
from queuesgd.command_line import Parser, device_arguments, run_command
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.file_writes import write_text
from queuesgd.harness import check_device, require_torch
from queuesgd.model_shapes import TransformerShape

__all__ = ["build_parser", "compare_block", "main", "mean_seconds", "probe_block", "timed_mean"]

#: Data types the probe takes, by their PyTorch names.
DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")


def _blocks(torch: Any, shape: TransformerShape, layers: int, device: str, dtype: Any) -> Any:
    """``layers`` GPT blocks of ``shape``: pre-LayerNorm, biases, causal fused attention, no dropout."""
    nn, F = torch.nn, torch.nn.functional
    h, a = shape.hidden, shape.heads
    ffn = shape.ffn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, ffn), nn.Linear(ffn, h)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, a, h // a).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return nn.ModuleList([Block() for _ in range(layers)]).to(device=device, dtype=dtype)


def mean_seconds(torch: Any, device: str, fn: Callable[[], Any], warmup: int, repeats: int) -> float:
    """Mean seconds of ``fn`` over ``repeats`` calls after ``warmup``, one synchronization each side.

    Examples
    --------
    >>> import torch
    >>> mean_seconds(torch, "cpu", lambda: torch.ones(4).sum(), 1, 3) > 0
    True
    """
    mean, _ = timed_mean(torch, device, fn, warmup, repeats)
    return float("nan") if mean is None else mean  # None only for repeats < 1


def timed_mean(
    torch: Any, device: str, fn: Callable[[], Any], warmup: int, repeats: int, stop: float | None = None
) -> tuple[float | None, int]:
    """``(mean seconds, calls timed)`` of ``fn``: ``warmup`` calls, then up to ``repeats`` timed ones.

    With ``stop`` (a :func:`time.perf_counter` value) no call starts once it
    has passed or once the previous call's seconds say it would end past it
    (so only a first call, of unknown length, can end past it): the mean is
    over the calls timed, ``None`` if none was (the warm-up cut). On a GPU the
    clock is the host's, so calls already queued end after it.

    Examples
    --------
    >>> import torch
    >>> mean, calls = timed_mean(torch, "cpu", lambda: torch.ones(4).sum(), 1, 3)
    >>> mean > 0, calls
    (True, 3)
    >>> timed_mean(torch, "cpu", lambda: time.sleep(0.01), 0, 10_000, stop=time.perf_counter() + 0.05)[1] < 10
    True
    >>> timed_mean(torch, "cpu", lambda: None, 1, 3, stop=time.perf_counter())
    (None, 0)
    """
    last = [0.0]  # the seconds of the previous call

    def may_start() -> bool:
        now = time.perf_counter()
        return stop is None or (now < stop and now + last[0] <= stop)

    def call() -> float:
        t = time.perf_counter()
        fn()
        last[0] = time.perf_counter() - t
        return last[0]

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        if not may_start():
            return None, 0
        call()
    sync()
    t0 = time.perf_counter()
    done = 0
    while done < repeats and may_start():
        call()
        done += 1
    sync()
    return ((time.perf_counter() - t0) / done if done else None), done


def probe_block(
    shape: TransformerShape,
    microbatches: Sequence[int] = (1,),
    *,
    device: str | None = None,
    dtype: str = "bfloat16",
    layers: int = 2,
    warmup: int = 3,
    repeats: int = 10,
    budget: float = 120.0,
) -> dict[str, Any]:
    """Time one block of ``shape`` (forward, step, step with recomputation) at each micro-batch.

    Parameters
    ----------
    shape : TransformerShape
        GPT-style (LayerNorm, biases, 4h GELU MLP, not gated, multi-head, no dropout); its
        ``hidden``, ``heads``, ``sequence`` and MLP width are used.
    microbatches : sequence of int
        Sequences per micro-batch, each timed.
    device : str, optional
        ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; default the GPU if there is one.
    dtype : {"bfloat16", "float16", "float32"}
        The blocks' parameters and activations.
    layers, warmup, repeats : int
        Blocks in a row, untimed passes, timed passes.
    budget : float
        Seconds, checked before every pass: a variant cut short is the mean of the passes it
        timed, one not reached ``None``, and ``"truncated"`` is true.

    Returns
    -------
    dict
        ``device``, ``dtype``, ``torch``, the shape's fields, ``block_parameters`` and ``rows``:
        per micro-batch ``forward``, ``step``, ``recompute_step`` (seconds per block).

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(1, 16, 2, 8, 10, attention="flash", dropout=False)
    >>> probe_block(s, (1,), device="cpu", dtype="float32", repeats=1, warmup=0, budget=0.0)["truncated"]
    True
    """
    torch = require_torch()
    from torch.utils.checkpoint import checkpoint

    if not isinstance(shape, TransformerShape):
        raise InvalidParameterError("shape", shape, "a TransformerShape")
    if shape.gated or shape.norm != "layernorm" or not shape.bias or shape.dropout or shape.kv != shape.heads:
        raise InvalidParameterError(
            "shape", shape.name, "a GPT block: LayerNorm, biases, an ungated MLP, no dropout, multi-head"
        )
    if dtype not in DTYPES:
        raise InvalidParameterError("dtype", dtype, f"one of {', '.join(DTYPES)}")
    mbs = [_checks.integer("microbatches", b, minimum=1, maximum=2**16) for b in microbatches]
    layers = _checks.integer("layers", layers, minimum=1, maximum=64)
    warmup = _checks.integer("warmup", warmup, minimum=0, maximum=10_000)
    repeats = _checks.integer("repeats", repeats, minimum=1, maximum=10_000)
    budget = _checks.positive("budget", budget, allow_zero=True, maximum=86_400.0)
    device = str(check_device(device or ("cuda" if torch.cuda.is_available() else "cpu")))
    dt = getattr(torch, dtype)
    blocks = _blocks(torch, shape, layers, device, dt)
    stop = time.perf_counter() + budget
    rows, truncated = [], False
    for b in mbs:
        row: dict[str, Any] = {"microbatch": b, "forward": None, "step": None, "recompute_step": None}
        if truncated:  # the budget is spent: the micro-batches left are not timed
            rows.append(row)
            continue
        x = torch.randn(b, shape.sequence, shape.hidden, device=device, dtype=dt, requires_grad=True)

        def forward(x: Any = x) -> Any:
            with torch.no_grad():
                y = x
                for blk in blocks:
                    y = blk(y)
            return y

        def step(x: Any = x, recompute: bool = False) -> None:
            blocks.zero_grad(set_to_none=True)  # each step writes its gradients (no accumulation's adds)
            x.grad = None
            y = x
            for blk in blocks:
                y = checkpoint(blk, y, use_reentrant=False) if recompute else blk(y)
            y.float().sum().backward()

        variants = (("forward", forward), ("step", step), ("recompute_step", lambda: step(recompute=True)))
        for key, fn in variants:
            mean, calls = timed_mean(torch, device, fn, warmup, repeats, stop)
            row[key] = None if mean is None else mean / layers
            if calls < repeats:
                truncated = True
                break
        rows.append(row)
    return {
        "device": torch.cuda.get_device_name(device) if device.startswith("cuda")
        else platform.processor() or "cpu",
        "dtype": dtype, "torch": torch.__version__, "hidden": shape.hidden, "heads": shape.heads,
        "sequence": shape.sequence, "ffn_hidden": shape.ffn, "layers": layers, "warmup": warmup,
        "repeats": repeats, "block_parameters": sum(p.numel() for p in blocks[0].parameters()),
        "rows": rows, "truncated": truncated,
    }  # fmt: skip


def compare_block(
    record: dict[str, Any], model: ComputeModel, shape: TransformerShape
) -> list[dict[str, Any]]:
    """Each measured row of :func:`probe_block` beside ``model``'s ``f``, ``f + b`` and ``2 f + b``.

    ``ratio_*`` is measured / predicted (``None`` where not measured). The
    shape must be the probed one (its hidden size, heads and sequence).

    Examples
    --------
    >>> from queuesgd.gemm_table import GemmTable
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(1, 1024, 8, 512, 100, attention="flash", dropout=False)
    >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e14), memory_bandwidth=None)
    >>> f, b, _, _ = cm.block_parts(s, 2)
    >>> rec = {"hidden": 1024, "heads": 8, "sequence": 512,
    ...        "rows": [{"microbatch": 2, "forward": f, "step": 2 * (f + b), "recompute_step": None}]}
    >>> r = compare_block(rec, cm, s)[0]
    >>> r["ratio_forward"], r["ratio_step"], r["ratio_recompute_step"]
    (1.0, 2.0, None)
    """
    if (record["hidden"], record["heads"], record["sequence"]) != (shape.hidden, shape.heads, shape.sequence):
        raise InvalidParameterError("shape", shape.name, "the probed block's hidden size, heads and sequence")
    out = []
    for row in record["rows"]:
        f, b, _, _ = model.block_parts(shape, row["microbatch"])
        predicted = {"forward": f, "step": f + b, "recompute_step": 2 * f + b}
        item: dict[str, Any] = {"microbatch": row["microbatch"]}
        for key, value in predicted.items():
            item[f"predicted_{key}"] = value
            item[f"measured_{key}"] = row[key]
            item[f"ratio_{key}"] = None if row[key] is None else row[key] / value
        out.append(item)
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m queuesgd.block_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the record's JSON file (a name ending in .json)")
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--sequence", type=int, required=True)
    ap.add_argument("--microbatch", type=int, nargs="+", default=[1])
    device_arguments(ap, DTYPES, repeats=10, budget=120.0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--table", default=None, help="a GEMM table to compare with (load_gemm_table's name)")
    ap.add_argument("--memory-bandwidth", default=None, help="with --table: the device's memory bandwidth")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m queuesgd.block_probe OUT.json --hidden H --heads A --sequence S``: 0, or 2 and one line.

    Examples
    --------
    >>> main(["t.txt", "--hidden", "16", "--heads", "2", "--sequence", "8"])   # doctest: +SKIP
    2
    """
    return run_command(build_parser(), argv, _run)


def _comparison_model(table: str | None, bandwidth: str | None) -> ComputeModel | None:
    """The model ``--table`` and ``--memory-bandwidth`` name, checked before anything is timed."""
    from queuesgd.gemm_table import BUILTIN, load_gemm_table

    if table is None:
        if bandwidth is not None:  # it sets the compared model's memory-bound costs: nothing without one
            raise InvalidParameterError("--memory-bandwidth", bandwidth, "a bandwidth only with --table")
        return None
    try:
        gemm = load_gemm_table(table)
    except QueuesgdError as err:
        why = next((s.strip() for s in str(err).splitlines() if s.strip()), "")
        raise InvalidParameterError(
            "--table", table, f"a built-in table ({', '.join(BUILTIN)}) or a GEMM table's JSON file ({why})"
        ) from None
    try:
        return ComputeModel(gemm, bandwidth)
    except InvalidParameterError as err:
        raise InvalidParameterError("--memory-bandwidth", bandwidth, err.accepted) from None


def _run(a: argparse.Namespace) -> int:
    """Check every argument (the table and bandwidth too), then time, compare, write and print one line."""
    import json

    out = _checks.output_file("out", a.out, suffix=".json")
    for name in ("hidden", "heads", "sequence"):
        _checks.integer(f"--{name}", getattr(a, name), minimum=1, maximum=2**17)
    shape = TransformerShape(1, a.hidden, a.heads, a.sequence, 1, attention="flash", dropout=False)
    model = _comparison_model(a.table, a.memory_bandwidth)
    record = probe_block(shape, a.microbatch, device=a.device, dtype=a.dtype, layers=a.layers,
                         repeats=a.repeats, budget=a.budget)  # fmt: skip
    if model is not None:
        record["table"] = a.table
        record["comparison"] = compare_block(record, model, shape)
    write_text("out", out, json.dumps(record, indent=1) + "\n")  # /proc: refused, not a traceback
    cut = " (truncated by the budget)" if record["truncated"] else ""
    print(f"{record['device']}: {len(record['rows'])} micro-batches{cut} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
