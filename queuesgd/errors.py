"""Exceptions raised by queuesgd.

Every error a user can cause is a subclass of :class:`QueuesgdError` and of
``ValueError`` or ``TypeError``, and its message names the offending field and
says what would be accepted.

Examples
--------
>>> from queuesgd.errors import InvalidParameterError
>>> err = InvalidParameterError("population", -1, "an integer >= 1")
>>> print(err)
population: got -1; accepted: an integer >= 1
>>> isinstance(err, ValueError)
True
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

__all__ = [
    "QueuesgdError",
    "InvalidParameterError",
    "UnitError",
    "UnknownNameError",
    "StateSpaceTooLargeError",
    "NotRepresentable",
    "ConvergenceError",
    "TimelessTrapError",
    "UnboundedNetError",
    "MissingDependencyError",
    "AccuracyWarning",
    "warn_user",
]


class QueuesgdError(Exception):
    """Base class of every queuesgd error.

    Every queuesgd error pickles as itself (its message and fields), so that
    one raised on a worker of a process pool or a Dask cluster reaches the
    caller unchanged; the default pickling would call ``__init__`` with the
    message alone.

    Examples
    --------
    >>> import pickle
    >>> err = pickle.loads(pickle.dumps(UnknownNameError("method", "mvaa", ["mva"])))
    >>> type(err).__name__, err.field, str(err)
    ('UnknownNameError', 'method', "method: got 'mvaa'; accepted: one of 'mva'")
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(cls: type[QueuesgdError], args: tuple[Any, ...], state: dict[str, Any]) -> QueuesgdError:
    """Rebuild a pickled queuesgd error without calling its ``__init__``."""
    err = cls.__new__(cls, *args)
    err.args = args
    err.__dict__.update(state)
    return err


class InvalidParameterError(QueuesgdError, ValueError):
    """A parameter has a value that is not accepted.

    Parameters
    ----------
    field : str
        Name of the parameter (dotted for nested fields, e.g.
        ``"stations[2].demand"``).
    got : object
        The value that was received.
    accepted : str
        Plain-language description of what would be accepted.
    """

    def __init__(self, field: str, got: Any, accepted: str) -> None:
        self.field = field
        self.got = got
        self.accepted = accepted
        super().__init__(f"{field}: got {short_repr(got)}; accepted: {accepted}")


#: Longest text of a received value an error message shows; the middle of a longer one is cut.
MAX_REPR = 300


def short_repr(value: Any) -> str:
    """``repr(value)`` for a message: at most :data:`MAX_REPR` characters, and never an error of its own.

    An integer of 5000 digits (whose ``repr`` Python refuses), a value whose
    ``__repr__`` fails, or a long list are all shown in a few characters.

    Examples
    --------
    >>> short_repr(10**1000), short_repr(10**5000)
    ('an integer of 1001 digits', 'an integer of about 5001 digits')
    >>> len(short_repr(list(range(10_000)))) <= MAX_REPR
    True
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        digits = int(value.bit_length() * 0.30103) + 1  # log10(2); len(str()) is refused past 4300 digits
        if value.bit_length() < 14_000:
            digits = len(str(abs(value)))
        return f"an integer of {'about ' if value.bit_length() >= 14_000 else ''}{digits} digits"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__, or a nested huge int
        return f"<a {type(value).__name__}>"
    if len(text) > MAX_REPR:
        text = f"{text[: MAX_REPR - 40]} ... {text[-30:]}"
    return text


class UnitError(InvalidParameterError):
    """A string could not be parsed as a quantity with a unit."""


class UnknownNameError(InvalidParameterError):
    """A name (station, class, workload, scheme, ...) is not known.

    Examples
    --------
    >>> print(UnknownNameError("station", "cpu", ["disk", "think"]))
    station: got 'cpu'; accepted: one of 'disk', 'think'
    >>> print(UnknownNameError("optimizer", "lamb", ["sgd", "adam"], also="or a number >= 0"))
    optimizer: got 'lamb'; accepted: one of 'sgd', 'adam' or a number >= 0

    ``also`` adds what else is accepted after the names (not quoted as one of them).
    """

    def __init__(self, field: str, got: Any, known: Any, also: str = "") -> None:
        names = ", ".join(repr(k) for k in known)
        accepted = f"one of {names}" if names else "(none defined)"
        super().__init__(field, got, f"{accepted} {also}" if also else accepted)


class StateSpaceTooLargeError(QueuesgdError, ValueError):
    """An exact method would need more states than allowed.

    The message suggests an approximate method.
    """


class TimelessTrapError(QueuesgdError, ValueError):
    """Immediate transitions of a Petri net can fire forever without reaching a tangible marking."""


class UnboundedNetError(StateSpaceTooLargeError):
    """Some places of a Petri net can hold arbitrarily many tokens."""


class NotRepresentable(QueuesgdError, ValueError):
    """A model or method cannot represent the requested scheme or network."""


class ConvergenceError(QueuesgdError, ValueError):
    """An iterative method did not converge within its iteration limit."""


class AccuracyWarning(UserWarning):
    """A result was computed by a method known to lose accuracy on this input.

    The message names the input's property, what was measured, and the
    method that is accurate there. Turn it into an error with
    ``warnings.simplefilter("error", AccuracyWarning)``.
    """


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn, naming the first line outside queuesgd: the user's call, however deep the library's chain.

    A fixed ``stacklevel`` names the user's line from one entry point and a
    library frame from another (``gth_solve`` called directly or through
    ``steady_state``); this walks the stack instead.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_user("a test", AccuracyWarning)
    >>> seen[0].category.__name__, seen[0].filename.startswith(_PACKAGE)
    ('AccuracyWarning', False)
    """
    frame = sys._getframe(1)
    level = 2  # stacklevel 2 names warn_user's caller
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


class MissingDependencyError(QueuesgdError, ImportError):
    """An optional dependency is not installed.

    Examples
    --------
    >>> print(MissingDependencyError("matplotlib", "plot"))
    matplotlib is not installed: pip install -e ".[plot]" in the queuesgd checkout
    """

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f'{package} is not installed: pip install -e ".[{extra}]" in the queuesgd checkout')


class WorkerFailure(QueuesgdError, RuntimeError):
    """A live worker process crashed, hung past its deadline, or raised.

    Parameters
    ----------
    rank : int or None
        The worker that failed first (``None`` when the whole run timed out
        without a culprit).
    reason : str
        What happened (exit code, exception text, "no progress for 30 s").
    partial : list
        Records the workers reported before the failure (kept, not lost).

    Examples
    --------
    >>> print(WorkerFailure(2, "exit code -9", partial=[{"step": 0}]))
    worker 2 failed: exit code -9 (1 records kept)
    """

    def __init__(self, rank: int | None, reason: str, partial: list | None = None) -> None:
        self.rank = rank
        self.reason = reason
        self.partial = list(partial or [])
        who = "the run" if rank is None else f"worker {rank}"
        super().__init__(f"{who} failed: {reason} ({len(self.partial)} records kept)")
