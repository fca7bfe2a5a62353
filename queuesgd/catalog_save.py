"""Writing a workload as catalog files: :func:`save_workload` (the JSON and its trace).

The inverse of :func:`~queuesgd.catalog.load_workload`, in the schema of
``models/workloads/*.json`` (``docs/workloads.md``); ``queuesgd profile
--out`` writes its profiles with it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.catalog_trace import EXACT_HEADER, microseconds
from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import write_text
from queuesgd.sequence_checks import items
from queuesgd.workload import Workload

__all__ = ["check_layer_names", "save_workload"]

#: What a trace's name column holds: what :func:`~queuesgd.catalog.load_trace` reads back as it was written.
_NAMES_ACCEPTED = (
    "tensor names a trace reads back as written: no commas, no line breaks (\\n, \\r, \\x0b, \\x0c, "
    "\\x1c-\\x1e, \\x85, \\u2028, \\u2029), no spaces at either end, UTF-8 text; rename the parameter"
)


#: What ``save_workload``'s ``path`` accepts, for a write the system refuses.
_OUT = "a regular file to write, its name ending in .json"


def check_layer_names(field: str, names: list[str]) -> None:
    """Refuse tensor names a trace would not read back identically, naming the first such name.

    :func:`~queuesgd.catalog.load_trace` splits the file with
    ``str.splitlines`` and each line at commas, and strips each field; a
    name with a comma, a line separator or a space at either end would come
    back as another name (or break the file). :func:`queuesgd.profile`
    checks its parameters' names with this before it runs a step.

    Examples
    --------
    >>> check_layer_names("model", ["fc.weight", "fc.bias"])
    >>> check_layer_names("model", ["fc.weight", "p "])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'p '; accepted: tensor names a trace reads back ...
    >>> check_layer_names("model", "fc.weight")  # a string is no list of names
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'fc.weight'; accepted: a list of tensor names
    """
    for name in items(field, names, "a list of tensor names"):
        try:
            name.encode("utf-8")
            ok = "," not in name and name.splitlines() == [name] and name.strip() == name
        except (UnicodeError, AttributeError):
            ok = False
        if not ok:
            raise InvalidParameterError(field, name, _NAMES_ACCEPTED)


def save_workload(workload: Workload, path: str | os.PathLike[str], *, note: str | None = None) -> Path:
    """Write ``workload`` as catalog files: ``path`` (``X.json``) and, with layers, ``X.bk.log`` beside it.

    The JSON is the schema of ``models/workloads/*.json`` (``docs/workloads.md``);
    :func:`~queuesgd.catalog.load_workload` reads it back to the same numbers. The compute law
    is written as a number (deterministic) or ``{"distribution": Name, ...}``
    with the law's parameters; the layers go to a trace with the columns
    ``gap_us,bytes,forward_us,name`` (see :func:`~queuesgd.catalog.load_trace`).

    Parameters
    ----------
    workload : Workload
    path : str or path-like
        The JSON file, its name ending in ``.json`` (nothing is appended).
        Exactly two files are written, as ``queuesgd profile --out`` writes
        them: ``path``, and with layers the trace ``X.bk.log`` in the same
        directory (``path`` with ``.json`` replaced). Both are checked before
        anything is written (:func:`queuesgd._checks.output_file`): a
        directory, device, FIFO, socket or symbolic link at either, or a
        missing or unwritable directory, is refused; a regular file there
        is replaced.
    note : str or None
        A free-text ``description`` (where the profile came from).

    Returns
    -------
    pathlib.Path
        The JSON file written.

    Raises
    ------
    InvalidParameterError
        ``path`` (naming it) for a path refused above, ``workload`` or ``note``
        of the wrong type, ``workload.layers`` a trace cannot hold.

    Examples
    --------
    >>> import tempfile
    >>> from queuesgd.catalog import load_workload
    >>> from queuesgd.workload import Layer
    >>> layers = [Layer("b", 40, 1e-4, 2e-5), Layer("w", 4000, 3e-4, 6e-5)]
    >>> w = Workload(0.05, None, batch_size=8, layers=layers)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = load_workload(save_workload(w, Path(d) / "mine.json"))
    >>> back.layers == w.layers, back.gradient_bytes, back.compute_time
    (True, 4040.0, 0.05)
    >>> save_workload(w, "mine")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: path: got 'mine'; accepted: a file name ending in .json ...
    """
    if not isinstance(workload, Workload):
        raise InvalidParameterError("workload", workload, "a Workload")
    if note is not None and not isinstance(note, str):
        raise InvalidParameterError("note", note, "None or a str (a free-text description)")
    out = _checks.output_file("path", path, suffix=".json")
    trace = out.with_suffix(".bk.log")
    if workload.layers:
        _checks.output_file("path", str(trace))  # the per-tensor trace written beside it
    law = workload.compute
    if isinstance(law, Deterministic):
        compute: Any = float(law.value)
    else:
        law.check_numeric("save_workload()")
        params = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in law.parameters().items()}
        compute = {"distribution": type(law).__name__, **params}
    data: dict[str, Any] = {
        "name": out.stem,  # the catalog requires the file's stem
        "display_name": workload.name or out.stem,
        "batch_size": workload.batch_size,
        "compute": compute,
        "gradient_bytes": workload.gradient_bytes,
        "parameter_bytes": workload.parameter_bytes,
        "update_time": workload.update_time,
    }
    if note:
        data["description"] = note
    if workload.provenance:
        data["provenance"] = dict(workload.provenance)
    if workload.layers:
        rows = [
            f"{microseconds(layer.backward_time)},{int(layer.gradient_bytes)},"
            f"{'' if layer.forward_time is None else microseconds(layer.forward_time)},{layer.name}"
            for layer in workload.layers
        ]
        check_layer_names("workload.layers", [layer.name for layer in workload.layers])
        bad = [layer.name for layer in workload.layers if not layer.gradient_bytes.is_integer()]
        if bad:
            raise InvalidParameterError("workload.layers", bad[:3], "whole numbers of bytes")
        # Exact decimals: the trace reads back to the same floats (layer * 1e6 / 1e6 need not; issue 22).
        header = [EXACT_HEADER, "1", str(len(rows))]
        write_text("path", trace, "\n".join(header + rows) + "\n")  # what the system refuses: one error
        data["trace"] = trace.name
    return write_text("path", out, json.dumps(data, indent=2) + "\n", accepted=_OUT)
