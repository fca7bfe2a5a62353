"""Writing a file the user named: what the system refuses is one error naming the argument.

:func:`queuesgd._checks.output_file` checks a path before any work is done, but a check cannot
foresee every refusal: ``/proc`` takes no new file (``FileNotFoundError``, though it is a writable
directory to ``os.access``), a disk fills, a directory's permissions change. :func:`write_text` is
the one place such a write happens, so that the refusal is an
:class:`~queuesgd.errors.InvalidParameterError` naming the argument and the path, as the check's
would be. :func:`open_text` is the same for a file written as it goes (a JSON-lines log),
:func:`make_folder` for the folder the files go into, and :func:`save_figure` for a
matplotlib figure.

Examples
--------
>>> write_text("path", "/proc/x.json", "{}")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: path: got '/proc/x.json'; accepted: a regular file to write (...)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from queuesgd.errors import InvalidParameterError

__all__ = ["make_folder", "open_text", "save_figure", "write_text"]


def write_text(
    field: str, path: str | os.PathLike[str], text: str, *, accepted: str = "a regular file to write"
) -> Path:
    """Write ``text`` as UTF-8 to ``path`` (checked before by :func:`queuesgd._checks.output_file`).

    Parameters
    ----------
    field : str
        The argument that named the file (``"path"``, ``"--out"``), for the error.
    path : str or path-like
        The file.
    text : str
        Its contents.
    accepted : str
        What the argument accepts, for the error; the system's reason is added.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    InvalidParameterError
        The system refused the write (``OSError``): naming ``field``, the path and the reason.

    Examples
    --------
    >>> import tempfile
    >>> write_text("path", tempfile.mkdtemp() + "/w.json", "{}").name
    'w.json'
    """
    out = Path(path)
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as err:
        raise _refused(field, path, accepted, err) from None
    return out


def open_text(
    field: str, path: str | os.PathLike[str], *, accepted: str = "a regular file to write"
) -> IO[str]:
    """``path`` opened for writing as UTF-8 text (a log written as it goes), or :func:`write_text`'s error.

    Examples
    --------
    >>> open_text("--out", "/proc/r.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --out: got '/proc/r.jsonl'; accepted: a regular file to write (...)
    """
    try:
        return open(path, "w", encoding="utf-8")  # noqa: SIM115 - the caller closes it
    except OSError as err:
        raise _refused(field, path, accepted, err) from None


def make_folder(field: str, path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` (and its parents) if needed; an error naming ``field`` if refused.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     make_folder("out", Path(d) / "a" / "b").is_dir()
    True
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     make_folder("out", f.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: out: got '...'; accepted: a writable folder (File exists)
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _refused(field, path, "a writable folder", err) from None
    return folder


def save_figure(field: str, fig: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """``fig.savefig(path, **options)`` (a matplotlib figure), or :func:`write_text`'s error if refused.

    Examples
    --------
    >>> import pytest; plt = pytest.importorskip("matplotlib.pyplot")
    >>> fig = plt.figure()
    >>> save_figure("--plot", fig, "/proc/p.png")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --plot: got '/proc/p.png'; accepted: a writable file path (...)
    >>> plt.close(fig)
    """
    try:
        fig.savefig(path, **options)
    except OSError as err:
        raise _refused(field, path, "a writable file path", err) from None
    return Path(path)


def _refused(field: str, path: str | os.PathLike[str], accepted: str, err: OSError) -> InvalidParameterError:
    """The one error of a refused write: the argument, the path, what it accepts and the system's reason."""
    return InvalidParameterError(field, os.fspath(path), f"{accepted} ({err.strerror or err})")
