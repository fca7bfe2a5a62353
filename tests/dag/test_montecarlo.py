"""simulate(): closed forms for fork-join, factor-scaled chains and exact quantiles; shares; bad input."""

import math

import numpy as np
import pytest

from queuesgd.dag import Task, TaskGraph, schedule, simulate
from queuesgd.distributions import Deterministic, Erlang, Exponential, Gamma, LogNormal, Normal
from queuesgd.errors import InvalidParameterError


def dkw(n: int, alpha: float = 1e-6) -> float:
    """Dvoretzky-Kiefer-Wolfowitz: sup |F_n - F| <= eps with probability >= 1 - alpha."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))


def fork_join(n: int, law) -> TaskGraph:
    return TaskGraph(
        [Task("fork")]
        + [Task(f"w{i}", law, after="fork", group="compute") for i in range(n)]
        + [Task("join", after=[f"w{i}" for i in range(n)])]
    )


@pytest.mark.parametrize("n", [1, 2, 8, 32])
def test_fork_join_of_exponentials_is_harmonic(n):
    rate = 4.0
    sim = simulate(fork_join(n, Exponential(rate)), 40_000, rng=n)
    exact = math.fsum(1.0 / i for i in range(1, n + 1)) / rate  # E[max of n iid Exp(rate)] = H_n / rate
    lo, hi = sim.interval
    assert lo < exact < hi
    assert hi - lo < 0.03 * exact  # and the interval is tight
    # each branch is the slowest equally often: shares 1/n each
    shares = [sim.task_share[f"w{i}"] for i in range(n)]
    np.testing.assert_allclose(shares, 1.0 / n, atol=0.02)
    assert sum(sim.group_share.values()) == pytest.approx(1.0, rel=1e-12)
    assert sim.group_share["compute"] == pytest.approx(1.0, rel=1e-12)  # fork and join take no time


def test_quantiles_match_the_exact_cdf_of_the_maximum():
    n, rate, iters = 5, 2.0, 50_000
    sim = simulate(fork_join(n, Exponential(rate)), iters, rng=11)
    qs = np.array([0.05, 0.25, 0.5, 0.75, 0.95, 0.99])
    est = sim.quantile(qs)
    exact_q = -np.log(1.0 - qs ** (1.0 / n)) / rate  # P(max <= x) = (1 - e^{-rate x})^n
    cdf_at_est = (1.0 - np.exp(-rate * est)) ** n
    assert np.all(np.abs(cdf_at_est - qs) <= dkw(iters))
    np.testing.assert_allclose(est, exact_q, rtol=0.03)
    assert sim.quantile(0.5) == float(np.median(sim.makespans))


@pytest.mark.parametrize("law", [LogNormal.from_mean_scv(1.2, 0.3), Gamma.from_mean_scv(0.8, 0.5)])
def test_factor_scaled_chain(law):
    durations = [0.5, 1.25, 2.0, 0.25]
    tasks = [
        Task(f"c{i}", d, after=() if i == 0 else f"c{i - 1}", scale="speed") for i, d in enumerate(durations)
    ]
    g = TaskGraph(tasks, factors={"speed": law})
    iters = 40_000
    sim = simulate(g, iters, rng=5)
    total = sum(durations)
    exact = float(law.mean) * total  # E[factor * sum] = E[factor] * sum
    assert sim.interval[0] < exact < sim.interval[1]
    # one draw per iteration shared by the whole chain: makespan / sum has the factor's law exactly
    u = sim.makespans / total
    probs = np.asarray(law.cdf(np.sort(u)))
    assert np.max(np.abs(probs - np.arange(1, iters + 1) / iters)) <= dkw(iters)
    np.testing.assert_allclose(sim.mean_start, float(law.mean) * np.array([0.0, 0.5, 1.75, 3.75]), rtol=0.02)
    np.testing.assert_allclose(list(sim.task_share.values()), np.array(durations) / total, rtol=1e-12)


def test_independent_factors_per_worker():
    # two workers, each a task scaled by its own Exp(1) factor: makespan = max of two iid Exp(1) -> E = 1.5
    g = TaskGraph(
        [Task("a", 1.0, scale="fa"), Task("b", 1.0, scale="fb")],
        factors={"fa": Exponential(1.0), "fb": Exponential(1.0)},
    )
    sim = simulate(g, 40_000, rng=2)
    assert sim.interval[0] < 1.5 < sim.interval[1]


def test_resource_serializes_random_jobs():
    # two Erlang jobs on one resource, both ready at 0: makespan = X1 + X2, an Erlang(6) of mean 2
    law = Erlang(3, mean=1.0)
    g = TaskGraph([Task("a", law, resource="r"), Task("b", law, resource="r")])
    iters = 30_000
    sim = simulate(g, iters, rng=9)
    assert sim.interval[0] < 2.0 < sim.interval[1]
    total = Erlang(6, mean=2.0)
    probs = np.asarray(total.cdf(np.sort(sim.makespans)))
    assert np.max(np.abs(probs - np.arange(1, iters + 1) / iters)) <= dkw(iters)
    # a runs first (declared first) and finishes at X1, b at X1 + X2
    np.testing.assert_allclose(sim.mean_finish, [1.0, 2.0], rtol=0.02)
    np.testing.assert_allclose(sim.mean_start, [0.0, 1.0], rtol=0.02, atol=0)


def test_deterministic_graph_repeats_the_schedule():
    g = TaskGraph(
        [
            Task("a", 1.0, resource="r"),
            Task("b", Deterministic(2.0), resource="r"),
            Task("c", 0.5, after="a", scale="f"),
        ],
        factors={"f": Deterministic(4.0)},
    )
    assert g.is_deterministic
    sim = simulate(g, 100, rng=0)
    ref = schedule(g)
    assert ref.makespan == 3.0  # a 0-1, b 1-3, c 1-3 (0.5 x 4)
    np.testing.assert_array_equal(sim.makespans, np.full(100, ref.makespan))
    np.testing.assert_array_equal(sim.mean_finish, ref.finish)
    assert sim.interval == (3.0, 3.0)


def test_chunks_match_one_big_batch(monkeypatch):
    # several chunks give the same per-iteration statistics as one batch of the same draws
    from queuesgd.dag import _evaluate

    law = Exponential(1.0)
    g = fork_join(4, law)
    monkeypatch.setattr(_evaluate, "CHUNK_ELEMENTS", 7 * 6)  # 6 rows per chunk
    sim = simulate(g, 50, rng=3)
    gen = np.random.default_rng(3)
    draws = [law.sample(gen, (4, min(6, 50 - r0))) for r0 in range(0, 50, 6)]
    D = np.zeros((50, len(g)))
    D[:, 1:5] = np.concatenate(draws, axis=1).T
    np.testing.assert_array_equal(sim.makespans, D.max(axis=1))


def test_normal_law_is_clipped_not_refused():
    g = TaskGraph([Task("a", Normal(10.0, 1.0))])
    sim = simulate(g, 20_000, rng=4)
    assert sim.interval[0] < 10.0 < sim.interval[1]
    assert np.all(sim.makespans >= 0)


def test_single_iteration_and_default_rng():
    g = TaskGraph([Task("a", Exponential(1.0))])
    one = simulate(g, 1, rng=0)
    assert one.interval == (-math.inf, math.inf) and one.makespans.shape == (1,)
    assert simulate(g, 10).makespans.shape == (10,)  # fresh OS entropy, no global state


def test_seeds_reproduce():
    g = fork_join(3, Exponential(1.0))
    np.testing.assert_array_equal(simulate(g, 100, rng=8).makespans, simulate(g, 100, rng=8).makespans)
    gen = np.random.default_rng(8)
    np.testing.assert_array_equal(simulate(g, 100, rng=gen).makespans, simulate(g, 100, rng=8).makespans)


def test_without_critical_path():
    sim = simulate(fork_join(3, Exponential(1.0)), 100, rng=0, critical_path=False)
    assert dict(sim.task_share) == {} and dict(sim.group_share) == {}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"iterations": 0}, "iterations"),
        ({"iterations": 2.5}, "iterations"),
        ({"iterations": 10**400}, "iterations"),  # an OverflowError in the size guard's message before
        ({"iterations": None}, "iterations"),
        ({"rng": -1}, "rng"),
        ({"rng": "seed"}, "rng"),
    ],
)
def test_bad_arguments(kwargs, field):
    g = TaskGraph([Task("a", 1.0)])
    with pytest.raises(InvalidParameterError) as err:
        simulate(g, **kwargs)
    assert err.value.field == field


def test_default_iterations_checks_an_explicit_count_as_simulate_does():
    from queuesgd.dag import default_iterations
    from queuesgd.run_options import MAX_ITERATIONS

    assert default_iterations(100, 10, iterations=MAX_ITERATIONS) == MAX_ITERATIONS
    with pytest.raises(InvalidParameterError, match="at most 1,000,000,000,000") as err:
        default_iterations(100, 10, iterations=MAX_ITERATIONS + 1)
    assert err.value.field == "iterations"


def test_bad_graph_and_quantile():
    with pytest.raises(InvalidParameterError) as err:
        simulate("graph")
    assert err.value.field == "graph"
    sim = simulate(TaskGraph([Task("a", 1.0)]), 10, rng=0)
    for q in (1.5, -0.1, [0.5, 2.0], "x"):
        with pytest.raises(InvalidParameterError) as err:
            sim.quantile(q)
        assert err.value.field == "q"
