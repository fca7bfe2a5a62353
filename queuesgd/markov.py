"""Steady state of a continuous-time Markov chain (CTMC).

One function, :func:`steady_state`, for any finite irreducible CTMC given by
its generator: the queueing CTMC (:func:`queuesgd.queueing.ctmc.ctmc_solve`)
uses it, and so can a Petri-net engine's reachability graph.

Method (see ``docs/markov.md``): the balance equations ``Q^T pi = 0`` have rank
``n - 1`` for an irreducible chain. We fix ``pi_0 = 1``, drop the balance
equation of state 0, solve the reduced ``(n-1) x (n-1)`` sparse system and
renormalize. The reduced matrix is a principal submatrix of an irreducible
singular M-matrix, hence nonsingular. We do *not* replace one equation with a
dense row of ones: SuperLU fill-in made a 16,384-state solve take minutes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import connected_components

from queuesgd import _checks
from queuesgd.errors import ConvergenceError, InvalidParameterError

__all__ = ["steady_state", "METHODS", "AUTO_DIRECT_LIMIT"]

METHODS = ("auto", "direct", "iterative")

#: ``method="auto"`` solves directly up to this many states, iteratively above.
AUTO_DIRECT_LIMIT = 200_000


def _as_csr(Q: Any) -> sp.csr_matrix:
    if sp.issparse(Q):
        A = sp.csr_matrix(Q, dtype=float)
    else:
        try:
            arr = np.asarray(Q, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                "Q", type(Q).__name__, "a square generator matrix (NumPy array or scipy.sparse matrix) of numbers"
            ) from None
        if arr.ndim != 2:
            raise InvalidParameterError("Q", f"an array of shape {arr.shape}", "a square 2-D generator matrix")
        A = sp.csr_matrix(arr)
    if A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise InvalidParameterError("Q", f"a matrix of shape {A.shape}", "a non-empty square generator matrix")
    A.sum_duplicates()
    A.eliminate_zeros()
    if not np.all(np.isfinite(A.data)):
        raise InvalidParameterError("Q", "a matrix with NaN or infinite entries", "finite rates")
    return A


def _validate_generator(A: sp.csr_matrix) -> None:
    coo = A.tocoo()
    off = coo.row != coo.col
    bad = off & (coo.data < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"Q[{coo.row[i]}, {coo.col[i]}]", float(coo.data[i]), "an off-diagonal rate >= 0"
        )
    rowsum = np.asarray(A.sum(axis=1)).ravel()
    scale = np.maximum(np.abs(A.diagonal()), np.bincount(coo.row[off], coo.data[off], minlength=A.shape[0]))
    tol = 1e-9 * np.maximum(scale, np.finfo(float).tiny)
    bad_rows = np.flatnonzero(np.abs(rowsum) > tol)
    if bad_rows.size:
        i = int(bad_rows[0])
        raise InvalidParameterError(
            f"Q row {i}", f"sum {rowsum[i]:.6g}", "rows that sum to 0 (diagonal = minus the total outflow rate)"
        )


def _closed_classes(A: sp.csr_matrix) -> tuple[int, np.ndarray]:
    """Number of strongly connected components and a label per state."""
    return connected_components(A, directed=True, connection="strong")


def _check_irreducible(A: sp.csr_matrix) -> None:
    n_comp, labels = _closed_classes(A)
    if n_comp == 1:
        return
    coo = A.tocoo()
    leaving = (coo.row != coo.col) & (labels[coo.row] != labels[coo.col]) & (coo.data > 0)
    open_comp = np.zeros(n_comp, dtype=bool)
    open_comp[labels[coo.row[leaving]]] = True
    closed = np.flatnonzero(~open_comp)
    sizes = np.bincount(labels, minlength=n_comp)
    absorbing = np.flatnonzero(np.isin(labels, closed[sizes[closed] == 1]))
    transient = int(np.count_nonzero(open_comp[labels]))
    parts = [f"{len(closed)} closed classes" if len(closed) != 1 else "1 closed class"]
    if absorbing.size:
        shown = ", ".join(str(s) for s in absorbing[:10]) + (", ..." if absorbing.size > 10 else "")
        parts.append(f"absorbing states [{shown}]")
    if transient:
        parts.append(f"{transient} transient states")
    raise InvalidParameterError(
        "Q",
        "a reducible chain with " + ", ".join(parts),
        "an irreducible generator (every state reachable from every other)",
    )


def _reduced_system(A: sp.csr_matrix) -> tuple[sp.csc_matrix, np.ndarray]:
    """``B x = b`` from ``Q^T pi = 0`` with ``pi_0 = 1`` and balance equation 0 dropped."""
    At = A.T.tocsc()
    B = At[1:, 1:].tocsc()
    b = -At[1:, 0].toarray().ravel()
    return B, b


def _finish(x: np.ndarray, tol: float) -> np.ndarray:
    pi = np.concatenate(([1.0], x))
    # Round-off can leave tiny negatives on states of negligible probability.
    if pi.min() < -max(1e-8, 10 * tol) * np.abs(pi).max():
        raise ConvergenceError(
            f"steady_state: solution has a negative probability ({pi.min():.3g}); "
            "the generator is badly conditioned, try method='direct' or a smaller tol"
        )
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def _direct(A: sp.csr_matrix, tol: float) -> np.ndarray:
    B, b = _reduced_system(A)
    x = spla.spsolve(B, b)
    if not np.all(np.isfinite(x)):
        raise ConvergenceError("steady_state(method='direct'): the sparse LU solve produced NaN/inf")
    return _finish(np.atleast_1d(x), tol)


def _iterative(A: sp.csr_matrix, tol: float, maxiter: int = 500) -> np.ndarray:
    B, b = _reduced_system(A)
    n = B.shape[0]
    try:
        ilu = spla.spilu(B, drop_tol=1e-6, fill_factor=20)
        M = spla.LinearOperator((n, n), ilu.solve)
    except RuntimeError:  # singular factor: go on without a preconditioner
        M = None
    x, info = spla.gmres(B, b, rtol=tol, atol=0.0, restart=min(n, 100), maxiter=maxiter, M=M)
    if info != 0 or not np.all(np.isfinite(x)):
        x0 = np.where(np.isfinite(x), x, 0.0)
        x, info2 = spla.bicgstab(B, b, x0=x0, rtol=tol, atol=0.0, maxiter=10 * maxiter, M=M)
        if info2 != 0 or not np.all(np.isfinite(x)):
            resid = np.linalg.norm(B @ x - b) / max(np.linalg.norm(b), np.finfo(float).tiny)
            raise ConvergenceError(
                f"steady_state(method='iterative'): GMRES and BiCGSTAB did not converge "
                f"(GMRES: {maxiter} restarts of 100; relative residual {resid:.3g}, tol {tol:g}); try method='direct'"
            )
    return _finish(x, tol)


def steady_state(Q: Any, *, method: str = "auto", tol: float = 1e-12) -> np.ndarray:
    """Stationary distribution ``pi`` of an irreducible CTMC: ``pi Q = 0``, ``sum(pi) = 1``.

    Parameters
    ----------
    Q : array_like or scipy.sparse matrix, shape (n, n)
        Generator: off-diagonal rates >= 0, rows summing to 0.
    method : {"auto", "direct", "iterative"}
        ``"direct"``: sparse LU (SuperLU) of the reduced system obtained by
        fixing ``pi_0 = 1`` and dropping one balance equation. ``"iterative"``:
        GMRES (BiCGSTAB as a fallback) with an incomplete-LU preconditioner on
        the same reduced system. ``"auto"``: direct up to
        ``AUTO_DIRECT_LIMIT`` (200,000) states, iterative above.
    tol : float
        Relative residual tolerance of the iterative solvers.

    Returns
    -------
    ndarray, shape (n,)
        Probabilities, non-negative, summing to 1.

    Raises
    ------
    InvalidParameterError
        If ``Q`` is not a generator, or the chain is not irreducible (the
        message names the number of closed classes and absorbing states).
    ConvergenceError
        If the iterative solvers do not converge.

    Examples
    --------
    Two states, rate 1 from 0 to 1 and rate 3 back:

    >>> steady_state([[-1.0, 1.0], [3.0, -3.0]]).tolist()
    [0.75, 0.25]
    """
    method = _checks.choice("method", method, METHODS)
    tol = _checks.positive("tol", tol)
    A = _as_csr(Q)
    _validate_generator(A)
    n = A.shape[0]
    if n == 1:
        return np.ones(1)
    _check_irreducible(A)
    if method == "auto":
        method = "direct" if n <= AUTO_DIRECT_LIMIT else "iterative"
    if method == "direct":
        return _direct(A, tol)
    return _iterative(A, tol)
