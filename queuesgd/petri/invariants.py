"""Structural analysis of a Petri net: P-invariants and T-invariants.

With the incidence matrix ``C = post - pre`` of shape (transitions, places)
(:attr:`PetriNet.incidence`):

* a **P-invariant** (place semiflow) is an integer vector ``y`` over places
  with ``C @ y = 0``: the weighted token count ``y . M`` is the same in every
  reachable marking ``M`` (firing ``t`` changes it by ``C[t] @ y = 0``);
* a **T-invariant** (transition semiflow) is an integer vector ``x`` over
  transitions with ``C.T @ x = 0``: firing each ``t`` ``x[t]`` times (in an
  order that is possible) brings the net back to the marking it started from.

Invariants ignore inhibitor arcs and timing: they hold for the untimed P/T
net, so a place that no semi-positive P-invariant covers may still be bounded
by an inhibitor arc.

``method="semipositive"`` (default) returns the *minimal-support semi-positive*
invariants (non-negative, not all zero, no invariant has a strictly smaller
support), computed with the Farkas algorithm with the support test of
Martinez and Silva (1982); every semi-positive invariant is a non-negative
rational combination of them. Their number can grow exponentially with the
net, so the algorithm stops with an error above ``max_rows`` intermediate
rows. ``method="basis"`` returns an integer basis of the null space (SymPy's
exact ``nullspace``, each vector scaled to coprime integers), which may have
negative entries. ``method="auto"`` tries ``"semipositive"`` and, if it
explodes, returns the basis with a ``UserWarning`` that says so.

References: J. Martinez, M. Silva, "A simple and fast algorithm to obtain all
invariants of a generalised Petri net", in *Application and Theory of Petri
Nets*, Springer IFB 52, 1982; T. Murata, "Petri nets: properties, analysis and
applications", *Proc. IEEE* 77(4), 1989, section VII.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, UnknownNameError, warn_user

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = [
    "p_invariants",
    "t_invariants",
    "conserved_quantity",
    "uncovered_places",
    "is_covered_by_p_invariants",
    "INVARIANT_METHODS",
]

#: Accepted values of ``method`` in :func:`p_invariants` and :func:`t_invariants`.
INVARIANT_METHODS = ("semipositive", "basis", "auto")


# ---- Farkas / Martinez-Silva ---------------------------------------------------------
def _normalize_rows(M: np.ndarray) -> np.ndarray:
    """Divide each row of an object (Python int) array by the gcd of its entries."""
    for r in range(M.shape[0]):
        g = math.gcd(*(int(v) for v in M[r]))
        if g > 1:
            M[r] //= g
    return M


def _minimal_support_mask(B: np.ndarray) -> np.ndarray:
    """Rows whose support (nonzero entries) does not strictly contain another row's support."""
    S = (B != 0).astype(np.int64)
    # sub[j, i]: support of row j is a subset of support of row i.
    sub = (S @ (1 - S).T) == 0
    size = S.sum(axis=1)
    strict = sub & (size[:, None] < size[None, :])
    return ~strict.any(axis=0)


def _farkas(D: np.ndarray, max_rows: int) -> list[np.ndarray]:
    """Minimal-support semi-positive integer ``y`` with ``y @ D = 0`` (D: m x k integers).

    Farkas' algorithm on the table ``[D | I]``: for each column of D, every
    pair of rows with opposite signs in it is combined positively into a row
    that is zero there, the rows nonzero there are dropped, and rows whose
    identity-part support strictly contains another's are dropped at once
    (Martinez & Silva 1982), which keeps the table small.
    """
    m, k = D.shape
    T = np.concatenate([D.astype(object), np.eye(m, dtype=np.int64).astype(object)], axis=1)
    for j in range(k):
        col = np.array([int(v) for v in T[:, j]], dtype=np.int64) if T.shape[0] else np.zeros(0, np.int64)
        pos, neg = np.flatnonzero(col > 0), np.flatnonzero(col < 0)
        zero = T[col == 0]
        if pos.size * neg.size + zero.shape[0] > 20 * max_rows:
            raise StateSpaceTooLargeError(
                f"p/t invariants: the Farkas algorithm would need {pos.size * neg.size + zero.shape[0]} "
                f"rows at column {j} (max_rows={max_rows}); use method='basis' for an integer null-space "
                "basis, or raise max_rows"
            )
        parts = [zero]
        if pos.size and neg.size:
            a = T[pos][:, None, :] * (-col[neg]).astype(object)[None, :, None]
            b = T[neg][None, :, :] * col[pos].astype(object)[:, None, None]
            parts.append((a + b).reshape(-1, T.shape[1]))
        T = np.concatenate(parts, axis=0) if parts else T[:0]
        if T.shape[0] == 0:
            return []
        T = _normalize_rows(T)
        first = {tuple(r): i for i, r in reversed(list(enumerate(T.tolist())))}
        T = T[sorted(first.values())]
        T = T[_minimal_support_mask(T[:, k:].astype(np.int64) != 0)]
        if T.shape[0] > max_rows:
            raise StateSpaceTooLargeError(
                f"p/t invariants: the Farkas algorithm has {T.shape[0]} rows after column {j} "
                f"(max_rows={max_rows}); use method='basis' for an integer null-space basis, "
                "or raise max_rows"
            )
    return [np.array([int(v) for v in row], dtype=np.int64) for row in T[:, k:]]


def _nullspace_basis(D: np.ndarray) -> list[np.ndarray]:
    """Integer basis of ``{y : y @ D = 0}``: SymPy's exact nullspace, scaled to coprime integers."""
    import sympy

    m = D.shape[0]
    if D.shape[1] == 0:
        return [np.eye(m, dtype=np.int64)[i] for i in range(m)]
    out = []
    for v in sympy.Matrix(D.T.tolist()).nullspace():
        den = math.lcm(*(int(sympy.fraction(x)[1]) for x in v))
        ints = [int(x * den) for x in v]
        g = math.gcd(*ints)
        ints = [x // g for x in ints]
        first = next(x for x in ints if x)
        if first < 0 or all(x <= 0 for x in ints):
            ints = [-x for x in ints]
        out.append(np.array(ints, dtype=np.int64))
    return out


def _sort_key(v: np.ndarray) -> tuple:
    nz = np.flatnonzero(v)
    return (len(nz), tuple(nz.tolist()), tuple(v[nz].tolist()))


def _invariants(D: np.ndarray, names: tuple[str, ...], method: str, max_rows: int) -> list[dict[str, int]]:
    method = _checks.choice("method", method, INVARIANT_METHODS)
    max_rows = _checks.integer("max_rows", max_rows)
    if D.shape[0] == 0:
        return []
    if method == "basis":
        vecs = _nullspace_basis(D)
    else:
        try:
            vecs = sorted(_farkas(D, max_rows), key=_sort_key)
        except StateSpaceTooLargeError as exc:
            if method != "auto":
                raise
            warn_user(
                f"method='auto': {exc}; returning an integer null-space basis instead "
                "(method='basis'; entries may be negative)",
                UserWarning,
            )
            vecs = _nullspace_basis(D)
    return [{names[i]: int(v[i]) for i in np.flatnonzero(v)} for v in vecs]


def p_invariants(
    net: PetriNet, *, method: str = "semipositive", max_rows: int = 10_000
) -> list[dict[str, int]]:
    """P-invariants: integer weights ``y`` over places with ``incidence @ y = 0``.

    Parameters
    ----------
    net : PetriNet
    method : {"semipositive", "basis", "auto"}
        ``"semipositive"``: all minimal-support semi-positive invariants
        (Farkas / Martinez-Silva); ``"basis"``: an integer basis of the null
        space (entries may be negative); ``"auto"``: the former, or the latter
        with a ``UserWarning`` if the former exceeds ``max_rows``.
    max_rows : int
        Largest Farkas table allowed before giving up.

    Returns
    -------
    list of dict
        One ``{place: weight}`` per invariant, listing only the places with a
        nonzero weight (the support), smallest supports first.

    Raises
    ------
    StateSpaceTooLargeError
        With ``method="semipositive"`` when the Farkas table exceeds ``max_rows``.

    Examples
    --------
    Mutual exclusion (Murata 1989, Fig. 6): two processes share one lock.

    >>> from queuesgd.petri.net import PetriNet
    >>> net = PetriNet("mutex")
    >>> for p, k in [("idle1", 1), ("crit1", 0), ("idle2", 1), ("crit2", 0), ("lock", 1)]:
    ...     _ = net.place(p, tokens=k)
    >>> _ = net.timed("enter1", 1.0, inputs={"idle1": 1, "lock": 1}, outputs={"crit1": 1})
    >>> _ = net.timed("leave1", 1.0, inputs={"crit1": 1}, outputs={"idle1": 1, "lock": 1})
    >>> _ = net.timed("enter2", 1.0, inputs={"idle2": 1, "lock": 1}, outputs={"crit2": 1})
    >>> _ = net.timed("leave2", 1.0, inputs={"crit2": 1}, outputs={"idle2": 1, "lock": 1})
    >>> for y in p_invariants(net):
    ...     print(y, conserved_quantity(net, y))
    {'idle1': 1, 'crit1': 1} 1
    {'idle2': 1, 'crit2': 1} 1
    {'crit1': 1, 'crit2': 1, 'lock': 1} 1
    """
    return _invariants(np.asarray(net.incidence).T, net.place_names, method, max_rows)


def t_invariants(
    net: PetriNet, *, method: str = "semipositive", max_rows: int = 10_000
) -> list[dict[str, int]]:
    """T-invariants: firing counts ``x`` over transitions with ``incidence.T @ x = 0``.

    Same parameters and result shape as :func:`p_invariants`, keyed by
    transition name.

    Examples
    --------
    >>> from queuesgd.petri.net import PetriNet
    >>> net = PetriNet("cycle")
    >>> _ = net.place("a", tokens=1)
    >>> _ = net.place("b")
    >>> _ = net.timed("go", 1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("back", 1.0, inputs={"b": 1}, outputs={"a": 1})
    >>> t_invariants(net)
    [{'go': 1, 'back': 1}]
    """
    return _invariants(np.asarray(net.incidence), net.transition_names, method, max_rows)


def _marking_vector(net: PetriNet, marking: Any) -> np.ndarray:
    names = net.place_names
    if marking is None:
        return np.asarray(net.initial_marking, dtype=np.int64)
    if isinstance(marking, Mapping):
        vec = np.zeros(len(names), dtype=np.int64)
        idx = {p: i for i, p in enumerate(names)}
        for p, k in marking.items():
            if p not in idx:
                raise UnknownNameError("marking place", p, names)
            vec[idx[p]] = _checks.integer(f"marking[{p!r}]", k, minimum=0)
        return vec
    arr = np.asarray(marking)
    if arr.shape != (len(names),) or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidParameterError(
            "marking", marking, f"a {{place: tokens}} mapping or {len(names)} integers (one per place)"
        )
    return arr.astype(np.int64)


def conserved_quantity(net: PetriNet, invariant: Mapping[str, int], marking: Any = None) -> int:
    """The weighted token count ``sum(y[p] * M[p])`` that a P-invariant keeps constant.

    Parameters
    ----------
    net : PetriNet
    invariant : mapping of place to weight
        A P-invariant (as returned by :func:`p_invariants`).
    marking : mapping of place to tokens, array of ints (one per place), or None
        The marking to evaluate; None means the initial marking.

    Returns
    -------
    int
        The same for every marking reachable from ``marking``.

    Examples
    --------
    >>> from queuesgd.petri.net import PetriNet
    >>> net = PetriNet("cycle")
    >>> _ = net.place("a", tokens=2)
    >>> _ = net.place("b")
    >>> _ = net.timed("go", 1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("back", 1.0, inputs={"b": 1}, outputs={"a": 1})
    >>> inv = p_invariants(net)[0]
    >>> inv, conserved_quantity(net, inv), conserved_quantity(net, inv, {"a": 0, "b": 2})
    ({'a': 1, 'b': 1}, 2, 2)
    """
    vec = _marking_vector(net, marking)
    idx = {p: i for i, p in enumerate(net.place_names)}
    total = 0
    for p, w in invariant.items():
        if p not in idx:
            raise UnknownNameError("invariant place", p, net.place_names)
        total += int(w) * int(vec[idx[p]])
    return total


def uncovered_places(net: PetriNet) -> tuple[str, ...]:
    """Places that no semi-positive P-invariant covers (candidates for unboundedness).

    A place covered by a semi-positive P-invariant ``y`` is bounded by
    ``y . M0 / y[p]`` in every reachable marking. An uncovered place may grow
    without bound (or be bounded by inhibitor arcs or by the initial marking,
    which invariants do not see).

    Computed with one linear program (SciPy HiGHS): maximize ``sum(t)``
    subject to ``C @ y = 0``, ``0 <= t <= 1``, ``t <= y``, ``y >= 0``; since
    semi-positive invariants add up, the optimum has ``t[p] = 1`` exactly on
    the coverable places. This avoids enumerating every minimal invariant.

    Examples
    --------
    >>> from queuesgd.petri.net import PetriNet
    >>> net = PetriNet("source")
    >>> _ = net.place("idle", tokens=1)
    >>> _ = net.place("jobs")
    >>> _ = net.timed("spawn", 1.0, inputs={"idle": 1}, outputs={"idle": 1, "jobs": 1})
    >>> uncovered_places(net)
    ('jobs',)
    """
    from scipy.optimize import linprog

    C = np.asarray(net.incidence, dtype=float)
    P = C.shape[1]
    if P == 0:
        return ()
    T = C.shape[0]
    # Variables [y (P), t (P)].
    c = np.concatenate([np.zeros(P), -np.ones(P)])
    A_eq = np.concatenate([C, np.zeros((T, P))], axis=1) if T else None
    b_eq = np.zeros(T) if T else None
    A_ub = np.concatenate([-np.eye(P), np.eye(P)], axis=1)  # t - y <= 0
    b_ub = np.zeros(P)
    bounds = [(0, None)] * P + [(0, 1)] * P
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - the LP is always feasible (y = t = 0) and bounded
        raise RuntimeError(f"uncovered_places: linear program failed: {res.message}")
    covered = res.x[P:] > 0.5
    return tuple(p for p, c_ in zip(net.place_names, covered) if not c_)


def is_covered_by_p_invariants(net: PetriNet) -> bool:
    """True if every place is covered by a semi-positive P-invariant (structurally bounded).

    Examples
    --------
    >>> from queuesgd.petri.net import PetriNet
    >>> net = PetriNet("cycle")
    >>> _ = net.place("a", tokens=1)
    >>> _ = net.place("b")
    >>> _ = net.timed("go", 1.0, inputs={"a": 1}, outputs={"b": 1})
    >>> _ = net.timed("back", 1.0, inputs={"b": 1}, outputs={"a": 1})
    >>> is_covered_by_p_invariants(net)
    True
    """
    return not uncovered_places(net)
