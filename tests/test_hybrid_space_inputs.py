"""evaluate_space's inputs: refused where predict of a row would refuse them, or not of their type.

The accepted neighbours are checked against predict of a row (tests/hybrid_rows.py), the independent
source of every number of the space.
"""

from __future__ import annotations

import pytest
from hybrid_rows import assert_rows_equal_predict, dgx

from queuesgd import Cluster, RandomDelay
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.model_shapes import TransformerShape

SMALL = TransformerShape(layers=8, hidden=256, heads=8, sequence=128, vocabulary=1000, name="small")
SPACE = HybridSpace(tensor=(1, 2), pipeline=(1, 2), recompute=(None,), zero=(0,), sequence_parallel=(False,))


def test_a_cluster_with_random_stragglers_is_refused_as_predict_refuses_it():
    c = Cluster(
        8, "25GB/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", stragglers=RandomDelay(2, "10ms")
    )
    with pytest.raises(InvalidParameterError, match=r"Cluster\.stragglers.*None for HybridParallel"):
        evaluate_space(SMALL, c, SPACE, global_batch=16, memory_limit=80e9)


@pytest.mark.parametrize("limit", [float("nan"), -1.0, 0.0, None, True, "lots"])
def test_a_memory_limit_that_is_not_bytes_per_gpu_is_refused(limit):
    with pytest.raises(InvalidParameterError, match=r"memory_limit"):
        evaluate_space(SMALL, dgx(8), SPACE, global_batch=16, memory_limit=limit)


def test_a_memory_limit_with_a_unit_is_the_same_limit_as_in_bytes():
    text = evaluate_space(SMALL, dgx(8), SPACE, global_batch=16, memory_limit="62MB")
    number = evaluate_space(SMALL, dgx(8), SPACE, global_batch=16, memory_limit=62e6)
    assert text["fits"].tolist() == number["fits"].tolist()
    assert 0 < sum(text["fits"].tolist()) < len(text)  # the limit splits the rows
    for (scheme, p), fits in zip(assert_rows_equal_predict(text, dgx(8), range(len(text))), text["fits"]):
        assert bool(fits) == (p.memory.total <= 62e6), scheme


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [("shape", {"shape": "8:256:8:128:1000"}), ("cluster", {"cluster": 8}), ("space", {"space": None})],
)
def test_arguments_of_another_type_are_refused_naming_them(field, kwargs):
    args = {"shape": SMALL, "cluster": dgx(8), "space": SPACE, **kwargs}
    with pytest.raises(InvalidParameterError, match=rf"^{field}: "):
        evaluate_space(args["shape"], args["cluster"], args["space"], global_batch=16, memory_limit=80e9)
