"""A throughput formula as a SymPy expression with named symbols.

:func:`queuesgd.derive` returns a :class:`Formula`: the scheme's throughput in
samples per second, in the symbols the scheme's documentation uses (``n``
workers, ``t`` mean compute time or ``mu`` compute rate, ``G`` gradient
bytes, ``B`` bandwidth, ``alpha`` latency, ...). A formula can be printed
(``str``, :meth:`Formula.latex`), specialised (:meth:`Formula.subs`),
evaluated on NumPy arrays (:meth:`Formula.evaluate`, one ``lambdify``),
taken to a limit (:meth:`Formula.limit`) and optimized
(:meth:`Formula.optimize`).

Examples
--------
>>> import sympy
>>> n, t = sympy.symbols("n t", positive=True)
>>> f = Formula(n / (t + n), {"n": n, "t": t}, {"n": "workers", "t": "seconds"}, "toy")
>>> f.evaluate(n=[1, 3], t=1.0).tolist()
[0.5, 0.75]
>>> f.limit("n")
1
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.optimum import Optimum

__all__ = ["Formula", "INTEGER_SYMBOLS", "Optimum"]

#: Symbols that only take integer values (optimized over integers).
INTEGER_SYMBOLS = frozenset({"n", "b", "c", "s", "m", "k", "g"})
# Rates and bandwidths: zero is not a value they take (the throughput would divide by it).
_RATES = frozenset({"mu", "B", "B_intra"})
# A decimal number, the only strings Formula.limit(to=...) reads besides oo, -oo and symbol names.
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,4})?")

# Unit strings accepted by evaluate(), per symbol kind.
_PARSERS = {
    "B": units.parse_bandwidth,
    "B_intra": units.parse_bandwidth,
    "G": units.parse_bytes,
    "P": units.parse_bytes,
    "S": units.parse_bytes,
    "alpha": units.parse_seconds,
    "alpha_intra": units.parse_seconds,
    "t": units.parse_seconds,
    "u": units.parse_seconds,
    "d": units.parse_seconds,
    "T": units.parse_seconds,
}


def _numeric_modules() -> list[Any]:
    from queuesgd.orderstats import harmonic

    return [{"qsgd_harmonic": harmonic, "ceiling": np.ceil, "floor": np.floor}, "numpy", "scipy"]


def _for_lambdify(expr: Any) -> Any:
    """Hide ``harmonic`` from SymPy's printers.

    SymPy 1.13's NumPy printer rewrites ``harmonic(n)`` as
    ``polygamma(0, n + 1) + euler_gamma`` without parentheses, so
    ``mu/harmonic(n)`` evaluates as ``mu/polygamma(0, n + 1) + euler_gamma``.
    A plain function name avoids the rewrite; it is bound to
    :func:`queuesgd.orderstats.harmonic`.
    """
    import sympy

    return expr.replace(sympy.harmonic, sympy.Function("qsgd_harmonic"))


def _outside(rel: Any, why: str, values: Mapping[str, Any]) -> InvalidParameterError:
    """The error for ``values`` outside a formula's condition ``rel`` (named by its symbols)."""
    import sympy

    names = sorted(x.name for x in rel.free_symbols)
    got = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(values.items()))
    return InvalidParameterError(",".join(names), got, f"{sympy.sstr(rel)}: {why}")


@dataclass(frozen=True)
class Formula:
    """A closed-form throughput (samples per second) in named SymPy symbols.

    Attributes
    ----------
    expr : sympy.Expr
        The expression.
    symbols : mapping of str to sympy.Symbol
        Every free symbol of ``expr`` by name.
    meaning : mapping of str to str
        What each symbol stands for, with its unit.
    name : str
        What the formula is (``"sync-ps throughput, exponential compute"``).
    assumptions : str
        The model's assumptions in one or two sentences.
    conditions : tuple of (sympy relational, str)
        Where the expression holds: each a relation of its symbols (``S > 16 r**2``) and why.
        :meth:`evaluate` and :meth:`subs` refuse values outside them (the expression would be a
        number of another model there), naming the relation's symbols. A condition may name a
        symbol the expression does not have (``t >= g``, the GPUs per node ``g``):
        :meth:`evaluate` needs its value too (:attr:`condition_names`).
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    expr: Any
    symbols: Mapping[str, Any]
    meaning: Mapping[str, str]
    name: str
    assumptions: str = ""
    conditions: tuple[tuple[Any, str], ...] = ()
    _lambdified: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        import sympy

        if not isinstance(self.expr, sympy.Expr):
            raise InvalidParameterError("Formula.expr", self.expr, "a SymPy expression, e.g. n / t")
        if not isinstance(self.symbols, Mapping) or not all(
            isinstance(k, str) and isinstance(v, sympy.Symbol) and v.name == k
            for k, v in self.symbols.items()
        ):
            raise InvalidParameterError(
                "Formula.symbols", self.symbols, "a mapping of each symbol's name to the SymPy Symbol"
            )
        if not isinstance(self.meaning, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.meaning.items()
        ):
            raise InvalidParameterError("Formula.meaning", self.meaning, "a mapping of symbol names to str")
        if not isinstance(self.name, str):
            raise InvalidParameterError("Formula.name", self.name, "a str")
        if not isinstance(self.assumptions, str):
            raise InvalidParameterError("Formula.assumptions", self.assumptions, "a str")
        free = {s.name for s in self.expr.free_symbols}
        missing = free - set(self.symbols)
        if missing:
            raise InvalidParameterError(
                "Formula.symbols", sorted(self.symbols), f"a name for {sorted(missing)}"
            )
        object.__setattr__(self, "symbols", MappingProxyType(dict(self.symbols)))
        object.__setattr__(self, "meaning", MappingProxyType(dict(self.meaning)))
        object.__setattr__(self, "conditions", self._checked_conditions(self.conditions))

    def _checked_conditions(self, conditions: Any) -> tuple[tuple[Any, str], ...]:
        """``conditions`` as a tuple of ``(relation, why)``: one already true dropped, a false one refused."""
        import sympy

        accepted = "a tuple of (relation of the formula's symbols, str) pairs, ((S > 16 * r**2, 'why'),)"
        if not isinstance(conditions, (tuple, list)):
            raise InvalidParameterError("Formula.conditions", conditions, accepted)
        out = []
        for i, item in enumerate(conditions):
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], str)):
                raise InvalidParameterError(f"Formula.conditions[{i}]", item, accepted)
            rel, why = item
            if rel is sympy.true or rel is True:
                continue
            if rel is sympy.false or rel is False:
                raise InvalidParameterError(f"Formula.conditions[{i}]", why, "values where the formula holds")
            if not isinstance(rel, sympy.logic.boolalg.Boolean) or not {
                x.name for x in rel.free_symbols
            } <= set(self.symbols):
                raise InvalidParameterError(f"Formula.conditions[{i}]", rel, accepted)
            out.append((rel, why))
        return tuple(out)

    def _check_conditions(self, values: Mapping[str, Any]) -> None:
        """Refuse ``values`` (numbers or arrays by name) where a condition does not hold."""
        import sympy

        for rel, why in self.conditions:
            names = sorted(x.name for x in rel.free_symbols)
            if not all(k in values for k in names):
                continue
            args = np.broadcast_arrays(*(np.asarray(values[k], dtype=float) for k in names))
            fn = self._lambdified.get(rel)  # evaluate's cache: optimize's searches call it per point
            if fn is None:
                fn = self._lambdified[rel] = sympy.lambdify([self.symbols[k] for k in names], rel, "numpy")
            ok = np.broadcast_to(np.asarray(fn(*args), dtype=bool), args[0].shape)
            if not ok.all():
                i = np.flatnonzero(~ok)[0]
                raise _outside(rel, why, {k: float(a.flat[i]) for k, a in zip(names, args)})

    @classmethod
    def pruned(
        cls,
        expr: Any,
        symbols: Mapping[str, Any],
        meaning: Mapping[str, str],
        name: str,
        assumptions: str = "",
        conditions: tuple[tuple[Any, str], ...] = (),
    ) -> Formula:
        """A formula of ``expr`` with only the symbols it still contains, by name, and their meanings.

        For a model that builds its expression from a full set of symbols,
        some of which drop out (a term that vanishes for the parameters).

        Examples
        --------
        >>> import sympy
        >>> n, B = sympy.Symbol("n", positive=True), sympy.Symbol("B", positive=True)
        >>> f = Formula.pruned(2 * n, {"n": n, "B": B}, {"n": "workers", "B": "bandwidth"}, "x")
        >>> sorted(f.symbols), dict(f.meaning)
        (['n'], {'n': 'workers'})
        """
        free = {s.name for s in expr.free_symbols}
        for rel, _ in conditions:
            free |= {s.name for s in getattr(rel, "free_symbols", ())}
        kept = {s.name: s for s in symbols.values() if s.name in free}
        return cls(expr, kept, {k: meaning[k] for k in kept if k in meaning}, name, assumptions, conditions)

    # ---- printing ---------------------------------------------------------------------
    def __str__(self) -> str:
        import sympy

        names = (*self.free_names, *self.condition_names)
        return (
            f"{self.name}:\n  X = {sympy.sstr(self.expr)}\n"
            + "".join(f"  where {sympy.sstr(rel)}: {why}\n" for rel, why in self.conditions)
            + "\n".join(f"  {k:>10}: {self.meaning.get(k, '')}" for k in names)
        )

    def latex(self) -> str:
        """LaTeX of ``X = expr``.

        Examples
        --------
        >>> import sympy
        >>> n = sympy.Symbol("n", positive=True)
        >>> Formula(2 * n, {"n": n}, {}, "x").latex()
        'X = 2 n'
        """
        import sympy

        return "X = " + sympy.latex(self.expr)

    def _repr_latex_(self) -> str:
        """``X = expr`` as display math, which Jupyter renders when a cell's value is a Formula.

        Examples
        --------
        >>> import sympy
        >>> n = sympy.Symbol("n", positive=True)
        >>> print(Formula(2 * n, {"n": n}, {}, "x")._repr_latex_())
        $\\displaystyle X = 2 n$
        """
        return f"$\\displaystyle {self.latex()}$"

    @property
    def free_names(self) -> tuple[str, ...]:
        """Names of the symbols still free in ``expr``, sorted."""
        return tuple(sorted(s.name for s in self.expr.free_symbols))

    @property
    def condition_names(self) -> tuple[str, ...]:
        """Names of the symbols only the conditions have, sorted: :meth:`evaluate` needs them too.

        Examples
        --------
        >>> import sympy
        >>> t, g, C = sympy.symbols("t g C", positive=True)
        >>> f = Formula(t / C, {"t": t, "g": g, "C": C}, {}, "x", conditions=((t - g >= 0, "t >= g"),))
        >>> f.free_names, f.condition_names
        (('C', 't'), ('g',))
        """
        names = {x.name for rel, _ in self.conditions for x in rel.free_symbols}
        return tuple(sorted(names - set(self.free_names)))

    # ---- transformations --------------------------------------------------------------
    def _symbol(self, name: Any) -> Any:
        if not isinstance(name, str):
            name = getattr(name, "name", name)
        if name not in self.symbols:
            raise UnknownNameError("symbol", name, tuple(self.symbols))
        return self.symbols[name]

    def _value(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            parse = _PARSERS.get(name)
            if parse is None:
                raise InvalidParameterError(name, value, "a number (no unit string for this symbol)")
            value = parse(value, name)
        if not _checks.is_symbolic(value):
            self._check_value(name, value)
        return value

    def _domain(self, name: str) -> tuple[bool, float | None, bool]:
        """``(integer, minimum, strict)``: the values symbol ``name`` takes (``x > minimum`` if strict)."""
        sym = self.symbols[name]
        integer = name in INTEGER_SYMBOLS or sym.is_integer is True
        if sym.is_positive:
            if integer:
                return True, 1, False
            return False, 0, name in _RATES
        if sym.is_nonnegative or integer:
            return integer, 0, False
        return False, None, False

    def _check_value(self, name: str, value: Any, field: str | None = None) -> float:
        """Raise :class:`InvalidParameterError` naming ``field`` unless every element of ``value``
        lies in the domain of symbol ``name``; the first value (or the scalar) as a float."""
        integer, minimum, strict = self._domain(name)
        if minimum is None:
            accepted = "a number"
        elif integer:
            accepted = f"an integer >= {minimum}"
        else:
            accepted = f"a number {'>' if strict else '>='} {minimum}"
        if self.meaning.get(name):
            accepted += f" ({self.meaning[name]})"
        field = field or name
        if isinstance(value, bool) or np.asarray(value).dtype == np.bool_:
            raise InvalidParameterError(field, value, accepted)
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int past the float range
            raise InvalidParameterError(field, value, accepted) from None
        bad = np.isnan(arr)
        if integer:
            bad |= ~np.isfinite(arr) | (arr != np.round(arr))
        if minimum is not None:
            bad |= (arr <= minimum) if strict else (arr < minimum)
        if bad.any():
            raise InvalidParameterError(field, value if arr.ndim == 0 else arr[bad].flat[0].item(), accepted)
        return float(arr.flat[0]) if arr.size else math.nan

    def subs(self, values: Mapping[str, Any] | None = None, **kw: Any) -> Formula:
        """Substitute numbers or expressions for some symbols (unit strings accepted).

        Examples
        --------
        >>> import sympy
        >>> n, t = sympy.symbols("n t", positive=True)
        >>> Formula(n / t, {"n": n, "t": t}, {}, "x").subs(t="100ms").expr
        10.0*n
        """
        import sympy

        values = {**(values or {}), **kw}
        mapping = {self._symbol(k): self._value(k, v) for k, v in values.items()}
        conditions = tuple((rel.subs(mapping), why) for rel, why in self.conditions)
        for (rel, why), (now, _) in zip(self.conditions, conditions):
            if now is sympy.false:
                raise _outside(rel, why, {x.name: mapping[x] for x in rel.free_symbols if x in mapping})
        expr = self.expr.subs(mapping)
        return Formula(expr, dict(self.symbols), dict(self.meaning), self.name, self.assumptions, conditions)

    def evaluate(self, **values: Any) -> Any:
        """Evaluate numerically, broadcasting NumPy arrays (one ``lambdify``, cached).

        Every free symbol needs a value; unit strings are accepted for sizes,
        bandwidths and times. Values outside a symbol's domain raise
        :class:`~queuesgd.errors.InvalidParameterError` naming the symbol:
        integer symbols (``n``, ``m``, ``s``, ``b``, ``c``, ``g``, ``k`` and
        any symbol declared ``integer=True``) take integers, >= 1 when
        declared positive (>= 0 otherwise, e.g. ``b`` backups); other symbols
        declared positive take numbers >= 0, and rates and bandwidths (``mu``,
        ``B``, ``B_intra``) numbers > 0. NaN is never accepted. The same
        checks apply to :meth:`subs`.

        Examples
        --------
        >>> import sympy
        >>> n, B = sympy.symbols("n B", positive=True)
        >>> f = Formula(n * B, {"n": n, "B": B}, {}, "x")
        >>> f.evaluate(n=np.array([1, 2]), B="8bit/s").tolist()
        [1.0, 2.0]
        >>> f.evaluate(n=2.5, B=1.0)
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: n: got 2.5; accepted: an integer >= 1
        """
        import sympy

        names, only = self.free_names, self.condition_names
        missing = [k for k in (*names, *only) if k not in values]
        if missing:
            raise InvalidParameterError(
                "evaluate",
                sorted(values),
                f"values for every free symbol {list(names)}"
                + (f" and the conditions' {list(only)}" if only else ""),
            )
        extra = [k for k in values if k not in self.symbols]
        if extra:
            raise UnknownNameError("symbol", extra[0], tuple(self.symbols))
        fn = self._lambdified.get(names)
        if fn is None:
            fn = sympy.lambdify(
                [self.symbols[k] for k in names], _for_lambdify(self.expr), modules=_numeric_modules()
            )
            self._lambdified[names] = fn
        given = {k: np.asarray(self._value(k, values[k]), dtype=float) for k in (*names, *only)}
        self._check_conditions(given)
        args = [given[k] for k in names]
        with np.errstate(divide="ignore", invalid="ignore"):
            try:
                out = np.asarray(fn(*args), dtype=float)
            except (TypeError, ValueError):
                # A finite Sum whose bound is a symbol (sum over j = 1..n) lambdifies to a Python
                # loop over range(n): evaluate it element by element.
                def one(*a: float) -> float:
                    return float(fn(*(int(v) if float(v).is_integer() else float(v) for v in a)))

                out = np.asarray(np.vectorize(one, otypes=[float])(*args), dtype=float)
        if args:
            out = np.broadcast_to(out, np.broadcast_shapes(*(a.shape for a in args)))
        return float(out) if out.ndim == 0 else np.array(out)

    def limit(self, symbol: str, to: Any = "oo") -> Any:
        """``lim expr`` as ``symbol -> to`` (default infinity), a SymPy expression.

        ``to`` is ``"oo"``, ``"-oo"``, a number (or its decimal text), the
        name of a symbol of the formula, or a SymPy expression. Strings are
        matched against these forms, never evaluated.

        Examples
        --------
        >>> import sympy
        >>> n, t = sympy.symbols("n t", positive=True)
        >>> Formula(n / (t + n), {"n": n, "t": t}, {}, "x").limit("n")
        1
        >>> Formula(n / (t + n), {"n": n, "t": t}, {}, "x").limit("n", to="t")
        1/2
        """
        import sympy

        return sympy.limit(self.expr, self._symbol(symbol), self._limit_target(to))

    def _limit_target(self, to: Any) -> Any:
        """``to`` as a SymPy value, parsed without evaluating code (no ``sympify`` of strings)."""
        import sympy

        accepted = "'oo', '-oo', a number, or the name of a symbol of the formula"
        if isinstance(to, bool):
            raise InvalidParameterError("limit.to", to, accepted)
        if isinstance(to, sympy.Basic):
            return to
        if isinstance(to, int | float | np.integer | np.floating):
            x = float(to)
            if math.isnan(x):
                raise InvalidParameterError("limit.to", to, accepted)
            if math.isinf(x):
                return sympy.oo if x > 0 else -sympy.oo
            return sympy.Integer(int(to)) if isinstance(to, int | np.integer) else sympy.Float(x)
        if isinstance(to, str):
            text = to.strip()
            if text in ("oo", "+oo", "inf", "+inf", "infinity"):
                return sympy.oo
            if text in ("-oo", "-inf", "-infinity"):
                return -sympy.oo
            if text in self.symbols:
                return self.symbols[text]
            if _NUMBER.fullmatch(text):
                return sympy.Rational(text)  # exact: "0.1" -> 1/10
        raise InvalidParameterError("limit.to", to, accepted)

    def optimize(self, symbol: str, *, lower: Any = None, upper: Any = None, **values: Any) -> Optimum:
        """Where the throughput is largest over ``symbol``, verified (see :mod:`queuesgd.optimum`).

        Without ``values`` nor bounds: the stationary point solved by SymPy
        (the symbol treated as continuous), returned only where SymPy proves
        the second derivative negative there and no other stationary point is
        left; otherwise :class:`~queuesgd.errors.NotRepresentable` says why
        (with a counterexample where random parameter values make it a
        minimum). A formula too large for SymPy to solve in reasonable time,
        or whose ``dX/dx = 0`` is not a polynomial equation of small degree
        (see :func:`queuesgd.optimum.symbolic_obstacle`), is not solved: the
        numeric search below runs instead when no other symbol is free (its
        ``evidence`` says why), else ``NotRepresentable`` asks for values.

        With ``values`` for every other free symbol (or bounds, when there is
        no other): a numeric search over ``[lower, upper]`` -- every integer
        for ``n``, ``b``, ``c`` ... (default ``lower``: the smallest value the
        symbol takes, 1 or 0), else a grid refined by bounded Brent search
        (default ``lower``: 0, or ``upper * 1e-9`` for the rates and
        bandwidths, which must be > 0); default ``upper``: 100,000. When the
        largest value is at an end of the interval the result says so
        (``interior`` False, and whether the throughput is monotone there):
        a search bound is never reported as an optimum.

        Returns
        -------
        Optimum
            ``argmax``, ``maximum``, ``interior``, ``monotone`` and the
            ``evidence``; ``print`` it for one line.

        Examples
        --------
        >>> import sympy
        >>> n, a = sympy.symbols("n a", positive=True)
        >>> f = Formula(n / (1 + a * n**2), {"n": n, "a": a}, {}, "x")
        >>> f.optimize("n").argmax
        1/sqrt(a)
        >>> print(f.optimize("n", a=0.01))
        n = 10: interior maximum X = 5 (X(9) = 4.972 <= X(10) = 5 >= X(11) = 4.977; the largest ...)
        >>> g = Formula(n / (1 + a * n), {"n": n, "a": a}, {}, "y")
        >>> print(g.optimize("n", a=0.01, upper=1000))
        no interior maximum on [1, 1000] (X is increasing); the largest X is at the bound n = 1000: 90.91
        >>> h = Formula(n * sympy.exp(-n / 50) + sympy.harmonic(n), {"n": n}, {}, "z")
        >>> print(h.optimize("n"))      # dX/dn = 0 has no closed form: every integer is evaluated
        n = 53: interior maximum X = 22.92 (...; numeric search, not symbolic: dX/dn = 0 is not a poly...)
        """
        from queuesgd import optimum

        sym = self._symbol(symbol)
        if not values and lower is None and upper is None:
            rest = [k for k in self.free_names if k != sym.name]
            obstacle = optimum.symbolic_obstacle(self.expr, sym)
            if obstacle is None or rest:
                hint = (
                    f"; pass values for the other symbols ({', '.join(rest)}) to Formula.optimize for a "
                    "numeric optimum"
                    if rest
                    else "; pass lower= and upper= to Formula.optimize for a numeric optimum"
                )
                return optimum.symbolic_search(self.expr, sym, hint)
            best = self.optimize(symbol, upper=100_000)  # the numeric search's default interval
            return dataclasses.replace(
                best, evidence=f"{best.evidence}; numeric search, not symbolic: {obstacle}"
            )
        f = self.subs(values)
        rest = [k for k in (*f.free_names, *f.condition_names) if k != sym.name]
        if rest:
            raise InvalidParameterError("optimize", sorted(values), f"values for {rest}")
        integer, minimum, strict = self._domain(sym.name)
        hi = self._check_value(sym.name, 100_000 if upper is None else upper, "upper")
        if lower is None:  # a rate or bandwidth (> 0) starts where the grid's first positive point would
            lower = hi * 1e-9 if strict else minimum
        lo = self._check_value(sym.name, lower, "lower")
        if not hi > lo or not math.isfinite(hi):
            raise InvalidParameterError("upper", upper, f"a finite number > lower = {lo}")

        def fn(x: np.ndarray) -> Any:
            return f.evaluate(**{sym.name: x})

        if integer:
            return optimum.integer_search(fn, sym.name, int(lo), int(hi))
        return optimum.continuous_search(fn, sym.name, float(lo), float(hi))
