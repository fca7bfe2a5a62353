"""GSPN steady state against closed forms, exact MVA and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy
from petri_helpers import symbolic_branch_net

from queuesgd import ClosedNetwork, Delay, PetriNet, Queue, mva
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.petri.solve import GSPNSolution


def mmck(lam: float, mu: float, c: int, K: int, inhibitor: bool) -> PetriNet:
    net = PetriNet(f"mm{c}{K}")
    net.place("q")
    if inhibitor:
        net.timed("arrive", rate=lam, outputs={"q": 1}, inhibitors={"q": K})
        net.timed("serve", rate=mu, inputs={"q": 1}, servers=c)
    else:
        net.place("free", tokens=K)
        net.timed("arrive", rate=lam, inputs={"free": 1}, outputs={"q": 1})
        net.timed("serve", rate=mu, inputs={"q": 1}, outputs={"free": 1}, servers=c)
    return net


def mmck_closed_form(lam: float, mu: float, c: int, K: int) -> np.ndarray:
    # birth-death: p_n proportional to prod_{i=1..n} lam / (min(i, c) mu)
    w = np.array([math.prod(lam / (min(i, c) * mu) for i in range(1, n + 1)) for n in range(K + 1)])
    return w / w.sum()


def by_tokens(sol: GSPNSolution, place: str) -> np.ndarray:
    n = sol.space.markings[:, sol.space.place_names.index(place)]
    out = np.zeros(n.max() + 1)
    np.add.at(out, n, sol.probabilities)
    return out


# ---------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("inhibitor", [True, False])
@pytest.mark.parametrize(("lam", "mu", "K"), [(1.0, 2.0, 5), (3.0, 2.0, 7), (1.0, 1.0, 4)])
def test_mm1k(lam, mu, K, inhibitor):
    sol = mmck(lam, mu, 1, K, inhibitor).solve()
    rho = lam / mu
    if rho == 1:
        p = np.full(K + 1, 1 / (K + 1))
    else:
        p = (1 - rho) * rho ** np.arange(K + 1) / (1 - rho ** (K + 1))  # M/M/1/K
    np.testing.assert_allclose(by_tokens(sol, "q"), p, rtol=1e-12)
    assert sol.throughput("arrive") == pytest.approx(lam * (1 - p[K]), rel=1e-12)
    assert sol.throughput("serve") == pytest.approx(lam * (1 - p[K]), rel=1e-12)
    assert sol.mean_tokens("q") == pytest.approx((np.arange(K + 1) * p).sum(), rel=1e-12)


@pytest.mark.parametrize("inhibitor", [True, False])
def test_mmck(inhibitor):
    lam, mu, c, K = 5.0, 1.5, 3, 9
    sol = mmck(lam, mu, c, K, inhibitor).solve()
    p = mmck_closed_form(lam, mu, c, K)
    np.testing.assert_allclose(by_tokens(sol, "q"), p, rtol=1e-12)
    busy = (np.minimum(np.arange(K + 1), c) * p).sum()
    assert sol.throughput("serve") == pytest.approx(mu * busy, rel=1e-12)
    assert sol.probability(lambda m: m["q"] == K) == pytest.approx(p[K], rel=1e-12)  # blocking


@pytest.mark.parametrize(("N", "lam", "mu"), [(1, 1.0, 1.0), (4, 0.5, 3.0), (10, 1.0, 4.0)])
def test_machine_repairman_erlang_b(N, lam, mu):
    net = PetriNet("repairman")
    net.place("up", tokens=N)
    net.place("down")
    net.timed("fail", rate=lam, inputs={"up": 1}, outputs={"down": 1}, servers="infinite")
    net.timed("repair", rate=mu, inputs={"down": 1}, outputs={"up": 1})
    sol = net.solve()
    # repairer idle with probability B(N, r), Erlang-B with r = Z / D = mu / lam
    r = mu / lam
    p0 = (r**N / math.factorial(N)) / sum(r**j / math.factorial(j) for j in range(N + 1))
    X = (1 - p0) * mu
    assert sol.probability(lambda m: m["down"] == 0) == pytest.approx(p0, rel=1e-12)
    assert sol.throughput("repair") == pytest.approx(X, rel=1e-12)
    assert sol.throughput("fail") == pytest.approx(X, rel=1e-12)
    assert sol.mean_tokens("up") == pytest.approx(X / lam, rel=1e-12)  # Little: X = lam * E[up]


def test_closed_queueing_network_against_exact_mva():
    Z, D1, D2, N = 2.0, 0.5, 0.8, 5
    net = PetriNet("cqn")
    net.place("think", tokens=N)
    net.place("q1")
    net.place("q2")
    net.timed("wake", rate=1 / Z, inputs={"think": 1}, outputs={"q1": 1}, servers="infinite")
    net.timed("s1", rate=1 / D1, inputs={"q1": 1}, outputs={"q2": 1})
    net.timed("s2", rate=1 / D2, inputs={"q2": 1}, outputs={"think": 1})
    sol = net.solve()
    assert len(sol.space) == math.comb(N + 2, 2)
    ref = mva(ClosedNetwork([Delay("think", Z), Queue("q1", D1), Queue("q2", D2)], population=N))
    for t in ("wake", "s1", "s2"):
        assert sol.throughput(t) == pytest.approx(ref.throughput, rel=1e-12)
    for p in ("think", "q1", "q2"):
        assert sol.mean_tokens(p) == pytest.approx(ref.queue_length[p], rel=1e-12)


def test_five_dimensional_ring_iterative_against_product_form_and_mva():
    # 6 single-server queues in a ring, 15 tokens: C(20, 5) = 15,504 markings on a 5-dimensional
    # lattice, where "auto" solves iteratively (Gauss-Seidel-preconditioned BiCGSTAB). Product form:
    # pi(m) proportional to prod_k D_k^m_k, every marking to 1e-9; throughput and queues equal MVA.
    D, N = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5], 15
    net = PetriNet("ring6")
    for k in range(6):
        net.place(f"q{k}", tokens=N if k == 0 else 0)
    for k in range(6):
        net.timed(f"s{k}", rate=1 / D[k], inputs={f"q{k}": 1}, outputs={f"q{(k + 1) % 6}": 1})
    sol = net.solve()
    assert sol.method == "iterative" and len(sol.space) == math.comb(N + 5, 5)
    w = np.exp(sol.space.markings @ np.log(D))
    np.testing.assert_allclose(sol.probabilities, w / w.sum(), rtol=1e-9, atol=0)
    ref = mva(ClosedNetwork([Queue(f"q{k}", d) for k, d in enumerate(D)], population=N))
    for k in range(6):
        assert sol.throughput(f"s{k}") == pytest.approx(ref.throughput, rel=1e-10)
        assert sol.mean_tokens(f"q{k}") == pytest.approx(ref.queue_length[f"q{k}"], rel=1e-10)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_fork_join_barrier_cycle_time_is_harmonic(n):
    mu = 2.0
    net = PetriNet("forkjoin")
    for i in range(n):
        net.place(f"run{i}", tokens=1)
        net.place(f"done{i}")
        net.timed(f"task{i}", rate=mu, inputs={f"run{i}": 1}, outputs={f"done{i}": 1})
    net.immediate(
        "barrier", inputs={f"done{i}": 1 for i in range(n)}, outputs={f"run{i}": 1 for i in range(n)}
    )
    sol = net.solve()
    assert len(sol.space) == 2**n - 1
    H = sum(1 / k for k in range(1, n + 1))  # E[max of n Exp(mu)] = H_n / mu
    assert sol.throughput("barrier") == pytest.approx(mu / H, rel=1e-12)
    assert sol.throughput("task0") == pytest.approx(mu / H, rel=1e-12)


def test_branching_by_weights():
    net = PetriNet("branch")
    net.place("src", tokens=1)
    net.place("choose")
    weights = {"a": 1.0, "b": 2.0, "c": 5.0}
    for name, w in weights.items():
        net.place(name)
        net.immediate(f"go_{name}", inputs={"choose": 1}, outputs={name: 1}, weight=w)
        net.timed(f"back_{name}", rate=1.0, inputs={name: 1}, outputs={"src": 1})
    net.timed("start", rate=2.0, inputs={"src": 1}, outputs={"choose": 1})
    sol = net.solve()
    # cycle: Exp(2) then Exp(1): 1.5 s mean, branch i with probability w_i / 8
    X = 1 / 1.5
    assert sol.throughput("start") == pytest.approx(X, rel=1e-12)
    for name, w in weights.items():
        assert sol.throughput(f"go_{name}") == pytest.approx(X * w / 8, rel=1e-12)
        assert sol.mean_tokens(name) == pytest.approx(X * w / 8 * 1.0, rel=1e-12)  # Little


def test_vanishing_loop_throughputs():
    net = PetriNet("retry")
    net.place("idle", tokens=1)
    net.place("try")
    net.place("fail")
    net.timed("start", rate=4.0, inputs={"idle": 1}, outputs={"try": 1})
    net.immediate("bad", inputs={"try": 1}, outputs={"fail": 1}, weight=3.0)
    net.immediate("ok", inputs={"try": 1}, outputs={"idle": 1}, weight=1.0)
    net.immediate("again", inputs={"fail": 1}, outputs={"try": 1})
    sol = net.solve()
    # geometric number of failures per start: mean w_bad / w_ok = 3
    assert sol.throughput("start") == pytest.approx(4.0)
    assert sol.throughput("ok") == pytest.approx(4.0, rel=1e-12)
    assert sol.throughput("bad") == pytest.approx(12.0, rel=1e-12)
    assert sol.throughput("again") == pytest.approx(12.0, rel=1e-12)


def test_priority_preempts_lower_immediate():
    net = PetriNet("prio")
    net.place("idle", tokens=1)
    net.place("ready")
    net.place("hi")
    net.place("lo")
    net.timed("start", rate=1.0, inputs={"idle": 1}, outputs={"ready": 1})
    net.immediate("urgent", inputs={"ready": 1}, outputs={"hi": 1}, priority=2)
    net.immediate("normal", inputs={"ready": 1}, outputs={"lo": 1}, priority=1)
    net.timed("h", rate=1.0, inputs={"hi": 1}, outputs={"idle": 1})
    net.timed("l", rate=1.0, inputs={"lo": 1}, outputs={"idle": 1})
    sol = net.solve()
    assert sol.throughput("urgent") == pytest.approx(0.5, rel=1e-12)
    assert sol.throughput("normal") == 0.0
    assert sol.mean_tokens("lo") == 0.0


def test_one_closed_class_after_a_transient_start():
    # 'init' fires once, then the net alternates between x and y forever
    net = PetriNet("transient")
    net.place("boot", tokens=1)
    net.place("x")
    net.place("y")
    net.timed("init", rate=1.0, inputs={"boot": 1}, outputs={"x": 1})
    net.timed("xy", rate=1.0, inputs={"x": 1}, outputs={"y": 1})
    net.timed("yx", rate=3.0, inputs={"y": 1}, outputs={"x": 1})
    sol = net.solve()
    assert sol.probability(lambda m: m["boot"] == 1) == 0.0
    assert sol.mean_tokens("x") == pytest.approx(0.75, rel=1e-12)
    assert sol.throughput("init") == 0.0


# ---------------------------------------------------------------------------- API
def test_methods_agree_and_report_what_ran():
    net = mmck(2.0, 1.0, 2, 30, True)
    d = net.solve(method="direct")
    i = net.solve(method="iterative")
    a = net.solve()
    assert (d.method, i.method, a.method) == ("direct", "iterative", "gth")
    np.testing.assert_allclose(i.probabilities, d.probabilities, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(a.probabilities, d.probabilities, rtol=1e-12, atol=1e-16)
    with pytest.raises(UnknownNameError, match="'auto', 'direct', 'iterative', 'gth'"):
        net.solve(method="gauss")


def test_probability_predicates_distribution_and_names():
    sol = mmck(1.0, 2.0, 1, 3, True).solve()
    p = mmck_closed_form(1.0, 2.0, 1, 3)
    # vectorized (arrays per place), per-marking (a dict of ints), and auto-detected
    assert sol.probability(lambda m: m["q"] >= 2, vectorized=True) == pytest.approx(p[2:].sum())
    assert sol.probability(lambda m: m["q"] >= 2 and m["q"] < 3, vectorized=False) == pytest.approx(p[2])
    assert sol.probability(lambda m: m["q"] >= 2 and m["q"] < 3) == pytest.approx(p[2])
    assert sol.probability(lambda m: True) == pytest.approx(1.0)
    dist = sol.distribution()
    assert [m for m, _ in dist] == [{"q": k} for k in range(4)]
    assert [x for _, x in dist] == pytest.approx(p.tolist())
    assert repr(sol) == "GSPNSolution('mm13', markings=4, method='gth')"
    with pytest.raises(UnknownNameError, match="'arrive', 'serve'"):
        sol.throughput("nope")
    with pytest.raises(UnknownNameError, match="'q'"):
        sol.mean_tokens("nope")
    with pytest.raises(InvalidParameterError):
        sol.probability(42)


# ---------------------------------------------------------------------------- errors
def test_dead_marking_is_reported():
    net = PetriNet("dies")
    net.place("a", tokens=1)
    net.place("b")
    net.timed("once", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    with pytest.raises(InvalidParameterError, match=r"deadlock.*\{'b': 1\}"):
        net.solve()


def test_absorbing_marking_is_reported():
    net = PetriNet("stuck")
    net.place("a", tokens=1)
    net.place("b")
    net.timed("go", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    net.timed("spin", rate=1.0, inputs={"b": 1}, outputs={"b": 1})
    with pytest.raises(InvalidParameterError, match=r"absorbing marking.*\{'b': 1\}"):
        net.solve()


def test_several_closed_classes_are_reported():
    net = PetriNet("split")
    net.place("s", tokens=1)
    for side in ("l", "r"):
        net.place(f"{side}1")
        net.place(f"{side}2")
        net.timed(f"to_{side}", rate=1.0, inputs={"s": 1}, outputs={f"{side}1": 1})
        net.timed(f"{side}12", rate=1.0, inputs={f"{side}1": 1}, outputs={f"{side}2": 1})
        net.timed(f"{side}21", rate=1.0, inputs={f"{side}2": 1}, outputs={f"{side}1": 1})
    with pytest.raises(InvalidParameterError, match="2 closed classes"):
        net.solve()


def test_symbolic_rates_need_symbolic_true():
    lam = sympy.Symbol("lam", positive=True)
    net = PetriNet("sym")
    net.place("q")
    net.timed("arrive", rate=lam, outputs={"q": 1}, inhibitors={"q": 1})
    net.timed("serve", rate=1.0, inputs={"q": 1})
    with pytest.raises(InvalidParameterError, match="symbolic=True.*'arrive'"):
        net.solve()


def test_symbolic_solution():
    lam, mu = sympy.symbols("lam mu", positive=True)
    net = PetriNet("sym")
    net.place("q")
    net.timed("arrive", rate=lam, outputs={"q": 1}, inhibitors={"q": 2})
    net.timed("serve", rate=mu, inputs={"q": 1})
    sol = net.solve(symbolic=True)
    assert sol.method == "symbolic"
    norm = mu**2 + lam * mu + lam**2
    assert sympy.simplify(sol.throughput("serve") - lam * mu * (mu + lam) / norm) == 0
    assert sympy.simplify(sol.mean_tokens("q") - (lam * mu + 2 * lam**2) / norm) == 0


def test_symbolic_solution_of_a_numeric_net_is_exact():
    net = PetriNet("repair")
    net.place("up", tokens=2)
    net.place("down")
    net.timed("fail", rate=1.0, inputs={"up": 1}, outputs={"down": 1}, servers="infinite")
    net.timed("repair", rate=2.0, inputs={"down": 1}, outputs={"up": 1})
    sol = net.solve(symbolic=True)
    # p(down=0,1,2) proportional to 1, 1, 1/2: X = 2 * (1 - 2/5) = 6/5
    assert sol.throughput("repair") == sympy.Rational(6, 5)
    assert sol.mean_tokens("down") == sympy.Rational(4, 5)
    assert sol.probability(lambda m: m["down"] == 2) == sympy.Rational(1, 5)


def test_symbolic_weights_give_symbolic_immediate_throughputs():
    a, b = sympy.symbols("a b", positive=True)
    net = symbolic_branch_net(a, b)
    sol = net.solve(symbolic=True)
    # every cycle: Exp(1) + Exp(1), X = 1/2 whatever the branch; gx takes a share a/(a+b)
    assert sympy.simplify(sol.throughput("start") - sympy.Rational(1, 2)) == 0
    assert sympy.simplify(sol.throughput("gx") - a / (2 * (a + b))) == 0
