"""Distributions of durations: small immutable objects with moments, sampling and CDF.

Every law is a subclass of :class:`Distribution` and offers ``mean``,
``variance``, ``scv`` (squared coefficient of variation), ``sample(rng, size)``,
``cdf(x)`` and ``sf(x)`` (vectorized; ``sf`` by a formula of its own where
``exact_sf``) and ``scaled(factor)`` (the law of ``factor * X``, used
for per-worker speed factors). Times are in seconds; where a parameter is a
mean or a fixed duration, a unit string such as ``"2ms"`` is accepted too.

:class:`Exponential`, :class:`Deterministic` and :class:`Erlang` accept SymPy
expressions as parameters: their moments are then SymPy expressions, and
``subs`` turns them back into numeric laws. Randomness always comes from an
explicit ``numpy.random.Generator`` or integer seed, never from global state.

Phase-type laws (:class:`PhaseType`) are what the Markov models can represent
exactly; :func:`fit_phase_type` matches the first two moments of any law.

Examples
--------
>>> import numpy as np
>>> from queuesgd.distributions import Erlang, fit_phase_type
>>> e = Erlang(4, mean="2ms")
>>> e.mean, e.scv
(0.002, 0.25)
>>> float(np.round(e.to_phase_type().mean, 12))
0.002
>>> ph = fit_phase_type(0.5, scv=3.0)
>>> round(ph.mean, 12), round(ph.scv, 12)
(0.5, 3.0)
"""

from queuesgd.distributions.base import Distribution
from queuesgd.distributions.continuous import Deterministic, Empirical, Gamma, LogNormal, Normal
from queuesgd.distributions.phase import (
    MAX_PHASES,
    Erlang,
    Exponential,
    HyperExponential,
    PhaseType,
    check_phases,
    fit_phase_type,
)
from queuesgd.distributions.sums import Convolution, Shifted, sum_of

__all__ = [
    "MAX_PHASES",
    "Convolution",
    "Deterministic",
    "Distribution",
    "Empirical",
    "Erlang",
    "Exponential",
    "Gamma",
    "HyperExponential",
    "LogNormal",
    "Normal",
    "PhaseType",
    "Shifted",
    "check_phases",
    "fit_phase_type",
    "sum_of",
]
