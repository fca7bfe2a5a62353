"""Where a loop of immediate transitions leads: absorption probabilities and expected firings.

A loop of immediate firings among ``nv`` vanishing markings ends in one of
``nt`` tangible ones. With ``A`` the branching probabilities among the
vanishing markings and ``B`` those into the tangible ones (each row of
``[A B]`` sums to 1), the absorption probabilities are ``X = (I - A)^-1 B``
and the expected firings of immediate transition ``u``, jointly with the
destination, ``Y_u = (I - A)^-1 (A_u X + B_u)``.

:func:`absorb_numeric` solves both without subtractions, as GTH does for a
steady state (:mod:`queuesgd.markov.gth`): the vanishing markings are
eliminated one by one, and each pivot ``1 - A_kk`` is formed as the sum of
the probabilities of leaving ``k`` for the markings left, never as ``1``
minus the probability of staying. So a retry loop that repeats with
probability ``1 - 1e-12``, or an exit of probability ``1e-14``, keeps all
its digits; sparse LU of ``I - A`` lost 2e-5 and 0.33 there (a randomized
audit, 2026-11-27). Loops of more than ``DENSE_LOOP`` markings fall back to
sparse LU and warn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular

from queuesgd.errors import AccuracyWarning, warn_user

__all__ = ["DENSE_LOOP", "absorb_numeric", "absorb_symbolic"]

#: Largest loop of vanishing markings eliminated exactly (dense, about ``nv^3 / 3`` work at worst).
DENSE_LOOP = 2_000


def absorb_numeric(
    nv: int, nt: int, src: np.ndarray, j: np.ndarray, p: np.ndarray, dst: np.ndarray, tan: np.ndarray,
    used: np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """Absorption probabilities ``X`` (nv, nt) and expected firings ``Y[u]`` (nv, nt) of a loop.

    Parameters
    ----------
    nv, nt : int
        Vanishing markings of the loop and tangible markings it leads to.
    src, j, p, dst : ndarray
        One entry per branch: from vanishing marking ``src``, immediate
        transition ``j`` fires with probability ``p`` into ``dst`` (a
        vanishing marking, or a tangible one where ``tan``).
    tan : ndarray of bool
        Whether ``dst`` is tangible.
    used : ndarray of int
        The immediate transitions whose firings ``Y`` counts, in order.

    Returns
    -------
    X : ndarray, shape (nv, nt)
    Y : list of ndarray, shape (nv, nt)

    Examples
    --------
    A retry loop: from ``try``, fail (weight 1e12) back to ``try`` or succeed
    (weight 1) into the one tangible marking. It ends there surely, after
    ``1e12`` failures on average:

    >>> import numpy as np
    >>> pf, ps = 1e12 / (1e12 + 1), 1 / (1e12 + 1)   # as the weights give them
    >>> X, (Y,) = absorb_numeric(1, 1, np.array([0, 0]), np.array([0, 1]), np.array([pf, ps]),
    ...                          np.array([0, 0]), np.array([False, True]), np.array([0]))
    >>> X.tolist(), round(float(Y[0, 0]) / 1e12, 12)
    ([[1.0]], 1.0)
    """
    vv = ~tan
    if nv > DENSE_LOOP:
        return _absorb_lu(nv, nt, src, j, p, dst, tan, used)
    A = np.zeros((nv, nv))
    np.add.at(A, (src[vv], dst[vv]), p[vv])
    B = np.zeros((nv, nt))
    np.add.at(B, (src[tan], dst[tan]), p[tan])
    solve = _eliminate(A, B.sum(axis=1))
    X = solve(B)
    X /= X.sum(axis=1, keepdims=True)
    Y = []
    for u in used:
        mu, tu = vv & (j == u), tan & (j == u)
        G = np.zeros((nv, nt))
        np.add.at(G, (src[tu], dst[tu]), p[tu])
        G += sp.csr_matrix((p[mu], (src[mu], dst[mu])), shape=(nv, nv)) @ X
        Y.append(solve(G))
    return X, Y


def _eliminate(A: np.ndarray, exits: np.ndarray) -> Any:
    """Eliminate the vanishing markings in order; return ``rhs -> (I - A)^-1 rhs`` for ``rhs >= 0``.

    ``exits[k]`` is row ``k``'s probability into the tangible markings. At
    step ``k`` the pivot ``s_k`` is the probability of leaving ``k`` for the
    markings left (the later ones and the tangible ones, their row sums as
    elimination leaves them); the rows that enter ``k`` take over its branches
    (``A[u, w] += A[u, k] A[k, w] / s_k``, including ``w = u``: a self-loop,
    never part of a pivot). Then ``(I - A)^-1 rhs`` is a unit lower
    triangular solve with the multipliers ``A[u, k] / s_k``, a division by
    the pivots and a unit upper triangular solve with the normalized rows
    ``A[k, w] / s_k``: every term of both is non-negative, so the BLAS
    triangular solves subtract nothing. Both are kept where they arise, in
    ``A`` itself (column ``k`` below and row ``k`` right of the diagonal are
    not read after step ``k``), as LU keeps its factors.
    """
    nv = A.shape[0]
    A = A.copy()
    out = exits.astype(float)
    pivots = np.empty(nv)
    for k in range(nv):
        row = A[k, k + 1 :]
        s = row.sum() + out[k]
        pivots[k] = s
        entering = np.flatnonzero(A[k + 1 :, k]) + k + 1
        if entering.size:
            m = A[entering, k] / s
            A[entering, k] = m
            A[np.ix_(entering, np.arange(k + 1, nv))] += np.outer(m, row)
            out[entering] += m * out[k]
        row /= s
    eye = np.eye(nv)
    lower_unit, upper_unit = eye - np.tril(A, -1), eye - np.triu(A, 1)

    def solve(rhs: np.ndarray) -> np.ndarray:
        z = solve_triangular(lower_unit, rhs, lower=True, unit_diagonal=True, check_finite=False)
        return solve_triangular(upper_unit, z / pivots[:, None], unit_diagonal=True, check_finite=False)

    return solve


def _absorb_lu(
    nv: int, nt: int, src: np.ndarray, j: np.ndarray, p: np.ndarray, dst: np.ndarray, tan: np.ndarray,
    used: np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """Sparse LU of ``I - A`` for loops past ``DENSE_LOOP`` markings; warns."""
    from scipy.sparse.linalg import splu

    warn_user(
        f"a loop of immediate transitions spans {nv:,} vanishing markings (> DENSE_LOOP={DENSE_LOOP:,}): "
        "it is solved by sparse LU, which loses digits where the loop repeats with a probability "
        "near 1 or leaves by a branch below about 1e-13 (docs/petri.md)",
        AccuracyWarning,
    )
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


def absorb_symbolic(
    nv: int, nt: int, src: np.ndarray, j: np.ndarray, p: np.ndarray, dst: np.ndarray, tan: np.ndarray,
    used: np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray]]:  # fmt: skip
    """As :func:`absorb_numeric`, exactly in SymPy (small loops only).

    Examples
    --------
    >>> import numpy as np, sympy
    >>> q = sympy.Symbol("q", positive=True)
    >>> X, (Y,) = absorb_symbolic(1, 1, np.array([0, 0]), np.array([0, 1]), np.array([q, 1 - q]),
    ...                           np.array([0, 0]), np.array([False, True]), np.array([0]))
    >>> X[0, 0], sympy.factor(Y[0, 0] * (1 - q))     # Y = q / (1 - q)
    (1, q)
    """
    import sympy

    def dense(mask: np.ndarray, ncols: int) -> Any:
        M = sympy.zeros(nv, ncols)
        for s, d, v in zip(src[mask], dst[mask], p[mask], strict=True):
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
