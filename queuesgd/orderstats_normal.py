"""Order statistics of i.i.d. normal laws: ``mu + sigma E[Z_(k:n)]``, with no cancellation in ``E[Z_(k:n)]``.

A normal law is the one law here with mass below 0, so its order statistics are differences of a
positive and a negative part, and a mean near 0 beside the spread cancelled: the median of three
``Normal(1e-6, 1)`` came out ``9.99998981e-07`` (1e-6 exactly by symmetry) with no error (audit
2026-11-28). I.i.d. normal laws need neither part: ``X_(k:n) = mu + sigma Z_(k:n)``, and for the standard
normal ``P(Z_(k:n) <= -x) = P(Z_(n+1-k:n) > x)`` (reflect every draw), so for ``k > n + 1 - k``

``E[Z_(k:n)] = integral_0^inf (P(Z_(k:n) > x) - P(Z_(n+1-k:n) > x)) dx
= integral_0^inf P(n + 1 - k <= B(x) <= k - 1) dx``, ``B(x) ~ Bin(n, Phi(x))``,

a nonnegative integrand, nonincreasing in ``x`` (its derivative in ``p = Phi(x) >= 1/2`` is
``n (b(n - k; n - 1, p) - b(k - 1; n - 1, p)) <= 0``), integrated by
:func:`~queuesgd.orderstats_numerics.integrate_survival` to 1e-9 of itself. ``E[Z_(n+1-k:n)]`` is its
negative, the median of an odd ``n`` is 0. What remains is ``mu + sigma E[Z_(k:n)]``, two numbers of
opposite signs only where ``mu`` itself sits within the spread of the order statistics; where that sum
cancels below 1e-9 of its parts' accuracy it raises :class:`~queuesgd.errors.ConvergenceError`.

Examples
--------
>>> from queuesgd.distributions import Normal
>>> float(normal_order_statistics(Normal(1e-6, 1.0), 3, [2])[0])      # the median of three: the mean
1e-06
>>> round(float(normal_order_statistics(Normal(0.0, 1.0), 5, [5])[0]), 4)   # Harter (1961): 1.1630
1.163
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Normal
from queuesgd.errors import ConvergenceError, InvalidParameterError
from queuesgd.orderstats_numerics import ACCEPT, count_below_all, count_tail, integrate_survival, law_tails

__all__ = ["normal_order_statistics"]

_STANDARD = Normal(0.0, 1.0)
#: The rounding of a double.
_EPS = float(np.finfo(float).eps)


def _standard(n: int, ks: np.ndarray) -> tuple[np.ndarray, float]:
    """``E[Z_(k:n)]`` of the standard normal for each ``k`` in ``ks``, and the relative error bound."""
    upper = np.maximum(ks, n + 1 - ks)  # the upper of k and its reflection n + 1 - k
    lower = n + 1 - upper
    sign = np.where(ks == upper, 1.0, -1.0)
    out = np.zeros(ks.size)
    live = upper > lower  # the median of an odd n is 0
    if not live.any():
        return out, 0.0
    groups = [(_STANDARD, n)]
    hi_k, lo_k = np.unique(upper[live]), n + 1 - np.unique(upper[live])
    if hi_k.size == 1:

        def window(x: np.ndarray) -> np.ndarray:  # P(lower <= B(x) <= upper - 1)
            return count_tail(groups, int(hi_k[0]), x) - count_tail(groups, int(lo_k[0]), x)

        ladders = None
    else:

        def window(x: np.ndarray) -> np.ndarray:
            below = count_below_all(groups, x)
            return below[:, hi_k - 1] - below[:, lo_k - 1]

        # The widest window (the maximum's, k = n) falls last; the narrowest first; the law between.
        ladders = [
            lambda x: count_tail(groups, n, x) - count_tail(groups, 1, x),
            lambda x: count_tail(groups, int(hi_k[0]), x) - count_tail(groups, int(lo_k[0]), x),
            lambda x: law_tails(_STANDARD, x)[1],
        ]
    value, rel = integrate_survival(window, 0.0, 1.0, (1.0, 2.0, 5.0), ladders)
    by_upper = dict(zip(hi_k.tolist(), np.atleast_1d(np.asarray(value, dtype=float)).tolist()))
    out[live] = sign[live] * np.array([by_upper[u] for u in upper[live].tolist()])
    return out, rel


def normal_order_statistics(law: Normal, n: int, ks: Sequence[int]) -> np.ndarray:
    """``E[X_(k:n)]`` of ``n`` i.i.d. draws of the normal ``law`` for each ``k`` in ``ks`` (1 = the minimum).

    Raises
    ------
    InvalidParameterError
        For a ``law`` that is not a numeric :class:`~queuesgd.distributions.Normal`, an ``n`` that is not
        an integer >= 1, or a ``k`` outside ``1..n``.
    ConvergenceError
        Where ``mu + sigma E[Z_(k:n)]`` cancels: its error bound (the quadrature's on ``sigma E[Z]``, and
        the rounding of the sum) is above 1e-9 of the result.

    Examples
    --------
    >>> from queuesgd.distributions import Normal
    >>> normal_order_statistics(Normal(3.0, 0.5), 10, [1, 10]).round(6).tolist()   # 3 -+ 0.5 x 1.538753
    [2.230624, 3.769376]
    """
    if not isinstance(law, Normal):
        raise InvalidParameterError("law", law, "a queuesgd.distributions.Normal")
    law.check_numeric("normal_order_statistics()")
    n = _checks.integer("n", n, maximum=2**53)
    k_arr = np.asarray(ks)
    if not (k_arr.ndim == 1 and k_arr.size and np.issubdtype(k_arr.dtype, np.integer)) or not (
        1 <= k_arr.min() and k_arr.max() <= n
    ):
        raise InvalidParameterError("ks", ks, f"a non-empty sequence of integers from 1 to n = {n}")
    e, rel = _standard(n, k_arr.astype(int))
    mu, sigma = float(law.mean), float(law.std)
    spread = sigma * np.abs(e)
    out = mu + sigma * e
    err = rel * spread + _EPS * abs(mu)  # the quadrature's error of sigma E[Z], the sum's rounding
    bad = err > ACCEPT * np.abs(out)
    if bad.any():
        k = int(np.asarray(ks)[np.argmax(bad)])
        raise ConvergenceError(
            f"E[X_({k}:{n})] of {law!r} is mu + sigma E[Z] = {mu:.6g} + {sigma * e[np.argmax(bad)]:.6g}: "
            f"the two cancel, leaving it {float(out[np.argmax(bad)]):.3g} with an error bound "
            f"{float(err[np.argmax(bad)]):.3g}, above {ACCEPT:g} of it"
        )
    return out
