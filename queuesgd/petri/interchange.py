"""What PNML and SNAKES interchange share: the queuesgd data of a transition.

Both formats carry a transition's stochastic data (kind, rate, servers,
weight, priority) next to its arcs: PNML in a ``<toolspecific tool="queuesgd">``
element, SNAKES in a ``queuesgd`` label holding JSON. This module turns a
transition into that record, checks a record read back and declares the
transition it describes, and reads numbers and SymPy expressions
(``sympy.srepr`` text, rebuilt without ``eval``).

Examples
--------
>>> from queuesgd.petri import PetriNet
>>> net = PetriNet("one")
>>> _ = net.place("a", tokens=1)
>>> t = net.timed("t", rate=2.0, inputs={"a": 1}, outputs={"a": 1})
>>> rec = transition_record(t)
>>> rec
{'kind': 'timed', 'rate': 2.0, 'servers': 1}
>>> record_kwargs("transition 't'", rec)
{'kind': 'timed', 'rate': 2.0, 'servers': 1}
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.petri.rates import positive_rate

__all__ = [
    "PNML_NS",
    "PTNET_TYPE",
    "MAX_EXPONENT",
    "MAX_EXP_ARGUMENT",
    "MAX_FLOAT_PRECISION",
    "MAX_POWER_BITS",
    "MAX_SREPR_CHARS",
    "SREPR",
    "SREPR_CLASSES",
    "SREPR_CONSTANTS",
    "TOOL",
    "TOOL_VERSION",
    "add_transition",
    "decode_value",
    "default_kwargs",
    "encode_value",
    "is_sympy",
    "json_record",
    "parse_srepr",
    "record_kwargs",
    "transition_record",
]

#: The PNML net type written (and the P/T types accepted when reading).
PTNET_TYPE = "http://www.pnml.org/version-2009/grammar/ptnet"
#: The PNML XML namespace.
PNML_NS = "http://www.pnml.org/version-2009/grammar/pnml"
#: ``tool`` attribute of the queuesgd ``toolspecific`` elements (and name of the SNAKES label).
TOOL = "queuesgd"
#: Schema version of the queuesgd ``toolspecific`` elements.
TOOL_VERSION = "1"
#: ``format`` of a SymPy value written as ``sympy.srepr`` text.
SREPR = "srepr"


# ---- values: numbers and SymPy expressions --------------------------------------------
def is_sympy(value: Any) -> bool:
    """True for a SymPy object (a symbolic rate or weight)."""
    return type(value).__module__.startswith("sympy")


def encode_value(value: Any) -> tuple[str, str | None]:
    """``(text, format)`` of a rate or weight: ``repr(float)`` or SymPy ``srepr``."""
    if is_sympy(value):
        import sympy

        return sympy.srepr(value), SREPR
    return repr(float(value)), None


def decode_value(field: str, text: str | None, fmt: str | None) -> Any:
    """Inverse of :func:`encode_value`; ``field`` names the element in errors."""
    if text is None or not text.strip():
        raise InvalidParameterError(field, text, "a number, or a SymPy srepr with format='srepr'")
    text = text.strip()
    if fmt == SREPR:
        return parse_srepr(field, text)
    if fmt is not None:
        raise InvalidParameterError(f"{field} format", fmt, "'srepr' or no format attribute (a number)")
    try:
        return float(text)
    except ValueError:
        raise InvalidParameterError(field, text, "a number, or a SymPy srepr with format='srepr'") from None


#: SymPy classes a srepr rate or weight may call: numbers, symbols, arithmetic and ``exp``.
SREPR_CLASSES = ("Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "exp")
#: SymPy constants a srepr rate or weight may name.
SREPR_CONSTANTS = ("pi", "E")
#: Longest srepr text read (a rate or weight; longer texts are refused unread).
MAX_SREPR_CHARS = 100_000
#: Largest exponent of a number in ``Pow``, and largest result of a numeric ``Pow`` (bits).
MAX_EXPONENT, MAX_POWER_BITS = 1000, 1 << 16
#: Largest binary precision of a ``Float`` (srepr writes 53 for a double).
MAX_FLOAT_PRECISION = 1000
#: Largest ``|x|`` of a number in ``exp(x)`` (which SymPy evaluates when ``x`` is a float).
MAX_EXP_ARGUMENT = 1000


def parse_srepr(field: str, text: str) -> Any:
    """Rebuild a SymPy expression from ``sympy.srepr`` text without ``eval``, from an explicit allowlist.

    Accepted: calls of :data:`SREPR_CLASSES` (``Symbol('mu', positive=True)``,
    ``Integer(2)``, ``Rational(1, 3)``, ``Float('0.5', precision=53)``,
    ``Add``, ``Mul``, ``Pow``, ``exp``) on literals and on each other, and the
    constants :data:`SREPR_CONSTANTS`. Nothing that computes more than
    arithmetic on bounded numbers: no other function (``factorial``,
    ``Sum``, ...), numeric powers up to :data:`MAX_EXPONENT` whose result
    has at most :data:`MAX_POWER_BITS` bits, ``Float`` precision up to
    :data:`MAX_FLOAT_PRECISION` bits and magnitude below 1e308, ``exp`` of a
    number of magnitude at most :data:`MAX_EXP_ARGUMENT`, texts up to
    :data:`MAX_SREPR_CHARS` characters, and a finite result (no ``zoo``,
    ``nan``, ``oo``).

    >>> parse_srepr("rate", "Mul(Integer(2), Symbol('mu', positive=True))")
    2*mu
    >>> parse_srepr("rate", "__import__('os')")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: rate: got "__import__('os')"; accepted: a SymPy srepr ...
    >>> parse_srepr("rate", "factorial(Integer(100000000))")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: rate: got 'factorial(Integer(100000000))'; accepted: ...
    """
    import sympy

    accepted = (
        "a SymPy srepr of calls of " + ", ".join(SREPR_CLASSES) + " on literals, and the constants "
        + ", ".join(SREPR_CONSTANTS)
    )  # fmt: skip

    def refuse(why: str = "") -> InvalidParameterError:
        return InvalidParameterError(field, text, accepted + (f" ({why})" if why else ""))

    if not isinstance(text, str):
        raise refuse()
    if len(text) > MAX_SREPR_CHARS:
        raise InvalidParameterError(field, f"{len(text):,} characters", f"at most {MAX_SREPR_CHARS:,}")

    def number_bits(x: Any) -> int:
        if isinstance(x, sympy.Rational):
            return max(int(x.p).bit_length(), int(x.q).bit_length())
        return 0

    def call(name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if name == "Symbol":
            if len(args) != 1 or not isinstance(args[0], str):
                raise refuse("Symbol takes one name")
            if any(not isinstance(v, bool) for v in kwargs.values()):
                raise refuse("Symbol assumptions are True or False")
            return sympy.Symbol(args[0], **kwargs)
        if name in ("Integer", "Rational"):
            if kwargs or not 1 <= len(args) <= (1 if name == "Integer" else 2):
                raise refuse(f"{name} takes integers")
            if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                raise refuse(f"{name} takes integers")
            if name == "Rational" and len(args) == 2 and args[1] == 0:
                raise refuse("a zero denominator")
            return sympy.Integer(args[0]) if name == "Integer" else sympy.Rational(*args)
        if name == "Float":
            precision = kwargs.pop("precision", 53)
            if (
                kwargs
                or len(args) != 1
                or not isinstance(args[0], str | int | float)
                or isinstance(args[0], bool)
            ):
                raise refuse("Float takes a decimal text and precision=")
            if not isinstance(precision, int) or not 1 <= precision <= MAX_FLOAT_PRECISION:
                raise refuse(f"Float precision from 1 to {MAX_FLOAT_PRECISION}")
            try:
                value = float(args[0])
            except ValueError:
                raise refuse("Float takes a decimal text") from None
            if not abs(value) < 1e308:
                raise refuse("a Float below 1e308 in magnitude")
            return sympy.Float(args[0], precision=precision)
        if kwargs or not all(isinstance(a, sympy.Basic) for a in args):
            raise refuse(f"{name} takes SymPy arguments")
        if name == "Pow":
            if len(args) != 2:
                raise refuse("Pow takes a base and an exponent")
            base, e = args
            if isinstance(e, sympy.Number) and abs(e) > MAX_EXPONENT:
                raise refuse(f"exponents of at most {MAX_EXPONENT}")
            if isinstance(e, sympy.Number) and number_bits(base) * abs(float(e)) > MAX_POWER_BITS:
                raise refuse(f"a numeric power of at most {MAX_POWER_BITS} bits")
            return sympy.Pow(base, e)
        if name == "exp":
            if len(args) != 1:
                raise refuse("exp takes one argument")
            if isinstance(args[0], sympy.Number) and abs(args[0]) > MAX_EXP_ARGUMENT:
                raise refuse(f"exp of a number of at most {MAX_EXP_ARGUMENT} in magnitude")
            return sympy.exp(args[0])
        return (sympy.Add if name == "Add" else sympy.Mul)(*args)

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool):
            return node.value
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, int | float)
            and not isinstance(node.operand.value, bool)
        ):
            return -node.operand.value
        if isinstance(node, ast.Name) and node.id in SREPR_CONSTANTS:
            return getattr(sympy, node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SREPR_CLASSES:
            if any(kw.arg is None for kw in node.keywords) or any(
                isinstance(a, ast.Starred) for a in node.args
            ):
                raise refuse()
            args = [ev(a) for a in node.args]
            return call(node.func.id, args, {kw.arg: ev(kw.value) for kw in node.keywords})
        raise refuse()

    try:
        tree = ast.parse(text, mode="eval")
        out = ev(tree.body)
    except InvalidParameterError:
        raise
    except (SyntaxError, RecursionError, MemoryError, TypeError, ValueError, AttributeError) as exc:
        raise refuse(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(out, sympy.Basic):
        raise refuse()
    if out.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise refuse("a finite value")
    return out


# ---- transition records (shared with snakes_io) -------------------------------------------
def transition_record(t: Any) -> dict[str, Any]:
    """The stochastic data of a transition as plain JSON-able data.

    Keys: ``kind``; ``rate`` and ``servers`` (timed) or ``weight`` (may be
    None) and ``priority`` (immediate). Numbers are floats, SymPy values
    ``{"srepr": ...}``, infinite servers ``"infinite"``.
    """

    def val(v: Any) -> Any:
        text, fmt = encode_value(v)
        return {SREPR: text} if fmt == SREPR else float(text)

    if t.timed:
        servers: Any = "infinite" if math.isinf(t.servers) else int(t.servers)
        return {"kind": "timed", "rate": val(t.rate), "servers": servers}
    return {
        "kind": "immediate",
        "weight": None if t.weight is None else val(t.weight),
        "priority": int(t.priority),
    }


def record_kwargs(field: str, rec: Mapping[str, Any]) -> dict[str, Any]:
    """Check a record (from JSON or XML) and turn it into ``timed``/``immediate`` keyword arguments."""

    def val(key: str, v: Any) -> Any:
        f = f"{field} {key}"
        if is_sympy(v):
            return v
        if isinstance(v, Mapping) and set(v) == {SREPR} and isinstance(v[SREPR], str):
            return parse_srepr(f, v[SREPR])
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidParameterError(f, v, "a number or {'srepr': text}")
        return float(v)

    kind = rec.get("kind")
    if kind == "timed":
        unknown = set(rec) - {"kind", "rate", "servers"}
        if "rate" not in rec:
            raise InvalidParameterError(f"{field} rate", None, "a rate for the timed transition")
        servers = rec.get("servers", 1)
        if isinstance(servers, str) and servers.strip() == "infinite":
            servers = "infinite"
        elif isinstance(servers, str):
            try:
                servers = int(servers.strip())
            except ValueError:
                raise InvalidParameterError(
                    f"{field} servers", servers, "an integer >= 1 or 'infinite'"
                ) from None
        out = {
            "kind": "timed",
            "rate": positive_rate(f"{field} rate", val("rate", rec["rate"])),
            "servers": servers,
        }
    elif kind == "immediate":
        unknown = set(rec) - {"kind", "weight", "priority"}
        w = rec.get("weight")
        out = {
            "kind": "immediate",
            "weight": None if w is None else positive_rate(f"{field} weight", val("weight", w)),
            "priority": _checks.integer(f"{field} priority", rec.get("priority", 1), minimum=1),
        }
    else:
        raise InvalidParameterError(f"{field} kind", kind, "'timed' or 'immediate'")
    if unknown:
        raise InvalidParameterError(
            f"{field} queuesgd data",
            sorted(unknown),
            "only kind, rate, servers (timed) or kind, weight, priority (immediate)",
        )
    return out


def add_transition(
    net: Any,
    name: str,
    kw: Mapping[str, Any],
    inputs: dict[str, int],
    outputs: dict[str, int],
    inhibitors: dict[str, int],
) -> None:
    """Declare a transition from :func:`record_kwargs` output and its arcs on ``net`` (a PetriNet)."""
    if kw["kind"] == "timed":
        net.timed(
            name,
            rate=kw["rate"],
            inputs=inputs,
            outputs=outputs,
            inhibitors=inhibitors,
            servers=kw["servers"],
        )
    else:
        net.immediate(
            name,
            inputs=inputs,
            outputs=outputs,
            inhibitors=inhibitors,
            weight=kw["weight"],
            priority=kw["priority"],
        )


def default_kwargs(field: str, default_rate: Any, source: str) -> dict[str, Any]:
    """Keyword arguments for a transition that carries no queuesgd data."""
    if default_rate is None:
        raise NotRepresentable(
            f"{field} carries no queuesgd data (kind, rate, ...) in {source}; pass default_rate=... "
            "to read such transitions as timed single-server transitions at that rate"
        )
    return {
        "kind": "timed",
        "rate": positive_rate("default_rate", default_rate),
        "servers": 1,
    }


def json_record(field: str, text: Any) -> dict[str, Any]:
    """Parse the JSON text of a ``queuesgd`` SNAKES label into a record (errors name ``field``)."""
    try:
        rec = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        rec = None
    if not isinstance(rec, dict):
        raise InvalidParameterError(f"{field} queuesgd label", text, "a JSON object written by to_snakes")
    return rec
