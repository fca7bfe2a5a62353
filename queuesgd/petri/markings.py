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

__all__ = [
    "HashCollision",
    "KeyOverflow",
    "MarkingStore",
    "PackedKeys",
    "TooManyMarkings",
    "hash_rows",
    "unique_rows",
]


class HashCollision(Exception):
    """Two different rows had the same 64-bit key (internal: restart with other constants)."""


class KeyOverflow(Exception):
    """The places' bit fields would need more than 63 bits (internal: use hashed keys instead)."""


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
        return _find_sorted(self.keys, self.ids, k)

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
            _insert_sorted(self.keys, self.ids, kn[o], new_ids[o])
        else:
            new_ids = np.empty(0, np.int64)
        return ids[inv], new_ids


class PackedKeys:
    """Distinct markings as exact int64 keys in mixed radix: ``key = sum m_p R_p``, ``R_p = prod_{q<p} r_q``.

    Unlike :func:`hash_rows` the key is injective, so rows never need comparing,
    and firing a transition adds a constant to it (:meth:`delta`) as long as
    every place holds fewer than its radix ``r_p`` tokens; :meth:`fit` widens
    the radices (and re-keys what is stored) before a frontier could overflow
    one, and raises :class:`KeyOverflow` past 2^62 keys. Membership is a
    direct-address table (``id + 1`` per key, ``np.zeros`` so that only the
    pages touched cost anything) while the key space has at most
    ``TABLE_KEYS`` keys, and ``searchsorted`` in sorted keys above. Ids and
    the order of new markings are those of :meth:`MarkingStore.add`: new
    keys numbered in order of first appearance.

    Examples
    --------
    >>> pk = PackedKeys(2, limit=10)
    >>> pk.fit(np.array([3, 1]), np.empty((0, 2), np.int64))
    >>> ids, new, first = pk.add_keys(pk.pack(np.array([[1, 0], [0, 1], [1, 0]])))
    >>> ids.tolist(), new.tolist(), first.tolist(), pk.n
    ([0, 1, 0], [0, 1], [0, 1], 2)
    """

    #: Largest key space kept as a direct-address table (16 MB of int32, touched sparsely).
    TABLE_KEYS = 1 << 22
    _OFFSET = 2**31 - 1

    def __init__(self, P: int, limit: int, implied: int | None = None) -> None:
        # ``implied``: a place whose tokens the others determine (a conserved total): left out of keys
        self.implied = implied
        self.radix = np.ones(P, dtype=np.int64)
        self.weight = np.ones(P, dtype=np.int64)
        self.limit = limit
        self.n = 0
        self.keys_of = np.empty(1024, dtype=np.int64)
        self.table: np.ndarray | None = None
        self.keys = [np.empty(0, np.int64), np.empty(0, np.int64)]
        self.ids = [np.empty(0, np.int64), np.empty(0, np.int64)]
        self._delta: np.ndarray | None = None
        self._neg = np.empty(0, dtype=np.int32)

    def pack(self, rows: np.ndarray) -> np.ndarray:
        return rows @ self.weight

    def delta(self, C: np.ndarray) -> np.ndarray:
        """Key increment of each row of ``C`` (cached until the radices change)."""
        if self._delta is None:
            self._delta = C @ self.weight
        return self._delta

    def fit(self, need: np.ndarray, rows: np.ndarray) -> None:
        """Widen the radices so that every place can hold ``need`` tokens; re-key the stored ``rows``."""
        fits = need < self.radix
        if self.implied is not None:
            fits[self.implied] = True
        if fits.all() and self.n:
            return
        # grow at least geometrically, so that rising token counts re-key only a few times
        radix = np.where(fits, self.radix, np.maximum(need + 1, 2 * self.radix - 1))
        if self.implied is not None:
            radix[self.implied] = 1
        if sum(float(np.log2(r)) for r in radix) > 62:
            raise KeyOverflow
        self.radix = radix
        self.weight = np.concatenate(([1], np.cumprod(radix)[:-1])).astype(np.int64)
        if self.implied is not None:
            self.weight[self.implied] = 0
        total = int(np.prod(radix))
        self._delta = None
        k = self.pack(rows[: self.n])
        self.keys_of[: self.n] = k
        if total <= self.TABLE_KEYS and self.limit < 2**31 - 1:
            self.table = np.zeros(total, dtype=np.int32)
            self.table[k] = np.arange(1, self.n + 1, dtype=np.int32)
        else:
            self.table = None
            o = np.argsort(k)
            self.keys = [k[o], np.empty(0, np.int64)]
            self.ids = [o.astype(np.int64), np.empty(0, np.int64)]

    def _grow(self, m: int) -> None:
        if self.n + m > self.limit:
            raise TooManyMarkings(self.n + m)
        while self.n + m > self.keys_of.size:
            self.keys_of = np.concatenate((self.keys_of, np.empty_like(self.keys_of)))

    def add_keys(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ids of the keys ``k``, the ids that are new, and the index in ``k`` of each new one's first use."""
        if self.table is not None:
            return self._add_table(k)
        return self._add_sorted(k)

    def _add_table(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        table = self.table
        got = table[k]
        miss = np.flatnonzero(got == 0)
        km = k[miss]
        # Distinct keys in order of first appearance, without sorting: each missing key's slot takes the
        # smallest position among its uses, stored as position - (2^31 - 1) < 0 (absent keys are 0).
        if self._neg.size < km.size:
            self._neg = np.arange(max(km.size, 2 * self._neg.size), dtype=np.int64).astype(np.int32)
            self._neg -= np.int32(self._OFFSET)
        neg = self._neg[: km.size]
        np.minimum.at(table, km, neg)
        first = np.flatnonzero(table[km] == neg)
        u = km[first]
        self._grow(u.size)
        new_ids = np.arange(self.n, self.n + u.size)
        table[u] = np.arange(self.n + 1, self.n + 1 + u.size, dtype=np.int32)
        self.keys_of[self.n : self.n + u.size] = u
        self.n += u.size
        got[miss] = table[km]
        ids = got.astype(np.int64)
        ids -= 1
        return ids, new_ids, miss[first]

    def _add_sorted(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u, first, inv = np.unique(k, return_index=True, return_inverse=True)
        ids = _find_sorted(self.keys, self.ids, u)
        new = np.flatnonzero(ids < 0)
        if new.size == 0:
            return ids[inv.ravel()], np.empty(0, np.int64), np.empty(0, np.int64)
        self._grow(new.size)
        new = new[np.argsort(first[new], kind="stable")]  # first-appearance order
        new_ids = np.arange(self.n, self.n + new.size)
        ids[new] = new_ids
        self.keys_of[self.n : self.n + new.size] = u[new]
        self.n += new.size
        ns = np.sort(new)  # u is sorted: these are the new keys in key order
        _insert_sorted(self.keys, self.ids, u[ns], ids[ns])
        return ids[inv.ravel()], new_ids, first[new]


def _find_sorted(keys: list[np.ndarray], ids: list[np.ndarray], k: np.ndarray) -> np.ndarray:
    """The id of each key of ``k`` in a two-run sorted index (``-1`` where absent)."""
    out = np.full(k.size, -1, dtype=np.int64)
    for run, run_ids in zip(keys, ids):
        if run.size == 0:
            continue
        pos = np.minimum(np.searchsorted(run, k), run.size - 1)
        hit = run[pos] == k
        out[hit] = run_ids[pos[hit]]
    return out


def _insert_sorted(
    keys: list[np.ndarray], ids: list[np.ndarray], new_keys: np.ndarray, new_ids: np.ndarray
) -> None:
    """Add sorted ``new_keys`` (and their ids) to a two-run sorted index, in place.

    ``keys[0]``/``ids[0]`` is the large sorted run, ``keys[1]``/``ids[1]`` the
    small one that takes the additions; the small run is merged into the large
    one once it outgrows a quarter of it (amortized ``O(log n)`` per key).
    """
    rk = np.concatenate((keys[1], new_keys))
    ri = np.concatenate((ids[1], new_ids))
    o = np.argsort(rk, kind="stable")
    keys[1], ids[1] = rk[o], ri[o]
    if keys[1].size > max(4096, keys[0].size // 4):
        mk = np.concatenate(keys)
        mi = np.concatenate(ids)
        o = np.argsort(mk, kind="stable")
        keys[:] = [mk[o], np.empty(0, mk.dtype)]
        ids[:] = [mi[o], np.empty(0, np.int64)]
