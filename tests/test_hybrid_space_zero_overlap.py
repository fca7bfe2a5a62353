"""HybridSpace's ``zero_overlap`` axis: the space, its rows against ``predict``, the plan, the refusals.

The independent sources: a brute-force enumeration of every configuration ``HybridParallel`` itself
accepts (for the row count and the dropped duplicates where ``d c = 1``), and ``predict`` of each row's
own ``HybridParallel(zero_overlap=...)`` (tests/hybrid_rows.py).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hybrid_rows import accepted_configurations, assert_rows_equal_predict, dgx, rel

from queuesgd import predict
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import GPT3_XL, TransformerShape
from queuesgd.planning import plan_parallelism

SMALL = TransformerShape(layers=8, hidden=256, heads=8, sequence=128, vocabulary=1000, name="small")
KEYS = (
    "tensor",
    "context",
    "pipeline",
    "microbatch",
    "schedule",
    "virtual_stages",
    "recompute",
    "zero",
    "sequence_parallel",
    "zero_overlap",
)


def brute_force(workers: int, G: int, zero_overlap: tuple[bool, ...]) -> set[tuple]:
    """Every configuration of :data:`KEYS` that HybridParallel accepts, less the documented duplicates."""
    return accepted_configurations(
        SMALL,
        dgx(workers),
        G,
        KEYS,
        schedules=("1f1b", "interleaved"),
        recompute=(None, "full"),
        context=(1, 2),
        zero_overlap=zero_overlap,
    )


def space(zero_overlap: tuple[bool, ...]) -> HybridSpace:
    return HybridSpace(recompute=(None, "full"), context=(1, 2), zero_overlap=zero_overlap)


def test_the_rows_are_twice_those_without_less_the_single_rank_data_parallel_groups():
    workers, G = 8, 16
    without = evaluate_space(SMALL, dgx(workers), space((False,)), global_batch=G, memory_limit=1e12)
    both = evaluate_space(SMALL, dgx(workers), space((False, True)), global_batch=G, memory_limit=1e12)
    want_without = brute_force(workers, G, (False,))
    want_both = brute_force(workers, G, (False, True))
    single = sum(1 for r in want_without if workers // (r[0] * r[1] * r[2]) * r[1] == 1)  # d c = 1
    assert 0 < single < len(want_without)
    assert len(without) == len(want_without)
    assert len(both) == len(want_both) == 2 * len(want_without) - single
    got = {tuple(both.row(i)[k] for k in KEYS) for i in range(len(both))}
    assert got == want_both  # the same configurations, none twice
    dc = both["data"] * both["context"]
    assert not (both["zero_overlap"] & (dc == 1)).any()
    assert (both["zero_overlap"] & (both["data"] == 1) & (both["context"] == 2)).any()  # c alone counts
    assert not without["zero_overlap"].any()


def test_the_default_has_no_overlap_and_is_the_space_it_was():
    c = dgx(16)
    a = evaluate_space(SMALL, c, HybridSpace(), global_batch=32, memory_limit=1e12)
    b = evaluate_space(SMALL, c, HybridSpace(zero_overlap=(False,)), global_batch=32, memory_limit=1e12)
    assert HybridSpace().zero_overlap == (False,)
    assert not a["zero_overlap"].any() and a["zero_overlap"].dtype == bool
    for k in a.columns:
        assert np.array_equal(a[k], b[k]), k


def test_every_sampled_row_equals_predict_over_zero_stages_and_both_overlaps():
    c = dgx(64)
    sp = HybridSpace(context=(1, 2), zero_overlap=(False, True))
    table = evaluate_space(GPT3_XL, c, sp, global_batch=512, memory_limit=8e9, flops=150e12)
    rng = np.random.default_rng(7)
    rows = []
    for z in range(4):
        for zo in (False, True):
            pool = np.flatnonzero((table["zero"] == z) & (table["zero_overlap"] == zo))
            assert len(pool), (z, zo)
            rows.extend(rng.choice(pool, size=min(8, len(pool)), replace=False).tolist())
    for i, (scheme, _) in zip(rows, assert_rows_equal_predict(table, c, rows)):
        assert scheme.zero_overlap == bool(table["zero_overlap"][i])
        assert scheme.zero == int(table["zero"][i])
    on = np.flatnonzero(table["zero_overlap"])
    assert (table["throughput"][on] > 0).all()


def test_rows_with_experts_equal_predict_too():
    c = dgx(16)
    sp = HybridSpace(tensor=(1, 2), pipeline=(1, 2), recompute=(None,), experts=4, zero_overlap=(False, True))
    table = evaluate_space(SMALL, c, sp, global_batch=32, memory_limit=1e12)
    assert table["zero_overlap"].any() and (table["expert_parallel"] > 1).any()
    rng = np.random.default_rng(3)
    on = np.flatnonzero(table["zero_overlap"])
    off = np.flatnonzero(~table["zero_overlap"])
    rows = rng.choice(on, size=12, replace=False).tolist() + rng.choice(off, size=6, replace=False).tolist()
    assert_rows_equal_predict(table, c, rows)


def test_a_plan_whose_best_overlaps_returns_it_with_predicts_throughput_and_a_note():
    c = dgx(64)
    kw = dict(global_batch=512, memory_limit=8e9, flops=150e12)
    plan = plan_parallelism(GPT3_XL, c, space=HybridSpace(zero_overlap=(False, True)), **kw)
    best = plan.best
    assert best is not None and best.scheme.zero_overlap is True
    p = predict(best.scheme, GPT3_XL.workload(best.microbatch, flops=150e12), c)
    assert rel(best.throughput, p.throughput) <= 1e-12
    table = plan.table
    assert rel(best.throughput, float(table["throughput"][table["fits"]].max())) <= 1e-12
    assert best.formula.startswith("none: ") and "zero_overlap" in best.formula
    overlapped = sum(x.scheme.zero_overlap for x in plan.candidates)
    assert f"{overlapped} of the {len(plan.candidates)} candidates overlap" in " ".join(plan.notes)
    exposed = plan_parallelism(GPT3_XL, c, space="hybrid", **kw)
    assert best.throughput > exposed.best.throughput  # the overlap only hides time
    assert not any("overlap" in n for n in exposed.notes)
    assert all(x.formula and not x.formula.startswith("none") for x in exposed.candidates)


@pytest.mark.parametrize("value", [("yes",), (), True, "True", (1,), None, (False, "on")])
def test_bad_values_are_refused_naming_the_axis(value):
    with pytest.raises(InvalidParameterError, match="^" + re.escape("HybridSpace.zero_overlap") + ":"):
        HybridSpace(zero_overlap=value)


def test_values_are_deduplicated_and_numpy_booleans_read():
    assert HybridSpace(zero_overlap=[np.True_, False, True]).zero_overlap == (True, False)
