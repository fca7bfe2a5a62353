"""The numerics under :mod:`queuesgd.orderstats`: tails of laws and counts, and the quadrature of a survival.

- :func:`law_tails` -- ``(F(x), S(x))`` of one law, each side computed directly (``S`` from the
  law's own survival function where it has one, never as ``1 - F`` once ``F`` rounds to 1).
- :func:`count_tail` -- ``P(fewer than k done by x)`` (or ``P(at least k done)``) for independent
  groups of identical laws; :func:`count_below_all` the first for every ``k`` at once.
- :func:`integrate_survival` -- ``integral_lo^inf S_Y(x) dx`` of one or many nonincreasing survival
  functions: split at the points where ``S_Y`` falls to ``1 - 1e-6, 0.9, 0.5, 0.1, 1e-2, ..., 1e-300``
  (found by bisection, so the splits follow the order statistic's own scale, whatever the time unit),
  integrated segment by segment in ``log x`` where a segment spans more than a factor 2, by a
  vectorized adaptive Gauss-Kronrod (21 points) whose error estimate is ``|K21 - G10|``, and stopped
  where an extrapolated power-law tail is negligible. Anything it cannot bound raises
  :class:`~queuesgd.errors.ConvergenceError`.
- :func:`integrate_mean` -- ``E[Y]`` from its survival and its CDF: ``lo + integral_lo^inf S_Y`` for
  ``lo >= 0``, else the positive and negative parts apart, judged against their difference.

Examples
--------
>>> import numpy as np
>>> from queuesgd.distributions import LogNormal
>>> F, S = law_tails(LogNormal(0.0, 1.0), np.array([1e15]))
>>> float(F[0]), float(S[0])           # Phi(-ln 1e15): the survival is not lost once F rounds to 1
(1.0, 1.0505503171051462e-261)
>>> value, err = integrate_survival(lambda x: np.exp(-x), 0.0, 1.0)   # integral of e^-x
>>> round(value, 12), err < 1e-11
(1.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import special, stats

from queuesgd.distributions import Distribution
from queuesgd.errors import ConvergenceError

__all__ = ["count_below_all", "count_tail", "integrate_mean", "integrate_survival", "law_tails"]

#: The relative error asked of every quadrature.
RTOL = 1e-11
#: The relative error (its estimate, plus the extrapolated tail) above which the result is refused.
ACCEPT = 1e-9
_MAX_INTERVALS = 20_000
_MAX_ROUNDS = 80

# ----------------------------------------------------------------------------- tails of one law


def law_tails(law: Distribution, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(F(x), S(x))`` of ``law`` at the array ``x``: its :meth:`~queuesgd.distributions.Distribution.cdf`
    and :meth:`~queuesgd.distributions.Distribution.sf` (a formula of its own where ``law.exact_sf``,
    else ``1 - F``, exact down to ``1e-16``).

    Examples
    --------
    >>> from queuesgd.distributions import Gamma
    >>> F, S = law_tails(Gamma(2.0, 1.0), np.array([50.0]))
    >>> float(F[0]), round(float(S[0] / (51 * np.exp(-50.0))), 14)   # (1 + x) e^-x; 1 - F would be 0
    (1.0, 1.0)
    """
    x = np.asarray(x, dtype=float)
    F = np.clip(np.asarray(law.cdf(x), dtype=float).reshape(x.shape), 0.0, 1.0)
    S = np.clip(np.asarray(law.sf(x), dtype=float).reshape(x.shape), 0.0, 1.0)
    return F, S

# ----------------------------------------------------------------------------- counts of durations done


def _binom_tail(m: int, r: np.ndarray, F: np.ndarray, S: np.ndarray, done: bool) -> np.ndarray:
    """``P(Bin(m, F) < r)``, or ``P(Bin(m, F) >= r)`` if ``done`` (broadcast): a regularized incomplete
    beta of whichever of ``F`` and ``S`` is below 1/2, so that neither side cancels."""
    r, F, S = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(r, F, S))
    rr = np.clip(r, 1, m)
    small = F < 0.5
    first, second = (special.betainc, special.betaincc) if done else (special.betaincc, special.betainc)
    out = np.empty(r.shape)
    out[small] = first(rr[small], m - rr[small] + 1, F[small])
    out[~small] = second(m - rr[~small] + 1, rr[~small], S[~small])
    out[r <= 0] = 1.0 if done else 0.0
    out[r > m] = 0.0 if done else 1.0
    return out


def _binom_pmf(m: int, F: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``P(Bin(m, F) = j)``, shape ``(len(F), m + 1)``: the count done where ``F < 1/2``, else the count
    not done with probability ``S`` (so a probability near 1 is never rounded)."""
    j = np.arange(m + 1)[None, :]
    # Below 1e-300 a probability is taken as 0 (boost's binomial pmf overflows near 1e-308); the terms
    # dropped, at most m 1e-300, sit beside a term near 1.
    F, S = np.where(F < _TINY, 0.0, F)[:, None], np.where(S < _TINY, 0.0, S)[:, None]
    small = F[:, 0] < 0.5
    out = np.empty((F.shape[0], m + 1))
    out[small] = stats.binom.pmf(j, m, F[small])
    out[~small] = stats.binom.pmf(m - j, m, S[~small])
    return out


def _convolve_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise convolution of two nonnegative arrays (a sum of positive terms: no cancellation)."""
    if a.shape[0] == 1:
        return np.convolve(a[0], b[0])[None, :]
    if a.shape[1] < b.shape[1]:
        a, b = b, a
    out = np.zeros((a.shape[0], a.shape[1] + b.shape[1] - 1))
    for j in range(b.shape[1]):
        out[:, j : j + a.shape[1]] += a * b[:, j : j + 1]
    return out


def _count_pmf(groups: Sequence[tuple[Distribution, int]], x: np.ndarray) -> np.ndarray:
    """P(exactly j of the durations are done by x), shape ``(len(x), total + 1)``."""
    pmf = np.ones((x.size, 1))
    for law, m in groups:
        pmf = _convolve_rows(pmf, _binom_pmf(m, *law_tails(law, x)))
    return pmf


def count_below_all(
    groups: Sequence[tuple[Distribution, int]], x: np.ndarray, *, done: bool = False
) -> np.ndarray:
    """``P(X_(k:n) > x) = P(fewer than k done by x)`` for ``k = 1..n``, shape ``(len(x), n)``;
    ``P(X_(k:n) <= x) = P(at least k done)`` if ``done`` (summed from the top, not ``1 -`` the first).

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> count_below_all([(Exponential(1.0), 2)], np.array([1.0])).round(6).tolist()  # e^-2, 1 - (1 - e^-1)^2
    [[0.135335, 0.600424]]
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    total = sum(m for _, m in groups)
    pmf = _count_pmf(groups, x)
    if done:
        return np.clip(np.cumsum(pmf[:, :0:-1], axis=1)[:, ::-1], 0.0, 1.0)
    return np.clip(np.cumsum(pmf[:, :total], axis=1), 0.0, 1.0)


def count_tail(
    groups: Sequence[tuple[Distribution, int]], k: int, x: np.ndarray, *, done: bool = False
) -> np.ndarray:
    """``P(X_(k:n) > x)``, fewer than ``k`` of the durations done by ``x``; ``P(X_(k:n) <= x)`` if ``done``.

    A sum of positive terms or a product, never a difference: one group is a binomial tail (a
    regularized incomplete beta); the maximum and the minimum are products of the laws' CDFs or
    survivals (in logarithms, ``log F = log1p(-S)`` near 1, the other side by ``expm1``); other ``k``
    convolve the count of every group but the largest and weigh it by the largest group's binomial
    tails (linear in ``n`` per point).

    Examples
    --------
    >>> from queuesgd.distributions import Exponential
    >>> done = count_tail([(Exponential(1.0), 1), (Exponential(2.0), 1)], 2, np.array([1.0]), done=True)
    >>> round(float(done[0]), 12), round(float((1 - np.exp(-1)) * (1 - np.exp(-2))), 12)
    (0.54657234396, 0.54657234396)
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    total = sum(m for _, m in groups)
    tails = [(m, *law_tails(law, x)) for law, m in groups]
    if len(groups) == 1:
        m, F, S = tails[0]
        return _binom_tail(m, np.array(k), F, S, done)
    if k in (1, total):
        # k = n: all done, prod F^m; k = 1: none done, prod S^m (the other side by expm1).
        with np.errstate(divide="ignore"):
            if k == total:
                log_p = sum(m * np.where(S < 0.5, np.log1p(-S), np.log(F)) for m, F, S in tails)
            else:
                log_p = sum(m * np.where(F < 0.5, np.log1p(-F), np.log(S)) for m, F, S in tails)
        return np.exp(log_p) if done == (k == total) else -np.expm1(log_p)
    last = max(range(len(tails)), key=lambda i: tails[i][0])
    m, F, S = tails[last]
    pmf = np.ones((x.size, 1))
    for i, (mi, Fi, Si) in enumerate(tails):
        if i != last:
            pmf = _convolve_rows(pmf, _binom_pmf(mi, Fi, Si))
    # The last group must bring r = k - j: certain for r <= 0, impossible for r > m, a tail between.
    j0, j1 = max(0, k - m), min(pmf.shape[1], k)
    out = pmf[:, j1:].sum(axis=1) if done else pmf[:, :j0].sum(axis=1)
    if j1 > j0:
        r = k - np.arange(j0, j1)[None, :]
        out = out + (pmf[:, j0:j1] * _binom_tail(m, r, F[:, None], S[:, None], done)).sum(axis=1)
    return out


# ----------------------------------------------------------------------------- quadrature

# Gauss-Kronrod 21-point rule (QUADPACK's qk21): nodes in [0, 1) of the symmetric rule, Kronrod weights,
# and the 10-point Gauss weights of the odd-indexed nodes.
_XK = np.array([
    0.995657163025808080735527280689003, 0.973906528517171720077964012084452,
    0.930157491355708226001207180059508, 0.865063366688984510732096688423493,
    0.780817726586416897063717578345042, 0.679409568299024406234327365114874,
    0.562757134668604683339000099272694, 0.433395394129247190799265943165784,
    0.294392862701460198131126603103866, 0.148874338981631210884826001129720, 0.0,
])  # fmt: skip
_WK = np.array([
    0.011694638867371874278064396062192, 0.032558162307964727478818972459390,
    0.054755896574351996031381300244580, 0.075039674810919952767043140916190,
    0.093125454583697605535065465083366, 0.109387158802297641899210590325805,
    0.123491976262065851077208980223048, 0.134709217311473325928054001771707,
    0.142775938577060080797094273138717, 0.147739104901338491374841515972068,
    0.149445554002916905664936468389821,
])  # fmt: skip
_WG = np.array([
    0.066671344308688137593568809893332, 0.149451349150580593145776339657697,
    0.219086362515982043995534934228163, 0.269266719309996355091226921569469,
    0.295524224714752870173892994651338,
])  # fmt: skip
_NODES = np.concatenate([-_XK[:-1], _XK[::-1]])  # 21 nodes in (-1, 1), ascending
_WK21 = np.concatenate([_WK[:-1], _WK[::-1]])
_WG21 = np.zeros(21)
_WG21[[1, 3, 5, 7, 9]] = _WG
_WG21[[19, 17, 15, 13, 11]] = _WG

#: Levels of the survival at which the integral is split (those below 1 - 1e-6, down to 1e-300).
_LEVELS = np.array(
    [1 - 1e-6, 1 - 1e-3, 0.9, 0.5, 0.1, *(10.0 ** -np.arange(2, 21)), *(10.0 ** -np.arange(24, 301, 4))]
)
_TINY = 1e-300


def _as_matrix(f: Callable[[np.ndarray], Any], x: np.ndarray) -> np.ndarray:
    """``f(x)`` as a ``(len(x), K)`` float array."""
    out = np.asarray(f(x), dtype=float)
    return out.reshape(x.size, -1)


def _gauss_kronrod(
    f: Callable[[np.ndarray], Any], a: np.ndarray, b: np.ndarray, log: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Kronrod and Gauss integrals on each ``[a_i, b_i]`` (of ``log x`` where ``log_i``), in one call."""
    half, mid = 0.5 * (b - a), 0.5 * (a + b)
    u = mid[:, None] + half[:, None] * _NODES[None, :]
    x = np.where(log[:, None], np.exp(np.where(log[:, None], u, 0.0)), u)
    vals = _as_matrix(f, x.reshape(-1)).reshape(a.size, 21, -1)
    vals = vals * np.where(log[:, None], x, 1.0)[:, :, None]  # dx = e^u du
    kron = half[:, None] * np.einsum("n,ink->ik", _WK21, vals)
    gauss = half[:, None] * np.einsum("n,ink->ik", _WG21, vals)
    return kron, gauss


def _adaptive(
    f: Callable[[np.ndarray], Any], cuts: np.ndarray, scale: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """``integral`` of ``f`` over ``[cuts[0], cuts[-1]]``, its error estimate relative to a scale, and
    that scale.

    Vectorized adaptive Gauss-Kronrod: every round evaluates all new intervals in one call of ``f``, and
    splits the worst intervals until the sum of ``max_k |K - G|_k / scale_k`` is below :data:`RTOL`.
    ``scale`` (a lower bound of each column's magnitude) is raised to half the first Kronrod estimate
    of the column: a column whose survival falls between the cuts has a lower bound orders of
    magnitude below its integral (Gamma(0.01) at n = 500: 1.9e-13 for 4e-9), and held to it the
    refinement ran into the interval limit (61 s, where n = 480 took 0.2 s).
    """
    a, b = cuts[:-1], cuts[1:]
    log = (a > 0) & (b > 2 * a)
    a, b = np.where(log, np.log(np.where(log, a, 1.0)), a), np.where(log, np.log(np.where(log, b, 1.0)), b)
    kron, gauss = _gauss_kronrod(f, a, b, log)
    scale = np.maximum(scale, 0.5 * np.abs(kron.sum(axis=0)))
    err = np.max(np.abs(kron - gauss) / scale, axis=1)
    for _ in range(_MAX_ROUNDS):
        total = float(err.sum())
        if not math.isfinite(total) or total <= RTOL or a.size >= _MAX_INTERVALS:
            break
        # Split the fewest worst intervals whose errors leave at most half the budget to the others.
        order = np.argsort(err)[::-1]
        rest = total - np.cumsum(err[order])
        split = order[: int(np.searchsorted(-rest, -0.5 * RTOL)) + 1]
        split = split[err[split] > 0]
        mid = 0.5 * (a[split] + b[split])
        if np.any((mid <= a[split]) | (mid >= b[split])):
            break  # intervals at the resolution of floating point
        keep = np.ones(a.size, dtype=bool)
        keep[split] = False
        na = np.concatenate([a[split], mid])
        nb = np.concatenate([mid, b[split]])
        nlog = np.concatenate([log[split], log[split]])
        nk, ng = _gauss_kronrod(f, na, nb, nlog)
        a, b = np.concatenate([a[keep], na]), np.concatenate([b[keep], nb])
        log = np.concatenate([log[keep], nlog])
        kron = np.concatenate([kron[keep], nk])
        err = np.concatenate([err[keep], np.max(np.abs(nk - ng) / scale, axis=1)])
    return kron.sum(axis=0), float(err.sum()), scale


def _ladder(
    sf: Callable[[np.ndarray], np.ndarray],
    lo: float,
    hi: float,
    enough: Callable[[np.ndarray, np.ndarray], int | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The points where the nonincreasing ``sf`` falls to each of :data:`_LEVELS`, and ``sf`` there.

    Bisection from ``lo`` (``1e-300`` for ``lo = 0``) to a point beyond which ``sf`` is below
    ``1e-300``: geometric while the bracket spans more than a factor 4, so a tail at ``1e60`` or a
    minimum at ``1e-30`` costs a few dozen steps. The levels are taken in passes (down to 1e-20,
    1e-100, 1e-300); ``enough(x, s)``, given the points so far, may end the ladder at an index.
    """
    a0 = lo if lo != 0.0 else _TINY
    b0 = max(hi, 2.0 * abs(a0), a0 + 1.0)
    while sf(np.array([b0]))[0] > _LEVELS[-1] and b0 < 1e300:
        b0 = b0 * 1e4 if b0 > 0 else b0 + 1e4 * (1.0 + abs(b0))
    s_top, s_end = sf(np.array([a0, b0]))
    xs, ss, start, above = [np.empty(0)], [np.empty(0)], a0, s_top
    for floor in (1e-20, 1e-100, 0.0):
        q = _LEVELS[(_LEVELS < above) & (_LEVELS >= floor) & (_LEVELS > s_end)]
        if q.size:
            a, b, fb = np.full(q.size, start), np.full(q.size, b0), np.full(q.size, s_end)
            for _ in range(200):
                geo = (a > 0) & (b > 4.0 * a)
                mid = np.where(geo, np.sqrt(np.abs(a)) * np.sqrt(np.abs(b)), 0.5 * (a + b))
                live = (b - a > 1e-4 * np.maximum(np.abs(a), np.abs(b))) & (mid > a) & (mid < b)
                if not live.any():
                    break
                s = sf(mid)
                down = live & (s <= q)
                b, fb = np.where(down, mid, b), np.where(down, s, fb)
                a = np.where(live & ~down, mid, a)
            xs.append(b)
            ss.append(fb)
            start, above = float(a[-1]), float(q[-1])  # sf(a[-1]) > q[-1] > every level below
        x, s = np.concatenate(xs), np.concatenate(ss)
        end = enough(x, s) if enough is not None else None
        if end is not None:
            return x[: end + 1], s[: end + 1]
    return np.concatenate([x, [b0]]), np.concatenate([s, [s_end]])


def _tail_bound(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``integral_(x_j)^inf sf`` extrapolated from the power law through ``(x_(j-1), s_(j-1))`` and
    ``(x_j, s_j)``: ``x_j s_j / (alpha - 1)``, ``inf`` where no such law with ``alpha > 1`` fits
    (0 where ``sf`` is 0). For tails lighter than any power (lognormal, gamma) an overestimate."""
    out = np.full(x.size, math.inf)
    out[s <= 0] = 0.0
    with np.errstate(all="ignore"):
        alpha = np.log(s[:-1] / s[1:]) / np.log(x[1:] / x[:-1])
        fit = (x[:-1] > 0) & (s[1:] > 0) & (s[:-1] > s[1:]) & (alpha > 1.0)
        est = x[1:] * s[1:] / (alpha - 1.0)
    out[1:] = np.where(fit, est, out[1:])
    return out


def _tail(
    f: Callable[[np.ndarray], Any], last: np.ndarray, resolution: float, reach: Any = None
) -> np.ndarray:
    """The tail of each column of ``f`` beyond ``last[-1]``, the last point of the range (``inf`` if
    unknown). Where ``f`` there is down in its rounding (``0 < f < 10 resolution``), the power law of
    the two points before is anchored at ``(last[-1], 10 resolution)``, and the rounding over the range
    (``resolution`` per unit of ``x``, over ``reach``, by default the whole range) is added; else the
    power law of the last two points."""
    reach = abs(last[-1]) if reach is None else reach
    ends = _as_matrix(f, last)
    if last.size < 2:
        return np.where(ends[-1] > 0, math.inf, 0.0)
    out = np.array([_tail_bound(last[-2:], col[-2:])[-1] for col in ends.T])
    rounding = (ends[-1] > 0) & (ends[-1] < 10.0 * resolution)
    if rounding.any():
        if last.size < 3:
            return np.where(rounding, math.inf, out)
        anchored = np.array([_tail_bound(last[:2], col[:2])[-1] for col in ends.T])
        with np.errstate(all="ignore"):
            anchored = anchored / (last[1] * ends[1]) * last[2] * 10.0 * resolution
        anchored = np.where(ends[1] > 0, anchored, math.inf) + resolution * reach
        out = np.where(rounding, anchored, out)
    return out


def integrate_survival(
    f: Callable[[np.ndarray], Any],
    lo: float,
    hi: float,
    points: Sequence[float] = (),
    ladders: Sequence[Callable[[np.ndarray], np.ndarray]] | None = None,
    resolution: float = 0.0,
    nested: bool = False,
    accept: float = ACCEPT,
) -> tuple[Any, float]:
    """``integral_lo^inf f(x) dx`` of nonincreasing survival functions ``f`` (vectorized in ``x``; a
    scalar or a row per ``x``), and the relative error bound it reached (at most ``accept``), relative
    to the mean ``lo + integral`` for ``lo >= 0``, to the integral for ``lo < 0`` (where
    :func:`integrate_mean` does not add ``lo``: it splits at 0).

    Parameters
    ----------
    f : callable
        ``f(x)`` for a 1-D array ``x``: shape ``(len(x),)`` or ``(len(x), K)``, each column
        nonincreasing in ``x`` and below 1e-300 somewhere below 1e300.
    lo, hi : float
        Where the mass starts (``f = 1`` below, up to rounding), and a scale where most of it is done.
    points : sequence of float
        Extra split points (atoms, kinks).
    ladders : sequence of callable, optional
        Scalar survival functions whose level points split the range (default: ``f`` itself, scalar);
        the one that falls last must come first: its tail is the tail of every column.
    resolution : float
        The absolute rounding error of the first ladder's survival (``1.1e-16 n`` for the maximum of
        ``n`` laws whose survival is ``1 - F``): the range ends at the last level above 10 times it
        (unless the survival is exactly 0 there), and the tail beyond, extrapolated as a power law,
        counts in full as error.
    nested : bool
        The columns are ``P(X_(k:n) > x)`` for ``k = 1..n``, counts of durations done: column ``k``
        moves by at most ``P(X_(k+1:n) > x)`` per unit of rounding in one law's survival
        (``P(others done = k - 1) <= P(done <= k)``), so its rounding over the range is ``resolution``
        times the next column's integral, not times the whole range (the maximum's, which can be 5e4
        times the mean for a hyperexponential of scv 1000).

    accept : float
        The relative error above which it raises (:data:`ACCEPT`; ``inf`` for a part of a sum that is
        judged as a whole).

    Raises
    ------
    ConvergenceError
        When the error estimate plus the extrapolated tail exceed ``accept`` of ``max(lo, 0) + |value|``,
        for any column, or a segment's integral leaves the bracket a nonincreasing ``f`` allows.

    Examples
    --------
    >>> value, err = integrate_survival(lambda x: 1.0 / (1.0 + x) ** 3, 0.0, 1.0)   # = 1/2
    >>> round(value, 12), err <= 1e-9
    (0.5, True)
    """
    ladders = ladders or [lambda x: _as_matrix(f, x)[:, 0]]

    def enough(xs: np.ndarray, ss: np.ndarray) -> int | None:
        # Stop where the tail extrapolated from the last two levels is 1e-14 of the integral's floor, or
        # at the first level down in the survival's rounding (beyond, its rounding is all there is).
        floor = max(lo, 0.0) + float(np.sum(ss * np.diff(np.concatenate([[lo], xs]))))
        rounding = (ss > 0) & (ss < 10.0 * resolution)
        stop = int(np.argmax(rounding)) if rounding.any() else xs.size
        ok = np.flatnonzero(_tail_bound(xs, ss)[:stop] <= 1e-3 * RTOL * floor)
        if ok.size:
            return int(ok[0])
        return stop if stop < xs.size else None

    cuts = [np.array([lo])]
    for i, sf in enumerate(ladders):
        xs, _ = _ladder(sf, lo, hi, enough if i == 0 else None)
        if i == 0:
            last = xs[-3:]
        cuts.append(xs)
    top = float(cuts[1][-1])
    cuts.append(np.array([p for p in points if math.isfinite(p) and lo < p < top]))
    grid = np.unique(np.concatenate(cuts))
    grid = grid[(grid >= lo) & (grid <= top)]
    if grid.size < 2:
        return np.zeros(_as_matrix(f, np.array([lo])).shape[1]).squeeze()[()], 0.0
    at = _as_matrix(f, grid)
    width = np.diff(grid)[:, None]
    low, high = (at[1:] * width).sum(axis=0), (at[:-1] * width).sum(axis=0)
    scale = np.maximum(max(lo, 0.0) + low, _TINY)
    value, err, scale = _adaptive(f, grid, scale)
    # The size of the result the caller returns: lo + value for lo >= 0 (no cancellation), the integral
    # itself otherwise. |lo| + |value| let a mean near 0 come out 1e-6 off (a normal median, lo = -60).
    magnitude = np.maximum(max(lo, 0.0) + np.abs(value), _TINY)
    reach = np.append(np.minimum(np.abs(value[1:]), abs(top)), abs(top)) if nested else None
    tail = float(np.max(_tail(f, last, resolution, reach) / magnitude))
    rel = err * float(np.max(scale / magnitude)) + tail
    slack = err * scale + 1e-12 * (low + high)
    bracket = bool(np.all((value >= low - slack) & (value <= high + slack)))
    if not (np.all(np.isfinite(value)) and bracket and rel <= accept):
        raise ConvergenceError(
            f"quadrature of an order statistic did not converge on [{lo:g}, inf): relative error "
            f"estimate {rel:.3g} (quadrature {err:.3g}, tail beyond {top:.6g}: {tail:.3g}), "
            f"bracket {'kept' if bracket else 'left'}"
        )
    return (value if value.size > 1 else float(value[0])), rel


def integrate_mean(
    sf: Callable[[np.ndarray], Any],
    cdf: Callable[[np.ndarray], Any],
    lo: float,
    hi: float,
    points: Sequence[float] = (),
    ladders: Sequence[Callable[[np.ndarray], np.ndarray]] | None = None,
    cdf_ladders: Sequence[Callable[[np.ndarray], np.ndarray]] | None = None,
    resolution: float = 0.0,
    nested: bool = False,
) -> tuple[Any, float]:
    """``E[Y]`` from its survival ``sf`` and its CDF ``cdf`` (vectorized, columns alike), for ``Y`` with no
    mass below ``lo``, and its relative error bound (at most :data:`ACCEPT` of ``|E[Y]|``).

    ``lo >= 0``: ``lo + integral_lo^inf sf`` by :func:`integrate_survival`. ``lo < 0``: the positive and
    negative parts apart, ``integral_0^inf sf(x) dx - integral_0^inf cdf(-u) du``, the second from the
    CDF itself, not ``1 - sf``, on its own ladder (``cdf_ladders`` at ``-u``; default ``cdf``), so that
    neither part carries ``lo``; ``lo + integral_lo^inf sf`` lost ``|lo| / |E[Y]|`` of its accuracy.
    Where the two parts cancel (a mean near 0 beside the spread), their errors are judged against the
    difference: a result that does not reach :data:`ACCEPT` raises.

    Raises
    ------
    ConvergenceError
        From :func:`integrate_survival`, or when the parts' errors exceed :data:`ACCEPT` of ``|E[Y]|``.

    Examples
    --------
    >>> from scipy import special
    >>> value, rel = integrate_mean(lambda x: special.ndtr(0.5 - x), lambda x: special.ndtr(x - 0.5), -60, 60)
    >>> round(float(value), 12), rel <= 1e-9        # E[Y] of a normal law of mean 1/2
    (0.5, True)
    """
    if lo >= 0:
        value, rel = integrate_survival(sf, lo, hi, points, ladders, resolution, nested)
        return lo + value, rel
    pos, rel_pos = integrate_survival(
        sf, 0.0, max(hi, 0.0), [p for p in points if p > 0], ladders, resolution, nested, accept=math.inf
    )

    def mirrored(g: Callable[[np.ndarray], Any]) -> Callable[[np.ndarray], Any]:
        return lambda u: g(-np.asarray(u, dtype=float))

    # The CDF is its own formula on this side (only normal laws reach below 0): no rounding of 1 - F.
    neg, rel_neg = integrate_survival(
        mirrored(cdf),
        0.0,
        -lo,
        [-p for p in points if p < 0],
        [mirrored(g) for g in cdf_ladders] if cdf_ladders else None,
        accept=math.inf,
    )
    value = np.asarray(pos, dtype=float) - np.asarray(neg, dtype=float)
    err = rel_pos * np.abs(pos) + rel_neg * np.abs(neg)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = float(np.max(np.where(err > 0, err / np.abs(value), 0.0)))
    if not rel <= ACCEPT:
        at = int(np.argmax(err / np.maximum(np.abs(value), _TINY))) if value.ndim else 0
        raise ConvergenceError(
            f"the mean {float(np.ravel(value)[at]):.6g} is the difference of a positive part "
            f"{float(np.ravel(pos)[at]):.6g} and a negative part {float(np.ravel(neg)[at]):.6g} (a law with "
            f"mass below 0, a mean near 0 beside its spread): relative error estimate {rel:.3g}, above "
            f"{ACCEPT:g}"
        )
    return (value[()] if value.ndim == 0 else value), rel
