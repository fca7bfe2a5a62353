"""HybridParallel's checks across fields (queuesgd/schemes/parallel/hybrid_checks.py).

Each refusal names its field; each accepted neighbour gives the number the scheme's closed form gives.
"""

from __future__ import annotations

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError

SHAPE = q.TransformerShape(8, 256, 8, 128, 1000)


def dgx(n: int = 8) -> q.Cluster:
    return q.Cluster(n, "25GB/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s")


def test_hidden_bytes_beside_a_shape_is_refused_where_it_was_ignored():
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.hidden_bytes.*0 with shape="):
        q.HybridParallel(shape=SHAPE, tensor=8, hidden_bytes="10GB")
    # 0 (the default) and "0B" stay accepted
    assert q.HybridParallel(shape=SHAPE, tensor=8, hidden_bytes="0B").hidden_bytes == 0.0


def test_context_parallelism_needs_a_shape():
    # it used to be accepted and to fail inside predict with an AttributeError
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.context.*1 without shape="):
        q.HybridParallel(context=2)


@pytest.mark.parametrize(("pipeline", "virtual", "layers"), [(8, 1, 2), (4, 1, 6), (2, 2, 6), (2, 10**6, 2)])
def test_a_given_layer_count_must_split_into_p_v_chunks(pipeline, virtual, layers):
    schedule = "interleaved" if virtual > 1 else "1f1b"
    with pytest.raises(InvalidParameterError, match=r"HybridParallel\.layers.*multiple of p x v"):
        q.HybridParallel(pipeline=pipeline, virtual_stages=virtual, schedule=schedule, microbatches=pipeline,
                         layers=layers)  # fmt: skip


def test_uneven_stages_and_the_abstract_default_stay_accepted():
    # stage_layers gives the split itself; without layers one abstract layer's compute splits evenly
    assert q.HybridParallel(pipeline=2, layers=5, stage_layers=(2, 3)).stage_layers == (2, 3)
    w = q.Workload("80ms", "100MB", batch_size=8)
    s = q.HybridParallel(pipeline=4, microbatches=8)
    p = q.predict(s, w, dgx())
    assert p.details["bubble"] == pytest.approx(3 / 8, rel=1e-12)  # (p - 1) / m
    given = q.predict(s.replace(layers=8), w, dgx())
    assert given.details["bubble"] == pytest.approx(3 / 8, rel=1e-12)
