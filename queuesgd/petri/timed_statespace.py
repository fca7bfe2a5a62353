"""The state space of a GSPN without immediate transitions, on exact packed keys (the fast path).

:func:`~queuesgd.petri.statespace.state_space` tries :func:`generate_timed`
first; it returns None wherever the general, hashed path must decide (and
raise its usual errors). See the implementation notes of
:mod:`queuesgd.petri.statespace`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from queuesgd.petri.markings import KeyOverflow, PackedKeys, TooManyMarkings
from queuesgd.petri.reachability import StateSpace

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["CHUNK_CELLS", "generate_timed"]

#: Frontier rows expanded per chunk are bounded so that the successor arrays stay
#: within a few hundred MB.
CHUNK_CELLS = 1 << 23


class _Fallback(Exception):
    """The packed fast path cannot finish this net: generate it with the general path."""


def generate_timed(net: PetriNet, max_states: int, max_tokens: int) -> StateSpace | None:
    """The state space of a net without immediate transitions, or None to use the general path.

    Same breadth-first order, chunks, markings and edges as the general,
    hashed path of :func:`~queuesgd.petri.statespace.state_space` (tested
    against it), with a fraction of its fixed cost per frontier, which
    dominates on small nets: a marking is packed into one exact int64 key
    (:class:`~queuesgd.petri.markings.PackedKeys`, mixed radix, widened as
    tokens grow), so firing ``t`` adds a constant to the key, membership is
    a table look-up on small nets, and one enabling test covers all
    transitions at once. Every exceptional case (keys past 2^62, too many
    markings or tokens, an edge that could repeat forever) returns None, and
    the general path then raises its usual error.

    Parameters
    ----------
    net : PetriNet
    max_states, max_tokens : int
        As for :func:`~queuesgd.petri.statespace.state_space` (checked there).

    Returns
    -------
    StateSpace or None
        None for a net with immediate transitions or symbolic weights, and
        wherever the general path must decide.

    Examples
    --------
    >>> from queuesgd import PetriNet
    >>> net = PetriNet("ring")
    >>> _ = net.place("a", tokens=2)
    >>> _ = net.place("b")
    >>> _ = net.timed("ab", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("ba", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
    >>> generate_timed(net, 100, 100).markings.tolist()
    [[2, 0], [1, 1], [0, 2]]
    """
    timed = net.is_timed
    if not timed.all() or timed.size == 0 or net.weights.dtype == object:
        return None
    pre, post, inh = net.pre, net.post, net.inhibit
    C = post - pre
    T, P = C.shape
    watched = (inh > 0).any(axis=0)
    growing = (C >= 0).all(axis=1) & (C > 0).any(axis=1) & (C[:, watched] == 0).all(axis=1)
    any_growing = bool(growing.any())
    servers = net.servers
    arcs = _ArcTables(pre, inh, servers)
    gain = np.maximum(C.max(axis=0, initial=0), 0)
    m0 = net.initial_marking
    # A net whose every firing keeps the token count keeps every place within that total: the radices
    # are known at once, and the last place (total minus the others) can stay out of the key.
    conserving = bool((C.sum(axis=1) == 0).all())
    total = int(m0.sum())
    check_tokens = not (conserving and total <= max_tokens)
    bound = np.full(P, total if conserving else np.iinfo(np.int64).max // 8)
    keys = PackedKeys(P, max_states, implied=P - 1 if conserving and P > 1 else None)
    chunk = max(256, CHUNK_CELLS // ((P + 4) * max(1, T)))
    rows = np.empty((1024, P), dtype=np.int64)
    src_l, dst_l, t_l = [], [], []
    try:
        keys.fit(bound if conserving else np.minimum(m0 + gain, bound), rows[:0])
        keys.add_keys(keys.pack(m0[None, :]))
        rows[0] = m0
        frontier = np.zeros(1, dtype=np.int64)
        while frontier.size:
            next_frontier = []
            for lo in range(0, frontier.size, chunk):
                g = frontier[lo : lo + chunk] if frontier.size > chunk else frontier
                F = rows[g]
                if check_tokens:
                    top = F.max(axis=0)
                    if top.max() > max_tokens:
                        raise _Fallback
                    keys.fit(np.minimum(top + gain, bound), rows)
                Fx = arcs.extend(F)
                t_e, loc = np.nonzero(arcs.enabled(Fx).T)  # transition-major, as the general path
                if t_e.size == 0:
                    continue
                if any_growing and growing[t_e].any():
                    raise _Fallback
                src = g[loc]
                k_succ = keys.keys_of[src]
                k_succ += keys.delta(C)[t_e]
                dst, new, first = keys.add_keys(k_succ)
                if new.size:
                    while keys.n > rows.shape[0]:
                        rows = np.concatenate((rows, np.empty_like(rows)))
                    rows[new] = F[loc[first]] + C[t_e[first]]
                src_l.append(src)
                dst_l.append(dst)
                t_l.append(t_e)
                next_frontier.append(new)
            if len(next_frontier) == 1:
                frontier = next_frontier[0]
            else:
                frontier = np.concatenate(next_frontier) if next_frontier else np.empty(0, np.int64)
    except (_Fallback, KeyOverflow, TooManyMarkings):
        return None
    S = keys.n
    src = np.concatenate(src_l) if src_l else np.empty(0, np.int64)
    transition = np.concatenate(t_l) if t_l else np.empty(0, np.int64)
    # degrees once for all edges, from the source rows (not per frontier: fewer calls per level)
    degree = arcs.degree(arcs.extend(rows[:S]), src, transition)
    initial = np.zeros(S)
    initial[0] = 1.0
    return StateSpace(
        markings=rows[:S].copy(),
        initial=initial,
        src=src,
        dst=np.concatenate(dst_l) if dst_l else np.empty(0, np.int64),
        transition=transition,
        degree=degree,
        prob=np.ones(src.size),
        immediate_firings=sp.csr_matrix((src.size, T)),
        place_names=net.place_names,
        transition_names=net.transition_names,
        net_name=net.name,
        rates=net.rates,
    )


class _ArcTables:
    """Input and inhibitor arcs of a timed-only net as index tables, for a whole frontier at once.

    Frontier rows are extended with two columns when some transition needs
    them: column P holds 1 (a transition without inputs reads it: enabled,
    degree 1) and column P + 1 a huge number (the padding of transitions with
    fewer inputs than others). With one input per transition and no
    inhibitors (a ring, a pipeline of queues) the tests are single gathers.
    """

    def __init__(self, pre: np.ndarray, inh: np.ndarray, servers: np.ndarray) -> None:
        T, P = pre.shape
        big = np.int64(1) << 62
        n_in = (pre > 0).sum(axis=1)
        n_inh = (inh > 0).sum(axis=1)
        self.width = max(1, int(n_in.max(initial=0)))
        self.in_idx = np.full((T, self.width), P + 1, dtype=np.int64)
        self.in_w = np.ones((T, self.width), dtype=np.int64)
        self.inh_idx = np.full((T, max(1, int(n_inh.max(initial=0)))), P, dtype=np.int64)
        self.inh_w = np.full(self.inh_idx.shape, big, dtype=np.int64)
        for t in range(T):
            cols = np.flatnonzero(pre[t])
            self.in_idx[t, : cols.size], self.in_w[t, : cols.size] = cols, pre[t, cols]
            if cols.size == 0:
                self.in_idx[t, 0] = P
            cols = np.flatnonzero(inh[t])
            self.inh_idx[t, : cols.size], self.inh_w[t, : cols.size] = cols, inh[t, cols]
        self.any_inh = bool(n_inh.any())
        self.padded = bool((n_in != self.width).any() or self.any_inh)
        self.single = self.width == 1
        if self.single:  # 1-D tables: (k, T) gathers, no reduction over arcs
            self.in_idx, self.in_w = self.in_idx[:, 0], self.in_w[:, 0]
        self.servers = servers
        self.unit = bool((servers == 1).all())
        self.pad_row = np.array([1, big], dtype=np.int64)

    def extend(self, F: np.ndarray) -> np.ndarray:
        if not self.padded:
            return F
        Fx = np.empty((F.shape[0], F.shape[1] + 2), dtype=np.int64)
        Fx[:, :-2] = F
        Fx[:, -2:] = self.pad_row
        return Fx

    def enabled(self, Fx: np.ndarray) -> np.ndarray:
        """(k, T) enabling of every transition in every row."""
        if self.single:
            E = Fx[:, self.in_idx] >= self.in_w
        else:
            E = (Fx[:, self.in_idx] >= self.in_w).all(axis=2)
        if self.any_inh:
            E &= (Fx[:, self.inh_idx] < self.inh_w).all(axis=2)
        return E

    def degree(self, Fx: np.ndarray, loc: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``min(enabling degree, servers)`` of transition ``t[i]`` in row ``loc[i]``."""
        if self.unit:
            return np.ones(t.size)
        if self.single:
            e = Fx[loc, self.in_idx[t]] // self.in_w[t]
        else:
            e = (Fx[loc[:, None], self.in_idx[t]] // self.in_w[t]).min(axis=1)
        return np.minimum(e, self.servers[t])
