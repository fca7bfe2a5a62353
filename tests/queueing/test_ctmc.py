"""Brute-force CTMC of closed networks vs exact MVA and the machine-repairman closed form."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from queuesgd import ClosedNetwork, Delay, Queue, mva
from queuesgd.errors import NotRepresentable, StateSpaceTooLargeError
from queuesgd.markov import composition_rank, composition_table, compositions
from queuesgd.queueing.ctmc import ctmc_solve, state_count


def erlang_repairman_throughput(N: int, Z: float, D: float) -> float:
    """Machine repairman, one repairer: X = (1 - p0)/D, p0 = Erlang-B(N, Z/D) (Kleinrock vol. 1)."""
    r = Z / D
    terms = [r**j / math.factorial(j) for j in range(N + 1)]
    p0 = terms[-1] / sum(terms)  # probability that the repairer is idle (all N machines working)
    return (1 - p0) / D


def values(x):
    return np.array(list(x.values())) if hasattr(x, "values") else np.array([x])


def assert_same(a, b, rtol=1e-9):
    np.testing.assert_allclose(values(a.throughput), values(b.throughput), rtol=rtol)
    for s in a.network.station_names:
        np.testing.assert_allclose(
            values(a.queue_length[s]), values(b.queue_length[s]), rtol=rtol, atol=1e-12
        )
        np.testing.assert_allclose(
            values(a.residence_time[s]), values(b.residence_time[s]), rtol=rtol, atol=1e-12
        )


def test_compositions_rank_roundtrip():
    comp = compositions(5, 4)
    assert len(comp) == math.comb(8, 3)
    assert (comp.sum(axis=1) == 5).all() and len({tuple(r) for r in comp}) == len(comp)
    assert (composition_rank(comp, 5, composition_table(5, 4)) == np.arange(len(comp))).all()
    # lexicographic order, as itertools enumerates the same set
    brute = sorted(c for c in itertools.product(range(6), repeat=4) if sum(c) == 5)
    assert [tuple(r) for r in comp.tolist()] == brute


@pytest.mark.parametrize(("N", "Z", "D"), [(1, 2.0, 1.0), (3, 5.0, 0.5), (12, 10.0, 1.0), (40, 3.0, 0.1)])
def test_repairman_closed_form(N, Z, D):
    r = ctmc_solve(ClosedNetwork([Delay("think", Z), Queue("repair", D)], population=N))
    assert r.method == "ctmc"
    assert r.throughput == pytest.approx(erlang_repairman_throughput(N, Z, D), rel=1e-12)
    # Little's law closes the cycle: N = X (Z + R_repair).
    assert r.throughput * (r.residence_time["think"] + r.residence_time["repair"]) == pytest.approx(
        N, rel=1e-12
    )


def test_single_class_vs_exact_mva():
    net = ClosedNetwork([Delay("z", 1.5), Queue("a", 0.4), Queue("b", 0.25), Queue("c", 0.3)], population=15)
    assert_same(ctmc_solve(net), mva(net))


def test_multi_server_vs_exact_mva():
    net = ClosedNetwork(
        [Delay("z", 2.0), Queue("pool", 1.2, servers=3), Queue("disk", 0.3), Queue("net", 0.5, servers=2)],
        population=12,
    )
    assert_same(ctmc_solve(net), mva(net))


def test_two_class_vs_exact_mva():
    net = ClosedNetwork(
        [
            Delay("think", {"a": 3.0, "b": 1.0}),
            Queue("cpu", {"a": 0.5, "b": 0.8}),
            Queue("disk", {"a": 1.0}),  # class b does not visit the disk
            Queue("pool", {"a": 0.7, "b": 0.4}, servers=2),
        ],
        population={"a": 4, "b": 3},
    )
    r = ctmc_solve(net)
    assert_same(r, mva(net))
    assert r.queue_length["disk"]["b"] == 0.0


def test_three_classes_one_station_each_and_shared():
    net = ClosedNetwork(
        [Queue("q", {"a": 1.0, "b": 2.0, "c": 0.5}), Delay("z", {"a": 1.0, "b": 1.0})],
        population={"a": 2, "b": 2, "c": 1},
    )
    assert_same(ctmc_solve(net), mva(net))


def test_state_space_limit():
    net = ClosedNetwork([Delay("z", 1.0)] + [Queue(f"q{k}", 1.0) for k in range(6)], population=30)
    assert state_count(net) == math.comb(36, 6)
    with pytest.raises(StateSpaceTooLargeError, match="max_states"):
        ctmc_solve(net)


def test_symbolic_refused():
    import sympy

    net = ClosedNetwork([Delay("z", sympy.Symbol("Z", positive=True)), Queue("q", 1.0)], population=2)
    with pytest.raises(NotRepresentable, match="numeric"):
        ctmc_solve(net)


def test_iterative_solver_agrees():
    net = ClosedNetwork(
        [
            Delay("z", {"a": 1.0, "b": 2.0}),
            Queue("x", {"a": 0.5, "b": 0.2}, servers=2),
            Queue("y", {"a": 0.3, "b": 0.4}),
        ],
        population={"a": 5, "b": 4},
    )
    assert_same(ctmc_solve(net, method="iterative"), ctmc_solve(net, method="direct"), rtol=1e-9)


def line_exact_mva(net: ClosedNetwork):
    """Solve ``net`` with LINE's exact MVA (peer tool); returns (throughput, queue length) (K, C) arrays."""
    line = pytest.importorskip("line_solver")
    model = line.Network("queuesgd")
    nodes = []
    for st in net.stations:
        if isinstance(st, Delay):
            nodes.append(line.Delay(model, st.name))
        else:
            nodes.append(line.Queue(model, st.name, line.SchedStrategy.PS))
            if st.servers > 1:
                nodes[-1].set_number_of_servers(st.servers)
    N = net.population_vector
    D = net.demands
    classes = []
    for c, name in enumerate(net.classes):
        visited = [k for k in range(len(nodes)) if D[k, c] > 0]
        classes.append((line.ClosedClass(model, name, int(N[c]), nodes[visited[0]]), visited))
    P = model.init_routing_matrix()
    for c, (cls, visited) in enumerate(classes):
        for k in visited:
            nodes[k].set_service(cls, line.Exp(1.0 / D[k, c]))
        for a, b in zip(visited, visited[1:] + visited[:1]):
            P.set(cls, cls, nodes[a], nodes[b], 1.0)
    model.link(P)
    tab = line.SolverMVA(model, method="exact", verbose=False).avg_table()
    K, C = D.shape
    return np.asarray(tab.Tput, dtype=float).reshape(K, C), np.asarray(tab.QLen, dtype=float).reshape(K, C)


@pytest.mark.parametrize(
    "net",
    [
        ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0), Queue("disk", 1.5)], population=5),
        ClosedNetwork(
            [
                Delay("z", {"a": 2.0, "b": 1.0}),
                Queue("q1", {"a": 1.0, "b": 0.5}),
                Queue("q2", {"a": 1.5, "b": 2.0}, servers=3),
            ],
            population={"a": 3, "b": 2},
        ),
    ],
    ids=["single-class", "two-class-multiserver"],
)
def test_exact_mva_and_ctmc_vs_line_solver(net):
    X_line, Q_line = line_exact_mva(net)
    X_ref = X_line.max(axis=0)  # the class throughput at every station it visits
    for r in (mva(net), ctmc_solve(net)):
        np.testing.assert_allclose(values(r.throughput), X_ref, rtol=1e-9)
        Q = np.array([values(r.queue_length[s]) for s in net.station_names])
        np.testing.assert_allclose(Q, Q_line, rtol=1e-9, atol=1e-12)
