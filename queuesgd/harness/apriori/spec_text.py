"""A spec's text: its JSON document read from bytes, its canonical JSON, and its hash.

The one place where a spec file's bytes become a document
(:func:`spec_document`: UTF-8, a key twice in one object refused, no ``NaN``)
and where a document becomes the hash that every row of its campaign
records (:func:`spec_hash`, the sha256 of :func:`canonical_json`).
:func:`~queuesgd.harness.apriori.spec.load_spec` reads a spec through them,
and :mod:`queuesgd.harness.preregistration` hashes a spec's committed
versions through them, so that both hash a file alike.

Examples
--------
>>> doc = spec_document(b'{"steps": 60, "name": "demo"}', "demo.json")
>>> canonical_json(doc)
'{"name":"demo","steps":60}'
>>> spec_hash(doc) == spec_hash(spec_document(b'{"name":"demo",\\n "steps":60}', "other.json"))
True
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from queuesgd import json_text
from queuesgd.catalog_files import DuplicateKeyError, unique_keys
from queuesgd.errors import InvalidParameterError

__all__ = ["canonical_json", "spec_document", "spec_hash"]


def canonical_json(document: Any) -> str:
    """The canonical JSON of a document: keys sorted, no spaces, UTF-8 kept (what :func:`spec_hash`
    hashes).

    Examples
    --------
    >>> canonical_json({"b": [1, 2.5], "a": "é"})
    '{"a":"é","b":[1,2.5]}'
    """
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def spec_hash(document: Any) -> str:
    """The hash of a spec document: the sha256 (hex) of its :func:`canonical_json`, as
    :attr:`~queuesgd.harness.apriori.spec.CampaignSpec.hash` and every row of its campaign record it.

    Examples
    --------
    >>> spec_hash({"name": "demo"})
    'd7d234f759ec34fd6298b7e32318614760070aaef9f4e92ced928324b49a0602'
    """
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def spec_document(raw: bytes, where: str) -> Any:
    """The JSON document of a spec file's bytes (UTF-8, a BOM allowed).

    Parameters
    ----------
    raw : bytes
        The file's bytes.
    where : str
        The file, as errors name it.

    Raises
    ------
    InvalidParameterError
        Naming ``spec`` and the file: not UTF-8, not JSON (with the line and
        column), a key twice in one object (JSON would keep the last value),
        ``NaN`` or an infinity, or nested too deeply.

    Examples
    --------
    >>> spec_document(b'{"a": 1, "a": 2}', "twice.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec: got "the key 'a' twice in one object of twice.json"; ...
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidParameterError(
            "spec", where, f"a UTF-8 JSON file ({err.reason} at byte {err.start})"
        ) from None
    try:
        return json_text.loads(text, finite=True, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as err:
        raise InvalidParameterError(
            "spec", where, f"a JSON object ({err.msg} at line {err.lineno}, column {err.colno})"
        ) from None
    except DuplicateKeyError as err:  # json keeps the last value: a field written twice is refused
        raise InvalidParameterError(
            "spec", f"the key {err.got!r} twice in one object of {where}", "each key once in an object"
        ) from None
    except RecursionError:
        raise InvalidParameterError("spec", where, "a JSON object (it is nested too deeply)") from None
