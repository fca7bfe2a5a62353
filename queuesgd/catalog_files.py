"""The catalog's files on disk: where the catalog lives, and the plain-text readers it shares.

Below both :mod:`queuesgd.workload` (whose ``CostCurve.from_file`` reads a
vector-addition curve) and :mod:`queuesgd.catalog` (workload profiles and
traces), so that neither imports the other's module for them.
"""

from __future__ import annotations

import math
import os
import sys
import sysconfig
from pathlib import Path

import numpy as np

from queuesgd.errors import InvalidParameterError

__all__ = [
    "DEFAULT_CURVE",
    "ENV_VAR",
    "catalog_dirs",
    "default_curve_path",
    "load_vector_add_curve",
    "parse_number",
    "parse_pairs",
    "read_lines",
]

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


def read_lines(path: str | os.PathLike[str]) -> tuple[Path, list[str]]:
    """The file's path and lines (trailing blank lines dropped); an unreadable file names its path."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError("path", os.fspath(path), f"a readable file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InvalidParameterError(
            "path", os.fspath(path), f"a UTF-8 text file (byte {exc.start} is not UTF-8)"
        ) from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return p, lines


def parse_number(where: str, text: str, accepted: str, *, minimum: float = 0.0) -> float:
    """``text`` as a finite number ``>= minimum``, else an error naming ``where``."""
    try:
        value = float(text)
    except ValueError:
        raise InvalidParameterError(where, text, accepted) from None
    if not math.isfinite(value) or value < minimum:
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
