"""P- and T-invariants (queuesgd.petri.invariants) against textbook nets and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError, UnknownNameError
from queuesgd.petri.invariants import (
    _farkas,
    conserved_quantity,
    is_covered_by_p_invariants,
    p_invariants,
    t_invariants,
    uncovered_places,
)
from queuesgd.petri.net import PetriNet


def _vec(inv, names):
    return np.array([inv.get(n, 0) for n in names], dtype=np.int64)


def _check_p(net, invs):
    C = net.incidence
    for y in invs:
        assert (C @ _vec(y, net.place_names) == 0).all()


def _check_t(net, invs):
    C = net.incidence
    for x in invs:
        assert (C.T @ _vec(x, net.transition_names) == 0).all()


def _cycle(n):
    net = PetriNet(f"cycle{n}")
    for i in range(n):
        net.place(f"p{i}", tokens=1 if i == 0 else 0)
    for i in range(n):
        net.timed(f"t{i}", 1.0, inputs={f"p{i}": 1}, outputs={f"p{(i + 1) % n}": 1})
    return net


def _mutex():
    """Murata (1989), Fig. 6: mutual exclusion of two processes through one lock place."""
    net = PetriNet("mutex")
    for p, k in [("idle1", 1), ("crit1", 0), ("idle2", 1), ("crit2", 0), ("lock", 1)]:
        net.place(p, tokens=k)
    net.timed("enter1", 1.0, inputs={"idle1": 1, "lock": 1}, outputs={"crit1": 1})
    net.timed("leave1", 1.0, inputs={"crit1": 1}, outputs={"idle1": 1, "lock": 1})
    net.timed("enter2", 1.0, inputs={"idle2": 1, "lock": 1}, outputs={"crit2": 1})
    net.timed("leave2", 1.0, inputs={"crit2": 1}, outputs={"idle2": 1, "lock": 1})
    return net


def _producer_consumer():
    """Murata (1989), Fig. 4: producer and consumer through an unbounded buffer."""
    net = PetriNet("prodcons")
    for p, k in [("produce", 1), ("deliver", 0), ("buffer", 0), ("take", 1), ("consume", 0)]:
        net.place(p, tokens=k)
    net.timed("t_produce", 1.0, inputs={"produce": 1}, outputs={"deliver": 1})
    net.timed("t_deliver", 1.0, inputs={"deliver": 1}, outputs={"produce": 1, "buffer": 1})
    net.timed("t_take", 1.0, inputs={"buffer": 1, "take": 1}, outputs={"consume": 1})
    net.timed("t_consume", 1.0, inputs={"consume": 1}, outputs={"take": 1})
    return net


def _readers_writers(k=3):
    """Murata (1989), Fig. 8 style readers-writers: k processes, k lock tokens; a writer takes all k."""
    net = PetriNet("rw")
    for p, m in [("ready", k), ("reading", 0), ("writing", 0), ("lock", k)]:
        net.place(p, tokens=m)
    net.timed("start_read", 1.0, inputs={"ready": 1, "lock": 1}, outputs={"reading": 1})
    net.timed("end_read", 1.0, inputs={"reading": 1}, outputs={"ready": 1, "lock": 1})
    net.timed("start_write", 1.0, inputs={"ready": 1, "lock": k}, outputs={"writing": 1})
    net.timed("end_write", 1.0, inputs={"writing": 1}, outputs={"ready": 1, "lock": k})
    return net


@pytest.mark.parametrize("n", [2, 3, 7])
def test_cycle_invariants_all_ones(n):
    net = _cycle(n)
    assert p_invariants(net) == [{f"p{i}": 1 for i in range(n)}]
    assert t_invariants(net) == [{f"t{i}": 1 for i in range(n)}]
    assert is_covered_by_p_invariants(net)
    assert uncovered_places(net) == ()


def test_mutex_murata():
    net = _mutex()
    ps = p_invariants(net)
    _check_p(net, ps)
    assert ps == [
        {"idle1": 1, "crit1": 1},
        {"idle2": 1, "crit2": 1},
        {"crit1": 1, "crit2": 1, "lock": 1},
    ]
    ts = t_invariants(net)
    _check_t(net, ts)
    assert ts == [{"enter1": 1, "leave1": 1}, {"enter2": 1, "leave2": 1}]
    assert is_covered_by_p_invariants(net)
    assert [conserved_quantity(net, y) for y in ps] == [1, 1, 1]


def test_producer_consumer_murata():
    net = _producer_consumer()
    ps = p_invariants(net)
    _check_p(net, ps)
    assert ps == [{"produce": 1, "deliver": 1}, {"take": 1, "consume": 1}]
    assert t_invariants(net) == [{"t_produce": 1, "t_deliver": 1, "t_take": 1, "t_consume": 1}]
    assert uncovered_places(net) == ("buffer",)
    assert not is_covered_by_p_invariants(net)


def test_readers_writers_multiplicities():
    k = 3
    net = _readers_writers(k)
    ps = p_invariants(net)
    _check_p(net, ps)
    assert {"ready": 1, "reading": 1, "writing": 1} in ps
    assert {"reading": 1, "writing": k, "lock": 1} in ps
    assert len(ps) == 2
    assert [conserved_quantity(net, y) for y in ps] == [k, k]


def test_conserved_quantity_constant_over_reachable_markings():
    net = _readers_writers(3)
    space = net.state_space()
    for y in p_invariants(net):
        w = _vec(y, net.place_names)
        values = set((space.markings @ w).tolist())
        assert values == {conserved_quantity(net, y)}
        # Marking given as a mapping and as an array.
        row = space.markings[-1]
        assert conserved_quantity(net, y, dict(zip(net.place_names, row.tolist()))) == int(row @ w)
        assert conserved_quantity(net, y, row) == int(row @ w)


def test_conserved_quantity_bad_input():
    net = _mutex()
    with pytest.raises(UnknownNameError):
        conserved_quantity(net, {"nope": 1})
    with pytest.raises(UnknownNameError):
        conserved_quantity(net, {"lock": 1}, {"nope": 1})
    with pytest.raises(InvalidParameterError):
        conserved_quantity(net, {"lock": 1}, [1, 2])


def test_inhibitor_bound_is_invisible_to_invariants():
    net = PetriNet("mm13")
    net.place("queue")
    net.timed("arrive", 1.0, outputs={"queue": 1}, inhibitors={"queue": 3})
    net.timed("serve", 2.0, inputs={"queue": 1})
    assert p_invariants(net) == []
    assert uncovered_places(net) == ("queue",)
    assert t_invariants(net) == [{"arrive": 1, "serve": 1}]


def test_basis_method_spans_null_space():
    for net in (_mutex(), _producer_consumer(), _readers_writers(3), _cycle(4)):
        C = net.incidence
        rank = np.linalg.matrix_rank(C)
        ps = p_invariants(net, method="basis")
        ts = t_invariants(net, method="basis")
        assert len(ps) == C.shape[1] - rank
        assert len(ts) == C.shape[0] - rank
        _check_p(net, ps)
        _check_t(net, ts)
        if ps:
            assert np.linalg.matrix_rank(np.array([_vec(y, net.place_names) for y in ps])) == len(ps)


def test_explosion_raises_or_falls_back():
    net = _mutex()
    with pytest.raises(StateSpaceTooLargeError, match="method='basis'"):
        p_invariants(net, max_rows=1)
    with pytest.warns(UserWarning, match="null-space basis") as seen:
        ps = p_invariants(net, method="auto", max_rows=1)
    assert [w.filename for w in seen] == [__file__]
    assert len(ps) == 3
    _check_p(net, ps)
    with pytest.raises(InvalidParameterError):
        p_invariants(net, method="farkas")


def test_empty_nets():
    net = PetriNet("empty")
    assert p_invariants(net) == [] and t_invariants(net) == []
    net.place("lonely", tokens=2)
    assert p_invariants(net) == [{"lonely": 1}]
    assert t_invariants(net) == []
    assert is_covered_by_p_invariants(net)


def _brute_minimal(D, bound):
    """Minimal supports of non-negative integer y (entries <= bound) with y @ D = 0, by enumeration."""
    m = D.shape[0]
    sols = [np.array(y) for y in itertools.product(range(bound + 1), repeat=m) if any(y)]
    sols = [y for y in sols if not (y @ D).any()]
    supports = {frozenset(np.flatnonzero(y).tolist()) for y in sols}
    return {s for s in supports if not any(o < s for o in supports)}


@pytest.mark.parametrize("seed", range(12))
def test_farkas_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    m, k = rng.integers(3, 6), rng.integers(2, 5)
    D = rng.integers(-1, 2, size=(m, k)) * rng.integers(1, 3, size=(m, k))
    got = _farkas(D, 10_000)
    for y in got:
        assert (y >= 0).all() and y.any() and not (y @ D).any()
    got_supports = {frozenset(np.flatnonzero(y).tolist()) for y in got}
    assert len(got_supports) == len(got)  # one invariant per minimal support
    assert not any(s < t for s in got_supports for t in got_supports)
    brute = _brute_minimal(D, 4)
    # Every minimal support found by enumeration is found by Farkas; every Farkas
    # invariant with small entries is found by enumeration.
    assert brute <= got_supports
    small = {frozenset(np.flatnonzero(y).tolist()) for y in got if y.max() <= 4}
    assert small <= brute


@pytest.mark.parametrize("seed", range(8))
def test_uncovered_places_agrees_with_farkas(seed):
    rng = np.random.default_rng(100 + seed)
    net = PetriNet(f"rand{seed}")
    P, T = int(rng.integers(3, 7)), int(rng.integers(2, 6))
    names = [f"p{i}" for i in range(P)]
    for p in names:
        net.place(p, tokens=1)
    for t in range(T):
        ins = {p: int(rng.integers(1, 3)) for p in names if rng.random() < 0.4}
        outs = {p: int(rng.integers(1, 3)) for p in names if rng.random() < 0.4}
        net.timed(f"t{t}", 1.0, inputs=ins, outputs=outs)
    covered = set().union(*(y.keys() for y in p_invariants(net))) if p_invariants(net) else set()
    assert set(uncovered_places(net)) == set(names) - covered
    _check_t(net, t_invariants(net))
