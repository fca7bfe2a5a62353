"""``queuesgd profile``: a PyTorch model, or a torch.profiler trace, into a workload file."""

from __future__ import annotations

import argparse

from queuesgd.errors import InvalidParameterError


def run_profile(args: argparse.Namespace) -> int:
    if args.from_trace is not None:
        return _profile_trace(args)
    from queuesgd import units
    from queuesgd.catalog import save_workload
    from queuesgd.profiler import profile
    from queuesgd.profiler_step import import_callable

    if args.model is None or (args.input_shape is None) == (args.inputs is None):
        raise InvalidParameterError(
            "model", args.model, "a model and one of --input-shape or --inputs, or --from-trace TRACE.json"
        )
    shape = inputs = None
    if args.input_shape is not None:
        try:
            shape = tuple(int(d) for d in args.input_shape.lower().split("x"))
        except ValueError:
            raise InvalidParameterError(
                "--input-shape", args.input_shape, "sizes joined by x, e.g. 3x32x32"
            ) from None
    else:
        inputs = import_callable(
            "--inputs", args.inputs, "'module.path:callable', a factory inputs(batch_size, device)"
        )
    w = profile(
        args.model,
        batch_size=args.batch_size,
        input_shape=shape,
        inputs=inputs,
        autocast=args.autocast,
        accumulation=args.accumulation,
        device=args.device,
        threads=args.threads,
        warmup=args.warmup,
        repetitions=args.repetitions,
        seed=args.seed,
    )
    path = save_workload(
        w,
        args.out,
        note=f"queuesgd profile of {args.model}: batch {args.batch_size} of "
        f"{args.input_shape or args.inputs}, "
        f"{args.repetitions} steps on {args.device} with {args.threads} thread(s)"
        + (f", {args.autocast} autocast" if args.autocast else "")
        + (f", {args.accumulation} micro-steps per update" if args.accumulation > 1 else ""),
    )
    print(
        f"{w.name}: {len(w.layers)} tensors, {units.format_bytes(w.gradient_bytes)} of gradients, "
        f"step {w.compute_time * 1e3:.4g} ms, update {w.update_time * 1e3:.4g} ms -> {path}"
    )
    return 0


def _profile_trace(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.catalog import save_workload
    from queuesgd.profiler_trace import read_trace

    if args.model is not None:
        raise InvalidParameterError("model", args.model, "a model or --from-trace, not both")
    w = read_trace(args.from_trace, batch_size=args.batch_size)
    path = save_workload(
        w, args.out, note=f"queuesgd profile --from-trace {args.from_trace}: batch {args.batch_size}"
    )
    print(
        f"{w.name}: {len(w.layers)} tensors, {units.format_bytes(w.gradient_bytes)} of gradients, "
        f"step {w.compute_time * 1e3:.4g} ms, update {w.update_time * 1e3:.4g} ms -> {path}"
    )
    return 0
