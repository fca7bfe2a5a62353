"""The three places that take a mixture of experts accept and refuse the same ones (queuesgd.mixture_checks).

``HybridParallel(experts=E, expert_parallel=e, capacity_factor=cf, top_k=k)``,
``HybridSpace(experts=E, expert_parallel=(e,), ...)`` and the compute model's
``experts=(E, e, cf, k)`` tuple each name their own fields; the rules are one
(E, e, k integers >= 1, e | E, k <= E, 0 < cf <= MAX_CAPACITY_FACTOR). The
expected verdict of each case is worked out here from those rules, not by
calling the library.
"""

from __future__ import annotations

import itertools
import math

import pytest

from queuesgd.compute_model import check_experts_tuple
from queuesgd.errors import InvalidParameterError
from queuesgd.hybrid_space import HybridSpace
from queuesgd.mixture_checks import MAX_CAPACITY_FACTOR
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid import HybridParallel

SHAPE = TransformerShape(2, 64, 4, 32, 100)
CASES = list(
    itertools.product(
        [1, 6, 8, 0, 2.5],  # E
        [1, 2, 3, 8, 0],  # e
        [1.0, 1.25, 0.0, -1.0, math.inf, MAX_CAPACITY_FACTOR, MAX_CAPACITY_FACTOR * 1.01],  # capacity factor
        [1, 2, 8, 9],  # top_k
    )
)


def valid(E, e, cf, k) -> bool:
    ints = all(isinstance(x, int) and x >= 1 for x in (E, e, k))
    return ints and E % e == 0 and k <= E and 0 < cf <= MAX_CAPACITY_FACTOR


def verdict(make) -> str:
    try:
        make()
    except InvalidParameterError as err:
        return f"refused ({err})"
    return "accepted"


@pytest.mark.parametrize(("E", "e", "cf", "k"), CASES)
def test_three_places_agree_with_the_rules(E, e, cf, k):
    places = {
        "compute model": lambda: check_experts_tuple((E, e, cf, k)),
        "HybridParallel": lambda: HybridParallel(
            shape=SHAPE, experts=E, expert_parallel=e, capacity_factor=cf, top_k=k
        ),
        "HybridSpace": lambda: HybridSpace(experts=E, expert_parallel=(e,), capacity_factor=cf, top_k=k),
    }
    want = valid(E, e, cf, k)
    got = {name: verdict(make) for name, make in places.items()}
    assert all((v == "accepted") == want for v in got.values()), got


def test_each_place_names_its_own_field():
    for make, field in [
        (lambda: check_experts_tuple((8, 3, 1.0, 1)), "experts[1]"),
        (lambda: HybridParallel(shape=SHAPE, experts=8, expert_parallel=3), "HybridParallel.expert_parallel"),
        (lambda: HybridSpace(experts=8, expert_parallel=(1, 3)), "HybridSpace.expert_parallel[1]"),
        (lambda: check_experts_tuple((8, 2, 1.0, 9)), "experts[3]"),
        (lambda: HybridParallel(shape=SHAPE, experts=8, top_k=9), "HybridParallel.top_k"),
        (lambda: HybridSpace(experts=8, top_k=9), "HybridSpace.top_k"),
    ]:
        with pytest.raises(InvalidParameterError) as err:
            make()
        assert err.value.field == field
