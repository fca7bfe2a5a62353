"""Brute-force CTMC solution of a closed network: an independent check of MVA.

In a product-form network the steady-state means depend on the routing only
through the demands, so :func:`ctmc_solve` builds the simplest Markov chain
with those demands: each class cycles through the stations it visits (demand
> 0) in declaration order, one visit per cycle, with exponential service of
mean ``D_kc`` per visit.

* A queue with ``c`` servers is processor sharing with capacity
  ``min(n_k, c)``: class ``c`` completes at rate
  ``min(n_k, c) * (n_kc / n_k) / D_kc`` where ``n_k`` is the station's total.
  With one class this is the FCFS exponential ``c``-server queue.
* A delay (infinite server) completes class ``c`` at rate ``n_kc / D_kc``.

The state is the vector of counts ``n_kc``. States are enumerated as the
cartesian product of each class's compositions of its population over its
stations, and indexed by a mixed-radix number whose digits are the ranks of
the per-class compositions (so the index is exact and never overflows). The
generator is assembled with NumPy and solved by
:func:`queuesgd.markov.steady_state`.
"""

from __future__ import annotations

from math import prod

import numpy as np
import scipy.sparse as sp

from queuesgd import _checks, markov
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.markov import composition_count, composition_rank, composition_table, compositions
from queuesgd.queueing.network import ClosedNetwork
from queuesgd.queueing.results import MVAResult

__all__ = ["ctmc_solve", "state_count"]


def state_count(net: ClosedNetwork) -> int:
    """Number of states of the CTMC that :func:`ctmc_solve` would build.

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> state_count(ClosedNetwork([Delay("z", 1.0), Queue("a", 1.0), Queue("b", 1.0)], population=3))
    10
    """
    D = net.demands
    visits = (D != 0).sum(axis=0)
    return prod(composition_count(int(n), int(m)) for n, m in zip(net.population_vector, visits))


def ctmc_solve(net: ClosedNetwork, max_states: int = 100_000, *, method: str = "auto") -> MVAResult:
    """Solve a closed network exactly through its continuous-time Markov chain.

    A brute-force check of :func:`~queuesgd.queueing.mva`: it shares no code
    with the MVA recursions. Exact for the product-form network (multi-server
    queues and several classes included); cost grows with the number of
    states, ``prod_c C(N_c + V_c - 1, V_c - 1)`` for ``V_c`` stations visited
    by class ``c``.

    Parameters
    ----------
    net : ClosedNetwork
        The network, with numeric demands.
    max_states : int
        Refuse chains larger than this.
    method : {"auto", "direct", "iterative", "gth"}
        Passed to :func:`queuesgd.markov.steady_state` (``"auto"``:
        :func:`queuesgd.markov.solve_auto` with the chain's lattice
        dimension). Several classes make
        a high-dimensional chain whose LU factors fill in: from about 10^4
        states ``"iterative"`` is usually faster there.

    Returns
    -------
    MVAResult
        ``method="ctmc"``; throughput ``X_c`` = rate of class-``c`` departures
        from its first station, queue length ``E[n_kc]``, residence time
        ``Q / X``.

    Raises
    ------
    StateSpaceTooLargeError
        If the chain would have more than ``max_states`` states.
    NotRepresentable
        If a demand is symbolic.

    Examples
    --------
    Machine repairman, think 2 s, repair 1 s, 2 machines: ``X = 0.6``.

    >>> from queuesgd import ClosedNetwork, Delay, Queue
    >>> r = ctmc_solve(ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=2))
    >>> round(r.throughput, 12), r.method
    (0.6, 'ctmc')
    """
    if not isinstance(net, ClosedNetwork):
        raise InvalidParameterError("net", net, "a ClosedNetwork")
    max_states = _checks.integer("max_states", max_states)
    if net.symbolic:
        raise NotRepresentable("ctmc_solve needs numeric demands; use mva(net) for symbolic demands")
    n_states = state_count(net)
    if n_states > max_states:
        raise StateSpaceTooLargeError(
            f"ctmc_solve: the chain has {n_states:,} states > max_states={max_states:,}; "
            "use mva(net) (exact) or mva(net, method='linearizer'), or raise max_states"
        )

    D = net.demands
    N = net.population_vector
    visited, comps, ranks, strides, n = _lattice(D, N)
    rate = _departure_rates(net, n)
    G = _generator(N, visited, comps, ranks, strides, rate)
    if method == "auto":
        # class c's customers spread over the stations it visits: a lattice of dimension visits - 1
        dimension = int(sum(max(int(np.count_nonzero(D[:, c] > 0)) - 1, 0) for c in range(D.shape[1])))
        pi, _ = markov.solve_auto(G, dimension)
    else:
        pi = markov.steady_state(G, method=method)

    # --- measures ---------------------------------------------------------------
    Q = np.einsum("s,skc->kc", pi, n.astype(float))
    X = np.array([pi @ rate[:, visited[c][0], c] for c in range(D.shape[1])])
    R = np.divide(Q, X[None, :], out=np.zeros_like(Q), where=X[None, :] > 0)
    return MVAResult.from_arrays(net, "ctmc", X, R, Q)


def _lattice(
    D: np.ndarray, N: np.ndarray
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """States: the cartesian product of per-class compositions over the stations each class visits.

    Returns the visited stations and compositions per class, each state's
    composition ranks (S, C) and the mixed-radix strides (class 0 most
    significant), and the customers ``n[s, k, c]``.
    """
    K, C = D.shape
    visited = [np.flatnonzero(D[:, c] != 0) for c in range(C)]
    comps = [compositions(int(N[c]), len(visited[c])) for c in range(C)]
    sizes = np.array([len(x) for x in comps], dtype=np.int64)
    strides = np.concatenate(([1], np.cumprod(sizes[::-1])[:-1]))[::-1]
    S = int(sizes.prod())
    idx = np.arange(S, dtype=np.int64)
    ranks = (idx[:, None] // strides[None, :]) % sizes[None, :]  # (S, C)
    n = np.zeros((S, K, C), dtype=np.int64)
    for c in range(C):
        n[:, visited[c], c] = comps[c][ranks[:, c]]
    return visited, comps, ranks, strides, n


def _departure_rates(net: ClosedNetwork, n: np.ndarray) -> np.ndarray:
    """``rate[s, k, c]``: class-``c`` departures from station ``k`` in state ``s`` (processor sharing
    among a queue's customers over its servers; a delay serves every customer)."""
    D = net.demands
    is_delay = net.is_delay
    servers = np.where(is_delay, 1.0, net.servers)  # unused for delays
    total = n.sum(axis=2)  # (S, K)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_d = np.where(D != 0, 1.0 / np.where(D != 0, D, 1.0), 0.0)  # (K, C)
        share = np.where(total[:, :, None] > 0, n / np.maximum(total, 1)[:, :, None], 0.0)
        capacity = np.minimum(total, servers[None, :])  # (S, K)
        rate_q = capacity[:, :, None] * share * inv_d[None]
        rate_d = n * inv_d[None]
    return np.where(is_delay[None, :, None], rate_d, rate_q)


def _generator(
    N: np.ndarray,
    visited: list[np.ndarray],
    comps: list[np.ndarray],
    ranks: np.ndarray,
    strides: np.ndarray,
    rate: np.ndarray,
) -> sp.csr_matrix:
    """The generator: class ``c`` moves from ``visited[c][i]`` to ``visited[c][i + 1]`` (cyclically)."""
    S = len(ranks)
    idx = np.arange(S, dtype=np.int64)
    rows, cols, vals = [], [], []
    for c in range(len(visited)):
        stations = visited[c]
        m = len(stations)
        if m < 2:  # a class at one station only: departures return at once
            continue
        T = composition_table(int(N[c]), m)
        comp = comps[c][ranks[:, c]]
        for i in range(m):
            j = (i + 1) % m
            src = np.flatnonzero(comp[:, i] > 0)
            new = comp[src].copy()
            new[:, i] -= 1
            new[:, j] += 1
            dst = idx[src] + (composition_rank(new, int(N[c]), T) - ranks[src, c]) * strides[c]
            rows.append(src)
            cols.append(dst)
            vals.append(rate[src, stations[i], c])
    if rows:
        r = np.concatenate(rows)
        q = np.concatenate(cols)
        v = np.concatenate(vals)
    else:
        r = q = np.zeros(0, dtype=np.int64)
        v = np.zeros(0)
    out = np.bincount(r, weights=v, minlength=S)
    return sp.csr_matrix(
        (np.concatenate([v, -out]), (np.concatenate([r, idx]), np.concatenate([q, idx]))), shape=(S, S)
    )
