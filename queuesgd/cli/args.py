"""Argument helpers shared by the subcommands: lists, units, plots and notes.

The parser class and the error handling every entry point shares
(:class:`~queuesgd.command_line.Parser`, :func:`~queuesgd.command_line.run_command`)
live in :mod:`queuesgd.command_line`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import save_figure
from queuesgd.specs import NUMBER as _NUMBER


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


def split_list(text: str, field: str = "list") -> list[str]:
    """Split ``"1,10,25Gbit/s"`` into items; a unit on the last item applies to bare numbers.

    An empty item is refused on ``field`` (the option that gave ``text``).

    Examples
    --------
    >>> split_list("1,10,25Gbit/s")
    ['1Gbit/s', '10Gbit/s', '25Gbit/s']
    >>> split_list("1,2,4")
    ['1', '2', '4']
    >>> split_list("10Gbit/s,1.25e9,100Gbit/s", "--bandwidth")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --bandwidth: got ...; 1.25e9 is ambiguous
    """
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise InvalidParameterError(field, text, "comma-separated values such as 1,2,4 or 1,10Gbit/s")
    last = items[-1]
    m = re.match(r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*(.*)$", last)
    unit = m.group(3) if m else ""
    if unit:
        bare = [s for s in items[:-1] if _NUMBER.match(s)]
        if bare and len(bare) < len(items) - 1:  # 10Gbit/s,1.25e9,100Gbit/s: 1.25e9 B/s or Gbit/s?
            raise InvalidParameterError(
                field, text, f"a unit on every item, or on the last only (1,10{unit}); {bare[0]} is ambiguous"
            )
        items = [s + unit if _NUMBER.match(s) else s for s in items]
    return items


def fill_defaults(args: argparse.Namespace, defaults: dict[str, Any]) -> None:
    """Give each option the user left out (None) its default.

    The parser leaves such options None so that a mode that takes none of them (``validate --apriori``,
    ``profile --from-trace``) can tell every one given, even at its default value.

    Examples
    --------
    >>> ns = argparse.Namespace(steps=None, seed=3)
    >>> fill_defaults(ns, {"steps": 200, "seed": 0})
    >>> ns.steps, ns.seed
    (200, 3)
    """
    for name, default in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, default)


def option_field(field: str, flags: dict[str, str]) -> str:
    """``field`` with its leading Python name written as its option (``flags``), an index after it kept.

    How an error of the Python API that a command calls names the option the
    user typed (``whatif(workers=...)``'s ``workers[1]`` is ``--workers[1]``);
    a field of another name is returned unchanged.

    Examples
    --------
    >>> flags = {"workers": "--workers", "fusion_bytes": "--fusion-bytes"}
    >>> option_field("workers[1]", flags), option_field("fusion_bytes", flags), option_field("rate", flags)
    ('--workers[1]', '--fusion-bytes', 'rate')
    """
    name, rest = re.match(r"([^.\[]*)(.*)", str(field), re.S).groups()
    return flags[name] + rest if name in flags else field


def ints(field: str, text: str) -> list[int]:
    """Positive integers separated by commas, ASCII digits, at most 18 of them each.

    Examples
    --------
    >>> ints("--workers", "1,2,4")
    [1, 2, 4]
    >>> ints("--workers", "9" * 19)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --workers: got ...; accepted: positive integers (at most 18...
    """
    out = []
    for s in split_list(text, field):
        if not re.fullmatch(r"[0-9]{1,18}", s.lstrip("0") or "0") or int(s) < 1:
            raise InvalidParameterError(
                field, s, "positive integers (at most 18 digits) separated by commas, e.g. 1,2,4,8"
            )
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
        if flag in ("--bandwidth", "--memory-bandwidth") and value < 1e6:
            unit = "Gbit/s" if flag == "--bandwidth" else "TB/s"
            notes(args).append(
                f"warning: {flag} {text} is {value:g} bytes/s (a bare number is bytes/s); "
                f"give a unit, e.g. {text}{unit}"
            )
        elif flag == "--latency" and value >= 1.0:
            notes(args).append(
                f"warning: --latency {text} is {value:g} seconds (a bare number is seconds); "
                f"give a unit, e.g. {text}us"
            )


def bandwidths(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.bandwidth, "--bandwidth")
    out = [units.parse_bandwidth(b, "--bandwidth") for b in items]
    plausible(args, "--bandwidth", items, out)
    return out


def latencies(args: argparse.Namespace) -> list[float]:
    from queuesgd import units

    items = split_list(args.latency, "--latency")
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
        save_figure("--plot", fig, path, dpi=120)
    finally:
        plt.close(fig)
