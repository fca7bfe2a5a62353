"""Exchange with SNAKES: round trips through SNAKES objects and SNAKES' own PNML, and
reachable-marking counts against SNAKES' StateGraph."""

from __future__ import annotations

import json
import sys
import warnings
from math import comb

import numpy as np
import pytest
import sympy
from petri_helpers import assert_same_net, rich_net

from queuesgd.errors import InvalidParameterError, MissingDependencyError, NotRepresentable
from queuesgd.petri import PetriNet, snakes_convert
from queuesgd.petri.pnml import from_pnml, to_pnml
from queuesgd.petri.snakes_io import from_snakes, to_snakes

pytest.importorskip("snakes")
# SNAKES 0.9.33 imports deprecated stdlib modules (imp, cgi, pkgutil emulation).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import snakes.pnml
    from snakes.nets import (
        Expression,
        Inhibitor,
        MultiArc,
        Place,
        StateGraph,
        Transition,
        Value,
        Variable,
        dot,
    )
    from snakes.nets import PetriNet as SnakesNet
    from snakes.nets import Test as ReadArc


# ---- timed-only nets with a known number of reachable markings --------------------------------
def cycle(n: int, k: int) -> PetriNet:
    """n tokens circulating over k places: C(n+k-1, k-1) markings."""
    net = PetriNet(f"cycle{n}x{k}")
    for i in range(k):
        net.place(f"p{i}", tokens=n if i == 0 else 0)
    for i in range(k):
        net.timed(
            f"t{i}", rate=1.0 + i, inputs={f"p{i}": 1}, outputs={f"p{(i + 1) % k}": 1}, servers="infinite"
        )
    return net


def mm1k(k: int) -> PetriNet:
    """M/M/1/k: k + 1 markings, bounded by an inhibitor arc."""
    net = PetriNet("mm1k")
    net.place("queue")
    net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": k})
    net.timed("serve", rate=2.0, inputs={"queue": 1})
    return net


def batches(n: int) -> PetriNet:
    """Move pairs a -> b, singles back: every split a + b = n is reachable (n + 1 markings)."""
    net = PetriNet("batches")
    net.place("a", tokens=n)
    net.place("b")
    net.timed("pair", rate=1.0, inputs={"a": 2}, outputs={"b": 2})
    net.timed("back", rate=3.0, inputs={"b": 1}, outputs={"a": 1}, servers=2)
    return net


def repairman(machines: int, repairmen: int) -> PetriNet:
    """Machine-repairman with two places up/down: machines + 1 markings."""
    net = PetriNet("repairman")
    net.place("up", tokens=machines)
    net.place("down")
    net.timed("fail", rate=0.1, inputs={"up": 1}, outputs={"down": 1}, servers="infinite")
    net.timed("repair", rate=1.0, inputs={"down": 1}, outputs={"up": 1}, servers=repairmen)
    return net


def guarded(start: int) -> PetriNet:
    """Serve consumes one token only while fewer than 3 are queued (input and inhibitor on one place)."""
    net = PetriNet("guarded")
    net.place("queue", tokens=start)
    net.timed("serve", rate=1.0, inputs={"queue": 1}, inhibitors={"queue": 3})
    return net


CASES = [
    (cycle(3, 3), comb(5, 2)),
    (cycle(5, 4), comb(8, 3)),
    (cycle(6, 5), comb(10, 4)),
    (mm1k(7), 8),
    (batches(9), 10),
    (repairman(12, 3), 13),
    (guarded(2), 3),  # 2 -> 1 -> 0
    (guarded(5), 1),  # inhibited from the start: a plain input arc would give 6
]


def snakes_count(snet) -> int:
    g = StateGraph(snet)
    g.build()
    return len(g)


@pytest.mark.parametrize(("net", "expected"), CASES, ids=[f"{n.name}-{e}" for n, e in CASES])
def test_snakes_state_graph_matches_closed_form(net, expected):
    assert snakes_count(to_snakes(net)) == expected


@pytest.mark.parametrize(("net", "expected"), CASES, ids=[f"{n.name}-{e}" for n, e in CASES])
def test_snakes_state_graph_matches_our_state_space(net, expected):
    """Timed-only nets: SNAKES' markings are our tangible markings."""
    try:
        from queuesgd.petri.statespace import state_space
    except ImportError:
        pytest.skip("queuesgd.petri.statespace.state_space is not available yet")
    assert len(state_space(net)) == snakes_count(to_snakes(net)) == expected


# ---- round trips -----------------------------------------------------------------------------
def test_to_snakes_structure():
    snet = to_snakes(rich_net())
    assert snet.place("idle").tokens == snakes.data.MultiSet([dot] * 4)
    start = dict((p.name, a) for p, a in snet.transition("start").input())
    assert start == {"idle": MultiArc([Value(dot), Value(dot)]), "lock": Value(dot)}
    slow_in = dict((p.name, a) for p, a in snet.transition("slow").input())
    assert slow_in["done"] == Inhibitor(MultiArc([Value(dot)] * 3))
    relock = dict((p.name, a) for p, a in snet.transition("relock").input())
    assert relock["lock"] == MultiArc([MultiArc([Value(dot)]), Inhibitor(MultiArc([Value(dot)] * 2))])
    assert json.loads(snet.transition("work").label("queuesgd")) == {
        "kind": "timed",
        "rate": {"srepr": "Symbol('mu', positive=True)"},
        "servers": "infinite",
    }
    assert json.loads(snet.transition("relock").label("queuesgd")) == {
        "kind": "immediate",
        "weight": 0.25,
        "priority": 1,
    }


def test_round_trip_through_snakes_objects():
    net = rich_net()
    assert_same_net(from_snakes(to_snakes(net)), net)
    assert_same_net(PetriNet.from_snakes(net.to_snakes()), net)


def test_round_trip_through_snakes_pnml():
    """to_snakes -> snakes.pnml.dumps -> snakes.pnml.loads -> from_snakes: the same net."""
    net = rich_net()
    loaded = snakes.pnml.loads(snakes.pnml.dumps(to_snakes(net)))
    assert_same_net(from_snakes(loaded), net)


@pytest.mark.parametrize(("net", "expected"), CASES, ids=[f"{n.name}-{e}" for n, e in CASES])
def test_snakes_pnml_keeps_semantics_for_snakes(net, expected):
    """SNAKES itself, reading its own dump of to_snakes(net), explores the same markings
    (the input-and-inhibitor arc of `guarded` included)."""
    assert snakes_count(snakes.pnml.loads(snakes.pnml.dumps(to_snakes(net)))) == expected


def test_our_from_pnml_reads_snakes_pnml():
    """snakes.pnml.dumps(to_snakes(net)) -> from_pnml: the same net (labels and inhibitor inscriptions)."""
    net = rich_net()
    assert_same_net(from_pnml(snakes.pnml.dumps(to_snakes(net))), net)


def test_snakes_reads_our_pnml_as_a_plain_ptnet():
    """snakes.pnml.loads(to_pnml(net)): places, tokens and arcs; inhibitors and rates are toolspecific."""
    net = rich_net()
    snet = snakes.pnml.loads(to_pnml(net))
    back = from_snakes(snet, default_rate=1.0)
    assert back.place_names == net.place_names and back.transition_names == net.transition_names
    np.testing.assert_array_equal(back.initial_marking, net.initial_marking)
    np.testing.assert_array_equal(back.pre, net.pre)
    np.testing.assert_array_equal(back.post, net.post)
    assert not back.inhibit.any()
    # And SNAKES explores it as the P/T net without inhibitor arcs.
    plain = cycle(4, 3)
    assert snakes_count(snakes.pnml.loads(to_pnml(plain))) == comb(6, 2)


def test_snakes_pnml_of_foreign_net_needs_default_rate():
    s = SnakesNet("s")
    s.add_place(Place("p", [dot, dot]))
    s.add_transition(Transition("t"))
    s.add_input("p", "t", Value(dot))
    text = snakes.pnml.dumps(s)
    with pytest.raises(NotRepresentable, match="default_rate"):
        from_pnml(text)
    net = from_pnml(text, default_rate=2.0)
    assert net.initial_marking.tolist() == [2] and net.pre.tolist() == [[1]]


# ---- nets built in SNAKES ---------------------------------------------------------------------
def test_from_native_snakes_net():
    s = SnakesNet("native")
    s.add_place(Place("a", [dot, dot, dot]))
    s.add_place(Place("b"))
    s.add_place(Place("c", [dot]))
    s.add_transition(Transition("t"))
    s.add_input("a", "t", MultiArc([Value(dot), Value(dot)]))
    s.add_input("c", "t", ReadArc(Value(dot)))  # read arc: needs c, keeps it
    s.add_input("b", "t", Inhibitor(Value(dot)))
    s.add_output("b", "t", Value(dot))
    with pytest.raises(NotRepresentable, match="SNAKES transition 't'.*default_rate"):
        from_snakes(s)
    net = from_snakes(s, default_rate=sympy.Symbol("lam", positive=True))
    assert net.place_names == ("a", "b", "c")
    assert net.pre.tolist() == [[2, 0, 1]]
    assert net.post.tolist() == [[0, 1, 1]]
    assert net.inhibit.tolist() == [[0, 1, 0]]
    assert net.transitions["t"].rate == sympy.Symbol("lam", positive=True)
    assert snakes_count(s) == snakes_count(to_snakes(net)) == 2


def _one_arc(annotation, tokens=(dot,), output=False):
    s = SnakesNet("x")
    s.add_place(Place("p", list(tokens)))
    s.add_transition(Transition("t"))
    (s.add_output if output else s.add_input)("p", "t", annotation)
    return s


@pytest.mark.parametrize(
    ("snet", "match"),
    [
        (_one_arc(Value(dot), tokens=(1, 2)), "coloured tokens"),
        (_one_arc(Value(1), tokens=()), "not a black token"),
        (_one_arc(Variable("x")), "not a P/T arc"),
        (_one_arc(Inhibitor(Value(dot), Expression("False"))), "condition"),
        (_one_arc(Expression("dot"), output=True), "not a P/T arc"),
    ],
)
def test_from_snakes_refuses_coloured_nets(snet, match):
    with pytest.raises(NotRepresentable, match=match):
        from_snakes(snet, default_rate=1.0)


def test_from_snakes_refuses_guards_and_other_objects():
    s = SnakesNet("g")
    s.add_transition(Transition("t", Expression("1 > 0")))
    with pytest.raises(NotRepresentable, match="guard"):
        from_snakes(s, default_rate=1.0)
    with pytest.raises(InvalidParameterError, match="snakes_net"):
        from_snakes(rich_net())


def test_bad_label_is_a_clear_error():
    snet = to_snakes(mm1k(3))
    snet.transition("serve").label(queuesgd='{"kind": "timed", "rate": -2}')
    with pytest.raises(InvalidParameterError, match="SNAKES transition 'serve' rate"):
        from_snakes(snet)
    snet.transition("serve").label(queuesgd="not json")
    with pytest.raises(InvalidParameterError, match="queuesgd label"):
        from_snakes(snet)


def test_missing_snakes_names_the_extra(monkeypatch):
    snakes_convert.snakes_nets.cache_clear()
    for mod in ("snakes", "snakes.nets", "snakes.plugins"):
        monkeypatch.setitem(sys.modules, mod, None)
    try:
        with pytest.raises(
            MissingDependencyError, match=r'pip install -e "\.\[snakes\]" in the queuesgd checkout$'
        ):
            to_snakes(mm1k(2))
    finally:
        snakes_convert.snakes_nets.cache_clear()
