"""``queuesgd compare``: your own measured runs against the predictions."""

from __future__ import annotations

import argparse
import json

from queuesgd.cli.args import notes, plausible, split_list
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import parse_params


def run_compare(args: argparse.Namespace) -> int:
    from queuesgd import units
    from queuesgd.comparison import compare
    from queuesgd.harness.report import jsonable
    from queuesgd.workload import Cluster

    cluster = None
    if args.bandwidth is not None:
        bandwidth = units.parse_bandwidth(args.bandwidth, "--bandwidth")
        plausible(args, "--bandwidth", [args.bandwidth], [bandwidth])
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
        notes(args).append(
            "note: no 'samples' column: samples per update are the model's (the rows compare update rates)"
        )
    return 0
