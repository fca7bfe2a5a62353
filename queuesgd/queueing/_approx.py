"""Approximate MVA kernels: Bard-Schweitzer and the Chandy-Neuse Linearizer.

Both are fixed points of the MVA equations in which the queue length seen by
an arriving customer of class ``s``, ``Q_kc(n - e_s)``, is estimated from the
queue lengths at ``n``:

    Q_kc(n - e_s) ~= (n - e_s)_c * (Q_kc(n) / n_c + F_kcs)

* Bard-Schweitzer (Schweitzer 1979; Bard 1979) takes ``F = 0``: the customer
  mix stays the same when one customer leaves, so ``Q_ks(n - e_s) ~=
  Q_ks(n) (n_s - 1)/n_s`` and the other classes are unchanged.
* Linearizer (Chandy and Neuse, CACM 25(2) 1982; Lazowska et al., *Quantitative
  System Performance*, ch. 9; Bolch et al., *Queueing Networks and Markov
  Chains*, sec. 9.1.2) estimates the fraction differences ``F_kcs = Q_kc(N -
  e_s)/(N - e_s)_c - Q_kc(N)/N_c`` by solving the same "core" fixed point at
  ``N`` and at every ``N - e_s``, assuming ``F`` is the same at ``N - e_s``
  as at ``N``. Three refresh passes then a final core solve at ``N``, as in
  Chandy and Neuse.

Multi-server queues use Seidmann's approximation (Seidmann, Schweitzer and
Shalev-Oren 1987): a ``c``-server queue of demand ``D`` is replaced by a
single-server queue of demand ``D/c`` in series with a delay of demand
``D (c-1)/c``. The residence time and queue length reported for the station
are the sums over both parts. It is exact at population 1 and for ``c = 1``,
and tends to be pessimistic in between.

Each core iteration is one NumPy evaluation over stations x classes x the
populations solved together (``N`` and all ``N - e_s`` for the Linearizer).

Kernels take and return arrays: ``D`` (K, C) demands, ``is_delay`` (K,),
``servers`` (K,), ``N`` (C,) population; they return ``X`` (C,), ``R`` (K, C)
residence times and ``Q`` (K, C) queue lengths.
"""

from __future__ import annotations

import numpy as np

from queuesgd.errors import ConvergenceError

__all__ = ["schweitzer", "linearizer", "seidmann_split"]

#: Refresh passes of the Linearizer's fraction differences (Chandy and Neuse 1982).
LINEARIZER_PASSES = 3


def seidmann_split(D: np.ndarray, is_delay: np.ndarray, servers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split demands into a queueing part and a fixed (delay-like) part.

    Returns ``(Dq, Dfix)``, both (K, C): a delay has ``Dq = 0, Dfix = D``; a
    ``c``-server queue has ``Dq = D/c`` and ``Dfix = D (c-1)/c`` (Seidmann's
    approximation; ``Dfix = 0`` when ``c = 1``).

    Examples
    --------
    >>> Dq, Dfix = seidmann_split(np.array([[4.0], [2.0]]), np.array([True, False]), np.array([np.inf, 4.0]))
    >>> Dq.ravel().tolist(), Dfix.ravel().tolist()
    ([0.0, 0.5], [4.0, 1.5])
    """
    D = np.asarray(D, dtype=float)
    delay = np.asarray(is_delay, dtype=bool)[:, None]
    c = np.where(delay[:, 0], 1.0, np.asarray(servers, dtype=float))[:, None]
    Dq = np.where(delay, 0.0, D / c)
    Dfix = np.where(delay, D, D - D / c)
    return Dq, Dfix


def _fraction(Q: np.ndarray, pops: np.ndarray) -> np.ndarray:
    """``Q_kc / n_c`` with 0 where ``n_c = 0``; Q (P, K, C), pops (P, C)."""
    n = pops[:, None, :]
    return np.divide(Q, n, out=np.zeros_like(Q), where=n > 0)


def _core(
    Dq: np.ndarray,
    Dfix: np.ndarray,
    pops: np.ndarray,
    F: np.ndarray,
    Qq: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    method: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Solve the approximate MVA fixed point at several populations at once.

    Parameters
    ----------
    Dq, Dfix : (K, C)
        Queueing and fixed parts of the demands (see :func:`seidmann_split`).
    pops : (P, C) float
        Populations solved together.
    F : (K, C, C)
        Fraction differences ``F[k, c, s]`` (zero for Bard-Schweitzer).
    Qq : (P, K, C)
        Initial queue lengths of the queueing parts.

    Returns
    -------
    X (P, C), R (P, K, C) residence times (both parts), Qq (P, K, C) queue
    lengths of the queueing parts only.
    """
    C = pops.shape[1]
    # m[p, s, c] = (n_p - e_s)_c, clipped at 0: a class with no customers
    # left contributes no queue (this also covers classes with n_c = 0).
    m = np.clip(pops[:, None, :] - np.eye(C)[None, :, :], 0.0, None)
    scale = np.maximum(pops, 1.0)[:, None, :]
    delta = np.inf
    for _ in range(max_iter):
        frac = _fraction(Qq, pops)  # (P, K, C)
        # Arrival-instant queue seen by class s at station k:
        # A[p, k, s] = sum_c m[p, s, c] * (frac[p, k, c] + F[k, c, s]).
        A = np.einsum("psc,pkc->pks", m, frac) + np.einsum("psc,kcs->pks", m, F)
        Rq = Dq[None] * (1.0 + A)
        R = Rq + Dfix[None]
        cycle = R.sum(axis=1)  # (P, C)
        X = np.divide(pops, cycle, out=np.zeros_like(pops), where=cycle > 0)
        Q_new = X[:, None, :] * Rq
        delta = float(np.max(np.abs(Q_new - Qq) / scale)) if Qq.size else 0.0
        Qq = Q_new
        if delta <= tol:
            return X, R, Qq
    raise ConvergenceError(
        f"{method}: no convergence in max_iter={max_iter} iterations "
        f"(last change in queue length per customer {delta:.3g} > tol={tol:g}); "
        "raise max_iter or tol"
    )


def _initial(Dq: np.ndarray, Dfix: np.ndarray, pops: np.ndarray) -> np.ndarray:
    """Spread each class's customers over the stations in proportion to demand."""
    D = Dq + Dfix
    share = np.divide(D, D.sum(axis=0), out=np.zeros_like(D), where=D.sum(axis=0) > 0)
    # Only the queueing part of each station holds customers in Qq.
    qshare = np.divide(Dq, D, out=np.zeros_like(D), where=D > 0) * share
    return pops[:, None, :] * qshare[None]


def _report(X: np.ndarray, R: np.ndarray, Dfix: np.ndarray, Qq: np.ndarray):
    """Station totals: queue length = queueing part + X * fixed part."""
    Q = Qq + X[:, None, :] * Dfix[None]
    return X, R, Q


def _prepare(D, is_delay, servers, N):
    D = np.asarray(D, dtype=float)
    Dq, Dfix = seidmann_split(D, is_delay, servers)
    N = np.asarray(N, dtype=float).reshape(-1)
    return Dq, Dfix, N


def schweitzer(
    D: np.ndarray,
    is_delay: np.ndarray,
    servers: np.ndarray,
    N: np.ndarray,
    *,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bard-Schweitzer approximate MVA (multi-class, Seidmann for multi-server).

    Fixed point of ``R_ks = D_ks (1 + sum_c Q_kc - Q_ks / N_s)`` at queues,
    ``R_ks = D_ks`` at delays, ``X_s = N_s / sum_k R_ks``, ``Q_ks = X_s R_ks``.
    Exact at ``N = 1`` for one class. Converged when the largest change of a
    queue length divided by its class population is at most ``tol``.

    Returns ``X`` (C,), ``R`` (K, C), ``Q`` (K, C).

    Examples
    --------
    Machine repairman (think 2 s, one server of 1 s) with 2 customers; exact
    MVA gives 0.6, Bard-Schweitzer ``2 / (2 + sqrt(2))``:

    >>> X, R, Q = schweitzer(np.array([[2.0], [1.0]]), np.array([True, False]), np.array([np.inf, 1.0]), [2])
    >>> round(float(X[0]), 4)
    0.5858
    """
    Dq, Dfix, N = _prepare(D, is_delay, servers, N)
    pops = N[None, :]
    F = np.zeros(Dq.shape + (len(N),))
    X, R, Qq = _core(
        Dq, Dfix, pops, F, _initial(Dq, Dfix, pops), tol=tol, max_iter=max_iter, method="schweitzer"
    )
    X, R, Q = _report(X, R, Dfix, Qq)
    return X[0], R[0], Q[0]


def linearizer(
    D: np.ndarray,
    is_delay: np.ndarray,
    servers: np.ndarray,
    N: np.ndarray,
    *,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chandy-Neuse Linearizer (multi-class, Seidmann for multi-server).

    Solves the core fixed point at ``N`` and at every ``N - e_s`` together,
    refreshes the fraction differences ``F_kcs = Q_kc(N - e_s)/(N - e_s)_c -
    Q_kc(N)/N_c`` (three passes, starting from ``F = 0``, i.e. from
    Bard-Schweitzer), then solves the core at ``N`` once more. ``max_iter``
    bounds each core solve; ``tol`` as in :func:`schweitzer`.

    Returns ``X`` (C,), ``R`` (K, C), ``Q`` (K, C).

    Examples
    --------
    >>> X, R, Q = linearizer(np.array([[2.0], [1.0]]), np.array([True, False]), np.array([np.inf, 1.0]), [2])
    >>> round(float(X[0]), 4)   # exact: 0.6
    0.6002
    """
    Dq, Dfix, N = _prepare(D, is_delay, servers, N)
    C = len(N)
    # Row 0: N; row 1 + s: N - e_s (clipped at 0 for classes with no customers).
    pops = np.vstack([N[None, :], np.clip(N[None, :] - np.eye(C), 0.0, None)])
    F = np.zeros(Dq.shape + (C,))
    Qq = _initial(Dq, Dfix, pops)
    for _ in range(LINEARIZER_PASSES):
        _, _, Qq = _core(Dq, Dfix, pops, F, Qq, tol=tol, max_iter=max_iter, method="linearizer")
        frac = _fraction(Qq, pops)  # (P, K, C)
        # F[k, c, s] = frac at N - e_s minus frac at N.
        F = np.transpose(frac[1:], (1, 2, 0)) - frac[0][:, :, None]
    X, R, Qq = _core(Dq, Dfix, pops[:1], F, Qq[:1], tol=tol, max_iter=max_iter, method="linearizer")
    X, R, Q = _report(X, R, Dfix, Qq)
    return X[0], R[0], Q[0]
