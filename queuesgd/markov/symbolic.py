"""Steady state of a CTMC exactly: SymPy expressions in a polynomial ring, not ``simplify`` per entry.

The balance equations ``pi Q = 0``, ``sum(pi) = 1`` of a generator given by
its off-diagonal entries (numbers or SymPy expressions) are solved *exactly*
over a polynomial ring, not with SymPy's generic ``Matrix.solve`` plus
``simplify`` per entry (LINE's symbolic CTMC takes 13.6 s for 6 states and
minutes for 10 that way). Used by the GSPN engine
(:func:`queuesgd.petri.symbolic.symbolic_steady_state`) and by anyone with a
symbolic generator.

1. Every rate is made exact (:func:`exact`): a Python or SymPy float becomes
   the simplest rational that rounds to it (denominator <= 10**6:
   ``0.1 -> 1/10``, ``0.333... -> 1/3``), else its shortest round-trip
   decimal, so rational rates give exact rational probabilities.
2. The entries are converted once into a SymPy polynomial domain
   (``construct_domain``: ``ZZ``/``QQ`` for numbers, ``ZZ[a, b, c]`` for
   symbolic rates; a fraction field is cleared to its ring row by row).
3. With ``pi_0 = 1`` and the balance equation of state 0 dropped, the reduced
   ``(n-1) x (n-1)`` system is solved fraction-free with
   ``DomainMatrix.solve_den(method="charpoly")`` (over ``QQ``, an LU solve).
   The reduced matrix is a principal submatrix of an irreducible generator,
   hence nonsingular.
4. The unnormalized vector is divided by its total; one GCD per entry puts it
   in lowest terms, and each entry becomes an expression once at the end.

The cost grows steeply with the number of states ``S`` and of symbols ``k``
(the ring's generators), so a chain whose work estimate
``(S - 1)**4 * C(S - 1 + k, k)`` (:func:`symbolic_ctmc_work`) exceeds
:data:`MAX_SYMBOLIC_CTMC_WORK` is refused at once
(:func:`check_symbolic_ctmc`), pointing to the numeric solver.

Examples
--------
>>> import sympy
>>> lam, mu = sympy.symbols("lambda mu", positive=True)
>>> steady_state_symbolic({(0, 1): lam, (1, 0): mu}, 2).tolist()
[mu/(lambda + mu), lambda/(lambda + mu)]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.markov.generator import check_irreducible

__all__ = [
    "FORMS",
    "MAX_SYMBOLIC_CTMC_WORK",
    "SOLVERS",
    "check_irreducible_pattern",
    "check_symbolic_ctmc",
    "exact",
    "steady_state_symbolic",
    "symbolic_ctmc_work",
]

_MAX_DENOMINATOR = 10**6

#: Accepted values of ``form``: how each probability is written at the end.
FORMS = ("factor", "cancel")
#: Accepted values of ``method``: fraction-free over the ring, or Gauss over its fraction field.
SOLVERS = ("charpoly", "field")

#: Largest work estimate (:func:`symbolic_ctmc_work`) that :func:`steady_state_symbolic` takes on by default.
#: Measured on a 2-core machine (SymPy 1.14), chains at the limit take 1-3 s: random sparse chains of
#: 150 states with rational rates (k = 0) 2.9 s, a birth-death chain of 55 states in one symbol 2.8 s,
#: 18 states in 4 symbols 1.1 s, 13 in 6 symbols 1.3 s, 11 in 8 symbols 3.1 s; twice the estimate
#: took up to 6 s, and the time grows about as the estimate (36 states in 3 symbols: 33 s).
MAX_SYMBOLIC_CTMC_WORK = 500_000_000


def symbolic_ctmc_work(states: int, symbols: int) -> int:
    """Work estimate of the exact steady state: ``(states - 1)**4 * C(states - 1 + symbols, symbols)``.

    The reduced system has ``S - 1`` unknowns; its fraction-free solve
    (Berkowitz's characteristic polynomial) takes about ``(S - 1)**4`` ring
    operations on polynomials of degree up to ``S - 1`` in ``k`` symbols,
    which have up to ``C(S - 1 + k, k)`` terms (``k = 0``: rationals). The
    estimate was fitted to measured times of birth-death, reset, closed-cycle
    and random sparse chains with 0 to 12 symbols (the largest size solved in
    about 3 s is predicted within 30%); chains whose rates have little
    structure in common (a birth-death chain with a symbol per rate) can be
    much cheaper than it says.

    Examples
    --------
    >>> symbolic_ctmc_work(32, 2)        # 31**4 * C(33, 2) = 923,521 * 528
    487619088
    >>> symbolic_ctmc_work(150, 0)       # rational rates: 149**4
    492884401
    """
    states, symbols = int(states), int(symbols)
    if states <= 1:
        return 0
    return (states - 1) ** 4 * math.comb(states - 1 + symbols, symbols)


def check_symbolic_ctmc(states: int, symbols: int, max_work: int | None = MAX_SYMBOLIC_CTMC_WORK) -> None:
    """Raise :class:`~queuesgd.errors.StateSpaceTooLargeError` if the exact steady state would take too long.

    The limit is ``max_work`` (default :data:`MAX_SYMBOLIC_CTMC_WORK`) on
    :func:`symbolic_ctmc_work`; ``None`` means no limit. The message gives the
    largest chain allowed with as many symbols and the numeric alternative.

    Examples
    --------
    >>> check_symbolic_ctmc(32, 2)
    >>> check_symbolic_ctmc(33, 2)
    Traceback (most recent call last):
    ...
    queuesgd.errors.StateSpaceTooLargeError: exact steady state of a 33-state chain in 2 symbols: ...
    """
    if max_work is None:
        return
    max_work = _checks.integer("max_work", max_work)
    work = symbolic_ctmc_work(states, symbols)
    if work <= max_work:
        return
    largest = 1
    while symbolic_ctmc_work(largest + 1, symbols) <= max_work:
        largest += 1
    raise StateSpaceTooLargeError(
        f"exact steady state of a {states:,}-state chain in {symbols} symbols: work estimate "
        f"(S - 1)**4 * C(S - 1 + k, k) = {work:,} > max_work={max_work:,} (at most {largest:,} states "
        f"with {symbols} symbols; the time grows about as the estimate). Substitute numbers and solve "
        "numerically (queuesgd.markov.steady_state, or net.solve() without symbolic=True: sparse, "
        "millions of states), use a closed form, or pass max_work=None to steady_state_symbolic "
        "(symbolic_steady_state for a net) to try anyway"
    )


def exact(value: Any, field: str = "rate") -> Any:
    """``value`` as an exact SymPy expression (floats -> rationals, see :func:`_rational`).

    Examples
    --------
    >>> exact(0.1), exact(1 / 3), exact(2)
    (1/10, 1/3, 2)
    """
    import sympy

    if isinstance(value, bool):
        raise InvalidParameterError(field, value, "a number or a SymPy expression")
    if isinstance(value, numbers.Integral):
        return sympy.Integer(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, sympy.Basic):
        return _rational(float(value), field, value)
    if isinstance(value, sympy.Basic):
        floats = value.atoms(sympy.Float)
        if floats:
            value = value.xreplace({x: _rational(float(x), field, value) for x in floats})
        return value
    raise InvalidParameterError(field, value, "a number or a SymPy expression")


def _rational(f: float, field: str, value: Any) -> Any:
    """The simplest rational a float stands for.

    The rational with denominator <= 10**6 closest to ``f`` if it rounds back
    to ``f`` exactly (``0.1 -> 1/10``, ``1/3.0 -> 1/3``: branching
    probabilities computed in floating point from numeric weights), else the
    shortest decimal that round-trips (``repr``): ``0.123456789 -> 123456789/10**9``.
    """
    import sympy

    if not math.isfinite(f):
        raise InvalidParameterError(field, value, "a finite number or a SymPy expression")
    frac = Fraction(f).limit_denominator(_MAX_DENOMINATOR)
    if float(frac) == f:
        return sympy.Rational(frac.numerator, frac.denominator)
    return sympy.Rational(repr(f))


def check_irreducible_pattern(entries: Mapping[tuple[int, int], Any], n: int) -> None:
    """Structural irreducibility (symbolic rates are positive, so the pattern decides).

    Examples
    --------
    >>> check_irreducible_pattern({(0, 1): 1}, 2)        # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: ...
    """
    import scipy.sparse as sp

    if not entries:
        if n > 1:
            raise InvalidParameterError(
                "Q", f"a chain of {n} states with no transitions", "an irreducible generator"
            )
        return
    ij = np.array(list(entries), dtype=np.int64).reshape(-1, 2)
    check_irreducible(sp.csr_matrix((np.ones(len(ij)), (ij[:, 0], ij[:, 1])), shape=(n, n)))


def _to_ring_rows(rows: list[dict[int, Any]], K: Any) -> tuple[Any, list[dict[int, Any]]]:
    """Clear the denominators of a fraction field ``K`` row by row (rows are equations)."""
    R = K.get_ring()
    out = []
    for row in rows:
        lcm = R.one
        for v in row.values():
            lcm = R.lcm(lcm, v.denom)
        out.append({j: v.numer * R.exquo(lcm, v.denom) for j, v in row.items()})
    return R, out


def steady_state_symbolic(
    entries: Mapping[tuple[int, int], Any],
    n: int,
    *,
    form: str = "cancel",
    method: str = "charpoly",
    max_work: int | None = MAX_SYMBOLIC_CTMC_WORK,
) -> np.ndarray:
    """Exact steady state of the CTMC with off-diagonal rates ``entries``.

    Parameters
    ----------
    entries : mapping ``(i, j) -> rate``
        Off-diagonal generator entries (SymPy expressions or numbers);
        duplicates are not possible in a mapping, diagonal keys are ignored.
    n : int
        Number of states.
    form : {"factor", "cancel"}
        How each probability is written: numerator and denominator factored,
        or expanded (faster for large results).
    method : {"charpoly", "field"}
        Fraction-free solve over the polynomial ring (``DomainMatrix.solve_den``
        with the characteristic-polynomial method), or Gauss over its
        fraction field (slower; a second road for tests).
    max_work : int or None
        Refuse chains whose work estimate :func:`symbolic_ctmc_work` (from
        ``n`` and the number of symbols in the rates) exceeds it; ``None``
        tries any size.

    Returns
    -------
    ndarray of object, shape (n,)
        SymPy expressions summing to 1.

    Raises
    ------
    StateSpaceTooLargeError
        If the work estimate exceeds ``max_work`` (checked before any
        symbolic work; see :func:`check_symbolic_ctmc`).

    Examples
    --------
    A birth-death chain of three states, birth rate ``lam``, death rate ``mu``:

    >>> import sympy
    >>> lam, mu = sympy.symbols("lam mu", positive=True)
    >>> pi = steady_state_symbolic({(0, 1): lam, (1, 2): lam, (1, 0): mu, (2, 1): mu}, 3, form="factor")
    >>> sympy.simplify(pi[1] / pi[0]), sympy.simplify(pi[2] / pi[1])
    (lam/mu, lam/mu)
    """
    import sympy

    form = _checks.choice("form", form, FORMS)
    method = _checks.choice("method", method, SOLVERS)
    n = _checks.integer("n", n)
    check_symbolic_ctmc(n, 0, max_work)  # the least work any rates give: refused before reading them
    clean = _exact_entries(entries, n)
    check_irreducible_pattern(clean, n)
    if n == 1:
        return np.array([sympy.Integer(1)], dtype=object)
    K, A, b = _reduced_system(clean, n)
    check_symbolic_ctmc(n, _symbol_count(K, clean), max_work)
    if K.is_Field:
        # Numbers (QQ) or an unstructured field (EX, algebraic): LU over the field is exact.
        x = A.to_dense().lu_solve(b.to_dense()).to_list_flat()
        vec = [K.one, *x]
        total = K.zero
        for v in vec:
            total += v
        exprs = [K.to_sympy(v / total) for v in vec]
        if not K.is_QQ:
            exprs = [sympy.factor(e) if form == "factor" else sympy.cancel(e) for e in exprs]
        return np.array(exprs, dtype=object)
    vec = _solve_over_ring(K, A, b, method)
    total = K.zero
    for v in vec:
        total += v
    if _leading_negative(K, total):
        vec, total = [-v for v in vec], -total
    return np.array(_as_exprs(K, vec, total, form), dtype=object)


def _symbol_count(K: Any, clean: Mapping[tuple[int, int], Any]) -> int:
    """The number of symbols of the solve: the ring's generators, 0 over ``QQ``, else the free symbols."""
    if K.is_QQ:
        return 0
    gens = getattr(K, "gens", None)
    if gens:
        return len(gens)
    return len(set().union(*(v.free_symbols for v in clean.values())))


def _exact_entries(entries: Mapping[tuple[int, int], Any], n: int) -> dict[tuple[int, int], Any]:
    """The off-diagonal entries, exact (:func:`exact`), zeros dropped, indices checked."""
    clean: dict[tuple[int, int], Any] = {}
    for (i, j), v in entries.items():
        if not (0 <= i < n and 0 <= j < n):
            raise InvalidParameterError("entries", (i, j), f"state indices in [0, {n})")
        if i != j:
            v = exact(v, f"Q[{i}, {j}]")
            if v != 0:
                clean[(i, j)] = clean.get((i, j), 0) + v
    return clean


def _reduced_system(clean: dict[tuple[int, int], Any], n: int) -> tuple[Any, Any, Any]:
    """``(K, A, b)``: the reduced balance equations ``A x = b`` as DomainMatrices over ``K``.

    Unknowns ``x = pi_1..pi_{n-1}`` (``pi_0 = 1``); equation ``j - 1`` is the
    balance of state ``j``: ``sum_{i>=1, i!=j} pi_i Q[i,j] - pi_j out_j = -Q[0,j]``.
    ``K`` is a field for numbers (``QQ``) and unstructured expressions, else a
    polynomial ring (a fraction field cleared row by row).
    """
    import sympy
    from sympy.polys.constructor import construct_domain
    from sympy.polys.matrices import DomainMatrix

    out_rate: dict[int, Any] = {}
    for (i, _j), v in clean.items():
        out_rate[i] = out_rate.get(i, 0) + v
    keys = list(clean)
    diag_states = list(range(1, n))
    K, elems = construct_domain(
        [clean[k] for k in keys] + [-out_rate.get(i, sympy.Integer(0)) for i in diag_states]
    )
    rows: list[dict[int, Any]] = [{} for _ in range(n - 1)]  # columns 0..n-2 = A, column n-1 = b
    for (i, j), v in zip(keys, elems[: len(keys)]):
        if j == 0:
            continue
        if i == 0:
            rows[j - 1][n - 1] = -v
        else:
            rows[j - 1][i - 1] = v
    for i, v in zip(diag_states, elems[len(keys) :]):
        rows[i - 1][i - 1] = v
    if K.is_FractionField:
        K, rows = _to_ring_rows(rows, K)
    elif K.is_ZZ:
        from sympy import QQ

        K, rows = QQ, [{c: QQ.convert_from(v, K) for c, v in row.items()} for row in rows]
    if K.is_Field and not K.is_Exact:  # pragma: no cover - floats were rationalized above
        raise InvalidParameterError("rates", "inexact floats", "numbers or exact SymPy expressions")
    A = DomainMatrix(
        {r: {c: v for c, v in row.items() if c < n - 1 and v} for r, row in enumerate(rows)},
        (n - 1, n - 1),
        K,
    )
    b = DomainMatrix({r: {0: row[n - 1]} for r, row in enumerate(rows) if row.get(n - 1)}, (n - 1, 1), K)
    return K, A, b


def _solve_over_ring(K: Any, A: Any, b: Any, method: str) -> list[Any]:
    """``[den, x_1 den, ...]``: the unnormalized steady state over the ring ``K``, without common factor."""
    if method == "field" or not hasattr(A, "solve_den"):
        # SymPy < 1.13 has no solve_den: Gauss over the fraction field (correct, slower).
        F = K.get_field()
        x = A.convert_to(F).to_dense().lu_solve(b.convert_to(F).to_dense()).to_list_flat()
        den = K.one
        for v in x:
            den = K.lcm(den, v.denom)
        xs = [v.numer * K.exquo(den, v.denom) for v in x]
    else:
        xnum, den = A.to_dense().solve_den(b.to_dense(), method=method)
        xs = xnum.to_list_flat()
    vec = [den, *xs]
    g = K.zero
    for v in vec:
        g = K.gcd(g, v)
    return [K.exquo(v, g) for v in vec]


def _as_exprs(K: Any, nums: list[Any], den: Any, form: str) -> list[Any]:
    """Each ``num / den`` (ring elements) in lowest terms, as one SymPy expression.

    One GCD per entry in the ring; each distinct denominator is converted (and
    factored) once, since most entries share the full denominator.
    """
    import sympy

    cache: dict[Any, Any] = {}

    def expr(p: Any) -> Any:
        key = tuple(sorted(p.items())) if hasattr(p, "items") else p
        if key not in cache:
            e = K.to_sympy(p)
            cache[key] = sympy.factor(e) if form == "factor" else e
        return cache[key]

    out = []
    for num in nums:
        if not num:
            out.append(sympy.Integer(0))
            continue
        g = K.gcd(num, den)
        n_, d_ = K.exquo(num, g), K.exquo(den, g)
        if _leading_negative(K, d_):
            n_, d_ = -n_, -d_
        n_expr = K.to_sympy(n_)
        if form == "factor":
            n_expr = sympy.factor(n_expr)
        out.append(n_expr / expr(d_))
    return out


def _leading_negative(K: Any, p: Any) -> bool:
    lc = p.LC if hasattr(p, "LC") else p
    return bool(K.dom.is_negative(lc)) if hasattr(K, "dom") else bool(lc < 0)
