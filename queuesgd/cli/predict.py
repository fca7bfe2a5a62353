"""``queuesgd predict``, ``sweep``, ``whatif`` and ``derive``."""

from __future__ import annotations

import argparse
import dataclasses
import json

from queuesgd.cli.args import bandwidths, check_plot, ints, latencies, notes, plot_table, split_list
from queuesgd.cli.scheme_args import ignored_flags, readers, scheme_flag, scheme_from_args, setup
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.specs import NUMBER as _NUMBER


def run_predict(args: argparse.Namespace, *, lists: bool) -> int:
    import itertools

    from queuesgd.prediction import sweep

    check_plot(args.plot)
    scheme, workload, cluster, params = setup(args, lists=lists)
    workers = ints("--workers", args.workers)
    bandwidth = bandwidths(args)
    latency = latencies(args)
    if args.method != "auto":
        scheme.check_method(args.method)
        ignored = ignored_flags(scheme, params, args.method)
        if ignored:
            raise InvalidParameterError(
                ignored[0],
                getattr(args, "param_" + next(n for n in params if scheme_flag(n) == ignored[0])),
                f"no {ignored[0]} with --method {args.method}, which does not read it "
                f"(--method {readers(scheme, ignored, params)} read it)",
            )
    swept = {k: v for k, v in params.items() if len(v) > 1}
    table = sweep(
        scheme,
        workload,
        cluster,
        workers=workers,
        bandwidth=bandwidth,
        latency=latency,
        method=args.method,
        rng=args.seed,
        iterations=args.iterations,
        **swept,
    )
    if args.plot:
        plot_table(table, workload.name or args.workload, args.plot)
    for method in dict.fromkeys(table.columns["method"].tolist()):
        ignored = ignored_flags(scheme, params, method) if args.method == "auto" else []
        if ignored:
            notes(args).append(
                f"note: method {method} does not read {', '.join(ignored)} "
                f"(--method {readers(scheme, ignored, params)} read it)"
            )
    names = list(params)
    memory_notes = []  # after the caveats, as the last notes
    for combo in itertools.product(*(params[k] for k in names)):
        variant = scheme.replace(**dict(zip(names, combo))) if names else scheme
        for caveat in variant.caveats(cluster):
            if f"note: {caveat}" not in notes(args):
                notes(args).append(f"note: {caveat}")
        for n in dict.fromkeys(int(x) for x in table.columns["workers"].tolist()):
            try:
                mem = variant.memory_per_worker(workload, dataclasses.replace(cluster, workers=n))
            except QueuesgdError:  # a cluster field sized for other workers (speeds): no memory note
                mem = None
            if mem is not None:
                label = ", ".join(f"{k}={v}" for k, v in zip(names, combo))
                memory_notes.append(
                    f"note: memory per worker{' (' + label + ')' if label else ''}, {n} workers: {mem}"
                )
    notes(args).extend(memory_notes)
    if args.json:
        rows = []
        for r in table.rows():
            rows.append({"scheme": table.scheme, "workload": args.workload, **r})
        print(json.dumps(rows, indent=1))
    else:
        fixed = ", ".join(f"{k}={v[0]}" for k, v in params.items() if len(v) == 1)
        print(
            f"{table.scheme}{' (' + fixed + ')' if fixed else ''} · {args.workload} · "
            f"batch {workload.batch_size} · method {table.method}"
        )
        print(table.table())
    return 0


def run_whatif(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.scaling import whatif

    check_plot(args.plot)
    compression = []
    for text in split_list(args.compression):
        if not _NUMBER.match(text):
            raise InvalidParameterError(
                "--compression", text, "ratios >= 1 separated by commas, e.g. 1,2,5,10"
            )
        compression.append(float(text))
    result = whatif(
        workload=split_list(args.workload),
        workers=ints("--workers", args.workers),
        bandwidth=bandwidths(args),
        compression=compression,
        latency=units.parse_seconds(args.latency, "--latency"),
        fusion_bytes=args.fusion_bytes,
        fusion_time=args.fusion_time,
        overlap=not args.no_overlap,
    )
    if args.plot:
        result.plot(args.plot)
    if args.json:
        print(json.dumps(result.rows(), indent=1))
    else:
        print("scaling factor = t_batch / (t_batch + overhead), ring all-reduce at full line rate")
        print(result.table())
    return 0


def run_derive(args: argparse.Namespace) -> int:
    from queuesgd.derivation import derive

    options = {} if args.workers is None else {"workers": args.workers}
    scheme, _ = scheme_from_args(args, args.scheme, lists=False)
    f = derive(scheme, compute=args.compute, **options)
    print(f.latex() if args.latex else str(f))
    if args.limit:
        import sympy

        lim = f.limit(args.limit)
        print(f"limit {args.limit} -> oo: " + (sympy.latex(lim) if args.latex else sympy.sstr(lim)))
    if args.optimize:
        import sympy

        from queuesgd.errors import NotRepresentable

        try:  # a maximum SymPy proves, or the statement of why there is none (never a minimum)
            best = f.optimize(args.optimize)
        except NotRepresentable as why:
            print(f"optimal {args.optimize}: none verified: {why}")
            return 0
        value = sympy.latex(best.argmax) if args.latex else sympy.sstr(best.argmax)
        print(f"optimal {args.optimize}: {value}\n  verified: {best.evidence}")
    return 0
