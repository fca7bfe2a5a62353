"""A GSPN compiled to arrays: vectorized enabling, firing and elimination of vanishing markings.

:class:`CompiledNet` is what :func:`queuesgd.petri.state_space` works on:
the net's matrices, prepared once, with the enabling tests, the choice among
immediate transitions, and the resolution of vanishing markings into the
tangible markings they lead to (path expansion, then an exact linear solve
for long chains and loops). It also owns the checks for unbounded places and
timeless traps (see :mod:`queuesgd.petri.statespace`).

Examples
--------
>>> from queuesgd.petri import PetriNet
>>> net = PetriNet("pair")
>>> _ = net.place("a", tokens=2)
>>> _ = net.timed("t", rate=1.0, inputs={"a": 2})
>>> cn = CompiledNet(net, 10, 10, np.array([3, 5], dtype=np.uint64))
>>> cn.enabled(np.array([[2], [1]]), 0).tolist()
[True, False]
>>> is_net(net), is_net("net")
(True, False)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from queuesgd.errors import (
    InvalidParameterError,
    StateSpaceTooLargeError,
    TimelessTrapError,
    UnboundedNetError,
)
from queuesgd.petri.absorption import absorb_numeric, absorb_symbolic
from queuesgd.petri.markings import MarkingStore, TooManyMarkings, hash_rows, unique_rows

__all__ = ["LINEAR_CELLS", "PATH_STEPS", "CompiledNet", "is_net", "symbolic_one"]

#: Steps of path expansion through immediate transitions before falling back to
#: the linear solve (vanishing chains longer than this, or loops).
PATH_STEPS = 64
#: Largest dense right-hand side (vanishing markings x tangible exits) of the linear fallback.
LINEAR_CELLS = 50_000_000

_NET_ATTRIBUTES = (
    "place_names",
    "transition_names",
    "initial_marking",
    "pre",
    "post",
    "inhibit",
    "is_timed",
    "rates",
    "weights",
    "priorities",
    "servers",
)


def is_net(value: Any) -> bool:
    """True if ``value`` is a :class:`~queuesgd.petri.PetriNet` (has its attributes; duck typing)."""
    return not isinstance(value, type) and all(hasattr(type(value), a) for a in _NET_ATTRIBUTES)


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


class CompiledNet:
    """Arrays of a net, prepared once for vectorized enabling tests.

    ``mult`` holds ``P + 1`` odd hashing constants (:mod:`queuesgd.petri.markings`).
    """

    def __init__(self, net: Any, max_states: int, max_tokens: int, mult: np.ndarray) -> None:
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
        self.mult = mult  # P + 1 odd hashing constants
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
        else:  # by each marking's largest weight first: two weights of 1e308 sum to inf, not 2e308
            top = np.zeros(M.shape[0])
            np.maximum.at(top, rows, w)
            w = w / top[rows]
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

    def _first_growing(self, d: np.ndarray) -> tuple[int, list[str]] | None:
        """The first row of token changes ``d`` that removes none, adds some and leaves every watched place
        as it is (a step that can repeat forever), and the places it adds to; None if no row does."""
        grows = (d >= 0).all(axis=1) & (d > 0).any(axis=1) & (d[:, self.watched] == 0).all(axis=1)
        if not grows.any():
            return None
        i = int(np.flatnonzero(grows)[0])
        return i, [self.places[p] for p in np.flatnonzero(d[i] > 0)]

    def check_dominance(self, src_rows: np.ndarray, dst_rows: np.ndarray) -> None:
        """Raise UnboundedNetError if some edge ``m -> m'`` is repeatable forever (see module notes)."""
        found = self._first_growing(dst_rows - src_rows)
        if found is not None:
            i, grow = found
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

    def too_many(
        self, count: int, what: str = "tangible markings", *, known: str = ""
    ) -> StateSpaceTooLargeError:
        """The error for more than ``max_states`` markings: ``count`` reached, or ``known`` beforehand."""
        uncovered = [self.places[p] for p in np.flatnonzero(~self.covered())]
        how = f"known before generating any: {known}" if known else f"reached {count:,}"
        msg = (
            f"net {self.net.name!r} has more than max_states={self.max_states:,} {what} "
            f"({how}); pass a larger max_states= or estimate by simulation (net.simulate)"
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
        q = np.ones(n, dtype=dt) if not self.symbolic else np.array([symbolic_one()] * n, dtype=object)
        z = np.zeros((n, self.imm.size), dtype=dt)
        out: list[tuple[np.ndarray, ...]] = []
        seen = np.empty(0, dtype=np.uint64)  # keys of (entry, marking) pairs already expanded
        for _ in range(PATH_STEPS):
            van, rows, j, p = self.choices(mk)
            fin = ~van
            if fin.any():
                out.append((ent[fin], mk[fin], q[fin], z[fin]))
            if not van.any():
                break
            keys = hash_rows(np.column_stack((ent[van], mk[van])), self.mult)
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
            first, inv, _ = unique_rows(np.column_stack((ec, mc)), self.mult)
            k = first.size
            ent, mk = ec[first], mc[first]
            q = _group_sum(qc, inv, k)
            z = _group_sum(zc, inv, k)
        else:  # a vanishing chain longer than PATH_STEPS
            van = self.vanishing(mk)
            out.append((ent[~van], mk[~van], q[~van], z[~van]))
            if van.any():
                out.append(self.resolve_linear(ent[van], mk[van], q[van], z[van]))
        e = np.concatenate([o[0] for o in out])
        d = np.concatenate([o[1] for o in out])
        qq = np.concatenate([o[2] for o in out])
        zz = np.concatenate([o[3] for o in out])
        first, inv, _ = unique_rows(np.column_stack((e, d)), self.mult)
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
        found = self._first_growing(self.C_imm[j])
        if found is not None:
            i, grow = found
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
        V = MarkingStore(self.P, self.mult[: self.P], self.max_states)
        Tg = MarkingStore(self.P, self.mult[: self.P], self.max_states)
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
        except TooManyMarkings as exc:
            raise self.too_many(exc.count, "vanishing markings") from None
        src, j, p = np.concatenate(src_l), np.concatenate(j_l), np.concatenate(p_l)
        dst, tan = np.concatenate(dst_l), np.concatenate(tan_l)
        nv, nt = V.n, Tg.n
        self._check_traps(V, src, j, dst, tan)
        if nv * max(nt, 1) > LINEAR_CELLS:
            raise StateSpaceTooLargeError(
                f"net {self.net.name!r}: a loop of immediate transitions spans {nv:,} vanishing markings "
                f"with {nt:,} exits; exact elimination would need {nv * nt:,} cells (limit "
                f"{LINEAR_CELLS:,}). Break the loop with a timed transition or estimate by simulation"
            )
        used = np.unique(j)
        if self.symbolic:
            X, Y = absorb_symbolic(nv, nt, src, j, p, dst, tan, used)
        else:
            X, Y = absorb_numeric(nv, nt, src, j, p, dst, tan, used)
        Xr = X[vid]
        a, k = np.nonzero(Xr != 0)
        xa = Xr[a, k]
        q_out = q[a] * xa
        z_out = z[a] * xa[:, None]
        for col, u in enumerate(used):
            z_out[:, u] = z_out[:, u] + q[a] * Y[col][vid[a], k]
        return ent[a], Tg.rows[k], q_out, z_out

    def _check_traps(
        self, V: MarkingStore, src: np.ndarray, j: np.ndarray, dst: np.ndarray, tan: np.ndarray
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


def symbolic_one() -> Any:
    """SymPy's exact 1 (SymPy imported lazily)."""
    import sympy

    return sympy.Integer(1)
