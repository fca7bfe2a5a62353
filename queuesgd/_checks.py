"""Shared argument checks: one place that turns bad input into clear errors.

Every public constructor validates its arguments with these helpers so that the
messages read the same everywhere (``field: got X; accepted: Y``).
"""

from __future__ import annotations

import gzip
import math
import numbers
import os
import stat
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.file_writes import write_text
from queuesgd.sequence_checks import one_dimensional


def is_symbolic(value: Any) -> bool:
    """True if ``value`` is a SymPy expression (SymPy imported lazily)."""
    mod = type(value).__module__
    if not mod.startswith("sympy"):
        return False
    import sympy

    return isinstance(value, sympy.Basic) and not isinstance(value, sympy.Number)


def _as_sympy_number(value: Any) -> float | None:
    mod = type(value).__module__
    if mod.startswith("sympy"):
        import sympy

        if isinstance(value, sympy.Number):
            return float(value)
    return None


def positive(
    field: str,
    value: Any,
    *,
    symbolic: bool = False,
    allow_zero: bool = False,
    maximum: float | None = None,
) -> Any:
    """Return ``value`` as a float if it is a finite number > 0 (or >= 0), at most ``maximum`` if given.

    With ``symbolic=True`` a SymPy expression is returned unchanged unless
    SymPy can prove it is not positive. SymPy numbers (``Rational(1, 3)``) are
    kept exact when ``symbolic=True``. An integer too large for a float
    (``10**400``) is refused like infinity.

    Examples
    --------
    >>> positive("duplex", 1), positive("x", 0, allow_zero=True)
    (1.0, 0.0)
    >>> positive("optimizer", 1e30, maximum=1000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: optimizer: got 1e+30; accepted: a finite number > 0, at most 1,000
    """
    accepted = "a finite number >= 0" if allow_zero else "a finite number > 0"
    if maximum is not None:
        accepted += f", at most {maximum:,.15g}"
    if symbolic:
        accepted += " or a SymPy expression"
    if isinstance(value, bool):
        raise InvalidParameterError(field, value, accepted)
    sym_num = _as_sympy_number(value)
    if sym_num is not None:
        ok = math.isfinite(sym_num) and (sym_num > 0 or (allow_zero and sym_num == 0))
        if not ok:
            raise InvalidParameterError(field, value, accepted)
        return value if symbolic else sym_num
    if is_symbolic(value):
        if not symbolic:
            raise InvalidParameterError(field, value, accepted.replace(" or a SymPy expression", ""))
        if value.is_nonpositive and not (allow_zero and value.is_zero):
            raise InvalidParameterError(field, value, accepted)
        if value.is_negative or value.is_extended_real is False:  # I, zoo: not a real number
            raise InvalidParameterError(field, value, accepted)
        return value
    if not isinstance(value, numbers.Real):
        raise InvalidParameterError(field, value, accepted)
    try:
        f = float(value)
    except (OverflowError, ValueError):  # an int beyond the float range
        raise InvalidParameterError(field, value, accepted) from None
    if not math.isfinite(f) or f < 0 or (f == 0 and not allow_zero) or (maximum is not None and f > maximum):
        raise InvalidParameterError(field, value, accepted)
    return f


def _float_or_none(value: Any) -> float | None:
    """``float(value)`` if it is a finite float, else None (``10**400`` and ``Fraction(10**400)`` too)."""
    try:
        f = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return f if math.isfinite(f) else None


def real(field: str, value: Any, *, accepted: str = "a finite real number") -> float:
    """Return ``value`` as a float if it is a finite real number (negative and zero included).

    Booleans, strings, complex numbers and integers beyond the float range
    (``10**400``) are refused, not converted.

    Examples
    --------
    >>> real("mu", -2), real("mu", 0.5)
    (-2.0, 0.5)
    >>> real("mu", 10**400)
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: mu: got an integer of 401 digits; accepted: a finite real number
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(field, value, accepted)
    f = _float_or_none(value)
    if f is None:
        raise InvalidParameterError(field, value, accepted)
    return f


def reals(
    field: str, value: Any, *, accepted: str = "real numbers (a number, a sequence or an array)"
) -> np.ndarray:
    """``value`` as a new float array, if it is a real number or a (nested) sequence or array of them.

    Only the type of each entry is checked, not its value: NaN and
    infinities pass (the caller bounds them). Refused, not converted: a
    string or bytes (``"784"`` is not 784, ``bytearray(b"12")`` not
    ``[49, 50]``), a mapping or set, booleans, complex numbers, other
    objects, ragged nests, and integers beyond the float range (``10**400``).

    Examples
    --------
    >>> reals("demands", [[1, 2.5]]).tolist(), reals("rate", 3).shape
    ([[1.0, 2.5]], ())
    >>> reals("samples", ["1", "2"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: samples: got ['1', '2']; accepted: real numbers ...
    """
    if isinstance(value, (str, bytes, bytearray, memoryview, Mapping, set, frozenset)):
        raise InvalidParameterError(field, value, accepted)
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError):  # a ragged nest, an object numpy refuses
        raise InvalidParameterError(field, value, accepted) from None
    if arr.dtype.kind == "O":
        numeric = all(
            isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) for x in arr.ravel().tolist()
        )
        if not numeric:
            raise InvalidParameterError(field, value, accepted)
        try:
            return arr.astype(float)
        except (OverflowError, ValueError, TypeError):  # an int beyond the float range
            raise InvalidParameterError(field, value, accepted) from None
    if arr.dtype.kind not in "iuf":
        raise InvalidParameterError(field, value, accepted)
    return arr.astype(float)


#: Largest count a scheme parameter takes (local steps, staleness bounds, ranks, windows, samples, units,
#: stages, micro-batches): far above any configuration in use, the same as the most workers a
#: :class:`~queuesgd.Cluster` takes, and small enough that a loop or an array over it stays bounded.
MAX_COUNT = 1_000_000


def integer(field: str, value: Any, *, minimum: int | None = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum`` (None: any) and <= ``maximum`` if given.

    A float of integral value (``4.0``) is read as 4; a bool, ``2.7`` (not truncated) and a string are not.

    Examples
    --------
    >>> integer("period", 4.0), integer("staleness", 0, minimum=0), integer("shift", -3, minimum=None)
    (4, 0, -3)
    >>> integer("period", 10**30, maximum=MAX_COUNT)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: period: got ...; accepted: an integer >= 1, at most 1,000,000
    """
    at_least = "" if minimum is None else f" >= {minimum}"
    accepted = f"an integer{at_least}" + ("" if maximum is None else f", at most {maximum:,}")
    if isinstance(value, bool):
        raise InvalidParameterError(field, value, accepted)
    if isinstance(value, numbers.Integral):
        out = int(value)
    elif isinstance(value, numbers.Real) and _float_or_none(value) is not None and float(value).is_integer():
        out = int(value)
    else:
        raise InvalidParameterError(field, value, accepted)
    if (minimum is not None and out < minimum) or (maximum is not None and out > maximum):
        raise InvalidParameterError(field, value, accepted)
    return out


def colon_counts(text: str) -> list[int] | None:
    """The integers of a command line's ``N1:N2:...`` (digits only, at most 10 each), else None.

    Examples
    --------
    >>> colon_counts("5:6:6:5"), colon_counts(" 80 : 81 "), colon_counts("5,6"), colon_counts("5:-6")
    ([5, 6, 6, 5], [80, 81], None, None)
    """
    parts = [p.strip() for p in text.strip().split(":")]
    if not all(p.isascii() and p.isdigit() and len(p) <= 10 for p in parts):
        return None
    return [int(p) for p in parts]


def integers(
    field: str,
    value: Any,
    *,
    minimum: int = 1,
    maximum: int | None = None,
    allow_empty: bool = False,
    max_items: int = 10_000,
    distinct: bool = False,
) -> tuple[int, ...]:
    """Return ``value`` as a tuple of ints if it is a sequence of integers >= ``minimum``.

    With ``distinct=True`` an integer given twice is refused (a probe would time it twice).

    A string (or bytes), a mapping, a set or ``None`` is refused (a string is
    not read one character at a time), and so is each item that :func:`integer` refuses
    (``2.7`` is not 2), naming it as ``field[i]``. At most ``max_items`` items
    are read, so an endless iterator is refused too.

    Examples
    --------
    >>> integers("stages", [2, 4.0])
    (2, 4)
    >>> integers("stages", (2.7,))
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: stages[0]: got 2.7; accepted: an integer >= 1
    >>> integers("hidden", (1024, 4096, 1024), distinct=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: hidden[2]: got 1024; accepted: ... not hidden[0]'s value again
    """
    accepted = f"a sequence of integers >= {minimum}, e.g. (2, 4)"
    unordered = (str, bytes, bytearray, Mapping, set, frozenset)
    if value is None or isinstance(value, unordered) or not isinstance(value, Iterable):
        raise InvalidParameterError(field, value, accepted)
    one_dimensional(field, value, accepted)  # a 0-d array is Iterable but not iterable
    items = []
    for i, item in enumerate(value):
        if i == max_items:
            raise InvalidParameterError(
                field, f"more than {max_items:,} items", f"{accepted}, at most {max_items:,}"
            )
        items.append(integer(f"{field}[{i}]", item, minimum=minimum, maximum=maximum))
        if distinct and items[-1] in items[:-1]:
            first = items.index(items[-1])
            accepted_here = f"distinct integers, not {field}[{first}]'s value again"
            raise InvalidParameterError(f"{field}[{i}]", item, accepted_here)
    if not items and not allow_empty:
        raise InvalidParameterError(field, value, f"{accepted} (at least one)")
    return tuple(items)


def size(field: str, value: Any, *, allow_zero: bool = True) -> float:
    """Bytes of ``value`` (a number of bytes or a string such as ``"25MiB"``), at most ``units.MAX_BYTES``.

    A number and a string go through the same parser
    (:func:`queuesgd.units.parse_bytes`), so ``1e30`` is refused as
    ``"1e30B"`` is; fractions of a byte are kept (sizes are floats
    throughout, as ``"1.5 GB"`` or ``"8Mbit"`` give).

    Examples
    --------
    >>> size("activation_bytes", "2MB"), size("activation_bytes", 0)
    (2000000.0, 0.0)
    >>> size("activation_bytes", 1e30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnitError: activation_bytes: got 1e+30; accepted: a size of at most 1 EiB ...
    """
    return float(positive(field, units.parse_bytes(value, field), allow_zero=allow_zero))


def duration(field: str, value: Any, *, allow_zero: bool = True, per: str = "") -> float:
    """Seconds of ``value`` (a number or a string such as ``"5ms"``), at most ``units.MAX_SECONDS``.

    ``per`` names what the duration is per (``"byte"``), for the message.

    Examples
    --------
    >>> duration("fusion_time", "5ms"), duration("compress_time", "1ns", per="byte")
    (0.005, 1e-09)
    >>> duration("timeout", 1e30, allow_zero=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: timeout: got 1e+30; accepted: a duration > 0 of at most 1e+09 s ...
    """
    seconds = float(positive(field, units.parse_seconds(value, field), allow_zero=allow_zero))
    if seconds > units.MAX_SECONDS:
        unit = f" s per {per}" if per else " s"
        raise InvalidParameterError(
            field,
            value,
            f"a duration {'>=' if allow_zero else '>'} 0 of at most {units.MAX_SECONDS:g}{unit} (about 32 "
            "years): a number of seconds or a string such as '5ms'",
        )
    return seconds


def name(field: str, value: Any) -> str:
    """Return ``value`` if it is a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(field, value, "a non-empty string")
    return value


def choice(field: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise UnknownNameError."""
    options = list(choices)
    if not isinstance(value, str) or value not in options:
        raise UnknownNameError(field, value, options)
    return value


def device(field: str, value: Any) -> str:
    """Return ``value`` if it names a torch device the harness runs on: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Only the spelling is checked here (no torch import): whether a CUDA device is
    present is for the worker that uses it to find out.

    Examples
    --------
    >>> device("device", "cuda:0"), device("device", "cpu")
    ('cuda:0', 'cpu')
    >>> device("device", "gpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: device: got 'gpu'; accepted: 'cpu', 'cuda' or 'cuda:N' (...)
    """
    if isinstance(value, str):
        head, colon, index = value.partition(":")
        digits = index.isascii() and index.isdigit() and len(index) <= 4  # torch parses no more
        if value == "cpu" or (head == "cuda" and (not colon or digits)):
            return value
    raise InvalidParameterError(field, value, "'cpu', 'cuda' or 'cuda:N' (N a device index)")


def file_path(field: str, value: Any, *, accepted: str = "a file path (str or os.PathLike)") -> str:
    """``os.fspath(value)`` if ``value`` is a non-empty str or ``os.PathLike`` naming one, without NUL.

    Only the type and spelling are checked, not the file: :func:`read_bytes`
    and :func:`output_file` check what is there.

    Examples
    --------
    >>> from pathlib import Path
    >>> file_path("path", Path("/tmp") / "t.json")
    '/tmp/t.json'
    >>> file_path("path", 10**30)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got 1000...; accepted: a file path (str or os.PathLike)
    """
    where = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(where, str) or not where or "\0" in where:
        raise InvalidParameterError(field, value, accepted)
    return where


def output_file(field: str, value: Any, *, suffix: str | None = None) -> Path:
    """The path ``value`` names, if a file may be written there: checked before any work is done.

    Refused: an empty name, a name without ``suffix`` (nothing is appended to a
    path the user gave), an existing directory, device, FIFO, socket or
    symbolic link, and a missing or unwritable parent directory.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> output_file("--out", f"{d}/w.json", suffix=".json").name
    'w.json'
    >>> output_file("--out", "/dev/full", suffix=".json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --out: got '/dev/full'; accepted: a file name ending in .json (...)
    >>> output_file("--out", d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --out: got '...'; accepted: a regular file ... (it is a directory)
    """
    accepted = "a regular file to write" + (f", its name ending in {suffix}" if suffix else "")
    path = Path(file_path(field, value, accepted=accepted))
    if suffix and (not path.name.endswith(suffix) or path.name == suffix):
        raise InvalidParameterError(
            field, os.fspath(value), f"a file name ending in {suffix} (nothing is appended to the path given)"
        )
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise InvalidParameterError(field, os.fspath(value), f"{accepted} ({err.strerror or err})") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = _FILE_KINDS.get(stat.S_IFMT(st.st_mode), "special file")
        raise InvalidParameterError(field, os.fspath(value), f"{accepted} (it is a {kind})")
    parent = path.parent
    if not parent.is_dir():
        raise InvalidParameterError(field, os.fspath(value), f"{accepted} (no directory {str(parent)!r})")
    if not os.access(parent, os.W_OK | os.X_OK) or (st is not None and not os.access(path, os.W_OK)):
        raise InvalidParameterError(field, os.fspath(value), f"{accepted} (not writable)")
    return path


_FILE_KINDS = {
    stat.S_IFDIR: "directory",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFLNK: "symbolic link",
}


#: Default bound of :func:`read_bytes`, and of every reader built on it
#: (:func:`queuesgd.catalog_files.read_bytes`, ``read_text``, ``read_json``: workload JSON, curves,
#: PNML): 64 MiB. A reader with its own bound (a trace, a log to compare, a campaign spec) passes it.
MAX_FILE_BYTES = 64 * 2**20


def read_bytes(field: str, value: Any, *, max_bytes: int = MAX_FILE_BYTES, gunzip: bool = False) -> bytes:
    """The bytes of the regular file ``value`` names, at most ``max_bytes`` (after gunzip where asked).

    The one bounded file reader of queuesgd; every other reader
    (:mod:`queuesgd.catalog_files`, traces, logs, specs) goes through it.
    Its limits:

    - a regular file only: devices (``/dev/zero`` never ends), FIFOs (opened
      without waiting for a writer), sockets and directories are refused
      from the open file's own status, before anything is read (a symbolic
      link is followed to what it names, and judged by that);
    - at most ``max_bytes + 1`` bytes are ever read, so a file larger than
      the bound, or one that grows past it while it is read, is refused; a
      gzip file is refused as soon as it inflates past ``max_bytes``;
    - a missing or unreadable file is refused with the system's reason.

    Every refusal is an :class:`~queuesgd.errors.InvalidParameterError` naming
    ``field`` and the path, and saying ``a regular file of at most N bytes``.

    Examples
    --------
    >>> read_bytes("path", "/dev/zero", max_bytes=1024)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got '/dev/zero'; accepted: ... (it is a character device)
    """
    accepted = f"a regular file of at most {max_bytes:,} bytes"
    where = file_path(field, value, accepted=accepted)
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        reason = err.strerror or err
        raise InvalidParameterError(field, where, f"{accepted}, a readable file ({reason})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = _FILE_KINDS.get(stat.S_IFMT(mode), "special file")
        raise InvalidParameterError(field, where, f"{accepted} (it is a {kind})")
    with os.fdopen(fd, "rb") as fh:
        try:
            raw = fh.read(max_bytes + 1)
            if gunzip and raw[:2] == b"\x1f\x8b":
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh) as inflated:
                    raw = inflated.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as err:
            raise InvalidParameterError(field, where, f"{accepted} (unreadable: {err})") from None
    if len(raw) > max_bytes:
        raise InvalidParameterError(field, where, f"{accepted} ({'inflated ' if gunzip else ''}it is larger)")
    return raw


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def boolean(field: str, value: Any) -> bool:
    """Return ``value`` as a bool; accepts bools, 0/1 and the strings true/false, yes/no, on/off.

    The integers 0 and 1 (and NumPy's bools and integers 0 and 1) are
    accepted on purpose: a command line, a CSV cell or a JSON file written
    by another tool spells a flag that way, and neither is ambiguous. Any
    other number (``2``, ``0.5``, ``nan``) is refused, as is ``None``.

    Examples
    --------
    >>> boolean("overlap", "off"), boolean("overlap", True), boolean("overlap", 0)
    (False, True, False)
    >>> boolean("overlap", 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: overlap: got 2; accepted: true or false (...)
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InvalidParameterError(field, value, "true or false (also yes/no, on/off, 1/0)")


_JSON_SCALARS = (str, int, float, bool, type(None))


def json_record(field: str, value: Any) -> dict[str, Any]:
    """A copy of ``value`` if it maps str names to JSON scalars or lists of them (finite numbers).

    Examples
    --------
    >>> json_record("provenance", {"device": "cpu", "sizes": (1, 2)})
    {'device': 'cpu', 'sizes': [1, 2]}
    >>> json_record("provenance", {"x": float("nan")})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: provenance['x']: got nan; accepted: ...
    """
    accepted = "a mapping of str names to JSON values (str, finite number, bool, None, or a list of them)"
    if not isinstance(value, Mapping):
        raise InvalidParameterError(field, value, accepted)
    out: dict[str, Any] = {}
    for key, v in value.items():
        items = v if isinstance(v, (list, tuple)) else [v]
        finite = all(math.isfinite(x) for x in items if isinstance(x, float))
        ok = isinstance(key, str) and finite and all(isinstance(x, _JSON_SCALARS) for x in items)
        if not ok:
            raise InvalidParameterError(f"{field}[{key!r}]", v, accepted)
        out[key] = list(v) if isinstance(v, (list, tuple)) else v
    return out


def write_probe_table(path: Any, table: Any, *, rows: str, probe: str) -> Path:
    """Write a probe's table (a dict whose ``rows`` key holds a list) as JSON at ``path`` (``.json``).

    The path is checked as :func:`output_file` checks it; a table without its
    rows is refused naming ``table``. The writers of :mod:`queuesgd.gemm_probe`
    and :mod:`queuesgd.busbw_probe` both go through here.

    Examples
    --------
    >>> import tempfile
    >>> write_probe_table(tempfile.mkdtemp() + "/t.json", {"gemm": []}, rows="gemm", probe="probe_gemm").name
    't.json'
    >>> write_probe_table(tempfile.mkdtemp() + "/t.json", {}, rows="rows", probe="probe_busbw")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: table: got 'dict'; accepted: a table from probe_busbw (a dict ...
    """
    import json

    out = output_file("path", path, suffix=".json")
    if not isinstance(table, dict) or not isinstance(table.get(rows), list):
        accepted = f"a table from {probe} (a dict with {rows!r})"
        raise InvalidParameterError("table", type(table).__name__, accepted)
    return write_text("path", out, json.dumps(table, indent=1) + "\n")  # /proc: refused, not a traceback
