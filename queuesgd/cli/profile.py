"""``queuesgd profile``: a PyTorch model, or a torch.profiler trace, into a workload file.

Every option is checked before the model is imported or built: ``--out`` is a
writable regular file ending in ``.json`` (the per-tensor trace ``.bk.log``
beside it is checked too), ``--model-args`` a JSON object, ``--input-shape``
sizes joined by ``x`` or ``,``; the model's name must be a class or a marked
factory (see :mod:`queuesgd.profiler_factory`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from queuesgd import _checks
from queuesgd.cli.args import fill_defaults
from queuesgd.errors import InvalidParameterError

if TYPE_CHECKING:
    from queuesgd.workload import Workload

#: One sample's shape on the command line: sizes joined by ``x`` or ``,`` ("3x224x224", "3,224,224", "784").
SHAPE = re.compile(r"[0-9]{1,12}(?:[x,][0-9]{1,12})*")


def run_profile(args: argparse.Namespace) -> int:
    out, log = _outputs(args.out)
    if args.from_trace is not None:
        return _profile_trace(args, out, log)
    fill_defaults(args, RUN_DEFAULTS)
    from queuesgd.profiler import profile
    from queuesgd.profiler_step import check_model_args

    if args.input_shape is not None and args.inputs is not None:
        raise InvalidParameterError("--input-shape", args.input_shape, "none beside --inputs (one of them)")
    if args.model is None or (args.input_shape is None) == (args.inputs is None):
        raise InvalidParameterError(
            "model", args.model, "a model and one of --input-shape or --inputs, or --from-trace TRACE.json"
        )
    shape = parse_shape(args.input_shape) if args.input_shape is not None else None
    model_args = check_model_args("--model-args", args.model_args)
    w = profile(
        args.model,
        batch_size=args.batch_size,
        input_shape=shape,
        inputs=args.inputs,
        autocast=args.autocast,
        accumulation=args.accumulation,
        device=args.device,
        threads=args.threads,
        warmup=args.warmup,
        repetitions=args.repetitions,
        seed=args.seed,
        model_args=model_args,
    )
    note = (
        f"queuesgd profile of {args.model}"
        + (f" with {model_args}" if model_args else "")
        + f": batch {args.batch_size} of {args.input_shape or args.inputs}, "
        f"{args.repetitions} steps on {args.device} with {args.threads} thread(s)"
        + (f", {args.autocast} autocast" if args.autocast else "")
        + (f", {args.accumulation} micro-steps per update" if args.accumulation > 1 else "")
    )
    return _save(w, out, log, note)


def parse_shape(text: str) -> tuple[int, ...]:
    """One sample's shape from ``"3x224x224"``, ``"3,224,224"`` or ``"784"``.

    Examples
    --------
    >>> parse_shape("3,224,224"), parse_shape("3x32x32"), parse_shape("784")
    ((3, 224, 224), (3, 32, 32), (784,))
    >>> parse_shape("8.7")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --input-shape: got '8.7'; accepted: sizes joined by x or , ...
    """
    compact = text.lower().replace(" ", "")
    if not SHAPE.fullmatch(compact):
        raise InvalidParameterError(
            "--input-shape", text, "sizes joined by x or , (e.g. 3x32x32 or 3,224,224; 784 for one)"
        )
    return tuple(int(d) for d in re.split("[x,]", compact))


def _outputs(value: str) -> tuple[Path, Path]:
    """``--out`` and the trace beside it (``X.json`` and ``X.bk.log``), checked before any work."""
    out = _checks.output_file("--out", value, suffix=".json")
    log = out.with_suffix(".bk.log")
    _checks.output_file("--out", str(log))  # the per-tensor trace written beside it
    return out, log


def _profile_trace(args: argparse.Namespace, out: Path, log: Path) -> int:
    from queuesgd.profiler_trace import read_trace

    if args.model is not None:
        raise InvalidParameterError("model", args.model, "a model or --from-trace, not both")
    given = _given(args)
    for option in ("input_shape", "inputs", "model_args", "autocast", *RUN_ONLY):
        if option in given:
            flag = "--" + option.replace("_", "-")
            raise InvalidParameterError(
                flag, getattr(args, option), "none with --from-trace (it runs no model)"
            )
    if any(_same_file(p, args.from_trace) for p in (out, log)):
        raise InvalidParameterError(
            "--out", str(out), f"a file other than the trace it reads ({args.from_trace})"
        )
    with _flag("--from-trace"):  # read_trace names the file it was given "path"
        w = read_trace(args.from_trace, batch_size=args.batch_size)
    micro = w.provenance["accumulation"] if w.provenance else 1
    if "accumulation" in given and args.accumulation != micro:
        raise InvalidParameterError(
            "--accumulation",
            args.accumulation,
            f"{micro}, the backward passes per optimizer step that the trace {args.from_trace} shows "
            "(or leave it out: the trace says)",
        )
    note = f"queuesgd profile --from-trace {args.from_trace}: batch {args.batch_size}"
    return _save(w, out, log, note + (f", {micro} micro-steps per update" if micro > 1 else ""))


#: The options of a profile run and their defaults (the parser's are None, so that a given one is known).
RUN_DEFAULTS = {"accumulation": 1, "repetitions": 20, "warmup": 3, "threads": 1, "device": "cpu", "seed": 0}
#: The options of a profile run that a trace, which runs nothing, would ignore: refused with --from-trace.
RUN_ONLY = ("repetitions", "warmup", "threads", "device", "seed")


@contextlib.contextmanager
def _flag(flag: str) -> Iterator[None]:
    """An error of the Python API about its ``path`` argument, named by the option that gave the path."""
    try:
        yield
    except InvalidParameterError as err:
        if err.field != "path":
            raise
        raise InvalidParameterError(flag, err.got, err.accepted) from None


def _given(args: argparse.Namespace) -> set[str]:
    """The ``profile`` options the user gave (those the parser leaves None otherwise)."""
    return {k for k, v in vars(args).items() if k != "command" and v is not None}


def _same_file(a: Path, b: str) -> bool:
    try:
        return a.exists() and Path(b).exists() and a.samefile(b)
    except (OSError, ValueError):  # unreadable, or a NUL in the name: read_trace says so
        return False


def _save(w: Workload, out: Path, log: Path, note: str) -> int:
    from queuesgd import units
    from queuesgd.catalog import save_workload

    with _flag("--out"):  # a write the system refuses (/proc) after the checks: save_workload's "path"
        path = save_workload(w, out, note=note)
    written = f"{path} and {log}" if w.layers else str(path)
    print(
        f"{w.name}: {len(w.layers)} tensors, {units.format_bytes(w.gradient_bytes)} of gradients, "
        f"step {w.compute_time * 1e3:.4g} ms, update {w.update_time * 1e3:.4g} ms -> {written}"
    )
    return 0
