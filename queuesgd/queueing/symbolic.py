"""Closed forms of small closed queueing networks, as SymPy expressions."""

from __future__ import annotations

from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = ["repairman_throughput"]


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

    # Validate, then keep the caller's value: ints and Rationals stay exact.
    _checks.positive("think", think, symbolic=True)
    _checks.positive("service", service, symbolic=True)
    Z = sympy.sympify(think)
    D = sympy.sympify(service)
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
        # Erlang-B form with a finite sum; multiply through by N! to stay polynomial.
        terms = [sympy.factorial(N) / sympy.factorial(j) * r**j for j in range(N + 1)]
        p0 = r**N / sympy.Add(*terms)
        return sympy.cancel((1 - p0) / D)
    return (1 - r**N * sympy.exp(-r) / sympy.uppergamma(N + 1, r)) / D
