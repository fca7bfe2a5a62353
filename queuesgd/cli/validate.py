"""``queuesgd validate``: a scheme run live with PyTorch workers, against the model.

``queuesgd validate --apriori SPEC.json [--out DIR]`` runs a campaign of the
a-priori protocol instead (:class:`~queuesgd.harness.apriori.Campaign`): the
spec, checked before anything runs, names the models, schemes, worker counts,
links, passes and the discard rule.
"""

from __future__ import annotations

import argparse
import json
import sys

from queuesgd.cli.args import ints
from queuesgd.errors import InvalidParameterError
from queuesgd.specs import parse_params, random_delay


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


#: Options of a single live run, refused beside ``--apriori`` (the spec says everything instead).
_RUN_ONLY = ("param", "random_delay", "straggler", "bandwidth", "timeout")


def _apriori_campaign(args: argparse.Namespace) -> int:
    """``--apriori SPEC.json``: check the spec, run its campaign into ``--out``, print each pass's figures."""
    from queuesgd.harness.apriori import Campaign, load_spec

    given = [f"--{k.replace('_', '-')}" for k in _RUN_ONLY if getattr(args, k, None)]
    if given:
        raise InvalidParameterError(
            given[0],
            getattr(args, given[0][2:].replace("-", "_")),
            "none with --apriori (the spec names the runs)",
        )
    spec = load_spec(args.apriori)
    campaign = Campaign(spec)
    out = args.out or spec.name
    progress = None if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
    result = campaign.run(out, overwrite=args.overwrite, progress=progress)
    if args.json:
        print(json.dumps(result.summary(), indent=1))
    else:
        print(result.table())
        print(f"rows, inputs and summary.json in {out}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from queuesgd.harness.campaign import parse_straggler, validate

    if getattr(args, "apriori", None):
        return _apriori_campaign(args)
    if getattr(args, "overwrite", False):
        raise InvalidParameterError("--overwrite", True, "only with --apriori SPEC.json")

    params = parse_params(args.param)
    parse_straggler(args.straggler, 1.0, "--straggler")  # its errors name the flag; validate() scales it
    counts = ints("--workers", args.workers)
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
