"""The work bound of every order statistic at once (``queuesgd.orderstats_work``, 2026-11-28).

Before it, ``expected_order_statistics`` took any law up to 1,000,000 durations: 4.5-6 s at n = 4,096 of
one law, 112 s for two groups of 2,048 (their pmfs' convolution), an hour-scale run near the cap. Now a call
priced above 60 s is refused before any work, naming the field. The price's two assumptions are checked
against counts made here: the rows (quadrature nodes) actually evaluated, at most QUADRATURE_ROWS, and the
support points of discrete laws.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import queuesgd as q
from queuesgd import orderstats_numerics
from queuesgd.distributions import Empirical, Exponential, Gamma, LogNormal
from queuesgd.errors import InvalidParameterError
from queuesgd.orderstats import expected_order_statistic, expected_order_statistics
from queuesgd.orderstats_work import (
    MAX_ORDER_STATISTICS_SECONDS,
    PMF_SECONDS,
    QUADRATURE_ROWS,
    check_order_statistics_work,
    order_statistics_seconds,
)


def _refused(call, field: str) -> str:
    t = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=f"^{field}: .*at most 60 s") as err:
        call()
    assert time.perf_counter() - t < 2.0  # refused before the work, not after it
    return str(err.value)


def test_one_law_of_30000_durations_is_refused_before_any_work():
    msg = _refused(lambda: expected_order_statistics(LogNormal(0.0, 1.0), 30_000), "n")
    assert "about 24,999 identical durations" in msg and "expected_order_statistic()" in msg


def test_two_groups_of_2048_are_refused_where_one_of_4096_is_priced_below_the_limit():
    """The convolution of two groups costs the product of their sizes (112 s measured, 161 s priced);
    one group of the same 4,096 durations is priced at 9.8 s (4.5-6 s measured) and accepted."""
    laws = [LogNormal(0.0, 1.0)] * 2048 + [Gamma(2.0, 1.0)] * 2048
    _refused(lambda: expected_order_statistics(laws), "laws")
    assert order_statistics_seconds([4096]) == pytest.approx(QUADRATURE_ROWS * 4097 * PMF_SECONDS)
    check_order_statistics_work([4096], "n", 4096)


def test_discrete_laws_are_priced_by_their_support_points():
    """100,000 distinct samples and 2,000 durations: 99,999 midpoints x 2,001 terms (1.6 GB at once)."""
    law = Empirical(np.arange(1.0, 100_001.0))
    _refused(lambda: expected_order_statistics(law, 2_000), "n")
    coins = expected_order_statistics([Empirical([1.0, 3.0])] * 2)  # 2 support points: cheap, exact
    assert coins.tolist() == pytest.approx([1.5, 2.5], rel=1e-15)  # E[min], E[max] of two fair coins


def test_the_limit_in_identical_durations_and_the_closed_forms_beyond_it():
    check_order_statistics_work([24_999], "n", 24_999)
    with pytest.raises(InvalidParameterError):
        check_order_statistics_work([25_001], "n", 25_001)
    assert MAX_ORDER_STATISTICS_SECONDS == 60.0
    # the closed forms are not priced: 100,000 exponentials give H_100000 - H_99999 ... as before
    out = expected_order_statistics(Exponential(1.0), 100_000)
    assert out[-1] == pytest.approx(sum(1.0 / i for i in range(1, 100_001)), rel=1e-12)
    # one k of the refused law stays available
    assert expected_order_statistic(LogNormal(0.0, 1.0), 30_000, 30_000) > 0


@pytest.mark.parametrize("law", [LogNormal(0.0, 1.0), Gamma(0.5, 1.0)], ids=["lognormal", "gamma"])
def test_the_quadrature_evaluates_fewer_rows_than_priced(law, monkeypatch):
    """Nodes counted at n = 1,024 (3,500-3,652 measured): below QUADRATURE_ROWS."""
    rows = [0]
    real = orderstats_numerics._count_pmf

    def counting(groups, x):
        rows[0] += np.asarray(x).size
        return real(groups, x)

    monkeypatch.setattr(orderstats_numerics, "_count_pmf", counting)
    expected_order_statistics(law, 1_024)
    assert 1_000 < rows[0] <= QUADRATURE_ROWS, rows[0]


def test_optimal_cutoff_cancel_refuses_a_cluster_too_large_for_its_order_statistics():
    w = q.Workload(compute=LogNormal(-2.5, 0.5), gradient_bytes="1MB", batch_size=8)
    c = q.Cluster(workers=30_000, bandwidth="40GB/s")
    _refused(lambda: q.OptimalCutoff(by="count", stragglers="cancel").solve(w, c, "closed_form"), "laws")
