"""Symbolic steady state of a GSPN's tangible reachability graph.

The CTMC generator of the tangible reachability graph is built with the net's
rates and weights as SymPy expressions, and the balance equations
``pi Q = 0``, ``sum(pi) = 1`` are solved *exactly* over a polynomial ring, not
with SymPy's generic ``Matrix.solve`` plus ``simplify`` per entry (LINE's
symbolic CTMC takes 13.6 s for 6 states and minutes for 10 that way).

Method (see ``docs/petri-symbolic-and-invariants.md``):

1. Every rate, weight, enabling degree and branching probability is made
   exact: a Python or SymPy float becomes the simplest rational that rounds to
   it (denominator <= 10**6: ``0.1 -> 1/10``, ``0.333... -> 1/3``), else its
   shortest round-trip decimal (``Rational(repr(x))``), so rational rates give
   exact rational probabilities.
2. The generator entries are converted once into a SymPy polynomial domain
   (``construct_domain``: ``ZZ``/``QQ`` for numbers, ``ZZ[a, b, c]`` for
   symbolic rates; a fraction field such as ``ZZ(w1, w2)`` from weights is
   cleared to its ring row by row).
3. With ``pi_0 = 1`` and the balance equation of state 0 dropped, the reduced
   ``(n-1) x (n-1)`` system is solved fraction-free with
   ``DomainMatrix.solve_den(method="charpoly")`` (numerators and one common
   denominator, no GCD per operation; over ``QQ`` an LU solve is used). The
   reduced matrix is a principal submatrix of an irreducible generator, hence
   nonsingular.
4. The unnormalized vector is divided by its total; one GCD per entry in the
   ring puts it in lowest terms and each entry is turned into an expression
   once at the end (``factor`` or ``cancel``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd.markov.symbolic import (
    FORMS,
    MAX_SYMBOLIC_CTMC_WORK,
    check_symbolic_ctmc,
    exact,
    steady_state_symbolic,
)

if TYPE_CHECKING:
    import sympy

    from queuesgd.petri.net import PetriNet
    from queuesgd.petri.statespace import StateSpace

__all__ = ["symbolic_steady_state", "symbolic_generator", "FORMS"]


# ---- generator entries from a state space ---------------------------------------
def _generator_entries(space: StateSpace, net: PetriNet) -> tuple[dict[tuple[int, int], Any], int]:
    """Off-diagonal generator entries ``{(src, dst): rate * degree * prob}`` as exact expressions."""
    import sympy

    n = int(np.asarray(space.markings).shape[0])
    rates = np.asarray(net.rates, dtype=object)
    names = net.transition_names
    src = np.asarray(space.src, dtype=np.int64)
    dst = np.asarray(space.dst, dtype=np.int64)
    tr = np.asarray(space.transition, dtype=np.int64)
    degree = np.asarray(space.degree, dtype=object)
    prob = np.asarray(space.prob, dtype=object)
    exact_rate = {int(t): exact(rates[t], f"transition {names[t]!r} rate") for t in np.unique(tr)}
    terms: dict[tuple[int, int], list[Any]] = {}
    for e in np.flatnonzero(src != dst):  # self-loops cancel in the generator
        i, j, t = int(src[e]), int(dst[e]), int(tr[e])
        term = exact_rate[t] * exact(degree[e], "degree") * exact(prob[e], "prob")
        terms.setdefault((i, j), []).append(term)
    entries = {k: sympy.Add(*v) for k, v in terms.items()}
    return {k: v for k, v in entries.items() if v != 0}, n


def symbolic_generator(space: StateSpace, net: PetriNet) -> sympy.Matrix:
    """The CTMC generator of ``space`` with the net's exact (possibly symbolic) rates.

    ``Q[i, j]`` (``i != j``) is the sum of ``rate * degree * prob`` over the
    edges from tangible marking ``i`` to ``j``; the diagonal makes rows sum to 0.
    Floats become rationals (``0.1 -> 1/10``).

    Parameters
    ----------
    space : StateSpace
        The tangible reachability graph (``net.state_space()``).
    net : PetriNet
        The net it was generated from (for the rates).

    Returns
    -------
    sympy.Matrix, shape (S, S)

    Examples
    --------
    >>> import sympy
    >>> from queuesgd.petri.net import PetriNet
    >>> lam, mu = sympy.symbols("lambda mu", positive=True)
    >>> net = PetriNet("mm11")
    >>> _ = net.place("q")
    >>> _ = net.timed("arrive", rate=lam, outputs={"q": 1}, inhibitors={"q": 1})
    >>> _ = net.timed("serve", rate=mu, inputs={"q": 1})
    >>> symbolic_generator(net.state_space(), net)
    Matrix([
    [-lambda, lambda],
    [     mu,    -mu]])
    """
    entries, n = _generator_entries(space, net)
    return _dense_generator(entries, n)


def _dense_generator(entries: Mapping[tuple[int, int], Any], n: int) -> sympy.Matrix:
    import sympy

    Q = sympy.zeros(n, n)
    for (i, j), v in entries.items():
        if i != j:
            Q[i, j] += v
    for i in range(n):
        Q[i, i] = -sympy.Add(*[Q[i, j] for j in range(n) if j != i])
    return Q


def symbolic_steady_state(
    space: StateSpace,
    net: PetriNet,
    *,
    form: str = "cancel",
    max_work: int | None = MAX_SYMBOLIC_CTMC_WORK,
) -> np.ndarray:
    """Exact steady state of a GSPN's tangible reachability graph.

    The generator ``Q[src, dst] += rate[t] * degree * prob`` is built from the
    edges of ``space`` with the net's rates and weights as exact SymPy
    expressions (a float becomes the simplest rational that rounds to it:
    ``0.1 -> 1/10``, ``0.333... -> 1/3``), and ``pi Q = 0``, ``sum(pi) = 1`` is solved fraction-free
    over a polynomial ring with :class:`sympy.polys.matrices.DomainMatrix`.

    Parameters
    ----------
    space : StateSpace
        The tangible reachability graph (``net.state_space()``); it must be
        irreducible.
    net : PetriNet
        The net that ``space`` was generated from.
    form : {"factor", "cancel"}
        Each probability in lowest terms, with numerator and denominator
        factored (``"factor"``) or expanded (``"cancel"``, faster when the
        polynomials are large).
    max_work : int or None
        Refuse graphs whose work estimate exceeds it (see
        :func:`queuesgd.markov.symbolic.check_symbolic_ctmc`); ``None`` tries
        any size.

    Returns
    -------
    ndarray of object, shape (S,)
        One SymPy expression per tangible marking (row of ``space.markings``),
        summing to 1; exact rationals when every rate and weight is a number.

    Raises
    ------
    InvalidParameterError
        If the graph is not irreducible (absorbing markings, several closed
        classes); the message counts them.
    StateSpaceTooLargeError
        If the exact solve would take too long (more than about 150 markings
        with numeric rates, 32 with two symbols, 13 with six); solve
        numerically instead.

    Examples
    --------
    An M/M/1/2 queue with symbolic rates (an inhibitor arc caps the queue):

    >>> import sympy
    >>> from queuesgd.petri.net import PetriNet
    >>> lam, mu = sympy.symbols("lambda mu", positive=True)
    >>> net = PetriNet("mm12")
    >>> _ = net.place("queue")
    >>> _ = net.timed("arrive", rate=lam, outputs={"queue": 1}, inhibitors={"queue": 2})
    >>> _ = net.timed("serve", rate=mu, inputs={"queue": 1})
    >>> space = net.state_space()
    >>> for marking, p in zip(space.markings.tolist(), symbolic_steady_state(space, net)):
    ...     print(marking, p)
    [0] mu**2/(lambda**2 + lambda*mu + mu**2)
    [1] lambda*mu/(lambda**2 + lambda*mu + mu**2)
    [2] lambda**2/(lambda**2 + lambda*mu + mu**2)

    Rational rates give exact rationals (the float 0.5 is read as 1/2):

    >>> net = PetriNet("mm12")
    >>> _ = net.place("queue")
    >>> _ = net.timed("arrive", rate=0.5, outputs={"queue": 1}, inhibitors={"queue": 2})
    >>> _ = net.timed("serve", rate=sympy.Rational(1, 3), inputs={"queue": 1})
    >>> symbolic_steady_state(net.state_space(), net).tolist()
    [4/19, 6/19, 9/19]
    """
    # the least work any rates give, before building a generator entry per edge
    check_symbolic_ctmc(int(np.asarray(space.markings).shape[0]), 0, max_work)
    entries, n = _generator_entries(space, net)
    return steady_state_symbolic(entries, n, form=form, max_work=max_work)
