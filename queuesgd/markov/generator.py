"""Reading and checking a CTMC generator: a square matrix of finite rates, rows summing to 0, irreducible.

:func:`queuesgd.markov.steady_state` and :func:`queuesgd.markov.gth.gth_solve`
both read their generator through :func:`read_generator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from queuesgd.errors import InvalidParameterError

__all__ = ["as_generator", "check_irreducible", "read_generator", "span", "validate_generator"]


def as_generator(Q: Any, field: str = "Q") -> sp.csr_matrix:
    """``Q`` as a CSR matrix of floats: square, non-empty, finite (rates not checked yet).

    A CSR matrix of floats already in canonical form (sorted, no duplicates,
    no stored zeros) is returned as it is, not copied: every solver here only
    reads it, and a solve reads its generator two or three times.

    Examples
    --------
    >>> as_generator([[-1, 1], [2, -2]]).toarray().tolist()
    [[-1.0, 1.0], [2.0, -2.0]]
    >>> as_generator("Q", field="generator")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: generator: got 'str'; accepted: a square generator matrix ...
    """
    if _canonical_csr(Q):
        A = Q
    elif _complex(Q):
        # float() of a complex number drops its imaginary part with a warning only
        raise InvalidParameterError(field, "a matrix of complex numbers", "real rates")
    elif sp.issparse(Q):
        A = sp.csr_matrix(Q, dtype=float)
    else:
        try:
            arr = np.asarray(Q, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                field,
                type(Q).__name__,
                "a square generator matrix (NumPy array or scipy.sparse matrix) of numbers",
            ) from None
        if arr.ndim != 2:
            raise InvalidParameterError(
                field, f"an array of shape {arr.shape}", "a square 2-D generator matrix"
            )
        A = sp.csr_matrix(arr)
    if A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise InvalidParameterError(
            field, f"a matrix of shape {A.shape}", "a non-empty square generator matrix"
        )
    if A is not Q:
        A.sum_duplicates()
        A.eliminate_zeros()
    if not np.all(np.isfinite(A.data)):
        raise InvalidParameterError(field, "a matrix with NaN or infinite entries", "finite rates")
    return A


def span(A: sp.csr_matrix) -> float:
    """Largest over smallest nonzero off-diagonal rate of a generator (1 if none; ``inf`` past 1.8e308).

    ``A`` as :func:`as_generator` returns it.

    Examples
    --------
    >>> span(as_generator([[-1e-300, 1e-300], [1e300, -1e300]]))
    inf
    """
    coo = A.tocoo()
    rates = np.abs(coo.data[coo.row != coo.col])
    if not rates.size:
        return 1.0
    with np.errstate(over="ignore"):
        return float(rates.max() / rates.min())


def _complex(Q: Any) -> bool:
    """Whether ``Q`` holds complex numbers (an array, a nested list or a sparse matrix)."""
    try:
        return bool(np.iscomplexobj(Q.data if sp.issparse(Q) else Q))
    except (TypeError, ValueError):
        return False  # not an array of numbers: as_generator says so


def _canonical_csr(Q: Any) -> bool:
    """Whether ``Q`` needs no copy: a CSR matrix of float64, canonical, with no stored zero."""
    return (
        isinstance(Q, sp.csr_matrix)
        and Q.dtype == np.float64
        and Q.has_canonical_format
        and bool(np.all(Q.data != 0))
    )


def validate_generator(A: sp.csr_matrix) -> None:
    """Raise unless the off-diagonal rates are >= 0 and every row sums to 0 (to 1e-9 of its rates).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> validate_generator(sp.csr_matrix([[-1.0, 1.0], [2.0, -2.0]]))   # fine: returns None
    """
    coo = A.tocoo()
    off = coo.row != coo.col
    bad = off & (coo.data < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidParameterError(
            f"Q[{coo.row[i]}, {coo.col[i]}]", float(coo.data[i]), "an off-diagonal rate >= 0"
        )
    with np.errstate(over="ignore"):
        outflow = np.bincount(coo.row[off], coo.data[off], minlength=A.shape[0])
    beyond = np.flatnonzero(~np.isfinite(outflow))
    if beyond.size:
        raise InvalidParameterError(
            f"Q row {int(beyond[0])}",
            "rates summing past the double range",
            "a total outflow rate below 1.8e308",
        )
    rowsum = np.asarray(A.sum(axis=1)).ravel()
    scale = np.maximum(np.abs(A.diagonal()), outflow)
    tol = 1e-9 * np.maximum(scale, np.finfo(float).tiny)
    bad_rows = np.flatnonzero(np.abs(rowsum) > tol)
    if bad_rows.size:
        i = int(bad_rows[0])
        raise InvalidParameterError(
            f"Q row {i}",
            f"sum {rowsum[i]:.6g}",
            "rows that sum to 0 (diagonal = minus the total outflow rate)",
        )


def _closed_classes(A: sp.csr_matrix) -> tuple[int, np.ndarray]:
    """Number of strongly connected components and a label per state."""
    return connected_components(A, directed=True, connection="strong")


def check_irreducible(A: sp.csr_matrix) -> None:
    """Raise :class:`~queuesgd.errors.InvalidParameterError` unless the chain of ``A`` is irreducible.

    Only the pattern of positive off-diagonal entries matters. The message
    counts the closed classes and names the absorbing and transient states.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> check_irreducible(sp.csr_matrix([[-1.0, 1.0], [2.0, -2.0]]))      # fine: returns None
    >>> check_irreducible(sp.csr_matrix([[-1.0, 1.0], [0.0, 0.0]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: Q: got 'a reducible chain with 1 closed class, absorbing states ...
    """
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
        parts.append(f"{transient} transient state" + ("s" if transient > 1 else ""))
    raise InvalidParameterError(
        "Q",
        "a reducible chain with " + ", ".join(parts),
        "an irreducible generator (every state reachable from every other)",
    )


def read_generator(Q: Any) -> sp.csr_matrix:
    """``Q`` read (:func:`as_generator`), its rates checked and, past one state, its irreducibility.

    Examples
    --------
    >>> read_generator([[-1.0, 1.0], [0.0, 0.0]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: Q: got 'a reducible chain with 1 closed class, ...
    """
    A = as_generator(Q)
    validate_generator(A)
    if A.shape[0] > 1:
        check_irreducible(A)
    return A
