"""The Grassmann-Taksar-Heyman (GTH) algorithm: a steady state without subtractions.

GTH (Grassmann, Taksar and Heyman, "Regenerative analysis and steady state
distributions for Markov chains", Operations Research 33(5), 1985) is
Gaussian elimination of the states one by one, in which the eliminated
state's pivot is its total rate to the states that remain, a *sum* of
non-negative rates, instead of a diagonal entry updated by subtractions.
Every quantity it forms is a sum, product or quotient of non-negative
numbers, so each probability comes out with a small *relative* error,
however stiff or nearly decomposable the chain (O'Cinneide, "Entrywise
perturbation theory and error analysis for Markov chains", Numerische
Mathematik 65, 1993). Sparse LU and Krylov solvers only bound a normwise
backward error, which on such chains can leave probabilities of order one
wrong (``docs/markov.md``).

The elimination runs on a band: the states are renumbered by reverse
Cuthill-McKee, so that every rate joins states at most ``b`` apart, and
eliminating the states from the last to the first fills only inside that
band. A dense window of ``b + max(b + 1, 256)`` states slides down the
band, in which the states are eliminated 32 at a time: one by one among
themselves, then their updates of the ``b`` states below them as one
matrix product of non-negative numbers (BLAS, about 10x the speed of
updating state by state at ``b`` = 480..830). The cost is about ``n b^2``
multiply-adds and ``n b`` numbers of storage (at most about 75 MB within
``steady_state``'s ``GTH_WORK_LIMIT``). A path (``b = 1``, a birth-death
chain) needs no update: its ratios are taken at once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from queuesgd import _checks
from queuesgd.errors import AccuracyWarning, ConvergenceError, warn_user
from queuesgd.markov.generator import as_generator, read_generator, span

__all__ = ["GTH_SPAN", "band_ordering", "eliminate_in_band", "gth_solve", "gth_work"]

#: GTH on rates spanning more than this ratio warns (:class:`~queuesgd.errors.AccuracyWarning`): an
#: audit saw a probability lost without an error from a span of 2.3e188 on (a rate formed between
#: distant states falling below the double range), none below (``docs/markov.md``).
GTH_SPAN = 1e150

# back substitution: the window is rescaled when a value leaves [_LOW, _HIGH]
_LOW, _HIGH = 2.0**-500, 2.0**500
# the window slides by at least this many states (one CSR slice per slide)
_SLIDE = 256
# states eliminated together, their updates of the states below them applied as matrix products
_BLOCK = 32
# a state's Python step, in multiply-adds of the block update (see gth_work)
_STEP_WORK = 80_000
# a state of a path (band 1), eliminated in vectorized steps
_PATH_WORK = 3_000


def band_ordering(A: Any) -> tuple[np.ndarray, int]:
    """A reverse Cuthill-McKee renumbering of the states and the half-bandwidth it leaves.

    Parameters
    ----------
    A : array_like or scipy.sparse matrix, shape (n, n)
        The generator (only its pattern is read).

    Returns
    -------
    order : ndarray of int
        ``order[new] = old``.
    b : int
        The largest ``|i - j|`` over the nonzero off-diagonal rates, renumbered.

    Examples
    --------
    A ring of five states is renumbered into a band of half-width 2:

    >>> import scipy.sparse as sp
    >>> ring = sp.csr_matrix(([1.0] * 5, ([0, 1, 2, 3, 4], [1, 2, 3, 4, 0])), shape=(5, 5))
    >>> band_ordering(ring)[1]
    2
    """
    A = as_generator(A, "A")
    pattern = (abs(A) + abs(A).T).tocsr()
    order = np.asarray(reverse_cuthill_mckee(pattern, symmetric_mode=True), dtype=np.int64)
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    coo = A.tocoo()
    b = int(np.abs(inv[coo.row] - inv[coo.col]).max()) if coo.nnz else 0
    return order, b


def gth_work(n: int, b: int) -> float:
    """Cost of a banded GTH elimination of ``n`` states, half-bandwidth ``b``, in multiply-adds.

    ``n (b^2 + 80000)``: each state's elimination updates a ``b x b`` block
    (applied 32 states at a time, as matrix products running at about 6e9
    multiply-adds per second on two idle laptop cores), and its Python step
    costs about as much as 80,000 multiply-adds (about 12.5 us). A path
    (``b <= 1``) is eliminated in vectorized steps: ``3000 n`` (about
    0.45 us per state, with its ordering).

    Examples
    --------
    >>> gth_work(1_000, 1), gth_work(10_000, 100)
    (3000000.0, 900000000.0)
    """
    n = _checks.integer("n", n, minimum=1)
    b = _checks.integer("b", b, minimum=0)
    if b <= 1:
        return float(n) * _PATH_WORK
    return float(n) * (b**2 + _STEP_WORK)


def _window(A: sp.csr_matrix, lo: int, hi: int) -> np.ndarray:
    """The rates among states ``lo .. hi - 1`` as a dense block, zero diagonal."""
    W = A[lo:hi, lo:hi].toarray()
    np.fill_diagonal(W, 0.0)
    return W


def _eliminate(A: sp.csr_matrix, b: int) -> np.ndarray | None:
    """Eliminate states ``n - 1 .. 1``; row ``k`` of the result holds ``P[k - b + t, k]``, t < b.

    ``P[i, k]`` is the rate from ``i`` to ``k`` divided by ``k``'s rate to the
    states below it, both as they stand when ``k`` is eliminated. None where
    that rate is 0 in floating point.
    """
    n = A.shape[0]
    if b == 1:
        # a path: eliminating k + 1 changes only k's self-loop, so P[k - 1, k] / P[k, k - 1] as given
        up, down = A.diagonal(1), A.diagonal(-1)
        if not np.all(down > 0):
            return None
        cols = np.zeros((n, 1))
        cols[1:, 0] = up / down
        return cols
    m = b + max(b + 1, _SLIDE)  # window: states lo .. lo + m - 1; each slide eliminates m - b
    cols = np.zeros((n, b))
    hi = n  # one past the window's last state
    lo = max(0, hi - m)
    W = _window(A, lo, hi)
    k = n - 1
    while k >= 1:
        stop = lo + b if lo > 0 else 1  # eliminate k .. stop, keeping k - b inside
        while k >= stop:
            first = max(stop, k - _BLOCK + 1)
            if not _eliminate_block(W, cols, first - lo, k + 1 - lo, b, first):
                return None
            k = first - 1
        if k < 1:
            break
        # slide: keep the b updated states lo .. lo + b - 1 and read the ones below from A
        keep = W[: k + 1 - lo, : k + 1 - lo].copy()
        hi = k + 1
        lo = max(0, hi - m)
        W = _window(A, lo, hi)
        W[hi - lo - keep.shape[0] :, hi - lo - keep.shape[0] :] = keep
    return cols


def _eliminate_block(W: np.ndarray, cols: np.ndarray, rb: int, re: int, b: int, first: int) -> bool:
    """Eliminate the window's rows ``re - 1 .. rb`` (states ``first ..``), last first; False on a zero pivot.

    The block's states are eliminated one by one among themselves, each
    pivot being the state's rate to the states below it: to the block's
    states below, and to the ``b`` states below the block (the rest ``R``),
    whose row sums the elimination carries along as one more column. Each
    state's rates to and from the rest as it leaves them are formed as it
    is eliminated, from those of the states eliminated before it (``X``,
    ``Y``: rates times probabilities, as the state-by-state elimination
    associates them, so that no intermediate product leaves the
    floating-point range where the result does not), and ``W[R, R]`` gains
    ``X diag(1/s) Y`` at once: a matrix product of non-negative numbers, so
    no subtraction enters (equal to the state-by-state elimination to
    round-off), at the speed of BLAS.
    """
    t = re - rb
    rr = max(rb - b, 0)  # the rest: rows rr .. rb - 1
    WBR = W[rb:re, rr:rb]
    WRB = W[rr:rb, rb:re].T
    Wa = np.empty((t, t + 1))  # column 0: rate to the rest; column 1 + u: to the block's state u
    Wa[:, 0] = WBR.sum(axis=1)
    Wa[:, 1:] = W[rb:re, rb:re]
    s = np.empty(t)
    XT = np.empty((t, rb - rr))  # XT[u]: the rest's rates to u when u is eliminated
    Y = np.empty((t, rb - rr))  # Y[u]: u's rates to the rest when it is eliminated
    add = np.add.reduce
    for u in range(t - 1, -1, -1):
        row = Wa[u, : u + 1]  # to the rest and to the block's states below u
        su = add(row)
        if not su > 0.0:
            return False
        s[u] = su
        Wa[:u, : u + 1] += (Wa[:u, u + 1] / su)[:, None] * row
        later = s[u + 1 :]  # the states eliminated before u
        XT[u] = WRB[u] + (Wa[u + 1 :, u + 1] / later) @ XT[u + 1 :]
        Y[u] = WBR[u] + (Wa[u, u + 2 :] / later) @ Y[u + 1 :]
    Z = np.zeros((b + t, t))  # column u: P[i, first + u] for the states i = first + u - b ..
    Z[b:] = np.triu(Wa[:, 1:], 1) / s
    if rb > rr:
        X = XT.T / s
        Z[b - (rb - rr) : b] = X
        rest = W[rr:rb, rr:rb]
        rest += X @ Y
        np.fill_diagonal(rest, 0.0)  # self-loops: not rates
    u = np.arange(t)[:, None]
    cols[first : first + t] = Z[u + np.arange(b), u]
    return True


def _back_substitute(cols: np.ndarray, b: int) -> np.ndarray:
    """``x_0 = 1``, ``x_k = sum_i x_i P[i, k]``, each value with its own power of two.

    The probabilities can span beyond the floating-point range (two peaks with
    a valley of 1e-350 between them): each ``x_i`` is stored as a double times
    ``2^e_i``. The ``b`` values in the window share one exponent; when a new
    value leaves ``[2^-500, 2^500]`` the window is rescaled, and the values
    before it keep theirs. Only at the end is everything put on the largest
    exponent, where what lies below 1e-308 of the largest flushes to 0.
    """
    n = cols.shape[0]
    if b == 1:
        return _products(cols[:, 0])
    x = np.zeros(n + b)  # b leading zeros stand for the states before 0
    e = np.zeros(n + b, dtype=np.int64)
    x[b] = 1.0
    shared = 0  # the window's exponent
    for k in range(1, n):
        v = float(x[k : k + b] @ cols[k])  # 0 where x_k is below about 1e-308 of the window's largest
        x[k + b] = v
        e[k + b] = shared
        if not _LOW < v < _HIGH:
            window = slice(k + 1, k + b + 1)
            shift = math.frexp(float(x[window].max()))[1]
            x[window] = np.ldexp(x[window], -shift)
            shared += shift
            e[window] = shared
    x, e = x[b:], e[b:]
    mantissa, exponent = np.frexp(x)
    top = int((e + exponent).max())
    return np.ldexp(mantissa, np.clip(e + exponent - top, -2_000, 0).astype(np.int32))


def _products(ratios: np.ndarray) -> np.ndarray:
    """``x_0 = 1``, ``x_k = x_(k-1) ratios[k]`` (a path), as mantissas and powers of two, then scaled.

    The mantissas (in ``[1/2, 1)``) are multiplied in chunks of 512, so no
    partial product underflows; the exponents add up exactly.
    """
    n = ratios.size
    mant, expo = np.frexp(ratios[1:])
    M = np.ones(n)
    E = np.zeros(n, dtype=np.int64)
    carry_m, carry_e = 1.0, 0
    for start in range(0, n - 1, 512):
        stop = min(start + 512, n - 1)
        cm = np.cumprod(np.concatenate(([carry_m], mant[start:stop])))[1:]
        ce = carry_e + np.cumsum(expo[start:stop])
        M[start + 1 : stop + 1], E[start + 1 : stop + 1] = cm, ce
        carry_m, shift = math.frexp(float(cm[-1]))
        carry_e = int(ce[-1]) + shift
    mantissa, exponent = np.frexp(M)
    total = E + exponent
    return np.ldexp(mantissa, np.clip(total - total.max(), -2_000, 0).astype(np.int32))


def gth_solve(Q: Any) -> np.ndarray:
    """Stationary distribution of an irreducible generator by banded GTH elimination.

    Parameters
    ----------
    Q : array_like or scipy.sparse matrix, shape (n, n)
        An irreducible generator, checked as by :func:`queuesgd.markov.steady_state`
        (``InvalidParameterError`` names what is wrong); its diagonal is not
        read beyond that check.

    Returns
    -------
    ndarray, shape (n,)
        Probabilities summing to 1, each with a small relative error.

    Raises
    ------
    ConvergenceError
        If, eliminating in both directions, a state's rate to the states
        left underflows to 0 or a rate divided by it overflows: rates or
        probabilities spanning beyond the floating-point range.

    Examples
    --------
    A birth-death chain whose rates span 16 orders of magnitude: ``pi_1 /
    pi_0 = 1e-8 / 1e8`` exactly, where LU and Krylov solvers lose the small
    probability to round-off.

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_matrix([[-1e-8, 1e-8], [1e8, -1e8]])
    >>> gth_solve(Q).tolist()
    [1.0, 1e-16]
    """
    A = read_generator(Q)
    if A.shape[0] == 1:
        return np.ones(1)
    return eliminate_in_band(A, *band_ordering(A))


def eliminate_in_band(A: sp.csr_matrix, order: np.ndarray, b: int) -> np.ndarray:
    """:func:`gth_solve`'s elimination of a generator already read, in its :func:`band_ordering`.

    For a solver that has read ``A`` (:func:`~queuesgd.markov.generator.read_generator`,
    at least two states) and ordered it to decide on GTH, so that neither is
    done twice (they were half the time of a 10^6-state birth-death chain).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csr_matrix([[-1.0, 1.0], [3.0, -3.0]])
    >>> eliminate_in_band(A, *band_ordering(A)).tolist()
    [0.75, 0.25]
    """
    n = A.shape[0]
    b = max(b, 1)
    ratio = span(A)
    if ratio > GTH_SPAN:
        warn_user(
            f"gth: the rates span {ratio:.3g} > GTH_SPAN={GTH_SPAN:g}: where a rate formed between distant "
            "states falls below the double range a probability is lost without an error (seen from a span "
            "of 2.3e188 on; docs/markov.md)",
            AccuracyWarning,
        )
    # A state's rate to the states below it, as elimination leaves it, can underflow (or a rate
    # divided by it overflow) where they are reached from it with a probability under about
    # 1e-308 (a strong drift away from them): eliminating in the opposite direction keeps the
    # probable end for last.
    for sequence in (order, order[::-1]):
        P = A[sequence][:, sequence].tocsr()
        with np.errstate(over="raise", invalid="raise"):
            try:
                cols = _eliminate(P, b)
                x = None if cols is None else _back_substitute(cols, b)
            except FloatingPointError:
                x = None
        if x is not None:
            pi = np.empty(n)
            pi[sequence] = x / x.sum()
            return pi
    raise ConvergenceError(
        "gth: eliminating the states in either direction, a state's rate to the states left "
        "underflows to 0 or a rate divided by it overflows: the chain's rates or stationary "
        "probabilities span beyond the floating-point range (no double-precision method resolves it)"
    )
