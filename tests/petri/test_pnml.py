"""PNML export/import: round trips, foreign PNML, malformed input."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import sympy
from petri_helpers import assert_same_net, rich_net

from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.petri import PetriNet
from queuesgd.petri.pnml import PTNET_TYPE, from_pnml, parse_srepr, to_pnml

NS = "{http://www.pnml.org/version-2009/grammar/pnml}"


def mm1k(k: int = 3) -> PetriNet:
    net = PetriNet("mm1k")
    net.place("queue")
    net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": k})
    net.timed("serve", rate=2.0, inputs={"queue": 1})
    return net


# ---- round trips ----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [rich_net, mm1k])
def test_round_trip_text(make):
    net = make()
    assert_same_net(from_pnml(to_pnml(net)), net)


def test_round_trip_symbolic_values_exact():
    back = from_pnml(to_pnml(rich_net()))
    mu = sympy.Symbol("mu", positive=True)
    assert back.transitions["work"].rate == mu and back.transitions["work"].rate.is_positive
    assert back.transitions["slow"].rate == sympy.Rational(1, 3)
    assert isinstance(back.transitions["slow"].rate, sympy.Rational)
    assert back.transitions["barrier"].weight == sympy.Symbol("w", positive=True)
    assert back.transitions["release"].weight is None
    assert back.transitions["arrive"].rate == 1e-3
    assert back.symbolic


def test_round_trip_methods_and_files(tmp_path):
    net = rich_net()
    path = tmp_path / "rich.pnml"
    path.write_text(net.to_pnml(), encoding="utf-8")
    assert_same_net(PetriNet.from_pnml(path), net)
    assert_same_net(PetriNet.from_pnml(str(path)), net)
    assert_same_net(PetriNet.from_pnml(path.read_bytes()), net)


def test_names_that_are_not_xml_ids():
    net = PetriNet("my net / v2")
    net.place("idle workers", tokens=2)
    net.place("1st")
    net.place("arc1")  # the writer's arc ids must not collide with it
    net.place("μ-queue")
    net.timed("go <fast>", rate=1.0, inputs={"idle workers": 1}, outputs={"1st": 1, "arc1": 2})
    net.timed("arc2", rate=2.0, inputs={"1st": 1}, outputs={"μ-queue": 1}, inhibitors={"arc1": 2})
    text = to_pnml(net)
    root = ET.fromstring(text)
    ids = [el.get("id") for el in root.iter() if el.get("id") is not None]
    assert len(ids) == len(set(ids))
    assert_same_net(from_pnml(text), net)


def test_document_is_a_plain_ptnet():
    """Inhibitor arcs are only in toolspecific: a plain P/T reader sees normal arcs only."""
    net = rich_net()
    root = ET.fromstring(to_pnml(net))
    (net_el,) = root.findall(f"{NS}net")
    assert net_el.get("type") == PTNET_TYPE
    arcs = root.findall(f".//{NS}arc")
    assert len(arcs) == int((net.pre > 0).sum() + (net.post > 0).sum())
    assert all(len(a) == 1 and a[0].tag == f"{NS}inscription" for a in arcs)
    assert sum(int(a.findtext(f"{NS}inscription/{NS}text")) for a in arcs) == net.pre.sum() + net.post.sum()
    marks = {
        p.findtext(f"{NS}name/{NS}text"): int(p.findtext(f"{NS}initialMarking/{NS}text") or 0)
        for p in root.iter(f"{NS}place")
    }
    assert marks == {"idle": 4, "busy": 0, "done": 0, "lock": 1}
    inhibitors = root.findall(f".//{NS}toolspecific/{NS}inhibitor")
    assert len(inhibitors) == int((net.inhibit > 0).sum())
    tools = {ts.get("tool") for ts in root.iter(f"{NS}toolspecific")}
    assert tools == {"queuesgd"}


# ---- foreign PNML -----------------------------------------------------------------------------
FOREIGN = """<?xml version="1.0" encoding="UTF-8"?>
<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">
  <net id="net1" type="http://www.pnml.org/version-2009/grammar/ptnet">
    <name><text>foreign</text></name>
    <page id="top">
      <place id="p1"><name><text>ready</text></name>
        <initialMarking><text>3</text></initialMarking>
        <graphics><position x="10" y="10"/></graphics>
      </place>
      <transition id="t1"><name><text>fire</text></name>
        <toolspecific tool="OtherTool" version="2.0"><color>red</color></toolspecific>
      </transition>
      <arc id="a1" source="p1" target="t1"><inscription><text>2</text></inscription></arc>
      <page id="sub">
        <place id="p2"><name><text>ready</text></name></place>
        <referencePlace id="r2" ref="p2"/>
        <arc id="a2" source="t1" target="r2"/>
      </page>
    </page>
  </net>
</pnml>"""


def test_foreign_pnml_needs_default_rate():
    with pytest.raises(NotRepresentable, match="default_rate"):
        from_pnml(FOREIGN)


def test_foreign_pnml_with_default_rate():
    net = from_pnml(FOREIGN, default_rate=0.5)
    assert net.name == "foreign"
    # "ready" names two places: both fall back to their ids; the unique name is kept.
    assert net.place_names == ("p1", "p2")
    assert net.transition_names == ("fire",)
    assert net.initial_marking.tolist() == [3, 0]
    assert net.pre.tolist() == [[2, 0]] and net.post.tolist() == [[0, 1]]
    assert net.rates.tolist() == [0.5] and net.servers.tolist() == [1.0]
    sym = from_pnml(FOREIGN, default_rate=sympy.Symbol("lam", positive=True))
    assert sym.transitions["fire"].rate == sympy.Symbol("lam", positive=True)
    with pytest.raises(InvalidParameterError, match="default_rate"):
        from_pnml(FOREIGN, default_rate=-1.0)


def test_pipe_style_inhibitor_arc():
    text = """<pnml><net id="n"><page id="g"><place id="q"/>
      <transition id="t"><toolspecific tool="queuesgd" version="1"><kind>timed</kind><rate>1</rate>
      </toolspecific></transition>
      <arc id="e" source="q" target="t"><inscription><text>3</text></inscription>
        <type value="inhibitor"/></arc>
      <arc id="f" source="t" target="q"/></page></net></pnml>"""
    net = from_pnml(text)
    assert net.inhibit.tolist() == [[3]] and net.pre.tolist() == [[0]] and net.post.tolist() == [[1]]


# ---- malformed input --------------------------------------------------------------------------
def doc(body: str, net_attrs: str = f'id="n" type="{PTNET_TYPE}"') -> str:
    return f'<pnml><net {net_attrs}><page id="g">{body}</page></net></pnml>'


TIMED = '<toolspecific tool="queuesgd" version="1"><kind>timed</kind><rate>1.0</rate></toolspecific>'


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("<pnml><net", InvalidParameterError, "malformed XML"),
        ("<petrinet/>", InvalidParameterError, "root element"),
        ("<pnml/>", InvalidParameterError, "exactly one <net>"),
        (
            f'<pnml><net id="a" type="{PTNET_TYPE}"/><net id="b" type="{PTNET_TYPE}"/></pnml>',
            InvalidParameterError,
            "exactly one",
        ),
        (
            doc("", 'id="n" type="http://www.pnml.org/version-2009/grammar/symmetricnet"'),
            NotRepresentable,
            "only P/T nets",
        ),
        (
            doc(
                '<place id="p"/><transition id="t">'
                + TIMED
                + '</transition><arc id="x" source="p" target="zz"/>'
            ),
            InvalidParameterError,
            "PNML arc 'x' target: got 'zz'",
        ),
        (
            doc('<place id="p"/><place id="q"/><arc id="x" source="p" target="q"/>'),
            InvalidParameterError,
            "between a place and a transition",
        ),
        (
            doc('<place id="p"><initialMarking><text>-2</text></initialMarking></place>'),
            InvalidParameterError,
            "PNML place 'p' initialMarking",
        ),
        (
            doc('<place id="p"><initialMarking><text>many</text></initialMarking></place>'),
            InvalidParameterError,
            "integer >= 0",
        ),
        (
            doc(
                '<place id="p"/><transition id="t">'
                + TIMED
                + '</transition><arc id="x" source="p" target="t">'
                + "<inscription><text>0</text></inscription></arc>"
            ),
            InvalidParameterError,
            "PNML arc 'x' inscription",
        ),
        (doc('<place id="p"/><place id="p"/>'), InvalidParameterError, "used by no other node"),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind><rate>fast</rate></toolspecific></transition>"
            ),
            InvalidParameterError,
            "PNML transition 't' rate: got 'fast'",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind><rate>-1</rate></toolspecific></transition>"
            ),
            InvalidParameterError,
            "PNML transition 't' rate",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind></toolspecific></transition>"
            ),
            InvalidParameterError,
            "PNML transition 't' rate",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>stochastic</kind></toolspecific></transition>"
            ),
            InvalidParameterError,
            "PNML transition 't' kind",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="2">'
                "<kind>timed</kind></toolspecific></transition>"
            ),
            InvalidParameterError,
            "version",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                '<kind>timed</kind><rate format="srepr">__import__("os").system("true")</rate>'
                "</toolspecific></transition>"
            ),
            InvalidParameterError,
            "SymPy srepr",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind><rate>1</rate><deadline>3</deadline></toolspecific></transition>"
            ),
            InvalidParameterError,
            "deadline",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind><rate>1</rate><servers>some</servers></toolspecific></transition>"
            ),
            InvalidParameterError,
            "servers",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>immediate</kind><priority>0</priority></toolspecific></transition>"
            ),
            InvalidParameterError,
            "priority",
        ),
        (
            doc(
                '<transition id="t"><toolspecific tool="queuesgd" version="1">'
                "<kind>timed</kind><rate>1</rate>"
                '<inhibitor place="nowhere" multiplicity="1"/></toolspecific></transition>'
            ),
            InvalidParameterError,
            "inhibitor place: got 'nowhere'",
        ),
        (
            doc(
                '<place id="p"/><transition id="t">'
                + TIMED
                + '</transition><arc id="x" source="p" target="t"/><arc id="y" source="p" target="t"/>'
            ),
            InvalidParameterError,
            "one arc per direction",
        ),
        (
            doc(
                '<place id="p"><type><text>Nat</text></type>'
                "<initialMarking><structure/></initialMarking></place>"
            ),
            NotRepresentable,
            "high-level marking",
        ),
        (
            doc(
                '<transition id="t"><guard><expression>x&gt;1</expression></guard>' + TIMED + "</transition>"
            ),
            NotRepresentable,
            "guard",
        ),
        (
            doc(
                '<place id="p"/><transition id="t">'
                + TIMED
                + '</transition><arc id="x" source="p" target="t"><type value="reset"/></arc>'
            ),
            NotRepresentable,
            "reset",
        ),
        (
            doc(
                '<referencePlace id="r" ref="r2"/><referencePlace id="r2" ref="r"/><transition id="t">'
                + TIMED
                + '</transition><arc id="x" source="r" target="t"/>'
            ),
            InvalidParameterError,
            "reference chain",
        ),
    ],
)
def test_malformed_pnml(text, error, match):
    with pytest.raises(error, match=match):
        from_pnml(text)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidParameterError, match="path of a PNML file"):
        from_pnml(tmp_path / "nope.pnml")
    with pytest.raises(InvalidParameterError, match="text_or_path"):
        from_pnml(42)


# ---- srepr -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr",
    [
        sympy.Symbol("mu", positive=True),
        sympy.Rational(3, 7),
        sympy.Float("0.125"),
        2 * sympy.pi * sympy.Symbol("x", positive=True) / 3,
        sympy.exp(-sympy.Symbol("a", positive=True)) + sympy.sqrt(2),
        sympy.Symbol("lam", positive=True) ** 2 / (1 + sympy.Symbol("mu", positive=True)),
    ],
)
def test_parse_srepr_round_trip(expr):
    back = parse_srepr("rate", sympy.srepr(expr))
    assert back == expr and sympy.srepr(back) == sympy.srepr(expr)


@pytest.mark.parametrize(
    "text",
    [
        "open('x')",
        "Symbol.__class__",
        "Symbol('x').evalf()",
        "lambda: 1",
        "(1, 2)",
        "_sympify('1')",
        "Symbol(*a)",
    ],
)
def test_parse_srepr_refuses_code(text):
    with pytest.raises(InvalidParameterError, match="SymPy srepr"):
        parse_srepr("rate", text)


def test_parse_srepr_refuses_huge_powers():
    with pytest.raises(InvalidParameterError, match="exponents of at most 1000"):
        parse_srepr("rate", "Pow(Integer(10), Integer(1000000000))")
    assert parse_srepr("rate", "Pow(Symbol('x'), Integer(-2))") == sympy.Symbol("x") ** -2
