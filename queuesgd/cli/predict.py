"""``queuesgd predict``, ``sweep``, ``whatif`` and ``derive``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any

from queuesgd import _checks
from queuesgd.cli.args import (
    bandwidths,
    check_plot,
    ints,
    latencies,
    notes,
    option_field,
    plot_table,
    split_list,
)
from queuesgd.cli.scheme_args import (
    ignored_flags,
    readers,
    scheme_flag,
    scheme_from_args,
    scheme_options,
    setup,
    shown,
)
from queuesgd.errors import InvalidParameterError, NotRepresentable, QueuesgdError
from queuesgd.specs import NUMBER as _NUMBER


def run_predict(args: argparse.Namespace, *, lists: bool) -> int:
    """``predict`` and ``sweep``: an error of the Python API is named in the command line's words."""
    try:
        return _predict(args, lists=lists)
    except InvalidParameterError as err:
        raise InvalidParameterError(cli_field(err.field), err.got, cli_spelling(err.accepted)) from err


def _predict(args: argparse.Namespace, *, lists: bool) -> int:
    import itertools

    from queuesgd.prediction import sweep

    check_plot(args.plot)
    check_run_flags(args)
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
        for caveat in variant.caveats(cluster, workload):
            if f"note: {caveat}" not in notes(args):
                notes(args).append(f"note: {caveat}")
        for n in dict.fromkeys(int(x) for x in table.columns["workers"].tolist()):
            try:
                mem = variant.memory_per_worker(workload, dataclasses.replace(cluster, workers=n))
            except QueuesgdError:  # a cluster field sized for other workers (speeds): no memory note
                mem = None
            if mem is not None:
                label = ", ".join(f"{k}={shown(k, v, args)}" for k, v in zip(names, combo))
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
        fixed = ", ".join(f"{k}={shown(k, v[0], args)}" for k, v in params.items() if len(v) == 1)
        print(
            f"{table.scheme}{' (' + fixed + ')' if fixed else ''} · {args.workload} · "
            f"batch {workload.batch_size} · method {table.method}"
        )
        print(table.table())
    return 0


#: whatif's arguments and their options, for the errors of queuesgd.scaling.whatif.
_WHATIF_FLAGS = {
    "workload": "--workload",
    "workers": "--workers",
    "bandwidth": "--bandwidth",
    "compression": "--compression",
    "latency": "--latency",
    "fusion_bytes": "--fusion-bytes",
    "fusion_time": "--fusion-time",
}


def run_whatif(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.scaling import whatif

    check_plot(args.plot)
    compression = []
    for text in split_list(args.compression, "--compression"):
        if not _NUMBER.match(text):
            raise InvalidParameterError(
                "--compression", text, "ratios >= 1 separated by commas, e.g. 1,2,5,10"
            )
        compression.append(float(text))
    try:
        result = whatif(
            workload=split_list(args.workload, "--workload"),
            workers=ints("--workers", args.workers),
            bandwidth=bandwidths(args),
            compression=compression,
            latency=units.parse_seconds(args.latency, "--latency"),
            fusion_bytes=args.fusion_bytes,
            fusion_time=args.fusion_time,
            overlap=not args.no_overlap,
        )
    except InvalidParameterError as err:  # the Python argument's name -> its option
        raise InvalidParameterError(option_field(err.field, _WHATIF_FLAGS), err.got, err.accepted) from err
    if args.plot:
        result.plot(args.plot)
    if args.json:
        print(json.dumps(result.rows(), indent=1))
    else:
        print("scaling factor = t_batch / (t_batch + overhead), ring all-reduce at full line rate")
        print(result.table())
    return 0


def run_derive(args: argparse.Namespace) -> int:
    from queuesgd.derivation import default_compute, derive

    scheme, params = scheme_from_args(args, derive_scheme_name(args), lists=False)
    workload = None
    if args.workload is not None:
        from queuesgd.catalog import load_workload

        workload = load_workload(args.workload)
        if getattr(scheme, "shape", None) is not None:  # as predict: a workload of that model, or none
            from queuesgd.model_shapes_mlp import check_workload

            check_workload(scheme.shape, workload, "--workload", "leave --workload out (symbols stay free)")
    compute = derive_compute(args.compute, workload)
    workers = None if args.workers is None else one("--workers", ints("--workers", args.workers))
    try:
        f = derive(scheme, compute=compute or default_compute(scheme), workers=workers)
        values = derive_values(args, f, workload, scheme, params)
        f = f.subs(values)
    except NotRepresentable as err:
        why = cli_spelling(str(err))
        if "predict" not in why and "--" not in why:  # nothing to add or run: say what predicts it
            why += f" (queuesgd predict --scheme {scheme.key} gives its throughput)"
        raise NotRepresentable(why) from err
    except InvalidParameterError as err:
        raise InvalidParameterError(cli_field(err.field), err.got, cli_spelling(err.accepted)) from err
    for flag, symbol in (("--limit", args.limit), ("--optimize", args.optimize)):
        if symbol is not None and symbol not in f.free_names:
            raise InvalidParameterError(
                flag, symbol, f"a free symbol of the formula: {', '.join(f.free_names) or 'none is left'}"
            )
    if not (f.free_names or f.condition_names) and not f.expr.free_symbols:  # every symbol given: the number
        import sympy

        from queuesgd.formula import Formula

        f = Formula(sympy.Float(float(f.evaluate())), {}, {}, f.name, f.assumptions)
    print(f.latex() if args.latex else str(f).rstrip("\n"))
    if values and not args.latex:
        print("  with " + ", ".join(f"{k} = {v:g}" for k, v in values.items()))
    if args.limit:
        import sympy

        lim = f.limit(args.limit)
        print(f"limit {args.limit} -> oo: " + (sympy.latex(lim) if args.latex else sympy.sstr(lim)))
    if args.optimize:
        import sympy

        try:  # a maximum SymPy proves, or the statement of why there is none (never a minimum)
            best = f.optimize(args.optimize)
        except NotRepresentable as why:
            print(f"optimal {args.optimize}: none verified: {why}")
            return 0
        value = sympy.latex(best.argmax) if args.latex else sympy.sstr(best.argmax)
        print(f"optimal {args.optimize}: {value}\n  verified: {best.evidence}")
    return 0


def derive_scheme_name(args: argparse.Namespace) -> str:
    """The scheme of ``derive``: the positional name or ``--scheme`` (as in predict), exactly one."""
    if args.scheme is not None and args.scheme_option is not None and args.scheme != args.scheme_option:
        raise InvalidParameterError(
            "--scheme", args.scheme_option, f"one scheme: {args.scheme!r} is already named before it"
        )
    name = args.scheme if args.scheme is not None else args.scheme_option
    if name is None:
        raise InvalidParameterError("scheme", None, "a scheme name, e.g. `queuesgd derive sync-ps`")
    return name


def one(field: str, values: list[Any]) -> Any:
    """The single value of a list option; derive substitutes one number per symbol."""
    if len(values) != 1:
        raise InvalidParameterError(
            field, ",".join(str(v) for v in values), "one value (derive substitutes one; predict takes lists)"
        )
    return values[0]


def derive_compute(text: str | None, workload: Any) -> str | None:
    """The law ``derive`` uses: ``--compute`` (predict's spelling), else the workload's, else the scheme's.

    Only exponential and deterministic compute have closed forms; any other law
    predict accepts is refused with the command that predicts it.

    Examples
    --------
    >>> derive_compute("deterministic", None), derive_compute(None, None)
    ('deterministic', None)
    >>> derive_compute("erlang:4", None)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --compute: got 'erlang:4'; accepted: exponential or \
deterministic (derive's closed forms have no other law); for erlang:4: queuesgd predict --compute erlang:4
    """
    from queuesgd.derivation import COMPUTE_LAWS
    from queuesgd.specs import compute_law

    if text is None:
        if workload is None:
            return None
        kind = type(workload.compute).__name__.lower()
        if kind in COMPUTE_LAWS:
            return kind
        raise InvalidParameterError(
            "--compute",
            None,
            f"--compute exponential or --compute deterministic (with the workload's mean): the workload's "
            f"law {workload.compute!r} has no closed form",
        )
    if text in COMPUTE_LAWS:
        return text
    compute_law(text, 1.0)  # predict's own error for a law it does not know
    raise InvalidParameterError(
        "--compute",
        text,
        f"exponential or deterministic (derive's closed forms have no other law); "
        f"for {text}: queuesgd predict --compute {text}",
    )


# Symbols a derived formula shares with a workload: the workload's value, and the words the formula's
# meaning of the symbol holds where it is that quantity (a pipeline's ``m`` is a micro-batch's samples
# and its ``S`` its stages: neither is substituted).
_WORKLOAD_SYMBOLS: dict[str, tuple[tuple[str, ...], Any]] = {
    "m": (("batch size",), lambda w: w.batch_size),
    "G": (("gradient bytes",), lambda w: w.gradient_bytes),
    "P": (("parameter bytes",), lambda w: w.parameter_bytes),
    "S": (("all-reduce message bytes",), lambda w: w.gradient_bytes),
    "u": (("update time", "optimizer step"), lambda w: w.update_time),
    "t": (("compute time",), lambda w: w.compute_time),
    "mu": (("compute rate",), lambda w: 1.0 / w.compute_time),
}
_CLUSTER_SYMBOLS = {
    "B": ("bandwidth", "--bandwidth"),
    "alpha": ("latency", "--latency"),
    "s": ("shards", "--ps-shards"),
}


def derive_values(
    args: argparse.Namespace, f: Any, workload: Any, scheme: Any, params: dict[str, list[Any]]
) -> dict[str, Any]:
    """The values ``derive``'s options give the free symbols of ``f`` (those it has, by meaning).

    A scheme flag given (``--period 8``) sets its symbol (``H``) where the
    formula keeps it free; one the formula does not read gets a note.
    """
    import numbers

    from queuesgd import units

    def means(name: str, words: tuple[str, ...]) -> bool:
        return name in f.free_names and any(w in f.meaning.get(name, "") for w in words)

    values: dict[str, Any] = {}
    unread = set(scheme.ignored_parameters("closed_form")) if "closed_form" in scheme.methods else set()
    for name in params:
        value = getattr(scheme, name)
        symbol = _PARAMETER_SYMBOLS.get(name)
        if name == "shape" and value is not None and "l" in f.free_names:  # a shape's layers are its l
            symbol, value = "l", value.layers
        if symbol in f.free_names and isinstance(value, numbers.Real) and not isinstance(value, bool):
            values[symbol] = value
        elif name in unread:
            notes(args).append(
                f"note: the formula does not read {scheme_flag(name)} "
                f"(--method {readers(scheme, [scheme_flag(name)], params)} of queuesgd predict read it)"
            )
    if workload is not None:
        for name, (words, value) in _WORKLOAD_SYMBOLS.items():
            if means(name, words) and value(workload) is not None:
                values[name] = value(workload)
    given = {
        "--bandwidth": lambda t: units.parse_bandwidth(t, "--bandwidth"),
        "--latency": lambda t: units.parse_seconds(t, "--latency"),
        "--ps-shards": lambda t: one("--ps-shards", ints("--ps-shards", t)),
    }
    for name, (word, flag) in _CLUSTER_SYMBOLS.items():
        text = getattr(args, flag[2:].replace("-", "_"))
        if text is None:
            continue
        value = given[flag](one(flag, split_list(text, flag)))
        if means(name, (word,)):
            values[name] = value
        else:
            notes(args).append(f"note: {flag} is not in this formula (it has no {name})")
    return values


# The symbol of each scheme parameter that a formula may keep free (its value given on the command line).
_PARAMETER_SYMBOLS = {
    "backups": "b",
    "timeout": "T",
    "per_node": "g",
    "intra_bandwidth": "B_intra",
    "intra_latency": "alpha_intra",
    "density": "d",
    "rank": "r",
    "compress_time": "c_c",
    "decompress_time": "c_d",
    "units": "k",
    "period": "H",
    "stages": "S",
    "microbatches": "M",
    "tensor": "t",
    "pipeline": "p",
    "data": "d",
    "layers": "l",
}

# The options that substitute each symbol, for the errors of the formula's domains.
_SYMBOL_FLAGS = {
    "workers": "--workers",
    "n": "--workers",
    "B": "--bandwidth",
    "alpha": "--latency",
    "s": "--ps-shards",
}
for _name, _symbol in _PARAMETER_SYMBOLS.items():  # the first flag of a symbol (d: --density before --data)
    _SYMBOL_FLAGS.setdefault(_symbol, scheme_flag(_name))


#: The options of a Cluster's fields (``Cluster.stragglers.count`` is ``--random-delay``'s K).
_CLUSTER_FLAGS = {
    "workers": "--workers",
    "bandwidth": "--bandwidth",
    "latency": "--latency",
    "ps_shards": "--ps-shards",
    "stragglers": "--random-delay",
    "gpus_per_node": "--gpus-per-node",
    "node_bandwidth": "--node-bandwidth",
    "node_latency": "--node-latency",
    "rails": "--rails",
}
#: The options of predict's and sweep's simulation arguments (queuesgd.run_options).
_RUN_FLAGS = {"iterations": "--iterations", "rng": "--seed"}


def check_run_flags(args: argparse.Namespace) -> None:
    """``--seed`` and ``--iterations`` (``predict``, ``sweep``, ``compare``), refused naming the flags.

    The API's own errors name ``rng`` (and a Generator the CLI cannot take) and ``iterations``.

    Examples
    --------
    >>> check_run_flags(argparse.Namespace(seed=0, iterations=None))
    >>> check_run_flags(argparse.Namespace(seed=0, iterations=0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --iterations: got 0; accepted: an integer >= 1, at most ...
    """
    from queuesgd.run_options import iterations_option

    _checks.integer(_RUN_FLAGS["rng"], args.seed, minimum=0)
    try:
        iterations_option(args.iterations)
    except InvalidParameterError as err:
        raise InvalidParameterError(cli_field(err.field), err.got, err.accepted) from err


def cli_field(field: str) -> str:
    """The option behind an error's field: a symbol's, ``Cluster.workers``'s, a scheme parameter's flag.

    Examples
    --------
    >>> cli_field("n"), cli_field("Cluster.workers"), cli_field("HierarchicalAllReduce.per_node")
    ('--workers', '--workers', '--per-node')
    >>> cli_field("workload")
    '--workload'
    >>> cli_field("TransformerShape.layers")
    'TransformerShape.layers'
    >>> cli_field("Cluster.stragglers.count"), cli_field("iterations"), cli_field("rng")
    ('--random-delay', '--iterations', '--seed')
    """
    if field in _SYMBOL_FLAGS:
        return _SYMBOL_FLAGS[field]
    if field in _RUN_FLAGS:
        return _RUN_FLAGS[field]
    owner, _, name = field.rpartition(".")
    cluster_field = re.match(r"Cluster\.([a-z_]+)", field)
    if cluster_field and cluster_field.group(1) in _CLUSTER_FLAGS:
        return _CLUSTER_FLAGS[cluster_field.group(1)]
    if field == "workload":  # load_workload's
        return "--workload"
    if owner in _scheme_class_names() and name in scheme_options():
        return scheme_flag(name)
    return field


def _scheme_class_names() -> set[str]:
    """The class names of the registered schemes (whose fields are the CLI's scheme flags)."""
    from queuesgd import registry

    return {entry.cls.__name__ for entry in registry.entries()}


# ``name='value'`` or ``name=N`` in a message written for the Python API, outside ``Scheme(...)``.
_PY_KEYWORD = re.compile(r"\b([a-z_][a-z0-9_]*)=('[^']*'(?:(?:,\s*|\s+or\s+)'[^']*')*|[\w.]+)")
_CONSTRUCTOR = re.compile(r"\b[A-Z]\w*\([^()]*\)")


def cli_spelling(message: str) -> str:
    """``message`` with the Python keywords of the CLI's options written as the options.

    ``compute='deterministic'`` becomes ``--compute deterministic``, ``workers=N``
    ``--workers N``, a scheme parameter its flag, and ``method='fine'`` the
    predict command that has it; a scheme's constructor (``AsyncPS(duplex=0.5)``)
    is left as it is.

    Examples
    --------
    >>> cli_spelling("use compute='deterministic', or method='ctmc' or 'simulate'")
    'use --compute deterministic, or queuesgd predict --method ctmc or --method simulate'
    >>> cli_spelling("Pipeline(p2p='rendezvous') has none; use p2p='eager' or pass workers=N")
    "Pipeline(p2p='rendezvous') has none; use --p2p eager or pass --workers N"
    """
    kept = [m.span() for m in _CONSTRUCTOR.finditer(message)]
    flags = {name: scheme_flag(name) for name in scheme_options()}
    flags.update(compute="--compute", workers="--workers", method="--method")

    def option(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in flags or any(a <= m.start() < b for a, b in kept):
            return m.group(0)
        values = re.findall(r"'([^']*)'", m.group(2)) or [m.group(2)]
        text = " or ".join(f"{flags[name]} {v}" for v in values)
        return "queuesgd predict " + text if name == "method" else text

    out = _PY_KEYWORD.sub(option, message)
    return out.replace("predict with queuesgd predict", "queuesgd predict")
