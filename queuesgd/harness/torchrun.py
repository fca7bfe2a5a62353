"""Run a scheme under ``torchrun`` on a real cluster, then compare the records with the model.

Every rank of a ``torchrun`` job runs::

    python -m queuesgd.harness.torchrun --scheme async-ps --steps 300 --compute 50ms --out records/

It joins the gloo process group from torchrun's environment, times a short
network calibration inside the group, runs the scheme's worker loop (the same
code as ``queuesgd validate``: :func:`queuesgd.harness.runners.run_scheme`)
and writes its records to ``records/rank<r>.jsonl``. With every node's files
gathered in one folder::

    python -m queuesgd.harness.torchrun --compare records/

prints the comparison row (measured and predicted samples per second).

Clocks of different machines are not synchronized, so every time that is
compared comes from one process's clock: the throughput from the updating
process's update times, a calibration operation as the longest duration over
the ranks, each on its own clock (that includes the exit skew of the barrier
before it, a few tens of microseconds on a LAN).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.command_line import Parser, run_command
from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import open_text
from queuesgd.harness.run_args import RunArgs, check_run

__all__ = ["build_parser", "calibration_fit", "compare_folder", "main"]

_SIZES_MIN = 8192
#: What torchrun sets in every rank's environment, and ``init_process_group("gloo")`` reads.
_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
#: The fields of rank 0's ``meta`` record that ``--compare`` reads.
_META = ("scheme", "workers", "steps", "batch", "gradient_bytes", "params", "seed")


class _JsonLines:
    """A WorkerContext connection that appends records to a JSON-lines file (flushed per record)."""

    def __init__(self, path: Path) -> None:
        self._fh = open_text("--out", path)

    def send(self, record: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(record, default=float) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m queuesgd.harness.torchrun`` (every flag is in docs/cli.md).

    Examples
    --------
    >>> args = build_parser().parse_args(["--scheme", "async-ps", "--steps", "300"])
    >>> args.scheme, args.steps, args.warmup, args.compute, args.gradient_bytes, args.out
    ('async-ps', 300, None, '50ms', '1MB', 'records')
    """
    from queuesgd.harness.live_schemes.allreduce import RING

    p = Parser(prog="python -m queuesgd.harness.torchrun", description=__doc__.splitlines()[0])
    p.add_argument("--compare", metavar="DIR", help="compare the records in DIR instead of running")
    p.add_argument("--scheme", default=RING.key)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int)
    p.add_argument("--workload", default="emulated", help="emulated, or a harness model: mlp, cnn, ...")
    p.add_argument("--compute", default="50ms")
    p.add_argument("--gradient-bytes", default="1MB")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--straggler", help="compute law: none, lognormal:SCV, gamma:SCV, exponential, ...")
    p.add_argument("--random-delay", metavar="K:DELAY", help="K random workers sleep DELAY every step")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=10, help="calibration operations per size")
    p.add_argument("--out", default="records", help="folder for rank<r>.jsonl")
    return p


def _run(args: argparse.Namespace) -> int:
    from queuesgd import specs
    from queuesgd.harness import calibrate, runners
    from queuesgd.harness._torch import require_torch
    from queuesgd.harness.campaign import parse_straggler
    from queuesgd.harness.launch import WorkerContext
    from queuesgd.harness.layout import live_key
    from queuesgd.harness.live import EmulatedCompute, RealModel
    from queuesgd.harness.live_schemes import live_scheme

    key = live_key(args.scheme, "--scheme")
    row = live_scheme(key)
    run = _check_args(args)
    law = parse_straggler(args.straggler, run.compute, "--straggler")
    random_delay, nbytes = run.random_delay, run.gradient_bytes
    if run.workload == "emulated":
        rd = None if random_delay is None else (random_delay.count, random_delay.delay)
        live: Any = EmulatedCompute(law, nbytes, batch_size=run.batch_size, random_delay=rd)
    else:
        live = RealModel(kind=run.workload, batch_size=run.batch_size)
        nbytes = live.gradient_bytes
    _check_environment(args.out)
    torch = require_torch()
    dist = torch.distributed
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = row.workers(world)
    params = row.check_params(specs.parse_params(args.param), n)
    steps, warmup = run.steps, run.warmup
    out = Path(args.out)
    sink = _JsonLines(out / f"rank{rank}.jsonl")
    ctx = WorkerContext(rank, world, deadline=math.inf, epoch=time.perf_counter(), sink=sink)
    try:
        if rank == 0:
            meta = {
                "scheme": key,
                "workers": n,
                "steps": steps,
                "warmup": warmup,
                "batch": live.batch_size,
                "gradient_bytes": nbytes,
                "params": params,
                "seed": run.seed,
                "random_delay": None if random_delay is None else [random_delay.count, random_delay.delay],
            }
            ctx.report({"meta": meta})
        sizes = [4096, max(nbytes, _SIZES_MIN), 4 * max(nbytes, _SIZES_MIN)]
        if row.layout == "allreduce":
            if world > 1:
                calibrate.allreduce_probe(ctx, sizes, args.repeats, 2, None, float(law.mean))
        elif rank < 2:
            calibrate.p2p_probe(ctx, sizes, args.repeats, 2, None, float(law.mean))
        else:
            for _ in sizes:  # the ping-pong ranks meet one barrier per size
                dist.barrier()
        dist.barrier()
        runners.run_scheme(ctx, key, live, steps, None, params, warmup=warmup, seed=run.seed)
    finally:
        sink.close()
        gc.collect()
        dist.destroy_process_group()
    return 0


def _check_args(args: argparse.Namespace) -> RunArgs:
    """The run's arguments checked as ``validate`` checks them, each error naming its flag (before anything
    is started): :func:`queuesgd.harness.run_args.check_run`, and ``--repeats``."""
    run = check_run(
        args.steps,
        args.warmup,
        args.workload,
        args.compute,
        args.gradient_bytes,
        args.batch_size,
        args.random_delay,
        args.seed,
        flags=True,
    )
    _checks.integer("--repeats", args.repeats, maximum=10_000)
    return run


def _check_environment(out: str) -> None:
    """Refuse a rank started outside torchrun, or an ``--out`` that cannot be made, before the group joins."""
    missing = [name for name in _TORCHRUN_ENV if not os.environ.get(name)]
    if missing:
        raise InvalidParameterError(
            missing[0],
            None,
            f"the environment torchrun gives each rank ({', '.join(_TORCHRUN_ENV)}): run this module "
            "under torchrun, or give --compare DIR",
        )
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        accepted = f"a directory that can be written ({err.strerror})"
        raise InvalidParameterError("--out", out, accepted) from None


def calibration_fit(records: Sequence[Mapping[str, Any]], kind: str, world_size: int) -> Any:
    """The alpha-beta fit of the calibration records (``{"size", "t0": [...], "t1": [...]}`` per rank).

    An operation's time is the longest ``t1 - t0`` over the ranks, each on its own clock.

    Examples
    --------
    >>> recs = [{"size": 1000, "t0": [0.0, 1.0], "t1": [0.002, 1.002], "rank": 0},
    ...         {"size": 2000, "t0": [0.0, 1.0], "t1": [0.003, 1.003], "rank": 0}]
    >>> fit = calibration_fit(recs, "p2p", 2)
    >>> round(fit.alpha, 6), round(fit.bandwidth)
    (0.001, 1000000)
    """
    from queuesgd.harness.calibrate import fit_alpha_beta

    by_size: dict[int, list[np.ndarray]] = {}
    for r in records:
        if "size" in r:
            by_size.setdefault(int(r["size"]), []).append(np.asarray(r["t1"]) - np.asarray(r["t0"]))
    if len(by_size) < 2:
        raise InvalidParameterError("records", len(by_size), "calibration records of at least two sizes")
    nbytes, seconds = [], []
    for size, spans in sorted(by_size.items()):
        longest = np.max(np.vstack(spans), axis=0)
        nbytes += [float(size)] * longest.size
        seconds += longest.tolist()
    return fit_alpha_beta(nbytes, seconds, kind=kind, world_size=world_size)


def compare_folder(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Read every ``rank<r>.jsonl`` in ``folder`` and return the comparison row of the run."""
    from queuesgd.harness.campaign import compare_records
    from queuesgd.harness.live_schemes import live_scheme
    from queuesgd.workload import RandomDelay

    files = sorted(Path(folder).glob("rank*.jsonl"))
    if not files:
        raise InvalidParameterError("--compare", os.fspath(folder), "a folder with rank<r>.jsonl files")
    records = _read_records(files)
    meta = next((r["meta"] for r in records if "meta" in r), None)
    if meta is None:
        raise InvalidParameterError("--compare", os.fspath(folder), "the records of rank 0 (rank0.jsonl)")
    if not isinstance(meta, dict) or not set(_META) <= set(meta):
        accepted = f"rank 0's meta record with {', '.join(_META)}"
        raise InvalidParameterError("--compare", os.fspath(folder), accepted)
    key, n = meta["scheme"], _checks.integer("meta.workers", meta["workers"], maximum=_checks.MAX_COUNT)
    allreduce = live_scheme(key).layout == "allreduce"
    calib = [r for r in records if "size" in r]
    fit = None
    if calib:
        fit = calibration_fit(calib, "allreduce" if allreduce else "p2p", n if allreduce else 2)
    rd = meta.get("random_delay")
    row = {"scheme": key, "workers": n, "steps": meta["steps"], "workload": "torchrun"}
    row.update(
        compare_records(
            key,
            n,
            [r for r in records if "role" in r],
            fit,
            batch=int(meta["batch"]),
            gradient_bytes=int(meta["gradient_bytes"]),
            random_delay=None if rd is None else RandomDelay(*rd),
            params=meta["params"],
            seed=int(meta["seed"]),
            emulation="none (real network)",
        )
    )
    return row


def _read_records(files: Sequence[Path]) -> list[dict[str, Any]]:
    """Every record of the ``rank<r>.jsonl`` files: one JSON object per line, each line checked."""
    records: list[dict[str, Any]] = []
    accepted = "JSON-lines records as python -m queuesgd.harness.torchrun writes them (one object a line)"
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            why = err.strerror if isinstance(err, OSError) else "not UTF-8"
            raise InvalidParameterError("--compare", os.fspath(path), f"{accepted} ({why})") from None
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise InvalidParameterError("--compare", f"{path}:{i}", f"{accepted} ({err.msg})") from None
            if not isinstance(rec, dict):
                raise InvalidParameterError("--compare", f"{path}:{i}", accepted)
            records.append(rec)
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run this rank's part (under torchrun), or ``--compare DIR``; 2 and one line on errors."""
    return run_command(build_parser(), argv, _main)


def _main(args: argparse.Namespace) -> int:
    if args.compare:
        from queuesgd.harness.report import format_table

        print(format_table([compare_folder(args.compare)]))
        return 0
    return _run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
