"""A scheme and its parameters from the command line: the flags, their defaults, the scheme they build."""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

from queuesgd.cli.args import Renamed, ints, plausible, split_list
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import RANDOM_DELAY, compute_law, parse_value, random_delay

# Scheme parameters that the command line cannot express (objects).
_NOT_ON_CLI = frozenset({"predictor"})


def compute_model_value(text: Any, memory_bandwidth: str | None = None) -> Any:
    """``--compute-model``: a :class:`~queuesgd.compute_model.ComputeModel` from a GEMM table, or None.

    ``text`` is ``none``, a table shipped with queuesgd by name
    (:data:`queuesgd.gemm_table.BUILTIN`: ``h100-bf16``) or the path of a
    table JSON (``FILE.json``, as :mod:`queuesgd.gemm_probe` writes it; it
    must name the device's ``peak_tflops``). ``memory_bandwidth`` (``--memory-bandwidth``) is the roofline's
    memory term; ``None`` or ``none`` leaves memory traffic out (the
    compute-only model, ``ComputeModel(table, None)``).

    Examples
    --------
    >>> cm = compute_model_value("h100-bf16", "3.35TB/s")
    >>> cm.peak_flops, cm.memory_bandwidth
    (989400000000000.0, 3350000000000.0)
    >>> compute_model_value("none") is None
    True
    >>> compute_model_value("h200")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --compute-model: got 'h200'; accepted: none, a shipped GEMM ...
    """
    from queuesgd.busbw import bandwidth_value
    from queuesgd.compute_model import ComputeModel
    from queuesgd.errors import QueuesgdError, short_repr
    from queuesgd.gemm_table import BUILTIN, load_gemm_table

    accepted = (
        f"none, a shipped GEMM table ({', '.join(BUILTIN)}) or the path of a table FILE.json that names "
        "its peak_tflops (python -m queuesgd.gemm_probe --peak-tflops P writes one)"
    )
    name = str(text).strip()
    if name.lower() == "none":
        if memory_bandwidth is not None:
            raise InvalidParameterError("--memory-bandwidth", memory_bandwidth, "only with --compute-model")
        return None
    if name not in BUILTIN and not name.lower().endswith(".json"):
        raise InvalidParameterError("--compute-model", text, accepted)
    try:
        table = load_gemm_table(name)
    except InvalidParameterError as err:  # the file: missing, not JSON, not a table, no peak
        field = str(err.field).replace("source", name, 1)  # a row's: its value and what it should be
        where = "" if err.field == "source" else f"{field}: got {short_repr(err.got)}, expected "
        raise InvalidParameterError("--compute-model", text, f"{accepted}; {where}{err.accepted}") from None
    except QueuesgdError as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InvalidParameterError("--compute-model", text, f"{accepted}; {why}") from None
    bw = memory_bandwidth
    if bw is not None and str(bw).strip().lower() == "none":
        bw = None
    if bw is not None:
        bw = bandwidth_value("--memory-bandwidth", bw, example="'3.35TB/s'")
    try:
        return ComputeModel(table, bw)
    except InvalidParameterError as err:  # a bandwidth of 0 or below
        raise InvalidParameterError("--memory-bandwidth", memory_bandwidth, err.accepted) from None


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


def scheme_options() -> dict[str, set[str]]:
    """Scheme parameter name -> the schemes that have it."""
    from queuesgd.registry import SCHEMES

    out: dict[str, set[str]] = {}
    for key, cls in SCHEMES.items():
        for name in cls.parameters():
            if name not in _NOT_ON_CLI:
                out.setdefault(name, set()).add(key)
    return out


def scheme_defaults(name: str, keys: set[str]) -> str:
    """``"default: X"`` for a scheme parameter (per scheme where they differ; '' when required)."""

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


def scheme_names() -> str:
    """The registered scheme keys, aliases in parentheses: ``"..., ring-allreduce (sync-allreduce), ..."``."""
    from queuesgd import registry

    return ", ".join(e.key + (f" ({', '.join(e.aliases)})" if e.aliases else "") for e in registry.entries())


def add_common(p: argparse.ArgumentParser, *, lists: bool) -> None:
    p.add_argument("--scheme", default="async-ps", help=f"coordination scheme: {scheme_names()}")
    p.add_argument(
        "--workload",
        help="catalog workload name (see `queuesgd catalog list`); default resnet50, or with --shape the "
        "shape's own workload at micro-batch 1",
    )
    p.add_argument("--workers", default="1,2,4,8,16,32,64", help="comma-separated worker counts")
    p.add_argument(
        "--bandwidth", default="10Gbit/s", help="link bandwidth(s), e.g. 10Gbit/s or 1,10,25Gbit/s"
    )
    p.add_argument("--latency", default="0", help="one-way latency(s), e.g. 50us")
    p.add_argument("--ps-shards", default="1", help="number of parameter-server shards")
    p.add_argument(
        "--gpus-per-node",
        metavar="N",
        help="a two-level cluster: N GPUs a node (--bandwidth is then each rail between nodes); "
        "default: flat, every worker its own node",
    )
    p.add_argument(
        "--node-bandwidth", metavar="B", help="with --gpus-per-node: each GPU's bandwidth inside a node"
    )
    p.add_argument(
        "--node-latency", metavar="L", help="with --gpus-per-node: latency inside a node (default 0)"
    )
    p.add_argument("--rails", metavar="R", help="with --gpus-per-node: network cards per node (default 1)")
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
    add_scheme_flags(p, lists=lists)
    p.add_argument(
        "--memory-bandwidth",
        metavar="BANDWIDTH",
        help="with --compute-model: the device memory's bandwidth of the roofline, e.g. 3.35TB/s "
        "(default: none, memory traffic not counted)",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable rows")
    p.add_argument("--plot", metavar="FILE.png", help="save a scaling curve")


def add_derive(p: argparse.ArgumentParser) -> None:
    """The options of ``derive``: predict's scheme, workload, cluster and compute options, one value each.

    Each option given is substituted into the formula (``--workers`` for ``n``,
    ``--bandwidth`` for ``B``, ...); an option left out leaves its symbols free.
    """
    p.add_argument("scheme", nargs="?", help=f"coordination scheme (or --scheme): {scheme_names()}")
    p.add_argument("--scheme", dest="scheme_option", metavar="SCHEME", help="the scheme, as in predict")
    p.add_argument(
        "--compute",
        metavar="LAW",
        help="compute-time law: exponential (rate mu) or deterministic (time t); default: the "
        "workload's law with --workload, else the scheme's (exponential; pipeline: deterministic)",
    )
    p.add_argument("--workers", help="a number of workers, substituted for n")
    p.add_argument(
        "--workload",
        help="catalog workload whose batch size, gradient and parameter bytes, update and compute "
        "times are substituted",
    )
    p.add_argument("--bandwidth", help="link bandwidth substituted for B, e.g. 10Gbit/s")
    p.add_argument("--latency", help="one-way latency substituted for alpha, e.g. 50us")
    p.add_argument("--ps-shards", help="parameter-server shards substituted for s")
    p.add_argument("--latex", action="store_true", help="print LaTeX")
    p.add_argument("--limit", metavar="SYMBOL", help="also print the limit as SYMBOL -> infinity")
    p.add_argument("--optimize", metavar="SYMBOL", help="also print the SYMBOL that maximizes throughput")
    add_scheme_flags(p, lists=False)


def add_scheme_flags(p: argparse.ArgumentParser, *, lists: bool) -> None:
    each = "comma-separated values" if lists else "a value"
    for name, keys in sorted(scheme_options().items(), key=lambda kv: scheme_flag(kv[0])):
        flag = scheme_flag(name)
        old = "--" + name.replace("_", "-")
        extra: dict[str, Any] = {"action": Renamed, "old": old} if old != flag else {}
        p.add_argument(
            flag,
            *([old] if old != flag else []),
            dest=f"param_{name}",
            metavar="VALUES" if lists else "VALUE",
            help=f"{each} for the scheme parameter {name} ({', '.join(sorted(keys))})"
            + (f"; {scheme_defaults(name, keys)}" if scheme_defaults(name, keys) else "")
            + (f"; {old} is the deprecated spelling" if old != flag else ""),
            **extra,
        )


def scheme_from_args(args: argparse.Namespace, name: str, *, lists: bool) -> tuple[Any, dict[str, list[Any]]]:
    from queuesgd import registry

    cls = registry.resolve(name, "--scheme")
    key = cls.key
    params: dict[str, list[Any]] = {}
    own = set(cls.parameters())
    for pname in scheme_options():
        text = getattr(args, f"param_{pname}")
        if text is None:
            continue
        flag = scheme_flag(pname)
        if pname not in own:
            accepted = ", ".join(scheme_flag(p) for p in cls.parameters() if p not in _NOT_ON_CLI)
            raise InvalidParameterError(flag, text, f"a parameter of {key}: {accepted or 'it has none'}")
        params[pname] = [parse_value(v) for v in (split_list(text, flag) if lists else [text])]
    bandwidth = getattr(args, "memory_bandwidth", None)
    if "compute_model" in params:
        values = params["compute_model"]
        if len(values) != 1:
            raise InvalidParameterError(
                "--compute-model", args.param_compute_model, "one table per sweep (run a sweep for each)"
            )
        model = compute_model_value(values[0], bandwidth)
        params["compute_model"] = [model]
        if model is not None and model.memory_bandwidth is not None:  # a bare number is bytes/s: warn
            plausible(args, "--memory-bandwidth", [str(bandwidth)], [model.memory_bandwidth])
    elif bandwidth is not None:
        raise InvalidParameterError("--memory-bandwidth", bandwidth, "only with --compute-model")
    try:
        return make_scheme(cls, {k: v[0] for k, v in params.items()}), params
    except InvalidParameterError as err:  # an object built from a flag's text: name the flag and the text
        name = str(err.field).rpartition(".")[2]
        if name not in params or shown(name, params[name][0], args) is params[name][0]:
            raise
        flags = {n: scheme_flag(n) for n in scheme_options()}
        accepted = re.sub(r"\b([a-z_]+)=", lambda m: flags.get(m.group(1), m.group(0)), str(err.accepted))
        raise InvalidParameterError(scheme_flag(name), getattr(args, f"param_{name}"), accepted) from None


def shown(name: str, value: Any, args: argparse.Namespace) -> Any:
    """A scheme parameter's value as the command line gave it (an object, a ComputeModel, by its text).

    Examples
    --------
    >>> shown("stage", 3, argparse.Namespace())
    3
    >>> shown("compute_model", object(), argparse.Namespace(param_compute_model="h100-bf16"))
    'h100-bf16'
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return getattr(args, f"param_{name}", value)


def setup(args: argparse.Namespace, *, lists: bool) -> tuple[Any, Any, Any, dict[str, list[Any]]]:

    from queuesgd import _checks, units
    from queuesgd.catalog import load_workload
    from queuesgd.workload import Cluster

    scheme, params = scheme_from_args(args, args.scheme, lists=lists)
    workload = shape_workload(args, params.get("shape", []))
    if workload is None:
        args.workload = args.workload or "resnet50"
        workload = load_workload(args.workload)
    if args.compute:
        workload = dataclasses.replace(workload, compute=compute_law(args.compute, workload.compute_time))
    stragglers = random_delay(args.random_delay) if args.random_delay else None
    workers = ints("--workers", args.workers)
    cluster = Cluster(
        workers=max(workers),
        bandwidth=units.parse_bandwidth(split_list(args.bandwidth, "--bandwidth")[0], "--bandwidth"),
        latency=units.parse_seconds(split_list(args.latency, "--latency")[0], "--latency"),
        ps_shards=_checks.integer("--ps-shards", ints("--ps-shards", args.ps_shards)[0]),
        stragglers=stragglers,
        **node_options(args),
    )
    return scheme, workload, cluster, params


def node_options(args: argparse.Namespace) -> dict[str, Any]:
    """Two-level cluster fields: ``--gpus-per-node``, ``--node-bandwidth``, ``--node-latency``, ``--rails``.

    None of them: a flat cluster (``{}``). The three others need ``--gpus-per-node``, which needs
    ``--node-bandwidth``; each value is checked under its flag's name.

    Examples
    --------
    >>> ns = argparse.Namespace(gpus_per_node="8", node_bandwidth="300GB/s", node_latency=None, rails="8")
    >>> node_options(ns)
    {'gpus_per_node': 8, 'node_bandwidth': 300000000000.0, 'rails': 8}
    >>> flat = dict(gpus_per_node=None, node_bandwidth=None, node_latency=None)
    >>> node_options(argparse.Namespace(rails="8", **flat))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --rails: got '8'; accepted: nothing on a flat cluster; give it ...N
    """
    from queuesgd import _checks, units
    from queuesgd.busbw import bandwidth_value

    if args.gpus_per_node is None:
        for flag in ("node_bandwidth", "node_latency", "rails"):
            if getattr(args, flag) is not None:
                name = "--" + flag.replace("_", "-")
                raise InvalidParameterError(
                    name, getattr(args, flag), "nothing on a flat cluster; give it with --gpus-per-node N"
                )
        return {}
    per = ints("--gpus-per-node", args.gpus_per_node)[0]
    out: dict[str, Any] = {"gpus_per_node": _checks.integer("--gpus-per-node", per)}
    if args.node_bandwidth is None:
        raise InvalidParameterError(
            "--node-bandwidth", None, "each GPU's bandwidth inside a node (e.g. 300GB/s) with --gpus-per-node"
        )
    out["node_bandwidth"] = bandwidth_value("--node-bandwidth", args.node_bandwidth, example="'300GB/s'")
    if args.node_latency is not None:
        out["node_latency"] = units.parse_seconds(args.node_latency, "--node-latency")
    if args.rails is not None:
        out["rails"] = _checks.integer("--rails", ints("--rails", args.rails)[0])
    return out


def shape_workload(args: argparse.Namespace, shapes: list[Any]) -> Any:
    """The workload of a ``--shape``: its own at micro-batch 1 without ``--workload``, else None.

    With ``--workload`` the catalog's workload is checked against each shape: its parameter bytes must
    be 0.5 to 8 per parameter of the shape (a workload of another model would scale the scheme's
    parameter, gradient and activation bytes by nonsense). Several shapes (a sweep) need ``--workload``.
    """
    from queuesgd.catalog import load_workload
    from queuesgd.model_shapes_llama import parse_shape
    from queuesgd.model_shapes_mlp import check_workload

    parsed = [parse_shape(s) for s in shapes]
    if all(p is None for p in parsed):  # no --shape, or --shape none: the catalog's workload
        return None
    if args.workload is None:
        if len(parsed) > 1:
            raise InvalidParameterError(
                "--shape", args.param_shape, "one shape without --workload (the workload is the shape's own)"
            )
        args.workload = f"{parsed[0].name} (the shape's own, micro-batch 1)"
        return parsed[0].workload(1)
    workload = load_workload(args.workload)
    for shape in (p for p in parsed if p is not None):
        check_workload(shape, workload, "--workload", "leave --workload out to use the shape's own workload")
    return None


def make_scheme(cls: Any, params: dict[str, Any]) -> Any:
    """``cls(**params)``, or the one-line error naming every flag the scheme still needs.

    Examples
    --------
    >>> from queuesgd import Pipeline
    >>> make_scheme(Pipeline, {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --stages: ...: pipeline needs --stages and --microbatches, e.g. ...
    """
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in params]
    if missing:
        flags = [scheme_flag(name) for name in missing]
        example = " ".join(f"{flag} {_EXAMPLES.get(name, 'VALUE')}" for flag, name in zip(flags, missing))
        raise InvalidParameterError(
            flags[0], None, f"a value: {cls.key} needs {' and '.join(flags)}, e.g. {example}"
        )
    return cls(**params)


# A value of each required scheme parameter for the error that asks for it.
_EXAMPLES = {"stages": "4", "microbatches": "8", "timeout": "50ms"}


def ignored_flags(scheme: Any, params: dict[str, list[Any]], method: str) -> list[str]:
    """The flags given for ``params`` that ``method`` does not read."""
    ignored = set(scheme.ignored_parameters(method))
    return [scheme_flag(name) for name in params if name in ignored]


def readers(scheme: Any, flag_names: list[str], params: dict[str, list[Any]]) -> str:
    name = next(n for n in params if scheme_flag(n) == flag_names[0])
    return ", ".join(m for m in scheme.methods if name not in scheme.ignored_parameters(m))
