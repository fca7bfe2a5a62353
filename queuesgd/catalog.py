"""The workload catalog: measured DNN profiles loaded by name.

A catalog directory holds one JSON file per workload in ``workloads/`` and the
raw traces they refer to (see ``models/README.md`` for the format). Directories
are searched in this order, and the first file of a given name wins:

1. every directory listed in the ``QUEUESGD_MODELS`` environment variable
   (separated by ``os.pathsep``, ``:`` on POSIX), so users can add workloads
   or shadow built-in ones;
2. the ``models/`` directory of the source tree (an editable install or a
   checkout);
3. the installed data directory ``<prefix>/share/queuesgd/models``.

The built-in workloads (ResNet50, ResNet101, VGG16) come from the traces of
Zhang et al., *Is Network the Bottleneck of Distributed Training?* (NetAI
2020), repository netx-repo/training-bottleneck, Apache License 2.0.

Examples
--------
>>> from queuesgd.catalog import list_workloads, load_workload
>>> list_workloads()[:3]
['resnet101', 'resnet50', 'vgg16']
>>> w = load_workload("ResNet50")
>>> w.batch_size, len(w.layers), int(w.gradient_bytes)
(32, 161, 102228128)
>>> round(w.backward_time * 1e3, 2)  # ms of backward pass in the trace
64.81
"""

from __future__ import annotations

import json
import math
import os
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import distributions as _distributions
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.units import parse_bytes, parse_seconds
from queuesgd.workload import Layer, Workload

__all__ = [
    "catalog_dirs",
    "list_workloads",
    "load_workload",
    "workload_info",
    "load_trace",
    "load_vector_add_curve",
    "vector_add_time",
]

#: Environment variable naming extra catalog directories (searched first).
ENV_VAR = "QUEUESGD_MODELS"

_DEFAULT_CURVE = Path("traces") / "training-bottleneck" / "cuda_vec_add.log"


# --------------------------------------------------------------------------- locating


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


def _workload_files() -> dict[str, Path]:
    """``{lower-case name: JSON path}``; earlier directories shadow later ones."""
    found: dict[str, Path] = {}
    for root in catalog_dirs():
        folder = root / "workloads"
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            found.setdefault(path.stem.lower(), path)
    return found


def list_workloads() -> list[str]:
    """Names of the workloads in the catalog, sorted.

    Examples
    --------
    >>> {"resnet50", "resnet101", "vgg16"} <= set(list_workloads())
    True
    """
    return sorted(_workload_files())


def _resolve(name: Any) -> Path:
    """Path of the JSON file for a workload name (case-insensitive) or a ``.json`` path."""
    if isinstance(name, os.PathLike) or (isinstance(name, str) and name.lower().endswith(".json")):
        path = Path(name).expanduser()
        if not path.is_file():
            raise InvalidParameterError(
                "workload", os.fspath(name), "a catalog name or an existing .json file"
            )
        return path
    files = _workload_files()
    key = name.lower() if isinstance(name, str) else None
    if key not in files:
        raise UnknownNameError("workload", name, sorted(files))
    return files[key]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(
            f"{path.name} line {exc.lineno}", exc.msg, "a valid JSON workload description"
        ) from None
    if not isinstance(data, dict):
        raise InvalidParameterError(path.name, type(data).__name__, "a JSON object")
    stem = path.stem
    name = data.get("name", stem)
    if not isinstance(name, str) or name.lower() != stem.lower():
        raise InvalidParameterError(f"{path.name}: name", name, f"the file's stem {stem!r} (any case)")
    return data


def workload_info(name: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The raw catalog entry of a workload: its JSON fields plus ``"path"``.

    Useful for the descriptive fields that :class:`~queuesgd.workload.Workload`
    does not hold (description, source, hardware, framework, dtype).

    Examples
    --------
    >>> info = workload_info("vgg16")
    >>> info["hardware"], info["source"]["license"]
    ('NVIDIA V100', 'Apache-2.0')
    """
    path = _resolve(name)
    data = _read_json(path)
    data["path"] = str(path)
    return MappingProxyType(data)


# --------------------------------------------------------------------------- loading


def load_workload(name: str | os.PathLike[str]) -> Workload:
    """Load a workload from the catalog.

    Parameters
    ----------
    name : str or path-like
        A catalog name (case-insensitive; see :func:`list_workloads`) or the
        path of a workload ``.json`` file.

    Returns
    -------
    Workload
        With the per-tensor profile (``layers``) when the entry names a trace.

    Raises
    ------
    UnknownNameError
        If no catalog directory holds a workload of that name.
    InvalidParameterError
        If the JSON file or a trace it refers to is malformed.

    Notes
    -----
    ``update_time`` given as ``{"vector_add_curve": path}`` is derived here,
    not stored: the time of one GPU vector addition of the whole gradient,
    interpolated linearly in the curve at ``gradient_bytes``
    (:func:`vector_add_time`). That a parameter-server update costs one
    vector addition is an assumption (plain SGD, the optimizer's extra work
    and the host-device copies are ignored).

    Examples
    --------
    >>> w = load_workload("vgg16")
    >>> w.name, w.batch_size, round(w.compute_time, 4)
    ('vgg16', 32, 0.1945)
    >>> round(w.update_time * 1e3, 3)  # ms to add a 553 MB gradient on the GPU
    2.009
    """
    path = _resolve(name)
    data = _read_json(path)
    where = path.name
    base = path.parent

    def rel(key: str, value: Any) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise InvalidParameterError(f"{where}: {key}", value, "a file path relative to the JSON file")
        target = (base / value).resolve()
        if not target.is_file():
            raise InvalidParameterError(f"{where}: {key}", value, f"an existing file (looked for {target})")
        return target

    if "compute" not in data:
        raise InvalidParameterError(
            f"{where}: compute", None, "seconds, a unit string or a distribution spec"
        )
    compute = _compute_from_json(f"{where}: compute", data["compute"])
    layers = load_trace(rel("trace", data["trace"])) if data.get("trace") is not None else None
    gradient_bytes = data.get("gradient_bytes")
    if gradient_bytes is not None:
        gradient_bytes = parse_bytes(gradient_bytes, f"{where}: gradient_bytes")

    update = data.get("update_time", 0.0)
    if isinstance(update, Mapping):
        if set(update) != {"vector_add_curve"}:
            raise InvalidParameterError(
                f"{where}: update_time", dict(update), 'seconds, a unit string or {"vector_add_curve": path}'
            )
        size = gradient_bytes
        if size is None:
            if layers is None:
                raise InvalidParameterError(
                    f"{where}: gradient_bytes", None, "a size (needed to derive update_time) or a trace"
                )
            size = math.fsum(layer.gradient_bytes for layer in layers)
        curve = load_vector_add_curve(rel("update_time.vector_add_curve", update["vector_add_curve"]))
        update = float(vector_add_time(size, curve))
    else:
        update = parse_seconds(update, f"{where}: update_time")

    return Workload(
        compute=compute,
        gradient_bytes=gradient_bytes,
        parameter_bytes=data.get("parameter_bytes"),
        batch_size=data.get("batch_size", 1),
        update_time=update,
        layers=layers,
        name=data.get("name", path.stem),
    )


def _compute_from_json(field_name: str, value: Any) -> Any:
    """A number or unit string passes through; ``{"distribution": Name, **params}`` builds one.

    ``params`` are the class's constructor arguments, or ``mean`` and ``scv`` for a class with
    ``from_mean_scv``.
    """
    if not isinstance(value, Mapping):
        return value
    spec = dict(value)
    kind = spec.pop("distribution", None)
    cls = getattr(_distributions, kind, None) if isinstance(kind, str) else None
    if not (isinstance(cls, type) and issubclass(cls, _distributions.Distribution)):
        known = sorted(
            n
            for n, obj in vars(_distributions).items()
            if isinstance(obj, type)
            and issubclass(obj, _distributions.Distribution)
            and not n.startswith("_")
        )
        raise UnknownNameError(f"{field_name}.distribution", kind, known)
    try:
        # {"mean", "scv"} is the natural way to describe a compute time; laws parameterized
        # otherwise (LogNormal: mu, sigma) offer a from_mean_scv constructor for it.
        if set(spec) == {"mean", "scv"} and hasattr(cls, "from_mean_scv"):
            return cls.from_mean_scv(spec["mean"], spec["scv"])
        return cls(**spec)
    except TypeError as exc:
        raise InvalidParameterError(field_name, value, f"parameters accepted by {kind}: {exc}") from None


def _read_lines(path: str | os.PathLike[str]) -> tuple[Path, list[str]]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError("path", os.fspath(path), f"a readable file ({exc.strerror})") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return p, lines


def _number(where: str, text: str, accepted: str, *, minimum: float = 0.0) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidParameterError(where, text, accepted) from None
    if not math.isfinite(value) or value < minimum:
        raise InvalidParameterError(where, text, accepted)
    return value


def _pairs(p: Path, lines: list[str], start: int, names: tuple[str, str], accepted: tuple[str, str]):
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
        first[i] = _number(f"{p.name} line {lineno}: {names[0]}", fields[0], accepted[0])
        second[i] = _number(f"{p.name} line {lineno}: {names[1]}", fields[1], accepted[1])
    return first, second


def load_trace(path: str | os.PathLike[str]) -> tuple[Layer, ...]:
    """Parse a per-tensor backward trace (``.bk.log``) into layers in backward order.

    The format (netx-repo/training-bottleneck): line 1 a comment, line 2 the
    number of batches averaged, line 3 the number of gradient tensors ``L``,
    then ``L`` lines ``gap_us,bytes`` in backward order -- microseconds since
    the previous gradient became ready (the first from the start of the
    backward pass) and the tensor's gradient size in bytes.

    Parameters
    ----------
    path : str or path-like
        The trace file.

    Returns
    -------
    tuple of Layer
        Named ``tensor0``, ``tensor1``, ... in backward order. Each gap
        becomes the layer's ``backward_time`` (seconds): the backward
        computation attributable to that tensor. ``forward_time`` is ``None``
        because the trace does not record the forward pass.

    Raises
    ------
    InvalidParameterError
        Naming the file, line number and field: a missing, negative or
        non-numeric field, or a tensor count that does not match line 3.

    Examples
    --------
    >>> info = workload_info("vgg16")
    >>> layers = load_trace(Path(info["path"]).parent / info["trace"])
    >>> len(layers), layers[1].name, layers[1].gradient_bytes, round(layers[1].backward_time * 1e6, 3)
    (58, 'tensor1', 16384000.0, 41.877)
    """
    p, lines = _read_lines(path)
    if len(lines) < 3:
        raise InvalidParameterError(
            f"{p.name} line {len(lines) + 1}",
            "(end of file)",
            "a comment, the batch count and the tensor count",
        )
    _number(f"{p.name} line 2: batches", lines[1].strip(), "an integer >= 1", minimum=1)
    count_text = lines[2].strip()
    count = _number(f"{p.name} line 3: tensor count", count_text, "an integer >= 1", minimum=1)
    if not count.is_integer():
        raise InvalidParameterError(f"{p.name} line 3: tensor count", count_text, "an integer >= 1")
    count = int(count)
    found = len(lines) - 3
    if found != count:
        raise InvalidParameterError(
            f"{p.name}: tensor count", found, f"{count} gap_us,bytes lines after line 3 (as line 3 says)"
        )
    gaps_us, sizes = _pairs(p, lines, 3, ("gap_us", "bytes"), ("microseconds >= 0", "a number of bytes >= 0"))
    layers = []
    for i, (gap, size) in enumerate(zip(gaps_us, sizes, strict=True)):
        if size <= 0:
            raise InvalidParameterError(
                f"{p.name} line {i + 4}: bytes", lines[i + 3].split(",")[1], "bytes > 0"
            )
        layers.append(Layer(f"tensor{i}", float(size), float(gap) / 1e6))
    return tuple(layers)


# --------------------------------------------------------------------------- vector addition


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
        path = _default_curve_path()
    p, lines = _read_lines(path)
    if len(lines) < 2:
        raise InvalidParameterError(p.name, len(lines), "at least two bytes,seconds lines")
    nbytes, seconds = _pairs(p, lines, 0, ("bytes", "seconds"), ("a number of bytes >= 0", "seconds >= 0"))
    bad = np.flatnonzero(np.diff(nbytes) <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        raise InvalidParameterError(
            f"{p.name} line {k + 1}: bytes", lines[k].split(",")[0], "sizes increasing"
        )
    return nbytes, seconds


def _default_curve_path() -> Path:
    for root in catalog_dirs():
        if (root / _DEFAULT_CURVE).is_file():
            return root / _DEFAULT_CURVE
    raise InvalidParameterError("path", None, f"a curve file (no catalog directory holds {_DEFAULT_CURVE})")


def vector_add_time(nbytes: Any, curve: tuple[np.ndarray, np.ndarray] | None = None) -> float | np.ndarray:
    """Seconds to add two vectors of ``nbytes`` bytes, by linear interpolation in a cost curve.

    Between curve points the time is interpolated linearly (as the trace's
    authors do). Below the smallest size the time is the smallest size's
    (a fixed launch cost); above the largest it is extrapolated linearly from
    the last two points (the curve is linear in the size there).

    Parameters
    ----------
    nbytes : float or array_like
        Vector size(s) in bytes (unit strings are accepted for a scalar).
    curve : (ndarray, ndarray) or None
        ``(bytes, seconds)`` from :func:`load_vector_add_curve`; ``None``
        uses the catalog's V100 curve.

    Returns
    -------
    float or ndarray
        Same shape as ``nbytes``.

    Examples
    --------
    >>> curve = (np.array([0.0, 100.0]), np.array([1.0, 3.0]))
    >>> vector_add_time(25, curve), vector_add_time(200, curve)
    (1.5, 5.0)
    >>> vector_add_time([50, 150], curve)
    array([2., 4.])
    """
    if isinstance(nbytes, str):
        nbytes = parse_bytes(nbytes, "nbytes")
    x = np.asarray(nbytes, dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise InvalidParameterError("nbytes", nbytes, "finite sizes in bytes >= 0")
    xs, ys = (
        load_vector_add_curve()
        if curve is None
        else (np.asarray(curve[0], float), np.asarray(curve[1], float))
    )
    out = np.interp(x, xs, ys)
    above = x > xs[-1]
    if np.any(above):
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        out = np.where(above, ys[-1] + slope * (x - xs[-1]), out)
    return float(out) if out.ndim == 0 else out
