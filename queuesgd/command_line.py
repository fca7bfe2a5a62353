"""The command line of every entry point: one-line errors, status 2, defaults in the help.

:class:`Parser` and :func:`run_command` serve the ``queuesgd`` command
(:mod:`queuesgd.cli`) and the modules run with ``python -m``
(``queuesgd.gemm_probe``, ``queuesgd.busbw_probe``,
``queuesgd.harness.torchrun``): every user error is one line on stderr and
status 2. It sits below ``cli`` and ``harness`` so that both can use it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from queuesgd.errors import InvalidParameterError, QueuesgdError

__all__ = ["NEGATIVE_VALUE", "HelpFormatter", "Parser", "device_arguments", "run_command"]


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (none for flags and options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS or default == []:
            return text
        if action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


#: An argument that is a value, not an option, though it starts with "-": a negative number, with or
#: without a unit or list (``-1``, ``-1ms``, ``-1e3``, ``-.5``, ``-1,2``, ``-inf``). argparse's own
#: pattern (``-1``, ``-.5``) left ``--latency -1ms`` as "expected one argument"; no option of ours
#: starts with a digit, so each of these reaches the option's own validation.
NEGATIVE_VALUE = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """The parser of every (sub)command: defaults in the help, one-line errors, negative values.

    Examples
    --------
    >>> p = Parser(prog="x")
    >>> _ = p.add_argument("--latency")
    >>> p.parse_args(["--latency", "-1ms"]).latency
    '-1ms'
    >>> _ = p.add_argument("--seed", type=int)
    >>> p.parse_args(["--seed", "\uff13"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --seed: got '３'; accepted: an integer written with the digits ...
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # An empty value is a mistake, not the default: `--compute "$LAW"` with LAW unset ran the
        # default law without a word (audit 2026-11-28)
        empty = [a for a in arg_strings if isinstance(a, str) and not a.strip()]
        if empty and action.nargs not in (argparse.PARSER, argparse.REMAINDER):  # not a subcommand's argv
            name = action.option_strings[-1] if action.option_strings else action.dest
            hint = " (leave the option out for its default)" if action.option_strings else ""
            raise InvalidParameterError(name, empty[0], f"a value{hint}")  # run_command's one line
        # int() and float() read other scripts' digits ("\uff13" is 3) and white space: a number on the
        # command line is ASCII, in every option, as queuesgd.units and the list options read it
        if action.type in (int, float):
            odd = [a for a in arg_strings if isinstance(a, str) and not a.isascii()]
            if odd:
                name = action.option_strings[-1] if action.option_strings else action.dest
                kind = "an integer" if action.type is int else "a number"
                raise InvalidParameterError(name, odd[0], f"{kind} written with the digits 0-9 (ASCII)")
        return super()._get_values(action, arg_strings)


def run_command(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, run: Callable[[argparse.Namespace], int]
) -> int:
    """Parse ``argv`` and run the command: its status, or 2 and one line on stderr for a user error.

    A usage error is the one line :meth:`Parser.error` prints (``PROG: error: argument --x: ...``); a
    :class:`~queuesgd.errors.QueuesgdError` raised by ``run`` is printed as ``PROG: error: `` and its
    message's first line (which names the field and what it accepts). ``--help`` and ``--version``
    return 0 after printing; Ctrl-C prints ``PROG: interrupted`` and returns 130. Anything else is a
    bug and keeps its traceback.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser, a :class:`Parser` (its ``prog`` starts the error line).
    argv : sequence of str or None
        The arguments; ``None``: ``sys.argv[1:]``.
    run : callable
        Runs the command on the parsed arguments and returns its exit status.

    Returns
    -------
    int
        ``run``'s status, 0 after ``--help``, or 2 after a user error.

    Examples
    --------
    >>> from queuesgd.errors import InvalidParameterError
    >>> p = Parser(prog="demo")
    >>> _ = p.add_argument("--n", type=int, default=1)
    >>> def run(args):
    ...     if args.n < 1:
    ...         raise InvalidParameterError("--n", args.n, "an integer >= 1")
    ...     return 0
    >>> run_command(p, ["--n", "2"], run)
    0
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     statuses = [run_command(p, argv, run) for argv in (["--n", "-1"], ["--n", "x"])]
    >>> statuses
    [2, 2]
    >>> print(err.getvalue(), end="")
    demo: error: --n: got -1; accepted: an integer >= 1
    demo: error: argument --n: invalid int value: 'x'
    """
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help or --version (0), or the one line of Parser.error (2)
        return stop.code if isinstance(stop.code, int) else 2
    except QueuesgdError as err:  # an empty value (Parser._get_values)
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    try:
        return run(args)
    except QueuesgdError as err:
        line = next((s.strip() for s in str(err).splitlines() if s.strip()), type(err).__name__)
        print(f"{parser.prog}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT, no traceback
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130


def device_arguments(
    ap: argparse.ArgumentParser, dtypes: tuple[str, ...], *, repeats: int, budget: float
) -> argparse.ArgumentParser:
    """Add the device probes' shared flags: ``--device``, ``--dtype``, ``--repeats``, ``--budget``.

    Examples
    --------
    >>> ap = device_arguments(Parser(prog="p"), ("bfloat16", "float32"), repeats=5, budget=60.0)
    >>> a = ap.parse_args(["--dtype", "float32"])
    >>> a.device, a.dtype, a.repeats, a.budget
    (None, 'float32', 5, 60.0)
    """
    ap.add_argument("--device", default=None, help="cpu, cuda or cuda:N; default: the GPU if there is one")
    ap.add_argument("--dtype", default=dtypes[0], choices=dtypes)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--budget", type=float, default=budget)
    return ap

