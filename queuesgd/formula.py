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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError

__all__ = ["Formula", "INTEGER_SYMBOLS"]

#: Symbols that only take integer values (optimized over integers).
INTEGER_SYMBOLS = frozenset({"n", "b", "c", "s", "m", "k", "g"})

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
    """

    expr: Any
    symbols: Mapping[str, Any]
    meaning: Mapping[str, str]
    name: str
    assumptions: str = ""
    _lambdified: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        free = {s.name for s in self.expr.free_symbols}
        missing = free - set(self.symbols)
        if missing:
            raise InvalidParameterError(
                "Formula.symbols", sorted(self.symbols), f"a name for {sorted(missing)}"
            )
        object.__setattr__(self, "symbols", MappingProxyType(dict(self.symbols)))
        object.__setattr__(self, "meaning", MappingProxyType(dict(self.meaning)))

    # ---- printing ---------------------------------------------------------------------
    def __str__(self) -> str:
        import sympy

        return f"{self.name}:\n  X = {sympy.sstr(self.expr)}\n" + "\n".join(
            f"  {k:>10}: {self.meaning.get(k, '')}" for k in self.free_names
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

    @property
    def free_names(self) -> tuple[str, ...]:
        """Names of the symbols still free in ``expr``, sorted."""
        return tuple(sorted(s.name for s in self.expr.free_symbols))

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
            return parse(value, name)
        return value

    def subs(self, values: Mapping[str, Any] | None = None, **kw: Any) -> Formula:
        """Substitute numbers or expressions for some symbols (unit strings accepted).

        Examples
        --------
        >>> import sympy
        >>> n, t = sympy.symbols("n t", positive=True)
        >>> Formula(n / t, {"n": n, "t": t}, {}, "x").subs(t="100ms").expr
        10.0*n
        """
        values = {**(values or {}), **kw}
        mapping = {self._symbol(k): self._value(k, v) for k, v in values.items()}
        return Formula(
            self.expr.subs(mapping), dict(self.symbols), dict(self.meaning), self.name, self.assumptions
        )

    def evaluate(self, **values: Any) -> Any:
        """Evaluate numerically, broadcasting NumPy arrays (one ``lambdify``, cached).

        Every free symbol needs a value; unit strings are accepted for sizes,
        bandwidths and times.

        Examples
        --------
        >>> import sympy
        >>> n, B = sympy.symbols("n B", positive=True)
        >>> f = Formula(n * B, {"n": n, "B": B}, {}, "x")
        >>> f.evaluate(n=np.array([1, 2]), B="8bit/s").tolist()
        [1.0, 2.0]
        """
        import sympy

        names = self.free_names
        missing = [k for k in names if k not in values]
        if missing:
            raise InvalidParameterError(
                "evaluate", sorted(values), f"values for every free symbol {list(names)}"
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
        args = [np.asarray(self._value(k, values[k]), dtype=float) for k in names]
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

        Examples
        --------
        >>> import sympy
        >>> n, t = sympy.symbols("n t", positive=True)
        >>> Formula(n / (t + n), {"n": n, "t": t}, {}, "x").limit("n")
        1
        """
        import sympy

        target = sympy.oo if to in ("oo", math.inf) else sympy.sympify(to)
        return sympy.limit(self.expr, self._symbol(symbol), target)

    def optimize(self, symbol: str, *, upper: int = 100_000, **values: Any) -> Any:
        """The value of ``symbol`` that maximizes throughput.

        Without ``values``: a stationary point solved by SymPy (symbol treated
        as continuous), returned as an expression; points where SymPy proves
        the second derivative nonnegative (minima) are dropped, but where it
        cannot decide the sign the point is kept, so check it numerically.
        Raises :class:`~queuesgd.errors.NotRepresentable` where none is left.
        With ``values`` for every other free symbol: the numeric maximizer --
        an integer in ``1..upper`` for ``n``, ``b``, ``c`` ..., else a float
        found by bounded scalar search.

        Examples
        --------
        >>> import sympy
        >>> n, a = sympy.symbols("n a", positive=True)
        >>> f = Formula(n / (1 + a * n**2), {"n": n, "a": a}, {}, "x")
        >>> f.optimize("n")
        1/sqrt(a)
        >>> f.optimize("n", a=0.01)
        10
        """
        import sympy

        sym = self._symbol(symbol)
        if not values:
            deriv = sympy.diff(self.expr, sym)
            try:
                sols = sympy.solve(sympy.numer(sympy.together(deriv)), sym)
            except NotImplementedError:
                sols = []
            good = [s for s in sols if s.is_real is not False and s.is_positive is not False]
            # Keep maxima only: drop stationary points where the second derivative is provably >= 0.
            second = sympy.diff(self.expr, sym, 2)
            good = [s for s in good if sympy.simplify(second.subs(sym, s)).is_nonnegative is not True]
            if not good:
                raise NotRepresentable(
                    f"SymPy finds no interior maximum of the throughput in {symbol}; give values for the "
                    f"other symbols ({', '.join(k for k in self.free_names if k != sym.name)}) for a "
                    "numeric optimum"
                )
            return sympy.simplify(good[0]) if len(good) == 1 else [sympy.simplify(s) for s in good]
        f = self.subs(values)
        rest = [k for k in f.free_names if k != sym.name]
        if rest:
            raise InvalidParameterError("optimize", sorted(values), f"values for {rest}")
        if sym.name in INTEGER_SYMBOLS:
            grid = np.arange(1, int(upper) + 1, dtype=float)
            vals = f.evaluate(**{sym.name: grid})
            vals = np.where(np.isfinite(vals), vals, -np.inf)
            return int(grid[int(np.argmax(vals))])
        from scipy import optimize as sopt

        res = sopt.minimize_scalar(
            lambda x: -f.evaluate(**{sym.name: x}), bounds=(1e-12, upper), method="bounded"
        )
        return float(res.x)
