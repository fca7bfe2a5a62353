"""Reading PNML into a GSPN (see :mod:`queuesgd.petri.pnml` for the format and dialects)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from xml.parsers import expat

from queuesgd import _checks
from queuesgd.catalog_files import read_bytes
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.petri.interchange import (
    PTNET_TYPE,
    TOOL,
    TOOL_VERSION,
    add_transition,
    decode_value,
    default_kwargs,
    json_record,
    record_kwargs,
)

__all__ = ["ACCEPTED_TYPES", "MAX_INSCRIPTION_DEPTH", "read_pnml"]

MAX_ARC = 2**31 - 1  # largest arc multiplicity: queuesgd.petri.net.MAX_ARC (the net is not imported here)

#: PNML net types read as P/T nets.
ACCEPTED_TYPES = (PTNET_TYPE, "http://www.pnml.org/version-2009/grammar/pnmlcoremodel")


class _DTDFound(Exception):
    def __init__(self, what: str) -> None:
        self.what = what


def _refuse_dtd(data: str | bytes, where: str) -> None:
    """Refuse any document type declaration (and so any entity declaration) before ElementTree parses.

    Entity expansion ("billion laughs", external entities) needs a DTD; PNML
    never uses one. Expat reports the declaration's start before it reads
    any entity, so nothing is expanded. This does not depend on the expat
    version's own limits.
    """

    def doctype(name: str, *_: Any) -> None:
        raise _DTDFound(f"a document type declaration <!DOCTYPE {name} ...>")

    def entity(name: str, *_: Any) -> None:
        raise _DTDFound(f"an entity declaration <!ENTITY {name} ...>")

    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.ExternalEntityRefHandler = lambda *_: entity("(external)")
    try:
        parser.Parse(data, True)
    except _DTDFound as found:
        raise InvalidParameterError(
            where, found.what, "a PNML document without DTD or entity declarations (refused for safety)"
        ) from None
    except expat.ExpatError as exc:
        raise InvalidParameterError(where, f"malformed XML ({exc})", "a well-formed PNML document") from None
    except (LookupError, UnicodeError) as exc:  # an encoding the XML declaration names that Python lacks
        raise InvalidParameterError(
            f"{where} encoding",
            f"{exc}",
            "a PNML document in an encoding Python knows (UTF-8, as PNML tools write, UTF-16, ISO-8859-1...)",
        ) from None


def _parse(text_or_path: Any) -> ET.Element:
    if isinstance(text_or_path, bytes):
        data: str | bytes = text_or_path
        where = "PNML text"
    elif isinstance(text_or_path, str) and text_or_path.lstrip("\ufeff \t\r\n").startswith("<"):
        data, where = text_or_path.lstrip("\ufeff"), "PNML text"
    elif isinstance(text_or_path, str | os.PathLike):
        path = Path(text_or_path)
        if not path.exists():
            raise InvalidParameterError(
                "text_or_path", str(text_or_path), "PNML text (starting with '<') or the path of a PNML file"
            )
        data, where = read_bytes(path), str(path)  # a regular file of bounded size (no /dev/zero)
    else:
        raise InvalidParameterError("text_or_path", text_or_path, "PNML text, bytes or a path")
    _refuse_dtd(data, where)
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


def _int_text(field: str, text: str | None, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int((text or "").strip())
    except ValueError:
        raise InvalidParameterError(field, text, f"an integer >= {minimum}") from None
    return _checks.integer(field, value, minimum=minimum, maximum=maximum)


#: Deepest nesting of SNAKES ``<multiarc>`` inscriptions read (SNAKES itself nests one or two).
MAX_INSCRIPTION_DEPTH = 100


def _snakes_inscription(
    field: str, el: ET.Element, *, inhibitor_ok: bool = True, depth: int = 0
) -> tuple[int, int]:
    """(tokens, inhibitor multiplicity) of a SNAKES black-token inscription.

    SNAKES writes ``<value><token/></value>``, ``<multiarc>`` of such values
    (possibly nested, at most :data:`MAX_INSCRIPTION_DEPTH` deep) and
    ``<inhibitor><annotation>...</annotation>``.
    """
    if depth > MAX_INSCRIPTION_DEPTH:
        raise InvalidParameterError(
            f"{field} inscription", f"nested deeper than {MAX_INSCRIPTION_DEPTH}",
            f"<multiarc> inscriptions nested at most {MAX_INSCRIPTION_DEPTH} deep",
        )  # fmt: skip
    if el.tag == "value" and len(el) == 1 and el[0].tag == "token":
        return 1, 0
    if el.tag == "multiarc" and len(el):
        k = m = 0
        for c in el:
            ck, cm = _snakes_inscription(field, c, inhibitor_ok=inhibitor_ok, depth=depth + 1)
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
        return 0, _snakes_inscription(field, ann[0], inhibitor_ok=False, depth=depth + 1)[0]
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
        if ntype is not None and ntype not in ACCEPTED_TYPES:
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

    def _walk(self, net: ET.Element) -> None:
        """Collect the nodes and arcs of ``net`` and its pages, nested to any depth, in document order.

        Iterative (a stack of page iterators): 50,000 nested pages are read
        as well as one.
        """
        stack = [iter(net)]
        while stack:
            el = next(stack[-1], None)
            if el is None:
                stack.pop()
            elif el.tag == "place":
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
                stack.append(iter(el))

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
                rec[key] = decode_value(f"{field} {key}", rec[key]["text"], rec[key]["format"])
        if "priority" in rec:
            rec["priority"] = _int_text(f"{field} priority", rec["priority"], 1)
        return rec, ts.findall("inhibitor")
    for label in el.findall("label"):  # SNAKES' labels plugin: <label name="queuesgd"><object type="str">
        if label.get("name") == TOOL:
            obj = label.find("object")
            text = obj.text if obj is not None and obj.get("type") == "str" else None
            return json_record(field, text), []
    return None, []


_Arcs = dict[str, tuple[dict[str, int], dict[str, int], dict[str, int]]]


def _arc_multiplicities(field: str, arc: ET.Element) -> tuple[int, int]:
    """``(k, m)`` of one arc: tokens moved and inhibitor multiplicity (PIPE and SNAKES dialects too)."""
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
        k = _int_text(f"{field} inscription", ins.findtext("text"), 1, MAX_ARC)
    elif len(ins) == 1:  # SNAKES' dialect: black-token annotations, inhibitors
        k, m = _snakes_inscription(field, ins[0])
        for mult in (k, m):
            _checks.integer(f"{field} inscription", mult, minimum=0, maximum=MAX_ARC)
    else:
        raise NotRepresentable(f"{field}: inscription is not a P/T multiplicity")
    return (0, k) if inhibitor else (k, m)


def _read_arcs(r: _Reader, names: dict[str, str]) -> _Arcs:
    """Inputs, outputs and inhibitors of every transition (by transition id; place names)."""
    arcs: _Arcs = {tid: ({}, {}, {}) for tid in r.transitions}
    seen: dict[tuple[str, str, int], str] = {}
    for i, arc in enumerate(r.arcs):
        aid = arc.get("id") or f"#{i + 1}"
        field = f"PNML arc {aid!r}"
        src = r.resolve(f"{field} source", arc.get("source"))
        dst = r.resolve(f"{field} target", arc.get("target"))
        if (src in r.places) == (dst in r.places):
            raise InvalidParameterError(field, (src, dst), "an arc between a place and a transition")
        k, m = _arc_multiplicities(field, arc)
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
    return arcs


def _read_transition(
    net: Any,
    r: _Reader,
    names: dict[str, str],
    tid: str,
    el: ET.Element,
    arcs: tuple[dict[str, int], dict[str, int], dict[str, int]],
    default_rate: Any,
) -> None:
    """Declare transition ``tid`` on ``net`` with its arcs, toolspecific inhibitors and data."""
    field = f"PNML transition {tid!r}"
    guard = el.find("guard")
    if guard is not None and (guard.findtext("expression") or "True").strip() != "True":
        raise NotRepresentable(f"{field} has a guard; only P/T transitions can be read")
    rec, inh_els = _toolspecific_record(tid, el)
    inputs, outputs, inhibitors = arcs
    for inh in inh_els:
        p = names[r.resolve(f"{field} inhibitor place", inh.get("place"))]
        if p not in net.places:
            raise InvalidParameterError(f"{field} inhibitor place", inh.get("place"), "a place id")
        m = _int_text(f"{field} inhibitor multiplicity", inh.get("multiplicity", "1"), 1, MAX_ARC)
        if inhibitors.get(p, m) != m:
            raise InvalidParameterError(f"{field} inhibitor {p!r}", m, f"{inhibitors[p]} (as its arc says)")
        inhibitors[p] = m
    if rec is None:
        kw = default_kwargs(field, default_rate, "its PNML")
    else:
        kw = record_kwargs(field, rec)
    add_transition(net, names[tid], kw, inputs, outputs, inhibitors)


def read_pnml(text_or_path: Any, default_rate: Any, net_class: type) -> Any:
    """A ``net_class`` net (a :class:`~queuesgd.petri.PetriNet` or subclass) read from PNML.

    The engine of :func:`queuesgd.petri.pnml.from_pnml` and
    :meth:`PetriNet.from_pnml <queuesgd.petri.PetriNet.from_pnml>` (see there
    for the arguments); the class is passed in, so this module does not
    import the net.

    Examples
    --------
    >>> from queuesgd.petri import PetriNet
    >>> text = '''<pnml><net id="n"><page id="g"><place id="a"/><transition id="t"/>
    ...   <arc id="e" source="a" target="t"/></page></net></pnml>'''
    >>> read_pnml(text, 2.0, PetriNet).pre.tolist()
    [[1]]
    """
    r = _Reader(_parse(text_or_path))
    names = r.names()
    net = net_class(_name_text(r.net) or r.net.get("id") or "net")
    for pid, el in r.places.items():
        net.place(names[pid], tokens=_tokens(pid, el))
    arcs = _read_arcs(r, names)
    for tid, el in r.transitions.items():
        _read_transition(net, r, names, tid, el, arcs[tid], default_rate)
    return net
