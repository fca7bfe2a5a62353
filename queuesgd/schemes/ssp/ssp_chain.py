"""The CTMC of stale-synchronous workers' clock offsets (the ``ctmc`` road of ``StaleSynchronous``).

A worker's place is its clock offset ``d = 0..s`` from the slowest worker
times what it does there (compute phase ``i`` of its phase-type law, or
communicating), or *blocked* at offset ``s + 1`` and about to start phase
``j``. Workers of one speed class are lumped: a state is one composition
of the class's population over these ``L = (s + 1)(k + 1) + k`` places per
class (:func:`queuesgd.markov.compositions`), indexed by its exact rank. See
``docs/schemes/stale-synchronous.md``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from queuesgd import markov
from queuesgd.distributions import PhaseType
from queuesgd.markov import composition_rank, composition_table, compositions

__all__ = ["clock_offset_chain"]


class _Places:
    """Place numbers of one class: ``run(d, i)``, ``com(d)`` for offsets ``d <= s``, ``blk(j)``."""

    def __init__(self, s: int, k: int) -> None:
        self.s, self.k, self.K1 = s, k, k + 1
        self.L = (s + 1) * self.K1 + k

    def run(self, d: int, i: int) -> int:
        return d * self.K1 + i

    def com(self, d: int) -> int:
        return d * self.K1 + self.k

    def blk(self, j: int) -> int:
        return (self.s + 1) * self.K1 + j


class _Space:
    """The states with at least one worker at offset 0, and the lookup of a count array's state."""

    def __init__(self, places: _Places, pops: list[int]) -> None:
        L, C = places.L, len(pops)
        self.pops = pops
        comps = [compositions(n, L) for n in pops]
        self.tables = [composition_table(n, L) for n in pops]
        sizes = np.array([len(x) for x in comps], dtype=np.int64)
        # mixed radix over the classes' ranks, the first class most significant
        self.strides = np.concatenate(([1], np.cumprod(sizes[::-1])[:-1]))[::-1]
        S_all = int(sizes.prod())
        idx = np.arange(S_all, dtype=np.int64)
        ranks = (idx[:, None] // self.strides[None, :]) % sizes[None, :]
        counts = np.stack([comps[c][ranks[:, c]] for c in range(C)], axis=1)  # (S_all, C, L)
        offset0 = [places.run(0, i) for i in range(places.k)] + [places.com(0)]
        at0 = counts[:, :, offset0].sum(axis=(1, 2))
        valid = at0 >= 1
        self.counts, self.at0 = counts[valid], at0[valid]
        self.lookup = np.full(S_all, -1, dtype=np.int64)
        self.lookup[idx[valid]] = np.arange(len(self.counts))

    def index(self, counts: np.ndarray) -> np.ndarray:
        """States of count arrays of shape (m, C, L)."""
        g = np.zeros(len(counts), dtype=np.int64)
        for c, n in enumerate(self.pops):
            g += composition_rank(counts[:, c, :], n, self.tables[c]) * self.strides[c]
        dst = self.lookup[g]
        if np.any(dst < 0):  # pragma: no cover - a bug in the transition rules
            raise AssertionError("SSP chain left its state space")
        return dst


class _Rates:
    """Sparse generator entries, collected move by move."""

    def __init__(self, space: _Space) -> None:
        self.space = space
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []

    def add(self, src: np.ndarray, new: np.ndarray, rate: np.ndarray) -> None:
        self.rows.append(src)
        self.cols.append(self.space.index(new))
        self.vals.append(rate)

    def generator(self) -> sp.csr_matrix:
        S = len(self.space.counts)
        states = np.arange(S)
        r, q, v = np.concatenate(self.rows), np.concatenate(self.cols), np.concatenate(self.vals)
        out = np.bincount(r, weights=v, minlength=S)
        G = sp.csr_matrix(
            (np.concatenate([v, -out]), (np.concatenate([r, states]), np.concatenate([q, states]))),
            shape=(S, S),
        )
        G.sum_duplicates()
        return G


def _compute_moves(rates: _Rates, places: _Places, c: int, law: PhaseType, d: int) -> None:
    """Phase changes and ends of computation of class ``c``'s workers at offset ``d``."""
    counts = rates.space.counts
    states = np.arange(len(counts))
    T = np.asarray(law.T)
    exits = -T.sum(axis=1)
    for i in range(places.k):
        m = counts[:, c, places.run(d, i)]
        src = states[m > 0]
        if src.size == 0:
            continue
        for j in range(places.k):
            if j != i and T[i, j] > 0:
                new = counts[src].copy()
                new[:, c, places.run(d, i)] -= 1
                new[:, c, places.run(d, j)] += 1
                rates.add(src, new, m[src] * T[i, j])
        if exits[i] > 1e-300:
            new = counts[src].copy()
            new[:, c, places.run(d, i)] -= 1
            new[:, c, places.com(d)] += 1
            rates.add(src, new, m[src] * exits[i])


def _completions(rates: _Rates, places: _Places, c: int, law: PhaseType, d: int, gamma: float) -> None:
    """Class ``c``'s workers at offset ``d`` complete an iteration (communication of rate ``gamma``)."""
    space, s, k, K1 = rates.space, places.s, places.k, places.K1
    counts = space.counts
    states = np.arange(len(counts))
    alpha = np.asarray(law.alpha)
    starts = [j for j in range(k) if alpha[j] > 0]
    m = counts[:, c, places.com(d)]
    busy = m > 0
    uniq = busy & (space.at0 == 1) if d == 0 else np.zeros(len(counts), dtype=bool)
    src = states[busy & ~uniq]
    for j in starts:
        if src.size == 0:
            break
        new = counts[src].copy()
        new[:, c, places.com(d)] -= 1
        new[:, c, places.run(d + 1, j) if d + 1 <= s else places.blk(j)] += 1
        rates.add(src, new, m[src] * gamma * alpha[j])
    src = states[uniq]
    if src.size:
        # the unique slowest worker finishes: the minimum clock advances, all offsets drop by one
        old = counts[src].copy()
        old[:, c, places.com(0)] -= 1
        shifted = np.zeros_like(old)
        shifted[:, :, : s * K1] = old[:, :, K1 : (s + 1) * K1]
        for j in range(k):
            shifted[:, :, places.run(s, j)] += old[:, :, places.blk(j)]
        for j in starts:
            new = shifted.copy()
            new[:, c, places.run(0, j)] += 1
            rates.add(src, new, m[src] * gamma * alpha[j])


def clock_offset_chain(
    s: int, laws: list[PhaseType], pops: list[int], gamma: float
) -> tuple[np.ndarray, np.ndarray]:
    """Steady state of the clock-offset chain of ``pops[c]`` workers of compute law ``laws[c]`` each.

    Every class's law has the same number ``k`` of phases; communication is
    exponential of rate ``gamma``; ``s`` is the staleness bound. Returns
    ``(pi, counts)`` over the states reachable from "everyone starts
    computing at offset 0", with ``counts`` of shape (states, classes, L):
    the workers of each class in each place (offset ``d = 0..s`` x compute
    phase ``i``, offset ``d`` communicating, then blocked and about to start
    phase ``j``).

    Examples
    --------
    Two workers, exponential compute and communication of rate 1, bound 1:
    the iteration rate is ``gamma`` times the mean number communicating,
    112/129 (the labelled two-worker chain gives the same, see the tests).

    >>> from queuesgd.distributions import Exponential
    >>> pi, counts = clock_offset_chain(1, [Exponential(1.0).to_phase_type()], [2], 1.0)
    >>> counts.shape                  # 9 reachable states, 1 class, L = 2 x 2 + 1 places
    (9, 1, 5)
    >>> round(float(pi @ counts[:, 0, [1, 3]].sum(axis=1)), 9), round(112 / 129, 9)
    (0.868217054, 0.868217054)
    """
    k = laws[0].phases
    places = _Places(s, k)
    space = _Space(places, pops)
    rates = _Rates(space)
    for c, law in enumerate(laws):
        for d in range(s + 1):
            _compute_moves(rates, places, c, law, d)
            _completions(rates, places, c, law, d, gamma)
    G = rates.generator()
    # keep the states reachable from "everyone starts computing at offset 0" (a blocked worker's
    # start phase j with alpha_j = 0, for instance, never occurs)
    first = np.zeros((1, len(pops), places.L), dtype=np.int64)
    j0 = int(np.flatnonzero(np.asarray(laws[0].alpha) > 0)[0])
    first[0, :, places.run(0, j0)] = pops
    start = int(space.index(first)[0])
    reach = np.sort(breadth_first_order(G, start, directed=True, return_predecessors=False))
    # the states lie on a lattice of dimension classes x (L - 1): sparse LU fills in there (18,564 states
    # of s = 2 took 7 s to factor, 116,280 two minutes), the Gauss-Seidel-preconditioned Krylov solve not
    pi, _ = markov.solve_auto(G[reach][:, reach], dimension=len(pops) * (places.L - 1))
    return pi, space.counts[reach]
