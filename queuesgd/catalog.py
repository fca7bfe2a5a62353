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

Where each piece lives (every name below is importable from here): this
module finds and loads workloads; :mod:`queuesgd.catalog_trace` reads a
per-tensor trace (:func:`load_trace`), :mod:`queuesgd.catalog_save` writes
a workload as catalog files (:func:`save_workload`), and
:mod:`queuesgd.catalog_files` locates the catalog and reads its plain-text
files.

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

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import distributions as _distributions
from queuesgd._checks import json_record
from queuesgd.catalog_files import (
    ENV_VAR,
    catalog_dirs,
    load_vector_add_curve,
    read_json,
)
from queuesgd.catalog_save import save_workload
from queuesgd.catalog_trace import load_trace
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.units import parse_bytes, parse_seconds
from queuesgd.workload import CostCurve, Layer, Workload

__all__ = [
    "ENV_VAR",
    "catalog_dirs",
    "list_workloads",
    "load_workload",
    "save_workload",
    "workload_info",
    "load_trace",
    "load_vector_add_curve",
    "vector_add_time",
]

# --------------------------------------------------------------------------- locating
# (where the catalog lives, ENV_VAR and the plain-text readers: queuesgd.catalog_files)


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


#: The fields of a workload file that make the Workload (``models/README.md``, "Workload file format").
MODEL_FIELDS = frozenset(
    {
        "name",
        "compute",
        "batch_size",
        "gradient_bytes",
        "parameter_bytes",
        "trace",
        "update_time",
        "add_cost",
        "forward_time",
    }
)
#: Descriptive fields kept as they are (``workload_info``); any key ending in ``_note`` is one too.
METADATA_FIELDS = frozenset(
    {"display_name", "description", "source", "framework", "hardware", "dtype", "note", "notes", "provenance"}
)


def _check_keys(where: str, data: Mapping[str, Any]) -> None:
    """Refuse a key that is neither a model field nor metadata (a typo such as ``"comptue"``)."""
    import difflib

    known = sorted(MODEL_FIELDS | METADATA_FIELDS)
    for key in data:
        if key in MODEL_FIELDS or key in METADATA_FIELDS or (isinstance(key, str) and key.endswith("_note")):
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidParameterError(
            f"{where}: {key}", data[key], f"a known field{hint}: {', '.join(known)}, or a key ending in _note"
        )


def _read_json(path: Path) -> dict[str, Any]:
    data = read_json(path)  # bounded: a regular UTF-8 file, its size and its nesting depth
    if not isinstance(data, dict):
        raise InvalidParameterError(path.name, type(data).__name__, "a JSON object")
    _check_keys(path.name, data)
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
    and the host-device copies are ignored). The curve also becomes the
    workload's ``add_cost`` (the reduction cost of an all-reduce), unless an
    ``"add_cost": {"vector_add_curve": path}`` field names another one.

    ``"forward_time": {"<tensor name>": seconds, ...}`` sets the forward time
    of every tensor of the trace by name (all of them, or it is an error).

    Examples
    --------
    >>> w = load_workload("vgg16")
    >>> w.name, w.batch_size, round(w.compute_time, 4)
    ('vgg16', 32, 0.1945)
    >>> round(w.update_time * 1e3, 3)  # ms to add a 553 MB gradient on the GPU
    2.009
    >>> w.add_cost  # the same V100 vector-add curve, for all-reduce reductions
    CostCurve(<25 points: 40 B to 6.71089e+08 B, 1.04448e-05 s to 0.00243368 s>)
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

    def linked(key: str, value: Any, read: Any, what: str) -> Any:
        # The JSON may point anywhere (a downloaded file at ~/.ssh/id_rsa): an error names the path
        # given, the line and field that failed and what was expected, never the file's content.
        target = rel(key, value)
        try:
            return read(target)
        except InvalidParameterError as err:
            raise InvalidParameterError(
                f"{where}: {key}", value, f"{what} ({err.field}: expected {err.accepted})"
            ) from None

    if "compute" not in data:
        raise InvalidParameterError(
            f"{where}: compute", None, "seconds, a unit string or a distribution spec"
        )
    compute = _compute_from_json(f"{where}: compute", data["compute"])
    layers = None
    if data.get("trace") is not None:
        layers = linked("trace", data["trace"], load_trace, "a per-tensor trace file (gap_us,bytes lines)")
    gradient_bytes = data.get("gradient_bytes")
    if gradient_bytes is not None:
        gradient_bytes = parse_bytes(gradient_bytes, f"{where}: gradient_bytes")

    if data.get("forward_time") is not None:
        layers = _with_forward_times(where, data["forward_time"], layers)

    add_cost = None
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
        add_cost = linked(
            "update_time.vector_add_curve", update["vector_add_curve"], CostCurve.from_file, _CURVE_FILE
        )
        update = float(add_cost(size))
    else:
        update = parse_seconds(update, f"{where}: update_time")

    spec = data.get("add_cost")
    if spec is not None:
        if not isinstance(spec, Mapping) or set(spec) != {"vector_add_curve"}:
            raise InvalidParameterError(f"{where}: add_cost", spec, '{"vector_add_curve": path}')
        add_cost = linked(
            "add_cost.vector_add_curve", spec["vector_add_curve"], CostCurve.from_file, _CURVE_FILE
        )

    provenance = data.get("provenance")
    if provenance is not None:
        provenance = json_record(f"{where}: provenance", provenance)
    return Workload(
        compute=compute,
        gradient_bytes=gradient_bytes,
        parameter_bytes=data.get("parameter_bytes"),
        batch_size=data.get("batch_size", 1),
        update_time=update,
        layers=layers,
        name=data.get("name", path.stem),
        add_cost=add_cost,
        provenance=provenance,
    )


class _More:
    """Stands for the names left out of a long list in an error message."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __repr__(self) -> str:
        return f"... ({self.count} more)"


def _some(names: list[str], limit: int = 8) -> list[Any]:
    return names if len(names) <= limit else [*names[:limit], _More(len(names) - limit)]


def _with_forward_times(where: str, spec: Any, layers: tuple[Layer, ...] | None) -> tuple[Layer, ...]:
    """Set each trace layer's forward time from ``{"<tensor name>": seconds or unit string}``."""
    field_name = f"{where}: forward_time"
    accepted = '{"<tensor name>": seconds or a unit string, ...} covering every tensor of the trace'
    if layers is None:
        raise InvalidParameterError(field_name, spec, "a trace to attach forward times to (give trace too)")
    if not isinstance(spec, Mapping):
        raise InvalidParameterError(field_name, spec, accepted)
    if any(layer.forward_time is not None for layer in layers):
        raise InvalidParameterError(
            field_name,
            "(also in the trace)",
            "forward times in the trace (forward_us column) or here, not both",
        )
    names = [layer.name for layer in layers]
    known = set(names)
    seconds = {}
    for key, value in spec.items():
        if key not in known:
            raise UnknownNameError(field_name, key, _some(names))
        seconds[key] = parse_seconds(value, f"{field_name}.{key}")
    missing = [n for n in names if n not in seconds]
    if missing:
        raise InvalidParameterError(
            field_name,
            f"{len(seconds)} of {len(names)} tensors",
            "a forward time for every tensor of the trace; missing "
            + ", ".join(repr(n) for n in _some(missing, 5)),
        )
    return tuple(dataclasses.replace(layer, forward_time=seconds[layer.name]) for layer in layers)


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


#: What a workload JSON's ``vector_add_curve`` must point at (for messages).
_CURVE_FILE = "a vector-add curve file (bytes,seconds lines)"


# --------------------------------------------------------------------------- vector addition


def vector_add_time(nbytes: Any, curve: CostCurve | tuple[Any, Any] | None = None) -> float | np.ndarray:
    """Seconds to add two vectors of ``nbytes`` bytes, by linear interpolation in a cost curve.

    Between curve points the time is interpolated linearly (as the trace's
    authors do). Below the smallest size the time is the smallest size's
    (a fixed launch cost); above the largest it is extrapolated linearly from
    the last two points (the curve is linear in the size there). The
    interpolation is :class:`~queuesgd.workload.CostCurve`'s.

    Parameters
    ----------
    nbytes : float or array_like
        Vector size(s) in bytes (unit strings are accepted for a scalar).
    curve : CostCurve, (array_like, array_like) or None
        A :class:`~queuesgd.workload.CostCurve` or ``(bytes, seconds)`` from
        :func:`load_vector_add_curve`; ``None`` uses the catalog's V100 curve.

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
    >>> vector_add_time(671088640)  # the V100 curve's last point
    0.00243368
    """
    if curve is None:
        curve = CostCurve.from_file()
    elif not isinstance(curve, CostCurve):
        if isinstance(curve, (str, bytes)) or not isinstance(curve, (tuple, list)) or len(curve) != 2:
            raise InvalidParameterError("curve", curve, "a CostCurve, a (bytes, seconds) pair or None")
        curve = CostCurve(curve[0], curve[1])
    return curve(nbytes)
