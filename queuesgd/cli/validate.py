"""``queuesgd validate``: a scheme run live with PyTorch workers, against the model.

``queuesgd validate --apriori SPEC.json [--out DIR]`` runs a campaign of the
a-priori protocol instead (:class:`~queuesgd.harness.apriori.Campaign`): the
spec, checked before anything runs, names the models, schemes, worker counts,
links, passes and the discard rule.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from queuesgd.cli.args import fill_defaults, ints, option_field
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.process_limit import check_processes
from queuesgd.specs import parse_params, random_delay

#: A single live run's options, by their ``argparse`` names, with their defaults. The parser gives them
#: None (``--force``: False) so that ``--apriori`` tells every one given, even at its default, and refuses
#: it (the spec says what runs); :func:`run_validate` fills in these defaults for a single run.
RUN_DEFAULTS: dict[str, Any] = {
    "scheme": "ring-allreduce",
    "workers": "2,4,8",
    "steps": 200,
    "workload": "emulated",
    "compute": "20ms",
    "gradient_bytes": "1MB",
    "batch_size": 32,
    "straggler": None,
    "random_delay": None,
    "bandwidth": None,
    "latency": "0",
    "network": "auto",
    "param": [],
    "seed": 0,
    "timeout": None,
    "force": False,
}


def cli_flag(field: str) -> str:
    """The flag behind a field of :func:`queuesgd.harness.campaign.validate`'s errors (others unchanged).

    Examples
    --------
    >>> cli_flag("gradient_bytes"), cli_flag("workers[0]"), cli_flag("params.backups"), cli_flag("rate")
    ('--gradient-bytes', '--workers[0]', '--param backups', 'rate')
    """
    head, _, rest = field.partition(".")
    if re.sub(r"\[\d+\]$", "", head) == "params":
        return f"--param {rest}" if rest else "--param"
    return option_field(field, {name: "--" + name.replace("_", "-") for name in RUN_DEFAULTS})


def _progress_bar(label: str, done: int, total: int) -> None:
    if not sys.stderr.isatty():  # a log, not a terminal: one line per finished run
        if done >= total:
            print(f"{label}: {done}/{total} steps", file=sys.stderr)
        return
    width = 30
    filled = int(width * done / max(total, 1))
    end = "\n" if done >= total else ""
    print(f"\r{label:<24} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end=end, file=sys.stderr)


def _validate_checks(args: argparse.Namespace, counts: list[int]) -> None:
    """What can be refused before any process is forked: counts, delays, the run's length, --out."""
    from pathlib import Path

    from queuesgd import _checks, units
    from queuesgd.harness.layout import live_key, world_size

    # The harness's rule (validate() applies it too): refused here first, naming the flags.
    processes = world_size(live_key(args.scheme, "--scheme"), max(counts))  # the PS is one more process
    check_processes("--workers", args.workers, processes, force=args.force, option="--force")
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
        mean = _checks.duration("--compute", args.compute, allow_zero=False)
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


def _apriori_campaign(args: argparse.Namespace) -> int:
    """``--apriori SPEC.json``: check the spec, run its campaign into ``--out``, print each pass's figures."""
    from queuesgd.harness.apriori import Campaign, load_spec

    for name in RUN_DEFAULTS:  # given at all, even at its default: the spec names the runs
        value = getattr(args, name, None)
        if value is not None and value is not False:
            raise InvalidParameterError(
                "--" + name.replace("_", "-"),
                value,
                "none with --apriori (the spec names the runs: schemes, workers, steps, links)",
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
    """``queuesgd validate``: run a scheme live per worker count and print it against the model.

    With ``--apriori SPEC.json`` it runs that spec's campaign instead. Every
    argument is checked before any process starts.

    Parameters
    ----------
    args : argparse.Namespace
        The ``validate`` subcommand's arguments (:mod:`queuesgd.cli.parser`); a single run's options
        not given get :data:`RUN_DEFAULTS`.

    Returns
    -------
    int
        0 when every run completed, 1 when a run failed (its row says why; the others are kept).

    Raises
    ------
    InvalidParameterError
        A bad argument, naming its flag (the CLI prints one line and exits with status 2).
    """
    from queuesgd.harness.campaign import parse_straggler

    if getattr(args, "apriori", None):
        return _apriori_campaign(args)
    if getattr(args, "overwrite", False):
        raise InvalidParameterError("--overwrite", True, "only with --apriori SPEC.json")

    fill_defaults(args, RUN_DEFAULTS)
    params = parse_params(args.param)
    parse_straggler(args.straggler, 1.0, "--straggler")  # its errors name the flag; validate() scales it
    counts = ints("--workers", args.workers)
    _validate_checks(args, counts)
    done: list[dict[str, Any]] = []

    def keep(row: dict[str, Any]) -> None:  # each configuration's row written at once: a later one's
        done.append(row)  # failure, or Ctrl-C, loses none
        if args.out:
            from queuesgd.harness.report import write_rows

            write_rows(done, args.out)

    try:
        result = _run(args, counts, params, keep)
    except InvalidParameterError as err:  # validate()'s argument names, as the command line spells them
        # (validate() checks its arguments before any run; a run's own failure is its row: exit 1)
        raise InvalidParameterError(cli_flag(err.field), err.got, err.accepted) from None
    if args.json:
        from queuesgd.harness.report import jsonable

        print(json.dumps([jsonable(r) for r in result.rows], indent=1))
    else:
        print(result.table())
    for failure in result.failures:
        print(f"queuesgd: failed: {failure}", file=sys.stderr)
    return 1 if result.failures else 0


def _run(args: argparse.Namespace, counts: list[int], params: dict[str, Any], on_row: Any) -> Any:
    from queuesgd.harness.campaign import validate

    return validate(
        args.scheme,
        workers=counts,
        steps=args.steps,
        workload=args.workload,
        compute=args.compute,
        gradient_bytes=args.gradient_bytes,
        batch_size=args.batch_size,
        straggler=args.straggler,
        random_delay=args.random_delay,  # the text: validate() parses it and its errors show it
        bandwidth=args.bandwidth,
        latency=args.latency,
        network=args.network,
        params=params,
        timeout=args.timeout,
        seed=args.seed,
        progress=None if args.json else _progress_bar,
        on_row=on_row,
        force=args.force,
    )
