"""Order statistics of independent durations: the clock of every barrier.

A synchronous step waits for the slowest worker (the maximum), a step with
``b`` backup workers for the ``(n - b)``-th fastest, a cutoff for whoever is
done by then. This module computes those expectations exactly where a closed
form exists and by adaptive quadrature of the order statistic's survival
function otherwise (:mod:`queuesgd.orderstats_numerics`: split where the
survival falls to each decade, to the end of the tail, or a
:class:`~queuesgd.errors.ConvergenceError`).

- :func:`expected_order_statistic` -- ``E[X_(k:n)]`` for i.i.d. or
  independent, non-identical laws (grouped by equal laws, so ``n = 1000``
  identical workers cost one incomplete-beta call per quadrature node).
- :func:`expected_order_statistics` -- ``E[X_(k:n)]`` for every ``k = 1..n``
  at once (one vector-valued pass; what the cutoffs need).
- :func:`expected_max` -- ``E[max_i X_i]``.
- :func:`exponential_order_statistic` -- the closed form
  ``E[X_(k:n)] = (H_n - H_{n-k}) / mu`` (numeric, vectorized, or SymPy).
- :func:`order_statistic_cdf` -- ``P(X_(k:n) <= x)``, vectorized over ``x``.
- :func:`blom` -- Blom's (1958) approximation for normal order statistics.
- :func:`expected_from_cdf` -- ``E[Y]`` from the CDF of ``Y`` by quadrature
  (used for cutoff quantities such as ``E[min(max_i X_i, t)]``).

The k-th order statistic is the k-th *smallest* (``k = n`` is the maximum).

Examples
--------
>>> from queuesgd.distributions import Exponential, Normal
>>> round(expected_max(Exponential(1.0), 3), 12)          # H_3 = 1 + 1/2 + 1/3
1.833333333333
>>> round(expected_max(Normal(0.0, 1.0), 5), 4)           # Harter (1961): 1.1630
1.163
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import special

from queuesgd import _checks
from queuesgd.distributions import Deterministic, Distribution, Empirical, Exponential, Normal, Shifted
from queuesgd.errors import AccuracyWarning, ConvergenceError, InvalidParameterError
from queuesgd.orderstats_normal import normal_order_statistics
from queuesgd.orderstats_numerics import (
    count_below_all,
    count_tail,
    integrate_mean,
    law_tails,
)
from queuesgd.orderstats_work import check_order_statistics_work

#: The rounding of a CDF near 1, hence of a survival computed as ``1 - F``.
_EPS = 1.1e-16

#: Largest ``n`` (and ``k``) taken here: ``2**53``, the largest integer from which every smaller one is a
#: double, so ``n - k + 1`` and the binomial's parameters are exact (as ``Erlang.k``). Far above any
#: cluster; the closed form is tested up to ``n = 1e15``.
MAX_N = 2**53

__all__ = [
    "MAX_N",
    "blom",
    "expected_from_cdf",
    "expected_max",
    "expected_order_statistic",
    "expected_order_statistics",
    "exponential_order_statistic",
    "group_laws",
    "harmonic",
    "integration_range",
    "order_statistic_cdf",
]


def harmonic(n: Any) -> Any:
    """Harmonic number ``H_n = sum_{i=1}^n 1/i``, vectorized (``H_0 = 0``); SymPy for a symbol.

    Examples
    --------
    >>> harmonic(4)
    2.083333333333333
    >>> harmonic(np.array([0, 1, 2])).tolist()
    [0.0, 1.0, 1.5]
    """
    if _checks.is_symbolic(n):
        import sympy

        return sympy.harmonic(n)
    out = _harmonic(_numbers("harmonic.n", n, integer=True, minimum=0, maximum=None))
    return float(out) if out.ndim == 0 else out


def _harmonic(arr: np.ndarray) -> np.ndarray:
    """``H_n`` of a float array of integers ``>= 0`` (checked by the caller)."""
    # digamma(n + 1) + Euler's gamma; exact sums for small n avoid its rounding.
    small = np.cumsum(np.concatenate([[0.0], 1.0 / np.arange(1, 65)]))
    idx = np.clip(arr, 0, 64).astype(int)
    return np.where(arr <= 64, small[idx], special.digamma(arr + 1.0) + np.euler_gamma)


def _numbers(
    field: str, value: Any, *, integer: bool, minimum: float, maximum: float | None = MAX_N
) -> np.ndarray:
    """``value`` (a number or an array) as a float array of finite numbers ``>= minimum`` (``> 0`` for a
    real ``minimum`` of 0), integers where ``integer``, at most ``maximum``: the checks of the vectorized
    closed forms. Refused, not rounded nor clamped: ``1.5`` for an integer, ``-1``, NaN, booleans,
    strings, ``None``, ``10**400``."""
    kind = f"integers >= {minimum:g}" if integer else f"finite numbers > {minimum:g}"
    accepted = kind + ("" if maximum is None else f", at most {maximum:,}") + " (a number or an array)"
    arr = _checks.reals(field, value, accepted=accepted)
    bad = ~np.isfinite(arr) | ((arr < minimum) if integer else (arr <= minimum))
    if integer:
        bad |= arr != np.floor(arr)
    if maximum is not None:
        bad |= arr > maximum
    if bad.any():
        raise InvalidParameterError(field, value if arr.ndim == 0 else arr[bad].flat[0].item(), accepted)
    return arr


def exponential_order_statistic(rate: Any, n: Any, k: Any = None) -> Any:
    """``E[X_(k:n)] = (H_n - H_{n-k}) / rate`` for i.i.d. exponential times (``k = n`` by default).

    The gaps between successive order statistics are independent exponentials
    of rates ``n rate, (n-1) rate, ...`` (Rényi's representation). Numeric
    arguments broadcast; any SymPy argument gives a SymPy expression.

    Examples
    --------
    >>> exponential_order_statistic(2.0, 3)        # H_3 / 2
    0.9166666666666666
    >>> import sympy
    >>> n, mu = sympy.symbols("n mu", positive=True)
    >>> exponential_order_statistic(mu, n)
    harmonic(n)/mu
    """
    is_max = k is None
    k = n if is_max else k
    if any(_checks.is_symbolic(v) for v in (rate, n, k)):
        import sympy

        rate = _checks.positive("rate", rate, symbolic=True)
        n, k = (
            v if _checks.is_symbolic(v) else _checks.integer(f, v, maximum=MAX_N)
            for f, v in zip("nk", (n, k))
        )
        if not (_checks.is_symbolic(n) or _checks.is_symbolic(k)) and k > n:
            raise InvalidParameterError("k", k, f"an integer with 1 <= k <= n (n = {n})")
        hn = sympy.harmonic(n)
        return hn / rate if is_max else sympy.simplify(hn - sympy.harmonic(n - k)) / rate
    rate_arr = _numbers("rate", rate, integer=False, minimum=0, maximum=None)
    n_arr = _numbers("n", n, integer=True, minimum=1)
    k_arr = n_arr if is_max else _numbers("k", k, integer=True, minimum=1)
    try:
        np.broadcast_shapes(rate_arr.shape, n_arr.shape, k_arr.shape)
    except ValueError:
        raise InvalidParameterError("k", k, "an array that broadcasts with n and rate") from None
    if np.any(k_arr > n_arr):
        raise InvalidParameterError("k", k, f"an integer with 1 <= k <= n (n = {n})")
    out = _top_harmonic(n_arr, k_arr) / rate_arr
    return float(out) if np.ndim(out) == 0 else out


def _top_harmonic(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``H_n - H_(n-k) = sum_(j=n-k+1)^n 1/j`` without cancellation.

    The difference of two harmonic numbers loses ``H_n / (H_n - H_(n-k))`` of relative accuracy: 1e-12
    for the minimum of 1024 (``k = 1``), 8e-6 for ``k = 10**5 + 1`` of ``n = 10**15``. The top terms are
    summed instead while ``k <= 10**5`` (one cumulative sum per distinct ``n``); beyond, the difference
    ``psi(a) - psi(b)`` (``a = n + 1``, ``b = n - k + 1 >= 10``) is taken term by term from the asymptotic
    series ``psi(x) = ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6) + 1/(240x^8)``: ``log1p(k / b)``
    and each ``x^-j`` difference written as a product with ``a - b = k`` (truncation below 1e-12 of
    ``b^-10``); for ``b < 10`` the difference of harmonic numbers has nothing to cancel.
    """
    n, k = np.broadcast_arrays(n, k)
    out = np.empty(n.shape, dtype=float)
    small = k <= 100_000
    a, b = n[~small] + 1.0, n[~small] - k[~small] + 1.0
    d = k[~small]
    # a^-j - b^-j = -(a^j - b^j) / (a b)^j, with a^j - b^j = d (a^(j-1) + ... + b^(j-1)) in ratios r = b / a.
    r = b / a
    inv = lambda j: -d / a * sum(r**i for i in range(j)) / b**j  # noqa: E731
    asym = np.log1p(d / b) - inv(1) / 2 - inv(2) / 12 + inv(4) / 120 - inv(6) / 252 + inv(8) / 240
    few = b < 10
    out[~small] = np.where(few, _harmonic(n[~small]) - _harmonic(np.where(few, b, 1.0) - 1.0), asym)
    for nv in np.unique(n[small]):
        mask = small & (n == nv)
        top = np.cumsum(1.0 / (nv - np.arange(int(k[mask].max()))))
        out[mask] = top[k[mask].astype(int) - 1]
    return out


def blom(mean: float, std: float, n: int, k: int | None = None) -> float:
    """Blom's approximation of a normal order statistic: ``mean + std * Phi^-1((k - 3/8)/(n + 1/4))``.

    Examples
    --------
    >>> round(blom(0.0, 1.0, 5), 2)       # exact value 1.163 (Harter 1961)
    1.18
    """
    mean = _checks.real("mean", mean)
    std = _checks.positive("std", std, allow_zero=True)
    n = _checks.integer("n", n, maximum=MAX_N)
    k = n if k is None else _checks.integer("k", k, maximum=MAX_N)
    if k > n:
        raise InvalidParameterError("k", k, f"an integer with 1 <= k <= n (n = {n})")
    # Above 1/2, Phi^-1(p) = -Phi^-1(1 - p) with 1 - p = (n - k + 5/8) / (n + 1/4): p itself carries
    # 1 - p only to 1.1e-16 (the maximum of 1e12 was 1.7e-6 off, of 1e15 1e-3) and is 1 at n = 2**53 (inf).
    p = (k - 0.375) / (n + 0.25)
    z = special.ndtri(p) if p <= 0.5 else -special.ndtri((n - k + 0.625) / (n + 0.25))
    return float(mean + std * z)


# ----------------------------------------------------------------------------- general laws


def _law_list(laws: Any, accepted: str = "a non-empty sequence of Distribution") -> list[Distribution]:
    """``laws`` (a sequence or other ordered iterable) as a non-empty list of laws, each checked."""
    unordered = (str, bytes, bytearray, Mapping, set, frozenset, Distribution)
    if isinstance(laws, unordered) or not isinstance(laws, Iterable):
        raise InvalidParameterError("laws", laws, accepted)
    out = list(laws)
    if not out:
        raise InvalidParameterError("laws", laws, accepted)
    for i, law in enumerate(out):
        if not isinstance(law, Distribution):
            raise InvalidParameterError(f"laws[{i}]", law, "a queuesgd.distributions.Distribution")
    return out


def _groups(laws: Distribution | Sequence[Distribution], n: int | None) -> list[tuple[Distribution, int]]:
    """(law, multiplicity) pairs; a single law with ``n`` means n i.i.d. copies (``n`` at most
    :data:`MAX_N`)."""
    if isinstance(laws, Distribution):
        if n is None:
            raise InvalidParameterError("n", None, "the number of i.i.d. durations when one law is given")
        return [(laws, _checks.integer("n", n, maximum=MAX_N))]
    laws = _law_list(laws, "a Distribution or a non-empty sequence of Distribution")
    groups: dict[Distribution, int] = {}
    for law in laws:
        groups[law] = groups.get(law, 0) + 1
    if n is not None and _checks.integer("n", n, maximum=MAX_N) != len(laws):
        raise InvalidParameterError("n", n, f"None or len(laws) = {len(laws)}")
    return list(groups.items())


def _groups_and_k(
    laws: Distribution | Sequence[Distribution], k: int | None, n: int | None
) -> tuple[list[tuple[Distribution, int]], int]:
    """The grouped laws and ``k`` checked against their total (the maximum when None)."""
    groups = _groups(laws, n)
    total = sum(m for _, m in groups)
    k = total if k is None else _checks.integer("k", k, maximum=MAX_N)
    if k > total:
        raise InvalidParameterError("k", k, f"an integer with 1 <= k <= n (n = {total})")
    return groups, k


def order_statistic_cdf(
    laws: Distribution | Sequence[Distribution], x: Any, k: int | None = None, n: int | None = None
) -> np.ndarray:
    """``P(X_(k:n) <= x)``: at least ``k`` of the independent durations are done by ``x``.

    Parameters
    ----------
    laws : Distribution or sequence of Distribution
        One law with ``n`` (i.i.d.), or one law per duration.
    x : array_like
    k : int, optional
        Which order statistic (1 = minimum); the maximum by default.
    n : int, optional
        Number of i.i.d. durations when ``laws`` is a single law.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> round(float(order_statistic_cdf(Exponential(1.0), 1.0, n=2)), 12)   # (1 - e^-1)^2
    0.399576400894
    """
    groups, k = _groups_and_k(laws, k, n)
    xa = _checks.reals("x", x, accepted="real numbers, not NaN (a number or an array)")
    if np.isnan(xa).any():
        raise InvalidParameterError("x", x, "real numbers, not NaN (a number or an array)")
    out = np.clip(count_tail(groups, k, xa.reshape(-1), done=True).reshape(xa.shape), 0.0, 1.0)
    return out if xa.ndim else out.reshape(())


def _atoms(law: Distribution) -> list[float]:
    if isinstance(law, Deterministic):
        return [float(law.value)]
    if isinstance(law, Shifted):
        return [a + float(law.shift) for a in _atoms(law.base)] + [float(law.shift)]
    return []


def integration_range(laws: Sequence[Distribution]) -> tuple[float, float, list[float]]:
    """Where the laws' mass starts, a scale where most of it is done, and breakpoints.

    ``[min(mean - 60 std), max(mean + 60 std)]``, starting at 0 when every
    law puts no mass below 0 (its
    :attr:`~queuesgd.distributions.Distribution.lower_bound` is at least 0:
    every law but a normal one); breakpoints at the means, one and five standard
    deviations around them, and the atoms of deterministic (or shifted
    deterministic) laws. The quadrature starts at ``lo`` and only begins its
    search for the survival's levels at ``hi``: it goes on past ``hi`` as far
    as the tail reaches (see ``docs/order-statistics.md``).

    Examples
    --------
    >>> from queuesgd.distributions import Deterministic, Exponential
    >>> lo, hi, pts = integration_range([Exponential(1.0), Deterministic(0.5)])
    >>> lo, hi, 0.5 in pts
    (0.0, 61.0, True)
    """
    lo, hi, pts = math.inf, -math.inf, []
    nonneg = True
    for law in _law_list(laws):
        law.check_numeric("integration_range()")
        with warnings.catch_warnings():  # a moment beyond the double range is inf: handled here
            warnings.simplefilter("ignore", AccuracyWarning)
            m, v = float(law.mean), float(law.variance)
        if not math.isfinite(m):
            raise ConvergenceError(f"{law!r}: its mean overflows a double")
        s = math.sqrt(v) if math.isfinite(v) else abs(m)
        lo = min(lo, m - 60.0 * s)
        hi = max(hi, m + 60.0 * s)
        # From the law's family, not from cdf(0) == 0: a phase-type law whose alpha sums to 1 - 1.1e-16 has
        # cdf(0) = 1.1e-16, and starting at mean - 60 std (-1896 for scv 1000) cost lo + value 8 digits.
        nonneg &= float(law.lower_bound) >= 0.0
        pts += [m, m - s, m + s, m + 5 * s, *_atoms(law)]
    if nonneg:
        lo = 0.0
    return lo, max(hi, lo), pts


def group_laws(laws: Sequence[Distribution]) -> list[tuple[Distribution, int]]:
    """Equal laws counted once: ``[(law, multiplicity), ...]`` in order of first appearance.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> group_laws([Exponential(1.0), Exponential(2.0), Exponential(1.0)])
    [(Exponential(rate=1.0), 2), (Exponential(rate=2.0), 1)]
    """
    return _groups(_law_list(laws), None)


def expected_from_cdf(
    cdf: Callable[[np.ndarray], np.ndarray], lo: float, hi: float, points: Sequence[float] = ()
) -> float:
    """``E[Y]`` from its CDF (vectorized), for ``Y`` with no mass below ``lo`` and most of it below ``hi``.

    ``E[Y] = lo + integral_lo^inf (1 - F(y)) dy`` by
    :func:`~queuesgd.orderstats_numerics.integrate_mean`, split at ``points``
    (atoms and kinks of ``F``) and where ``1 - F`` falls to each decade; for
    ``lo < 0``, ``integral_0^inf (1 - F) - integral_-inf^0 F`` (the negative part
    from ``F`` itself). ``1 - F`` rounds to 0 once ``F`` rounds to 1: the range
    ends where it is still above 1.1e-15, and the tail beyond, extrapolated,
    counts as error, so a tail that holds more than 1e-9 of the result there
    raises :class:`~queuesgd.errors.ConvergenceError`.

    Examples
    --------
    >>> round(expected_from_cdf(lambda y: np.clip(y, 0, 1), 0.0, 1.0), 12)   # uniform(0, 1)
    0.5
    """
    if not callable(cdf):
        raise InvalidParameterError("cdf", cdf, "a callable: the CDF of Y at an array of y")
    accepted = "a finite number, lo <= hi (the integration range [lo, hi])"
    lo, hi = _checks.real("lo", lo, accepted=accepted), _checks.real("hi", hi, accepted=accepted)
    if hi < lo:
        raise InvalidParameterError("hi", hi, f"{accepted}; lo = {lo:g}")
    accepted = "a sequence of finite numbers (split points), e.g. [0.5, 2.0]"
    splits = _checks.reals("points", points, accepted=accepted)
    if splits.ndim != 1 or not np.isfinite(splits).all():
        raise InvalidParameterError("points", points, accepted)

    def at(y: np.ndarray) -> np.ndarray:
        return np.asarray(cdf(y), dtype=float).reshape(y.shape)

    return float(integrate_mean(lambda y: 1.0 - at(y), at, lo, hi, splits.tolist(), resolution=_EPS)[0])


def expected_order_statistic(
    laws: Distribution | Sequence[Distribution], k: int | None = None, n: int | None = None
) -> float:
    """``E[X_(k:n)]``, the k-th smallest of independent durations.

    i.i.d. exponential laws use the closed form
    :func:`exponential_order_statistic`; equal deterministic laws give their
    value; i.i.d. normal laws ``mu + sigma E[Z_(k:n)]``
    (:mod:`queuesgd.orderstats_normal`: the median of an odd ``n`` is ``mu``);
    everything else integrates :func:`order_statistic_cdf` (identical laws
    grouped, so large ``n`` costs no more than small), a law with mass below 0
    as a positive and a negative part.

    Parameters
    ----------
    laws : Distribution or sequence of Distribution
        One law with ``n`` (i.i.d.), or one law per duration (e.g. per-worker
        speeds, or :class:`~queuesgd.distributions.Shifted` for delayed ones).
    k : int, optional
        1 = the fastest; default the maximum.
    n : int, optional
        Number of i.i.d. durations when ``laws`` is a single law.

    Examples
    --------
    >>> from queuesgd.distributions import Exponential, Normal, Shifted
    >>> round(expected_order_statistic(Exponential(1.0), k=2, n=4), 12)   # 1/4 + 1/3
    0.583333333333
    >>> round(expected_order_statistic(Normal(0.0, 1.0), k=10, n=10), 4)   # Harter: 1.5388
    1.5388
    >>> laws = [Shifted(Exponential(1.0), 0.5), Exponential(1.0)]
    >>> round(expected_order_statistic(laws), 6)     # E[max] = 1.5 + e^-0.5 / 2
    1.803265
    """
    groups, k = _groups_and_k(laws, k, n)
    for law, _ in groups:
        law.check_numeric("expected_order_statistic()")
    if len(groups) == 1:
        law, m = groups[0]
        if isinstance(law, Exponential):
            return exponential_order_statistic(float(law.rate), m, k)
        if isinstance(law, Deterministic):
            return float(law.value)
        if isinstance(law, Normal):
            return float(normal_order_statistics(law, m, [k])[0])
    xs = _common_support(groups)
    if xs is not None:
        # Discrete laws (measured samples): the survival of the order statistic is a step function, so
        # E[Y] = integral of S_Y is an exact finite sum over the support points (quadrature would have
        # to find every step). S_Y is constant between support points: it is read at the midpoints, where
        # rounding (a shifted law's x - shift) cannot put it on the wrong step.
        return float(xs[0] + np.sum(count_tail(groups, k, _midpoints(xs)) * np.diff(xs)))
    lo, hi, pts = integration_range([law for law, _ in groups])
    survival = lambda x: count_tail(groups, k, x)  # noqa: E731
    cdf = lambda x: count_tail(groups, k, x, done=True)  # noqa: E731
    return float(integrate_mean(survival, cdf, lo, hi, pts, resolution=_rounding(groups))[0])


def _rounding(groups: list[tuple[Distribution, int]]) -> float:
    """The absolute rounding of an order statistic's survival: 0 when every law has its own survival
    function, else ``1.1e-16`` per duration (each survival is ``1 - F``)."""
    return 0.0 if all(law.exact_sf for law, _ in groups) else _EPS * sum(m for _, m in groups)


def _support(law: Distribution) -> np.ndarray | None:
    """Support points of a discrete nonnegative law (Empirical, Deterministic, shifted ones), else None."""
    if isinstance(law, Empirical):
        return np.unique(law.samples)
    if isinstance(law, Deterministic) and float(law.value) >= 0:
        return np.array([float(law.value)])
    if isinstance(law, Shifted):
        base = _support(law.base)
        return None if base is None else base + float(law.shift)
    return None


def _common_support(groups: list[tuple[Distribution, int]]) -> np.ndarray | None:
    """The sorted union of the supports when every law is discrete (:func:`_support`), else None."""
    atoms = [_support(law) for law, _ in groups]
    if any(a is None for a in atoms):
        return None
    return np.unique(np.concatenate(atoms))  # type: ignore[arg-type]


def _midpoints(xs: np.ndarray) -> np.ndarray:
    """Midpoints of consecutive sorted support points (where a step CDF is read)."""
    return 0.5 * (xs[:-1] + xs[1:])


def expected_order_statistics(
    laws: Distribution | Sequence[Distribution], n: int | None = None
) -> np.ndarray:
    """``E[X_(k:n)]`` for every ``k = 1..n`` at once (index ``k - 1``).

    One pass for all ``k``: ``P(X_(k:n) > x)`` is the probability that fewer
    than ``k`` durations are done by ``x``, and the count of those done is a
    sum of binomials over the groups of identical laws. The roads are those
    of :func:`expected_order_statistic`: the closed form for i.i.d.
    exponentials, the value for equal deterministic laws, an exact finite sum
    over the support points for discrete laws (:class:`~queuesgd.distributions.Empirical`,
    :class:`~queuesgd.distributions.Deterministic` and shifted ones), and
    otherwise one vector-valued adaptive quadrature of the ``n`` survival
    functions.

    Parameters
    ----------
    laws : Distribution or sequence of Distribution
        One law with ``n`` (i.i.d.), or one law per duration.
    n : int, optional
        Number of i.i.d. durations when ``laws`` is a single law.

    Returns
    -------
    ndarray of float, shape (n,)

    Raises
    ------
    InvalidParameterError
        More than 1,000,000 durations; or, on the finite-sum and quadrature
        roads, work estimated above 60 s
        (:data:`~queuesgd.orderstats_work.MAX_ORDER_STATISTICS_SECONDS`,
        :func:`~queuesgd.orderstats_work.order_statistics_seconds`): about
        25,000 identical durations, fewer in several groups of laws.

    Examples
    --------
    >>> from queuesgd.distributions import Empirical, Exponential
    >>> expected_order_statistics(Exponential(1.0), n=3).round(12).tolist()   # 1/3, 1/3 + 1/2, H_3
    [0.333333333333, 0.833333333333, 1.833333333333]
    >>> expected_order_statistics([Empirical([1.0, 3.0])] * 2).round(12).tolist()   # min, max of two coins
    [1.5, 2.5]
    """
    groups = _groups(laws, n)
    total = sum(m for _, m in groups)
    if total > _checks.MAX_COUNT:
        raise InvalidParameterError(
            "n" if isinstance(laws, Distribution) else "laws",
            n if isinstance(laws, Distribution) else f"{total:,} laws",
            f"at most {_checks.MAX_COUNT:,} durations (the most workers of a Cluster): the result holds "
            "one value for each k (the exponential closed form takes about 1 s at 1,000,000)",
        )
    for law, _ in groups:
        law.check_numeric("expected_order_statistics()")
    if len(groups) == 1:
        law, m = groups[0]
        if isinstance(law, Exponential):
            return np.asarray(
                exponential_order_statistic(float(law.rate), m, np.arange(1, m + 1)), dtype=float
            )
        if isinstance(law, Deterministic):
            return np.full(m, float(law.value))
        if isinstance(law, Normal):
            return normal_order_statistics(law, m, np.arange(1, m + 1))
    xs = _common_support(groups)
    field, value = ("n", n) if isinstance(laws, Distribution) else ("laws", f"{total:,} laws")
    # The rows priced: the support points, or the quadrature's nodes (queuesgd.orderstats_work).
    check_order_statistics_work([m for _, m in groups], field, value, *([] if xs is None else [xs.size]))
    if xs is not None:
        # P(X_(k) > x) = P(count done by x < k): column k - 1 of the cumulated count pmf.
        return xs[0] + (count_below_all(groups, _midpoints(xs)) * np.diff(xs)[:, None]).sum(axis=0)

    def mean_tail(x: np.ndarray, side: int) -> np.ndarray:
        return sum(m * law_tails(law, x)[side] for law, m in groups) / total

    # Split where the maximum's survival falls (its tail is every order statistic's tail), where the
    # minimum's does (the lowest of them), and where the laws' average survival does (those between);
    # below 0 (normal laws) where the minimum's CDF, the maximum's and the average CDF rise.
    ladders = [lambda x, k=k: count_tail(groups, k, x) for k in (total, 1)] + [lambda x: mean_tail(x, 1)]
    rising = [lambda x, k=k: count_tail(groups, k, x, done=True) for k in (1, total)]
    lo, hi, pts = integration_range([law for law, _ in groups])
    value = integrate_mean(
        lambda x: count_below_all(groups, x),
        lambda x: count_below_all(groups, x, done=True),
        lo,
        hi,
        pts,
        ladders,
        [*rising, lambda x: mean_tail(x, 0)],
        resolution=_rounding(groups),
        nested=True,
    )[0]
    return np.atleast_1d(np.asarray(value, dtype=float))


def expected_max(laws: Distribution | Sequence[Distribution], n: int | None = None) -> float:
    """``E[max_i X_i]`` of independent durations (see :func:`expected_order_statistic`).

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> round(expected_max(Exponential(mean=0.1), 2), 12)      # 0.1 x (1 + 1/2)
    0.15
    """
    return expected_order_statistic(laws, None, n)
