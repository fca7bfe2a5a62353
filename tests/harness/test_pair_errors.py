"""The paired statistic of the profile-fidelity check: unbiased where timed and loop blocks share one law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.fidelity import pair_errors

SIGMA = 0.3  # the log-spread of a block's time: 4-step blocks of a host-bound step spread this much
BLOCKS = 200_000


def _blocks(rng: np.random.Generator, law: str) -> tuple[np.ndarray, np.ndarray]:
    """Loop blocks (one more) and timed blocks drawn from one law: the profile is exact by construction."""
    n = 2 * BLOCKS + 1
    if law == "lognormal":
        t = rng.lognormal(0.0, SIGMA, n)
    else:  # mostly tight, with one block in ten disturbed 1.5-4x (a busy host)
        t = rng.normal(1.0, 0.01, n) * np.where(rng.random(n) < 0.1, rng.uniform(1.5, 4.0, n), 1.0)
    return t[0::2], t[1::2]  # loop, timed, interleaved


@pytest.mark.parametrize("law", ["lognormal", "disturbed"])
def test_the_median_pair_error_of_blocks_of_one_law_is_zero_and_the_neighbours_mean_is_biased_low(law):
    rng = np.random.default_rng(21)
    loop, timed = _blocks(rng, law)
    pairs = np.asarray(pair_errors(loop, timed))
    # Truth: 0 (X / Y of two exchangeable draws is as likely above 1 as below). Its sampling error: the
    # median of 2n ratios, n of them independent, is within 5 binomial standard errors in rank of 0.
    assert abs(np.mean(pairs < 0) - 0.5) < 5 * 0.5 / math.sqrt(BLOCKS)
    neighbours = np.median(timed / ((loop[:-1] + loop[1:]) / 2)) - 1
    assert abs(float(np.median(pairs))) < 0.003
    if law == "lognormal":
        # The old statistic (each timed block over its neighbours' mean): the mean of two lognormals is
        # nearly lognormal (Fenton-Wilkinson: log-variance s2 = ln(1 + (e^sigma^2 - 1) / 2), the same
        # mean), so its median is e^((sigma^2 - s2) / 2) and the ratio's median e^(-(sigma^2 - s2) / 2)
        s2 = math.log1p(math.expm1(SIGMA**2) / 2)
        assert neighbours == pytest.approx(math.expm1(-(SIGMA**2 - s2) / 2), rel=0.05)  # -2.2%


def test_pair_errors_pair_each_timed_block_with_the_loop_blocks_on_either_side():
    # Loop blocks 1, 2, 4; timed blocks 3 and 3: 3/1, 3/2, 3/2, 3/4 (less 1), in that order.
    assert pair_errors([1.0, 2.0, 4.0], [3.0, 3.0]) == [2.0, 0.5, 0.5, -0.25]
    with pytest.raises(InvalidParameterError, match="^loop_s: got 2; accepted: one loop block more"):
        pair_errors([1.0, 2.0], [1.0, 1.0])
