"""Argument helpers shared by the subcommands: the parser class, lists, units, plots and notes.

:class:`Parser` and :func:`run_command` are also the command lines of the
modules run with ``python -m`` (``queuesgd.gemm_probe``,
``queuesgd.busbw_probe``, ``queuesgd.harness.torchrun``): every user error,
one line on stderr and status 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.specs import NUMBER as _NUMBER


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
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def run_command(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, run: Callable[[argparse.Namespace], int]
) -> int:
    """Parse ``argv`` and run the command: its status, or 2 and one line on stderr for a user error.

    A usage error is the one line :meth:`Parser.error` prints (``PROG: error: argument --x: ...``); a
    :class:`~queuesgd.errors.QueuesgdError` raised by ``run`` is printed as ``PROG: error: `` and its
    message's first line (which names the field and what it accepts). ``--help`` and ``--version``
    return 0 after printing. Anything else is a bug and keeps its traceback.

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
    try:
        return run(args)
    except QueuesgdError as err:
        line = next((s.strip() for s in str(err).splitlines() if s.strip()), type(err).__name__)
        print(f"{parser.prog}: error: {line}", file=sys.stderr)
        return 2


class Renamed(argparse.Action):
    """An option with a new name whose old spelling still works, with a warning after the output."""

    def __init__(self, *args: Any, old: str = "", **kwargs: Any) -> None:
        self.old = old
        super().__init__(*args, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        if option_string == self.old:
            new = next(o for o in self.option_strings if o != self.old)
            notes(namespace).append(f"warning: {self.old} is deprecated here; use {new}")


def notes(namespace: Any) -> list[str]:
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


def ints(field: str, text: str) -> list[int]:
    out = []
    for s in split_list(text):
        if not re.fullmatch(r"\d+", s) or int(s) < 1:
            raise InvalidParameterError(field, s, "positive integers separated by commas, e.g. 1,2,4,8")
        out.append(int(s))
    return out


#: File suffixes --plot accepts (matplotlib's image formats).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def check_plot(path: str | None) -> None:
    """Refuse a --plot file name matplotlib cannot write, before any work is done."""
    if path is None:
        return
    from pathlib import Path

    if not path.strip() or Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise InvalidParameterError("--plot", path, f"a file name ending in {', '.join(PLOT_SUFFIXES)}")


def plausible(args: argparse.Namespace, flag: str, items: list[str], values: list[float]) -> None:
    """Warn (after the output) about a bare number that is probably missing its unit."""
    for text, value in zip(items, values):
        if not _NUMBER.match(text):
            continue
        if flag == "--bandwidth" and value < 1e6:
            notes(args).append(
                f"warning: --bandwidth {text} is {value:g} bytes/s (a bare number is bytes/s); "
                f"give a unit, e.g. {text}Gbit/s"
            )
        elif flag == "--latency" and value >= 1.0:
            notes(args).append(
                f"warning: --latency {text} is {value:g} seconds (a bare number is seconds); "
                f"give a unit, e.g. {text}us"
            )


def bandwidths(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.bandwidth)
    out = [units.parse_bandwidth(b, "--bandwidth") for b in items]
    plausible(args, "--bandwidth", items, out)
    return out


def latencies(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.latency)
    out = [units.parse_seconds(x, "--latency") for x in items]
    plausible(args, "--latency", items, out)
    return out


def plot_table(table: Any, title: str, path: str) -> None:
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
