"""Nets and comparisons shared by the Petri-net tests."""

from __future__ import annotations

import numpy as np
import sympy

from queuesgd.petri import PetriNet


def assert_same_net(a: PetriNet, b: PetriNet, *, stochastic: bool = True) -> None:
    assert a.place_names == b.place_names
    assert a.transition_names == b.transition_names
    np.testing.assert_array_equal(a.initial_marking, b.initial_marking)
    np.testing.assert_array_equal(a.pre, b.pre)
    np.testing.assert_array_equal(a.post, b.post)
    np.testing.assert_array_equal(a.inhibit, b.inhibit)
    if stochastic:
        assert a.name == b.name
        for ta, tb in zip(a.transitions.values(), b.transitions.values()):
            assert (ta.kind, ta.rate, ta.weight, ta.priority, ta.servers) == (
                tb.kind,
                tb.rate,
                tb.weight,
                tb.priority,
                tb.servers,
            ), ta.name
            assert type(ta.rate) is type(tb.rate) and type(ta.weight) is type(tb.weight), ta.name


def rich_net() -> PetriNet:
    """Every feature: multiplicities, inhibitors (alone and on an input place), immediate
    transitions with and without weights and several priorities, k and infinite servers,
    symbolic and exact-rational rates and weights."""
    mu = sympy.Symbol("mu", positive=True)
    w = sympy.Symbol("w", positive=True)
    net = PetriNet("rich")
    net.place("idle", tokens=4)
    net.place("busy")
    net.place("done")
    net.place("lock", tokens=1)
    net.timed("start", rate=2.5, inputs={"idle": 2, "lock": 1}, outputs={"busy": 2}, servers=3)
    net.timed("work", rate=mu, inputs={"busy": 1}, outputs={"done": 1}, servers="infinite")
    net.timed(
        "slow", rate=sympy.Rational(1, 3), inputs={"busy": 1}, outputs={"done": 1}, inhibitors={"done": 3}
    )
    net.immediate("barrier", inputs={"done": 4}, outputs={"idle": 4}, weight=w, priority=2)
    net.immediate("release", inputs={"done": 1, "busy": 1}, outputs={"lock": 1}, inhibitors={"busy": 3})
    net.immediate("relock", inputs={"lock": 1}, outputs={"lock": 1}, weight=0.25, inhibitors={"lock": 2})
    net.timed("arrive", rate=1e-3, outputs={"idle": 1}, inhibitors={"idle": 6, "done": 1})
    return net


def symbolic_branch_net(a: sympy.Symbol, b: sympy.Symbol) -> PetriNet:
    """One token: ``start`` (rate 1) then an immediate choice of ``gx`` (weight a) or ``gy``
    (weight b), then ``bx`` or ``by`` (rate 1) back to the start."""
    net = PetriNet("symbranch")
    net.place("src", tokens=1)
    net.place("choose")
    net.place("x")
    net.place("y")
    net.timed("start", rate=1, inputs={"src": 1}, outputs={"choose": 1})
    net.immediate("gx", inputs={"choose": 1}, outputs={"x": 1}, weight=a)
    net.immediate("gy", inputs={"choose": 1}, outputs={"y": 1}, weight=b)
    net.timed("bx", rate=1, inputs={"x": 1}, outputs={"src": 1})
    net.timed("by", rate=1, inputs={"y": 1}, outputs={"src": 1})
    return net


def retry_loop(w_fail=3.0, w_ok=1.0) -> PetriNet:
    """A tangible 'idle' marking; 'start' puts a token in 'try', which fails (back through
    'again') with weight w_fail or succeeds with weight w_ok: a vanishing loop with an exit."""
    net = PetriNet("retry")
    net.place("idle", tokens=1)
    net.place("try")
    net.place("fail")
    net.timed("start", rate=1.0, inputs={"idle": 1}, outputs={"try": 1})
    net.immediate("bad", inputs={"try": 1}, outputs={"fail": 1}, weight=w_fail)
    net.immediate("ok", inputs={"try": 1}, outputs={"idle": 1}, weight=w_ok)
    net.immediate("again", inputs={"fail": 1}, outputs={"try": 1})
    return net
