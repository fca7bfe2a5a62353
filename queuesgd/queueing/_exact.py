"""Exact mean value analysis kernels (private; called by :func:`queuesgd.queueing.mva`).

Two kernels, one calling convention (arrays in, arrays out, no model objects):

- :func:`single_class` runs the Reiser-Lavenberg recursion for populations
  ``1..n_max`` of ``M`` independent networks at once (the batch dimension is what
  turns a sweep of 10,000 configurations into one vectorized recursion).
- :func:`multi_class` runs the multi-class recursion over the population lattice
  ``0 <= n <= N``, one total-population level at a time.

Multi-server queues use the exact load-dependent recursion, written so that it
needs only the marginals ``p(j|n)`` for ``j`` below the number of servers (see
:func:`_ld_residence`) and, in floating point, computes the idle probability
``p(0|n)`` with products of positive ratios only (see :func:`_subset_networks`):
the textbook ``p(0|n) = 1 - sum_{j>=1} p(j|n)`` loses every digit near
saturation. Symbolic demands (NumPy object arrays holding SymPy
expressions) run the same recursion in a SymPy fraction field, so every
intermediate value is a cancelled rational function; the results are converted
back to SymPy expressions at the end.

References
----------
M. Reiser and S. S. Lavenberg, "Mean-value analysis of closed multichain
queuing networks", J. ACM 27(2), 1980.
G. Bolch, S. Greiner, H. de Meer, K. S. Trivedi, "Queueing Networks and Markov
Chains", 2nd ed., Wiley 2006, sections 8.2 (load-dependent MVA).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError

__all__ = ["single_class", "multi_class"]


# --------------------------------------------------------------------------- helpers
def _check_stations(K: int, is_delay: Any, servers: Any) -> tuple[np.ndarray, np.ndarray]:
    is_delay = np.asarray(is_delay, dtype=bool)
    servers = np.asarray(servers, dtype=float)
    if is_delay.shape != (K,):
        raise InvalidParameterError("is_delay", is_delay.shape, f"a boolean array of shape ({K},)")
    if servers.shape != (K,):
        raise InvalidParameterError("servers", servers.shape, f"an array of shape ({K},)")
    q = ~is_delay
    bad = q & ~((servers >= 1) & np.isfinite(servers) & (servers == np.floor(servers)))
    if bad.any():
        raise InvalidParameterError("servers", servers[bad].tolist(), "an integer >= 1 for every queue")
    return is_delay, servers


def _classify(is_delay: np.ndarray, servers: np.ndarray, n_total: int) -> tuple[np.ndarray, ...]:
    """Split stations into single-server queues, load-dependent queues and pure delays.

    A queue with at least as many servers as customers never makes anyone wait,
    so it is exactly a delay at every population up to ``n_total``.
    """
    c = np.where(is_delay, np.inf, servers)
    ss = (~is_delay) & (c == 1)
    ld = (~is_delay) & (c > 1) & (c < n_total)
    dl = ~(ss | ld)
    return np.flatnonzero(ss), np.flatnonzero(ld), np.flatnonzero(dl)


def _to_field(D: np.ndarray) -> tuple[np.ndarray, Any]:
    """Map an object array of numbers / SymPy expressions into a fraction field.

    Floats are turned into the rational with the same decimal representation
    (``0.1 -> 1/10``) so that results stay exact. Non-rational subexpressions
    (``sqrt(x)``, ``exp(y)``) become generators of the field.
    """
    import sympy
    from sympy.polys.fields import sfield

    def rational(v: Any) -> Any:
        e = sympy.sympify(v)
        if e.has(sympy.Float):
            e = sympy.nsimplify(e, rational=True)
        return e

    flat = [rational(v) for v in D.ravel()]
    _, elems = sfield(flat)
    out = np.empty(D.shape, dtype=object)
    out.ravel()[:] = elems  # assign element by element (FracElements are not sequences)
    return out, elems


def _from_field(a: np.ndarray) -> np.ndarray:
    """Convert fraction-field elements (or plain ints) back to SymPy expressions."""
    import sympy

    out = np.empty(a.shape, dtype=object)
    flat_in = a.ravel()
    flat_out = out.ravel()
    for i, v in enumerate(flat_in):
        flat_out[i] = v.as_expr() if hasattr(v, "as_expr") else sympy.sympify(v)
    return out


def _ld_tables(servers_ld: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Integer tables for the load-dependent queues, padded to ``cmax`` columns.

    Only the marginals ``p(j|n)`` for ``j < c`` are kept (see :func:`_ld_residence`).
    Returns ``c`` (Kl,), ``mask`` (Kl, cmax) = ``j < c``, ``w_res`` = ``(c-1-j)+``,
    ``w_util`` = ``(c-j) * mask`` and ``cmax``.
    """
    c = servers_ld.astype(np.int64)
    cmax = int(c.max()) if c.size else 1
    j = np.arange(cmax)
    mask = (j[None, :] < c[:, None]).astype(np.int64)
    w_res = np.maximum(c[:, None] - 1 - j[None, :], 0) * mask
    w_util = (c[:, None] - j[None, :]) * mask
    return c, mask, w_res, w_util, cmax


def _ld_residence(D: Any, Qprev: Any, Pprev: Any, c: np.ndarray, w_res: np.ndarray) -> Any:
    """Residence time at a ``c``-server queue from the population with one customer less.

    The load-dependent MVA residence time (Reiser-Lavenberg 1980; Bolch et al.
    eq. 8.31) with service-rate multipliers ``alpha(j) = min(j, c)``,

        R(n) = D * sum_{j=1}^{n} (j / alpha(j)) p(j-1 | n-1),

    is rewritten with ``sum_j j p(j) = Q`` and ``sum_j p(j) = 1`` as

        R(n) = D / c * (1 + Q(n-1) + sum_{j=0}^{c-2} (c-1-j) p(j | n-1)),

    which needs only the marginals ``p(j|n-1)`` for ``j < c - 1`` and the mean
    queue length, never the full distribution.
    """
    return D * (1 + Qprev + (w_res * Pprev).sum(axis=-1)) / c


def _ld_upper(shifted: Any, mask: np.ndarray, cmax: int) -> Any:
    """``p(j|n)`` for ``1 <= j < c`` from ``shifted[..., j] = (X D)(n) p(j-1|n-1)``.

    ``p(j|n) = X(n) D / alpha(j) * p(j-1|n-1)`` with ``alpha(j) = j`` below ``c``
    (Reiser-Lavenberg 1980); in several classes ``shifted`` holds the class sum
    ``sum_c X_c(n) D_c p(j-1|n-e_c)``. Column 0 is left for the caller.
    """
    jdiv = np.arange(cmax)
    jdiv[0] = 1
    return shifted * mask / jdiv


def _ld_idle_exact(XD: Any, P: Any, c: np.ndarray, w_util: np.ndarray) -> Any:
    """``p(0|n)`` from the utilization law, for exact (rational / symbolic) arithmetic.

    Mean busy servers ``E[min(J, c)] = X D`` gives
    ``sum_{j<c} (c - j) p(j|n) = c - X D``, hence
    ``p(0|n) = (c - X D - sum_{j=1}^{c-1} (c - j) p(j|n)) / c``.
    Exact, and cheap; but in floating point this subtraction (like the textbook
    ``1 - sum_{j>=1} p(j|n)``) feeds rounding errors back into the recursion
    with a gain above 1 once a queue with ``c >= 3`` nears saturation, so
    floats use :func:`_subset_networks` instead.
    """
    return (c - XD - (w_util[:, 1:] * P[..., 1:]).sum(axis=-1)) / c


def _subset_networks(n_ld: int, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    """Networks with subsets of the multi-server queues removed, for a stable ``p(0|n)``.

    In floating point ``p_k(0|n)`` is computed with products of positive ratios
    only. By the product form (Buzen's convolution algorithm; Bolch et al.
    section 8.1) ``p_k(0|n) = G_{-k}(n) / G(n)``, the normalization constant of
    the network without station ``k`` over that of the whole network; with
    ``X(n) = G(n-1)/G(n)``,

        p_k(0|n) = p_k(0|n-1) * X(n) / X_{-k}(n) = p_k(0|n-1) * C_{-k}(n) / C(n),

    where ``C(n) = n / X(n)`` is the cycle time and ``-k`` is the network without
    station ``k`` (for several classes, use any class with ``n_c > 0``). The
    network without ``k`` has multi-server queues of its own, so every subset
    ``T`` of the ``L`` multi-server queues is solved in lockstep (a batch
    dimension of size ``2**L``; a removed station is a zero demand, which is
    the same thing). Returns ``bits`` (S, L), True where a queue is removed, and
    ``partner`` (S, L), the index of subset ``T | {l}``. Exact arithmetic needs
    no subsets (S = 1).
    """
    if exact or n_ld == 0:
        return np.zeros((1, n_ld), dtype=bool), np.zeros((1, n_ld), dtype=np.int64)
    if n_ld > _MAX_LD_STATIONS:
        raise StateSpaceTooLargeError(
            f"exact MVA of {n_ld} multi-server queues (1 < servers < population) solves 2**{n_ld} "
            f"sub-networks in lockstep for numerical stability; at most {_MAX_LD_STATIONS} are allowed. "
            f'Use method="linearizer" or method="schweitzer", or symbolic/rational demands'
        )
    S = 1 << n_ld
    sub = np.arange(S)
    bit = 1 << np.arange(n_ld)
    return (sub[:, None] & bit[None, :]) != 0, sub[:, None] | bit[None, :]


#: Largest number of multi-server queues for the float recursion (``2**L`` sub-networks).
_MAX_LD_STATIONS = 12


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` with 0 where ``den == 0`` (an empty or infeasible sub-network)."""
    out = np.zeros(np.broadcast(num, den).shape, dtype=float)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --------------------------------------------------------------------------- single class
def single_class(
    D: Any, is_delay: Any, servers: Any, n_max: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact single-class MVA for populations ``1..n_max`` of ``M`` networks at once.

    Parameters
    ----------
    D : array_like, shape (M, K)
        Service demands of ``M`` independent networks over the same ``K``
        station types. Float, or object dtype holding SymPy expressions
        (symbolic: intended for small ``n_max`` and ``M == 1``).
    is_delay : array_like of bool, shape (K,)
        Delay (infinite-server) stations.
    servers : array_like of float, shape (K,)
        Servers per station (``inf`` for delays; ignored there).
    n_max : int
        Largest population, >= 1.

    Returns
    -------
    X : ndarray, shape (M, n_max)
        Throughput at populations ``1..n_max``.
    R : ndarray, shape (M, n_max, K)
        Residence times (demand plus waiting).
    Q : ndarray, shape (M, n_max, K)
        Mean queue lengths (in service plus waiting).

    Notes
    -----
    Reiser-Lavenberg recursion: ``R_k(n) = D_k (1 + Q_k(n-1))`` at a single-server
    queue, ``R_k(n) = D_k`` at a delay, ``X(n) = n / sum_k R_k(n)``,
    ``Q_k(n) = X(n) R_k(n)``. Multi-server queues use the load-dependent form of
    :func:`_ld_residence` and :func:`_subset_networks`; with ``L`` of them
    (``1 < servers < n_max``) the float recursion runs ``2**L`` sub-networks in
    lockstep. Memory is ``M * n_max * K`` values for each of R and Q.

    Examples
    --------
    >>> X, R, Q = single_class([[2.0, 1.0]], [True, False], [np.inf, 1.0], 3)
    >>> X.round(6).tolist()   # machine repairman Z=2, D=1: 1/3, 3/5, 15/19
    [[0.333333, 0.6, 0.789474]]
    """
    D = np.asarray(D)
    if D.ndim != 2:
        raise InvalidParameterError("D", D.shape, "an array of shape (M, K)")
    M, K = D.shape
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 1:
        raise InvalidParameterError("n_max", n_max, "an integer >= 1")
    n_max = int(n_max)
    is_delay, servers = _check_stations(K, is_delay, servers)
    exact = D.dtype == object
    if exact:
        Dw, _ = _to_field(D)
    else:
        Dw = D.astype(float)
        if not np.all(np.isfinite(Dw)) or (Dw < 0).any() or (Dw.sum(axis=1) <= 0).any():
            raise InvalidParameterError(
                "D", "demands", "finite demands >= 0 with a positive total per network"
            )

    ss, ld, dl = _classify(is_delay, servers, n_max)
    perm = np.concatenate([ss, ld, dl])
    a, b = len(ss), len(ss) + len(ld)
    c, mask, w_res, w_util, cmax = _ld_tables(servers[ld])
    bits, partner = _subset_networks(b - a, exact)
    S = len(bits)
    dtype = object if exact else float

    # Batch (S, M, K): sub-network s has the multi-server queues of bits[s] removed.
    Db = np.empty((S, M, K), dtype=dtype)
    Db[:] = Dw[None, :, perm]
    for i in range(b - a):
        Db[bits[:, i], :, a + i] = 0
    Dss, Dld = Db[..., :a], Db[..., a:b]
    delay_total = Db[..., b:].sum(axis=-1)

    Xo = np.empty((M, n_max), dtype=dtype)
    Ro = np.empty((M, n_max, K), dtype=dtype)
    Qo = np.empty((M, n_max, K), dtype=dtype)
    Ro[:, :, b:] = Db[0, :, None, b:]

    Qprev = np.zeros((S, M, K), dtype=dtype)
    P = np.zeros((S, M, b - a, cmax), dtype=dtype)
    P[..., 0] = 1  # p(0|0) = 1: the empty network
    R = np.empty((S, M, K), dtype=dtype)
    R[..., b:] = Db[..., b:]
    for n in range(1, n_max + 1):
        R[..., :a] = Dss * (1 + Qprev[..., :a])
        R[..., a:b] = _ld_residence(Dld, Qprev[..., a:b], P, c, w_res)
        cycle = R[..., :b].sum(axis=-1) + delay_total  # (S, M)
        X = n / cycle if exact else _ratio(np.float64(n), cycle)
        Q = X[..., None] * R
        Xo[:, n - 1] = X[0]
        Ro[:, n - 1, :b] = R[0, :, :b]
        Qo[:, n - 1] = Q[0]
        Qprev = Q
        if b > a:
            XD = X[..., None] * Dld
            shifted = np.zeros_like(P)
            shifted[..., 1:] = XD[..., None] * P[..., :-1]
            newP = _ld_upper(shifted, mask, cmax)
            if exact:
                newP[..., 0] = _ld_idle_exact(XD, newP, c, w_util)
            else:  # p_l(0|n) = p_l(0|n-1) * C_{T+l}(n) / C_T(n): positive factors only
                newP[..., 0] = P[..., 0] * _ratio(np.moveaxis(cycle[partner], 1, 2), cycle[..., None])
            P = newP

    inv = np.argsort(perm)
    Ro = Ro[:, :, inv]
    Qo = Qo[:, :, inv]
    if exact:
        return _from_field(Xo), _from_field(Ro), _from_field(Qo)
    return Xo, Ro, Qo


# --------------------------------------------------------------------------- multi class
def multi_class(
    D: Any, is_delay: Any, servers: Any, N: Any, *, max_states: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact multi-class MVA over the population lattice ``0 <= n <= N``.

    Parameters
    ----------
    D : array_like, shape (K, C)
        Service demands (0 where a class does not visit a station). Float, or
        object dtype holding SymPy expressions (small lattices).
    is_delay : array_like of bool, shape (K,)
    servers : array_like of float, shape (K,)
        Servers per station (``inf`` for delays).
    N : array_like of int, shape (C,)
        Population per class.
    max_states : int
        Largest lattice ``prod(N + 1)`` allowed.

    Returns
    -------
    X : ndarray, shape (C,)
        Throughput per class at population ``N``.
    R, Q : ndarray, shape (K, C)
        Residence times and mean queue lengths per station and class.

    Raises
    ------
    StateSpaceTooLargeError
        If ``prod(N + 1) > max_states``.

    Notes
    -----
    ``R_kc(n) = D_kc (1 + sum_c' Q_kc'(n - e_c))`` at a single-server queue,
    ``R_kc = D_kc`` at a delay, ``X_c(n) = n_c / sum_k R_kc(n)``,
    ``Q_kc(n) = X_c(n) R_kc(n)`` (Reiser and Lavenberg 1980). Multi-server
    queues keep the marginals ``p_k(j|n)``, ``j < c_k``, with
    ``p_k(j|n) = sum_c X_c(n) D_kc / j * p_k(j-1|n-e_c)``. The lattice is visited
    level by level (total population), keeping two levels in memory; states
    are addressed by their mixed-radix index.

    Examples
    --------
    >>> X, R, Q = multi_class([[1.0, 2.0], [1.0, 1.0]], [True, False], [np.inf, 1.0], [1, 1],
    ...                       max_states=100)
    >>> X.round(6).tolist()   # 3/7, 2/7
    [0.428571, 0.285714]
    """
    D = np.asarray(D)
    if D.ndim != 2:
        raise InvalidParameterError("D", D.shape, "an array of shape (K, C)")
    K, C = D.shape
    N = np.asarray(N)
    if N.shape != (C,) or not np.issubdtype(N.dtype, np.integer) or (N < 0).any():
        raise InvalidParameterError("N", N.tolist(), f"{C} integers >= 0 (one per class)")
    N = N.astype(np.int64)
    is_delay, servers = _check_stations(K, is_delay, servers)
    radix = N + 1
    n_states = 1
    for r in radix.tolist():
        n_states *= r  # Python int: no overflow
    if n_states > max_states:
        raise StateSpaceTooLargeError(
            f"exact multi-class MVA needs the population lattice prod(N + 1) = {n_states:,} states "
            f'(N = {N.tolist()}), more than max_states = {max_states:,}; use method="linearizer" '
            f'or method="schweitzer" (approximate MVA), or raise max_states'
        )
    exact = D.dtype == object
    if exact:
        Dw, _ = _to_field(D)
    else:
        Dw = D.astype(float)
        if not np.all(np.isfinite(Dw)) or (Dw < 0).any() or (Dw.sum(axis=0) <= 0).any():
            raise InvalidParameterError("D", "demands", "finite demands >= 0 with a positive total per class")
    dtype = object if exact else float
    total_pop = int(N.sum())

    ss, ld, dl = _classify(is_delay, servers, total_pop)
    perm = np.concatenate([ss, ld, dl])
    a, b = len(ss), len(ss) + len(ld)
    Kl = b - a
    c, mask, w_res, w_util, cmax = _ld_tables(servers[ld])
    bits, partner = _subset_networks(Kl, exact)
    S = len(bits)
    Db = np.empty((S, K, C), dtype=dtype)  # sub-networks without some multi-server queues
    Db[:] = Dw[None, perm]
    for i in range(Kl):
        Db[bits[:, i], a + i, :] = 0

    # Mixed-radix addressing: index(n) = sum_c n_c * stride_c. Each state gets its
    # position within its level so that n - e_c can be found in the previous level.
    stride = np.concatenate([[1], np.cumprod(radix[:-1])]).astype(np.int64)
    idx = np.arange(n_states, dtype=np.int64)
    level = np.zeros(n_states, dtype=np.int64)
    for ci in range(C):
        level += (idx // stride[ci]) % radix[ci]
    order = np.argsort(level, kind="stable")
    counts = np.bincount(level, minlength=total_pop + 1)
    start = np.concatenate([[0], np.cumsum(counts)])
    pos = np.empty(n_states, dtype=np.int64)
    pos[order] = np.arange(n_states) - start[level[order]]

    Qtot = np.zeros((S, 1, K), dtype=dtype)  # level 0: the empty network
    P = np.zeros((S, 1, Kl, cmax), dtype=dtype)
    P[..., 0] = 1
    X = np.zeros((S, 1, C), dtype=dtype)
    R = np.zeros((S, 1, K, C), dtype=dtype)
    for L in range(1, total_pop + 1):
        ids = order[start[L] : start[L + 1]]
        n = (ids[:, None] // stride[None, :]) % radix[None, :]  # (S_L, C)
        S_L = len(ids)
        R = np.zeros((S, S_L, K, C), dtype=dtype)
        X = np.zeros((S, S_L, C), dtype=dtype)
        cycle = np.zeros((S, S_L, C), dtype=dtype)
        prev = np.zeros((C, S_L), dtype=np.int64)
        for ci in range(C):
            has = n[:, ci] > 0
            prev[ci] = np.where(has, pos[np.where(has, ids - stride[ci], 0)], 0)
            Qp = Qtot[:, prev[ci]]  # (S, S_L, K)
            Rc = np.zeros((S, S_L, K), dtype=dtype)
            d = Db[:, None, :, ci]  # (S, 1, K)
            Rc[..., :a] = d[..., :a] * (1 + Qp[..., :a])
            if Kl:
                Rc[..., a:b] = _ld_residence(d[..., a:b], Qp[..., a:b], P[:, prev[ci]], c, w_res)
            Rc[..., b:] = d[..., b:]
            if not has.all():  # no class-c customers: X_c = R_c = 0
                Rc = np.where(has[None, :, None], Rc, 0)
            R[..., ci] = Rc
            cycle[..., ci] = Rc.sum(axis=-1)
            if exact:
                X[..., ci] = n[:, ci] / np.where(has, cycle[..., ci], 1)
            else:
                X[..., ci] = _ratio(n[:, ci].astype(float), cycle[..., ci])
        if Kl:
            XD = np.zeros((S, S_L, Kl), dtype=dtype)
            shifted = np.zeros((S, S_L, Kl, cmax), dtype=dtype)
            for ci in range(C):
                xd = X[..., ci, None] * Db[:, None, a:b, ci]  # zero where n_c = 0
                XD = XD + xd
                shifted[..., 1:] += xd[..., None] * P[:, prev[ci]][..., :-1]
            newP = _ld_upper(shifted, mask, cmax)
            if exact:
                newP[..., 0] = _ld_idle_exact(XD, newP, c, w_util)
            else:
                # p_l(0|n) = p_l(0|n - e_f) * C_{T+l,f}(n) / C_{T,f}(n) with f a class present in n.
                f = np.argmax(n > 0, axis=1)
                rows = np.arange(S_L)
                cyc_f = cycle[:, rows, f]  # (S, S_L)
                p0_prev = P[:, prev[f, rows]][..., 0]  # (S, S_L, Kl)
                newP[..., 0] = p0_prev * _ratio(np.moveaxis(cyc_f[partner], 1, 2), cyc_f[..., None])
            P = newP
        Qtot = (X[:, :, None, :] * R).sum(axis=-1)
    inv = np.argsort(perm)
    Xf, Rf = X[0, 0], R[0, 0]
    Qf = (Xf[None, :] * Rf)[inv]
    Rf = Rf[inv]
    if exact:
        return _from_field(Xf), _from_field(Rf), _from_field(Qf)
    return Xf.astype(float), Rf.astype(float), Qf.astype(float)
