"""Compositions of an integer and their ranks: the states of counting Markov chains.

A closed network's class (customers over stations), a Petri net's counting
places, the clock offsets of stale-synchronous workers and the phase counts
of eager-SGD's processes are all *compositions*: vectors of ``parts``
non-negative integers adding up to ``n``. :func:`compositions` lists them in
lexicographic order of the leading parts (vectorized, no Python loop over
compositions) and :func:`composition_rank` inverts that order exactly (an
integer rank, never a float), so generators can be indexed by mixed-radix
numbers of ranks.

Examples
--------
>>> compositions(2, 3).tolist()
[[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0], [2, 0, 0]]
>>> table = composition_table(2, 3)
>>> composition_rank(compositions(2, 3), 2, table).tolist()
[0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

from math import comb

import numpy as np

__all__ = ["composition_count", "composition_rank", "composition_table", "compositions"]


def composition_count(n: int, parts: int) -> int:
    """Number of compositions of ``n`` into ``parts`` non-negative parts: ``C(n + parts - 1, parts - 1)``.

    Examples
    --------
    >>> composition_count(3, 3)         # 3 customers on 3 stations
    10
    """
    return comb(n + parts - 1, parts - 1)


def compositions(n: int, parts: int) -> np.ndarray:
    """All compositions of ``n`` into ``parts`` non-negative parts, shape ``(count, parts)``, int64.

    Built part by part, in lexicographic order of the leading parts, which
    :func:`composition_rank` inverts.

    Examples
    --------
    >>> compositions(3, 2).tolist()
    [[0, 3], [1, 2], [2, 1], [3, 0]]
    """
    rows = np.zeros((1, 0), dtype=np.int64)
    rem = np.array([n], dtype=np.int64)
    for _ in range(parts - 1):
        counts = rem + 1
        parent = np.repeat(np.arange(len(rem)), counts)
        starts = np.cumsum(counts) - counts
        value = np.arange(counts.sum()) - np.repeat(starts, counts)
        rows = np.hstack([rows[parent], value[:, None]])
        rem = rem[parent] - value
    return np.hstack([rows, rem[:, None]]).astype(np.int64)


def composition_table(n: int, parts: int) -> np.ndarray:
    """``T[r, p]`` = number of compositions of ``r`` into ``p`` parts, ``r <= n``, ``p <= parts``.

    Examples
    --------
    >>> composition_table(2, 2).tolist()
    [[0, 1, 1], [0, 1, 2], [0, 1, 3]]
    """
    T = np.zeros((n + 1, parts + 1), dtype=np.int64)
    for p in range(1, parts + 1):
        for r in range(n + 1):
            T[r, p] = composition_count(r, p)
    return T


def composition_rank(comp: np.ndarray, n: int, table: np.ndarray) -> np.ndarray:
    """Position of each composition (rows of ``comp``, all of ``n``) in :func:`compositions` order.

    Compositions of ``r`` into ``p`` parts whose first part is below ``a``
    number ``T[r, p] - T[r - a, p]`` (hockey-stick identity); ``table`` is
    :func:`composition_table` of at least ``(n, parts)``.

    Examples
    --------
    >>> composition_rank(np.array([[2, 1], [0, 3]]), 3, composition_table(3, 2)).tolist()
    [2, 0]
    """
    comp = np.asarray(comp, dtype=np.int64)
    parts = comp.shape[1]
    rank = np.zeros(len(comp), dtype=np.int64)
    rem = np.full(len(comp), n, dtype=np.int64)
    for j in range(parts - 1):
        p = parts - j
        a = comp[:, j]
        rank += table[rem, p] - table[rem - a, p]
        rem = rem - a
    return rank
