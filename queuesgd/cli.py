"""Command line: ``queuesgd predict | sweep | derive | catalog``.

Every user error prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.specs import NUMBER as _NUMBER
from queuesgd.specs import RANDOM_DELAY, compute_law, parse_params, parse_value, random_delay


class _HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (none for flags and options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS or default == []:
            return text
        if action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Renamed(argparse.Action):
    """An option with a new name whose old spelling still works, with a warning after the output."""

    def __init__(self, *args: Any, old: str = "", **kwargs: Any) -> None:
        self.old = old
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        if option_string == self.old:
            new = next(o for o in self.option_strings if o != self.old)
            _notes(namespace).append(f"warning: {self.old} is deprecated here; use {new}")


def _notes(namespace: Any) -> list[str]:
    """The notes and warnings printed on stderr after a command's output (none on an error)."""
    if getattr(namespace, "notes", None) is None:
        namespace.notes = []
    return namespace.notes


def split_list(text: str) -> list[str]:
    """Split ``"1,10,25Gbit/s"`` into items; a unit on the last item applies to bare numbers.

    Examples
    --------
    >>> split_list("1,10,25Gbit/s")
    ['1Gbit/s', '10Gbit/s', '25Gbit/s']
    >>> split_list("1,2,4")
    ['1', '2', '4']
    """
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise InvalidParameterError("list", text, "comma-separated values such as 1,2,4 or 1,10Gbit/s")
    last = items[-1]
    m = re.match(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*(.*)$", last)
    unit = m.group(3) if m else ""
    if unit:
        items = [s + unit if _NUMBER.match(s) else s for s in items]
    return items


def _ints(field: str, text: str) -> list[int]:
    out = []
    for s in split_list(text):
        if not re.fullmatch(r"\d+", s) or int(s) < 1:
            raise InvalidParameterError(field, s, "positive integers separated by commas, e.g. 1,2,4,8")
        out.append(int(s))
    return out


#: File suffixes --plot accepts (matplotlib's image formats).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def _check_plot(path: str | None) -> None:
    """Refuse a --plot file name matplotlib cannot write, before any work is done."""
    if path is None:
        return
    from pathlib import Path

    if not path.strip() or Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise InvalidParameterError("--plot", path, f"a file name ending in {', '.join(PLOT_SUFFIXES)}")


def _plausible(args: argparse.Namespace, flag: str, items: list[str], values: list[float]) -> None:
    """Warn (after the output) about a bare number that is probably missing its unit."""
    for text, value in zip(items, values):
        if not _NUMBER.match(text):
            continue
        if flag == "--bandwidth" and value < 1e6:
            _notes(args).append(
                f"warning: --bandwidth {text} is {value:g} bytes/s (a bare number is bytes/s); "
                f"give a unit, e.g. {text}Gbit/s"
            )
        elif flag == "--latency" and value >= 1.0:
            _notes(args).append(
                f"warning: --latency {text} is {value:g} seconds (a bare number is seconds); "
                f"give a unit, e.g. {text}us"
            )


def _bandwidths(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.bandwidth)
    out = [units.parse_bandwidth(b, "--bandwidth") for b in items]
    _plausible(args, "--bandwidth", items, out)
    return out


def _latencies(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.latency)
    out = [units.parse_seconds(x, "--latency") for x in items]
    _plausible(args, "--latency", items, out)
    return out


# Scheme parameters that the command line cannot express (objects).
_NOT_ON_CLI = frozenset({"predictor"})
# Scheme parameters whose flag has another name: static-cutoff's ``timeout`` is ``--cutoff``, so
# that ``--timeout`` means a wall-clock limit (as in ``validate``); the old spelling still works.
_FLAG_NAMES = {"timeout": "cutoff"}


def scheme_flag(name: str) -> str:
    """The command-line flag of a scheme parameter.

    Examples
    --------
    >>> scheme_flag("max_stale"), scheme_flag("timeout")
    ('--max-stale', '--cutoff')
    """
    return "--" + _FLAG_NAMES.get(name, name).replace("_", "-")


def _scheme_options() -> dict[str, set[str]]:
    """Scheme parameter name -> the schemes that have it."""
    from queuesgd.registry import SCHEMES

    out: dict[str, set[str]] = {}
    for key, cls in SCHEMES.items():
        for name in cls.parameters():
            if name not in _NOT_ON_CLI:
                out.setdefault(name, set()).add(key)
    return out


def _scheme_defaults(name: str, keys: set[str]) -> str:
    """``"default: X"`` for a scheme parameter (per scheme where they differ; '' when required)."""
    import dataclasses

    from queuesgd.registry import SCHEMES

    found: dict[str, str] = {}
    for key in sorted(keys):
        field = next(f for f in dataclasses.fields(SCHEMES[key]) if f.name == name)
        if field.default is not dataclasses.MISSING:
            value = field.default
            found[key] = str(value).lower() if isinstance(value, bool) else str(value)
    if not found:
        return ""
    if len(set(found.values())) == 1 and len(found) == len(keys):
        return f"default: {next(iter(found.values()))}"
    return "defaults: " + ", ".join(f"{k} {v}" for k, v in found.items())


def _scheme_names() -> str:
    """The registered scheme keys, aliases in parentheses: ``"..., ring-allreduce (sync-allreduce), ..."``."""
    from queuesgd import registry

    return ", ".join(e.key + (f" ({', '.join(e.aliases)})" if e.aliases else "") for e in registry.entries())


def _add_common(p: argparse.ArgumentParser, *, lists: bool) -> None:
    p.add_argument("--scheme", default="async-ps", help=f"coordination scheme: {_scheme_names()}")
    p.add_argument(
        "--workload", default="resnet50", help="catalog workload name (see `queuesgd catalog list`)"
    )
    p.add_argument("--workers", default="1,2,4,8,16,32,64", help="comma-separated worker counts")
    p.add_argument(
        "--bandwidth", default="10Gbit/s", help="link bandwidth(s), e.g. 10Gbit/s or 1,10,25Gbit/s"
    )
    p.add_argument("--latency", default="0", help="one-way latency(s), e.g. 50us")
    p.add_argument("--ps-shards", default="1", help="number of parameter-server shards")
    p.add_argument(
        "--compute",
        metavar="LAW",
        help="compute-time law with the workload's mean: deterministic, exponential, "
        "erlang:K, lognormal:SCV, gamma:SCV, normal:CV",
    )
    p.add_argument("--random-delay", metavar="K:DELAY", help=f"random stragglers: {RANDOM_DELAY}")
    p.add_argument("--method", default="auto", help="auto, closed_form, mva, ctmc, simulate, coarse or fine")
    p.add_argument("--seed", type=int, default=0, help="random seed for method simulate")
    p.add_argument("--iterations", type=int, help="simulated iterations (method simulate)")
    _add_scheme_flags(p, lists=lists)
    p.add_argument("--json", action="store_true", help="print machine-readable rows")
    p.add_argument("--plot", metavar="FILE.png", help="save a scaling curve")


def _add_scheme_flags(p: argparse.ArgumentParser, *, lists: bool) -> None:
    each = "comma-separated values" if lists else "a value"
    for name, keys in sorted(_scheme_options().items(), key=lambda kv: scheme_flag(kv[0])):
        flag = scheme_flag(name)
        old = "--" + name.replace("_", "-")
        extra: dict[str, Any] = {"action": _Renamed, "old": old} if old != flag else {}
        p.add_argument(
            flag,
            *([old] if old != flag else []),
            dest=f"param_{name}",
            metavar="VALUES" if lists else "VALUE",
            help=f"{each} for the scheme parameter {name} ({', '.join(sorted(keys))})"
            + (f"; {_scheme_defaults(name, keys)}" if _scheme_defaults(name, keys) else "")
            + (f"; {old} is the deprecated spelling" if old != flag else ""),
            **extra,
        )


def _build_parser() -> argparse.ArgumentParser:
    from queuesgd.harness.layout import LIVE_SCHEMES

    parser = _Parser(prog="queuesgd", description="Predict the throughput of distributed SGD training.")
    from queuesgd import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("predict", help="predict samples/s for a scheme over workers and bandwidths")
    _add_common(p, lists=False)
    p = sub.add_parser("sweep", help="like predict, with lists for the scheme's parameters too")
    _add_common(p, lists=True)

    d = sub.add_parser("derive", help="print a scheme's throughput formula")
    d.add_argument("scheme", help=f"coordination scheme: {_scheme_names()}")
    d.add_argument("--compute", default="exponential", help="compute-time law: exponential or deterministic")
    d.add_argument("--workers", type=int, help="fixed number of workers (schemes solved by MVA)")
    d.add_argument("--latex", action="store_true", help="print LaTeX")
    d.add_argument("--limit", metavar="SYMBOL", help="also print the limit as SYMBOL -> infinity")
    d.add_argument("--optimize", metavar="SYMBOL", help="also print the SYMBOL that maximizes throughput")
    _add_scheme_flags(d, lists=False)

    w = sub.add_parser(
        "whatif", help="scaling factor at full line rate (Zhang et al., NetAI 2020) over a grid"
    )
    w.add_argument("--workload", default="resnet50", help="catalog workload name(s), comma-separated")
    w.add_argument("--workers", default="16,32,64", help="comma-separated ring sizes")
    w.add_argument("--bandwidth", default="1,10,25,40,100Gbit/s", help="line rate(s), e.g. 1,10,100Gbit/s")
    w.add_argument("--compression", default="1", help="gradient compression ratio(s) >= 1, e.g. 1,2,5,10")
    w.add_argument("--latency", default="0", help="per-step ring latency alpha (the paper: 0)")
    w.add_argument("--fusion-bytes", default="64MiB", help="fusion buffer size, or none")
    w.add_argument("--fusion-time", default="5ms", help="fusion cycle (backward time per message), or none")
    w.add_argument("--no-overlap", action="store_true", help="communicate after the whole backward pass")
    w.add_argument("--json", action="store_true", help="print machine-readable rows")
    w.add_argument("--plot", metavar="FILE.png", help="save scaling factor against bandwidth")

    cmp = sub.add_parser("compare", help="compare your own measured runs (a CSV file) with the predictions")
    cmp.add_argument(
        "measured",
        metavar="FILE.csv",
        help="one row per run or step: workers, and samples_per_second, time or step_time "
        "(columns: docs/compare.md)",
    )
    cmp.add_argument("--scheme", help="the scheme of every row, unless the file has a scheme column")
    cmp.add_argument("--workload", help="catalog workload of all rows, unless the file has a workload column")
    cmp.add_argument("--bandwidth", help="link bandwidth for rows without a bandwidth cell, e.g. 10Gbit/s")
    cmp.add_argument("--latency", help="one-way latency for rows without a latency cell (with --bandwidth)")
    cmp.add_argument("--ps-shards", type=int, help="parameter-server shards (with --bandwidth)")
    cmp.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="scheme parameter")
    cmp.add_argument("--method", default="auto", help="prediction method (as in predict)")
    cmp.add_argument(
        "--warmup", type=int, help="updates dropped at the start of each run (default: the first 5%%)"
    )
    cmp.add_argument("--ignore", metavar="COLUMNS", help="comma-separated columns of the file to leave out")
    cmp.add_argument("--seed", type=int, default=0, help="random seed for simulated predictions")
    cmp.add_argument("--iterations", type=int, help="simulated iterations (method simulate)")
    cmp.add_argument("--json", action="store_true", help="print machine-readable rows")

    v = sub.add_parser("validate", help="run a scheme live with PyTorch workers and compare with the model")
    v.add_argument(
        "--scheme",
        default="ring-allreduce",
        help=f"scheme run live: {', '.join(LIVE_SCHEMES)} (sync-allreduce = ring-allreduce)",
    )
    v.add_argument("--workers", default="2,4,8", help="comma-separated worker counts")
    v.add_argument("--steps", type=int, default=200, help="steps per worker, warm-up included")
    v.add_argument("--workload", default="emulated", help="emulated (timed waits), mlp or cnn")
    v.add_argument("--compute", default="20ms", help="mean compute time per step (emulated workload)")
    v.add_argument("--gradient-bytes", default="1MB", help="gradient size (emulated workload)")
    v.add_argument("--batch-size", type=int, default=32, help="samples per step per worker")
    v.add_argument(
        "--straggler",
        help="compute law (the measured mean is --compute): none, lognormal:SCV, gamma:SCV, "
        "exponential, erlang:K, normal:CV",
    )
    v.add_argument("--random-delay", metavar="K:DELAY", help=f"random stragglers: {RANDOM_DELAY}")
    v.add_argument("--bandwidth", help="emulated link bandwidth, e.g. 1Gbit/s (default: loopback)")
    v.add_argument("--latency", default="0", help="emulated one-way latency (application-level shaper)")
    v.add_argument("--network", default="auto", help="auto, netns (namespaces + tc tbf) or app (shaper)")
    v.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="scheme parameter")
    v.add_argument("--seed", type=int, default=0, help="seed of the workers' random compute times")
    v.add_argument("--timeout", type=float, help="wall-clock limit per run, seconds")
    v.add_argument("--json", action="store_true", help="print machine-readable rows")
    v.add_argument("--out", metavar="DIR", help="write results.json, results.csv and results.png")
    v.add_argument(
        "--force",
        action="store_true",
        help=f"run more worker processes than {PROCESSES_PER_CORE} per CPU core (refused without it)",
    )

    pr = sub.add_parser("profile", help="profile a PyTorch model on one worker into a workload file")
    pr.add_argument(
        "model", nargs="?", help="module.path:callable returning an nn.Module (its module importable)"
    )
    pr.add_argument("--batch-size", type=int, required=True, help="samples per step")
    pr.add_argument("--input-shape", help="one sample's shape, e.g. 3x32x32 or 784 (with a model)")
    pr.add_argument(
        "--inputs", metavar="MODULE:CALLABLE", help="a factory inputs(batch_size, device) of batches"
    )
    pr.add_argument("--autocast", choices=("bf16", "fp16"), help="mixed precision (fp16 with a GradScaler)")
    pr.add_argument("--accumulation", type=int, default=1, help="micro-steps per optimizer step")
    pr.add_argument(
        "--from-trace", metavar="TRACE.json", help="read a torch.profiler Chrome trace instead of a model"
    )
    pr.add_argument("--repetitions", type=int, default=20, help="measured steps")
    pr.add_argument("--warmup", type=int, default=3, help="unmeasured steps first")
    pr.add_argument("--threads", type=int, default=1, help="torch threads during the profile")
    pr.add_argument("--device", default="cpu", help="cpu, or cuda where present")
    pr.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the model's init")
    pr.add_argument("--out", required=True, metavar="FILE.json", help="the workload JSON (a trace beside it)")

    c = sub.add_parser("catalog", help="list or show the built-in workloads")
    csub = c.add_subparsers(dest="action", required=True, parser_class=_Parser)
    csub.add_parser("list", help="list the workloads")
    show = csub.add_parser("show", help="show one workload")
    show.add_argument("name")
    return parser


def _scheme_from_args(
    args: argparse.Namespace, name: str, *, lists: bool
) -> tuple[Any, dict[str, list[Any]]]:
    from queuesgd import registry

    cls = registry.resolve(name, "--scheme")
    key = cls.key
    params: dict[str, list[Any]] = {}
    own = set(cls.parameters())
    for pname in _scheme_options():
        text = getattr(args, f"param_{pname}")
        if text is None:
            continue
        flag = scheme_flag(pname)
        if pname not in own:
            accepted = ", ".join(scheme_flag(p) for p in cls.parameters() if p not in _NOT_ON_CLI)
            raise InvalidParameterError(flag, text, f"a parameter of {key}: {accepted or 'it has none'}")
        params[pname] = [parse_value(v) for v in (split_list(text) if lists else [text])]
    return _make_scheme(cls, {k: v[0] for k, v in params.items()}), params


def _setup(args: argparse.Namespace, *, lists: bool) -> tuple[Any, Any, Any, dict[str, list[Any]]]:
    import dataclasses

    from queuesgd import _checks, units
    from queuesgd.catalog import load_workload
    from queuesgd.workload import Cluster

    scheme, params = _scheme_from_args(args, args.scheme, lists=lists)
    workload = load_workload(args.workload)
    if args.compute:
        workload = dataclasses.replace(workload, compute=compute_law(args.compute, workload.compute_time))
    stragglers = random_delay(args.random_delay) if args.random_delay else None
    workers = _ints("--workers", args.workers)
    cluster = Cluster(
        workers=max(workers),
        bandwidth=units.parse_bandwidth(split_list(args.bandwidth)[0], "--bandwidth"),
        latency=units.parse_seconds(split_list(args.latency)[0], "--latency"),
        ps_shards=_checks.integer("--ps-shards", _ints("--ps-shards", args.ps_shards)[0]),
        stragglers=stragglers,
    )
    return scheme, workload, cluster, params


def _make_scheme(cls: Any, params: dict[str, Any]) -> Any:
    import dataclasses

    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in params]
    if missing:
        flag = scheme_flag(missing[0])
        raise InvalidParameterError(flag, None, f"a value: {cls.key} needs {flag}")
    return cls(**params)


def _ignored(scheme: Any, params: dict[str, list[Any]], method: str) -> list[str]:
    """The flags given for ``params`` that ``method`` does not read."""
    ignored = set(scheme.ignored_parameters(method))
    return [scheme_flag(name) for name in params if name in ignored]


def _readers(scheme: Any, flag_names: list[str], params: dict[str, list[Any]]) -> str:
    name = next(n for n in params if scheme_flag(n) == flag_names[0])
    return ", ".join(m for m in scheme.methods if name not in scheme.ignored_parameters(m))


def _predict(args: argparse.Namespace, *, lists: bool) -> int:
    import itertools

    from queuesgd.prediction import sweep

    _check_plot(args.plot)
    scheme, workload, cluster, params = _setup(args, lists=lists)
    workers = _ints("--workers", args.workers)
    bandwidth = _bandwidths(args)
    latency = _latencies(args)
    if args.method != "auto":
        scheme.check_method(args.method)
        ignored = _ignored(scheme, params, args.method)
        if ignored:
            raise InvalidParameterError(
                ignored[0],
                getattr(args, "param_" + next(n for n in params if scheme_flag(n) == ignored[0])),
                f"no {ignored[0]} with --method {args.method}, which does not read it "
                f"(--method {_readers(scheme, ignored, params)} read it)",
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
        _plot(table, workload.name or args.workload, args.plot)
    for method in dict.fromkeys(table.columns["method"].tolist()):
        ignored = _ignored(scheme, params, method) if args.method == "auto" else []
        if ignored:
            _notes(args).append(
                f"note: method {method} does not read {', '.join(ignored)} "
                f"(--method {_readers(scheme, ignored, params)} read it)"
            )
    names = list(params)
    memory_notes = []  # after the caveats, as the last notes
    for combo in itertools.product(*(params[k] for k in names)):
        variant = scheme.replace(**dict(zip(names, combo))) if names else scheme
        for caveat in variant.caveats(cluster):
            if f"note: {caveat}" not in _notes(args):
                _notes(args).append(f"note: {caveat}")
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
    _notes(args).extend(memory_notes)
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


def _whatif(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.scaling import whatif

    _check_plot(args.plot)
    compression = []
    for text in split_list(args.compression):
        if not _NUMBER.match(text):
            raise InvalidParameterError(
                "--compression", text, "ratios >= 1 separated by commas, e.g. 1,2,5,10"
            )
        compression.append(float(text))
    result = whatif(
        workload=split_list(args.workload),
        workers=_ints("--workers", args.workers),
        bandwidth=_bandwidths(args),
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


def _compare(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.comparison import compare
    from queuesgd.harness.report import jsonable
    from queuesgd.specs import parse_params
    from queuesgd.workload import Cluster

    cluster = None
    if args.bandwidth is not None:
        bandwidth = units.parse_bandwidth(args.bandwidth, "--bandwidth")
        _plausible(args, "--bandwidth", [args.bandwidth], [bandwidth])
        latency = units.parse_seconds(args.latency or 0, "--latency")
        cluster = Cluster(1, bandwidth, latency=latency, ps_shards=args.ps_shards or 1)
    else:
        for flag, value in (("--latency", args.latency), ("--ps-shards", args.ps_shards)):
            if value is not None:
                raise InvalidParameterError(flag, value, "a value together with --bandwidth (the cluster)")
    result = compare(
        args.measured,
        args.scheme,
        args.workload,
        cluster,
        method=args.method,
        warmup=args.warmup,
        ignore=split_list(args.ignore) if args.ignore else (),
        params=parse_params(args.param),
        rng=args.seed,
        iterations=args.iterations,
    )
    if args.json:
        print(json.dumps([jsonable(r) for r in result.rows()], indent=1))
    else:
        print(result.table())
    if "model" in result["samples_from"].tolist():
        _notes(args).append(
            "note: no 'samples' column: samples per update are the model's (the rows compare update rates)"
        )
    return 0


def _progress_bar(label: str, done: int, total: int) -> None:
    if not sys.stderr.isatty():  # a log, not a terminal: one line per finished run
        if done >= total:
            print(f"{label}: {done}/{total} steps", file=sys.stderr)
        return
    width = 30
    filled = int(width * done / max(total, 1))
    end = "\n" if done >= total else ""
    print(f"\r{label:<24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end=end, file=sys.stderr)


#: Most live worker processes per CPU core ``validate`` starts without ``--force``: emulated steps are
#: timed waits, so 8 to 16 workers share two cores; far more measure the machine, not the scheme.
PROCESSES_PER_CORE = 8


def _validate_checks(args: argparse.Namespace, counts: list[int]) -> None:
    """What can be refused before any process is forked: counts, delays, the run's length, --out."""
    import os
    from pathlib import Path

    from queuesgd import units

    cores = os.cpu_count() or 1
    top = max(counts)
    if top > PROCESSES_PER_CORE * cores and not args.force:
        from queuesgd.harness.layout import live_key, world_size

        procs = world_size(live_key(args.scheme, "--scheme"), top)  # the PS is one more process
        raise InvalidParameterError(
            "--workers",
            args.workers,
            f"at most {PROCESSES_PER_CORE * cores} worker processes on {cores} CPU core(s), or --force. "
            f"Estimate for {top}: {procs:,} processes, each with 1/{procs / cores:.0f} of a core, so the run "
            "would time the scheduler rather than the scheme; PyTorch's gloo connects every pair of "
            f"ranks: {procs * (procs - 1) // 2:,} TCP connections, about {procs + 1:,} sockets per process",
        )
    if args.random_delay:
        delays = random_delay(args.random_delay)
        if delays.count > min(counts):
            raise InvalidParameterError(
                "--random-delay",
                args.random_delay,
                f"at most as many delayed workers as --workers {min(counts)}",
            )
    if args.timeout is not None:
        if not args.timeout > 0:
            raise InvalidParameterError("--timeout", args.timeout, "seconds > 0")
        mean = units.parse_seconds(args.compute, "--compute")
        need = args.steps * mean
        if need >= args.timeout:
            raise InvalidParameterError(
                "--timeout",
                args.timeout,
                f"more seconds than the run's compute alone: {args.steps} steps x "
                f"{units.format_seconds(mean)} = {units.format_seconds(need)}",
            )
    if args.out is not None:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe = out / ".queuesgd-write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise InvalidParameterError(
                "--out", args.out, f"a directory that can be written ({err.strerror})"
            ) from None


def _validate(args: argparse.Namespace) -> int:
    from queuesgd.harness.campaign import parse_straggler, validate

    params = parse_params(args.param)
    parse_straggler(args.straggler, 1.0, "--straggler")  # its errors name the flag; validate() scales it
    counts = _ints("--workers", args.workers)
    _validate_checks(args, counts)
    result = validate(
        args.scheme,
        workers=counts,
        steps=args.steps,
        workload=args.workload,
        compute=args.compute,
        gradient_bytes=args.gradient_bytes,
        batch_size=args.batch_size,
        straggler=args.straggler,
        random_delay=random_delay(args.random_delay) if args.random_delay else None,
        bandwidth=args.bandwidth,
        latency=args.latency,
        network=args.network,
        params=params,
        timeout=args.timeout,
        seed=args.seed,
        progress=None if args.json else _progress_bar,
    )
    if args.out:
        result.write(args.out)
    if args.json:
        from queuesgd.harness.report import jsonable

        print(json.dumps([jsonable(r) for r in result.rows], indent=1))
    else:
        print(result.table())
    for failure in result.failures:
        print(f"queuesgd: failed: {failure}", file=sys.stderr)
    return 1 if result.failures else 0


def _derive(args: argparse.Namespace) -> int:
    from queuesgd.derivation import derive

    options = {} if args.workers is None else {"workers": args.workers}
    scheme, _ = _scheme_from_args(args, args.scheme, lists=False)
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


def _plot(table: Any, title: str, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        from queuesgd.errors import MissingDependencyError

        raise MissingDependencyError("matplotlib", "plot") from err
    import numpy as np

    from queuesgd import units

    c = table.columns
    fig, ax = plt.subplots(figsize=(6, 4))
    for b in np.unique(c["bandwidth"]):
        for lat in np.unique(c["latency"]):
            m = (c["bandwidth"] == b) & (c["latency"] == lat)
            order = np.argsort(c["workers"][m])
            label = units.format_bandwidth(b) + (f", {units.format_seconds(lat)}" if lat else "")
            ax.plot(c["workers"][m][order], c["throughput"][m][order], marker="o", label=label)
    w = np.unique(c["workers"])
    single = float(np.max(c["throughput"] / (c["scaling_factor"] * c["workers"])))
    ax.plot(w, w * single, "k--", lw=0.8, label="linear scaling (one worker computing alone)")
    ax.set_xlabel("workers")
    ax.set_ylabel("samples / s")
    ax.set_title(f"{table.scheme}: {title}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as err:
        raise InvalidParameterError("--plot", path, f"a writable file path ({err.strerror})") from err
    finally:
        plt.close(fig)


def _profile(args: argparse.Namespace) -> int:
    if args.from_trace is not None:
        return _profile_trace(args)
    from queuesgd import units
    from queuesgd.catalog import save_workload
    from queuesgd.errors import InvalidParameterError
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
    from queuesgd.errors import InvalidParameterError
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


def _catalog(args: argparse.Namespace) -> int:
    from queuesgd.catalog import list_workloads, load_workload

    if args.action == "list":
        for name in list_workloads():
            w = load_workload(name)
            print(
                f"{name:<12} batch {w.batch_size:<4} compute {w.compute.mean * 1e3:8.2f} ms  "
                f"gradient {w.gradient_bytes / 1e6:8.1f} MB"
            )
        return 0
    print(_show_workload(args.name))
    return 0


def _show_workload(name: str) -> str:
    """A catalog entry as a two-column table: the model's numbers with units, then its provenance."""
    from queuesgd import units
    from queuesgd.catalog import load_workload, workload_info

    w = load_workload(name)
    info = workload_info(name)
    law = w.compute
    rows = [
        ("name", f"{w.name or name}" + (f" ({info['display_name']})" if info.get("display_name") else "")),
        ("compute", f"{units.format_seconds(w.compute_time)} per step, {type(law).__name__} law"),
        ("batch size", f"{w.batch_size} samples per worker step"),
        ("one worker alone", f"{w.samples_per_second_single:.4g} samples/s"),
        ("gradient", units.format_bytes(w.gradient_bytes)),
        ("parameters", units.format_bytes(w.parameter_bytes)),
        ("update time", units.format_seconds(w.update_time)),
    ]
    if w.layers:
        back = units.format_seconds(w.backward_time) if w.backward_time is not None else "unknown"
        rows.append(("layers", f"{len(w.layers)} gradient tensors, backward pass {back}"))
    for key in ("description", "hardware", "framework", "dtype"):
        if isinstance(info.get(key), str):
            rows.append((key, info[key]))
    source = info.get("source")
    if isinstance(source, dict) and isinstance(source.get("paper"), str):
        rows.append(("source", source["paper"]))
    rows.append(("file", str(info["path"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``queuesgd`` command.

    Examples
    --------
    >>> main(["predict", "--workers", "1,2", "--json"]) == 0  # doctest: +ELLIPSIS
    [...
    True
    """
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        status = _run(args)
    except (QueuesgdError, ValueError, TypeError) as err:
        if not isinstance(err, QueuesgdError):
            raise
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"queuesgd: error: {msg}", file=sys.stderr)
        return 2
    for note in _notes(args):
        print(f"queuesgd: {note}", file=sys.stderr)
    return status


def _run(args: argparse.Namespace) -> int:
    if args.command in ("predict", "sweep"):
        return _predict(args, lists=args.command == "sweep")
    if args.command == "derive":
        return _derive(args)
    if args.command == "whatif":
        return _whatif(args)
    if args.command == "validate":
        return _validate(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "profile":
        return _profile(args)
    return _catalog(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
