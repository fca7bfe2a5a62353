"""Distributions of durations: small immutable objects with moments, sampling and CDF.

Every law is a subclass of :class:`Distribution` and offers ``mean``,
``variance``, ``scv`` (squared coefficient of variation), ``sample(rng, size)``,
``cdf(x)`` (vectorized) and ``scaled(factor)`` (the law of ``factor * X``, used
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

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg, special

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.rng import as_generator
from queuesgd.units import parse_seconds

__all__ = [
    "Distribution",
    "Exponential",
    "Deterministic",
    "Erlang",
    "HyperExponential",
    "Normal",
    "LogNormal",
    "Gamma",
    "Empirical",
    "PhaseType",
    "Shifted",
    "Convolution",
    "fit_phase_type",
    "sum_of",
]


# ----------------------------------------------------------------------------- helpers


def _size(size: Any) -> tuple[int, ...] | None:
    accepted = "None, an integer >= 0 or a tuple of integers >= 0"
    if size is None:
        return None
    dims = size if isinstance(size, tuple) else (size,)
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or int(d) < 0:
            raise InvalidParameterError("size", size, accepted)
        out.append(int(d))
    return tuple(out)


def _is_sympy(value: Any) -> bool:
    return type(value).__module__.startswith("sympy")


def _time(field: str, value: Any, *, symbolic: bool = False, allow_zero: bool = False) -> Any:
    """A positive duration: a number, a unit string ("2ms") or (if allowed) a SymPy expression."""
    if isinstance(value, str):
        value = parse_seconds(value, field)
    return _checks.positive(field, value, symbolic=symbolic, allow_zero=allow_zero)


def _real(field: str, value: Any, *, time: bool = False) -> float:
    """A finite real number (may be negative); a unit string if ``time``."""
    if time and isinstance(value, str):
        return parse_seconds(value, field)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise InvalidParameterError(field, value, "a finite real number")
    return float(value)


def _vector(field: str, value: Any, *, min_len: int = 1) -> np.ndarray:
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError(field, value, "a sequence of finite numbers") from None
    if arr.ndim != 1 or arr.size < min_len or not np.all(np.isfinite(arr)):
        raise InvalidParameterError(field, value, f"a 1-D sequence of at least {min_len} finite numbers")
    return arr


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, dtype=float)
    arr.flags.writeable = False
    return arr


def _fmt(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return repr(value.tolist())
    if _is_sympy(value):
        return str(value)
    return repr(value)


def _construct(cls: type, params: dict[str, Any]) -> Distribution:
    return cls(**params)


def _sample_exponential_mixture(gen: np.random.Generator, total: int, probs: np.ndarray, rates: np.ndarray):
    idx = gen.choice(probs.size, size=total, p=probs)
    return gen.exponential(size=total) / rates[idx]


# ----------------------------------------------------------------------------- base class


class Distribution(abc.ABC):
    """A probability law of a nonnegative duration (Normal excepted), in seconds.

    Subclasses are immutable, compare equal when their parameters are equal,
    and print as the call that builds them.
    """

    __slots__ = ()

    # -- parameters, identity
    @abc.abstractmethod
    def _params(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this distribution."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_fmt(v)}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def _key(self) -> tuple:
        return tuple(
            (k, tuple(np.ravel(v).tolist()) + v.shape if isinstance(v, np.ndarray) else v)
            for k, v in self._params().items()
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one instead")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):
        return (_construct, (type(self), self._params()))

    def _set(self, **values: Any) -> None:
        for k, v in values.items():
            object.__setattr__(self, k, v)

    # -- symbolic support
    @property
    def is_symbolic(self) -> bool:
        """True if a parameter is a SymPy expression (moments are then SymPy expressions)."""
        return any(_checks.is_symbolic(v) for v in self._params().values())

    def subs(self, mapping: Mapping[Any, Any]) -> Distribution:
        """Substitute values for SymPy symbols in the parameters.

        Parameters that become numbers are converted to floats.

        Examples
        --------
        >>> import sympy
        >>> lam = sympy.Symbol("lambda", positive=True)
        >>> Exponential(lam).subs({lam: 4})
        Exponential(rate=4.0)
        """
        params = {}
        for k, v in self._params().items():
            if _is_sympy(v):
                v = v.subs(mapping)
                if not _checks.is_symbolic(v):
                    v = float(v)
            params[k] = v
        return type(self)(**params)

    def check_numeric(self, what: str) -> None:
        """Raise :class:`~queuesgd.errors.InvalidParameterError` if a parameter is symbolic.

        ``what`` names the operation that needs numbers (``"cdf()"``).

        Examples
        --------
        >>> import sympy
        >>> Exponential(sympy.Symbol("lam", positive=True)).check_numeric("cdf()")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: Exponential.rate: got lam; accepted: a number: cdf() needs ...
        """
        for k, v in self._params().items():
            if _checks.is_symbolic(v):
                raise InvalidParameterError(
                    f"{type(self).__name__}.{k}",
                    v,
                    f"a number: {what} needs numeric parameters; substitute the symbols first, "
                    "e.g. dist.subs({symbol: value})",
                )

    # -- moments
    @property
    @abc.abstractmethod
    def mean(self) -> Any:
        """Expected value E[X] (seconds)."""

    @property
    @abc.abstractmethod
    def variance(self) -> Any:
        """Variance Var[X] (seconds squared)."""

    @property
    def std(self) -> Any:
        """Standard deviation."""
        var = self.variance
        if _is_sympy(var):
            import sympy

            return sympy.sqrt(var)
        return math.sqrt(var)

    @property
    def scv(self) -> Any:
        """Squared coefficient of variation Var[X] / E[X]**2 (0 for a law concentrated at 0)."""
        mean, var = self.mean, self.variance
        if _is_sympy(mean) or _is_sympy(var):
            import sympy

            return sympy.simplify(var / mean**2)
        if mean == 0:
            return 0.0 if var == 0 else math.inf
        return var / mean**2

    # -- sampling and CDF
    def sample(self, rng: np.random.Generator | int, size: int | tuple[int, ...] | None = None) -> Any:
        """Draw samples.

        Parameters
        ----------
        rng : numpy.random.Generator or int
            Source of randomness; an integer is used as a seed for ``numpy.random.default_rng``.
        size : int or tuple of int, optional
            Output shape; ``None`` returns one float.

        Returns
        -------
        float or numpy.ndarray

        Examples
        --------
        >>> Exponential(2.0).sample(0, size=3).shape
        (3,)
        """
        gen = as_generator(rng)
        shape = _size(size)
        self.check_numeric("sample()")
        total = 1 if shape is None else math.prod(shape)
        out = np.asarray(self._sample(gen, total), dtype=float).reshape(-1)
        return float(out[0]) if shape is None else out.reshape(shape)

    @abc.abstractmethod
    def _sample(self, gen: np.random.Generator, total: int) -> np.ndarray:
        """``total`` independent samples as a 1-D array."""

    def cdf(self, x: ArrayLike) -> Any:
        """Cumulative distribution function P(X <= x), vectorized over ``x``.

        Examples
        --------
        >>> Deterministic(1.0).cdf([0.5, 1.0, 2.0])
        array([0., 1., 1.])
        """
        self.check_numeric("cdf()")
        try:
            arr = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError("x", x, "a number or an array of numbers") from None
        if np.any(np.isnan(arr)):
            raise InvalidParameterError("x", x, "numbers (not NaN)")
        out = np.asarray(self._cdf(arr), dtype=float)
        return float(out) if out.ndim == 0 else out

    @abc.abstractmethod
    def _cdf(self, x: np.ndarray) -> np.ndarray:
        """CDF at the (NaN-free) array ``x``."""

    # -- transformations
    def scaled(self, factor: Any) -> Distribution:
        """The law of ``factor * X`` (e.g. a worker ``factor`` times slower).

        Examples
        --------
        >>> Exponential(mean=1.0).scaled(3.0)
        Exponential(rate=0.3333333333333333)
        """
        if isinstance(factor, numbers.Integral) and not isinstance(factor, bool) and self.is_symbolic:
            import sympy

            factor = sympy.Integer(int(factor))  # keep symbolic results exact: 2/lambda, not 2.0/lambda
        f = _checks.positive(f"{type(self).__name__}.scaled.factor", factor, symbolic=self._symbolic_ok)
        return self._scaled(f)

    _symbolic_ok = False

    @abc.abstractmethod
    def _scaled(self, factor: Any) -> Distribution: ...

    def to_phase_type(self) -> PhaseType:
        """The same law as a :class:`PhaseType`, where that is exact.

        Raises
        ------
        NotRepresentable
            For laws that are not phase-type; use :func:`fit_phase_type` for a
            two-moment approximation.
        """
        raise NotRepresentable(
            f"{type(self).__name__} is not a phase-type law; use fit_phase_type(dist) for a "
            "phase-type law with the same mean and scv"
        )


# ----------------------------------------------------------------------------- laws


class Exponential(Distribution):
    """Exponential law with ``rate`` (mean ``1/rate``).

    Give exactly one of ``rate`` or ``mean`` (``mean`` may be a unit string).
    Either may be a SymPy expression.

    Mean ``1/rate``, variance ``1/rate**2``, scv 1.

    Examples
    --------
    >>> Exponential(mean="20ms")
    Exponential(rate=50.0)
    >>> import sympy
    >>> lam = sympy.Symbol("lambda", positive=True)
    >>> Exponential(lam).mean
    1/lambda
    """

    __slots__ = ("_rate",)
    _symbolic_ok = True

    def __init__(self, rate: Any = None, *, mean: Any = None) -> None:
        if (rate is None) == (mean is None):
            raise InvalidParameterError(
                "Exponential.rate",
                rate,
                "exactly one of rate= or mean=, e.g. Exponential(2.0) or Exponential(mean=0.5)",
            )
        if rate is not None:
            if isinstance(rate, str):
                raise InvalidParameterError(
                    "Exponential.rate", rate, "a number in 1/s; for a mean time use Exponential(mean='2ms')"
                )
            rate = _checks.positive("Exponential.rate", rate, symbolic=True)
        else:
            rate = 1 / _time("Exponential.mean", mean, symbolic=True)
        self._set(_rate=rate)

    def _params(self) -> dict[str, Any]:
        return {"rate": self._rate}

    @property
    def rate(self) -> Any:
        """Rate (1/s)."""
        return self._rate

    @property
    def mean(self) -> Any:
        return 1 / self._rate

    @property
    def variance(self) -> Any:
        return 1 / self._rate**2

    @property
    def scv(self) -> Any:
        if self.is_symbolic:
            import sympy

            return sympy.Integer(1)
        return 1.0

    def _sample(self, gen, total):
        return gen.exponential(1 / float(self._rate), size=total)

    def _cdf(self, x):
        return -np.expm1(-float(self._rate) * np.maximum(x, 0.0))

    def _scaled(self, factor):
        return Exponential(self._rate / factor)

    def to_phase_type(self) -> PhaseType:
        self.check_numeric("to_phase_type()")
        return PhaseType([1.0], [[-float(self._rate)]])


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
        self._set(_value=_time("Deterministic.value", value, symbolic=True, allow_zero=True))

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
        if _is_sympy(self._value):
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

    def _scaled(self, factor):
        return Deterministic(self._value * factor)


class Erlang(Distribution):
    """Erlang law: the sum of ``k`` independent exponential phases, each of rate ``rate``.

    Give ``rate`` or ``mean`` (``mean = k / rate``; a unit string is accepted).
    ``rate`` may be a SymPy expression.

    Mean ``k/rate``, variance ``k/rate**2``, scv ``1/k``.

    Examples
    --------
    >>> Erlang(3, 6.0).mean
    0.5
    >>> Erlang(2, mean=1.0)
    Erlang(k=2, rate=2.0)
    """

    __slots__ = ("_k", "_rate")
    _symbolic_ok = True

    def __init__(self, k: int, rate: Any = None, *, mean: Any = None) -> None:
        k = _checks.integer("Erlang.k", k, minimum=1)
        if (rate is None) == (mean is None):
            raise InvalidParameterError(
                "Erlang.rate",
                rate,
                "exactly one of rate= or mean=, e.g. Erlang(3, 6.0) or Erlang(3, mean=0.5)",
            )
        if rate is not None:
            rate = _checks.positive("Erlang.rate", rate, symbolic=True)
        else:
            rate = k / _time("Erlang.mean", mean, symbolic=True)
        self._set(_k=k, _rate=rate)

    def _params(self) -> dict[str, Any]:
        return {"k": self._k, "rate": self._rate}

    @property
    def k(self) -> int:
        """Number of phases."""
        return self._k

    @property
    def rate(self) -> Any:
        """Rate of each phase (1/s)."""
        return self._rate

    @property
    def mean(self) -> Any:
        return self._k / self._rate

    @property
    def variance(self) -> Any:
        return self._k / self._rate**2

    @property
    def scv(self) -> Any:
        if self.is_symbolic:
            import sympy

            return sympy.Rational(1, self._k)
        return 1.0 / self._k

    def _sample(self, gen, total):
        return gen.gamma(self._k, 1 / float(self._rate), size=total)

    def _cdf(self, x):
        return special.gammainc(self._k, float(self._rate) * np.maximum(x, 0.0))

    def _scaled(self, factor):
        return Erlang(self._k, self._rate / factor)

    def to_phase_type(self) -> PhaseType:
        self.check_numeric("to_phase_type()")
        return _erlang_chain(self._k, float(self._rate), np.eye(1, self._k)[0])


class HyperExponential(Distribution):
    """Mixture of exponentials: with probability ``probs[i]`` an Exponential(``rates[i]``).

    Mean ``sum(p_i / r_i)``, second moment ``sum(2 p_i / r_i**2)``.

    Examples
    --------
    >>> h = HyperExponential([0.5, 0.5], [1.0, 2.0])
    >>> h.mean, h.variance
    (0.75, 0.6875)
    """

    __slots__ = ("_probs", "_rates")

    def __init__(self, probs: ArrayLike, rates: ArrayLike) -> None:
        p = _vector("HyperExponential.probs", probs)
        r = _vector("HyperExponential.rates", rates)
        if p.size != r.size:
            raise InvalidParameterError(
                "HyperExponential.rates", rates, f"as many rates as probabilities ({p.size})"
            )
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise InvalidParameterError("HyperExponential.probs", probs, "probabilities >= 0 that sum to 1")
        if np.any(r <= 0):
            raise InvalidParameterError("HyperExponential.rates", rates, "rates > 0")
        self._set(_probs=_frozen(p), _rates=_frozen(r))

    def _params(self) -> dict[str, Any]:
        return {"probs": self._probs, "rates": self._rates}

    @property
    def probs(self) -> np.ndarray:
        """Branch probabilities (read-only array)."""
        return self._probs

    @property
    def rates(self) -> np.ndarray:
        """Branch rates (read-only array)."""
        return self._rates

    @property
    def mean(self) -> float:
        return float(np.sum(self._probs / self._rates))

    @property
    def variance(self) -> float:
        m2 = float(np.sum(2 * self._probs / self._rates**2))
        return m2 - self.mean**2

    def _sample(self, gen, total):
        return _sample_exponential_mixture(gen, total, self._probs, self._rates)

    def _cdf(self, x):
        xx = np.maximum(x, 0.0)[..., None]
        return 1.0 - np.sum(self._probs * np.exp(-self._rates * xx), axis=-1)

    def _scaled(self, factor):
        return HyperExponential(self._probs, self._rates / factor)

    def to_phase_type(self) -> PhaseType:
        return PhaseType(self._probs, np.diag(-self._rates))


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
        m = _real("Normal.mean", mean, time=True)
        s = _time("Normal.std", std)
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

    def _sample(self, gen, total):
        return gen.normal(self._mean, self._std, size=total)

    def _cdf(self, x):
        return special.ndtr((x - self._mean) / self._std)

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
        self._set(_mu=_real("LogNormal.mu", mu), _sigma=_checks.positive("LogNormal.sigma", sigma))

    @classmethod
    def from_mean_scv(cls, mean: Any, scv: Any) -> LogNormal:
        """The log-normal law with the given mean (> 0) and scv (> 0)."""
        m = _time("LogNormal.mean", mean)
        c = _checks.positive("LogNormal.scv", scv)
        s2 = math.log1p(c)
        return cls(math.log(m) - s2 / 2, math.sqrt(s2))

    @classmethod
    def from_mean_std(cls, mean: Any, std: Any) -> LogNormal:
        """The log-normal law with the given mean (> 0) and standard deviation (> 0)."""
        m = _time("LogNormal.mean", mean)
        s = _time("LogNormal.std", std)
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
        b = _checks.positive("Gamma.rate", rate) if rate is not None else a / _time("Gamma.mean", mean)
        self._set(_shape=a, _rate=b)

    @classmethod
    def from_mean_scv(cls, mean: Any, scv: Any) -> Gamma:
        """The gamma law with the given mean (> 0) and scv (> 0): shape ``1/scv``."""
        m = _time("Gamma.mean", mean)
        c = _checks.positive("Gamma.scv", scv)
        return cls(1 / c, mean=m)

    @classmethod
    def from_mean_std(cls, mean: Any, std: Any) -> Gamma:
        """The gamma law with the given mean (> 0) and standard deviation (> 0)."""
        m = _time("Gamma.mean", mean)
        s = _time("Gamma.std", std)
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
        s = _vector("Empirical.samples", samples)
        if np.any(s < 0):
            raise InvalidParameterError("Empirical.samples", samples, "durations >= 0")
        self._set(_samples=_frozen(np.sort(s)))

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

    def _scaled(self, factor):
        return Empirical(self._samples * factor)


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
        self._set(_base=base, _shift=_time("Shifted.shift", shift, allow_zero=True, symbolic=True))

    def _params(self) -> dict[str, Any]:
        return {"base": self._base, "shift": self._shift}

    def _key(self) -> tuple:
        return (self._base._key(), type(self._base).__name__, self._shift)

    @property
    def is_symbolic(self) -> bool:
        return self._base.is_symbolic or _checks.is_symbolic(self._shift)

    def subs(self, mapping: Mapping[Any, Any]) -> Distribution:
        shift = self._shift
        if _is_sympy(shift):
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

    def _scaled(self, factor):
        return Shifted(self._base.scaled(factor), self._shift * factor)


class PhaseType(Distribution):
    """Continuous phase-type law: time to absorption of a CTMC.

    Parameters
    ----------
    alpha : array_like, shape (n,)
        Initial probabilities of the transient phases (>= 0, sum <= 1; the
        remainder ``1 - sum(alpha)`` is an atom at 0).
    T : array_like, shape (n, n)
        Sub-generator: off-diagonal entries >= 0, row sums <= 0, nonsingular
        (absorption is certain from every phase).

    Notes
    -----
    ``E[X**k] = k! alpha (-T)**-k 1`` and ``P(X <= x) = 1 - alpha expm(T x) 1``
    (Neuts 1981).

    Examples
    --------
    >>> ph = PhaseType([1.0, 0.0], [[-2.0, 2.0], [0.0, -2.0]])  # Erlang(2, 2.0)
    >>> ph.mean, ph.variance, ph.phases
    (1.0, 0.5, 2)
    """

    __slots__ = ("_alpha", "_T")

    def __init__(self, alpha: ArrayLike, T: ArrayLike) -> None:
        a = _vector("PhaseType.alpha", alpha)
        try:
            t = np.array(T, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError("PhaseType.T", T, "a square matrix of finite numbers") from None
        n = a.size
        if t.shape != (n, n) or not np.all(np.isfinite(t)):
            raise InvalidParameterError(
                "PhaseType.T", T, f"a {n}x{n} matrix of finite numbers (alpha has {n})"
            )
        if np.any(a < 0) or a.sum() > 1 + 1e-9 or a.sum() <= 0:
            raise InvalidParameterError("PhaseType.alpha", alpha, "entries >= 0 with 0 < sum <= 1")
        off = t - np.diag(np.diag(t))
        if np.any(off < 0):
            raise InvalidParameterError("PhaseType.T", T, "a sub-generator: off-diagonal entries >= 0")
        scale = float(np.max(np.abs(t))) if t.size else 0.0
        if np.any(t.sum(axis=1) > 1e-9 * scale):
            raise InvalidParameterError("PhaseType.T", T, "a sub-generator: row sums <= 0")
        if scale == 0 or np.linalg.cond(t) > 1e14:
            raise InvalidParameterError(
                "PhaseType.T", T, "a nonsingular sub-generator (absorption certain from every phase)"
            )
        self._set(_alpha=_frozen(a), _T=_frozen(t))

    def _params(self) -> dict[str, Any]:
        return {"alpha": self._alpha, "T": self._T}

    @property
    def alpha(self) -> np.ndarray:
        """Initial probabilities (read-only array)."""
        return self._alpha

    @property
    def T(self) -> np.ndarray:
        """Sub-generator (read-only array)."""
        return self._T

    @property
    def phases(self) -> int:
        """Number of transient phases."""
        return self._alpha.size

    def moment(self, k: int) -> float:
        """Raw moment ``E[X**k] = k! alpha (-T)**-k 1``.

        Examples
        --------
        >>> Exponential(2.0).to_phase_type().moment(2)
        0.5
        """
        k = _checks.integer("PhaseType.moment.k", k, minimum=0)
        lu = linalg.lu_factor(-self._T)
        v = np.ones(self.phases)
        for _ in range(k):
            v = linalg.lu_solve(lu, v)
        return float(math.factorial(k) * self._alpha @ v)

    @property
    def mean(self) -> float:
        return self.moment(1)

    @property
    def variance(self) -> float:
        m1 = self.moment(1)
        return self.moment(2) - m1**2

    def _sample(self, gen, total):
        # Simulate the absorbing CTMC for all samples at once: each round moves every
        # still-transient sample by one jump; phase n is the absorbing state.
        n = self.phases
        q = -np.diag(self._T)
        jump = self._T / q[:, None]
        np.fill_diagonal(jump, 0.0)
        exit_ = np.clip(1.0 - jump.sum(axis=1), 0.0, None)
        cum = np.cumsum(np.column_stack([jump, exit_]), axis=1)
        cum /= cum[:, -1:]
        # Row-wise inverse-CDF lookup in one searchsorted: row i is shifted by 2*i.
        flat = (cum + 2.0 * np.arange(n)[:, None]).ravel()
        init = np.cumsum(np.append(self._alpha, max(0.0, 1.0 - self._alpha.sum())))
        init /= init[-1]
        state = np.minimum(np.searchsorted(init, gen.random(total), side="right"), n)
        times = np.zeros(total)
        active = np.flatnonzero(state < n)
        while active.size:
            s = state[active]
            times[active] += gen.exponential(size=active.size) / q[s]
            u = gen.random(active.size)
            nxt = np.searchsorted(flat, u + 2.0 * s, side="right") - s * (n + 1)
            nxt = np.minimum(nxt, n)
            state[active] = nxt
            active = active[nxt < n]
        return times

    def _cdf(self, x):
        # One (batched) matrix exponential per distinct point, in chunks that bound memory.
        points, inverse = np.unique(np.maximum(x, 0.0), return_inverse=True)
        n = self.phases
        surv = np.empty(points.size)
        chunk = max(1, 2**21 // (n * n))
        for start in range(0, points.size, chunk):
            xs = points[start : start + chunk]
            expo = linalg.expm(self._T[None, :, :] * xs[:, None, None])
            surv[start : start + chunk] = (expo @ np.ones(n)) @ self._alpha
        out = np.clip(1.0 - surv, 0.0, 1.0)[inverse].reshape(x.shape)
        return np.where(x < 0, 0.0, out)

    def _scaled(self, factor):
        return PhaseType(self._alpha, self._T / factor)

    def to_phase_type(self) -> PhaseType:
        return self


# ----------------------------------------------------------------------------- fitting


def _erlang_chain(k: int, rate: float, alpha: np.ndarray) -> PhaseType:
    """Phases 0..k-1 in series, each of rate ``rate``, entered with ``alpha``."""
    T = np.diag(np.full(k, -rate)) + np.diag(np.full(k - 1, rate), 1)
    return PhaseType(alpha, T)


def fit_phase_type(dist_or_mean: Distribution | Any, scv: Any = None, *, k_max: int = 100) -> PhaseType:
    """A phase-type law with the given mean and squared coefficient of variation.

    Two-moment matching:

    - ``scv < 1``: mixture of Erlang(k-1) and Erlang(k) with a common phase
      rate, ``k = ceil(1/scv)`` (Tijms 1994, *Stochastic Models*, sec. 2.3).
      When ``1/scv > k_max`` (including a deterministic law, scv 0) the result
      is the Erlang law of ``k_max`` phases with the right mean, so **its scv
      is ``1/k_max``, not the one asked for**.
    - ``scv == 1``: exponential.
    - ``scv > 1``: two-phase hyperexponential with balanced means,
      ``p1 = (1 + sqrt((scv-1)/(scv+1)))/2``, ``mu_i = 2 p_i / mean``
      (Whitt 1982, "Approximating a point process by a renewal process, I").

    Parameters
    ----------
    dist_or_mean : Distribution or float or str
        A numeric distribution (its mean and scv are matched), or the mean
        (seconds, unit string accepted) with ``scv`` given.
    scv : float, optional
        Squared coefficient of variation (>= 0); only with a mean.
    k_max : int
        Largest number of Erlang phases used for small scv.

    Returns
    -------
    PhaseType

    Examples
    --------
    >>> ph = fit_phase_type(2.0, scv=0.3)
    >>> ph.phases, round(ph.mean, 12), round(ph.scv, 12)
    (4, 2.0, 0.3)
    >>> round(fit_phase_type(Deterministic(1.0), k_max=10).scv, 12)  # k_max limits a small scv
    0.1
    """
    k_max = _checks.integer("fit_phase_type.k_max", k_max, minimum=1)
    if isinstance(dist_or_mean, Distribution):
        if scv is not None:
            raise InvalidParameterError(
                "fit_phase_type.scv", scv, "None when a distribution is given (its own scv is used)"
            )
        dist_or_mean.check_numeric("fit_phase_type()")
        mean = _checks.positive("fit_phase_type.mean", float(dist_or_mean.mean))
        c = _checks.positive("fit_phase_type.scv", float(dist_or_mean.scv), allow_zero=True)
    else:
        if scv is None:
            raise InvalidParameterError(
                "fit_phase_type.scv", scv, "a number >= 0 when a mean is given, e.g. fit_phase_type(0.5, 2.0)"
            )
        mean = _time("fit_phase_type.mean", dist_or_mean)
        c = _checks.positive("fit_phase_type.scv", scv, allow_zero=True)

    if c == 1.0:
        return PhaseType([1.0], [[-1.0 / mean]])
    if c > 1.0:
        # Whitt (1982): balanced means p1/mu1 = p2/mu2 = mean/2.
        p1 = 0.5 * (1.0 + math.sqrt((c - 1.0) / (c + 1.0)))
        p = np.array([p1, 1.0 - p1])
        return PhaseType(p, np.diag(-2.0 * p / mean))
    if c * k_max < 1.0:
        return _erlang_chain(k_max, k_max / mean, np.eye(1, k_max)[0])
    # Tijms (1994): with prob. p an Erlang(k-1), else Erlang(k), common rate mu = (k - p) / mean.
    k = max(2, math.ceil(1.0 / c))
    if k > k_max:  # rounding at c * k_max == 1
        k = k_max
    p = (k * c - math.sqrt(max(0.0, k * (1.0 + c) - k * k * c))) / (1.0 + c)
    p = min(max(p, 0.0), 1.0)
    alpha = np.zeros(k)
    alpha[0], alpha[1] = 1.0 - p, p
    return _erlang_chain(k, (k - p) / mean, alpha)


# ----------------------------------------------------------------------------- sums of laws


class Convolution(Distribution):
    """The law of ``X_1 + ... + X_k``, independent, each deterministic, shifted or phase-type.

    Exact: the deterministic parts (and the shifts of :class:`Shifted` parts)
    add up to one constant; the phase-type parts (every law with an exact
    :meth:`~Distribution.to_phase_type`) are chained into one
    :class:`PhaseType` (absorption of one part starts the next). The CDF is
    that of the chain, shifted; samples are sums of samples of the parts.
    A part with no such exact form (log-normal, gamma of non-integer shape,
    empirical) is refused with :class:`~queuesgd.errors.NotRepresentable`:
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
    """Phase-type law of the sum of independent phase-type laws (each absorbs into the next)."""
    out = laws[0]
    for nxt in laws[1:]:
        a, b = out.phases, nxt.phases
        T = np.zeros((a + b, a + b))
        T[:a, :a] = out.T
        exit_a = -np.asarray(out.T).sum(axis=1)
        T[:a, a:] = np.outer(exit_a, nxt.alpha)
        T[a:, a:] = nxt.T
        alpha = np.concatenate([out.alpha, (1.0 - float(np.sum(out.alpha))) * np.asarray(nxt.alpha)])
        out = PhaseType(alpha, T)
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
    return Convolution(*([law] * count))

