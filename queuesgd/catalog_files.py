"""The catalog's files on disk: where the catalog lives, and the plain-text readers it shares.

Below both :mod:`queuesgd.workload` (whose ``CostCurve.from_file`` reads a
vector-addition curve) and :mod:`queuesgd.catalog` (workload profiles and
traces), so that neither imports the other's module for them.
"""

from __future__ import annotations

import math
import os
import re
import sys
import sysconfig
from pathlib import Path

import numpy as np

from queuesgd import _checks, json_text
from queuesgd.errors import InvalidParameterError

__all__ = [
    "DEFAULT_CURVE",
    "ENV_VAR",
    "DuplicateKeyError",
    "MAX_FILE_BYTES",
    "MAX_JSON_DEPTH",
    "catalog_dirs",
    "default_curve_path",
    "load_vector_add_curve",
    "parse_number",
    "parse_pairs",
    "read_bytes",
    "read_json",
    "read_lines",
    "read_text",
    "unique_keys",
]

#: Largest file these readers take (workload JSON, curves, PNML): 64 MiB (``_checks.MAX_FILE_BYTES``).
MAX_FILE_BYTES = _checks.MAX_FILE_BYTES
#: Deepest nesting of arrays and objects a JSON file may have (a workload file nests three).
MAX_JSON_DEPTH = 64

#: Environment variable naming extra catalog directories (searched first).
ENV_VAR = "QUEUESGD_MODELS"

#: The catalog's V100 vector-addition curve, relative to a catalog directory.
DEFAULT_CURVE = Path("traces") / "training-bottleneck" / "cuda_vec_add.log"


def catalog_dirs() -> list[Path]:
    """Catalog directories that exist, in search order.

    Returns
    -------
    list of pathlib.Path
        ``$QUEUESGD_MODELS`` entries, then the source tree's ``models/``,
        then ``<prefix>/share/queuesgd/models`` (pip's data location).

    Examples
    --------
    >>> any((d / "workloads" / "vgg16.json").is_file() for d in catalog_dirs())
    True
    """
    candidates: list[Path] = []
    for entry in os.environ.get(ENV_VAR, "").split(os.pathsep):
        if entry.strip():
            candidates.append(Path(entry).expanduser())
    # The source tree (checkout or editable install): only where a pyproject.toml marks it, so
    # that an unrelated ``site-packages/models`` directory is never mistaken for the catalog.
    source_root = Path(__file__).resolve().parents[1]
    if (source_root / "pyproject.toml").is_file():
        candidates.append(source_root / "models")
    for prefix in (sysconfig.get_path("data"), sys.prefix):
        if prefix:
            candidates.append(Path(prefix) / "share" / "queuesgd" / "models")
    out: list[Path] = []
    for path in candidates:
        resolved = path.resolve()
        if resolved.is_dir() and resolved not in out:
            out.append(resolved)
    return out


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``: :func:`queuesgd._checks.read_bytes` for ``path``.

    One reader, one set of limits (documented there): devices, pipes,
    sockets and directories are refused before anything is read
    (``/dev/zero`` never ends, ``/dev/stdin`` may block), and at most
    ``max_bytes + 1`` bytes are ever read.

    Raises
    ------
    InvalidParameterError
        Naming the file: missing, unreadable, not a regular file, or too large.

    Examples
    --------
    >>> read_bytes("/dev/zero")       # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got '/dev/zero'; accepted: ... (it is a character device)
    """
    return _checks.read_bytes("path", path, max_bytes=max_bytes)


def read_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A regular UTF-8 text file of at most ``max_bytes`` (:func:`read_bytes`); a leading BOM is dropped.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "x.txt").write_bytes(b"\\xef\\xbb\\xbfok")
    ...     read_text(Path(d) / "x.txt")
    'ok'
    """
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidParameterError(
            "path", os.fspath(path), f"a UTF-8 text file (byte {exc.start} is not UTF-8)"
        ) from None


class DuplicateKeyError(InvalidParameterError):
    """A JSON object that gives a key twice (:func:`unique_keys`); ``got`` is the key."""

    def __init__(self, key: str) -> None:
        super().__init__("key", key, "each key once in a JSON object (JSON would keep only the last value)")


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, refusing a key given twice.

    Plain ``json.loads`` keeps the last of two values of a key without a word;
    with this hook the second one raises :class:`DuplicateKeyError`.

    Examples
    --------
    >>> import json
    >>> json.loads('{"a": 1, "b": {"c": 2}}', object_pairs_hook=unique_keys)
    {'a': 1, 'b': {'c': 2}}
    >>> json.loads('{"a": {"c": 1, "c": 2}}', object_pairs_hook=unique_keys)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.catalog_files.DuplicateKeyError: key: got 'c'; accepted: each key once in a JSON object ...
    """
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def read_json(path: str | os.PathLike[str], *, max_depth: int = MAX_JSON_DEPTH) -> object:
    """The JSON value of a file (:func:`read_text`), nested at most ``max_depth`` arrays and objects deep.

    The depth is measured on the text before it is parsed (outside strings),
    so a document nested 200,000 deep is refused without recursing. An object
    that gives a key twice is refused (:func:`unique_keys`), at any depth, and
    so is an integer of more digits than Python reads (:func:`queuesgd.json_text.loads`).

    Raises
    ------
    InvalidParameterError
        Naming the file (and the line of a syntax error, or the key given twice).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "deep.json").write_text("[" * 100 + "]" * 100)
    ...     read_json(Path(d) / "deep.json")      # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: deep.json: got 'arrays and objects nested 100 deep'; ...
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "w.json").write_text('{"compute": "100ms", "compute": "1ms"}')
    ...     read_json(Path(d) / "w.json")      # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: w.json: got "the key 'compute' twice in one object"; ...
    """
    import json
    import re

    p = Path(path)
    text = read_text(p)
    # Strings may hold brackets: blank them (escapes first) before counting the nesting.
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    depth = np.cumsum(_bracket_steps(bare))
    deepest = int(depth.max(initial=0))
    if deepest > max_depth:
        raise InvalidParameterError(
            p.name, f"arrays and objects nested {deepest} deep", f"JSON nested at most {max_depth} deep"
        )
    try:
        return json_text.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        accepted = f"valid JSON, its integers of at most {json_text.max_int_digits():,} digits"
        raise InvalidParameterError(f"{p.name} line {exc.lineno}", exc.msg, accepted) from None
    except DuplicateKeyError as exc:
        raise InvalidParameterError(
            p.name,
            f"the key {exc.got!r} twice in one object",
            "JSON whose objects give each key once (JSON would keep only the last value)",
        ) from None


def _bracket_steps(text: str) -> np.ndarray:
    """+1 at each ``[`` or ``{``, -1 at each ``]`` or ``}``, 0 elsewhere (one entry per UTF-8 byte)."""
    b = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    return np.isin(b, (0x5B, 0x7B)).astype(np.int64) - np.isin(b, (0x5D, 0x7D)).astype(np.int64)


def read_lines(path: str | os.PathLike[str]) -> tuple[Path, list[str]]:
    """The file's path and lines (trailing blank lines dropped); an unreadable file names its path.

    A ``path`` that is no str or path-like (``3``) is refused naming ``path``
    (:func:`queuesgd._checks.file_path`), where ``Path(3)`` raised ``TypeError``.
    """
    p = Path(_checks.file_path("path", path))
    text = read_text(p)
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return p, lines


#: A decimal number in ASCII, as the plain-text readers take it (``float`` alone also reads ``"٣"`` as 3
#: and ``"1_000"`` as 1000).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_number(
    where: str, text: str, accepted: str, *, minimum: float = 0.0, whole: bool = False
) -> float:
    """``text`` as a finite number ``>= minimum`` (whole where ``whole``), else an error naming ``where``.

    Only an ASCII decimal is a number: ``float`` would also read other scripts' digits
    (``"٣"`` as 3) and underscores (``"1_000"``).

    Examples
    --------
    >>> parse_number("bytes", "4000", "bytes > 0"), parse_number("gap", "1.5e2", "us >= 0")
    (4000.0, 150.0)
    >>> parse_number("bytes", "4000.5", "a whole number of bytes > 0", whole=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: bytes: got '4000.5'; accepted: a whole number of bytes > 0
    >>> parse_number("gap", "\u0663", "us >= 0")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: gap: got '٣'; accepted: us >= 0
    """
    if not _DECIMAL.fullmatch(text.strip()):
        raise InvalidParameterError(where, text, accepted)
    value = float(text)
    if not math.isfinite(value) or value < minimum or (whole and not value.is_integer()):
        raise InvalidParameterError(where, text, accepted)
    return value


def parse_pairs(p: Path, lines: list[str], start: int, names: tuple[str, str], accepted: tuple[str, str]):
    """Parse ``a,b`` lines (1-based numbering from ``start + 1``) into two float arrays."""
    first = np.empty(len(lines) - start)
    second = np.empty(len(lines) - start)
    for i, line in enumerate(lines[start:]):
        lineno = start + i + 1
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 2:
            raise InvalidParameterError(
                f"{p.name} line {lineno}", line, f"two comma-separated fields {names[0]},{names[1]}"
            )
        for k in range(2):
            if not fields[k]:
                raise InvalidParameterError(f"{p.name} line {lineno}: {names[k]}", fields[k], accepted[k])
        first[i] = parse_number(f"{p.name} line {lineno}: {names[0]}", fields[0], accepted[0])
        second[i] = parse_number(f"{p.name} line {lineno}: {names[1]}", fields[1], accepted[1])
    return first, second


def load_vector_add_curve(path: str | os.PathLike[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a vector-addition cost curve: lines ``bytes,seconds``.

    Parameters
    ----------
    path : str, path-like or None
        The curve file; ``None`` loads the catalog's ``cuda_vec_add.log``
        (a V100, 40 B to 671 MB).

    Returns
    -------
    (ndarray, ndarray)
        Sizes in bytes (strictly increasing) and times in seconds.

    Examples
    --------
    >>> nbytes, seconds = load_vector_add_curve()
    >>> len(nbytes), int(nbytes[-1]), float(seconds[-1])
    (25, 671088640, 0.00243368)
    """
    if path is None:
        path = default_curve_path()
    p, lines = read_lines(path)
    if len(lines) < 2:
        raise InvalidParameterError(p.name, len(lines), "at least two bytes,seconds lines")
    nbytes, seconds = parse_pairs(
        p, lines, 0, ("bytes", "seconds"), ("a number of bytes >= 0", "seconds >= 0")
    )
    bad = np.flatnonzero(np.diff(nbytes) <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        raise InvalidParameterError(
            f"{p.name} line {k + 1}: bytes", lines[k].split(",")[0], "sizes increasing"
        )
    return nbytes, seconds


def default_curve_path() -> Path:
    """The catalog's V100 vector-addition curve file (``cuda_vec_add.log``)."""
    for root in catalog_dirs():
        if (root / DEFAULT_CURVE).is_file():
            return root / DEFAULT_CURVE
    raise InvalidParameterError("path", None, f"a curve file (no catalog directory holds {DEFAULT_CURVE})")
