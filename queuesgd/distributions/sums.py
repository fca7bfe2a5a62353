"""Sums of laws: a constant delay (:class:`Shifted`) and independent sums (:class:`Convolution`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions._helpers import is_sympy, time_value
from queuesgd.distributions.base import Distribution
from queuesgd.distributions.continuous import Deterministic, Gamma, Normal
from queuesgd.distributions.phase import Erlang, Exponential, PhaseType, check_phases
from queuesgd.errors import InvalidParameterError, NotRepresentable

__all__ = ["Convolution", "Shifted", "sum_of"]


class Shifted(Distribution):
    """The law of ``base + shift``: a duration delayed by a constant ``shift`` (>= 0).

    Models an injected straggler delay (eager-SGD's "sleep d seconds before
    the forward pass"). Mean ``base.mean + shift``, variance that of ``base``.

    Examples
    --------
    >>> s = Shifted(Exponential(mean=1.0), "320ms")
    >>> s.mean, s.variance
    (1.32, 1.0)
    >>> round(s.cdf(1.32), 6) == round(Exponential(mean=1.0).cdf(1.0), 6)
    True
    """

    __slots__ = ("_base", "_shift")

    def __init__(self, base: Distribution, shift: Any) -> None:
        if not isinstance(base, Distribution):
            raise InvalidParameterError("Shifted.base", base, "a queuesgd.distributions.Distribution")
        self._set(_base=base, _shift=time_value("Shifted.shift", shift, allow_zero=True, symbolic=True))

    def _params(self) -> dict[str, Any]:
        return {"base": self._base, "shift": self._shift}

    def _key(self) -> tuple:
        return (self._base._key(), type(self._base).__name__, self._shift)

    @property
    def is_symbolic(self) -> bool:
        return self._base.is_symbolic or _checks.is_symbolic(self._shift)

    def subs(self, mapping: Mapping[Any, Any]) -> Distribution:
        shift = self._shift
        if is_sympy(shift):
            shift = shift.subs(mapping)
            if not _checks.is_symbolic(shift):
                shift = float(shift)
        return Shifted(self._base.subs(mapping), shift)

    def check_numeric(self, what: str) -> None:
        self._base.check_numeric(what)
        super().check_numeric(what)

    @property
    def base(self) -> Distribution:
        """The undelayed law."""
        return self._base

    @property
    def shift(self) -> Any:
        """The constant delay, seconds."""
        return self._shift

    @property
    def mean(self) -> Any:
        return self._base.mean + self._shift

    @property
    def variance(self) -> Any:
        return self._base.variance

    _symbolic_ok = True

    def _sample(self, gen, total):
        return np.asarray(self._base._sample(gen, total), dtype=float) + self._shift

    def _cdf(self, x):
        return self._base._cdf(x - self._shift)

    def _sf(self, x):
        return self._base._sf(x - self._shift)

    @property
    def exact_sf(self) -> bool:
        """Whether the shifted law's :meth:`sf` has a formula of its own."""
        return self._base.exact_sf

    @property
    def lower_bound(self) -> Any:
        """The base law's lower bound plus the shift (``-inf`` for a shifted normal law)."""
        low = self._base.lower_bound
        return low if low == -math.inf else low + self._shift

    def _scaled(self, factor):
        return Shifted(self._base.scaled(factor), self._shift * factor)


# ----------------------------------------------------------------------------- sums of laws


class Convolution(Distribution):
    """The law of ``X_1 + ... + X_k``, independent, each deterministic, shifted or phase-type.

    Exact: the deterministic parts (and the shifts of :class:`Shifted` parts)
    add up to one constant; the phase-type parts (every law with an exact
    :meth:`~Distribution.to_phase_type`) are chained into one
    :class:`PhaseType` (absorption of one part starts the next). The CDF is
    that of the chain, shifted; samples are sums of samples of the parts.
    A part with no such exact form (log-normal, gamma, normal, empirical)
    is refused with :class:`~queuesgd.errors.NotRepresentable`:
    use :func:`fit_phase_type` on it first, or simulate.

    Examples
    --------
    >>> c = Convolution(Exponential(2.0), Exponential(2.0), Deterministic(0.5))
    >>> c.mean, c.variance                   # 1/2 + 1/2 + 0.5; 1/4 + 1/4
    (1.5, 0.5)
    >>> round(float(c.cdf(1.5)), 12) == round(float(Erlang(2, 2.0).cdf(1.0)), 12)
    True
    """

    __slots__ = ("_parts", "_shift", "_ph")

    def __init__(self, *parts: Distribution) -> None:
        if not parts:
            raise InvalidParameterError("Convolution.parts", parts, "one or more Distribution objects")
        shift = 0.0
        chains: list[PhaseType] = []
        for i, law in enumerate(parts):
            if not isinstance(law, Distribution):
                raise InvalidParameterError(f"Convolution.parts[{i}]", law, "a Distribution")
            law.check_numeric("Convolution")
            base = law
            while isinstance(base, Shifted):
                shift += float(base.shift)
                base = base.base
            if isinstance(base, Deterministic):
                shift += float(base.mean)
                continue
            try:
                chains.append(base.to_phase_type())
            except NotRepresentable:
                raise NotRepresentable(
                    f"Convolution of {type(base).__name__}: not phase-type, so the sum has no exact law "
                    "here; use fit_phase_type(law) for a two-moment phase-type law, or simulate"
                ) from None
        self._set(_parts=tuple(parts), _shift=shift, _ph=_chain(chains) if chains else None)

    def _params(self) -> dict[str, Any]:
        return {"parts": self._parts}

    def __repr__(self) -> str:
        return f"Convolution({', '.join(repr(p) for p in self._parts)})"

    def _key(self) -> tuple:
        return tuple((type(p).__name__, p._key()) for p in self._parts)

    def __reduce__(self):
        return (Convolution, self._parts)

    @property
    def parts(self) -> tuple[Distribution, ...]:
        """The summed laws."""
        return self._parts

    @property
    def mean(self) -> float:
        return float(sum(float(p.mean) for p in self._parts))

    @property
    def variance(self) -> float:
        return float(sum(float(p.variance) for p in self._parts))

    def _sample(self, gen, total):
        out = np.zeros(total)
        for p in self._parts:
            out += np.asarray(p._sample(gen, total), dtype=float)
        return out

    def _cdf(self, x):
        if self._ph is None:
            return (x >= self._shift).astype(float)
        return self._ph._cdf(x - self._shift)

    def _scaled(self, factor):
        return Convolution(*(p.scaled(factor) for p in self._parts))

    def to_phase_type(self) -> PhaseType:
        """The chained phase-type law (exact when no part is deterministic)."""
        if self._shift > 0 or self._ph is None:
            raise NotRepresentable(
                "a Convolution with a deterministic part is not phase-type; use fit_phase_type(law)"
            )
        return self._ph


def _chain(laws: list[PhaseType]) -> PhaseType:
    """Phase-type law of the sum of independent phase-type laws (each absorbs into the next).

    The exit rates into the next law are each law's own, carried along: read
    back from the chained sub-generator's row sums they cancel to about
    -1e-19 instead of 0 (a two-branch hyperexponential chained twice), which
    ``PhaseType`` refuses as a negative rate.
    """
    check_phases(sum(law.phases for law in laws), f"a sum of {len(laws)} phase-type laws")
    out = laws[0]
    exit_out = out.exit_rates
    for nxt in laws[1:]:
        a, b = out.phases, nxt.phases
        T = np.zeros((a + b, a + b))
        T[:a, :a] = out.T
        T[:a, a:] = np.outer(exit_out, nxt.alpha)
        T[a:, a:] = nxt.T
        # The atom at 0 of the law so far starts the next one; an alpha that rounds above 1 (0.56 + 0.328 +
        # 0.112 = 1 + 2.2e-16) has none, not a weight of -2.2e-16.
        atom = max(0.0, 1.0 - float(np.sum(out.alpha)))
        alpha = np.concatenate([out.alpha, atom * np.asarray(nxt.alpha)])
        out = PhaseType(alpha, T)
        exit_out = np.concatenate([np.zeros(a), nxt.exit_rates])
    return out


def sum_of(law: Distribution, count: int) -> Distribution:
    """The law of the sum of ``count`` independent copies of ``law``, in its own family where it has one.

    Exponential and Erlang sums are Erlang, gamma sums gamma, normal sums
    normal, deterministic sums deterministic, shifted sums shifted; other
    laws give a :class:`Convolution` (which refuses laws with no exact sum).

    Examples
    --------
    >>> sum_of(Exponential(2.0), 3)
    Erlang(k=3, rate=2.0)
    >>> sum_of(Shifted(Deterministic(1.0), 0.5), 2)
    Deterministic(value=3.0)
    """
    count = _checks.integer("sum_of.count", count, minimum=1)
    if not isinstance(law, Distribution):
        raise InvalidParameterError("sum_of.law", law, "a Distribution")
    if count == 1:
        return law
    if isinstance(law, Exponential):
        return Erlang(count, law.rate)
    if isinstance(law, Erlang):
        return Erlang(law.k * count, law.rate)
    if isinstance(law, Gamma):
        return Gamma(law.shape * count, law.rate)
    if isinstance(law, Normal):
        return Normal(law.mean * count, law.std * math.sqrt(count))
    if isinstance(law, Deterministic):
        return Deterministic(law.value * count)
    if isinstance(law, Shifted):
        base = sum_of(law.base, count)
        if isinstance(base, Deterministic):
            return Deterministic(float(base.value) + law.shift * count)
        return Shifted(base, law.shift * count)
    check_phases(count, f"a sum of {count:,} copies of {type(law).__name__}")
    return Convolution(*([law] * count))
