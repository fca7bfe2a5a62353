"""Laws that are not phase-type: deterministic, normal, log-normal, gamma and empirical."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from queuesgd import _checks
from queuesgd.distributions._helpers import frozen, is_sympy, real_value, time_value, vector_value
from queuesgd.distributions.base import Distribution
from queuesgd.errors import InvalidParameterError

__all__ = ["Deterministic", "Empirical", "Gamma", "LogNormal", "Normal"]


class Deterministic(Distribution):
    """A fixed duration ``value`` (>= 0; a number, a unit string or a SymPy expression).

    Mean ``value``, variance 0, scv 0.

    Examples
    --------
    >>> d = Deterministic("2ms")
    >>> d, d.variance
    (Deterministic(value=0.002), 0.0)
    """

    __slots__ = ("_value",)
    _symbolic_ok = True

    def __init__(self, value: Any) -> None:
        self._set(_value=time_value("Deterministic.value", value, symbolic=True, allow_zero=True))

    def _params(self) -> dict[str, Any]:
        return {"value": self._value}

    @property
    def value(self) -> Any:
        """The duration."""
        return self._value

    @property
    def mean(self) -> Any:
        return self._value

    @property
    def variance(self) -> Any:
        if is_sympy(self._value):
            import sympy

            return sympy.Integer(0)
        return 0.0

    @property
    def scv(self) -> Any:
        return self.variance

    def _sample(self, gen, total):
        return np.full(total, float(self._value))

    def _cdf(self, x):
        return (x >= float(self._value)).astype(float)

    _exact_sf = True

    def _sf(self, x):
        return (x < float(self._value)).astype(float)

    def _scaled(self, factor):
        return Deterministic(self._value * factor)


class Normal(Distribution):
    """Normal law with ``mean`` and standard deviation ``std`` (> 0); unit strings accepted.

    A normal law puts mass on negative values: ``sample`` returns the raw
    normal samples, negative ones included. For service times with a small
    ``std/mean`` that is harmless; otherwise prefer :class:`LogNormal` or
    :class:`Gamma` (both have ``from_mean_std``).

    Mean ``mean``, variance ``std**2``.

    Examples
    --------
    >>> n = Normal("10ms", "1ms")
    >>> n.mean, round(n.scv, 12)
    (0.01, 0.01)
    >>> round(n.cdf(0.01), 12)
    0.5
    """

    __slots__ = ("_mean", "_std")

    def __init__(self, mean: Any, std: Any) -> None:
        m = real_value("Normal.mean", mean, time=True)
        s = time_value("Normal.std", std)
        self._set(_mean=m, _std=s)

    def _params(self) -> dict[str, Any]:
        return {"mean": self._mean, "std": self._std}

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def std(self) -> float:
        return self._std

    @property
    def variance(self) -> float:
        return self._std**2

    @property
    def scv(self) -> float:
        # (std / mean)**2, not variance / mean**2: Normal(1e300, 1e300) has scv 1, its variance overflows.
        return (self._std / self._mean) ** 2 if self._mean != 0 else math.inf

    def _sample(self, gen, total):
        return gen.normal(self._mean, self._std, size=total)

    def _cdf(self, x):
        return special.ndtr((x - self._mean) / self._std)

    _exact_sf = True

    def _sf(self, x):
        return special.ndtr((self._mean - x) / self._std)

    @property
    def lower_bound(self) -> float:
        return -math.inf

    def _scaled(self, factor):
        return Normal(self._mean * factor, self._std * factor)


class LogNormal(Distribution):
    """Log-normal law: ``exp(N)`` with ``N`` normal of mean ``mu`` and std ``sigma`` (> 0).

    Mean ``exp(mu + sigma**2/2)``, variance ``(exp(sigma**2) - 1) exp(2 mu + sigma**2)``,
    scv ``exp(sigma**2) - 1``. Build one from its own mean with
    :meth:`from_mean_scv` or :meth:`from_mean_std`.

    Examples
    --------
    >>> ln = LogNormal.from_mean_scv("10ms", 0.25)
    >>> round(ln.mean, 12), round(ln.scv, 12)
    (0.01, 0.25)
    """

    __slots__ = ("_mu", "_sigma")

    def __init__(self, mu: Any, sigma: Any) -> None:
        self._set(_mu=real_value("LogNormal.mu", mu), _sigma=_checks.positive("LogNormal.sigma", sigma))

    @classmethod
    def from_mean_scv(cls, mean: Any, scv: Any) -> LogNormal:
        """The log-normal law with the given mean (> 0) and scv (> 0)."""
        m = time_value("LogNormal.mean", mean)
        c = _checks.positive("LogNormal.scv", scv)
        s2 = math.log1p(c)
        return cls(math.log(m) - s2 / 2, math.sqrt(s2))

    @classmethod
    def from_mean_std(cls, mean: Any, std: Any) -> LogNormal:
        """The log-normal law with the given mean (> 0) and standard deviation (> 0)."""
        m = time_value("LogNormal.mean", mean)
        s = time_value("LogNormal.std", std)
        return cls.from_mean_scv(m, (s / m) ** 2)

    def _params(self) -> dict[str, Any]:
        return {"mu": self._mu, "sigma": self._sigma}

    @property
    def mu(self) -> float:
        """Mean of the underlying normal."""
        return self._mu

    @property
    def sigma(self) -> float:
        """Standard deviation of the underlying normal."""
        return self._sigma

    @property
    def mean(self) -> float:
        return math.exp(self._mu + self._sigma**2 / 2)

    @property
    def variance(self) -> float:
        return math.expm1(self._sigma**2) * math.exp(2 * self._mu + self._sigma**2)

    @property
    def scv(self) -> float:
        return math.expm1(self._sigma**2)

    def _sample(self, gen, total):
        return gen.lognormal(self._mu, self._sigma, size=total)

    def _cdf(self, x):
        pos = x > 0
        z = (np.log(np.where(pos, x, 1.0)) - self._mu) / self._sigma
        return np.where(pos, special.ndtr(z), 0.0)

    _exact_sf = True

    def _sf(self, x):
        pos = x > 0
        z = (np.log(np.where(pos, x, 1.0)) - self._mu) / self._sigma
        return np.where(pos, special.ndtr(-z), 1.0)

    def _scaled(self, factor):
        return LogNormal(self._mu + math.log(factor), self._sigma)


class Gamma(Distribution):
    """Gamma law with ``shape`` (> 0) and ``rate`` (> 0); or give ``mean`` instead of ``rate``.

    Mean ``shape/rate``, variance ``shape/rate**2``, scv ``1/shape``.

    Examples
    --------
    >>> Gamma(2.0, mean="1s")
    Gamma(shape=2.0, rate=2.0)
    >>> g = Gamma.from_mean_scv(0.5, 4.0)
    >>> g.shape, g.rate
    (0.25, 0.5)
    """

    __slots__ = ("_shape", "_rate")

    def __init__(self, shape: Any, rate: Any = None, *, mean: Any = None) -> None:
        a = _checks.positive("Gamma.shape", shape)
        if (rate is None) == (mean is None):
            raise InvalidParameterError(
                "Gamma.rate",
                rate,
                "exactly one of rate= or mean=, e.g. Gamma(2.0, 4.0) or Gamma(2.0, mean=0.5)",
            )
        b = _checks.positive("Gamma.rate", rate) if rate is not None else a / time_value("Gamma.mean", mean)
        self._set(_shape=a, _rate=b)

    @classmethod
    def from_mean_scv(cls, mean: Any, scv: Any) -> Gamma:
        """The gamma law with the given mean (> 0) and scv (> 0): shape ``1/scv``."""
        m = time_value("Gamma.mean", mean)
        c = _checks.positive("Gamma.scv", scv)
        return cls(1 / c, mean=m)

    @classmethod
    def from_mean_std(cls, mean: Any, std: Any) -> Gamma:
        """The gamma law with the given mean (> 0) and standard deviation (> 0)."""
        m = time_value("Gamma.mean", mean)
        s = time_value("Gamma.std", std)
        return cls.from_mean_scv(m, (s / m) ** 2)

    def _params(self) -> dict[str, Any]:
        return {"shape": self._shape, "rate": self._rate}

    @property
    def shape(self) -> float:
        """Shape parameter."""
        return self._shape

    @property
    def rate(self) -> float:
        """Rate (inverse scale) parameter."""
        return self._rate

    @property
    def mean(self) -> float:
        return self._shape / self._rate

    @property
    def variance(self) -> float:
        return self._shape / self._rate**2

    @property
    def scv(self) -> float:
        return 1.0 / self._shape

    def _sample(self, gen, total):
        return gen.gamma(self._shape, 1 / self._rate, size=total)

    def _cdf(self, x):
        return special.gammainc(self._shape, self._rate * np.maximum(x, 0.0))

    _exact_sf = True

    def _sf(self, x):
        return special.gammaincc(self._shape, self._rate * np.maximum(x, 0.0))

    def _scaled(self, factor):
        return Gamma(self._shape, self._rate / factor)


class Empirical(Distribution):
    """The empirical law of measured durations (finite, >= 0).

    ``mean`` and ``variance`` are those of the sample itself (population
    variance, ``ddof=0``); ``sample`` resamples with replacement; ``cdf`` is
    the empirical CDF.

    Examples
    --------
    >>> e = Empirical([1.0, 2.0, 3.0, 4.0])
    >>> e.mean, e.variance, e.cdf(2.5)
    (2.5, 1.25, 0.5)
    """

    __slots__ = ("_samples",)

    def __init__(self, samples: ArrayLike) -> None:
        s = vector_value("Empirical.samples", samples)
        if np.any(s < 0):
            raise InvalidParameterError("Empirical.samples", samples, "durations >= 0")
        self._set(_samples=frozen(np.sort(s)))

    def _params(self) -> dict[str, Any]:
        return {"samples": self._samples}

    def __repr__(self) -> str:
        if self._samples.size <= 10:
            return super().__repr__()
        return f"<Empirical: {self._samples.size} samples, mean={self.mean!r}, std={self.std!r}>"

    @property
    def samples(self) -> np.ndarray:
        """The sorted samples (read-only array)."""
        return self._samples

    @property
    def mean(self) -> float:
        return float(np.mean(self._samples))

    @property
    def variance(self) -> float:
        return float(np.var(self._samples))

    def _sample(self, gen, total):
        return gen.choice(self._samples, size=total, replace=True)

    def _cdf(self, x):
        return np.searchsorted(self._samples, x, side="right") / self._samples.size

    _exact_sf = True

    def _sf(self, x):
        size = self._samples.size
        return (size - np.searchsorted(self._samples, x, side="right")) / size

    def _scaled(self, factor):
        return Empirical(self._samples * factor)
