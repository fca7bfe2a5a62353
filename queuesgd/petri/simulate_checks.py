"""Checks of a GSPN simulation's arguments and size, before it runs (:func:`queuesgd.petri.simulate`).

The batch-means policy of :mod:`queuesgd.batchmeans` applied to the event
loop of :mod:`queuesgd.petri.events`:

- **Length.** A ``firings`` run needs at least
  :data:`~queuesgd.batchmeans.MIN_PER_BATCH` firings per batch
  (:func:`options`); an ``until`` run, whose firings are not known in
  advance, is checked after it ran (:func:`check_batches`): fewer firings
  than a ``firings`` run needs is refused, and a batch of fewer than
  ``MIN_PER_BATCH`` firings warns (:class:`~queuesgd.errors.AccuracyWarning`).
- **Cost.** At most :data:`MAX_FIRINGS` firings, the
  :data:`~queuesgd.batchmeans.MAX_SIMULATION_SECONDS` of the policy at
  :data:`SECONDS_PER_FIRING` each. :func:`check_size` refuses a run whose
  expected firings exceed it before anything runs; where the firings of a
  time span are needed (``until``, ``warmup``) they are estimated from the
  initial marking (:func:`initial_rate`). As that estimate can be low (a net
  that starts empty), the event loop also stops at :data:`MAX_FIRINGS`
  firings with the same error.
- **Width.** At most :data:`MAX_BATCHES` batches, at most
  :data:`MAX_CLOCKS` clocks drawn at once for one transition of a
  non-exponential law (infinite servers with many tokens), and at most
  :data:`MAX_DRAWS` firing times drawn in one run.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.batchmeans import MAX_SIMULATION_SECONDS, MIN_PER_BATCH, WARMUP
from queuesgd.distributions import Deterministic, Distribution, Exponential
from queuesgd.errors import (
    AccuracyWarning,
    InvalidParameterError,
    StateSpaceTooLargeError,
    UnknownNameError,
    warn_user,
)
from queuesgd.run_options import MAX_ITERATIONS

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = [
    "MAX_BATCHES",
    "MAX_CLOCKS",
    "MAX_DRAWS",
    "MAX_FIRINGS",
    "SECONDS_PER_FIRING",
    "check_batches",
    "check_net",
    "check_size",
    "initial_rate",
    "laws_of",
    "options",
    "predicates_of",
]

#: Most batches of one run (each batch keeps a row of counts per transition and place).
MAX_BATCHES = 10_000
#: Estimated seconds of one firing of the event loop (about 2e5 firings per second; faster on most nets).
SECONDS_PER_FIRING = 5e-6
#: Most firings of one run: MAX_SIMULATION_SECONDS at SECONDS_PER_FIRING each (60,000,000).
MAX_FIRINGS = round(MAX_SIMULATION_SECONDS / SECONDS_PER_FIRING)
#: Most clocks of one transition with a non-exponential law drawn at once (``2**16`` firing times).
MAX_CLOCKS = 2**16
#: Most firing times one run draws (``2**31``, about a minute of sampling): many clocks per firing cost more.
MAX_DRAWS = 2**31

_INSTEAD = "net.solve() (the exact CTMC, for exponential laws)"


def options(until, firings, warmup, batches, confidence, max_vanishing) -> dict[str, Any]:
    """The run's options, checked; ``warmup`` resolved to a time (see :func:`queuesgd.petri.simulate`).

    Examples
    --------
    >>> options(None, 50, None, 20, 0.95, 100)                    # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: firings: got 50; accepted: an integer >= 100 (20 batches ...
    """
    if until is None and firings is None:
        raise InvalidParameterError(
            "until", until, "a simulated time > 0 (or give firings=, a number of firings); e.g. until=1e4"
        )
    batches = _checks.integer("batches", batches, minimum=2, maximum=MAX_BATCHES)
    if warmup is None:  # the batch-means policy: a run from an initial marking has a transient
        warmup = WARMUP * _checks.positive("until", until) if firings is None else 0.0
    warmup = _checks.positive("warmup", warmup, allow_zero=True)
    if until is not None:
        until = _checks.positive("until", until)
        if until <= warmup:
            raise InvalidParameterError("until", until, f"a time > warmup ({warmup})")
    if firings is not None:
        least = batches * MIN_PER_BATCH
        accepted = (
            f"an integer >= {least:,} ({batches} batches of at least {MIN_PER_BATCH} firings), "
            f"at most {MAX_ITERATIONS:,}"
        )
        try:  # the cap keeps a number such as 10**400 out of check_size's arithmetic (its message's float)
            firings = _checks.integer("firings", firings, minimum=least, maximum=MAX_ITERATIONS)
        except InvalidParameterError:
            raise InvalidParameterError("firings", firings, accepted) from None
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise InvalidParameterError("confidence", confidence, "a number strictly between 0 and 1, e.g. 0.95")
    return {
        "until": until,
        "firings": firings,
        "warmup": warmup,
        "batches": batches,
        "confidence": float(confidence),
        "max_vanishing": _checks.integer("max_vanishing", max_vanishing, minimum=1),
    }


def check_net(net: PetriNet) -> None:
    """Refuse a net without transitions (nothing could ever fire)."""
    if not net.transition_names:
        k = len(net.place_names)
        what = f"{k} place{'s' if k > 1 else ''}" if k else "no places"
        raise InvalidParameterError(
            "net",
            f"net {net.name!r} with {what} and no transitions",
            "a net with at least one timed transition (nothing fires in a net without transitions)",
        )


def predicates_of(predicates) -> dict[str, Callable]:
    """The ``predicates`` mapping, checked (names, callables)."""
    if predicates is None:
        return {}
    if not isinstance(predicates, Mapping):
        raise InvalidParameterError("predicates", predicates, "a {name: callable(marking) -> bool} mapping")
    for k, f in predicates.items():
        _checks.name("predicates key", k)
        if not callable(f):
            raise InvalidParameterError(
                f"predicates[{k!r}]", f, "a callable taking a {place: tokens} mapping"
            )
    return dict(predicates)


def laws_of(net: PetriNet, delays) -> list[Distribution | None]:
    """One numeric law per transition (None for immediate transitions)."""
    delays = {} if delays is None else delays
    if not isinstance(delays, Mapping):
        raise InvalidParameterError("delays", delays, "a {timed transition name: Distribution} mapping")
    trans = net.transitions
    timed_names = [n for n, t in trans.items() if t.timed]
    for name, law in delays.items():
        if name not in trans:
            raise UnknownNameError("delays", name, timed_names)
        if not trans[name].timed:
            raise InvalidParameterError(
                "delays", name, "names of timed transitions (immediate transitions fire in zero time)"
            )
        if not isinstance(law, Distribution):
            raise InvalidParameterError(
                f"delays[{name!r}]", law, "a queuesgd.distributions law, e.g. Deterministic(1.0)"
            )
        if law.is_symbolic:
            raise InvalidParameterError(
                f"delays[{name!r}]", law, "a law with numeric parameters (use law.subs({symbol: value}))"
            )
    laws: list[Distribution | None] = []
    for name, t in trans.items():
        if not t.timed:
            if t.weight is not None and _checks.is_symbolic(t.weight):
                raise InvalidParameterError(
                    f"transition {name!r} weight",
                    t.weight,
                    "a number for simulation (substitute the symbols)",
                )
            laws.append(None)
            continue
        if name in delays:
            laws.append(delays[name])
        elif _checks.is_symbolic(t.rate):
            raise InvalidParameterError(
                f"transition {name!r} rate",
                t.rate,
                f"a number for simulation; substitute the symbols or give delays={{{name!r}: law}}",
            )
        else:
            laws.append(Exponential(float(t.rate)))
    return laws


def initial_rate(net: PetriNet, laws: list[Distribution | None]) -> float:
    """Firings per unit of time of the timed transitions enabled in the initial marking.

    A transition running ``n`` clocks of an exponential law of rate ``r``
    fires at ``n r``; one of another law of mean ``mu`` at about ``n / mu``
    (a deterministic one at ``1 / mu``: its clocks restart together); a law
    of mean 0 counts nothing (zero delays are bounded by ``max_vanishing``).

    Examples
    --------
    >>> from queuesgd import PetriNet
    >>> net = PetriNet("q")
    >>> _ = net.place("queue", tokens=3)
    >>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1})
    >>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1}, servers=2)
    >>> initial_rate(net, [Exponential(1.0), Deterministic(0.25)])
    5.0
    """
    m = net.initial_marking
    pre, inh = net.pre, net.inhibit
    total = 0.0
    for j, (law, t) in enumerate(zip(laws, net.transitions.values())):
        if law is None or (m[inh[j] > 0] >= inh[j][inh[j] > 0]).any():
            continue
        ins = pre[j] > 0
        degree = float((m[ins] // pre[j][ins]).min()) if ins.any() else 1.0
        n = min(degree, float(t.servers))
        if n == 0:
            continue
        if isinstance(law, Exponential):
            total += n * float(law.rate)
            continue
        mean = float(law.mean)
        if mean > 0 and math.isfinite(mean):
            total += (1.0 if isinstance(law, Deterministic) else n) / mean
    return total


def check_size(opts: Mapping[str, Any], rate: float) -> None:
    """Refuse a run expected to fire more than :data:`MAX_FIRINGS` times, before it starts.

    ``rate`` is :func:`initial_rate`: the firings of a time span (``until``,
    or the ``warmup`` of a ``firings`` run) are that span times ``rate``.

    Examples
    --------
    >>> check_size({"until": 1e12, "firings": None, "warmup": 0.0}, 1.0)     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: simulating until=1e+12 would fire about 1e+12 ...
    """
    until, firings, warmup = opts["until"], opts["firings"], opts["warmup"]
    each = f"{SECONDS_PER_FIRING:g} s"
    cost = f"at most {MAX_SIMULATION_SECONDS:,.0f} s ({MAX_FIRINGS:,} firings of some {each})"
    if firings is None:
        expected = rate * until
        if expected > MAX_FIRINGS:
            raise StateSpaceTooLargeError(
                f"simulating until={until:g} would fire about {expected:.3g} transitions (the initial "
                f"marking's timed transitions fire at a rate of {rate:.4g} per unit of time); {cost}: "
                f"lower until= to at most {MAX_FIRINGS / rate:.4g}, or use {_INSTEAD}"
            )
        return
    if firings > MAX_FIRINGS:
        raise StateSpaceTooLargeError(
            f"simulating firings={firings:,} would take about {firings * SECONDS_PER_FIRING:,.0f} s; {cost}: "
            f"lower firings= to at most {MAX_FIRINGS:,}, or use {_INSTEAD}"
        )
    during = rate * warmup if warmup > 0 else 0.0
    expected = firings + during
    if until is not None and rate > 0:
        expected = min(expected, rate * until)  # until stops the run first
    if expected > MAX_FIRINGS:
        raise StateSpaceTooLargeError(
            f"simulating firings={firings:,} after warmup={warmup:g} would fire about {during:.3g} "
            f"transitions during the warmup (the initial marking's timed transitions fire at a rate of "
            f"{rate:.4g} per unit of time); {cost}: lower warmup= to at most "
            f"{(MAX_FIRINGS - firings) / rate:.4g}, or use {_INSTEAD}"
        )


def check_batches(counts: np.ndarray, until: float, batches: int) -> None:
    """Refuse an ``until`` run too short for its batches; warn if one batch is short.

    ``counts`` (batches, transitions) are the firings of each batch after the
    warmup. Fewer than ``batches x MIN_PER_BATCH`` firings in all (the bound
    a ``firings`` run has) is refused; a run past that bound one of whose
    batches still holds fewer than ``MIN_PER_BATCH`` firings gets an
    :class:`~queuesgd.errors.AccuracyWarning` (its interval covers less
    often than its confidence says).

    Raises
    ------
    InvalidParameterError
        Naming ``until``, the firings seen and how far to raise it.

    Examples
    --------
    >>> check_batches(np.array([[20, 20], [20, 20]]), 10.0, 2)
    >>> check_batches(np.array([[3, 3], [1, 2]]), 10.0, 2)            # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: until: got 10.0; accepted: a run that fires at least 10 times ...
    """
    per = counts.sum(axis=1)
    total, least = int(per.sum()), batches * MIN_PER_BATCH
    if total < least:
        factor = least / max(total, 0.5)
        raise InvalidParameterError(
            "until",
            until,
            f"a run that fires at least {least:,} times after the warmup ({batches} batches of at least "
            f"{MIN_PER_BATCH} firings; this one fired {total:,}, and shorter batches give intervals "
            f"that cover the true value far less often than their confidence says): raise until= "
            f"(about {factor:.2g} times, to {until * factor:.4g}), lower batches=, or give firings=",
        )
    if per.min() < MIN_PER_BATCH:
        i = int(per.argmin())
        warn_user(
            f"simulate(until={until:g}): batch {i + 1} of {per.size} held {int(per[i])} firings, fewer "
            f"than {MIN_PER_BATCH} ({per.mean():.3g} on average): its intervals may cover the true value "
            f"less often than their confidence says; raise until= or give firings= (batches of equal "
            "numbers of firings)",
            AccuracyWarning,
        )
