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

__all__ = [
    "PNML_NS",
    "PTNET_TYPE",
    "SREPR",
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


def parse_srepr(field: str, text: str) -> Any:
    """Rebuild a SymPy expression from ``sympy.srepr`` text without ``eval``.

    Only calls of SymPy classes (``Symbol``, ``Integer``, ``Rational``,
    ``Float``, ``Add``, ``Mul``, ``Pow``, ``exp``, ...), SymPy singletons
    (``pi``, ``E``) and literals are accepted.

    >>> parse_srepr("rate", "Mul(Integer(2), Symbol('mu', positive=True))")
    2*mu
    >>> parse_srepr("rate", "__import__('os')")
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: rate: got "__import__('os')"; accepted: a SymPy srepr ...
    """
    import sympy

    accepted = "a SymPy srepr (calls of SymPy classes such as Symbol, Integer, Add, Mul, Pow, and literals)"

    def sympy_name(name: str) -> Any:
        obj = getattr(sympy, name, None) if not name.startswith("_") else None
        if isinstance(obj, sympy.Basic) or (isinstance(obj, type) and issubclass(obj, sympy.Basic)):
            return obj
        raise InvalidParameterError(field, text, accepted)

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool | None):
            return node.value
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, int | float)
        ):
            return -node.operand.value
        if isinstance(node, ast.Tuple | ast.List):
            return tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.Name):
            return sympy_name(node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            func = sympy_name(node.func.id)
            if not isinstance(func, type):
                raise InvalidParameterError(field, text, accepted)
            if any(kw.arg is None for kw in node.keywords) or any(
                isinstance(a, ast.Starred) for a in node.args
            ):
                raise InvalidParameterError(field, text, accepted)
            args = [ev(a) for a in node.args]
            if (
                func is sympy.Pow
                and len(args) == 2
                and isinstance(args[1], sympy.Number)
                and abs(args[1]) > 1000
            ):
                # Integer(10)**Integer(10**9) would take forever to evaluate: no rate needs it.
                raise InvalidParameterError(field, text, accepted + " with exponents of at most 1000")
            return func(*args, **{kw.arg: ev(kw.value) for kw in node.keywords})
        raise InvalidParameterError(field, text, accepted)

    try:
        tree = ast.parse(text, mode="eval")
        out = ev(tree.body)
    except InvalidParameterError:
        raise
    except (SyntaxError, RecursionError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidParameterError(field, text, f"{accepted} ({type(exc).__name__}: {exc})") from None
    if not isinstance(out, sympy.Basic):
        raise InvalidParameterError(field, text, accepted)
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
            "rate": _checks.positive(f"{field} rate", val("rate", rec["rate"]), symbolic=True),
            "servers": servers,
        }
    elif kind == "immediate":
        unknown = set(rec) - {"kind", "weight", "priority"}
        w = rec.get("weight")
        out = {
            "kind": "immediate",
            "weight": None
            if w is None
            else _checks.positive(f"{field} weight", val("weight", w), symbolic=True),
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
        "rate": _checks.positive("default_rate", default_rate, symbolic=True),
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
