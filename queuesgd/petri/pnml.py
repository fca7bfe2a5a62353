"""PNML import and export of GSPNs (ISO/IEC 15909-2, place/transition nets).

A :class:`~queuesgd.petri.PetriNet` is written as a standard P/T net
(``type="http://www.pnml.org/version-2009/grammar/ptnet"``): places with their
initial marking, transitions, and input/output arcs with their multiplicities.
Everything a P/T net cannot say goes into one
``<toolspecific tool="queuesgd" version="1">`` element per transition:

.. code-block:: xml

    <toolspecific tool="queuesgd" version="1">
      <kind>timed</kind>                    <!-- or immediate -->
      <rate>2.0</rate>                      <!-- timed: rate of one server -->
      <servers>1</servers>                  <!-- timed: an integer or "infinite" -->
      <weight>0.5</weight>                  <!-- immediate, optional -->
      <priority>1</priority>                <!-- immediate -->
      <inhibitor place="queue" multiplicity="3"/>
    </toolspecific>

Inhibitor arcs live *only* there: written as ``<arc>`` elements, a plain P/T
tool would read them as ordinary input arcs and get a different net. A plain
tool that ignores ``toolspecific`` therefore sees the net without its
inhibitor arcs (and without rates), never a wrong arc.

A symbolic rate or weight is written with ``format="srepr"`` and the text of
``sympy.srepr`` (``<rate format="srepr">Symbol('mu', positive=True)</rate>``),
which keeps the symbol's assumptions. It is read back by a small evaluator
that accepts only SymPy constructors and literals, never ``eval``, so an
untrusted file cannot run code.

Reading (:func:`from_pnml`) also accepts PNML written by other tools: nets
without queuesgd data (pass ``default_rate=``), names in ``<name><text>``,
nested pages and reference nodes, default XML namespaces, and the dialect
written by SNAKES (``snakes.pnml.dumps``): its inhibitor inscriptions and the
``queuesgd`` transition label that :func:`queuesgd.petri.snakes_io.to_snakes`
sets.

Examples
--------
>>> from queuesgd.petri import PetriNet
>>> net = PetriNet("mm13")
>>> _ = net.place("queue")
>>> _ = net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
>>> _ = net.timed("serve", rate=2.0, inputs={"queue": 1})
>>> text = to_pnml(net)
>>> back = from_pnml(text)
>>> back.inhibit.tolist(), back.rates.tolist()
([[3], [0]], [1.0, 2.0])
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, NotRepresentable

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["to_pnml", "from_pnml", "parse_srepr", "PTNET_TYPE", "TOOL", "TOOL_VERSION"]

#: The PNML net type written (and the P/T types accepted when reading).
PTNET_TYPE = "http://www.pnml.org/version-2009/grammar/ptnet"
_PNML_NS = "http://www.pnml.org/version-2009/grammar/pnml"
_ACCEPTED_TYPES = (PTNET_TYPE, "http://www.pnml.org/version-2009/grammar/pnmlcoremodel")
#: ``tool`` attribute of the queuesgd ``toolspecific`` elements.
TOOL = "queuesgd"
#: Schema version of the queuesgd ``toolspecific`` elements.
TOOL_VERSION = "1"
_SREPR = "srepr"
_NCNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")


# ---- values: numbers and SymPy expressions --------------------------------------------
def _is_sympy(value: Any) -> bool:
    return type(value).__module__.startswith("sympy")


def _encode_value(value: Any) -> tuple[str, str | None]:
    """``(text, format)`` of a rate or weight: ``repr(float)`` or SymPy ``srepr``."""
    if _is_sympy(value):
        import sympy

        return sympy.srepr(value), _SREPR
    return repr(float(value)), None


def _decode_value(field: str, text: str | None, fmt: str | None) -> Any:
    """Inverse of :func:`_encode_value`; ``field`` names the element in errors."""
    if text is None or not text.strip():
        raise InvalidParameterError(field, text, "a number, or a SymPy srepr with format='srepr'")
    text = text.strip()
    if fmt == _SREPR:
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
def _transition_record(t: Any) -> dict[str, Any]:
    """The stochastic data of a transition as plain JSON-able data.

    Keys: ``kind``; ``rate`` and ``servers`` (timed) or ``weight`` (may be
    None) and ``priority`` (immediate). Numbers are floats, SymPy values
    ``{"srepr": ...}``, infinite servers ``"infinite"``.
    """

    def val(v: Any) -> Any:
        text, fmt = _encode_value(v)
        return {_SREPR: text} if fmt == _SREPR else float(text)

    if t.timed:
        servers: Any = "infinite" if math.isinf(t.servers) else int(t.servers)
        return {"kind": "timed", "rate": val(t.rate), "servers": servers}
    return {
        "kind": "immediate",
        "weight": None if t.weight is None else val(t.weight),
        "priority": int(t.priority),
    }


def _record_kwargs(field: str, rec: Mapping[str, Any]) -> dict[str, Any]:
    """Check a record (from JSON or XML) and turn it into ``timed``/``immediate`` keyword arguments."""

    def val(key: str, v: Any) -> Any:
        f = f"{field} {key}"
        if _is_sympy(v):
            return v
        if isinstance(v, Mapping) and set(v) == {_SREPR} and isinstance(v[_SREPR], str):
            return parse_srepr(f, v[_SREPR])
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


def _add_transition(
    net: PetriNet,
    name: str,
    kw: Mapping[str, Any],
    inputs: dict[str, int],
    outputs: dict[str, int],
    inhibitors: dict[str, int],
) -> None:
    """Declare a transition from :func:`_record_kwargs` output and its arcs."""
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


def _default_kwargs(field: str, default_rate: Any, source: str) -> dict[str, Any]:
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


# ---- writing ---------------------------------------------------------------------------------
class _Ids:
    """Unique XML ids: the name itself where it is a valid NCName."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, wanted: str, prefix: str) -> str:
        cand = wanted if _NCNAME.match(wanted) else prefix + re.sub(r"[^A-Za-z0-9._-]", "_", wanted)
        out, i = cand, 1
        while out in self.used:
            out, i = f"{cand}_{i}", i + 1
        self.used.add(out)
        return out


def _text(parent: ET.Element, tag: str, text: str, **attrib: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrib)
    ET.SubElement(el, "text").text = text
    return el


def to_pnml(net: PetriNet) -> str:
    """The net as a PNML document (a string), P/T net type.

    Node ids are the place and transition names where these are valid XML
    ids (otherwise sanitized); the exact names are always in ``<name>``.
    Stochastic data and inhibitor arcs go into ``<toolspecific
    tool="queuesgd">`` elements (see the module docstring).

    Examples
    --------
    >>> from queuesgd.petri import PetriNet
    >>> net = PetriNet("loop")
    >>> _ = net.place("idle", tokens=2)
    >>> _ = net.timed("work", rate=1.5, inputs={"idle": 1}, outputs={"idle": 1})
    >>> print(to_pnml(net))  # doctest: +ELLIPSIS
    <?xml version='1.0' encoding='utf-8'?>
    <pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">
      <net id="loop" type="http://www.pnml.org/version-2009/grammar/ptnet">
        <name>
          <text>loop</text>
        </name>
        <page id="page">
          <place id="idle">
            <name>
              <text>idle</text>
            </name>
            <initialMarking>
              <text>2</text>
            </initialMarking>
          </place>
          <transition id="work">
            ...
            <toolspecific tool="queuesgd" version="1">
              <kind>timed</kind>
              <rate>1.5</rate>
              <servers>1</servers>
            </toolspecific>
          </transition>
          <arc id="arc1" source="idle" target="work">
            <inscription>
              <text>1</text>
            </inscription>
          </arc>
          ...
    """
    ids = _Ids()
    pid = {p: ids(p, "p_") for p in net.places}
    tid = {t: ids(t, "t_") for t in net.transitions}
    root = ET.Element("pnml", {"xmlns": _PNML_NS})
    net_el = ET.SubElement(root, "net", {"id": ids(net.name, "net_"), "type": PTNET_TYPE})
    _text(net_el, "name", net.name)
    page = ET.SubElement(net_el, "page", {"id": ids("page", "page_")})
    for p in net.places.values():
        el = ET.SubElement(page, "place", {"id": pid[p.name]})
        _text(el, "name", p.name)
        if p.tokens:
            _text(el, "initialMarking", str(p.tokens))
    for t in net.transitions.values():
        el = ET.SubElement(page, "transition", {"id": tid[t.name]})
        _text(el, "name", t.name)
        ts = ET.SubElement(el, "toolspecific", {"tool": TOOL, "version": TOOL_VERSION})
        ET.SubElement(ts, "kind").text = t.kind
        fields = ("rate", "servers") if t.timed else ("weight", "priority")
        for f in fields:
            v = getattr(t, f)
            if f == "weight" and v is None:
                continue
            if f in ("rate", "weight"):
                text, fmt = _encode_value(v)
                ET.SubElement(ts, f, {"format": fmt} if fmt else {}).text = text
            elif f == "servers":
                ET.SubElement(ts, f).text = "infinite" if math.isinf(v) else str(int(v))
            else:
                ET.SubElement(ts, f).text = str(int(v))
        for p, m in t.inhibitors.items():
            ET.SubElement(ts, "inhibitor", {"place": pid[p], "multiplicity": str(m)})
    n = 0
    for t in net.transitions.values():
        for arcs, forward in ((t.inputs, True), (t.outputs, False)):
            for p, k in arcs.items():
                n += 1
                src, dst = (pid[p], tid[t.name]) if forward else (tid[t.name], pid[p])
                el = ET.SubElement(page, "arc", {"id": ids(f"arc{n}", "arc_"), "source": src, "target": dst})
                _text(el, "inscription", str(k))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


# ---- reading ---------------------------------------------------------------------------------
def _parse(text_or_path: Any) -> ET.Element:
    if isinstance(text_or_path, bytes):
        data: str | bytes = text_or_path
        where = "PNML text"
    elif isinstance(text_or_path, str) and text_or_path.lstrip("\ufeff \t\r\n").startswith("<"):
        data, where = text_or_path.lstrip("\ufeff"), "PNML text"
    elif isinstance(text_or_path, str | os.PathLike):
        path = Path(text_or_path)
        if not path.is_file():
            raise InvalidParameterError(
                "text_or_path", str(text_or_path), "PNML text (starting with '<') or the path of a PNML file"
            )
        data, where = path.read_bytes(), str(path)
    else:
        raise InvalidParameterError("text_or_path", text_or_path, "PNML text, bytes or a path")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise InvalidParameterError(where, f"malformed XML ({exc})", "a well-formed PNML document") from None
    for el in root.iter():  # drop namespaces: PNML files use a default namespace or none
        if isinstance(el.tag, str) and "}" in el.tag:
            el.tag = el.tag.split("}", 1)[1]
    return root


def _name_text(el: ET.Element) -> str | None:
    name = el.find("name")
    if name is None:
        return None
    text = name.findtext("text")
    return text.strip() if text and text.strip() else None


def _int_text(field: str, text: str | None, minimum: int) -> int:
    try:
        value = int((text or "").strip())
    except ValueError:
        raise InvalidParameterError(field, text, f"an integer >= {minimum}") from None
    return _checks.integer(field, value, minimum=minimum)


def _snakes_inscription(field: str, el: ET.Element, *, inhibitor_ok: bool = True) -> tuple[int, int]:
    """(tokens, inhibitor multiplicity) of a SNAKES black-token inscription.

    SNAKES writes ``<value><token/></value>``, ``<multiarc>`` of such values
    (possibly nested) and ``<inhibitor><annotation>...</annotation>``.
    """
    if el.tag == "value" and len(el) == 1 and el[0].tag == "token":
        return 1, 0
    if el.tag == "multiarc" and len(el):
        k = m = 0
        for c in el:
            ck, cm = _snakes_inscription(field, c, inhibitor_ok=inhibitor_ok)
            if cm and m:
                raise NotRepresentable(f"{field}: two inhibitor annotations on one arc")
            k, m = k + ck, max(m, cm)
        return k, m
    if el.tag == "inhibitor" and inhibitor_ok:
        cond = el.find("condition")
        if cond is not None and (cond.findtext("expression") or "").strip() != "True":
            raise NotRepresentable(f"{field}: an inhibitor arc with a condition is not a P/T arc")
        ann = el.find("annotation")
        if ann is None or len(ann) != 1:
            raise InvalidParameterError(f"{field} inhibitor", "no annotation", "<annotation> of tokens")
        return 0, _snakes_inscription(field, ann[0], inhibitor_ok=False)[0]
    raise NotRepresentable(f"{field}: a high-level (coloured) inscription <{el.tag}> is not a P/T arc")


class _Reader:
    def __init__(self, root: ET.Element) -> None:
        if root.tag != "pnml":
            raise InvalidParameterError("PNML root element", root.tag, "<pnml>")
        nets = root.findall("net")
        if len(nets) != 1:
            ids = [n.get("id") for n in nets]
            raise InvalidParameterError("PNML <net> elements", ids, "exactly one <net> in the document")
        self.net = nets[0]
        ntype = self.net.get("type")
        if ntype is not None and ntype not in _ACCEPTED_TYPES:
            raise NotRepresentable(
                f"PNML net {self.net.get('id')!r} has type {ntype!r}; only P/T nets can be read "
                f"({PTNET_TYPE})"
            )
        self.places: dict[str, ET.Element] = {}
        self.transitions: dict[str, ET.Element] = {}
        self.arcs: list[ET.Element] = []
        self.refs: dict[str, str] = {}
        self._walk(self.net)

    def _node_id(self, el: ET.Element) -> str:
        nid = el.get("id")
        if not nid:
            raise InvalidParameterError(f"PNML <{el.tag}> id", nid, "a non-empty id attribute")
        if nid in self.places or nid in self.transitions or nid in self.refs:
            raise InvalidParameterError(f"PNML <{el.tag}> id", nid, "an id used by no other node")
        return nid

    def _walk(self, container: ET.Element) -> None:
        for el in container:
            if el.tag == "place":
                self.places[self._node_id(el)] = el
            elif el.tag == "transition":
                self.transitions[self._node_id(el)] = el
            elif el.tag in ("referencePlace", "referenceTransition"):
                nid = self._node_id(el)
                ref = el.get("ref")
                if not ref:
                    raise InvalidParameterError(f"PNML <{el.tag}> {nid!r} ref", ref, "the id of a node")
                self.refs[nid] = ref
            elif el.tag == "arc":
                self.arcs.append(el)
            elif el.tag == "page":
                self._walk(el)

    def resolve(self, field: str, nid: str | None) -> str:
        seen = set()
        while nid in self.refs:
            if nid in seen:
                raise InvalidParameterError(
                    field, nid, "a reference chain that ends at a place or transition"
                )
            seen.add(nid)
            nid = self.refs[nid]
        if nid not in self.places and nid not in self.transitions:
            known = list(self.places) + list(self.transitions)
            raise InvalidParameterError(field, nid, "the id of a place or transition: " + ", ".join(known))
        return nid

    def names(self) -> dict[str, str]:
        """Node id -> name: ``<name><text>`` where present and unique, else the id."""
        ids = list(self.places) + list(self.transitions)
        els = {**self.places, **self.transitions}
        texts = {i: _name_text(els[i]) for i in ids}
        counts: dict[str | None, int] = {}
        for t in texts.values():
            counts[t] = counts.get(t, 0) + 1
        out = {i: (t if t is not None and counts[t] == 1 else i) for i, t in texts.items()}
        if len(set(out.values())) != len(out):  # a name equal to another node's id: use ids throughout
            out = {i: i for i in ids}
        return out


def _tokens(pid: str, el: ET.Element) -> int:
    field = f"PNML place {pid!r} initialMarking"
    im = el.find("initialMarking")
    if im is None:
        return 0
    if im.find("text") is not None:
        return _int_text(field, im.findtext("text"), 0)
    ms = im.find("multiset")  # SNAKES' dialect for untyped places
    if ms is not None:
        total = 0
        for item in ms.findall("item"):
            value = item.find("value")
            if value is None or len(value) != 1 or value[0].tag != "token":
                raise NotRepresentable(
                    f"{field}: only black tokens can be read (P/T net), got a coloured token"
                )
            total += _int_text(field + " multiplicity", item.findtext("multiplicity") or "1", 1)
        return total
    raise NotRepresentable(f"{field}: expected <text>n</text> (P/T net), got a high-level marking")


def _toolspecific_record(tid: str, el: ET.Element) -> tuple[dict[str, Any] | None, list[ET.Element]]:
    """The queuesgd record of a transition (toolspecific or SNAKES label) and its inhibitor elements."""
    field = f"PNML transition {tid!r}"
    ours = [ts for ts in el.findall("toolspecific") if ts.get("tool") == TOOL]
    if len(ours) > 1:
        raise InvalidParameterError(f"{field} toolspecific", len(ours), "at most one queuesgd element")
    if ours:
        ts = ours[0]
        version = ts.get("version", "")
        if version.split(".")[0] != TOOL_VERSION:
            raise InvalidParameterError(f"{field} toolspecific version", version, f"{TOOL_VERSION!r}")
        rec: dict[str, Any] = {}
        for child in ts:
            if child.tag == "inhibitor":
                continue
            if child.tag in rec:
                raise InvalidParameterError(f"{field} <{child.tag}>", "twice", "each element at most once")
            if child.tag in ("rate", "weight"):
                rec[child.tag] = {"text": child.text, "format": child.get("format")}
            else:
                rec[child.tag] = (child.text or "").strip()
        for key in ("rate", "weight"):
            if key in rec:
                rec[key] = _decode_value(f"{field} {key}", rec[key]["text"], rec[key]["format"])
        if "priority" in rec:
            rec["priority"] = _int_text(f"{field} priority", rec["priority"], 1)
        return rec, ts.findall("inhibitor")
    for label in el.findall("label"):  # SNAKES' labels plugin: <label name="queuesgd"><object type="str">
        if label.get("name") == TOOL:
            obj = label.find("object")
            text = obj.text if obj is not None and obj.get("type") == "str" else None
            return _json_record(field, text), []
    return None, []


def _json_record(field: str, text: Any) -> dict[str, Any]:
    """Parse the JSON text of a ``queuesgd`` SNAKES label into a record (errors name ``field``)."""
    try:
        rec = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        rec = None
    if not isinstance(rec, dict):
        raise InvalidParameterError(f"{field} queuesgd label", text, "a JSON object written by to_snakes")
    return rec


def from_pnml(text_or_path: Any, default_rate: Any = None) -> PetriNet:
    """Read a P/T net from PNML text, bytes or a file path.

    Parameters
    ----------
    text_or_path : str, bytes or path-like
        A string that starts with ``<`` is PNML text; any other string is a path.
    default_rate : float or SymPy expression, optional
        Rate given to transitions that carry no queuesgd data (PNML from other
        tools): they become timed single-server transitions. Without it such a
        transition raises :class:`~queuesgd.errors.NotRepresentable`.

    Names come from ``<name><text>`` where present and unique, else from ids.

    Examples
    --------
    A net written by another P/T tool, without stochastic data:

    >>> text = '''<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">
    ...   <place id="a"><initialMarking><text>2</text></initialMarking></place><place id="b"/>
    ...   <transition id="t"><name><text>move</text></name></transition>
    ...   <arc id="e1" source="a" target="t"/><arc id="e2" source="t" target="b"/></page></net></pnml>'''
    >>> from_pnml(text)
    Traceback (most recent call last):
    ...
    queuesgd.errors.NotRepresentable: PNML transition 't' carries no queuesgd data ...
    >>> net = from_pnml(text, default_rate=1.0)
    >>> net.place_names, net.transition_names, net.initial_marking.tolist()
    (('a', 'b'), ('move',), [2, 0])
    """
    from queuesgd.petri.net import PetriNet

    r = _Reader(_parse(text_or_path))
    names = r.names()
    net = PetriNet(_name_text(r.net) or r.net.get("id") or "net")
    for pid, el in r.places.items():
        net.place(names[pid], tokens=_tokens(pid, el))
    arcs: dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]] = {
        tid: ({}, {}, {}) for tid in r.transitions
    }
    seen: dict[tuple[str, str, int], str] = {}
    for i, arc in enumerate(r.arcs):
        aid = arc.get("id") or f"#{i + 1}"
        field = f"PNML arc {aid!r}"
        src = r.resolve(f"{field} source", arc.get("source"))
        dst = r.resolve(f"{field} target", arc.get("target"))
        if (src in r.places) == (dst in r.places):
            raise InvalidParameterError(field, (src, dst), "an arc between a place and a transition")
        inhibitor = False
        atype = arc.find("type")  # PIPE-style <type value="inhibitor"/>
        if atype is not None and atype.get("value") not in (None, "normal"):
            if atype.get("value") != "inhibitor":
                raise NotRepresentable(f"{field}: arc type {atype.get('value')!r} is not supported")
            inhibitor = True
        ins = arc.find("inscription")
        m = 0
        if ins is None:
            k = 1
        elif ins.find("text") is not None:
            k = _int_text(f"{field} inscription", ins.findtext("text"), 1)
        elif len(ins) == 1:  # SNAKES' dialect: black-token annotations, inhibitors
            k, m = _snakes_inscription(field, ins[0])
        else:
            raise NotRepresentable(f"{field}: inscription is not a P/T multiplicity")
        if inhibitor:
            k, m = 0, k
        place, trans = (src, dst) if src in r.places else (dst, src)
        if m and src not in r.places:
            raise InvalidParameterError(field, (src, dst), "an inhibitor arc from a place to a transition")
        for role, mult in ((0 if src in r.places else 1, k), (2, m)):
            if not mult:
                continue
            key = (place, trans, role)
            if key in seen:
                raise InvalidParameterError(
                    field, (src, dst), f"one arc per direction (arc {seen[key]!r} too)"
                )
            seen[key] = aid
            arcs[trans][role][names[place]] = mult
    for tid, el in r.transitions.items():
        field = f"PNML transition {tid!r}"
        guard = el.find("guard")
        if guard is not None and (guard.findtext("expression") or "True").strip() != "True":
            raise NotRepresentable(f"{field} has a guard; only P/T transitions can be read")
        rec, inh_els = _toolspecific_record(tid, el)
        inputs, outputs, inhibitors = arcs[tid]
        for inh in inh_els:
            p = names[r.resolve(f"{field} inhibitor place", inh.get("place"))]
            if p not in net.places:
                raise InvalidParameterError(f"{field} inhibitor place", inh.get("place"), "a place id")
            m = _int_text(f"{field} inhibitor multiplicity", inh.get("multiplicity", "1"), 1)
            if inhibitors.get(p, m) != m:
                raise InvalidParameterError(
                    f"{field} inhibitor {p!r}", m, f"{inhibitors[p]} (as its arc says)"
                )
            inhibitors[p] = m
        if rec is None:
            kw = _default_kwargs(field, default_rate, "its PNML")
        else:
            kw = _record_kwargs(field, rec)
        _add_transition(net, names[tid], kw, inputs, outputs, inhibitors)
    return net
