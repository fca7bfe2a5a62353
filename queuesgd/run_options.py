"""A prediction's simulation options, checked once: ``iterations`` (its length) and ``rng`` (its randomness).

:func:`~queuesgd.predict`, :func:`~queuesgd.sweep` and :func:`~queuesgd.compare` check both up front,
whatever the method, with :func:`run_options`: a value a simulation would refuse is refused where
nothing simulates too (``sweep(..., iterations="abc")`` and ``rng=-1`` gave numbers where no row
simulated, while ``predict`` refused them). :meth:`~queuesgd.schemes.base.Scheme.solve` checks
``iterations`` with :func:`iterations_option`.

Examples
--------
>>> run_options(7, 1000)
(7, 1000)
>>> run_options(None, 10**400)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: iterations: got an integer of 401 digits; accepted: an integer ...
"""

from __future__ import annotations

from typing import Any

from queuesgd import _checks
from queuesgd.rng import as_generator

__all__ = ["MAX_ITERATIONS", "iterations_option", "rng_option", "run_options"]

#: Most iterations a simulation is asked for: ``10**12``. Each simulation's own guard
#: (:func:`~queuesgd.batchmeans.check_simulation_size`: at most :data:`~queuesgd.batchmeans.MAX_SAMPLES`
#: values, ``2**27``, and :data:`~queuesgd.batchmeans.MAX_SIMULATION_SECONDS`) refuses far fewer and says how
#: far to lower them; this bound keeps a number such as ``10**400`` out of that guard's arithmetic
#: (its message divided it into a float: ``OverflowError``).
MAX_ITERATIONS = 10**12


def iterations_option(iterations: Any) -> int | None:
    """``iterations`` as an int from 1 to :data:`MAX_ITERATIONS`, or None (the scheme's default).

    Examples
    --------
    >>> iterations_option(None), iterations_option(500.0)
    (None, 500)
    >>> iterations_option(-1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: iterations: got -1; accepted: an integer >= 1, at most ...
    """
    if iterations is None:
        return None
    return _checks.integer("iterations", iterations, maximum=MAX_ITERATIONS)


def rng_option(rng: Any) -> Any:
    """``rng`` unchanged if it is None, a :class:`numpy.random.Generator` or an integer seed >= 0.

    The rule of :func:`queuesgd.rng.as_generator` (which the simulations use),
    applied without drawing from a Generator: an integer stays an integer (a
    sweep gives it to every row as it is).

    Examples
    --------
    >>> rng_option(None), rng_option(3)
    (None, 3)
    >>> rng_option(True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: rng: got True; accepted: a numpy.random.Generator ...
    """
    if rng is not None:
        as_generator(rng, "rng")
    return rng


def run_options(rng: Any, iterations: Any) -> tuple[Any, int | None]:
    """``(rng, iterations)`` checked by :func:`rng_option` and :func:`iterations_option`.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> run_options(g, None)[0] is g
    True
    """
    return rng_option(rng), iterations_option(iterations)
