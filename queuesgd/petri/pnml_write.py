"""Writing a GSPN as PNML (see :mod:`queuesgd.petri.pnml` for the format)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from queuesgd.petri.interchange import PNML_NS, PTNET_TYPE, TOOL, TOOL_VERSION, encode_value

if TYPE_CHECKING:
    from queuesgd.petri.net import PetriNet

__all__ = ["to_pnml"]

_NCNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")


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
    root = ET.Element("pnml", {"xmlns": PNML_NS})
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
                text, fmt = encode_value(v)
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
