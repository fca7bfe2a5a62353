"""The base class of every law: identity, symbolic parameters, moments, sampling, CDF, scaling."""

from __future__ import annotations

import abc
import functools
import math
import numbers
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from queuesgd import _checks
from queuesgd.distributions._helpers import construct, fmt, is_sympy, size_of
from queuesgd.errors import AccuracyWarning, InvalidParameterError, NotRepresentable, warn_user
from queuesgd.rng import as_generator

if TYPE_CHECKING:
    from queuesgd.distributions.phase import PhaseType

__all__ = ["Distribution"]

#: The moments of a law (properties) that :func:`guard_moment` guards in every subclass that defines them.
MOMENTS = ("mean", "variance", "std", "scv")


def guard_moment(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Guard a moment's getter: where a numeric law's moment overflows the range of a double, ``inf``
    with an :class:`~queuesgd.errors.AccuracyWarning` naming the law and the moment.

    Python's floats raise there (``OverflowError`` from ``math.exp`` and ``**``, ``ZeroDivisionError``
    where ``rate**2`` underflows to 0), its division and NumPy's sums give ``inf`` or ``NaN`` silently:
    all of them become ``inf`` and the warning. Symbolic laws are not touched. The one infinite moment
    that is not an overflow, the scv of a law of mean 0 and positive variance (``Normal(0, s)``), is
    returned as ``inf`` without a warning.

    Examples
    --------
    >>> import warnings
    >>> from queuesgd.distributions import LogNormal
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     LogNormal(1000.0, 0.5).mean
    inf
    >>> seen[0].category.__name__
    'AccuracyWarning'
    """

    def guard(fget: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fget)
        def get(self: Distribution, *args: Any) -> Any:
            if self.is_symbolic:
                return fget(self, *args)
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                try:
                    value = fget(self, *args)
                except (OverflowError, ZeroDivisionError):
                    value = math.inf
            if not isinstance(value, float | np.floating) or math.isfinite(value):
                return value
            if not (name == "scv" and value == math.inf and self.mean == 0):
                warn_user(
                    f"{self!r}.{name} overflows the range of a double (about 1.8e308) in its computation: "
                    "returned as inf",
                    AccuracyWarning,
                )
            return math.inf

        return get

    return guard


class Distribution(abc.ABC):
    """A probability law of a nonnegative duration (Normal excepted), in seconds.

    Subclasses are immutable, compare equal when their parameters are equal,
    and print as the call that builds them.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Guard the moments a subclass defines (:data:`MOMENTS`): an overflow is ``inf`` and a warning."""
        super().__init_subclass__(**kwargs)
        for name in MOMENTS:
            prop = cls.__dict__.get(name)
            if isinstance(prop, property) and prop.fget is not None:
                setattr(cls, name, property(guard_moment(name)(prop.fget), doc=prop.__doc__))

    #: Whether :meth:`sf` has a formula of its own (else ``1 - cdf``, exact only to 1e-16 absolute).
    _exact_sf: ClassVar[bool] = False

    # -- parameters, identity
    @abc.abstractmethod
    def _params(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this distribution."""

    def parameters(self) -> dict[str, Any]:
        """The constructor's keyword arguments that rebuild this law (``type(law)(**law.parameters())``).

        Examples
        --------
        >>> from queuesgd.distributions import Erlang
        >>> Erlang(3, 2.0).parameters()
        {'k': 3, 'rate': 2.0}
        """
        return dict(self._params())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={fmt(v)}" for k, v in self._params().items())
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
        return (construct, (type(self), self._params()))

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
        >>> from queuesgd.distributions import Exponential
        >>> lam = sympy.Symbol("lambda", positive=True)
        >>> Exponential(lam).subs({lam: 4})
        Exponential(rate=4.0)
        """
        params = {}
        for k, v in self._params().items():
            if is_sympy(v):
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
        >>> from queuesgd.distributions import Exponential
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
    @guard_moment("std")
    def std(self) -> Any:
        """Standard deviation."""
        var = self.variance
        if is_sympy(var):
            import sympy

            return sympy.sqrt(var)
        return math.sqrt(var)

    @property
    @guard_moment("scv")
    def scv(self) -> Any:
        """Squared coefficient of variation ``Var[X] / E[X]**2`` (0 for a law concentrated at 0)."""
        mean, var = self.mean, self.variance
        if is_sympy(mean) or is_sympy(var):
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
        >>> from queuesgd.distributions import Exponential
        >>> Exponential(2.0).sample(0, size=3).shape
        (3,)
        """
        gen = as_generator(rng)
        shape = size_of(size)
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
        >>> from queuesgd.distributions import Deterministic
        >>> Deterministic(1.0).cdf([0.5, 1.0, 2.0])
        array([0., 1., 1.])
        """
        out = np.asarray(self._cdf(self._points(x, "cdf()")), dtype=float)
        return float(out) if out.ndim == 0 else out

    def sf(self, x: ArrayLike) -> Any:
        """Survival function P(X > x), vectorized over ``x``.

        Where :attr:`exact_sf` holds it has a formula of its own, accurate far in the tail where
        ``1 - cdf(x)`` rounds to 0 (a lognormal's, a gamma's); otherwise it is ``1 - cdf(x)``.

        Examples
        --------
        >>> from queuesgd.distributions import Exponential, LogNormal
        >>> float(Exponential(1.0).sf(50.0)) == float(np.exp(-50.0)), float(1.0 - Exponential(1.0).cdf(50.0))
        (True, 0.0)
        >>> LogNormal(0.0, 1.0).exact_sf
        True
        """
        out = np.asarray(self._sf(self._points(x, "sf()")), dtype=float)
        return float(out) if out.ndim == 0 else out

    @property
    def exact_sf(self) -> bool:
        """Whether :meth:`sf` is computed by its own formula (else as ``1 - cdf``)."""
        return self._exact_sf

    @property
    def lower_bound(self) -> float:
        """A number the law puts no mass below: 0 for a duration (every law), ``-inf`` for :class:`Normal`.

        What the order statistics' quadrature starts from (:func:`~queuesgd.orderstats.integration_range`):
        a property of the law's family, not read off ``cdf(0)``, which rounding can leave a few 1e-16 above
        0 (a phase-type law whose ``alpha`` sums to ``1 - 1.1e-16``). A shifted law adds its shift.

        Examples
        --------
        >>> from queuesgd.distributions import Exponential, Normal, Shifted
        >>> [law.lower_bound for law in (Exponential(1.0), Normal(5.0, 1.0), Shifted(Exponential(1.0), 2.0))]
        [0.0, -inf, 2.0]
        """
        return 0.0

    def _points(self, x: ArrayLike, what: str) -> np.ndarray:
        """``x`` as a NaN-free float array, for :meth:`cdf` and :meth:`sf` (a symbolic law refused)."""
        self.check_numeric(what)
        arr = _checks.reals("x", x, accepted="a number or an array of numbers")
        if np.any(np.isnan(arr)):
            raise InvalidParameterError("x", x, "numbers (not NaN)")
        return arr

    def _sf(self, x: np.ndarray) -> np.ndarray:
        """Survival at the (NaN-free) array ``x``: ``1 - cdf`` unless a law has a formula of its own."""
        return 1.0 - np.asarray(self._cdf(x), dtype=float)

    @abc.abstractmethod
    def _cdf(self, x: np.ndarray) -> np.ndarray:
        """CDF at the (NaN-free) array ``x``."""

    # -- transformations
    def scaled(self, factor: Any) -> Distribution:
        """The law of ``factor * X`` (e.g. a worker ``factor`` times slower).

        Examples
        --------
        >>> from queuesgd.distributions import Exponential
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
