"""Megatron-LM's interleaved order and its step as a task graph, against the pass-by-pass simulation.

The reference is tests/pipeline_schedule_sim.py, written apart from the package: its own listing of
Megatron-Core's interleaved order and a discrete-event run of it (each pass as soon as its GPU is free
and its input is there). The package's order (``pipeline_schedule.interleaved_order``) must list the
same passes; its step (``interleaved_graph.interleaved_step``: the whole graph up to a few groups of
``p`` micro-batches, beyond them a cut graph and the periods carried as max-plus times) must equal the
simulated makespan to 1e-12, for random pass times, with every road of the cut taken (settled and
extrapolated, stepped to the end, by squaring).
"""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_schedule_sim import interleaved_order as sim_order
from pipeline_schedule_sim import makespan

import queuesgd.schemes.parallel.interleaved_graph as ig
from queuesgd.dag import schedule
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.schemes.parallel.megatron import stage_layers_in_flight
from queuesgd.schemes.parallel.pipeline_schedule import interleaved_order, interleaved_warmup


@pytest.mark.parametrize("p", range(1, 9))
def test_the_order_is_the_simulations(p):
    for v in range(1, 5):
        for m in range(p, 5 * p + 1, p):
            for r in range(p):
                order = sim_order(p, v, m, r)
                assert interleaved_order(p, v, m, r) == order
                first_backward = [kind for kind, _, _ in order].index("B")  # the warm-up and one forward
                assert first_backward == min(interleaved_warmup(p, v, m, r) + 1, m * v)


def test_the_order_refuses_what_megatron_does_not_run():
    with pytest.raises(InvalidParameterError, match="microbatches.*multiple of pipeline"):
        interleaved_order(4, 2, 6, 0)
    with pytest.raises(InvalidParameterError, match="rank"):
        interleaved_order(4, 2, 8, 4)


def test_the_memory_walk_is_unchanged():
    # stage_layers_in_flight now reads the warm-up and chunk ids from pipeline_schedule: the peak of alive
    # forwards, counted here on the simulation's own order, is the same
    rng = np.random.default_rng(11)
    for p in range(2, 7):
        for v in range(1, 5):
            for m in range(p, 4 * p + 1, p):
                chunks = tuple(int(x) for x in rng.integers(1, 5, v))
                for r in range(p):
                    held = peak = 0
                    for kind, c, _ in sim_order(p, v, m, r):
                        held += chunks[c] if kind == "F" else -chunks[c]
                        peak = max(peak, held)
                    assert stage_layers_in_flight(chunks, r, p, m, "interleaved") == peak


@pytest.mark.parametrize("p", range(2, 9))
def test_the_step_is_the_simulated_makespan(p):
    rng = np.random.default_rng(100 + p)
    for v in range(1, 5):
        ms = [p * g for g in (1, 2, 3, 4, 5, 7, 12)]
        F, B = rng.uniform(0.0, 1.0, (len(ms), p, v)), rng.uniform(0.0, 2.0, (len(ms), p, v))
        F[1] = F[1, 0, 0]  # one row of equal chunks: (m + (p - 1)/v)(f + b) x v (its own check below)
        B[1] = B[1, 0, 0]
        got = ig.interleaved_step(F, B, ms)
        sim = [makespan(F[i].tolist(), B[i].tolist(), m) for i, m in enumerate(ms)]
        np.testing.assert_allclose(got, sim, rtol=1e-12)
        even = (ms[1] + (p - 1) / v) * v * (F[1, 0, 0] + B[1, 0, 0])
        assert got[1] == pytest.approx(even, rel=1e-12)


@pytest.mark.parametrize("settle", [6, 1, 0])
def test_every_road_of_the_cut_is_the_simulation(monkeypatch, settle):
    # settle = 0: every row by M^k (squaring); 1: one period stepped, then extrapolated or squared
    monkeypatch.setattr(ig, "SETTLE_PERIODS", settle)
    rng = np.random.default_rng(7 + settle)
    for p, v in ((2, 3), (3, 2), (4, 4), (5, 1), (6, 3)):
        cut = ig.interleaved_cut(p, v)
        assert cut is not None and cut.groups == 3
        ms = [p * g for g in (3, 4, 6, 9, 17, 33)]
        F, B = rng.uniform(0.0, 1.0, (len(ms), p, v)), rng.uniform(0.0, 2.0, (len(ms), p, v))
        F[2], B[2] = np.round(F[2] * 4) / 4, np.round(B[2] * 4) / 4  # ties between paths
        got = ig.interleaved_step(F, B, ms)
        sim = [makespan(F[i].tolist(), B[i].tolist(), m) for i, m in enumerate(ms)]
        np.testing.assert_allclose(got, sim, rtol=1e-12)


def test_the_cut_equals_the_whole_graph_far_out():
    # m = 40 p: the whole graph (10,000s of tasks) against the cut one
    rng = np.random.default_rng(3)
    for p, v in ((8, 2), (4, 8), (12, 1)):
        m = 40 * p
        F, B = rng.uniform(0.0, 1.0, (3, p, v)), rng.uniform(0.0, 2.0, (3, p, v))
        g = ig.interleaved_graph(p, v, m)
        durations = np.where(g.forward, F[:, g.gpu, g.chunk], B[:, g.gpu, g.chunk])
        whole = schedule(g.graph, durations, critical_path=False).makespan
        np.testing.assert_allclose(ig.interleaved_step(F, B, m), whole, rtol=1e-12)


@pytest.mark.parametrize("settle", [6, 0])
def test_many_microbatches_cost_a_few_groups(monkeypatch, settle):
    # equal chunks: (m + (p - 1)/v) v (f + b), here for 3.2 million passes (the graphs hold 3 groups' at most)
    monkeypatch.setattr(ig, "SETTLE_PERIODS", settle)
    got = ig.interleaved_step([[0.5, 0.5]] * 4, [[1.0, 1.0]] * 4, 400_000)
    assert got == pytest.approx((400_000 + 3 / 2) * 2 * 1.5, rel=1e-12)


def test_bad_input_is_refused():
    with pytest.raises(InvalidParameterError, match="forward"):
        ig.interleaved_step([[1.0, 1.0]], [[1.0]], 2)
    with pytest.raises(InvalidParameterError, match="forward"):
        ig.interleaved_step([[1.0, -1.0]] * 2, [[1.0, 1.0]] * 2, 2)
    with pytest.raises(InvalidParameterError, match="microbatches"):
        ig.interleaved_step([[1.0, 1.0]] * 2, [[1.0, 1.0]] * 2, 3)
    with pytest.raises(StateSpaceTooLargeError, match="passes"):
        ig.interleaved_graph(64, 8, 256)
