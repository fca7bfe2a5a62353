"""Shared scheme pieces: communication costs by hand, compute sampling, phase-type stages."""

import math

import numpy as np
import pytest
import sympy

from queuesgd import Cluster, PetriNet, RandomDelay, Workload
from queuesgd.distributions import Deterministic, Erlang, Exponential, HyperExponential, LogNormal
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.costs import hierarchical_allreduce, ps_round, ring_allreduce, tree_allreduce
from queuesgd.schemes.laws import add_phase_type_stage, ctmc_law, sample_compute, worker_laws


def test_ring_allreduce_textbook_cost():
    # 8 workers, 100 MB, 10 Gbit/s, 50 us: 2*7/8*0.08 s + 14*50 us
    assert ring_allreduce(8, 100e6, 1.25e9, 50e-6) == pytest.approx(0.14 + 0.0007, rel=1e-14)
    assert ring_allreduce(1, 100e6, 1.25e9, 50e-6) == 0.0
    n = np.array([2, 4])
    np.testing.assert_allclose(ring_allreduce(n, 1.0, 1.0, 0.0), [1.0, 1.5])


def test_tree_allreduce_levels():
    # ceil(log2 n) levels up and down
    for n, levels in [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (1024, 10), (1025, 11)]:
        assert tree_allreduce(n, 2.0, 1.0, 0.5) == pytest.approx(2 * levels * 2.5)
    np.testing.assert_allclose(tree_allreduce(np.array([4, 8]), 1.0, 1.0, 0.0), [4.0, 6.0])


def test_hierarchical_reduces_to_ring_with_one_node_or_one_gpu_per_node():
    S, B, a = 50e6, 1.25e9, 20e-6
    assert hierarchical_allreduce(8, 8, S, 1.0, 1.0, B, a) == pytest.approx(ring_allreduce(8, S, B, a))
    assert hierarchical_allreduce(8, 1, S, B, a, 1.0, 1.0) == pytest.approx(ring_allreduce(8, S, B, a))


def test_ps_round_by_hand():
    comm, upd = ps_round(3, 4, 10e6, 20e6, 1e8, 1e-3, 5e-3, shards=2)
    assert comm == pytest.approx(2e-3 + (30e6 + 80e6) / 2e8)
    assert upd == pytest.approx(3 * 5e-3 / 2)


def test_costs_are_symbolic_friendly():
    n, S, B, a = sympy.symbols("n S B alpha", positive=True)
    expr = ring_allreduce(n, S, B, a)
    assert sympy.simplify(expr.subs({n: 4, S: 8, B: 2, a: 0}) - 6) == 0
    assert tree_allreduce(n, S, B, a).has(sympy.ceiling)


def test_worker_laws_and_sampling_means():
    w = Workload(Exponential(mean=0.2), 1e6)
    c = Cluster(3, "1GB/s", speeds=[1, 2, 4])
    assert [law.mean for law in worker_laws(w, c)] == pytest.approx([0.2, 0.1, 0.05])
    x = sample_compute(w, c, np.random.default_rng(0), 200_000)
    np.testing.assert_allclose(x.mean(axis=0), [0.2, 0.1, 0.05], rtol=0.01)


def test_random_delay_hits_exactly_k_uniform_workers():
    w = Workload(Deterministic(0.1), 1e6)
    c = Cluster(5, "1GB/s", stragglers=RandomDelay(2, "1s"))
    x = sample_compute(w, c, 3, 50_000)
    delayed = x > 0.5
    assert np.all(delayed.sum(axis=1) == 2)
    np.testing.assert_allclose(delayed.mean(axis=0), 2 / 5, atol=0.01)  # uniform choice


def test_random_delay_validation():
    with pytest.raises(InvalidParameterError, match="Cluster.stragglers.count"):
        Cluster(2, "1GB/s", stragglers=RandomDelay(3, 0.1))
    with pytest.raises(InvalidParameterError, match="RandomDelay.delay"):
        RandomDelay(1, -1.0)
    with pytest.raises(InvalidParameterError, match="Cluster.stragglers"):
        Cluster(2, "1GB/s", stragglers=(1, 0.1))


def test_ctmc_law_exact_or_fitted():
    for law in (Exponential(3.0), Erlang(3, 2.0), HyperExponential([0.3, 0.7], [1.0, 5.0])):
        ph, note = ctmc_law(law)
        assert note == "" and ph.mean == pytest.approx(law.mean) and ph.scv == pytest.approx(law.scv)
    ph, note = ctmc_law(LogNormal.from_mean_scv(0.1, 0.25))
    assert "phase-type fit" in note and ph.mean == pytest.approx(0.1) and ph.scv == pytest.approx(0.25)


def test_phase_type_stage_is_a_delay_station():
    # N tokens cycling through a hyperexponential stage alone: rate N / mean (insensitivity of a delay)
    law = HyperExponential([0.2, 0.8], [0.5, 4.0])
    net = PetriNet("h")
    net.place("idle", 3)
    net.place("done")
    add_phase_type_stage(net, "work", law.to_phase_type(), "idle", "done")
    net.immediate("back", inputs={"done": 1}, outputs={"idle": 1})
    assert net.solve().throughput("back") == pytest.approx(3 / law.mean, rel=1e-12)


def test_phase_type_stage_behind_a_queue_matches_repairman():
    # 2 machines (Erlang-2 up times, mean 1) and one exponential repairer of rate 2:
    # the machine-repairman is insensitive to the up-time law: X = 6/5 as with exponential up times.
    net = PetriNet("rep")
    net.place("up", 2)
    net.place("down")
    add_phase_type_stage(net, "life", Erlang(2, mean=1.0).to_phase_type(), "up", "down")
    net.timed("repair", 2.0, inputs={"down": 1}, outputs={"up": 1})
    assert net.solve().throughput("repair") == pytest.approx(6 / 5, rel=1e-12)
    # p(down = 0, 1, 2) = (2, 2, 1)/5, so E[down] = (2 + 2)/5
    assert math.isclose(net.solve().mean_tokens("down"), 0.8, rel_tol=1e-12)
