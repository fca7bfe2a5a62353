"""Sets of markings keyed by 64-bit hashes (the bookkeeping of state-space generation).

A marking (a row of token counts) is keyed by the sum of its tokens times odd
constants (mod 2^64), mixed by splitmix64's finalizer. Keys are compared
first; rows are then compared too, so a collision is never silent: it raises
:class:`HashCollision` and the generator restarts with other constants.

Examples
--------
>>> mult = np.array([3, 5], dtype=np.uint64)
>>> store = MarkingStore(2, mult, limit=10)
>>> ids, new = store.add(np.array([[1, 0], [0, 1], [1, 0]]))
>>> ids.tolist(), new.tolist(), store.n
([0, 1, 0], [0, 1], 2)
"""

from __future__ import annotations

import numpy as np

__all__ = ["HashCollision", "MarkingStore", "TooManyMarkings", "hash_rows", "unique_rows"]


class HashCollision(Exception):
    """Two different rows had the same 64-bit key (internal: restart with other constants)."""


class TooManyMarkings(Exception):
    """More markings than the store's limit (``count``: how many there would be)."""

    def __init__(self, count: int) -> None:
        self.count = count


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def hash_rows(rows: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """uint64 key per row: sum of tokens times odd constants (mod 2^64), then splitmix64's mixer."""
    h = np.zeros(rows.shape[0], dtype=np.uint64)
    for p in range(rows.shape[1]):
        h += rows[:, p].astype(np.uint64) * mult[p]
    h ^= h >> np.uint64(30)
    h *= _M1
    h ^= h >> np.uint64(27)
    h *= _M2
    h ^= h >> np.uint64(31)
    return h


def unique_rows(rows: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First index of each distinct row (in order of first appearance), the inverse map, and their keys."""
    keys = hash_rows(rows, mult)
    ukeys, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not np.array_equal(rows, rows[first[inv]]):
        raise HashCollision
    order = np.argsort(first, kind="stable")  # first-appearance order, deterministic
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inv], ukeys[order]


class MarkingStore:
    """Distinct markings with their keys, sorted for ``searchsorted`` membership.

    Keys live in a large sorted array and a small recent one that is merged in
    when it grows past a quarter of the large one (amortized O(n log n)).
    """

    def __init__(self, P: int, mult: np.ndarray, limit: int) -> None:
        self.rows = np.empty((1024, P), dtype=np.int64)
        self.n = 0
        self.mult = mult
        self.limit = limit
        self.keys = [np.empty(0, np.uint64), np.empty(0, np.uint64)]
        self.ids = [np.empty(0, np.int64), np.empty(0, np.int64)]

    def _find(self, k: np.ndarray) -> np.ndarray:
        out = np.full(k.size, -1, dtype=np.int64)
        for keys, ids in zip(self.keys, self.ids):
            if keys.size == 0:
                continue
            pos = np.minimum(np.searchsorted(keys, k), keys.size - 1)
            hit = keys[pos] == k
            out[hit] = ids[pos[hit]]
        return out

    def add(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids of ``rows`` (new rows appended in order) and the ids that are new."""
        first, inv, k = unique_rows(rows, self.mult)
        reps = rows[first]
        ids = self._find(k)
        found = ids >= 0
        if found.any() and not np.array_equal(self.rows[ids[found]], reps[found]):
            raise HashCollision
        new = np.flatnonzero(~found)
        if new.size:
            if self.n + new.size > self.limit:
                raise TooManyMarkings(self.n + new.size)
            new_ids = np.arange(self.n, self.n + new.size)
            ids[new] = new_ids
            while self.n + new.size > self.rows.shape[0]:
                grown = np.empty((2 * self.rows.shape[0], self.rows.shape[1]), dtype=np.int64)
                grown[: self.n] = self.rows[: self.n]
                self.rows = grown
            self.rows[self.n : self.n + new.size] = reps[new]
            self.n += new.size
            kn = k[new]
            o = np.argsort(kn)
            rk = np.concatenate((self.keys[1], kn[o]))
            ri = np.concatenate((self.ids[1], new_ids[o]))
            o = np.argsort(rk, kind="stable")
            self.keys[1], self.ids[1] = rk[o], ri[o]
            if self.keys[1].size > max(4096, self.keys[0].size // 4):
                mk = np.concatenate(self.keys)
                mi = np.concatenate(self.ids)
                o = np.argsort(mk, kind="stable")
                self.keys = [mk[o], np.empty(0, np.uint64)]
                self.ids = [mi[o], np.empty(0, np.int64)]
        else:
            new_ids = np.empty(0, np.int64)
        return ids[inv], new_ids
