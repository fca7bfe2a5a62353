"""Command line: ``queuesgd predict | sweep | whatif | derive | compare | validate | profile | catalog``.

Every user error prints one line on stderr and exits with status 2. One module
per subcommand (``predict`` also holds ``sweep``, ``whatif`` and ``derive``);
:mod:`~queuesgd.cli.parser` builds the parser, :mod:`~queuesgd.cli.args` and
:mod:`~queuesgd.cli.scheme_args` hold what the subcommands share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from queuesgd.cli.args import PLOT_SUFFIXES, notes, split_list
from queuesgd.cli.catalog import run_catalog
from queuesgd.cli.compare import run_compare
from queuesgd.cli.parser import build_parser
from queuesgd.cli.predict import run_derive, run_predict, run_whatif
from queuesgd.cli.profile import run_profile
from queuesgd.cli.scheme_args import scheme_flag
from queuesgd.cli.validate import run_validate
from queuesgd.command_line import run_command
from queuesgd.harness.process_limit import PROCESSES_PER_CORE

__all__ = ["PLOT_SUFFIXES", "PROCESSES_PER_CORE", "main", "scheme_flag", "split_list"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``queuesgd`` command: its status, or 2 and one line on stderr for a user error.

    Examples
    --------
    >>> main(["predict", "--workers", "1,2", "--json"]) == 0  # doctest: +ELLIPSIS
    [...
    True
    """
    return run_command(build_parser(), argv, _run_with_notes)


def _run_with_notes(args: argparse.Namespace) -> int:
    """Run the subcommand, then print its notes on stderr (none when it fails)."""
    status = _run(args)
    for note in notes(args):
        print(f"queuesgd: {note}", file=sys.stderr)
    return status


def _run(args: argparse.Namespace) -> int:
    if args.command in ("predict", "sweep"):
        return run_predict(args, lists=args.command == "sweep")
    if args.command == "derive":
        return run_derive(args)
    if args.command == "whatif":
        return run_whatif(args)
    if args.command == "validate":
        return run_validate(args)
    if args.command == "compare":
        return run_compare(args)
    if args.command == "profile":
        return run_profile(args)
    return run_catalog(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
