"""Steady state of a continuous-time Markov chain (CTMC), numerically.

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

import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from queuesgd import _checks
from queuesgd.errors import AccuracyWarning, ConvergenceError, warn_user
from queuesgd.markov.generator import as_generator, check_irreducible, read_generator, span
from queuesgd.markov.gth import band_ordering, eliminate_in_band, gth_work

__all__ = [
    "AUTO_DIRECT_LIMIT",
    "GTH_FALLBACK_LIMIT",
    "GTH_WORK_LIMIT",
    "METHODS",
    "STIFF_SPAN",
    "check_irreducible",
    "choose_method",
    "rate_span",
    "solve_auto",
    "steady_state",
]

METHODS = ("auto", "direct", "iterative", "gth")

#: Past GTH's budget, ``method="auto"`` solves directly up to this many states, iteratively above.
AUTO_DIRECT_LIMIT = 200_000

#: LU or Krylov on a chain whose off-diagonal rates span more than this ratio
#: warns (:class:`~queuesgd.errors.AccuracyWarning`): past it, random chains of
#: 3 to 30 states came out up to 4e-6 (LU) and 1.4e-3 (Krylov) off, and up to 1
#: past 1e10 (``benchmarks/bench_gth.py``; up to 2.6e-8 and 1.9e-6 within it).
STIFF_SPAN = 1e6

#: ``method="auto"`` solves a chain by GTH up to this many multiply-adds
#: (:func:`queuesgd.markov.gth.gth_work`; about 0.8 s on a laptop core).
GTH_WORK_LIMIT = 5e9

#: Where LU or Krylov raise :class:`~queuesgd.errors.ConvergenceError` (a
#: negative probability, no convergence), ``method="auto"`` solves by GTH after
#: all, up to this many multiply-adds (about 15 s, and at most about 1.4 GB for
#: the eliminated band's ``n b`` numbers, at ``b`` = 283 and 625,000 states).
GTH_FALLBACK_LIMIT = 1e11


def _reduced_system(A: sp.csr_matrix) -> tuple[sp.csc_matrix, np.ndarray]:
    """``B x = b`` from ``Q^T pi = 0`` with ``pi_0 = 1`` and balance equation 0 dropped."""
    At = A.T.tocsc()
    B = At[1:, 1:].tocsc()
    b = -At[1:, 0].toarray().ravel()
    return B, b


def _finish(x: np.ndarray, tol: float, method: str) -> np.ndarray:
    pi = np.concatenate(([1.0], x))
    # Round-off can leave tiny negatives on states of negligible probability.
    if pi.min() < -max(1e-8, 10 * tol) * np.abs(pi).max():
        other = "a smaller tol or method='direct'" if method == "iterative" else "method='iterative'"
        raise ConvergenceError(
            f"steady_state(method={method!r}): solution has a negative probability ({pi.min():.3g}); "
            f"the generator is badly conditioned (rates over many orders of magnitude), try {other}"
        )
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def _direct(A: sp.csr_matrix, tol: float) -> np.ndarray:
    B, b = _reduced_system(A)
    with warnings.catch_warnings():
        # a matrix singular to working precision: SciPy warns and returns NaN, reported below
        warnings.simplefilter("ignore", spla.MatrixRankWarning)
        x = spla.spsolve(B, b)
    if not np.all(np.isfinite(x)):
        raise ConvergenceError(
            "steady_state(method='direct'): the sparse LU solve produced NaN/inf (the reduced "
            "system is singular to working precision); try method='gth'"
        )
    return _finish(np.atleast_1d(x), tol, "direct")


def _backward_error(B: sp.csc_matrix, x: np.ndarray, b: np.ndarray, norm_b_mat: float) -> float:
    """Normwise backward error ``|Bx - b| / (|B| |x| + |b|)`` (infinity norms)."""
    if not np.all(np.isfinite(x)):
        return np.inf
    r = B @ x - b
    return float(np.abs(r).max() / (norm_b_mat * np.abs(x).max() + np.abs(b).max()))


def _triangular_solver(B: sp.spmatrix) -> Any:
    """``v -> (D + L)^-1 v`` for the lower triangle of ``B``: the Gauss-Seidel preconditioner.

    SuperLU with the natural ordering and no pivoting factors a triangular
    matrix without fill-in (``L`` is its strictly lower part scaled, ``U`` its
    diagonal), so each application is one compiled forward substitution:
    about 8 times faster than ``spsolve_triangular`` (measured at 142,506
    states) and as fast as a few sparse matrix-vector products.
    """
    lower = sp.tril(B, format="csc")
    lu = spla.splu(lower, permc_spec="NATURAL", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    return lu.solve


def _ilu_solver(B: sp.spmatrix) -> Any:
    try:
        return spla.spilu(B.tocsc(), drop_tol=1e-4, fill_factor=10).solve
    except RuntimeError:  # singular incomplete factor: go on without a preconditioner
        return None


def _krylov(
    B: sp.csr_matrix, b: np.ndarray, precondition: Any, tol: float, rounds: int
) -> tuple[np.ndarray, float]:
    """Rounds of BiCGSTAB then restarted GMRES on ``B x = b``; the best iterate and its backward error."""
    n = B.shape[0]
    M = spla.LinearOperator((n, n), precondition) if precondition is not None else None
    norm_b_mat = float(spla.norm(B, np.inf))
    norm_b_mat_2 = float(spla.norm(B, 1))
    # Stop on the backward error, not on |r| / |b|: with pi_0 = 1 fixed on an
    # improbable state, x spans many orders of magnitude and |r| / |b| stalls
    # far above round-off although the solution is accurate. atol is refreshed
    # from the current |x| each round of restarted GMRES.
    # A backward error of tol bounds the forward error only by cond(B) x tol, and these systems are
    # ill-conditioned (probabilities over many orders of magnitude): aim two digits lower, and accept
    # tol only when the rounds run out (a 16,384-state product-form chain came out 40% over a 1e-12
    # absolute error at tol, well inside it at tol / 100, for one more restart).
    target = tol / 100
    x = np.zeros(n)
    eta = np.inf
    restart = min(n, 50)
    for _ in range(rounds):
        for solver in ("bicgstab", "gmres"):
            atol = target * (norm_b_mat_2 * np.linalg.norm(x) + np.linalg.norm(b))
            # a breakdown (division by zero inside SciPy) shows as a bad iterate, judged below
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                if solver == "bicgstab":
                    y, _info = spla.bicgstab(B, b, x0=x, rtol=target, atol=atol, maxiter=500, M=M)
                else:
                    y, _info = spla.gmres(
                        B, b, x0=x, rtol=target, atol=atol, restart=restart, maxiter=10, M=M
                    )
            eta_y = _backward_error(B, y, b, norm_b_mat)
            if eta_y < eta:  # BiCGSTAB can break down: keep the best iterate
                x, eta = y, eta_y
            if eta <= target:
                return x, eta
    return x, eta


def _iterative(A: sp.csr_matrix, tol: float, rounds: int = 10) -> np.ndarray:
    """Krylov solve of the reduced system, Gauss-Seidel preconditioned, then ILU preconditioned.

    The Gauss-Seidel preconditioner (the lower triangle of ``B``) has no
    fill-in, so it suits the high-dimensional lattices where LU fills in; on a
    1.2-million-state, 5-dimensional chain it replaced plain Gauss-Seidel
    sweeps (thousands of them, slowed by the smooth error modes that sweeps
    damp slowly) with about a hundred BiCGSTAB steps. The incomplete LU is
    the fallback (it can be slow to build on such lattices).
    """
    B, b = _reduced_system(A)
    B = B.tocsr()
    best, eta = None, np.inf
    for make in (_triangular_solver, _ilu_solver):
        x, eta_x = _krylov(B, b, make(B), tol, rounds)
        if eta_x < eta:
            best, eta = x, eta_x
        if eta <= tol / 100:
            break
    if eta <= tol:
        return _finish(best, tol, "iterative")
    raise ConvergenceError(
        f"steady_state(method='iterative'): preconditioned BiCGSTAB/GMRES did not converge "
        f"in {rounds} rounds (backward error {eta:.3g} > tol={tol:g}); "
        "try method='direct' or a larger tol"
    )


def rate_span(Q: Any) -> float:
    """Largest over smallest nonzero off-diagonal rate of a generator (1 if it has none).

    Examples
    --------
    >>> rate_span([[-1e-3, 1e-3], [1e4, -1e4]])
    10000000.0
    """
    return span(as_generator(Q))


def choose_method(n: int, dimension: int | None = None, *, generator: Any = None) -> str:
    """The solution method ``"auto"`` stands for, given the chain's size, shape and rates.

    Given its ``generator``, a chain is solved by GTH (:mod:`queuesgd.markov.gth`,
    accurate entry by entry) whenever its banded elimination costs at most
    ``GTH_WORK_LIMIT`` multiply-adds (:func:`~queuesgd.markov.gth.gth_work`):
    LU and Krylov solutions were measured far off on nearly decomposable
    chains whatever their rates (a 31-state birth-death chain with rates 1
    and 10 and two peaks: 6.6e-3; ``docs/markov.md``). Past that budget, or
    without the generator: sparse LU for small chains (<= 5,000 states) and for chains whose states
    lie on a lattice of dimension <= 2 (up to ``AUTO_DIRECT_LIMIT`` states);
    Gauss-Seidel-preconditioned Krylov (``"iterative"``) otherwise. LU
    fill-in grows quickly with the dimension: a 53,130-state chain on a
    5-dimensional lattice did not factor in 5 minutes, while the iterative
    solve took 0.3 s; two-dimensional chains
    factor fast even at 10^6 states. ``dimension=None`` (unknown) keeps LU up
    to ``AUTO_DIRECT_LIMIT``.

    Examples
    --------
    >>> choose_method(1_000), choose_method(50_000, dimension=5), choose_method(50_000, dimension=2)
    ('direct', 'iterative', 'direct')
    >>> choose_method(2, generator=[[-1e-3, 1e-3], [1e4, -1e4]])
    'gth'
    """
    if generator is not None and _within_budget(_band(as_generator(generator, "generator"))):
        return "gth"
    if n <= 5_000:
        return "direct"
    if dimension is None or dimension <= 2:
        return "direct" if n <= AUTO_DIRECT_LIMIT else "iterative"
    return "iterative"


def _band(A: sp.csr_matrix) -> tuple[np.ndarray, int] | None:
    """``A``'s band ordering, or None where GTH could not fit ``GTH_WORK_LIMIT`` with any band.

    The least work a band could allow is checked before paying for the
    ordering (0.8 s at 10^6 states).
    """
    size = A.shape[0]
    least = gth_work(size, 1 if A.nnz - np.count_nonzero(A.diagonal()) <= 2 * size else 2)
    return None if least > GTH_WORK_LIMIT else band_ordering(A)


def _within_budget(band: tuple[np.ndarray, int] | None) -> bool:
    """Whether GTH on ``band`` (:func:`_band`'s ordering and half-width) costs at most ``GTH_WORK_LIMIT``."""
    return band is not None and gth_work(band[0].size, band[1]) <= GTH_WORK_LIMIT


def steady_state(Q: Any, *, method: str = "auto", tol: float = 1e-12) -> np.ndarray:
    """Stationary distribution ``pi`` of an irreducible CTMC: ``pi Q = 0``, ``sum(pi) = 1``.

    Parameters
    ----------
    Q : array_like or scipy.sparse matrix, shape (n, n)
        Generator: off-diagonal rates >= 0, rows summing to 0.
    method : {"auto", "direct", "iterative", "gth"}
        ``"direct"``: sparse LU (SuperLU) of the reduced system obtained by
        fixing ``pi_0 = 1`` and dropping one balance equation. ``"iterative"``:
        BiCGSTAB then restarted GMRES on the same reduced system,
        preconditioned by its lower triangle (Gauss-Seidel: no fill-in), and
        by an incomplete LU if that does not converge. ``"gth"``: banded
        Grassmann-Taksar-Heyman elimination (:mod:`queuesgd.markov.gth`),
        with no subtractions, so every probability has a small *relative*
        error however stiff the chain; about ``n b^2`` work for a band of
        half-width ``b``. ``"auto"``: :func:`choose_method` -- GTH within
        ``GTH_WORK_LIMIT``, else direct up to ``AUTO_DIRECT_LIMIT``
        (200,000) states, iterative above. Chains on high-dimensional
        lattices (e.g. multi-class networks) fill in under LU; for those
        ``"iterative"`` can be much faster at 10^4 states.
    tol : float
        Iterative solvers aim at a normwise backward error of the reduced
        system, ``|Bx - b| / (|B| |x| + |b|)``, of ``tol / 100`` and accept
        at most ``tol`` when their rounds run out (a backward error bounds
        the forward error only by the condition number times it).

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

    Warns
    -----
    AccuracyWarning
        If ``"direct"`` or ``"iterative"`` (chosen, or ``auto``'s past
        ``GTH_WORK_LIMIT``) solves a chain whose rates span more than
        ``STIFF_SPAN``: there their answers were measured wrong by far more
        than ``tol`` (``docs/markov.md``). Within it they can still be off on
        nearly decomposable chains; only GTH is accurate entry by entry.
        GTH itself warns where the rates span more than
        :data:`~queuesgd.markov.gth.GTH_SPAN` (1e150), past which a
        probability was seen lost without an error.

    Examples
    --------
    Two states, rate 1 from 0 to 1 and rate 3 back:

    >>> steady_state([[-1.0, 1.0], [3.0, -3.0]]).tolist()
    [0.75, 0.25]

    A stiff chain (rates from 1e-8 to 1e8), exact to round-off (GTH):

    >>> steady_state([[-1e-8, 1e-8], [1e8, -1e8]]).tolist()
    [1.0, 1e-16]
    """
    method = _checks.choice("method", method, METHODS)
    tol = _checks.positive("tol", tol)
    A = read_generator(Q)
    n = A.shape[0]
    if n == 1:
        return np.ones(1)
    if method == "auto":
        return _auto(A, None, tol)[0]
    return _solve(A, method, tol)


def _solve(A: sp.csr_matrix, method: str, tol: float) -> np.ndarray:
    """A checked generator of two states or more, by ``method`` (not auto)."""
    if method == "gth":
        return eliminate_in_band(A, *band_ordering(A))
    ratio = span(A)
    if ratio > STIFF_SPAN:
        warn_user(
            f"steady_state(method={method!r}): the rates span {ratio:.3g} > STIFF_SPAN={STIFF_SPAN:g}; "
            "on such chains LU and Krylov solutions were measured up to 1e-3 off (up to 0.99 past 1e10) "
            "with a backward error at round-off; method='gth' is accurate there (docs/markov.md)",
            AccuracyWarning,
        )
    if method == "direct":
        return _direct(A, tol)
    return _iterative(A, tol)


def _auto(A: sp.csr_matrix, dimension: int | None, tol: float) -> tuple[np.ndarray, str]:
    """A checked generator of two states or more, by ``choose_method``'s method, GTH where that fails."""
    n = A.shape[0]
    band = _band(A)
    if _within_budget(band):
        return eliminate_in_band(A, *band), "gth"
    method = choose_method(n, dimension)
    try:
        return _solve(A, method, tol), method
    except ConvergenceError as exc:
        order, b = band or band_ordering(A)  # ordered once: above, unless no band could fit the budget
        work = gth_work(n, b)
        if work > GTH_FALLBACK_LIMIT:
            raise ConvergenceError(
                f"{exc}; GTH, which would not fail, costs {work:.3g} multiply-adds here "
                f"> GTH_FALLBACK_LIMIT={GTH_FALLBACK_LIMIT:g} (method='gth' runs it anyway)"
            ) from None
        return eliminate_in_band(A, order, b), "gth"


def solve_auto(Q: Any, dimension: int | None = None) -> tuple[np.ndarray, str]:
    """``steady_state(Q, method="auto")``, and the method that gave the answer.

    The method is :func:`choose_method`'s for the chain's size, lattice
    ``dimension`` and rates. Where it is LU or Krylov and they raise
    :class:`~queuesgd.errors.ConvergenceError` (on stiff chains: a negative
    probability, or no convergence), GTH solves the chain after all while it
    costs at most ``GTH_FALLBACK_LIMIT``: a 12-customer network of six
    stations with rates over many orders of magnitude raised in the Krylov
    solver, where GTH gave exact MVA's throughput in 3 s.

    Examples
    --------
    >>> pi, ran = solve_auto([[-1.0, 1.0], [3.0, -3.0]])
    >>> pi.tolist(), ran
    ([0.75, 0.25], 'gth')
    """
    A = read_generator(Q)
    n = A.shape[0]
    if n == 1:
        return np.ones(1), "gth"
    return _auto(A, dimension, 1e-12)
