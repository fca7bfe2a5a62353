"""The pipeline-schedule simulator (tests/pipeline_schedule_sim.py) against the known closed forms.

Even stages: interleaved 1F1B with chunk times ``f / v``, ``b / v`` takes
``m (f + b) + (p - 1)(f + b) / v`` (Narayanan et al., SC 2021, Section 2.2.2;
bubble ``(p - 1) / (v m)``) for ``m`` a multiple of ``p``; ``v = 1`` and plain
1F1B take ``(m + p - 1)(f + b)``. Plain 1F1B with any stage times equals the
task graph ``Pipeline`` solves.
"""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_schedule_sim import interleaved_order, makespan, one_f_one_b_order

import queuesgd as q
from queuesgd.dag import schedule as run_graph
from queuesgd.schemes.parallel.pipeline_graph import StageSplit, pipeline_graph


@pytest.mark.parametrize("p", range(1, 9))
def test_even_interleaved_equals_megatrons_closed_form(p):
    rng = np.random.default_rng(p)
    for v in range(1, 5):
        for m in (p, 2 * p, 3 * p, 4 * p):
            f, b = rng.uniform(0.1, 3.0, 2)
            got = makespan([[f / v] * v] * p, [[b / v] * v] * p, m)
            assert got == pytest.approx(m * (f + b) + (p - 1) * (f + b) / v, rel=1e-12)
            bubble = (got - m * (f + b)) / (m * (f + b))
            assert bubble == pytest.approx((p - 1) / (v * m), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("p", range(1, 9))
def test_one_chunk_is_1f1b(p):
    rng = np.random.default_rng(10 + p)
    for m in range(1, 3 * p + 1):
        f, b = rng.uniform(0.1, 3.0, 2)
        want = (m + p - 1) * (f + b)
        assert makespan([[f]] * p, [[b]] * p, m, plain=True) == pytest.approx(want, rel=1e-12)
        if m % p == 0:  # Megatron's interleaved function with v = 1 (warm-up 2 (p - r - 1)): the same step
            assert makespan([[f]] * p, [[b]] * p, m) == pytest.approx(want, rel=1e-12)


def test_plain_1f1b_equals_the_task_graph_for_any_stage_times():
    rng = np.random.default_rng(7)
    for _ in range(40):
        S, M = int(rng.integers(2, 7)), int(rng.integers(1, 13))
        fwd, bwd = rng.uniform(0.1, 2.0, S), rng.uniform(0.1, 3.0, S)
        split = StageSplit(None, tuple(fwd), tuple(bwd), (1.0,) * S, (1.0,) * S, "test")
        g = pipeline_graph(q.Workload(float(fwd.sum() + bwd.sum()), 1e6), q.Cluster(S, "1GB/s"), split,
                           microbatches=M, schedule="1f1b", send_costs=[0.0] * (S - 1), gather_costs=None,
                           collective_costs=[0.0] * S, update_costs=[0.0] * S, replicas=1)  # fmt: skip
        got = makespan([[x] for x in fwd], [[x] for x in bwd], M, plain=True)
        assert got == pytest.approx(run_graph(g).makespan, rel=1e-12)


def test_the_orders_are_megatrons():
    p, v, m = 4, 2, 8
    for r in range(p):
        order = interleaved_order(p, v, m, r)
        assert len(order) == 2 * m * v
        warm = (p - r - 1) * 2 + (v - 1) * p
        assert all(k == "F" for k, _, _ in order[:warm])
        assert (order[warm][0], order[warm + 1][0]) == ("F", "B")
        for kind in "FB":  # every chunk sees micro-batches 0 .. m - 1 in order
            for c in range(v):
                assert [j for k, cc, j in order if k == kind and cc == c] == list(range(m))
    # the first group: micro-batches 0-3 through chunk 0, then 0-3 through chunk 1, then group 2
    assert [(c, j) for k, c, j in interleaved_order(p, v, m, 0)[:10]] == (
        [(0, j) for j in range(4)] + [(1, j) for j in range(4)] + [(0, 4), (0, 5)]
    )
    assert [k for k, _, _ in interleaved_order(4, 2, 4, 3)] == ["F"] * 8 + ["B"] * 8  # m == p: all warm-up
    assert one_f_one_b_order(2, 1, 0) == [("F", 0, 0), ("B", 0, 0)]
    with pytest.raises(ValueError, match="multiple of p"):
        interleaved_order(4, 2, 6, 0)
