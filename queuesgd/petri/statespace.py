"""Tangible reachability graph of a GSPN, generated frontier by frontier.

CONTRACT (shared by the numeric solver, the symbolic solver and the
simulator; keep it stable):

``state_space(net, max_states) -> StateSpace`` with

* ``markings`` (S, P) int64: the tangible markings; row 0 is the first
  tangible marking reached from the initial marking.
* ``initial`` (S,) float (object if weights are symbolic): the probability
  that the net, started in its initial marking (which may be vanishing), is
  first in each tangible marking.
* edges of the graph after exact elimination of vanishing markings, one per
  (source marking, timed transition, destination marking):
  ``src`` (E,) int64, ``dst`` (E,) int64, ``transition`` (E,) int64 index of
  the timed transition that fired, ``degree`` (E,) float: ``min(enabling
  degree, servers)`` of that transition in ``src`` (its rate multiplier), and
  ``prob`` (E,) float/object: probability that firing it in ``src`` leads to
  ``dst`` through the immediate transitions that follow.
* ``immediate_firings``: scipy.sparse (E, T) float: expected number of
  firings of each immediate transition (column = transition index) along
  edge e, so that immediate throughputs are flows times these counts.

The generator is ``Q[src, dst] += rate[transition] * degree * prob`` (then
the diagonal), see :meth:`StateSpace.generator`.

Implementation notes
--------------------
* Markings are rows of an int64 array. A whole BFS frontier is expanded at
  once: one vectorized enabling test per transition over all its rows.
* Deduplication: each row is hashed to a uint64 (multiply-add with fixed odd
  constants, then a 64-bit mixer); membership is a ``searchsorted`` in sorted
  key arrays. Every hash match is checked for true equality of the rows; on a
  collision (about 1e-7 for a million markings) the generation restarts with
  other constants, so a collision can never merge two markings.
* Vanishing markings are eliminated exactly. From the vanishing markings
  reached by one frontier, paths of immediate firings are expanded step by
  step, merging paths that reach the same marking (the future does not depend
  on the past). Loops of immediate transitions make this expansion go on; after
  ``_PATH_STEPS`` steps the remaining vanishing markings are enumerated and
  their absorption probabilities into tangible markings solved as a linear
  system ``(I - A) X = B`` (Ajmone Marsan et al., *Modelling with Generalized
  Stochastic Petri Nets*, 1995, sec. 6.3). A set of vanishing markings with no
  exit is a timeless trap and raises :class:`TimelessTrapError`.
* Unboundedness: an edge ``m -> m'`` between tangible markings with
  ``m' >= m``, ``m' != m`` and no extra token on a place that an immediate
  transition reads or that an inhibitor arc tests can be repeated forever
  (Karp and Miller's argument, valid here because the choices along it stay
  the same), so the places that gain tokens are unbounded. Otherwise, a place
  not covered by a positive P-invariant that exceeds ``max_tokens`` is
  reported as unbounded, and ``max_states`` stops everything else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from queuesgd import _checks
from queuesgd.errors import (
    InvalidParameterError,
    StateSpaceTooLargeError,
    TimelessTrapError,
    UnboundedNetError,
    UnknownNameError,
)

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["StateSpace", "state_space", "TimelessTrapError", "UnboundedNetError"]

#: Steps of path expansion through immediate transitions before falling back to
#: the linear solve (vanishing chains longer than this, or loops).
_PATH_STEPS = 64
#: Frontier rows expanded per chunk are bounded so that the successor arrays stay
#: within a few hundred MB.
_CHUNK_CELLS = 1 << 23
#: Largest dense right-hand side (vanishing markings x tangible exits) of the linear fallback.
_LINEAR_CELLS = 50_000_000


class _HashCollision(Exception):
    """Two different rows had the same 64-bit key (internal: restart with other constants)."""


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True, eq=False)
class StateSpace:
    """Tangible reachability graph of a GSPN (see the module docstring for the contract).

    Attributes
    ----------
    markings : ndarray (S, P) int64
    initial : ndarray (S,)
    src, dst, transition : ndarray (E,) int64
    degree : ndarray (E,) float
    prob : ndarray (E,) float or object
    immediate_firings : scipy.sparse.csr_matrix (E, T) float
        (a dense object ndarray when weights are symbolic)
    place_names, transition_names : tuple of str
    net_name : str
    rates : ndarray (T,)
        The net's rates when the space was generated (NaN for immediate
        transitions; object dtype if symbolic); the default of :meth:`generator`.

    Examples
    --------
    An M/M/1/2 queue: arrivals blocked by an inhibitor arc at 2 customers.

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("mm12")
    >>> _ = net.place("q")
    >>> _ = net.timed("arrive", rate=1.0, outputs={"q": 1}, inhibitors={"q": 2})
    >>> _ = net.timed("serve", rate=2.0, inputs={"q": 1})
    >>> ss = net.state_space()
    >>> len(ss), ss.markings.ravel().tolist()
    (3, [0, 1, 2])
    >>> ss.generator().toarray().tolist()
    [[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 2.0, -2.0]]
    >>> ss.marking(2), ss.index({"q": 1})
    ({'q': 2}, 1)
    """

    markings: np.ndarray
    initial: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    transition: np.ndarray
    degree: np.ndarray
    prob: np.ndarray
    immediate_firings: Any
    place_names: tuple[str, ...]
    transition_names: tuple[str, ...]
    net_name: str
    rates: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return int(self.markings.shape[0])

    def __repr__(self) -> str:
        return (
            f"StateSpace({self.net_name!r}, markings={len(self)}, edges={self.src.size}, "
            f"places={len(self.place_names)})"
        )

    @property
    def n_edges(self) -> int:
        """Number of edges E."""
        return int(self.src.size)

    def marking(self, i: int) -> dict[str, int]:
        """Tangible marking ``i`` as ``{place: tokens}``."""
        i = _checks.integer("marking index", i, minimum=0)
        if i >= len(self):
            raise InvalidParameterError("marking index", i, f"an integer in [0, {len(self) - 1}]")
        return {p: int(k) for p, k in zip(self.place_names, self.markings[i])}

    def index(self, marking: Mapping[str, int]) -> int:
        """Row of a tangible marking given as ``{place: tokens}`` (every place named)."""
        if not isinstance(marking, Mapping):
            raise InvalidParameterError("marking", marking, "a {place: tokens} mapping")
        for p in marking:
            if p not in self.place_names:
                raise UnknownNameError("marking place", p, self.place_names)
        missing = [p for p in self.place_names if p not in marking]
        if missing:
            raise InvalidParameterError(
                "marking", dict(marking), f"a mapping that gives every place (missing: {missing})"
            )
        row = np.array([marking[p] for p in self.place_names], dtype=np.int64)
        hit = np.flatnonzero((self.markings == row).all(axis=1))
        if hit.size == 0:
            raise InvalidParameterError("marking", dict(marking), "a reachable tangible marking")
        return int(hit[0])

    def _rate_vector(self, rates: Any) -> np.ndarray:
        T = len(self.transition_names)
        if rates is None:
            rates = self.rates
        elif isinstance(rates, Mapping):
            base = np.array(self.rates, dtype=object)
            for name, r in rates.items():
                if name not in self.transition_names:
                    raise UnknownNameError("rates transition", name, self.transition_names)
                base[self.transition_names.index(name)] = r
            rates = base
        rates = np.asarray(rates, dtype=object if np.asarray(rates).dtype == object else float)
        if rates.shape != (T,):
            raise InvalidParameterError("rates", f"an array of shape {rates.shape}", f"shape ({T},)")
        used = np.unique(self.transition)
        try:
            vals = np.array([float(rates[t]) for t in used], dtype=float)
        except TypeError:
            sym = [self.transition_names[t] for t in used if _checks.is_symbolic(rates[t])]
            raise InvalidParameterError(
                "rates",
                f"symbolic rates of {sym}",
                "numbers: pass rates={name: value} to generator(), or solve with symbolic=True",
            ) from None
        if vals.size and not (np.all(np.isfinite(vals)) and np.all(vals > 0)):
            bad = [self.transition_names[t] for t, v in zip(used, vals) if not (math.isfinite(v) and v > 0)]
            raise InvalidParameterError("rates", f"non-positive or missing rates of {bad}", "rates > 0")
        out = np.full(T, np.nan)
        out[used] = vals
        return out

    def generator(self, rates: Any = None) -> sp.csr_matrix:
        """Numeric CTMC generator, shape (S, S), rows summing to 0.

        Parameters
        ----------
        rates : array (T,) or mapping, optional
            Rates per transition (the net's rates by default); a mapping
            ``{transition: rate}`` overrides some of them. Needed when the
            net's rates are symbolic.
        """
        r = self._rate_vector(rates)
        try:
            prob = np.asarray(self.prob, dtype=float)
        except TypeError:
            raise InvalidParameterError(
                "weights",
                "symbolic weights of immediate transitions",
                "numbers for a numeric generator; solve with symbolic=True",
            ) from None
        S = len(self)
        vals = r[self.transition] * self.degree * prob
        off = self.src != self.dst
        Q = sp.csr_matrix((vals[off], (self.src[off], self.dst[off])), shape=(S, S))
        Q.sum_duplicates()
        out = np.asarray(Q.sum(axis=1)).ravel()
        return (Q - sp.diags(out, format="csr")).tocsr()


# ---------------------------------------------------------------------------- hashing
def _constants(P: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 2**63, size=P, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _hash(rows: np.ndarray, mult: np.ndarray) -> np.ndarray:
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


def _unique_rows(rows: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """First index of each distinct row (in order of first appearance), the inverse map, and their keys."""
    keys = _hash(rows, mult)
    ukeys, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not np.array_equal(rows, rows[first[inv]]):
        raise _HashCollision
    order = np.argsort(first, kind="stable")  # first-appearance order, deterministic
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inv], ukeys[order]


class _Store:
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
        first, inv, k = _unique_rows(rows, self.mult)
        reps = rows[first]
        ids = self._find(k)
        found = ids >= 0
        if found.any() and not np.array_equal(self.rows[ids[found]], reps[found]):
            raise _HashCollision
        new = np.flatnonzero(~found)
        if new.size:
            if self.n + new.size > self.limit:
                raise _TooMany(self.n + new.size)
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


class _TooMany(Exception):
    def __init__(self, count: int) -> None:
        self.count = count


# ---------------------------------------------------------------------------- the compiled net
def _is_missing(w: Any) -> bool:
    return isinstance(w, float) and math.isnan(w)


def _group_sum(values: np.ndarray, inv: np.ndarray, k: int) -> np.ndarray:
    """Sum rows of ``values`` (1-D or 2-D) that share a group label ``inv`` in [0, k)."""
    if values.dtype != object:
        if values.ndim == 1:
            return np.bincount(inv, weights=values, minlength=k)
        M = sp.csr_matrix((np.ones(inv.size), (inv, np.arange(inv.size))), shape=(k, inv.size))
        return np.asarray(M @ values)
    out = np.zeros((k,) + values.shape[1:], dtype=object)
    np.add.at(out, inv, values)
    return out


class _Compiled:
    """Arrays of a net, prepared once for vectorized enabling tests."""

    def __init__(self, net: PetriNet, max_states: int, max_tokens: int, seed: int) -> None:
        self.net = net
        self.places = net.place_names
        self.tnames = net.transition_names
        self.pre, self.post, self.inh = net.pre, net.post, net.inhibit
        self.C = self.post - self.pre
        self.P = len(self.places)
        timed = net.is_timed
        self.timed = np.flatnonzero(timed)
        self.imm = np.flatnonzero(~timed)
        self.servers = net.servers
        self.prio = net.priorities
        w = net.weights
        self.symbolic = w.dtype == object
        if self.symbolic:
            import sympy

            self.missing = np.array([_is_missing(x) for x in w[self.imm]], dtype=bool)
            self.w_imm = np.array(
                [sympy.Integer(1) if m else sympy.sympify(x) for x, m in zip(w[self.imm], self.missing)],
                dtype=object,
            )
        else:
            self.missing = np.isnan(w[self.imm])
            self.w_imm = np.where(self.missing, 1.0, w[self.imm])
        self.prio_imm = self.prio[self.imm]
        self.C_imm = self.C[self.imm]
        self.inputs = [np.flatnonzero(self.pre[t]) for t in range(len(self.tnames))]
        self.inhibs = [np.flatnonzero(self.inh[t]) for t in range(len(self.tnames))]
        # places whose extra tokens could change a choice (see the unboundedness note)
        self.watched = np.zeros(self.P, dtype=bool)
        if self.imm.size:
            self.watched |= (self.pre[self.imm] > 0).any(axis=0)
        self.watched |= (self.inh > 0).any(axis=0)
        self.max_states = max_states
        self.max_tokens = max_tokens
        self.mult = _constants(self.P + 1, seed)
        self._covered: np.ndarray | None = None

    # ---- enabling -------------------------------------------------------------------
    def enabled(self, M: np.ndarray, t: int) -> np.ndarray:
        ok = np.ones(M.shape[0], dtype=bool)
        for p in self.inputs[t]:
            ok &= M[:, p] >= self.pre[t, p]
        for p in self.inhibs[t]:
            ok &= M[:, p] < self.inh[t, p]
        return ok

    def degree(self, M: np.ndarray, t: int) -> np.ndarray:
        """``min(enabling degree, servers)`` of timed transition ``t`` in rows ``M`` (where enabled)."""
        cols = self.inputs[t]
        if cols.size == 0:
            e = np.ones(M.shape[0])
        else:
            e = (M[:, cols] // self.pre[t, cols]).min(axis=1).astype(float)
        return np.minimum(e, self.servers[t])

    def imm_enabled(self, M: np.ndarray) -> np.ndarray:
        E = np.zeros((M.shape[0], self.imm.size), dtype=bool)
        for j, t in enumerate(self.imm):
            E[:, j] = self.enabled(M, t)
        return E

    def vanishing(self, M: np.ndarray) -> np.ndarray:
        if self.imm.size == 0:
            return np.zeros(M.shape[0], dtype=bool)
        return self.imm_enabled(M).any(axis=1)

    def choices(self, M: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Vanishing mask, and per firing choice: row, immediate index j (into ``imm``), probability."""
        E = self.imm_enabled(M)
        level = np.where(E, self.prio_imm, 0).max(axis=1, initial=0)
        van = level > 0
        sel = E & (self.prio_imm == level[:, None])
        rows, j = np.nonzero(sel)
        cnt = sel.sum(axis=1)
        bad = sel & self.missing & (cnt >= 2)[:, None]
        if bad.any():
            r = int(np.flatnonzero(bad.any(axis=1))[0])
            names = [self.tnames[self.imm[k]] for k in np.flatnonzero(sel[r])]
            unweighted = [self.tnames[self.imm[k]] for k in np.flatnonzero(bad[r])]
            raise InvalidParameterError(
                f"weight of immediate transition(s) {', '.join(map(repr, unweighted))}",
                None,
                f"weight= on each of {', '.join(map(repr, names))}: they are enabled together at "
                f"priority {int(level[r])} in marking {self.as_dict(M[r])}, and their branching "
                "probabilities are weight / sum of weights",
            )
        w = self.w_imm[j]
        if self.symbolic:
            tot = np.zeros(M.shape[0], dtype=object)
            np.add.at(tot, rows, w)
            p = np.array([a / b for a, b in zip(w, tot[rows])], dtype=object)
        else:
            tot = np.bincount(rows, weights=w, minlength=M.shape[0])
            p = w / tot[rows]
        return van, rows, j, p

    def as_dict(self, row: np.ndarray) -> dict[str, int]:
        return {p: int(k) for p, k in zip(self.places, row)}

    def fmt(self, row: np.ndarray) -> str:
        nz = {p: int(k) for p, k in zip(self.places, row) if k}
        return str(nz) + (" (other places empty)" if len(nz) < self.P else "")

    # ---- unboundedness ----------------------------------------------------------------
    def covered(self) -> np.ndarray:
        """Places covered by a positive P-invariant (hence bounded), by one LP.

        Maximize ``sum z`` subject to ``C y = 0``, ``y >= 0``, ``0 <= z <= 1``,
        ``z <= y``: invariants form a cone, so the optimum has ``z_p = 1``
        exactly on the places that some positive invariant covers.
        """
        if self._covered is None:
            from scipy.optimize import linprog

            T, P = self.C.shape
            if T == 0:
                self._covered = np.ones(P, dtype=bool)
                return self._covered
            c = np.concatenate((np.zeros(P), -np.ones(P)))
            A_eq = np.hstack((self.C.astype(float), np.zeros((T, P))))
            A_ub = np.hstack((-np.eye(P), np.eye(P)))
            res = linprog(
                c,
                A_ub=A_ub,
                b_ub=np.zeros(P),
                A_eq=A_eq,
                b_eq=np.zeros(T),
                bounds=[(0, None)] * P + [(0, 1)] * P,
                method="highs",
            )
            self._covered = (res.x[P:] > 0.5) if res.success else np.zeros(P, dtype=bool)
        return self._covered

    def check_dominance(self, src_rows: np.ndarray, dst_rows: np.ndarray) -> None:
        """Raise UnboundedNetError if some edge ``m -> m'`` is repeatable forever (see module notes)."""
        d = dst_rows - src_rows
        rep = (d >= 0).all(axis=1) & (d > 0).any(axis=1) & (d[:, self.watched] == 0).all(axis=1)
        if rep.any():
            i = int(np.flatnonzero(rep)[0])
            grow = [self.places[p] for p in np.flatnonzero(d[i] > 0)]
            raise UnboundedNetError(
                f"net {self.net.name!r} is unbounded: place(s) {', '.join(map(repr, grow))} grow without "
                f"bound (from marking {self.fmt(src_rows[i])} the net reaches {self.fmt(dst_rows[i])}, "
                "and can repeat that forever). Add a capacity (an inhibitor arc or a complementary "
                "place), or estimate by simulation (net.simulate)"
            )

    def check_tokens(self, rows: np.ndarray, what: str = "tangible") -> None:
        if rows.size == 0:
            return
        big = rows.max(axis=0) > self.max_tokens
        if not big.any():
            return
        bad = big & ~self.covered()
        if bad.any():
            names = [self.places[p] for p in np.flatnonzero(bad)]
            raise UnboundedNetError(
                f"net {self.net.name!r} looks unbounded: place(s) {', '.join(map(repr, names))} exceeded "
                f"max_tokens={self.max_tokens} tokens in {what} markings and no positive P-invariant "
                "bounds them. Add a capacity, estimate by simulation (net.simulate), or pass a larger "
                "max_tokens= if the place is bounded but large"
            )

    def too_many(self, count: int, what: str = "tangible markings") -> StateSpaceTooLargeError:
        uncovered = [self.places[p] for p in np.flatnonzero(~self.covered())]
        msg = (
            f"net {self.net.name!r} has more than max_states={self.max_states:,} {what} "
            f"(reached {count:,}); pass a larger max_states= or estimate by simulation (net.simulate)"
        )
        if uncovered:
            return UnboundedNetError(
                msg + f". Place(s) {', '.join(map(repr, uncovered))} are not covered by a positive "
                "P-invariant: the net is unbounded or larger than max_states"
            )
        return StateSpaceTooLargeError(msg)

    # ---- elimination of vanishing markings -----------------------------------------------
    def resolve(self, M0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Absorption of distinct vanishing markings ``M0`` into tangible ones.

        Returns ``ent`` (index into M0), tangible rows, probability ``q`` and the
        expected immediate firings ``f`` (k, n_imm) given that destination,
        one row per distinct (entry, destination), grouped by entry.
        """
        n = M0.shape[0]
        dt = object if self.symbolic else float
        ent = np.arange(n)
        mk = M0
        q = np.ones(n, dtype=dt) if not self.symbolic else np.array([_one()] * n, dtype=object)
        z = np.zeros((n, self.imm.size), dtype=dt)
        out: list[tuple[np.ndarray, ...]] = []
        seen = np.empty(0, dtype=np.uint64)  # keys of (entry, marking) pairs already expanded
        for _ in range(_PATH_STEPS):
            van, rows, j, p = self.choices(mk)
            fin = ~van
            if fin.any():
                out.append((ent[fin], mk[fin], q[fin], z[fin]))
            if not van.any():
                break
            keys = _hash(np.column_stack((ent[van], mk[van])), self.mult)
            if np.isin(keys, seen).any():  # a loop of immediate firings: solve it instead
                out.append(self.resolve_linear(ent[van], mk[van], q[van], z[van]))
                break
            seen = np.union1d(seen, keys)
            qc = q[rows] * p
            zc = z[rows] * p[:, None]
            zc[np.arange(rows.size), j] += qc
            mc = mk[rows] + self.C_imm[j]
            ec = ent[rows]
            self.check_tokens(mc, "vanishing")
            first, inv, _ = _unique_rows(np.column_stack((ec, mc)), self.mult)
            k = first.size
            ent, mk = ec[first], mc[first]
            q = _group_sum(qc, inv, k)
            z = _group_sum(zc, inv, k)
        else:  # a vanishing chain longer than _PATH_STEPS
            van = self.vanishing(mk)
            out.append((ent[~van], mk[~van], q[~van], z[~van]))
            if van.any():
                out.append(self.resolve_linear(ent[van], mk[van], q[van], z[van]))
        e = np.concatenate([o[0] for o in out])
        d = np.concatenate([o[1] for o in out])
        qq = np.concatenate([o[2] for o in out])
        zz = np.concatenate([o[3] for o in out])
        first, inv, _ = _unique_rows(np.column_stack((e, d)), self.mult)
        k = first.size
        q = _group_sum(qq, inv, k)
        z = _group_sum(zz, inv, k)
        e, d = e[first], d[first]
        if self.symbolic:
            import sympy

            q = np.array([sympy.cancel(x) for x in q], dtype=object)
            f = np.array([[sympy.cancel(a / b) for a in r] for r, b in zip(z, q)], dtype=object)
            f = f.reshape(k, self.imm.size)
        else:
            f = z / q[:, None]
        o = np.argsort(e, kind="stable")
        return e[o], d[o], q[o], f[o]

    def check_endless(self, parents: np.ndarray, j: np.ndarray) -> None:
        """An immediate transition that only adds tokens to places no choice depends on fires forever."""
        C = self.C_imm[j]
        bad = (C >= 0).all(axis=1) & (C > 0).any(axis=1) & (C[:, self.watched] == 0).all(axis=1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            grow = [self.places[p] for p in np.flatnonzero(C[i] > 0)]
            raise UnboundedNetError(
                f"net {self.net.name!r} is unbounded: immediate transition {self.tnames[self.imm[j[i]]]!r} "
                f"fires in marking {self.fmt(parents[i])} and stays enabled while it adds tokens to "
                f"{', '.join(map(repr, grow))}, so it can fire forever in zero time (a timeless trap "
                "with unbounded places). Give it an input place that it empties, or make it timed"
            )

    def resolve_linear(
        self, ent: np.ndarray, mk: np.ndarray, q: np.ndarray, z: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Finish rows ``(ent, mk, q, z)`` standing in vanishing markings by solving ``(I - A) X = B``.

        ``A`` (vanishing -> vanishing) and ``B`` (vanishing -> tangible) hold the
        branching probabilities of the vanishing markings reachable from ``mk``;
        ``X`` are absorption probabilities and ``Y_u = (I - A)^-1 (A_u X + B_u)``
        the expected firings of immediate transition ``u`` jointly with the
        destination (``A_u``, ``B_u``: the part of ``A``, ``B`` due to ``u``).
        """
        V = _Store(self.P, self.mult[: self.P], self.max_states)
        Tg = _Store(self.P, self.mult[: self.P], self.max_states)
        src_l, j_l, p_l, dst_l, tan_l = [], [], [], [], []
        try:
            vid, frontier = V.add(mk)
            while frontier.size:
                rows_v = V.rows[frontier]
                _, r, j, p = self.choices(rows_v)
                self.check_endless(rows_v[r], j)
                child = rows_v[r] + self.C_imm[j]
                self.check_tokens(child, "vanishing")
                van = self.vanishing(child)
                dst = np.empty(r.size, dtype=np.int64)
                new = np.empty(0, dtype=np.int64)
                if van.any():
                    dst[van], new = V.add(child[van])
                if (~van).any():
                    dst[~van], _ = Tg.add(child[~van])
                src_l.append(frontier[r])
                j_l.append(j)
                p_l.append(p)
                dst_l.append(dst)
                tan_l.append(~van)
                frontier = new
        except _TooMany as exc:
            raise self.too_many(exc.count, "vanishing markings") from None
        src, j, p = np.concatenate(src_l), np.concatenate(j_l), np.concatenate(p_l)
        dst, tan = np.concatenate(dst_l), np.concatenate(tan_l)
        nv, nt = V.n, Tg.n
        self._check_traps(V, src, j, dst, tan)
        if nv * max(nt, 1) > _LINEAR_CELLS:
            raise StateSpaceTooLargeError(
                f"net {self.net.name!r}: a loop of immediate transitions spans {nv:,} vanishing markings "
                f"with {nt:,} exits; exact elimination would need {nv * nt:,} cells (limit "
                f"{_LINEAR_CELLS:,}). Break the loop with a timed transition or estimate by simulation"
            )
        used = np.unique(j)
        if self.symbolic:
            X, Y = _absorb_symbolic(nv, nt, src, j, p, dst, tan, used)
        else:
            X, Y = _absorb_numeric(nv, nt, src, j, p, dst, tan, used)
        Xr = X[vid]
        a, k = np.nonzero(Xr != 0)
        xa = Xr[a, k]
        q_out = q[a] * xa
        z_out = z[a] * xa[:, None]
        for col, u in enumerate(used):
            z_out[:, u] = z_out[:, u] + q[a] * Y[col][vid[a], k]
        return ent[a], Tg.rows[k], q_out, z_out

    def _check_traps(
        self, V: _Store, src: np.ndarray, j: np.ndarray, dst: np.ndarray, tan: np.ndarray
    ) -> None:
        from scipy.sparse.csgraph import connected_components

        nv = V.n
        vv = ~tan
        G = sp.csr_matrix((np.ones(int(vv.sum())), (src[vv], dst[vv])), shape=(nv, nv))
        ncomp, lab = connected_components(G, directed=True, connection="strong")
        exits = np.zeros(ncomp, dtype=bool)
        exits[lab[src[tan]]] = True
        leave = vv.copy()
        leave[vv] = lab[src[vv]] != lab[dst[vv]]
        exits[lab[src[leave]]] = True
        closed = np.flatnonzero(~exits)
        if closed.size:
            members = np.flatnonzero(lab == closed[0])
            inside = np.isin(src, members)
            names = [self.tnames[self.imm[u]] for u in np.unique(j[inside])]
            raise TimelessTrapError(
                f"net {self.net.name!r} has a timeless trap: immediate transition(s) "
                f"{', '.join(map(repr, names))} fire forever in zero time among {members.size} vanishing "
                f"marking(s), e.g. {self.fmt(V.rows[members[0]])}, and no tangible marking can be "
                "reached. Give the loop an exit or make one of its transitions timed"
            )


def _absorb_numeric(nv, nt, src, j, p, dst, tan, used):
    """Absorption probabilities X (nv, nt) and joint firing counts Y[u] (nv, nt) by sparse LU."""
    from scipy.sparse.linalg import splu

    vv = ~tan
    A = sp.csr_matrix((p[vv], (src[vv], dst[vv])), shape=(nv, nv))
    B = sp.csr_matrix((p[tan], (src[tan], dst[tan])), shape=(nv, nt))
    lu = splu((sp.identity(nv, format="csc") - A).tocsc())
    X = lu.solve(B.toarray())
    X[np.abs(X) < 1e-13] = 0.0  # round-off where no path exists
    X /= X.sum(axis=1, keepdims=True)
    Y = []
    for u in used:
        mu = vv & (j == u)
        tu = tan & (j == u)
        Au = sp.csr_matrix((p[mu], (src[mu], dst[mu])), shape=(nv, nv))
        Bu = sp.csr_matrix((p[tu], (src[tu], dst[tu])), shape=(nv, nt))
        Yu = lu.solve(np.asarray(Au @ X) + Bu.toarray())
        Yu[X == 0] = 0.0
        Y.append(Yu)
    return X, Y


def _absorb_symbolic(nv, nt, src, j, p, dst, tan, used):
    """As :func:`_absorb_numeric`, exactly in SymPy (small loops only)."""
    import sympy

    def dense(mask, ncols):
        M = sympy.zeros(nv, ncols)
        for s, d, v in zip(src[mask], dst[mask], p[mask]):
            M[int(s), int(d)] += v
        return M

    vv = ~tan
    A, B = dense(vv, nv), dense(tan, nt)
    IA = sympy.eye(nv) - A
    Xs = IA.LUsolve(B).applyfunc(sympy.cancel)
    X = np.array(Xs.tolist(), dtype=object).reshape(nv, nt)
    Y = []
    for u in used:
        Au = dense(vv & (j == u), nv)
        Bu = dense(tan & (j == u), nt)
        Yu = IA.LUsolve(Au * Xs + Bu).applyfunc(sympy.cancel)
        Y.append(np.array(Yu.tolist(), dtype=object).reshape(nv, nt))
    return X, Y


def _one() -> Any:
    import sympy

    return sympy.Integer(1)


# ---------------------------------------------------------------------------- generation
def state_space(net: PetriNet, max_states: int = 2_000_000, *, max_tokens: int = 100_000) -> StateSpace:
    """Tangible reachability graph of ``net``, vanishing markings eliminated exactly.

    Parameters
    ----------
    net : PetriNet
    max_states : int
        Largest number of tangible (and, separately, vanishing) markings to
        generate; more raises :class:`~queuesgd.errors.StateSpaceTooLargeError`.
    max_tokens : int
        A place that no positive P-invariant bounds and that exceeds this many
        tokens is reported as unbounded (:class:`UnboundedNetError`).

    Returns
    -------
    StateSpace

    Raises
    ------
    UnboundedNetError
        Some places grow without bound (named in the message).
    StateSpaceTooLargeError
        More than ``max_states`` markings.
    TimelessTrapError
        Immediate transitions loop forever without reaching a tangible marking.
    InvalidParameterError
        Immediate transitions without weights are enabled together.

    Examples
    --------
    Three tokens circulating among three places: C(3+2, 2) = 10 markings.

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("ring")
    >>> for p in ("a", "b", "c"):
    ...     _ = net.place(p, tokens=3 if p == "a" else 0)
    >>> _ = net.timed("ab", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("bc", rate=1.0, inputs={"b": 1}, outputs={"c": 1})
    >>> _ = net.timed("ca", rate=1.0, inputs={"c": 1}, outputs={"a": 1})
    >>> len(state_space(net))
    10
    """
    from queuesgd.petri.net import PetriNet

    if not isinstance(net, PetriNet):
        raise InvalidParameterError("net", type(net).__name__, "a queuesgd.PetriNet")
    max_states = _checks.integer("max_states", max_states, minimum=1)
    max_tokens = _checks.integer("max_tokens", max_tokens, minimum=1)
    for seed in range(4):
        try:
            return _generate(net, max_states, max_tokens, seed)
        except _HashCollision:  # ~1e-7 per million markings: try other constants
            continue
    raise RuntimeError(
        "state_space: repeated 64-bit hash collisions; please report this net"
    )  # pragma: no cover


def _generate(net: PetriNet, max_states: int, max_tokens: int, seed: int) -> StateSpace:
    cn = _Compiled(net, max_states, max_tokens, seed)
    P, T, ni = cn.P, len(cn.tnames), cn.imm.size
    mult = cn.mult[:P]
    store = _Store(P, mult, max_states)
    dt = object if cn.symbolic else float
    one = _one() if cn.symbolic else 1.0
    m0 = net.initial_marking[None, :]
    chunk = max(256, _CHUNK_CELLS // ((P + ni + 4) * max(1, cn.timed.size)))
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("src", "dst", "t", "deg", "prob")}
    fire_edges: list[np.ndarray] = []
    fire_vals: list[np.ndarray] = []
    n_edges = 0
    try:
        if cn.vanishing(m0)[0]:
            _, d, init_q, _ = cn.resolve(m0)
            init_ids, frontier = store.add(d)
        else:
            init_ids, frontier = store.add(m0)
            init_q = np.array([one], dtype=dt)
        while frontier.size:
            next_frontier = []
            for lo in range(0, frontier.size, chunk):
                g = frontier[lo : lo + chunk]
                F = store.rows[g]
                src_l, loc_l, t_l, deg_l, succ_l = [], [], [], [], []
                for t in cn.timed:
                    idx = np.flatnonzero(cn.enabled(F, t))
                    if idx.size == 0:
                        continue
                    Fi = F[idx]
                    src_l.append(g[idx])
                    loc_l.append(idx)
                    t_l.append(np.full(idx.size, t, dtype=np.int64))
                    deg_l.append(cn.degree(Fi, t))
                    succ_l.append(Fi + cn.C[t])
                if not src_l:
                    continue
                src, loc, tr = np.concatenate(src_l), np.concatenate(loc_l), np.concatenate(t_l)
                deg, succ = np.concatenate(deg_l), np.concatenate(succ_l)
                van = cn.vanishing(succ)
                tg = ~van
                e_src, e_loc, e_t, e_deg = [src[tg]], [loc[tg]], [tr[tg]], [deg[tg]]
                e_rows = [succ[tg]]
                e_prob = [np.full(int(tg.sum()), one, dtype=dt)]
                fires = None
                if van.any():
                    vs = succ[van]
                    first, inv, _ = _unique_rows(vs, mult)
                    ent, drows, q, f = cn.resolve(vs[first])
                    counts = np.bincount(ent, minlength=first.size)
                    starts = np.cumsum(counts) - counts
                    rep = counts[inv]
                    ei = np.repeat(np.arange(inv.size), rep)
                    offs = np.arange(ei.size) - np.repeat(np.cumsum(rep) - rep, rep)
                    rr = starts[inv][ei] + offs
                    vi = np.flatnonzero(van)[ei]
                    e_src.append(src[vi])
                    e_loc.append(loc[vi])
                    e_t.append(tr[vi])
                    e_deg.append(deg[vi])
                    e_rows.append(drows[rr])
                    e_prob.append(q[rr])
                    fires = f[rr]
                rows = np.concatenate(e_rows)
                cn.check_dominance(F[np.concatenate(e_loc)], rows)
                cn.check_tokens(rows)
                dst, new = store.add(rows)
                next_frontier.append(new)
                parts["src"].append(np.concatenate(e_src))
                parts["dst"].append(dst)
                parts["t"].append(np.concatenate(e_t))
                parts["deg"].append(np.concatenate(e_deg))
                parts["prob"].append(np.concatenate(e_prob))
                if fires is not None:
                    base = n_edges + int(tg.sum())
                    fire_edges.append(np.arange(base, base + fires.shape[0]))
                    fire_vals.append(fires)
                n_edges += dst.size
            frontier = np.concatenate(next_frontier) if next_frontier else np.empty(0, np.int64)
    except _TooMany as exc:
        raise cn.too_many(exc.count) from None

    S = store.n
    initial = np.zeros(S, dtype=dt)
    initial[init_ids] = init_q

    def cat(k: str, dtype: Any) -> np.ndarray:
        return np.concatenate(parts[k]).astype(dtype) if parts[k] else np.empty(0, dtype=dtype)

    prob = cat("prob", dt)
    if cn.symbolic:
        firings: Any = np.zeros((n_edges, T), dtype=object)
        for e, v in zip(fire_edges, fire_vals):
            firings[np.ix_(e, cn.imm)] = v
    else:
        if fire_edges:
            e = np.concatenate(fire_edges)
            v = np.concatenate(fire_vals)
            r, c = np.nonzero(v)
            firings = sp.csr_matrix((v[r, c], (e[r], cn.imm[c])), shape=(n_edges, T))
        else:
            firings = sp.csr_matrix((n_edges, T))
    return StateSpace(
        markings=store.rows[:S].copy(),
        initial=initial,
        src=cat("src", np.int64),
        dst=cat("dst", np.int64),
        transition=cat("t", np.int64),
        degree=cat("deg", float),
        prob=prob,
        immediate_firings=firings,
        place_names=cn.places,
        transition_names=cn.tnames,
        net_name=net.name,
        rates=net.rates,
    )
