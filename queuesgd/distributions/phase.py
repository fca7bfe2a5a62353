"""Phase-type laws -- exponential, Erlang, hyperexponential, general :class:`PhaseType` -- and fitting."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg, special

from queuesgd import _checks
from queuesgd.distributions._helpers import frozen, sample_exponential_mixture, time_value, vector_value
from queuesgd.distributions.base import Distribution, guard_moment
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError

__all__ = [
    "MAX_FIT_SCV",
    "MAX_PHASES",
    "Erlang",
    "Exponential",
    "HyperExponential",
    "PhaseType",
    "check_phases",
    "fit_phase_type",
]

#: Most phases of a phase-type law built here: its dense ``k x k`` sub-generator is 8 MB, a CDF point's
#: matrix exponential some ``10**9`` operations; a CTMC of such laws is larger still.
MAX_PHASES = 1_000

#: Largest order of :meth:`PhaseType.moment`: ``k!`` alone passes the double range at 171.
_MAX_MOMENT = 170

#: Largest scv :func:`fit_phase_type` fits: its two rates differ by a factor of about the scv, and
#: ``PhaseType`` refuses a sub-generator whose rates differ by 1e14 as singular.
MAX_FIT_SCV = 1e13


def check_phases(count: int, what: str, *, scv: float | None = None) -> int:
    """``count`` if a phase-type law of that many phases may be built, else a clear error (before allocating).

    Parameters
    ----------
    count : int
        Phases the law would have.
    what : str
        The law, for the message (``"Erlang(k=1000000000)"``).
    scv : float, optional
        Its squared coefficient of variation, to say how nearly constant it is.

    Raises
    ------
    StateSpaceTooLargeError
        Above :data:`MAX_PHASES`, with the ways on: a two-moment fit of fewer
        phases, a method that needs no phases, or a deterministic law.
    InvalidParameterError
        ``count`` not an integer >= 1 (``-1``, ``nan``, ``2.5``, ``True``), ``what`` not a
        non-empty string, ``scv`` not a finite number >= 0.

    Examples
    --------
    >>> check_phases(20, "Erlang(k=20)")
    20
    >>> check_phases(10**9, "Erlang(k=1000000000)", scv=1e-9)    # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: Erlang(k=1000000000) has 1,000,000,000 phases; ...
    >>> check_phases(-1, "x")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: count: got -1; accepted: an integer >= 1
    """
    count = _checks.integer("count", count, minimum=1)
    what = _checks.name("what", what)
    if scv is not None:
        scv = _checks.positive("scv", scv, allow_zero=True)
    if count > MAX_PHASES:
        near = (
            f", or a deterministic law (--compute deterministic): with scv {scv:.3g} it is nearly constant"
            if scv is not None and scv < 0.01
            else ""
        )
        raise StateSpaceTooLargeError(
            f"{what} has {count:,} phases; a phase-type law (a dense k x k sub-generator) is built with at "
            f"most {MAX_PHASES:,}: use fit_phase_type(law, k_max=...) for a two-moment law of fewer "
            f"phases, a method that builds no phases (simulate, closed_form, mva){near}"
        )
    return count


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
            rate = 1 / time_value("Exponential.mean", mean, symbolic=True)
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

    _exact_sf = True

    def _sf(self, x):
        return np.exp(-float(self._rate) * np.maximum(x, 0.0))

    def _scaled(self, factor):
        return Exponential(self._rate / factor)

    def to_phase_type(self) -> PhaseType:
        self.check_numeric("to_phase_type()")
        return PhaseType([1.0], [[-float(self._rate)]])


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
        k = _checks.integer("Erlang.k", k, minimum=1, maximum=2**53)  # exact as a float: the mean k / rate
        if (rate is None) == (mean is None):
            raise InvalidParameterError(
                "Erlang.rate",
                rate,
                "exactly one of rate= or mean=, e.g. Erlang(3, 6.0) or Erlang(3, mean=0.5)",
            )
        if rate is not None:
            rate = _checks.positive("Erlang.rate", rate, symbolic=True)
        else:
            rate = k / time_value("Erlang.mean", mean, symbolic=True)
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

    _exact_sf = True

    def _sf(self, x):
        return special.gammaincc(self._k, float(self._rate) * np.maximum(x, 0.0))

    def _scaled(self, factor):
        return Erlang(self._k, self._rate / factor)

    def to_phase_type(self) -> PhaseType:
        self.check_numeric("to_phase_type()")
        check_phases(self._k, f"Erlang(k={self._k})", scv=1.0 / self._k)
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
        p = vector_value("HyperExponential.probs", probs)
        r = vector_value("HyperExponential.rates", rates)
        if p.size != r.size:
            raise InvalidParameterError(
                "HyperExponential.rates", rates, f"as many rates as probabilities ({p.size})"
            )
        if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise InvalidParameterError("HyperExponential.probs", probs, "probabilities >= 0 that sum to 1")
        if np.any(r <= 0):
            raise InvalidParameterError("HyperExponential.rates", rates, "rates > 0")
        self._set(_probs=frozen(p), _rates=frozen(r))

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
        return sample_exponential_mixture(gen, total, self._probs, self._rates)

    def _cdf(self, x):
        xx = np.maximum(x, 0.0)[..., None]
        return np.sum(self._probs * -np.expm1(-self._rates * xx), axis=-1)

    _exact_sf = True

    def _sf(self, x):
        xx = np.maximum(x, 0.0)[..., None]
        return np.sum(self._probs * np.exp(-self._rates * xx), axis=-1)

    def _scaled(self, factor):
        return HyperExponential(self._probs, self._rates / factor)

    def to_phase_type(self) -> PhaseType:
        return PhaseType(self._probs, np.diag(-self._rates))


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
        a = vector_value("PhaseType.alpha", alpha)
        check_phases(a.size, "PhaseType")
        t = _checks.reals("PhaseType.T", T, accepted="a square matrix of finite numbers")
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
        self._set(_alpha=frozen(a), _T=frozen(t))

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
    def exit_rates(self) -> np.ndarray:
        """Rates of absorption from each phase, ``-T 1``; a row sum within its rounding of 0 is 0.

        A row's sum is known to ``n eps sum_j |T_ij|`` (``n`` phases, ``eps``
        the double's epsilon): an absorption rate below that is not in ``T``.
        A chained law's rows that do not absorb sum to about +-1e-16 of their
        rates, not 0 (:func:`~queuesgd.distributions.sum_of` of a
        hyperexponential, 41% of random two-branch laws); read as rates they
        gave a Petri net an exit transition of rate 4e-16 beside rates of 5.

        Examples
        --------
        >>> HyperExponential([0.3, 0.7], [1.0, 4.0]).to_phase_type().exit_rates.tolist()
        [1.0, 4.0]
        >>> Erlang(2, 3.0).to_phase_type().exit_rates.tolist()
        [0.0, 3.0]
        """
        rates = -self._T.sum(axis=1)
        rounding = self.phases * np.finfo(float).eps * np.abs(self._T).sum(axis=1)
        return np.where(rates > rounding, rates, 0.0)

    @property
    def phases(self) -> int:
        """Number of transient phases."""
        return self._alpha.size

    @guard_moment("moment")
    def moment(self, k: int) -> float:
        """Raw moment ``E[X**k] = k! alpha (-T)**-k 1`` (``inf``, with a warning, beyond the double range).

        Examples
        --------
        >>> Exponential(2.0).to_phase_type().moment(2)
        0.5
        """
        return self._moment(_checks.integer("PhaseType.moment.k", k, minimum=0, maximum=_MAX_MOMENT))

    def _moment(self, k: int) -> float:
        """``E[X**k]``, ``inf`` where it leaves the double range (the guarded properties warn)."""
        lu = linalg.lu_factor(-self._T)
        v = np.ones(self.phases)
        for _ in range(k):
            v = linalg.lu_solve(lu, v)
            if not np.all(np.isfinite(v)):  # beyond the double range (and lu_solve refuses inf)
                return math.inf
        return float(math.factorial(k) * self._alpha @ v)

    @property
    def mean(self) -> float:
        return self._moment(1)

    @property
    def variance(self) -> float:
        m1 = self._moment(1)
        return self._moment(2) - m1**2

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
    >>> from queuesgd.distributions import Deterministic
    >>> round(fit_phase_type(Deterministic(1.0), k_max=10).scv, 12)  # k_max limits a small scv
    0.1
    """
    k_max = _checks.integer("fit_phase_type.k_max", k_max, minimum=1)
    if k_max > MAX_PHASES:
        raise InvalidParameterError("fit_phase_type.k_max", k_max, f"an integer from 1 to {MAX_PHASES:,}")
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
        mean = time_value("fit_phase_type.mean", dist_or_mean)
        c = _checks.positive("fit_phase_type.scv", scv, allow_zero=True)

    if c == 1.0:
        return PhaseType([1.0], [[-1.0 / mean]])
    if c > MAX_FIT_SCV:
        raise InvalidParameterError(
            "fit_phase_type.scv",
            c,
            f"at most {MAX_FIT_SCV:g}: the fit's second rate would be about 1/scv of its first, a "
            "sub-generator too close to singular",
        )
    if c > 1.0:
        # Whitt (1982): balanced means p1/mu1 = p2/mu2 = mean/2.
        root = math.sqrt((c - 1.0) / (c + 1.0))
        p2 = 1.0 / ((c + 1.0) * (1.0 + root))  # (1 - root) / 2 without its cancellation at a large scv
        # p1 = 1 - p2, not (1 + root) / 2: the two then sum to exactly 1 in floating point (the latter left
        # 1 - 1.1e-16 at scv 12.04 or 1000, an atom of 1.1e-16 at 0 that the law does not have).
        p = np.array([1.0 - p2, p2])
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
