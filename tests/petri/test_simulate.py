"""Discrete-event simulation of GSPNs against independent closed forms.

Sources: M/M/1/K and M/M/c/K birth-death solutions; Pollaczek-Khinchine for
M/D/1; the fork-join cycle time ``E[max of n tasks]`` (``H_n / mu`` for
exponential tasks, a numerical integral ``int 1 - F(x)**n dx`` for Erlang
ones); the machine-repairman model, whose think (delay) station is insensitive
to the think-time law; the branching probabilities of immediate transitions;
and, where ``net.solve()`` exists, the CTMC of the same net.

Every run uses a fixed seed. A test asserts that the exact value lies within 4
half-widths of the estimate (so a different but valid random stream fails with
negligible probability) and that the interval is narrow enough to mean
something.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from queuesgd import PetriNet
from queuesgd.distributions import Deterministic, Erlang, Exponential, Normal
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.petri.simulate import Estimate, SimulationResult, simulate
from queuesgd.petri.statespace import TimelessTrapError


def assert_close(est: Estimate, exact: float, rel: float) -> None:
    """``exact`` within 4 half-widths, and the half-width below ``rel`` of the value."""
    assert est.covers(exact, 4.0), (est, exact)
    assert est.half_width <= rel * abs(exact), (est, exact)
    assert est.low == pytest.approx(est.mean - est.half_width)
    assert est.high == pytest.approx(est.mean + est.half_width)


def mmck(lam: float, mu: float, c: int, K: int) -> np.ndarray:
    """Stationary distribution of M/M/c/K (birth-death)."""
    p = [1.0]
    for n in range(1, K + 1):
        p.append(p[-1] * lam / (mu * min(n, c)))
    p = np.array(p)
    return p / p.sum()


def queue_net(lam: float, mu: float, K: int, servers: int = 1) -> PetriNet:
    net = PetriNet("queue")
    net.place("queue")
    net.timed("arrive", rate=lam, outputs={"queue": 1}, inhibitors={"queue": K})
    net.timed("serve", rate=mu, inputs={"queue": 1}, servers=servers)
    return net


# ----------------------------------------------------------------------------- exponential nets


def test_mm1k_throughput_tokens_and_probability():
    lam, mu, K = 1.0, 1.25, 5
    p = mmck(lam, mu, 1, K)
    res = simulate(
        queue_net(lam, mu, K),
        until=60_000,
        warmup=50,
        rng=np.random.default_rng(11),
        predicates={"empty": lambda m: m["queue"] == 0, "full": lambda m: m["queue"] == K},
    )
    assert_close(res.throughput("serve"), lam * (1 - p[K]), 0.02)
    assert_close(res.throughput("arrive"), lam * (1 - p[K]), 0.02)
    assert_close(res.mean_tokens("queue"), float(np.arange(K + 1) @ p), 0.03)
    assert_close(res.probability("empty"), p[0], 0.05)
    assert_close(res.probability("full"), p[K], 0.1)
    assert res.batches == 20 and res.time == 60_000 and res.warmup == 50
    assert res.batch_durations == pytest.approx(np.full(20, (60_000 - 50) / 20))


@pytest.mark.parametrize("c", [2, "infinite"])
def test_mmck_multi_server_clocks(c):
    # servers=c: min(e, c) clocks run; for exponential laws that is rate mu * min(n, c).
    lam, mu, K = 3.0, 1.0, 6
    cc = K if c == "infinite" else c
    p = mmck(lam, mu, cc, K)
    res = simulate(queue_net(lam, mu, K, servers=c), firings=100_000, warmup=20, rng=3)
    assert_close(res.throughput("serve"), lam * (1 - p[K]), 0.02)
    assert_close(res.mean_tokens("queue"), float(np.arange(K + 1) @ p), 0.02)
    assert res.firings > 100_000 and res.batches == 20


def test_fork_join_exponential_tasks_as_one_infinite_server_transition():
    # n tasks in parallel, each Exp(mu): a cycle lasts E[max] = H_n / mu.
    n, mu = 4, 2.0
    net = PetriNet("forkjoin")
    net.place("todo", tokens=n)
    net.place("done")
    net.timed("task", rate=mu, inputs={"todo": 1}, outputs={"done": 1}, servers="infinite")
    net.immediate("join", inputs={"done": n}, outputs={"todo": n})
    res = net.simulate(until=20_000, rng=5)
    H = sum(1 / k for k in range(1, n + 1))
    assert_close(res.throughput("join"), mu / H, 0.02)
    assert_close(res.throughput("task"), n * mu / H, 0.02)


def test_fork_join_erlang_tasks_keep_their_clocks():
    # One single-server transition per task: a task's clock runs while siblings finish
    # (enabling memory), so the cycle is E[max of n Erlang(2)] = int 1 - F(x)**n dx.
    n, k, rate = 3, 2, 4.0
    net = PetriNet("forkjoin-erlang")
    net.place("start", tokens=1)
    for i in range(n):
        net.place(f"run{i}")
        net.place(f"done{i}")
        net.timed(f"task{i}", rate=1.0, inputs={f"run{i}": 1}, outputs={f"done{i}": 1})
    net.immediate("fork", inputs={"start": 1}, outputs={f"run{i}": 1 for i in range(n)})
    net.immediate("join", inputs={f"done{i}": 1 for i in range(n)}, outputs={"start": 1})
    law = Erlang(k, rate)
    cycle = integrate.quad(lambda x: 1 - special.gammainc(k, rate * x) ** n, 0, np.inf)[0]
    res = simulate(net, until=10_000, delays={f"task{i}": law for i in range(n)}, rng=8)
    assert_close(res.throughput("join"), 1 / cycle, 0.02)
    assert_close(res.throughput("fork"), 1 / cycle, 0.02)
    # Tokens in run_i: the fraction of the cycle task i is running = E[task] / E[max].
    assert_close(res.mean_tokens("run0"), law.mean / cycle, 0.02)


# ----------------------------------------------------------------------------- general laws


def test_md1_pollaczek_khinchine():
    # M/D/1 with rho = 0.6: L = rho + rho^2 / (2 (1 - rho)) = 1.05. The inhibitor at K = 40
    # truncates a tail that decays geometrically (about 0.3**n here), i.e. by far less than 1e-15.
    lam, D, K = 0.6, 1.0, 40
    net = queue_net(lam, 1 / D, K)
    res = simulate(net, until=60_000, warmup=100, delays={"serve": Deterministic(D)}, rng=21)
    rho = lam * D
    assert_close(res.mean_tokens("queue"), rho + rho**2 / (2 * (1 - rho)), 0.05)
    assert_close(res.throughput("serve"), lam, 0.02)


def repairman(N: int) -> PetriNet:
    """N machines, each with its own think (failure) transition; one repairer served in random order.

    Per-machine transitions make the think station a true delay station for any law; with an
    exponential repair time the order of service does not change the number of broken machines.
    """
    net = PetriNet("repairman")
    net.place("repairer", tokens=1)
    for i in range(N):
        net.place(f"up{i}", tokens=1)
        net.place(f"broken{i}")
        net.place(f"repair{i}")
        net.timed(f"fail{i}", rate=1.0, inputs={f"up{i}": 1}, outputs={f"broken{i}": 1})
        net.immediate(
            f"start{i}",
            inputs={f"broken{i}": 1, "repairer": 1},
            outputs={f"repair{i}": 1},
            weight=1.0,
        )
        net.timed(f"fix{i}", rate=1.0, inputs={f"repair{i}": 1}, outputs={f"up{i}": 1, "repairer": 1})
    return net


@pytest.mark.parametrize(
    "think", [Exponential(mean=2.0), Erlang(4, mean=2.0), Deterministic(2.0)], ids=["exp", "erlang4", "det"]
)
def test_machine_repairman_insensitive_to_think_time_law(think):
    # Exponential repair (D = 1), think time Z = 2: X = (1 - p0) / D with
    # p0 = (r^N / N!) / sum_j r^j / j!, r = Z / D, whatever the think-time law (insensitivity
    # of the delay station in a product-form network).
    N, Z, D = 3, 2.0, 1.0
    r = Z / D
    p0 = (r**N / math.factorial(N)) / sum(r**j / math.factorial(j) for j in range(N + 1))
    net = repairman(N)
    res = simulate(net, until=30_000, delays={f"fail{i}": think for i in range(N)}, rng=13)
    X = sum(res.throughput(f"fix{i}").mean for i in range(N))
    assert X == pytest.approx((1 - p0) / D, rel=0.02)
    assert_close(res.mean_tokens("repairer"), p0, 0.05)
    # Little's law on the think station: machines up = X * Z.
    up = sum(res.mean_tokens(f"up{i}").mean for i in range(N))
    assert up == pytest.approx((1 - p0) / D * Z, rel=0.02)


def test_multi_server_clocks_restart_together_when_one_fires():
    # The documented resampling rule: two busy servers of ONE transition with deterministic
    # time 1 restart together each time one of them fires, so the transition fires once per
    # unit of time; two single-server transitions fire twice per unit of time.
    shared = PetriNet("shared")
    shared.place("jobs", tokens=2)
    shared.timed("work", rate=1.0, inputs={"jobs": 1}, outputs={"jobs": 1}, servers=2)
    res = simulate(shared, until=1_000.5, delays={"work": Deterministic(1.0)}, rng=0)
    assert res.throughput("work").mean == pytest.approx(1.0, rel=1e-3)

    split = PetriNet("split")
    for i in range(2):
        split.place(f"job{i}", tokens=1)
        split.timed(f"work{i}", rate=1.0, inputs={f"job{i}": 1}, outputs={f"job{i}": 1})
    res = simulate(
        split, until=1_000.5, delays={"work0": Deterministic(1.0), "work1": Deterministic(1.0)}, rng=0
    )
    total = res.throughput("work0").mean + res.throughput("work1").mean
    assert total == pytest.approx(2.0, rel=1e-3)


# ----------------------------------------------------------------------------- immediate transitions


def branching_net() -> PetriNet:
    """A token cycles: ``go`` (rate 1) then ``left`` (weight 1) straight back or ``right`` (weight 3)
    through ``back`` (rate 2); a priority-2 ``count`` transition fires first on every return."""
    net = PetriNet("branch")
    net.place("a", tokens=1)
    net.place("choice")
    net.place("b")
    net.place("ret")
    net.timed("go", rate=1.0, inputs={"a": 1}, outputs={"choice": 1})
    net.immediate("left", inputs={"choice": 1}, outputs={"ret": 1}, weight=1.0)
    net.immediate("right", inputs={"choice": 1}, outputs={"b": 1}, weight=3.0)
    net.timed("back", rate=2.0, inputs={"b": 1}, outputs={"ret": 1})
    net.immediate("count", inputs={"ret": 1}, outputs={"a": 1}, priority=2)
    net.immediate("never", inputs={"ret": 1}, outputs={"a": 1}, priority=1)
    return net


def test_branching_by_weights_and_priorities():
    # A cycle lasts 1 + (3/4)(1/2) = 1.375 on average.
    res = simulate(branching_net(), until=20_000, rng=2)
    X = 1 / 1.375
    assert_close(res.throughput("go"), X, 0.02)
    assert_close(res.throughput("left"), X / 4, 0.04)
    assert_close(res.throughput("right"), 3 * X / 4, 0.02)
    assert_close(res.throughput("count"), X, 0.02)
    assert res.throughput("never") == Estimate(0.0, 0.0, 0.0, 0.0)
    assert_close(res.mean_tokens("b"), 3 * X / 4 * 0.5, 0.03)
    assert res.mean_tokens("choice").mean == 0.0  # vanishing markings take no time


def _ctmc(net: PetriNet):
    return net.solve()


def test_simulation_agrees_with_ctmc():
    net = branching_net()
    net.timed("leak", rate=0.5, inputs={"a": 1}, outputs={"b": 1})  # a second race out of "a"
    sol = _ctmc(net)
    busy = {"busy": lambda m: m["b"] >= 1}
    res = simulate(net, until=20_000, rng=4, predicates=busy)
    assert_close(res.probability("busy"), float(sol.probability(busy["busy"])), 0.08)
    for t in net.transition_names:
        exact = float(sol.throughput(t))
        if exact == 0:
            assert res.throughput(t).mean == 0
        else:
            assert_close(res.throughput(t), exact, 0.08)
    for p in ("a", "b"):
        assert_close(res.mean_tokens(p), float(sol.mean_tokens(p)), 0.08)


# ----------------------------------------------------------------------------- run control


def test_reproducible_and_seed_sensitive():
    net = queue_net(1.0, 2.0, 4)
    a = simulate(net, firings=2_000, rng=7)
    b = simulate(net, firings=2_000, rng=np.random.default_rng(7))
    c = simulate(net, firings=2_000, rng=8)
    assert a.throughput("serve") == b.throughput("serve")
    assert a.throughput("serve") != c.throughput("serve")


def test_firings_mode_counts_and_until_cap():
    net = queue_net(1.0, 2.0, 4)
    res = simulate(net, firings=1_000, warmup=10.0, batches=10, rng=1)
    assert res.batches == 10
    arrivals = res.throughput("arrive").mean * res.batch_durations.sum()
    services = res.throughput("serve").mean * res.batch_durations.sum()
    assert round(arrivals + services) == 1_000
    assert res.time == pytest.approx(10.0 + res.batch_durations.sum())
    # until cuts the run short: fewer, partly partial batches, ending exactly at until.
    capped = simulate(net, firings=1_000, until=300.0, batches=10, rng=1)  # ~580 firings by t=300
    assert capped.time == 300.0 and 2 <= capped.batches < 10
    assert capped.batch_durations.sum() == pytest.approx(300.0)


def test_result_repr_and_lookups():
    res = simulate(queue_net(1.0, 2.0, 4), until=1_000.0, rng=0)
    assert isinstance(res, SimulationResult)
    assert repr(res).startswith("SimulationResult('queue', time=1000, firings=")
    assert set(res.throughputs) == {"arrive", "serve"}
    with pytest.raises(UnknownNameError, match="transition: got 'nope'"):
        res.throughput("nope")
    with pytest.raises(UnknownNameError, match="place"):
        res.mean_tokens("nope")
    with pytest.raises(UnknownNameError, match="predicate"):
        res.probability("nope")


def test_speed_is_reasonable():
    # About 3e5 firings/s on the reference machine; a loose bound that only catches a
    # pathological slowdown (the benchmark, not this test, measures speed).
    import time

    start = time.perf_counter()
    res = simulate(queue_net(1.0, 1.25, 10), firings=100_000, rng=0)
    assert time.perf_counter() - start < 4.0 and res.firings == 100_000


# ----------------------------------------------------------------------------- bad input and bad nets


def test_deadlock_names_marking_and_time():
    net = PetriNet("dead")
    net.place("a", tokens=2)
    net.place("b")
    net.timed("t", rate=1.0, inputs={"a": 1}, outputs={"b": 1})
    with pytest.raises(
        InvalidParameterError, match=r"deadlock: at time [0-9.]+ the marking \{'b': 2\} enables no transition"
    ):
        simulate(net, until=100.0, rng=0)


def test_timeless_trap_names_transitions():
    net = PetriNet("trap")
    net.place("a", tokens=1)
    net.place("b")
    net.place("c")
    net.timed("slow", rate=1.0, inputs={"c": 1})
    net.immediate("ping", inputs={"a": 1}, outputs={"b": 1})
    net.immediate("pong", inputs={"b": 1}, outputs={"a": 1})
    with pytest.raises(TimelessTrapError, match="looping through 'ping', 'pong'"):
        simulate(net, until=10.0, rng=0, max_vanishing=500)
    # Zero firing times that feed each other are a timeless trap too.
    zero = PetriNet("zero")
    zero.place("a", tokens=1)
    zero.timed("z", rate=1.0, inputs={"a": 1}, outputs={"a": 1})
    with pytest.raises(TimelessTrapError, match="looping through 'z'"):
        simulate(zero, until=10.0, delays={"z": Deterministic(0.0)}, rng=0)


def test_conflict_without_weights_names_transitions():
    net = PetriNet("conflict")
    net.place("a", tokens=1)
    net.place("b")
    net.immediate("x", inputs={"a": 1}, outputs={"b": 1})
    net.immediate("y", inputs={"a": 1}, outputs={"b": 1}, weight=2.0)
    net.timed("back", rate=1.0, inputs={"b": 1}, outputs={"a": 1})
    with pytest.raises(
        InvalidParameterError,
        match=r"weight of immediate transition\(s\) 'x'.*each of 'x', 'y'.*priority 1.*\{'a': 1\}",
    ):
        simulate(net, until=10.0, rng=0)


def test_bad_parameters():
    net = queue_net(1.0, 2.0, 4)
    with pytest.raises(InvalidParameterError, match="until"):
        simulate(net, rng=0)
    with pytest.raises(InvalidParameterError, match="rng"):
        simulate(net, until=10.0)
    with pytest.raises(InvalidParameterError, match="rng"):
        simulate(net, until=10.0, rng=1.5)
    with pytest.raises(InvalidParameterError, match="batches"):
        simulate(net, until=10.0, batches=1, rng=0)
    with pytest.raises(InvalidParameterError, match="until: got 5.0; accepted: a time > warmup"):
        simulate(net, until=5.0, warmup=5.0, rng=0)
    with pytest.raises(InvalidParameterError, match="firings"):
        simulate(net, firings=10, batches=20, rng=0)
    with pytest.raises(InvalidParameterError, match="confidence"):
        simulate(net, until=10.0, confidence=1.0, rng=0)
    with pytest.raises(InvalidParameterError, match="max_vanishing"):
        simulate(net, until=10.0, max_vanishing=0, rng=0)
    with pytest.raises(UnknownNameError, match="delays: got 'nope'; accepted: one of 'arrive', 'serve'"):
        simulate(net, until=10.0, delays={"nope": Deterministic(1.0)}, rng=0)
    with pytest.raises(InvalidParameterError, match=r"delays\['serve'\]"):
        simulate(net, until=10.0, delays={"serve": 1.0}, rng=0)
    with pytest.raises(InvalidParameterError, match="predicates"):
        simulate(net, until=10.0, predicates={"x": 3}, rng=0)
    with pytest.raises(InvalidParameterError, match="PetriNet"):
        simulate("net", until=10.0, rng=0)
    with pytest.raises(InvalidParameterError, match="at least 2 batches"):
        simulate(net, firings=100_000, until=1e-9, rng=0)


@pytest.mark.parametrize("servers", [2, "infinite"])
def test_a_source_transition_runs_one_clock_whatever_its_servers(servers):
    # Enabling degree 1 without input places (docs/petri.md), as net.solve() has it: the arrivals of
    # M/M/1/3 at rate 1 whatever servers=, throughput 1 - p3 = 14/15 (p_n proportional to 0.5**n). The
    # simulation ran `servers` clocks (X = 1.49 with 2) and refused "infinite".
    net = PetriNet("source")
    net.place("queue")
    net.timed("arrive", rate=1.0, outputs={"queue": 1}, inhibitors={"queue": 3}, servers=servers)
    net.timed("serve", rate=2.0, inputs={"queue": 1})
    assert net.solve().throughput("arrive") == pytest.approx(14 / 15, rel=1e-12)
    assert_close(simulate(net, until=20_000, rng=0).throughput("arrive"), 14 / 15, 0.03)


def test_bad_nets_and_laws():
    imm = branching_net()
    with pytest.raises(InvalidParameterError, match="immediate transitions fire in zero time"):
        simulate(imm, until=10.0, delays={"left": Deterministic(1.0)}, rng=0)
    neg = queue_net(1.0, 2.0, 4)
    with pytest.raises(InvalidParameterError, match="nonnegative durations"):
        simulate(neg, until=1_000.0, delays={"serve": Normal(0.1, 1.0)}, rng=0)
    import sympy

    sym = PetriNet("sym")
    sym.place("q", tokens=1)
    sym.timed("t", rate=sympy.Symbol("mu", positive=True), inputs={"q": 1}, outputs={"q": 1})
    with pytest.raises(InvalidParameterError, match="'t' rate"):
        simulate(sym, until=10.0, rng=0)
    res = simulate(sym, until=1_000.0, delays={"t": Deterministic(0.5)}, rng=0)
    assert res.throughput("t").mean == pytest.approx(2.0, rel=1e-3)
