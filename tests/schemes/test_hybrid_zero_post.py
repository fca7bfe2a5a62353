"""HybridParallel(zero=3, zero_overlap="post"): FSDP's BACKWARD_POST, the backward's collectives exposed.

Every number is computed by hand here: the ZeRO-3 collectives as ring all-gathers and reduce-scatters
over one rank per node, ``(n - 1)/n S/B + (n - 1) alpha``; the forward of a stage's blocks as their
FLOPs over ``t`` at one rate. Per micro-batch the variant exposes the forward's gather behind the
forward, ``min(max(g - F, 0) + g / n, g)``, and the backward's reduce-scatter and gather whole, ``g + r``.
"""

from __future__ import annotations

import numpy as np
import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.hybrid_space import HybridSpace
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_batch import batch_times
from tests.hybrid_rows import A_E, B_R, dgx, gemm_model

SHAPE = TransformerShape(4, 1024, 16, 2048, 51200)
L = 4


def half_ring(n: int, S: float) -> float:
    return (n - 1) / n * S / B_R + (n - 1) * A_E


@pytest.mark.parametrize("rate", [1e12, 3e13, 1e16], ids=["forward-longer", "between", "gather-longer"])
@pytest.mark.parametrize("pipeline", [1, 2])
@pytest.mark.parametrize("model", [False, True], ids=["flat-rate", "constant-gemm-table"])
def test_post_exposes_the_backward_whole_by_hand(rate, pipeline, model):
    c = dgx(64)
    t, p, m = 8, pipeline, 3
    d = 64 // (t * p)
    cm = gemm_model(rate) if model else None
    w = SHAPE.workload(1, flops=rate, compute=cm)
    kw = dict(tensor=t, pipeline=p, microbatches=m, zero=3, shape=SHAPE, compute_model=cm)
    post = q.predict(q.HybridParallel(**kw, zero_overlap="post"), w, c)
    on = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    g = half_ring(d, w.parameter_bytes / (t * p))
    r = half_ring(d, w.gradient_bytes / (t * p))
    F = L / p * SHAPE.block_flops(1) / t / rate  # the stage's blocks' forward, one micro-batch
    n = L / p
    exposed = min(max(g - F, 0.0) + g / n, g) + g + r
    assert post.details["dp_per_step"] == pytest.approx(m * (2 * g + r), rel=1e-12)
    assert post.details["dp_exposed_per_step"] == pytest.approx(m * exposed, rel=1e-12)
    assert post.iteration_time - off.iteration_time == pytest.approx(m * (exposed - (2 * g + r)), rel=1e-9)
    # between the two bounds: everything hidden but a layer (True) and nothing hidden (False)
    hidden, serial = on.details["dp_exposed_per_step"], off.details["dp_per_step"]
    assert hidden <= post.details["dp_exposed_per_step"] <= serial


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_post_is_true_below_zero_3(zero):
    c, w = dgx(64), SHAPE.workload(1, flops=1e14)
    kw = dict(tensor=8, pipeline=2, microbatches=4, zero=zero, shape=SHAPE)
    a = q.predict(q.HybridParallel(**kw, zero_overlap="post"), w, c)
    b = q.predict(q.HybridParallel(**kw, zero_overlap=True), w, c)
    assert a.iteration_time == b.iteration_time and a.details["dp_exposed_per_step"] == b.details[
        "dp_exposed_per_step"
    ]


def test_post_with_experts_counts_their_collectives_too():
    c, w = dgx(64), SHAPE.workload(1, flops=1e14)
    kw = dict(tensor=8, microbatches=2, zero=3, shape=SHAPE, experts=8, expert_parallel=4)
    post = q.predict(q.HybridParallel(**kw, zero_overlap="post"), w, c)
    off = q.predict(q.HybridParallel(**kw), w, c)
    assert post.details["dp_per_step"] == off.details["dp_per_step"]
    assert post.details["dp_exposed_per_step"] <= off.details["dp_per_step"]


def test_spellings_refusals_and_the_paths_without_it():
    assert q.HybridParallel(zero=3, zero_overlap=" Post ").zero_overlap == "post"
    for bad in ("pre", "backward", 2):
        with pytest.raises(InvalidParameterError, match=r"HybridParallel\.zero_overlap"):
            q.HybridParallel(zero=3, zero_overlap=bad)
    with pytest.raises(NotRepresentable):
        q.HybridParallel(zero=3, zero_overlap="post", shape=SHAPE).formula()
    with pytest.raises(InvalidParameterError, match="^zero_overlap"):  # never read as bool("post")
        batch_times(SHAPE, dgx(64), {1: SHAPE.workload(1, flops=1e14)}, tensor=8, pipeline=1, data=8,
                    microbatch=1, microbatches=2, schedule=0, virtual_stages=1, sequence_parallel=False,
                    recompute=0, zero=3, zero_overlap=np.array(["post"], dtype=object))  # fmt: skip
    with pytest.raises(InvalidParameterError, match="zero_overlap"):
        HybridSpace(zero_overlap=("post",))
