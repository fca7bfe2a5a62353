"""Command line: ``queuesgd predict | catalog``.

Every user error prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from queuesgd.errors import InvalidParameterError, QueuesgdError

_NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


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


def _build_parser() -> argparse.ArgumentParser:
    from queuesgd.schemes import SCHEMES

    parser = _Parser(prog="queuesgd", description="Predict the throughput of distributed SGD training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("predict", help="predict samples/s for a scheme over workers and bandwidths")
    p.add_argument("--scheme", default="async-ps", help=f"coordination scheme: {', '.join(SCHEMES)}")
    p.add_argument(
        "--workload", default="resnet50", help="catalog workload name (see `queuesgd catalog list`)"
    )
    p.add_argument("--workers", default="1,2,4,8,16,32,64", help="comma-separated worker counts")
    p.add_argument(
        "--bandwidth", default="10Gbit/s", help="link bandwidth(s), e.g. 10Gbit/s or 1,10,25Gbit/s"
    )
    p.add_argument("--latency", default="0", help="one-way latency(s), e.g. 50us")
    p.add_argument("--ps-shards", default="1", help="number of parameter-server shards")
    p.add_argument("--json", action="store_true", help="print machine-readable rows")
    p.add_argument("--plot", metavar="FILE.png", help="save a scaling curve")

    c = sub.add_parser("catalog", help="list or show the built-in workloads")
    csub = c.add_subparsers(dest="action", required=True, parser_class=_Parser)
    csub.add_parser("list", help="list the workloads")
    show = csub.add_parser("show", help="show one workload")
    show.add_argument("name")
    return parser


def _predict(args: argparse.Namespace) -> int:
    from queuesgd import _checks, units
    from queuesgd.catalog import load_workload
    from queuesgd.prediction import sweep
    from queuesgd.schemes import SCHEMES
    from queuesgd.workload import Cluster

    scheme = SCHEMES[_checks.choice("--scheme", args.scheme, SCHEMES)]()
    workload = load_workload(args.workload)
    workers = _ints("--workers", args.workers)
    bandwidth = [units.parse_bandwidth(b, "--bandwidth") for b in split_list(args.bandwidth)]
    latency = [units.parse_seconds(x, "--latency") for x in split_list(args.latency)]
    shards = _checks.integer("--ps-shards", _ints("--ps-shards", args.ps_shards)[0])
    cluster = Cluster(workers=workers[0], bandwidth=bandwidth[0], latency=latency[0], ps_shards=shards)
    table = sweep(scheme, workload, cluster, workers=workers, bandwidth=bandwidth, latency=latency)
    if args.plot:
        _plot(table, workload.name or args.workload, args.plot)
    if args.json:
        rows = []
        for r in table.rows():
            r = {"scheme": table.scheme, "workload": args.workload, **r, "method": table.method}
            rows.append(r)
        print(json.dumps(rows, indent=1))
    else:
        print(f"{table.scheme} · {args.workload} · batch {workload.batch_size} · method {table.method}")
        print(table.table())
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
    first = c["throughput"] / (c["scaling_factor"] * c["workers"])
    ax.plot(w, w * float(np.max(first)), "k--", lw=0.8, label="linear scaling")
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
    w = load_workload(args.name)
    print(repr(w))
    return 0


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
        if args.command == "predict":
            return _predict(args)
        return _catalog(args)
    except (QueuesgdError, ValueError, TypeError) as err:
        if not isinstance(err, QueuesgdError):
            raise
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"queuesgd: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
