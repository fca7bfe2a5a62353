"""``queuesgd compare``: your own measured runs against the predictions."""

from __future__ import annotations

import argparse
import json
from typing import Any

from queuesgd.cli.args import bandwidths, ints, latencies, notes, split_list
from queuesgd.cli.predict import check_run_flags, cli_field
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import parse_params

#: :func:`queuesgd.comparison.compare`'s arguments that are this command's flags: its error naming one
#: names the flag (a log's own cells are named by row and column, never mapped).
COMPARE_FLAGS = {
    "method": "--method",
    "warmup": "--warmup",
    "ignore": "--ignore",
    "params": "--param",
    "workers": "--workers",
    "batch_size": "--batch-size",
    "columns": "--column",
    "log_pattern": "--log-pattern",
    "time_unit": "--time-unit",
    "max_configurations": "--max-configurations",
    "max_seconds": "--max-seconds",
}


def add_compare_arguments(cmp: argparse.ArgumentParser) -> None:
    """The options of ``queuesgd compare`` (documented in docs/compare.md)."""
    from queuesgd.comparison import MAX_CONFIGURATIONS, MAX_SECONDS
    from queuesgd.measured import LOG_PATTERNS, MAX_PATTERN_LINE, PATTERN_SECONDS, TIME_UNITS

    cmp.add_argument(
        "measured",
        metavar="FILE",
        help="a CSV file ('-': standard input), one row per run or step: samples_per_second, time or "
        "step_time, and the configuration (columns: docs/compare.md); a text log with --log-pattern",
    )
    cmp.add_argument("--scheme", help="the scheme of every row, unless the file has a scheme column")
    cmp.add_argument("--workload", help="catalog workload of all rows, unless the file has a workload column")
    cmp.add_argument("--workers", help="number of workers of rows without a workers column or cell")
    cmp.add_argument("--batch-size", help="samples per worker per step of rows without a batch_size cell")
    cmp.add_argument("--bandwidth", help="link bandwidth for rows without a bandwidth cell, e.g. 10Gbit/s")
    cmp.add_argument("--latency", help="one-way latency for rows without a latency cell (with --bandwidth)")
    cmp.add_argument("--ps-shards", help="parameter-server shards (with --bandwidth)")
    cmp.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="scheme parameter")
    cmp.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME=COLUMN",
        help="read the log's COLUMN as queuesgd's NAME, e.g. samples_per_second=train/throughput "
        "(repeatable)",
    )
    cmp.add_argument("--ignore", metavar="COLUMNS", help="comma-separated columns of the file to leave out")
    cmp.add_argument(
        "--log-pattern",
        metavar="REGEX",
        help="read FILE as a text log: a regular expression whose named groups are the columns "
        f"(tried on lines of at most {MAX_PATTERN_LINE:,} characters, stopped after {PATTERN_SECONDS:g} s "
        "per file; no quantified group "
        f"holding a quantifier), or {', '.join(LOG_PATTERNS)} (lines such as 'step 12 | loss 2.3 | "
        "step_time 251ms')",
    )
    cmp.add_argument(
        "--time-unit",
        default="auto",
        help="unit of a time column, and of step_time numbers without a unit: auto (seconds, or Unix "
        f"time recognized by its size), {', '.join(TIME_UNITS)}; not with samples_per_second",
    )
    cmp.add_argument("--method", default="auto", help="prediction method (as in predict)")
    cmp.add_argument(
        "--warmup",
        type=int,
        help="updates (steps) dropped at the start of each run, with a step column the logged intervals "
        "that hold them (default: the first 5%% of the intervals); not with samples_per_second",
    )
    cmp.add_argument("--seed", type=int, default=0, help="random seed for simulated predictions")
    cmp.add_argument("--iterations", type=int, help="simulated iterations (method simulate)")
    cmp.add_argument(
        "--max-configurations",
        type=int,
        default=MAX_CONFIGURATIONS,
        help="most configurations (distinct rows) predicted",
    )
    cmp.add_argument(
        "--max-seconds",
        type=float,
        default=MAX_SECONDS,
        help="longest estimated time of the predictions, checked before any runs",
    )
    cmp.add_argument("--json", action="store_true", help="print machine-readable rows")


def _one(flag: str, text: str, values: list[Any]) -> Any:
    """The single value of a flag of ``compare``, read by ``predict``'s parser (which also takes lists)."""
    if len(values) != 1:
        raise InvalidParameterError(flag, text, "one value (compare takes no lists)")
    return values[0]


def _columns(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, column = item.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise InvalidParameterError(
                "--column", item, "NAME=COLUMN, e.g. samples_per_second=train/throughput"
            )
        if name.strip() in out:
            raise InvalidParameterError("--column", item, f"each NAME once ({name.strip()} is mapped twice)")
        out[name.strip()] = column.strip()
    return out


def run_compare(args: argparse.Namespace) -> int:
    from queuesgd.harness.report import jsonable
    from queuesgd.workload import Cluster

    # the flags predict shares are read by predict's own parsers (one value each here)
    check_run_flags(args)
    cluster = None
    if args.bandwidth is not None:
        bandwidth = _one("--bandwidth", args.bandwidth, bandwidths(args))
        latency = _one("--latency", args.latency, latencies(args)) if args.latency is not None else 0.0
        shards = 1
        if args.ps_shards is not None:
            shards = _one("--ps-shards", args.ps_shards, ints("--ps-shards", args.ps_shards))
        try:
            cluster = Cluster(1, bandwidth, latency=latency, ps_shards=shards)
        except InvalidParameterError as err:  # named by its flag, as predict names it
            raise InvalidParameterError(cli_field(err.field), err.got, err.accepted) from err
    else:
        for flag, value in (("--latency", args.latency), ("--ps-shards", args.ps_shards)):
            if value is not None:
                raise InvalidParameterError(flag, value, "a value together with --bandwidth (the cluster)")
    workers = batch = None
    if args.workers is not None:
        workers = _one("--workers", args.workers, ints("--workers", args.workers))
    if args.batch_size is not None:
        batch = _one("--batch-size", args.batch_size, ints("--batch-size", args.batch_size))
    try:
        result = _compare(args, cluster, workers, batch)
    except InvalidParameterError as err:  # compare()'s own argument: named by this command's flag
        if err.field in COMPARE_FLAGS:
            raise InvalidParameterError(COMPARE_FLAGS[err.field], err.got, err.accepted) from err
        raise
    if args.json:
        print(json.dumps([jsonable(r) for r in result.rows()], indent=1))
    else:
        print(result.table(notes=False))
    notes(args).extend(f"note: {n}" for n in result.notes)
    return 0


def _compare(args: argparse.Namespace, cluster: Any, workers: Any, batch: Any) -> Any:
    """:func:`queuesgd.comparison.compare` with this command's arguments."""
    from queuesgd.comparison import compare

    return compare(
        args.measured,
        args.scheme,
        args.workload,
        cluster,
        method=args.method,
        warmup=args.warmup,
        ignore=split_list(args.ignore) if args.ignore is not None else (),
        params=parse_params(args.param),
        rng=args.seed,
        iterations=args.iterations,
        workers=workers,
        batch_size=batch,
        columns=_columns(args.column),
        log_pattern=args.log_pattern,
        time_unit=args.time_unit,
        max_configurations=args.max_configurations,
        max_seconds=args.max_seconds,
    )
