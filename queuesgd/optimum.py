"""Where a throughput formula is largest over one symbol, and the evidence that it is a maximum.

:meth:`queuesgd.Formula.optimize <queuesgd.formula.Formula.optimize>` returns
an :class:`Optimum`. It never reports a point it has not checked:

- over an integer symbol (``n``, ``b``, ``c``, ...), every integer of
  ``[lower, upper]`` is evaluated; the largest value is an *interior* maximum
  when it lies strictly inside, with its two neighbours as evidence;
- over a continuous symbol (``T``), a grid of 4,001 points on
  ``[lower, upper]`` (log-spaced when the interval spans more than two
  decades) is refined by a bounded Brent search between the best point's
  neighbours; a peak narrower than the grid spacing can be missed;
- symbolically, a stationary point ``dX/dx = 0`` is returned only where
  SymPy proves ``d2X/dx2 < 0`` there, it is the only stationary point
  with ``x > 0`` (a minimum beside it is refused: X may rise again toward
  an end) and ``X``'s denominator does not vanish for ``x > 0`` (the
  evidence says where SymPy cannot decide that); otherwise
  :class:`~queuesgd.errors.NotRepresentable` says why (with a
  counterexample where random parameter values show a minimum). The
  symbolic road is bounded: a throughput too large to solve, or whose
  equation ``dX/dx = 0`` is not a polynomial of small degree in ``x``, is
  refused at once (:func:`symbolic_obstacle`); ``Formula.optimize`` then
  runs the numeric search where no other symbol is free.

When the largest value on the interval is at one of its ends, the result says
so (``interior`` is False, ``monotone`` says whether the throughput rises or
falls all the way): ``upper`` is then a search bound, not an optimum, unless
it is a real constraint of the problem (a cutoff ``c <= n``).

Examples
--------
>>> import numpy as np
>>> opt = integer_search(lambda n: n * np.exp(-n / 10), "n", 1, 100)
>>> print(opt)
n = 10: interior maximum X = 3.679 (X(9) = 3.659 <= X(10) = 3.679 >= X(11) = 3.662; the largest of X(1..100))
>>> print(integer_search(lambda n: n / (n + 1), "n", 1, 1000))
no interior maximum on [1, 1000] (X is increasing); the largest X is at the bound n = 1000: 0.999
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable

__all__ = [
    "GRID_POINTS",
    "MAX_GRID",
    "MAX_SIMPLIFY_OPS",
    "MAX_SYMBOLIC_OPS",
    "Optimum",
    "continuous_search",
    "integer_search",
    "symbolic_obstacle",
    "symbolic_search",
]

#: Points of the first grid of a continuous search.
GRID_POINTS = 4001
#: Largest number of integers an integer search evaluates, and of points of a continuous search's grid
#: (memory: 8 bytes each, twice).
MAX_GRID = 10_000_000


def _fmt(x: Any) -> str:
    if isinstance(x, int | np.integer):
        return str(int(x))
    if isinstance(x, float | np.floating):
        return f"{float(x):.4g}"
    import sympy

    return sympy.sstr(x)


@dataclass(frozen=True)
class Optimum:
    """The largest throughput over one symbol, and how it was checked.

    Attributes
    ----------
    symbol : str
        The symbol optimized over.
    argmax : int, float or sympy.Expr
        Where the throughput is largest on ``[lower, upper]`` (an integer for
        integer symbols; an expression for a symbolic optimum). When
        ``interior`` is False this is ``lower`` or ``upper``.
    maximum : float or sympy.Expr
        The throughput there, in samples per second.
    interior : bool
        True: a verified interior maximum (see ``evidence``). False: the
        largest value on the interval is at one of its ends, so there is no
        interior maximum on it.
    lower, upper : number or sympy.Expr
        The interval searched (``0`` and ``oo`` for a symbolic optimum).
    monotone : str or None
        ``"increasing"``, ``"decreasing"`` or ``"constant"`` when the
        throughput is so at every grid point of the interval, else None.
    evidence : str
        How the maximum was verified, in words.

    Examples
    --------
    >>> opt = integer_search(lambda n: 10 - (n - 3.0) ** 2, "n", 1, 9)
    >>> opt.argmax, opt.maximum, opt.interior
    (3, 10.0, True)
    """

    symbol: str
    argmax: Any
    maximum: Any
    interior: bool
    lower: Any
    upper: Any
    monotone: str | None
    evidence: str

    def __str__(self) -> str:
        if self.interior:
            return (
                f"{self.symbol} = {_fmt(self.argmax)}: interior maximum X = {_fmt(self.maximum)} "
                f"({self.evidence})"
            )
        shape = f"X is {self.monotone}" if self.monotone else "X is not monotone"
        return (
            f"no interior maximum on [{_fmt(self.lower)}, {_fmt(self.upper)}] ({shape}); the largest X is "
            f"at the bound {self.symbol} = {_fmt(self.argmax)}: {_fmt(self.maximum)}"
        )


def _monotone(vals: np.ndarray) -> str | None:
    d = np.diff(vals)
    if d.size == 0 or np.all(d == 0):
        return "constant"
    if np.all(d >= 0):
        return "increasing"
    if np.all(d <= 0):
        return "decreasing"
    return None


def _checked(fn: Any, symbol: Any) -> str:
    """``symbol`` if ``fn`` is callable and ``symbol`` a non-empty string (the name in the result)."""
    if not callable(fn):
        raise InvalidParameterError(
            "fn", fn, "a callable: the throughput of an array of values of the symbol"
        )
    return _checks.name("symbol", symbol)


def _values(fn: Callable[[np.ndarray], Any], grid: np.ndarray, symbol: str) -> np.ndarray:
    """``fn`` on the grid; refused where no value is finite, or every finite one is below the smallest
    normal double (a throughput that underflows to 0 everywhere has no shape or maximum to read)."""
    vals = np.broadcast_to(np.asarray(fn(grid), dtype=float), grid.shape)
    where = f"{symbol} in [{_fmt(grid[0])}, {_fmt(grid[-1])}]"
    finite = np.isfinite(vals)
    if not finite.any():
        raise NotRepresentable(f"the throughput is not finite at any {where}")
    if np.all(np.abs(vals[finite]) < np.finfo(float).tiny):
        raise NotRepresentable(
            f"the throughput is 0 (or below 2.2e-308, the smallest normal double) at every {where} "
            "evaluated: it underflows there, so its shape and maximum cannot be read; search an interval "
            "where it is representable"
        )
    return vals


def integer_search(fn: Callable[[np.ndarray], Any], symbol: str, lower: int, upper: int) -> Optimum:
    """The largest of ``fn(k)`` over the integers ``lower..upper``, every one evaluated.

    Parameters
    ----------
    fn : callable
        Throughput of an array of values of the symbol (vectorized).
    symbol : str
        Its name, for the result and messages.
    lower, upper : int
        The interval, ``lower < upper``, at most :data:`MAX_GRID` integers.

    Returns
    -------
    Optimum

    Examples
    --------
    >>> integer_search(lambda n: -abs(n - 7.0), "n", 1, 20).argmax
    7
    """
    symbol = _checked(fn, symbol)
    lower = _checks.integer("lower", lower, minimum=-(2**53))
    upper = _checks.integer("upper", upper, minimum=lower + 1)
    if upper - lower + 1 > MAX_GRID:
        raise InvalidParameterError(
            "upper", upper, f"at most {MAX_GRID:,} integers from lower={lower} (memory of the grid)"
        )
    grid = np.arange(lower, upper + 1, dtype=float)
    vals = _values(fn, grid, symbol)
    finite = np.isfinite(vals)
    i = int(np.argmax(np.where(finite, vals, -np.inf)))
    k, best = int(grid[i]), float(vals[i])
    interior = 0 < i < grid.size - 1 and bool(finite[i - 1] and finite[i + 1])
    evidence = (
        f"X({k - 1}) = {_fmt(vals[i - 1])} <= X({k}) = {_fmt(best)} >= X({k + 1}) = {_fmt(vals[i + 1])}; "
        f"the largest of X({lower}..{upper})"
        if interior
        else f"the largest of X({lower}..{upper})"
    )
    return Optimum(symbol, k, best, interior, lower, upper, _monotone(vals[finite]), evidence)


def continuous_search(
    fn: Callable[[np.ndarray], Any], symbol: str, lower: float, upper: float, points: int = GRID_POINTS
) -> Optimum:
    """The largest of ``fn(x)`` on ``[lower, upper]``: a grid, then Brent's method between neighbours.

    The grid is log-spaced when ``upper / lower > 100`` (with ``lower = 0``
    kept as the first point and the rest log-spaced from ``upper * 1e-9``),
    else linear. ``points`` is an integer from 3 (both ends and one point
    between: fewer has no interior, and with ``lower = 0`` two points did not
    reach ``upper``) to :data:`MAX_GRID` (the grid and its values are held at
    once, as :func:`integer_search`'s).

    Examples
    --------
    >>> opt = continuous_search(lambda x: x * np.exp(-x), "T", 0.0, 50.0)
    >>> round(opt.argmax, 6), opt.interior
    (1.0, True)
    """
    from scipy import optimize as sopt

    symbol = _checked(fn, symbol)
    points = _checks.integer("points", points, minimum=3, maximum=MAX_GRID)
    lower = _checks.real("lower", lower)
    upper = _checks.real("upper", upper)
    if not upper > lower:
        raise InvalidParameterError("upper", upper, f"a finite number > lower = {_fmt(lower)}")
    if lower > 0 and upper / lower > 100:
        grid = np.geomspace(lower, upper, points)
    elif lower == 0 and upper > 0:
        grid = np.concatenate([[0.0], np.geomspace(upper * 1e-9, upper, points - 1)])
    else:
        grid = np.linspace(lower, upper, points)
    vals = _values(fn, grid, symbol)
    finite = np.isfinite(vals)
    i = int(np.argmax(np.where(finite, vals, -np.inf)))
    monotone = _monotone(vals[finite])
    interior = 0 < i < grid.size - 1 and bool(finite[i - 1] and finite[i + 1])
    if not interior:
        return Optimum(
            symbol, float(grid[i]), float(vals[i]), False, lower, upper, monotone,
            f"the largest of {points} grid points on [{_fmt(lower)}, {_fmt(upper)}]",
        )  # fmt: skip
    a, b = float(grid[i - 1]), float(grid[i + 1])
    res = sopt.minimize_scalar(
        lambda x: -float(np.asarray(fn(np.array(x)), dtype=float)),
        bounds=(a, b),
        method="bounded",
        options={"xatol": 1e-12 * max(abs(b), 1.0)},
    )
    x, best = float(grid[i]), float(vals[i])
    if np.isfinite(res.fun) and -res.fun >= best:
        x, best = float(res.x), float(-res.fun)
    evidence = (
        f"X({_fmt(a)}) = {_fmt(vals[i - 1])} <= X({x:.6g}) = {_fmt(best)} >= X({_fmt(b)}) = "
        f"{_fmt(vals[i + 1])}; the best of {points} grid points on [{_fmt(lower)}, {_fmt(upper)}], "
        "refined by bounded Brent search"
    )
    return Optimum(symbol, x, best, True, lower, upper, monotone, evidence)


def _counterexample(expr: Any, sym: Any, point: Any, second: Any, others: Sequence[Any]) -> str:
    """Values of the other symbols at which ``point`` is a stationary point with ``X'' > 0``, or ''."""
    import sympy

    rng = np.random.default_rng(0)
    smallest = 1.0 if sym.is_integer else 0.0  # a counterexample at n = 0.3 workers would convince no one
    try:
        fp = sympy.lambdify(list(others), point, modules="numpy")
        fs = sympy.lambdify([sym, *others], second, modules="numpy")
    except Exception:  # noqa: BLE001 - lambdify cannot print every expression; then no counterexample
        return ""
    for _ in range(256):
        vals = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), len(others)))
        with np.errstate(all="ignore"):
            try:
                x = complex(fp(*vals))
                if abs(x.imag) > 1e-12 * max(1.0, abs(x.real)) or x.real <= smallest:
                    continue
                s2 = float(np.real(fs(x.real, *vals)))
            except (TypeError, ValueError, ZeroDivisionError, OverflowError):
                continue
        if np.isfinite(s2) and s2 > 0:
            at = ", ".join(f"{o}={v:.3g}" for o, v in zip(others, vals, strict=True))
            return f"; it is a minimum, not a maximum, at {at} ({sym} = {x.real:.4g}, X'' = {s2:.3g} > 0)"
    return ""


#: Largest expression (``sympy.count_ops``) that :func:`symbolic_search` differentiates and solves.
#: Every scheme's closed form is below 50 except ``AsyncPS.formula(workers=N)``: 110 at N = 2, 340 at
#: N = 3, 805 at N = 4 (where building the derivative's numerator as a polynomial took 1.2 s, and 24 s
#: at N = 8 in G).
MAX_SYMBOLIC_OPS = 400
#: Largest degree in the symbol of the numerator of ``dX/dx`` that is solved when its coefficients are
#: symbolic and large: the quadratic formula stays small, Cardano's and Ferrari's do not.
MAX_SYMBOLIC_DEGREE = 2
#: Degree 3 and 4 are solved only when the numerator is this small (``count_ops``).
MAX_SMALL_OPS = 40
#: Largest curvature expression given to ``sympy.simplify`` (its multivariate GCDs have no bound:
#: the hierarchical all-reduce's d2X/dn2 at its stationary point ran for minutes).
MAX_SIMPLIFY_OPS = 150


def symbolic_obstacle(expr: Any, sym: Any) -> str | None:
    """Why :func:`symbolic_search` would not try ``expr`` (too large, no polynomial equation), or None.

    Cheap checks only, in this order: the size of ``expr``
    (:data:`MAX_SYMBOLIC_OPS`); the numerator of ``dX/dx``, less factors
    that SymPy proves positive (``exp(-x)``), must be a polynomial in ``x``
    of degree at most :data:`MAX_SYMBOLIC_DEGREE` (or 4, when it has at most
    :data:`MAX_SMALL_OPS` operations).

    Examples
    --------
    >>> import sympy
    >>> n, a = sympy.symbols("n a", positive=True)
    >>> symbolic_obstacle(n / (1 + a * n**2), n) is None
    True
    >>> print(symbolic_obstacle(n * sympy.exp(-n) + sympy.harmonic(n), n))
    dX/dn = 0 is not a polynomial equation in n (it involves exp(n), zeta(2, n + 1))
    """
    return _equation(expr, sym)[0]


def _non_polynomial_parts(expr: Any, sym: Any, most: int = 3) -> list[str]:
    """The smallest subexpressions of ``expr`` in ``sym`` that are not polynomial in it (for messages)."""
    found: set[Any] = set()
    todo = [expr]
    while todo:
        x = todo.pop()
        if x == sym or not x.has(sym):
            continue
        if x.is_Add or x.is_Mul:
            todo.extend(x.args)
        elif x.is_Pow and x.exp.is_Integer and x.exp >= 0:
            todo.append(x.base)
        else:
            found.add(x)
    texts = sorted({str(x) for x in found}, key=lambda t: (len(t), t))
    return [t if len(t) <= 60 else t[:57] + "..." for t in texts[:most]]


def _equation(expr: Any, sym: Any) -> tuple[str | None, Any, Any, Any]:
    """``(obstacle, N0, P, D)``: ``dX/dx = P * N0 / D`` with ``N0`` a polynomial in ``x`` and ``P > 0``."""
    import sympy

    ops = sympy.count_ops(expr)
    if ops > MAX_SYMBOLIC_OPS:
        return (
            f"the throughput has {ops:,} operations > {MAX_SYMBOLIC_OPS} (solving dX/d{sym} = 0 symbolically "
            "would not finish in reasonable time)",
            None, None, None,
        )  # fmt: skip
    num, den = sympy.fraction(sympy.together(sympy.diff(expr, sym)))
    poly, positive = [], []
    for factor in sympy.Mul.make_args(num):
        if not factor.has(sym) or factor.is_polynomial(sym):
            poly.append(factor)
        elif factor.is_positive:  # exp(-x), x**(1/2): never zero, the sign of X'' is N0's
            positive.append(factor)
        else:
            parts = ", ".join(_non_polynomial_parts(factor, sym))
            why = f"dX/d{sym} = 0 is not a polynomial equation in {sym} (it involves {parts})"
            return why, None, None, None
    n0 = sympy.Mul(*poly)
    degree = sympy.degree(n0, sym)
    size = sympy.count_ops(n0)
    if degree > 4 or (degree > MAX_SYMBOLIC_DEGREE and size > MAX_SMALL_OPS):
        return (
            f"dX/d{sym} = 0 is a polynomial equation of degree {degree} in {sym} with {size:,} operations "
            f"(at most degree {MAX_SYMBOLIC_DEGREE}, or 4 with at most {MAX_SMALL_OPS} operations, is "
            "solved symbolically)",
            None, None, None,
        )  # fmt: skip
    return None, n0, sympy.Mul(*positive), den


def _curvature(n0: Any, positive: Any, den: Any, sym: Any, root: Any) -> Any:
    """``d2X/dx2`` at a root of ``N0``: ``P(r) N0'(r) / D(r)`` (the quotient rule's other terms vanish)."""
    import sympy

    curv = sympy.diff(n0, sym).subs(sym, root) * positive.subs(sym, root) / den.subs(sym, root)
    if sympy.count_ops(curv) <= MAX_SIMPLIFY_OPS:
        return sympy.simplify(curv)
    return sympy.together(curv)


def _pole(expr: Any, sym: Any) -> Any:
    """The least ``x > 0`` where the denominator of ``expr`` vanishes, None where it cannot, else "unknown".

    A stationary point is the maximum over ``x > 0`` only if ``X`` is continuous there: ``X = -(x -
    5)**2 - 1/(x - 1)`` has one stationary point, a maximum near 5.03, and grows without bound as ``x``
    nears 1 from below.
    """
    import sympy

    den = sympy.fraction(sympy.together(expr))[1]
    if not den.has(sym) or den.is_positive or den.is_negative:
        return None
    if den.free_symbols == {sym} and den.is_polynomial(sym):
        roots = [r for r in sympy.Poly(den, sym).real_roots() if r > 0]
        return min(roots, key=float) if roots else None
    return "unknown"


def symbolic_search(expr: Any, sym: Any, hint: str = "") -> Optimum:
    """The stationary point of ``expr`` in ``sym`` that SymPy proves is a maximum.

    Solves ``dX/dx = 0`` for ``x > 0`` (``x`` treated as continuous) and
    keeps a root only where SymPy proves ``d2X/dx2 < 0`` there. Bounded in
    time: an expression that is too large, or whose equation is not a
    polynomial of small degree in ``x``, is refused at once (see
    :func:`symbolic_obstacle`), and ``d2X/dx2`` is simplified only while it
    is small (:data:`MAX_SIMPLIFY_OPS`).

    Parameters
    ----------
    expr : sympy.Expr
        The throughput.
    sym : sympy.Symbol
        The symbol optimized over.
    hint : str
        Appended to the error message (what to do instead).

    Raises
    ------
    NotRepresentable
        No stationary point is a proven maximum, or several are (which is
        largest depends on the other symbols), or the equation is too large
        to solve (the message says why).

    Examples
    --------
    >>> import sympy
    >>> n, a = sympy.symbols("n a", positive=True)
    >>> print(symbolic_search(n / (1 + a * n**2), n))
    n = 1/sqrt(a): interior maximum X = 1/(2*sqrt(a)) (d2X/dn2 = -sqrt(a)/2 < 0 there, proved by SymPy; ...)
    """
    import sympy

    obstacle, n0, positive, den = _equation(expr, sym)
    if obstacle is not None:
        raise NotRepresentable(f"no symbolic optimum attempted: {obstacle}" + hint)
    try:
        if not n0.has(sym):
            roots = []
        elif n0.free_symbols == {sym}:  # numeric coefficients: the real roots exactly (radicals or CRootOf)
            roots = sorted(set(sympy.Poly(n0, sym).real_roots()), key=lambda r: float(r))
        else:
            roots = sympy.solve(n0, sym)
    except NotImplementedError:
        roots = []
    roots = [r for r in roots if r.is_real is not False and r.is_positive is not False]
    maxima, unsure = [], []
    for r in roots:
        curv = _curvature(n0, positive, den, sym, r)
        if curv.is_negative:
            maxima.append((r, curv))
        elif curv.is_nonnegative is not True:
            unsure.append((r, curv))
    if len(maxima) == 1 and not unsure:
        r, curv = maxima[0]
        if len(roots) > 1:  # a proved minimum beside it: X rises again past it (or falls before it)
            minima = ", ".join(f"{sym} = {sympy.sstr(m)}" for m in roots if m is not r)
            raise NotRepresentable(
                f"{sym} = {sympy.sstr(r)} is a local maximum (d2X/d{sym}2 = {sympy.sstr(curv)} < 0 there) "
                f"but not the only stationary point ({minima}, where d2X/d{sym}2 >= 0, too): X may be "
                f"larger toward an end of {sym} > 0" + hint
            )
        pole = _pole(expr, sym)
        if pole is not None and pole != "unknown":
            raise NotRepresentable(
                f"{sym} = {sympy.sstr(r)} is the only stationary point and a local maximum, but X's "
                f"denominator vanishes at {sym} = {sympy.sstr(pole)} > 0 (X is not continuous there)" + hint
            )
        only = "the only stationary point" + ("" if r.is_positive else f" (where {sym} > 0)")
        if pole == "unknown":
            only += f"; X's denominator is not proved nonzero for {sym} > 0 (SymPy cannot decide)"
        evidence = f"d2X/d{sym}2 = {sympy.sstr(curv)} < 0 there, proved by SymPy; {only}"
        if sym.is_integer:
            evidence += f"; {sym} treated as continuous: the integer optimum is floor or ceil of it"
        return Optimum(sym.name, r, expr.subs(sym, r), True, 0, sympy.oo, None, evidence)
    if maxima or len(unsure) > 1:
        found = ", ".join(sympy.sstr(r) for r, _ in maxima + unsure)
        why = f"{sym} = {found} are stationary points; which is the largest depends on the other symbols"
    elif unsure:
        r, curv = unsure[0]
        others = sorted(expr.free_symbols - {sym}, key=lambda s: s.name)
        second = sympy.diff(expr, sym, 2)
        why = (
            f"the only stationary point {sym} = {sympy.sstr(r)} is not proved to be a maximum (SymPy cannot "
            f"decide the sign of d2X/d{sym}2 there)" + _counterexample(expr, sym, r, second, others)
        )
    else:
        why = f"SymPy finds no interior maximum of the throughput in {sym}"
    raise NotRepresentable(why + hint)
