"""Short text specifications shared by the command line and the live harness.

- :func:`parse_value`: ``"3"`` -> 3, ``"0.5"`` -> 0.5, anything else stays a
  string (units are parsed later by whoever takes the value);
- :func:`parse_params`: ``["backups=1", "cutoff=30ms"]`` -> a dict;
- :func:`compute_law`: ``"lognormal:0.3"`` -> the law with a given mean;
- :func:`random_delay`: ``"2:320ms"`` -> :class:`~queuesgd.RandomDelay` (``K:DELAY``, the one
  random-delay syntax of ``predict``, ``sweep``, ``validate`` and the torchrun entry point).

Examples
--------
>>> parse_params(["backups=1", "cutoff=30ms"])
{'backups': 1, 'cutoff': '30ms'}
>>> compute_law("erlang:4", 0.2)
Erlang(k=4, rate=20.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from queuesgd.errors import InvalidParameterError, QueuesgdError

__all__ = [
    "COMPUTE_LAWS",
    "NUMBER",
    "RANDOM_DELAY",
    "compute_law",
    "parse_params",
    "parse_value",
    "random_delay",
]

#: A plain number (no unit).
NUMBER = re.compile(r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$")

#: The compute-law specs :func:`compute_law` accepts.
COMPUTE_LAWS = "deterministic, exponential, erlang:K, lognormal:SCV, gamma:SCV, normal:CV"

#: The random-delay form :func:`random_delay` accepts (what its errors show).
RANDOM_DELAY = "K:DELAY, e.g. 2:320ms (K random workers sleep DELAY every step)"


def parse_value(text: str) -> Any:
    """An int, a float, or the string itself (a unit string is parsed later by its taker).

    Examples
    --------
    >>> parse_value("3"), parse_value("2.5e-3"), parse_value("50ms")
    (3, 0.0025, '50ms')
    >>> parse_value("\u0663")  # only ASCII digits make a number
    '\u0663'
    >>> parse_value("inf"), parse_value("1e400"), parse_value("1e-400")
    (inf, '1e400', '1e-400')

    """
    if re.fullmatch(r"[+-]?[0-9]+", text):
        try:
            return int(text)
        except ValueError:  # past Python's 4,300 digits: the taker refuses the text, naming its field
            return text
    if NUMBER.match(text):
        value = float(text)
        if math.isinf(value) or (value == 0 and re.search(r"[1-9]", text.lower().partition("e")[0])):
            return text  # 1e400, 1e-400: a number past the float range is not inf or 0; its taker refuses it
        return value
    if text.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf  # spelled out: --staleness inf (asynchronous)
    return text


def parse_params(items: Iterable[str], field: str = "--param") -> dict[str, Any]:
    """``NAME=VALUE`` items to a dict (values by :func:`parse_value`); each name once.

    Examples
    --------
    >>> parse_params(["backups"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --param: got 'backups'; accepted: NAME=VALUE, e.g. backups=1 ...
    >>> parse_params(["backups=1", "backups=0"])
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --param: got 'backups'; accepted: each scheme parameter once
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidParameterError(field, item, "NAME=VALUE, e.g. backups=1 or cutoff=30ms")
        if name.strip() in out:  # the last would win, silently
            raise InvalidParameterError(field, name.strip(), "each scheme parameter once")
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
    if arg and not NUMBER.match(arg):  # float() reads "\uff13", "1_0" and "inf" too: a number is ASCII
        raise InvalidParameterError(field, text, f"{COMPUTE_LAWS} (K, SCV, CV: numbers in the digits 0-9)")
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


def random_delay(text: str, field: str = "--random-delay") -> Any:
    """``"K:DELAY"`` to :class:`~queuesgd.RandomDelay` (``K`` random workers sleep ``DELAY`` each step).

    The count comes first, as in ``RandomDelay(count, delay)``; ``DELAY`` takes a unit
    (``320ms``) or is seconds. Any other form -- the harness's former ``delay:K:D`` too --
    is one error that shows this form.

    Examples
    --------
    >>> random_delay("2:320ms")
    RandomDelay(count=2, delay=0.32)
    >>> random_delay("delay:1:10ms")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --random-delay: got 'delay:1:10ms'; accepted: K:DELAY, e.g. ...
    """
    from queuesgd import units
    from queuesgd.workload import RandomDelay

    count, sep, delay = str(text).partition(":")
    if not sep or not re.fullmatch(r"\s*[0-9]+\s*", count) or int(count) < 1 or not delay.strip():
        raise InvalidParameterError(field, text, RANDOM_DELAY)
    try:
        seconds = units.parse_seconds(delay.strip(), field)
    except InvalidParameterError:
        raise InvalidParameterError(field, text, RANDOM_DELAY) from None
    return RandomDelay(int(count), seconds)
