"""The harness's measured records kept as JSON files: one document written, and read back or refused.

:func:`save_fields` and :func:`load_fields` are the ``save`` and ``load`` of
the records whose file is their dataclass's fields
(:class:`~queuesgd.harness.apriori.Calibration`,
:class:`~queuesgd.harness.apriori_parallel.ExchangeCalibration`,
:class:`~queuesgd.harness.pipelining.StageProfile`), each field's own
conversion given as a hook; :func:`write_json` and :func:`read_json` are
their two ends, for a record whose document is built by hand
(:class:`~queuesgd.harness.apriori.Profile`; a campaign's registered spec,
summary, stored predictions, drift, probes and FSDP's own-step profile).
Every file is
``json.dumps(doc, indent=1)`` and a newline; a file that cannot be read back
is refused with an :class:`~queuesgd.errors.InvalidParameterError` naming
the file and the kind of failure.

Examples
--------
>>> import tempfile
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Fit:
...     sizes: tuple
...     rate: float = 1.0
>>> with tempfile.TemporaryDirectory() as d:
...     path = save_fields(Fit((1, 2)), Path(d) / "fit.json", {"note": "derived"})
...     print(path.read_text(), end="")
...     load_fields(Fit, path, "fit", "a fit", {"sizes": tuple}, ignore=("note",))
{
 "sizes": [
  1,
  2
 ],
 "rate": 1.0,
 "note": "derived"
}
Fit(sizes=(1, 2), rate=1.0)
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import make_folder, write_text

__all__ = ["load_fields", "read_json", "save_fields", "write_json"]

T = TypeVar("T")


def _plain(value: Any) -> Any:
    """What :func:`json.dumps` writes for a value it does not know: a mapping as its dict."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def write_json(
    path: str | os.PathLike[str], doc: Mapping[str, Any] | Sequence[Any], *, field: str = "path"
) -> Path:
    """Write ``doc`` at ``path`` (its folder made) as ``json.dumps(doc, indent=1)`` and a newline.

    What the system refuses (the folder or the file) is one error naming ``field`` and the path
    (:mod:`queuesgd.file_writes`).

    ``doc`` is a JSON object or a list (e.g. a campaign's stored predictions). Tuples are written as
    lists and any mapping as a JSON object, in its order; NumPy numbers and non-finite floats are the
    caller's to convert (:func:`queuesgd.harness.report.jsonable`).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_json(Path(d) / "a" / "b.json", {"x": (1,)}).read_text()
    '{\\n "x": [\\n  1\\n ]\\n}\\n'
    """
    path = Path(path)
    make_folder(field, path.parent)
    return write_text(field, path, json.dumps(doc, indent=1, default=_plain) + "\n")


def read_json(
    path: str | os.PathLike[str],
    build: Callable[[Any], T],
    field: str,
    expected: str,
    *,
    document: type = dict,
) -> T:
    """``build`` of the JSON document at ``path``; refused if it is no ``document`` or ``build`` refuses it.

    Parameters
    ----------
    path : str or path-like
    build : callable
        The record from the document (a dict, or a list, it may change).
    field, expected : str
        The :class:`~queuesgd.errors.InvalidParameterError` raised when the
        file cannot be read (missing, truncated, not JSON), is not a
        ``document``, or ``build`` raises ``ValueError``, ``KeyError`` or
        ``TypeError``: ``field``, the path, and ``expected`` followed by the
        failure's name in parentheses.
    document : {dict, list}
        The JSON document the file must hold: an object (the default) or a list.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.TemporaryDirectory()
    >>> path = write_json(Path(d.name) / "x.json", {"a": 1})
    >>> read_json(path, lambda doc: doc["a"] + 1, "x", "an x")
    2
    >>> read_json(path, lambda doc: doc["b"], "x", "an x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: x: got '.../x.json'; accepted: an x (KeyError)
    >>> _ = (Path(d.name) / "cut.json").write_text('[{"a": 1}, {"a"')     # a file cut short
    >>> read_json(Path(d.name) / "cut.json", list, "x", "a list of x", document=list)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: x: got '.../cut.json'; accepted: a list of x (JSONDecodeError)
    >>> d.cleanup()
    """
    if document not in (dict, list):
        raise InvalidParameterError("document", document, "dict or list")
    try:
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, document):
            kind = "an object" if document is dict else "a list"
            raise TypeError(f"a JSON {kind}, not {type(doc).__name__}")
        return build(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidParameterError(field, str(path), f"{expected} ({type(exc).__name__})") from None


def save_fields(record: Any, path: str | os.PathLike[str], override: Mapping[str, Any] | None = None) -> Path:
    """Write a dataclass ``record``'s fields, in their order, with :func:`write_json`.

    ``override`` replaces the values of fields it names (in place) and adds
    the keys that are not fields after them (values derived for readers).

    Examples
    --------
    >>> import tempfile
    >>> Link = dataclasses.make_dataclass("Link", ["rate", "name"])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = save_fields(Link(float("inf"), "lo"), Path(d) / "l.json", {"rate": None, "n": 2})
    ...     json.loads(path.read_text())
    {'rate': None, 'name': 'lo', 'n': 2}
    """
    doc = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    return write_json(path, {**doc, **(override or {})})


def load_fields(
    cls: type[T],
    path: str | os.PathLike[str],
    field: str,
    expected: str,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    *,
    ignore: Iterable[str] = (),
) -> T:
    """Read back a dataclass written by :func:`save_fields`: ``cls(**doc)``, through :func:`read_json`.

    ``ignore`` names keys of the document that are not fields (dropped);
    ``convert`` maps a field to the function its stored value goes through.
    A field with a default that an older file lacks takes the default
    unconverted; a field without one that the file lacks is refused
    (``KeyError``), as is a key that is no field (``TypeError``).

    Examples
    --------
    >>> import tempfile
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Link:
    ...     rate: float
    ...     mode: str = "idle"
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_json(Path(d) / "l.json", {"rate": None})
    ...     load_fields(Link, Path(d) / "l.json", "link", "a link", {"rate": lambda r: r or float("inf")})
    Link(rate=inf, mode='idle')
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    missing = dataclasses.MISSING
    required = {f.name for f in fields if f.default is missing and f.default_factory is missing}

    def build(doc: dict[str, Any]) -> T:
        for key in ignore:
            doc.pop(key, None)
        for key, how in (convert or {}).items():
            if key in doc or key in required:
                doc[key] = how(doc[key])
        return cls(**doc)

    return read_json(path, build, field, expected)
