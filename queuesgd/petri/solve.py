"""Steady state of a GSPN: its tangible reachability graph solved as a CTMC.

:func:`solve` generates the state space (:mod:`queuesgd.petri.statespace`),
checks the graph (dead and absorbing markings, several closed classes) with
messages that name markings, and solves the CTMC numerically with
:func:`queuesgd.markov.steady_state` or symbolically with
:func:`queuesgd.petri.symbolic.symbolic_steady_state`. The result is an
immutable :class:`GSPNSolution` queried by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.markov import METHODS, solve_auto, steady_state
from queuesgd.petri.compiled import is_net
from queuesgd.petri.statespace import StateSpace, state_space

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["solve", "GSPNSolution"]


@dataclass(frozen=True, eq=False)
class GSPNSolution:
    """Steady state of a GSPN.

    Attributes
    ----------
    space : StateSpace
        The tangible reachability graph.
    probabilities : ndarray (S,)
        Steady-state probability of each tangible marking (object dtype of
        SymPy expressions when solved symbolically).
    method : str
        What ran: ``"gth"``, ``"direct"``, ``"iterative"`` or ``"symbolic"``.
    flows : ndarray (E,)
        Steady-state frequency of each edge of ``space``:
        ``pi[src] * rate * degree * prob`` (exact SymPy when symbolic).
    firings : scipy.sparse matrix or ndarray (E, T)
        ``space.immediate_firings`` (exact SymPy when symbolic).

    Examples
    --------
    An M/M/1/2 queue with arrival rate 1 and service rate 2:

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("mm12")
    >>> _ = net.place("q")
    >>> _ = net.timed("arrive", rate=1.0, outputs={"q": 1}, inhibitors={"q": 2})
    >>> _ = net.timed("serve", rate=2.0, inputs={"q": 1})
    >>> sol = net.solve()
    >>> sol.method, sol.probabilities.round(6).tolist()    # 4/7, 2/7, 1/7
    ('gth', [0.571429, 0.285714, 0.142857])
    >>> round(sol.throughput("serve"), 6), round(sol.mean_tokens("q"), 6)   # 6/7, 4/7
    (0.857143, 0.571429)
    >>> round(sol.probability(lambda m: m["q"] >= 1), 6)
    0.428571
    """

    space: StateSpace
    probabilities: np.ndarray
    method: str
    flows: np.ndarray = field(repr=False)
    firings: Any = field(repr=False)

    def __repr__(self) -> str:
        return f"GSPNSolution({self.space.net_name!r}, markings={len(self.space)}, method={self.method!r})"

    @property
    def symbolic(self) -> bool:
        """True when the probabilities are SymPy expressions."""
        return self.probabilities.dtype == object

    def _simplify(self, value: Any) -> Any:
        if self.symbolic:
            import sympy

            return sympy.cancel(sympy.sympify(value))
        return float(value)

    def _transition(self, name: str) -> int:
        names = self.space.transition_names
        if not isinstance(name, str) or name not in names:
            raise UnknownNameError("transition", name, names)
        return names.index(name)

    def _place(self, name: str) -> int:
        names = self.space.place_names
        if not isinstance(name, str) or name not in names:
            raise UnknownNameError("place", name, names)
        return names.index(name)

    def throughput(self, transition: str) -> Any:
        """Mean firings per unit time of a timed or an immediate transition.

        A timed transition fires at ``sum_m pi(m) * rate * min(e(m), servers)``;
        an immediate one at the flow of every timed firing times the expected
        number of its firings in the vanishing markings that follow.
        """
        t = self._transition(transition)
        s = self.space
        if s.transition_names[t] in self._timed_names:
            return self._simplify(self.flows[s.transition == t].sum())
        col = self.firings[:, t]
        col = col.toarray().ravel() if sp.issparse(col) else np.asarray(col).ravel()
        nz = np.flatnonzero(col != 0)
        return self._simplify((self.flows[nz] * col[nz]).sum())

    @property
    def _timed_names(self) -> set[str]:
        r = self.space.rates
        return {
            n for n, x in zip(self.space.transition_names, r) if not (isinstance(x, float) and np.isnan(x))
        }

    def mean_tokens(self, place: str) -> Any:
        """Mean number of tokens in ``place``."""
        p = self._place(place)
        return self._simplify((self.probabilities * self.space.markings[:, p]).sum())

    def probability(
        self, predicate: Callable[[Mapping[str, Any]], Any], *, vectorized: bool | None = None
    ) -> Any:
        """Steady-state probability of the markings where ``predicate`` holds.

        Parameters
        ----------
        predicate : callable
            Takes a mapping ``{place: tokens}``. With ``vectorized=True`` the
            values are arrays of shape (S,) (one entry per tangible marking)
            and the predicate returns a boolean array, so that
            ``lambda m: m["q"] >= 2`` is evaluated once for all markings.
        vectorized : bool or None
            ``None`` (default): try the vectorized call and fall back to one
            call per marking if the predicate raises or does not return a
            boolean array of shape (S,).
        """
        if not callable(predicate):
            raise InvalidParameterError("predicate", predicate, "a callable taking {place: tokens}")
        M = self.space.markings
        S = M.shape[0]
        mask = None
        if vectorized is not False:
            cols = {p: M[:, i] for i, p in enumerate(self.space.place_names)}
            try:
                out = np.asarray(predicate(cols))
            except Exception:
                if vectorized:
                    raise
                out = None
            if out is not None and out.shape == (S,) and out.dtype == bool:
                mask = out
            elif vectorized:
                raise InvalidParameterError(
                    "predicate",
                    f"a result of shape {getattr(out, 'shape', None)}",
                    f"a boolean array of shape ({S},)",
                )
        if mask is None:
            names = self.space.place_names
            mask = np.fromiter(
                (bool(predicate(dict(zip(names, map(int, row))))) for row in M), dtype=bool, count=S
            )
        return self._simplify(self.probabilities[mask].sum())

    def distribution(self) -> list[tuple[dict[str, int], Any]]:
        """``[(marking, probability), ...]`` in state order (use ``space.markings`` for arrays)."""
        return [(self.space.marking(i), p) for i, p in enumerate(self.probabilities)]


def _check_graph(space: StateSpace) -> np.ndarray | None:
    """Recurrent markings if there is one closed class with transient markings around it.

    Raises for dead or absorbing markings and for several closed classes.
    """
    S = len(space)
    fmt = _fmt(space)
    moves = space.src != space.dst
    has_any = np.zeros(S, dtype=bool)
    has_any[space.src] = True
    has_move = np.zeros(S, dtype=bool)
    has_move[space.src[moves]] = True
    dead = np.flatnonzero(~has_any)
    if dead.size:
        i = int(dead[0])
        raise InvalidParameterError(
            "net",
            f"a deadlock: tangible marking {fmt(i)} (state {i}) enables no timed transition"
            + (f" ({dead.size} such markings)" if dead.size > 1 else ""),
            "a net whose every reachable marking enables a timed transition "
            "(add a transition out of it, or simulate the transient with net.simulate)",
        )
    if S == 1:
        return None
    stuck = np.flatnonzero(~has_move)
    if stuck.size:
        i = int(stuck[0])
        raise InvalidParameterError(
            "net",
            f"an absorbing marking: {fmt(i)} (state {i}) can never be left "
            "(its timed transitions lead back to it)",
            "a net where every reachable marking can be left",
        )
    A = sp.csr_matrix((np.ones(int(moves.sum())), (space.src[moves], space.dst[moves])), shape=(S, S))
    ncomp, lab = connected_components(A, directed=True, connection="strong")
    if ncomp == 1:
        return None
    leaving = lab[space.src[moves]] != lab[space.dst[moves]]
    open_ = np.zeros(ncomp, dtype=bool)
    open_[lab[space.src[moves][leaving]]] = True
    closed = np.flatnonzero(~open_)
    if closed.size > 1:
        a = int(np.flatnonzero(lab == closed[0])[0])
        b = int(np.flatnonzero(lab == closed[1])[0])
        raise InvalidParameterError(
            "net",
            f"{closed.size} closed classes of markings that cannot reach each other, "
            f"e.g. {fmt(a)} and {fmt(b)}",
            "a net whose recurrent markings form one class (the steady state would depend on chance "
            "in the transient phase; simulate it with net.simulate)",
        )
    return np.flatnonzero(lab == closed[0])


def _fmt(space: StateSpace) -> Callable[[int], str]:
    def fmt(i: int) -> str:
        nz = {p: int(k) for p, k in zip(space.place_names, space.markings[i]) if k}
        return str(nz) + (" (other places empty)" if len(nz) < len(space.place_names) else "")

    return fmt


def solve(
    net: PetriNet,
    method: str = "auto",
    symbolic: bool = False,
    max_states: int = 2_000_000,
) -> GSPNSolution:
    """Steady state of a GSPN.

    Parameters
    ----------
    net : PetriNet
    method : {"auto", "direct", "iterative", "gth"}
        Numeric solver of :func:`queuesgd.markov.steady_state`: sparse LU of
        the reduced balance equations, preconditioned GMRES, or GTH
        elimination (accurate entry by entry). ``"auto"``
        (:func:`queuesgd.markov.solve_auto`) takes GTH while its cost is
        within ``GTH_WORK_LIMIT`` and otherwise solves directly up to 200,000
        markings, with GTH where that fails; ``GSPNSolution.method`` says what
        gave the answer.
    symbolic : bool
        Solve exactly in SymPy (rates or weights may be symbols).
    max_states : int
        Largest number of tangible markings.

    Returns
    -------
    GSPNSolution

    Raises
    ------
    InvalidParameterError
        A dead or absorbing marking, several closed classes, or symbolic
        rates with ``symbolic=False`` (each named in the message).

    Examples
    --------
    Machine repairman: 2 machines fail at rate 1 each, one repairer at rate 2.

    >>> from queuesgd import PetriNet
    >>> net = PetriNet("repair")
    >>> _ = net.place("up", tokens=2)
    >>> _ = net.place("down")
    >>> _ = net.timed("fail", rate=1.0, inputs={"up": 1}, outputs={"down": 1}, servers="infinite")
    >>> _ = net.timed("repair", rate=2.0, inputs={"down": 1}, outputs={"up": 1})
    >>> round(solve(net).throughput("repair"), 6)      # 6/5
    1.2
    """
    if not is_net(net):
        raise InvalidParameterError("net", type(net).__name__, "a queuesgd.PetriNet")
    method = _checks.choice("method", method, METHODS)
    if not isinstance(symbolic, bool):
        raise InvalidParameterError("symbolic", symbolic, "True or False")
    rates = net.rates
    if not symbolic and (rates.dtype == object or net.weights.dtype == object):
        names = [
            t.name
            for t in net.transitions.values()
            if _checks.is_symbolic(t.rate) or _checks.is_symbolic(t.weight)
        ]
        raise InvalidParameterError(
            "symbolic",
            False,
            f"symbolic=True: the rates or weights of {names} are SymPy expressions "
            "(or substitute numbers before solving)",
        )
    space = state_space(net, max_states=max_states)
    rec = _check_graph(space)
    if symbolic:
        from queuesgd.markov import exact
        from queuesgd.petri.symbolic import symbolic_steady_state

        if rec is not None:
            raise InvalidParameterError(
                "net",
                "transient markings",
                "an irreducible net for symbolic=True (solve numerically instead)",
            )
        pi = np.asarray(symbolic_steady_state(space, net), dtype=object)
        # the same exact reading of floats as the symbolic solver (0.1 -> 1/10)
        ex = np.vectorize(exact, otypes=[object])
        rates_x = np.array(
            [exact(r) if not isinstance(r, float) or r == r else r for r in rates], dtype=object
        )
        e = space.src.size
        flows = pi[space.src] * rates_x[space.transition] * ex(space.degree) * ex(space.prob) if e else pi[:0]
        F = space.immediate_firings
        F = F.toarray() if sp.issparse(F) else np.asarray(F)
        firings = ex(F.astype(object)) if F.size else F.astype(object)
        return GSPNSolution(space=space, probabilities=pi, method="symbolic", flows=flows, firings=firings)
    Q = space.generator()
    # the reachable markings lie in a lattice of dimension <= rank(incidence)
    dim = int(np.linalg.matrix_rank(net.incidence.astype(float)))
    G = Q if rec is None else Q[rec][:, rec]
    if method == "auto":
        solved, ran = solve_auto(G, dim)
    else:
        solved, ran = steady_state(G, method=method), method
    if rec is None:
        pi = solved
    else:
        pi = np.zeros(len(space))
        pi[rec] = solved
    r = np.asarray(rates, dtype=float)
    flows = pi[space.src] * r[space.transition] * space.degree * space.prob.astype(float)
    return GSPNSolution(
        space=space, probabilities=pi, method=ran, flows=flows, firings=space.immediate_firings.tocsc()
    )
