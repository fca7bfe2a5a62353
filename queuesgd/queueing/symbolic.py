"""Closed forms of small closed queueing networks as SymPy expressions; the cost of exact symbolic MVA."""

from __future__ import annotations

import math
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, short_repr

__all__ = [
    "MAX_REPAIRMAN_POPULATION",
    "MAX_SYMBOLIC_WORK",
    "check_repairman",
    "check_symbolic_mva",
    "largest_symbolic_population",
    "repairman_throughput",
    "symbolic_mva_work",
]

#: Largest work estimate (see :func:`symbolic_mva_work`) that exact MVA with symbolic demands may take on.
#: Measured on a 2-core machine: 2 stations at population 25 (work 1,300) take about 2 s, 3 stations
#: at 12 (work 3,276) 4.5 s, 5 stations at 5 (work 3,150) 5 s; the time grows about as ``work**2``.
MAX_SYMBOLIC_WORK = 1_500


def symbolic_mva_work(stations: int, population: int, steps: int | None = None) -> int:
    """Work estimate of exact MVA with symbolic demands: ``steps * stations * C(N + K - 1, K - 1)``.

    The throughput at population ``N`` is a ratio of polynomials of degree
    ``N`` in the ``K`` station demands, which have up to ``C(N + K - 1, K - 1)``
    monomials; the recursion takes ``steps`` steps (``N`` for one class, the
    population lattice for several), each with ``K`` operations in the
    fraction field, whose GCDs make the cost grow about as the square of
    this estimate.

    Examples
    --------
    >>> symbolic_mva_work(2, 26)        # 26 steps x 2 stations x 27 monomials
    1404
    """
    steps = population if steps is None else steps
    return steps * stations * math.comb(population + stations - 1, stations - 1)


def largest_symbolic_population(stations: int) -> int:
    """Largest one-class population whose exact symbolic MVA stays within :data:`MAX_SYMBOLIC_WORK`.

    Examples
    --------
    >>> largest_symbolic_population(2), largest_symbolic_population(3)
    (26, 9)
    """
    largest = 0
    while symbolic_mva_work(stations, largest + 1) <= MAX_SYMBOLIC_WORK:
        largest += 1
    return largest


def check_symbolic_mva(stations: int, population: int, steps: int | None = None) -> None:
    """Raise :class:`~queuesgd.errors.StateSpaceTooLargeError` if exact symbolic MVA would take too long.

    The limit is :data:`MAX_SYMBOLIC_WORK` on :func:`symbolic_mva_work`; the
    message gives the largest population allowed and the numeric
    alternative.

    Examples
    --------
    >>> check_symbolic_mva(2, 20)
    >>> check_symbolic_mva(2, 200)
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: exact MVA with symbolic demands at population 200 ...
    """
    work = symbolic_mva_work(stations, population, steps)
    if work <= MAX_SYMBOLIC_WORK:
        return
    largest = largest_symbolic_population(stations)
    raise StateSpaceTooLargeError(
        f"exact MVA with symbolic demands at population {population} ({stations} stations): its rational "
        f"functions have up to {math.comb(population + stations - 1, stations - 1):,} terms, work estimate "
        f"{work:,} > {MAX_SYMBOLIC_WORK:,} (one class: population <= {largest} here; the cost grows about as "
        "the square of the estimate). Give numeric demands (floats or Rationals: exact numeric MVA at any "
        "population), or a smaller population"
    )


#: Largest integer population :func:`repairman_throughput` sums with numeric demands: its N + 1 terms
#: hold N! exactly, so the time grows about as ``N**2`` (about 1 s at 2,000 on a 2-core machine, 80 s
#: at 10,000).
MAX_REPAIRMAN_POPULATION = 2_000


def check_repairman(N: int, *, symbolic: bool) -> None:
    """Raise :class:`~queuesgd.errors.StateSpaceTooLargeError` if the repairman's finite sum takes too long.

    With numeric demands the limit is :data:`MAX_REPAIRMAN_POPULATION`; with
    symbolic ones it is exact symbolic MVA's on the same two stations
    (:func:`check_symbolic_mva`: the sum is a rational function of the same
    degree, 26 here). Both are checked before any term is built.

    Examples
    --------
    >>> check_repairman(2_000, symbolic=False)
    >>> check_repairman(10**30, symbolic=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: repairman_throughput at N = 1000000000000000000000000000000: ...
    """
    largest = largest_symbolic_population(2) if symbolic else MAX_REPAIRMAN_POPULATION
    if N <= largest:
        return
    raise StateSpaceTooLargeError(
        f"repairman_throughput at N = {short_repr(N)}: the finite sum has N + 1 terms, too many to build and "
        f"cancel exactly (N <= {largest:,} with {'symbolic' if symbolic else 'numeric'} demands). Leave N "
        "out for the closed form in the incomplete gamma function and substitute N into it, or solve the "
        "network numerically (queuesgd.mva)"
    )


def repairman_throughput(think: Any, service: Any, N: Any = None) -> Any:
    """Throughput of the machine-repairman network in closed form.

    The network is one delay station of demand ``Z = think`` (the machines
    working, or the clients thinking) and one single-server queue of demand
    ``D = service`` (the repairman), with ``N`` customers. It is the
    finite-source M/M/1//N queue; the delay may have any service-time
    distribution with mean ``Z`` (insensitivity).

    Parameters
    ----------
    think : number or SymPy expression
        Delay demand ``Z`` (> 0), in seconds.
    service : number or SymPy expression
        Queue demand ``D`` (> 0), in seconds.
    N : int or SymPy expression, optional
        Population (>= 1). ``None`` means a fresh positive integer symbol ``N``.

    Returns
    -------
    sympy.Expr
        Cycles per second, ``X(N) = (1 - p0) / D``, where ``p0`` is the
        probability that the repairman is idle.

    Notes
    -----
    With ``r = Z / D``, the idle probability has the Erlang-B form

        p0 = (r^N / N!) / sum_{j=0}^{N} r^j / j!

    For an integer ``N`` this finite sum is returned (a rational function of
    ``Z`` and ``D``, cancelled). For a symbolic ``N`` the sum is written with
    the upper incomplete gamma function,
    ``sum_{j=0}^{N} r^j / j! = e^r Gamma(N + 1, r) / N!``, so that

        X(N) = (1 - r^N e^{-r} / Gamma(N + 1, r)) / D.

    Both forms agree at every integer ``N``. For large ``N`` the throughput
    approaches the bottleneck bound ``1 / D``; for small ``N`` it is close to
    ``N / (Z + D)`` (Lazowska et al. 1984, chapter 5).

    Examples
    --------
    >>> from sympy import Symbol, Rational
    >>> repairman_throughput(2, 1, 2)          # Z=2, D=1, N=2: (1 - 2/5) / 1
    3/5
    >>> repairman_throughput(Rational(1, 2), Rational(1, 4), 3)   # r = 2: (15/19) * 4
    60/19

    Floats are read as the rationals they stand for and the answer is
    rounded once, at the end (so ``1 - p0`` does not cancel):

    >>> repairman_throughput(1e9, 1e-9, 3)     # about N / (Z + D)
    3.00000000000000e-9
    >>> Z, D = Symbol("Z", positive=True), Symbol("D", positive=True)
    >>> repairman_throughput(Z, D, 1)
    1/(D + Z)
    >>> X = repairman_throughput(2, 1)          # symbolic N
    >>> X
    -2**N*exp(-2)/uppergamma(N + 1, 2) + 1
    >>> round(float(X.subs(Symbol("N", positive=True, integer=True), 3)), 6)   # 15/19
    0.789474
    """
    import sympy

    from queuesgd.markov import exact

    # Validate, then read floats as the rationals they stand for (0.1 -> 1/10): in 15-digit SymPy
    # Floats, 1 - p0 cancelled (Z = 1e9, D = 1e-9, N = 3 gave 0). Ints and Rationals stay as given.
    _checks.positive("think", think, symbolic=True)
    _checks.positive("service", service, symbolic=True)
    floats = any(isinstance(v, float) or bool(sympy.sympify(v).atoms(sympy.Float)) for v in (think, service))
    Z = exact(think, "think")
    D = exact(service, "service")
    if N is None:
        N = sympy.Symbol("N", positive=True, integer=True)
    elif _checks.is_symbolic(N):
        N = sympy.sympify(N)
        if N.is_integer is False or N.is_positive is False:
            raise InvalidParameterError("N", N, "an integer >= 1 or a SymPy expression that may be one")
    else:
        if isinstance(N, sympy.Integer):
            N = int(N)
        N = _checks.integer("N", N, minimum=1)

    r = Z / D
    if isinstance(N, int):
        check_repairman(N, symbolic=bool(r.free_symbols or D.free_symbols))
        # Erlang-B form with a finite sum; multiply through by N! to stay polynomial.
        terms = [sympy.factorial(N) / sympy.factorial(j) * r**j for j in range(N + 1)]
        p0 = r**N / sympy.Add(*terms)
        X = sympy.cancel((1 - p0) / D)
        return sympy.Float(X, 15) if floats and not X.free_symbols else X
    return (1 - r**N * sympy.exp(-r) / sympy.uppergamma(N + 1, r)) / D
