"""Short text specifications shared by the command line and the live harness.

- :func:`parse_value`: ``"3"`` -> 3, ``"0.5"`` -> 0.5, anything else stays a
  string (units are parsed later by whoever takes the value);
- :func:`parse_params`: ``["backups=1", "cutoff=30ms"]`` -> a dict;
- :func:`compute_law`: ``"lognormal:0.3"`` -> the law with a given mean.

Examples
--------
>>> parse_params(["backups=1", "cutoff=30ms"])
{'backups': 1, 'cutoff': '30ms'}
>>> compute_law("erlang:4", 0.2)
Erlang(k=4, rate=20.0)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from queuesgd.errors import InvalidParameterError, QueuesgdError

__all__ = ["COMPUTE_LAWS", "NUMBER", "compute_law", "parse_params", "parse_value"]

#: A plain number (no unit).
NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")

#: The compute-law specs :func:`compute_law` accepts.
COMPUTE_LAWS = "deterministic, exponential, erlang:K, lognormal:SCV, gamma:SCV, normal:CV"


def parse_value(text: str) -> Any:
    """An int, a float, or the string itself (a unit string is parsed later by its taker).

    Examples
    --------
    >>> parse_value("3"), parse_value("2.5e-3"), parse_value("50ms")
    (3, 0.0025, '50ms')
    """
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if NUMBER.match(text):
        return float(text)
    return text


def parse_params(items: Iterable[str], field: str = "--param") -> dict[str, Any]:
    """``NAME=VALUE`` items to a dict (values by :func:`parse_value`).

    Examples
    --------
    >>> parse_params(["backups"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --param: got 'backups'; accepted: NAME=VALUE, e.g. backups=1 ...
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidParameterError(field, item, "NAME=VALUE, e.g. backups=1 or cutoff=30ms")
        out[name.strip()] = parse_value(value.strip())
    return out


def compute_law(text: str, mean: float, field: str = "--compute") -> Any:
    """The compute-time law named by ``text`` (one of :data:`COMPUTE_LAWS`), with mean ``mean``.

    Examples
    --------
    >>> law = compute_law("lognormal:0.3", 0.02)
    >>> round(law.mean, 9), round(law.scv, 9)
    (0.02, 0.3)
    >>> compute_law("weibull:2", 0.02)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --compute: got 'weibull:2'; accepted: deterministic, ...
    """
    from queuesgd import distributions as d

    kind, _, arg = text.partition(":")
    try:
        if kind == "deterministic" and not arg:
            return d.Deterministic(mean)
        if kind == "exponential" and not arg:
            return d.Exponential(mean=mean)
        if kind == "erlang" and arg:
            return d.Erlang(int(arg), mean=mean)
        if kind == "lognormal" and arg:
            return d.LogNormal.from_mean_scv(mean, float(arg))
        if kind == "gamma" and arg:
            return d.Gamma.from_mean_scv(mean, float(arg))
        if kind == "normal" and arg:
            return d.Normal(mean, float(arg) * mean)
    except ValueError as err:
        if isinstance(err, QueuesgdError):
            raise InvalidParameterError(field, text, f"{COMPUTE_LAWS} ({err})") from None
        raise InvalidParameterError(field, text, COMPUTE_LAWS) from None
    raise InvalidParameterError(field, text, COMPUTE_LAWS)
