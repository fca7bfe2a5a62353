"""The work of computing every order statistic at once, estimated before it starts.

:func:`~queuesgd.orderstats.expected_order_statistics` evaluates, at each
quadrature node (or support point of discrete laws), the probability that
exactly ``j`` of the ``n`` durations are done, for every ``j``: a binomial pmf
of ``m + 1`` terms per group of ``m`` identical laws, convolved group after
group (a convolution of ``a`` by ``b`` terms costs ``a x b`` multiply-adds).
:func:`order_statistics_seconds` prices that from the group sizes alone, and
:func:`check_order_statistics_work` refuses a call priced above
:data:`MAX_ORDER_STATISTICS_SECONDS`.

Measured on a 2-core development machine (2026-11-28; lognormal and gamma laws,
one group of n and two groups of n/2):

===========  ==========  ===============  =========  ============
n            groups      quadrature rows  seconds    estimate (s)
===========  ==========  ===============  =========  ============
256          1           2,974-3,084      0.26-0.29  0.6
1,024        1           3,500-3,652      1.3        2.5
4,096        1           4,996-5,096      4.5-6.0    9.8
1,024        2           3,656            6.3        12
4,096        2           5,126            112        161
===========  ==========  ===============  =========  ============

Examples
--------
>>> round(order_statistics_seconds([4096]), 1)
9.8
>>> check_order_statistics_work([100_000], "n", 100_000)      # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: n: got 100000; accepted: durations whose order statistics ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "CONVOLUTION_SECONDS",
    "MAX_ORDER_STATISTICS_SECONDS",
    "PMF_SECONDS",
    "QUADRATURE_ROWS",
    "check_order_statistics_work",
    "order_statistics_seconds",
]

#: The longest :func:`~queuesgd.orderstats.expected_order_statistics` may run by its estimate.
MAX_ORDER_STATISTICS_SECONDS = 60.0
#: Quadrature nodes one call evaluates, rounded up (2,974-5,126 measured for n = 256-4,096; slowly growing).
QUADRATURE_ROWS = 6_000
#: Seconds per term of a binomial pmf, with its cumulated sums (220-380 ns measured), rounded up.
PMF_SECONDS = 4e-7
#: Seconds per multiply-add of the convolution of two groups' pmfs (5.3 ns measured), rounded up.
CONVOLUTION_SECONDS = 6e-9


def order_statistics_seconds(sizes: Sequence[int], rows: int = QUADRATURE_ROWS) -> float:
    """Estimated seconds of every order statistic of groups of ``sizes`` identical laws, ``rows`` nodes.

    ``rows x (PMF_SECONDS x (n + groups) + CONVOLUTION_SECONDS x sum_g (M_(g-1) + 1)(m_g + 1))`` where
    ``M_(g-1)`` counts the durations of the groups before ``g``.

    Examples
    --------
    >>> round(order_statistics_seconds([2048, 2048]), 0)          # the convolution dominates
    161.0
    >>> round(order_statistics_seconds([1, 1, 1], rows=2), 12)     # three coins at two support points
    4.92e-06
    """
    terms = madds = 0.0
    before = 0
    for m in (int(v) for v in sizes):
        terms += m + 1
        if before:
            madds += (before + 1.0) * (m + 1.0)
        before += m
    return float(rows) * (PMF_SECONDS * terms + CONVOLUTION_SECONDS * madds)


def check_order_statistics_work(
    sizes: Sequence[int], field: str, value: Any, rows: int = QUADRATURE_ROWS
) -> None:
    """Refuse, before any work, order statistics priced above :data:`MAX_ORDER_STATISTICS_SECONDS`.

    Raises
    ------
    InvalidParameterError
        Naming ``field`` (``n``, ``laws``), the estimate, and what is accepted.

    Examples
    --------
    >>> check_order_statistics_work([1000], "n", 1000)
    """
    from queuesgd.errors import InvalidParameterError

    seconds = order_statistics_seconds(sizes, rows)
    if seconds > MAX_ORDER_STATISTICS_SECONDS:
        single = int(MAX_ORDER_STATISTICS_SECONDS / (rows * PMF_SECONDS)) - 1
        raise InvalidParameterError(
            field,
            value,
            f"durations whose order statistics take at most {MAX_ORDER_STATISTICS_SECONDS:.0f} s by the "
            f"estimate (this: about {seconds:,.0f} s for {sum(int(m) for m in sizes):,} durations in "
            f"{len(sizes)} groups of equal laws, {rows:,} nodes): at most about {single:,} identical "
            "durations of a law without a closed form, fewer in several groups (their convolution costs "
            "the product of their sizes); expected_order_statistic() computes one k at a fraction of the "
            "cost, exponential, normal and deterministic laws take their closed forms",
        )
