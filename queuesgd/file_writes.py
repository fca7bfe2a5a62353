"""Writing a file the user named: what the system refuses is one error naming the argument.

:func:`queuesgd._checks.output_file` checks a path before any work is done, but a check cannot
foresee every refusal: ``/proc`` takes no new file (``FileNotFoundError``, though it is a writable
directory to ``os.access``), a disk fills, a directory's permissions change. :func:`write_text` is
the one place such a write happens, so that the refusal is an
:class:`~queuesgd.errors.InvalidParameterError` naming the argument and the path, as the check's
would be.

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

from queuesgd.errors import InvalidParameterError

__all__ = ["write_text"]


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
        raise InvalidParameterError(field, os.fspath(path), f"{accepted} ({err.strerror or err})") from None
    return out
