"""A plain-text log read with a regular expression, in bounded time.

:func:`queuesgd.measured.read_measured` reads a log with ``log_pattern=``
through these: :func:`compile_pattern` checks the pattern (a name in
:data:`LOG_PATTERNS`, or the user's own regular expression) and
:func:`matching_lines` searches the lines with it.

Python's ``re`` has no timeout, and a pattern such as ``(a+)+$`` takes
exponential time on a line of 30 ``a``. So the cost is bounded three ways:

- the ready-made patterns are linear in the line (no quantifiers that can
  match the same text two ways; atomic groups and possessive quantifiers
  where a retry could only fail again);
- a user's pattern with a quantified group that holds another quantifier
  (``(a+)+``, ``(?:\\w*,)*``) is refused before anything is read (an
  inner possessive quantifier, ``(a++)+``, or an atomic group is accepted);
- a user's pattern is tried on lines of at most
  :data:`~queuesgd.measured.MAX_PATTERN_LINE` characters (longer ones are
  skipped, with a note), in a separate process that is killed, with its
  process group, after :data:`~queuesgd.measured.PATTERN_SECONDS` seconds
  per file (an error that says so).

Examples
--------
>>> pattern, builtin = compile_pattern("step-time")
>>> rows, long, lines = matching_lines("step 3 | step_time 250ms\\nckpt\\n", pattern, builtin, 100, 10, 1.0)
>>> rows, long, lines
([(1, [None, '3', '250ms'])], 0, 2)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.measured_cells import short_value
from queuesgd.measured_columns import MEASURE_COLUMNS

__all__ = ["LOG_PATTERNS", "compile_pattern", "matching_lines", "nested_quantifier"]

# a number: digits with optional thousands groups (read, then refused by the cell: "1,250ms"), a fraction
# and an exponent; no two parts can match the same digits, so a failed match gives them back in linear time
_NUMBER_TEXT = r"(?:[0-9]++(?:,[0-9]{3})*+(?:\.[0-9]*+)?|\.[0-9]++)(?:[eE][+-]?[0-9]++)?"
# a bare number ends cleanly: not in a clock (12:30), a date (2024-01), a word, a decimal comma (1,5) or a
# rate (250 it/s), and is not followed by minutes, hours or days
_BARE_END = (
    r"(?![0-9A-Za-z_.:/-]|,[0-9])"
    r"(?!\s*+(?:m|mins?|minutes?|h|hrs?|hours?|d|days?|secs?|seconds?)\b|\s*+[A-Za-z]++/)"
)
_KEY_END = r"\b\s*+(?:[:=]\s*+)?"

#: Ready-made ``log_pattern=`` names. ``"step-time"`` reads lines such as a training script prints
#: under torchrun: ``[rank0]: step 120 | loss 2.31 | step_time 251.3ms`` (also ``time=0.25s``,
#: ``dt: 250 ms``, an optional ``[rankN]:``/``[defaultN]:`` prefix; a bare number is seconds, or
#: ``time_unit=``). The first ``step N`` of a line is its step; its time is the value of the key
#: ``step_time`` (or ``step time``) where the line has one, else of the first ``time`` or ``dt``
#: not preceded by another word (``elapsed time`` is not a step's time).
LOG_PATTERNS = {
    "step-time": (
        r"^(?>(?:\[(?:rank|default)(?P<rank>[0-9]++)\]:?)?.*?\bstep\b\s*+(?:[:=#]\s*+)?(?P<step>[0-9]++)\b)"
        r"(?:(?=.*\bstep[_ ]time\b).*?\bstep[_ ]time"
        r"|(?!.*\bstep[_ ]time\b).*?(?<![A-Za-z_]\s)\b(?:time|dt))"
        rf"{_KEY_END}(?P<step_time>{_NUMBER_TEXT}(?:\s*+(?:ms|us|µs|ns|s)(?![A-Za-z0-9])|{_BARE_END}))"
    ),
}

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")


def nested_quantifier(pattern: str) -> str | None:
    """The first quantified group of ``pattern`` that holds another quantifier, or None.

    A quantifier counts when it may repeat more than once with a choice of
    how often (``+``, ``*``, ``{2,5}``; not ``?`` or ``{3}``); a possessive
    quantifier or an atomic group never gives text back, so it neither
    counts nor nests.

    Examples
    --------
    >>> nested_quantifier("(?P<step_time>(a+)+)$"), nested_quantifier(r"took (?P<step_time>[0-9.]+s)")
    ('a quantified group that holds another quantifier', None)
    >>> nested_quantifier(r"(?:,[0-9]{3})*"), nested_quantifier(r"(a++)+")
    (None, None)
    """
    from re import _constants as c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]

    repeats = {getattr(c, n) for n in _REPEATS}

    def walk(items: Any, inside: bool) -> str | None:
        for op, av in items:
            subs: list[tuple[Any, bool]] = []
            if op in repeats:
                low, high, sub = av
                chooses = high != low and (high > 1 or high == c.MAXREPEAT)
                if chooses and inside:
                    return "a quantified group that holds another quantifier"
                subs = [(sub, inside or chooses)]
            elif op == getattr(c, "POSSESSIVE_REPEAT", None) or op == getattr(c, "ATOMIC_GROUP", None):
                subs = [(av[2] if op == c.POSSESSIVE_REPEAT else av, False)]
            elif op == c.SUBPATTERN:
                subs = [(av[-1], inside)]
            elif op == c.BRANCH:
                subs = [(b, inside) for b in av[1]]
            elif op in (c.ASSERT, c.ASSERT_NOT):
                subs = [(av[1], inside)]
            elif op == c.GROUPREF_EXISTS:
                subs = [(b, inside) for b in av[1:] if b is not None]
            for sub, flag in subs:
                found = walk(sub, flag)
                if found:
                    return found
        return None

    return walk(_parser.parse(pattern), False)


def compile_pattern(log_pattern: Any) -> tuple[re.Pattern[str], bool]:
    """``(pattern, builtin)``: ``log_pattern`` compiled and checked (``builtin``: a name of LOG_PATTERNS).

    Raises
    ------
    InvalidParameterError
        Not a string, longer than 2000 characters, not a regular
        expression, without a named group of a measurement, or with a
        quantified group that holds another quantifier.
    """
    accepted = (
        "a regular expression with named groups such as (?P<step_time>...), "
        f"or one of {', '.join(LOG_PATTERNS)}"
    )
    if not isinstance(log_pattern, str) or not log_pattern.strip() or len(log_pattern) > 2000:
        raise InvalidParameterError("log_pattern", short_value(log_pattern), accepted)
    builtin = log_pattern in LOG_PATTERNS
    try:
        pattern = re.compile(LOG_PATTERNS.get(log_pattern, log_pattern))
        nested = None if builtin else nested_quantifier(log_pattern)
    except (re.error, OverflowError, RecursionError) as err:
        raise InvalidParameterError("log_pattern", short_value(log_pattern), f"{accepted} ({err})") from None
    if not set(pattern.groupindex) & set(MEASURE_COLUMNS):
        raise InvalidParameterError(
            "log_pattern",
            short_value(log_pattern),
            f"{accepted}, one of them a measurement ({', '.join(MEASURE_COLUMNS)}; the columns= mapping "
            "does not apply to a pattern's groups: name them so)",
        )
    if nested:
        raise InvalidParameterError(
            "log_pattern",
            short_value(log_pattern),
            f"a pattern without {nested}, such as (a+)+ (it can take exponential time; write a+, or make "
            "the inner quantifier possessive: (a++)+)",
        )
    return pattern, builtin


def _search(text: str, pattern: str, max_line: int, max_rows: int) -> dict[str, Any]:
    """The lines ``pattern`` matches (at most ``max_rows + 1``): what the separate process returns."""
    compiled = re.compile(pattern)
    names = list(compiled.groupindex)
    rows: list[Any] = []
    lines = text.splitlines()
    long = 0
    for n, line in enumerate(lines, start=1):
        if len(line) > max_line:
            long += 1
            continue
        m = compiled.search(line)
        if m is not None:
            rows.append((n, [m.group(g) for g in names]))
            if len(rows) > max_rows:
                break
    return {"rows": rows, "long": long, "lines": len(lines)}


# the separate process: standard library only, isolated (-I) and without site (-S)
_CHILD = (
    "import json, re, sys\n"
    "a = json.loads(sys.stdin.buffer.read().decode('utf-8'))\n"
    "c = re.compile(a['pattern']); names = list(c.groupindex); rows = []; lines = a['text'].splitlines()\n"
    "long = 0\n"
    "for n, line in enumerate(lines, start=1):\n"
    "    if len(line) > a['max_line']:\n"
    "        long += 1; continue\n"
    "    m = c.search(line)\n"
    "    if m is not None:\n"
    "        rows.append((n, [m.group(g) for g in names]))\n"
    "        if len(rows) > a['max_rows']: break\n"
    "sys.stdout.write(json.dumps({'rows': rows, 'long': long, 'lines': len(lines)}))\n"
)


def _search_in_process(text: str, pattern: str, max_line: int, max_rows: int, seconds: float) -> Any:
    """:func:`_search` in a separate Python process, killed (with its process group) after ``seconds``."""
    payload = json.dumps({"pattern": pattern, "text": text, "max_line": max_line, "max_rows": max_rows})
    posix = os.name == "posix"
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=posix,
    )
    try:
        out, err = proc.communicate(payload.encode("utf-8"), timeout=seconds)
    except subprocess.TimeoutExpired:
        if posix:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # already gone
                pass
        proc.kill()
        proc.communicate()
        raise InvalidParameterError(
            "log_pattern",
            short_value(pattern),
            f"a pattern that searches the log within {seconds:g} s (it was stopped: a pattern whose "
            "quantifiers can match the same text many ways, such as .*.*x or \\d+\\d+x, takes polynomial "
            "time; anchor it on fixed text, or use possessive quantifiers such as \\d++)",
        ) from None
    finally:
        if proc.poll() is None:  # an interrupt while waiting: leave nothing behind
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"status {proc.returncode}"]
        raise InvalidParameterError(
            "log_pattern", short_value(pattern), f"a pattern that searches the log ({last[0][:200]})"
        )
    return json.loads(out.decode("utf-8"))


def matching_lines(
    text: str, pattern: re.Pattern[str], builtin: bool, max_line: int, max_rows: int, seconds: float
) -> tuple[list[tuple[int, list[Any]]], int, int]:
    """``(rows, long, lines)``: ``(line number, the named groups' texts)`` of each matching line.

    A ready-made pattern (``builtin``) runs here; a user's runs in a
    separate process stopped after ``seconds``. Lines longer than
    ``max_line`` are skipped (``long`` of them); at most ``max_rows + 1``
    rows are returned (the caller refuses more than ``max_rows``).
    """
    if builtin or not sys.executable:
        found = _search(text, pattern.pattern, max_line, max_rows)
    else:
        found = _search_in_process(text, pattern.pattern, max_line, max_rows, seconds)
    return [(int(n), list(g)) for n, g in found["rows"]], int(found["long"]), int(found["lines"])
