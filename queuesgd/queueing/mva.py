"""Mean value analysis: one entry point, several methods.

``mva(net, method=...)`` dispatches to the exact recursion (``_exact``) or an
approximate fixed point (``_approx``). ``method="exact"`` is always exact or
raises: it never switches silently to an approximation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.queueing import _approx, _exact
from queuesgd.queueing.network import ClosedNetwork
from queuesgd.queueing.results import MVAResult, MVASeries
from queuesgd.queueing.symbolic import check_symbolic_mva

__all__ = ["mva", "METHODS"]

METHODS = ("exact", "schweitzer", "linearizer")


def _populations(net: ClosedNetwork, population: object) -> np.ndarray | None:
    """Return an int array for a population range, or None for a single population."""
    if population is None or isinstance(population, (int, np.integer, Mapping)):
        return None
    if isinstance(population, (str, bytes)) or not isinstance(population, Iterable):
        raise InvalidParameterError(
            "population", population, "an int, a {class: int} mapping, or an iterable of ints"
        )
    if not net.single_class:
        raise InvalidParameterError(
            "population",
            population,
            "a single population (ranges of populations need a single-class network)",
        )
    # at most MAX_COUNT populations of at most MAX_COUNT jobs each: an endless iterable is refused, not read
    pops = _checks.integers(
        "population", population, maximum=_checks.MAX_COUNT, allow_empty=True, max_items=_checks.MAX_COUNT
    )
    if not pops:
        raise InvalidParameterError("population", population, "a non-empty iterable of ints >= 1")
    return np.array(pops, dtype=int)


def mva(
    net: ClosedNetwork,
    method: str = "exact",
    *,
    population: int | Mapping[str, int] | Iterable[int] | None = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    max_states: int = 2_000_000,
) -> MVAResult | MVASeries:
    """Solve a closed network by mean value analysis.

    Parameters
    ----------
    net : ClosedNetwork
        The network (not modified).
    method : {"exact", "schweitzer", "linearizer"}
        ``"exact"``: the exact MVA recursion (Reiser and Lavenberg 1980); for
        multi-server queues the load-dependent form with marginal queue-length
        probabilities; for several classes the recursion over the whole
        population lattice. Demands may be SymPy symbols: the results are then
        simplified rational functions, for small populations only (up to 26
        with 2 stations, 9 with 3, 5 with 4: beyond,
        :func:`~queuesgd.queueing.symbolic.check_symbolic_mva` raises
        :class:`~queuesgd.errors.StateSpaceTooLargeError` at once).
        ``"schweitzer"``: Bard-Schweitzer approximate MVA. ``"linearizer"``:
        Chandy-Neuse Linearizer.
    population : int, mapping or iterable of int, optional
        Solve at another population than ``net.population``. An iterable
        (e.g. ``range(1, 1025)``, single class only) returns an
        :class:`MVASeries` holding every population's results; with
        ``"exact"`` they all come from one recursion.
    tol, max_iter : float, int
        Convergence tolerance and iteration limit of the approximate methods.
    max_states : int
        Largest population lattice the exact multi-class recursion may visit;
        beyond it :class:`~queuesgd.errors.StateSpaceTooLargeError` suggests an
        approximate method.

    Returns
    -------
    MVAResult or MVASeries

    Examples
    --------
    >>> from queuesgd import ClosedNetwork, Delay, Queue, mva
    >>> net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=2)
    >>> round(mva(net).throughput, 12)   # by hand: N=1 gives X=1/3, Q=1/3; N=2: R=4/3, X=2/(2+4/3)=3/5
    0.6
    >>> mva(net, population=range(1, 3)).throughput.round(6).tolist()
    [0.333333, 0.6]
    """
    if not isinstance(net, ClosedNetwork):
        raise InvalidParameterError("net", net, "a ClosedNetwork")
    method = _checks.choice("method", method, METHODS)
    # every method's arguments checked, read or not (a NaN tolerance ran 10,000 iterations to a wrong advice)
    tol = _checks.positive("tol", tol)
    if not tol < 1:
        raise InvalidParameterError("tol", tol, "a relative tolerance > 0 and < 1")
    max_iter = _checks.integer("max_iter", max_iter, maximum=_checks.MAX_COUNT * 100)
    max_states = _checks.integer("max_states", max_states)
    pops = _populations(net, population)
    if pops is None and population is not None:
        net = net.with_population(population)  # validates it
    symbolic = net.symbolic
    if symbolic and method != "exact":
        raise NotRepresentable(
            f"method={method!r} is iterative and needs numeric demands; "
            "use method='exact' for symbolic demands"
        )
    D = net.demands
    delay = net.is_delay
    servers = net.servers
    if symbolic:  # fail fast where the fraction-field recursion would run for minutes
        stations = int(sum(any(d != 0 for d in row) for row in D))
        if pops is not None:
            check_symbolic_mva(stations, int(pops.max()))
        else:
            N = net.population_vector
            check_symbolic_mva(stations, int(N.sum()), int(np.prod(N + 1)) - 1)

    if pops is not None:
        if method == "exact":
            X, R, Q = _exact.single_class(D[None, :, 0], delay, servers, int(pops.max()))
            idx = pops - 1
            return MVASeries.from_arrays(net, method, pops, X[0, idx], R[0, idx], Q[0, idx])
        rows = [_solve_one(method, D, delay, servers, np.array([p]), tol, max_iter, max_states) for p in pops]
        X = np.array([r[0][0] for r in rows])
        R = np.array([r[1][:, 0] for r in rows])
        Q = np.array([r[2][:, 0] for r in rows])
        return MVASeries.from_arrays(net, method, pops, X, R, Q)

    N = net.population_vector
    X, R, Q = _solve_one(method, D, delay, servers, N, tol, max_iter, max_states)
    return MVAResult.from_arrays(net, method, X, R, Q)


def _solve_one(method, D, delay, servers, N, tol, max_iter, max_states):
    if method == "exact":
        if len(N) == 1:
            X, R, Q = _exact.single_class(D[None, :, 0], delay, servers, int(N[0]))
            return X[0, -1:], R[0, -1][:, None], Q[0, -1][:, None]
        return _exact.multi_class(D, delay, servers, N, max_states=max_states)
    if method == "schweitzer":
        return _approx.schweitzer(D, delay, servers, N, tol=tol, max_iter=max_iter)
    return _approx.linearizer(D, delay, servers, N, tol=tol, max_iter=max_iter)
