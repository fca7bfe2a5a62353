"""The schemes' simulated 95% intervals under heavy-tailed compute: coverage and warning (2026-11-28).

Before the repair, an audit ran each simulation that reports an interval on lognormal compute laws (sigma
2: scv 54; sigma 3: scv 8,100) against an exact value from another method, and counted the runs whose
interval held it:

- barrier rounds of 8 workers, 20,000 iterations, a 0.5 s phase (``simulate_barrier``, cancel), against
  ``8 / (E[max of 8] + 0.5)`` by mpmath quadrature: 953 of 1,000 (sigma 2), 835 (sigma 3); the ratio
  interval of the same rounds (``Rounds.rate``, what the backup-worker and cutoff schemes report): 947, 780;
- ``StaleSynchronous(inf)`` of 4 workers, 20,000 iterations, against its closed form ``n / (E[C] + comm)``
  (independent workers: a renewal process each): 444 of 500 (sigma 2), 280 (sigma 3);
- ``AsyncPS`` of 4 workers, 20,000 updates, against exact MVA (the compute station is a delay, insensitive
  to its law: the product form holds for any compute law): 269 of 300 (sigma 2), 178 (sigma 3);
- ``EagerSGD`` of 4 workers on a balanced H2 of scv 20 (phase-type: its CTMC is exact): 285 of 300.

The barrier rounds (and every scheme built on them), eager-SGD and the task-graph Monte Carlo now take the
studentized subsampling interval where the tail is heavy (``queuesgd.subsampling.subsampling_interval``; its
coverage: tests/test_subsampling_interval.py, validation/measure_heavy_tail_coverage.py); SSP (where the
workers' rates are equal) and the asynchronous PS take it for their mean cycle and invert it by Little's law
(``queuesgd.batchmeans.little_interval``), as does SSP on a shared link. The Petri-net simulation keeps the
asymptotic interval. Each simulation passes the values behind its interval to
``queuesgd.batchmeans.check_tail``, which warns where their tail looks like a power law of index below 2,
and says which interval the run reports. Coverage counts of independent seeds
are binomial, judged by binomial tail probabilities.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from mp_laws import expected_max_lognormal
from scipy import stats

import queuesgd as q
from queuesgd.distributions import Exponential, LogNormal
from queuesgd.errors import AccuracyWarning
from queuesgd.schemes.barrier.kofn_sim import simulate_barrier, simulate_rounds

MATCH = "power law of index"


def _lognormal(mean: float, sigma: float) -> LogNormal:
    return LogNormal(math.log(mean) - sigma**2 / 2, sigma)


def test_expected_max_reference_against_exponential_form():
    """The quadrature of the reference, checked where a closed form exists: sigma -> its lognormal value
    for n = 1 is the mean itself."""
    assert expected_max_lognormal(3.0, 1) == pytest.approx(1.0, rel=1e-10)
    assert expected_max_lognormal(2.0, 1) == pytest.approx(1.0, rel=1e-10)


def test_barrier_rounds_of_sigma_3_warn_that_their_interval_is_the_subsampling_one():
    """The rounds' ratio (``Rounds.rate``) and ``simulate_barrier`` take the repaired interval and say so;
    its coverage is tested in tests/test_subsampling_interval.py (the audit's 780 of 1,000 was the Student-t
    interval's)."""
    x = _lognormal(1.0, 3.0).sample(np.random.default_rng(0), (20_000, 8))
    with pytest.warns(AccuracyWarning, match="studentized subsampling"):
        simulate_rounds(x, phase=0.5).rate()
    with pytest.warns(AccuracyWarning, match="studentized subsampling"):
        simulate_barrier(x, 8, 0.5, stragglers="cancel")


def test_barrier_rounds_of_exponential_compute_cover_95_percent_without_warning():
    """The control: exponential compute, 400 seeds of 4,000 rounds: ``8 / (H_8 + 0.5)`` held in a count
    plausible for 95% (each binomial tail above 1e-4), and no warning."""
    exact = 8 / (sum(1 / i for i in range(1, 9)) + 0.5)
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        for seed in range(400):
            x = np.random.default_rng(seed).exponential(1.0, (4_000, 8))
            _, (lo, hi) = simulate_rounds(x, phase=0.5).rate()
            hits += lo <= exact <= hi
            if seed < 20:
                simulate_barrier(x, 8, 0.5, stragglers="finish")
    assert stats.binom.cdf(hits, 400, 0.95) > 1e-4, hits
    assert stats.binom.sf(hits - 1, 400, 0.95) > 1e-4, hits


W0 = {"gradient_bytes": "1MB", "parameter_bytes": "1MB", "batch_size": 8}
C4 = q.Cluster(workers=4, bandwidth="20MB/s")


def _covered(scheme, workload, cluster, value, *, seeds, match=MATCH):
    """How many of ``seeds`` simulations of 20,000 iterations cover ``value``; each must warn (``match``)."""
    hits = 0
    for seed in range(seeds):
        with pytest.warns(AccuracyWarning, match=match):
            lo, hi = scheme.solve(workload, cluster, "simulate", rng=seed, iterations=20_000).interval
        hits += lo <= value <= hi
    return hits


def _repaired_beats_student_t(scheme, workload, cluster, value, module, *, seeds, at_most):
    """Both readings of the same ``seeds`` runs: the repaired interval (Little's law) holds ``value`` in a
    count plausible for 95% (binomial tail above 1e-3) and says so in its warning; the Student-t one (the
    scheme's ``module`` told by its tail check, which still warns, that no repair is due) in at most
    ``at_most``."""
    hits = _covered(scheme, workload, cluster, value, seeds=seeds, match="studentized subsampling")
    assert stats.binom.cdf(hits, seeds, 0.95) > 1e-3, hits
    real = module.check_tail
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "check_tail", lambda values, what, repaired=False: real(values, what) and False)
        old = _covered(scheme, workload, cluster, value, seeds=seeds)
    assert old <= at_most, old


def test_ssp_without_bound_is_covered_at_sigma_3_and_says_its_interval_is_repaired():
    """``StaleSynchronous(inf)``: 60 seeds of 20,000 iterations against the closed form. The Student-t
    interval (same seeds, the repair turned off) held it in at most 51 (the audit: 280 of 500); the
    repaired one (Little's law) in a count plausible for 95% (binomial tail above 1e-3; the audit: 463 of
    500), and each run says so."""
    import queuesgd.schemes.ssp.ssp as ssp_mod

    S = q.StaleSynchronous(math.inf)
    w = q.Workload(compute=_lognormal(0.1, 3.0), **W0)
    exact = S.solve(w, C4, "closed_form")
    value = exact.iteration_rate * exact.gradients_per_update
    comm = sum(S.communication_time(w, C4))
    assert value == pytest.approx(4 / (0.1 + comm), rel=1e-12)  # n / (E[C] + E[M]), renewal
    _repaired_beats_student_t(S, w, C4, value, ssp_mod, seeds=60, at_most=51)


def test_ssp_with_unequal_speeds_and_no_bound_keeps_the_student_t_interval():
    """Little's law pools the workers' cycles alike, which is right only where their rates are equal:
    without a bound and with two speeds the interval stays the asymptotic one, and the warning says so."""
    w = q.Workload(compute=_lognormal(0.1, 3.0), **W0)
    c = q.Cluster(workers=4, bandwidth="20MB/s", speeds=[1, 1, 1, 0.5])
    with pytest.warns(AccuracyWarning, match="may cover the true value far less often"):
        q.StaleSynchronous(math.inf).solve(w, c, "simulate", rng=0, iterations=20_000)


def test_ssp_with_exponential_compute_does_not_warn():
    S = q.StaleSynchronous(math.inf)
    w = q.Workload(compute=Exponential(mean=0.1), **W0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        for seed in range(10):
            S.solve(w, C4, "simulate", rng=seed, iterations=20_000)


def test_shared_link_ssp_is_covered_at_sigma_3_and_says_its_interval_is_repaired():
    """``StaleSynchronous(inf, link="shared")`` with 1-byte messages at 1 GB/s: each worker is a renewal
    process of ``C + 2 ns``, so the rate is ``4 / (0.1 + 2e-9)``. 40 seeds: the repaired interval (Little's
    law on the workers' cycles) holds it in a count plausible for 95% (binomial tail above 1e-3), the
    Student-t one (same seeds, the repair turned off) in at most 34 (the audit: see
    validation/tails/coverage.json)."""
    import queuesgd.schemes.barrier.ps_arrivals as shared_sim

    w = q.Workload(compute=_lognormal(0.1, 3.0), gradient_bytes="1B", parameter_bytes="1B", batch_size=8)
    c = q.Cluster(workers=4, bandwidth="1GB/s")
    S = q.StaleSynchronous(math.inf, link="shared")
    value = 4 / (0.1 + 2e-9)
    _repaired_beats_student_t(S, w, c, value, shared_sim, seeds=40, at_most=34)


def test_shared_link_ssp_with_unequal_speeds_and_no_bound_keeps_the_student_t_interval():
    w = q.Workload(compute=_lognormal(0.1, 3.0), **W0)
    c = q.Cluster(workers=4, bandwidth="20MB/s", speeds=[1, 1, 1, 0.5])
    with pytest.warns(AccuracyWarning, match="may cover the true value far less often"):
        q.StaleSynchronous(math.inf, link="shared").solve(w, c, "simulate", rng=0, iterations=8_000)


def test_async_ps_is_covered_at_sigma_3_and_says_its_interval_is_repaired():
    """``AsyncPS``: 40 seeds of 20,000 updates against exact MVA. The Student-t interval (same seeds, the
    repair turned off) held it in at most 34 (the audit: 178 of 300); the repaired one (Little's law)
    in a count plausible for 95% (binomial tail above 1e-3; the audit: 282 of 300), each run saying so."""
    import queuesgd.schemes.ps.async_ps_sim as async_sim

    S = q.AsyncPS()
    w = q.Workload(compute=_lognormal(0.1, 3.0), gradient_bytes="1MB", batch_size=8)
    c = q.Cluster(workers=4, bandwidth="40MB/s")
    exact = S.solve(w, c, "mva")
    assert exact.method == "mva"
    value = exact.iteration_rate * exact.gradients_per_update
    _repaired_beats_student_t(S, w, c, value, async_sim, seeds=40, at_most=34)


def test_async_ps_with_exponential_compute_does_not_warn():
    w = q.Workload(compute=Exponential(mean=0.1), gradient_bytes="1MB", batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        for seed in range(5):
            q.AsyncPS().solve(w, q.Cluster(workers=4, bandwidth="40MB/s"), "simulate", rng=seed)


@pytest.mark.parametrize(
    "scheme",
    [q.EagerSGD(), q.BackupWorkers(1), q.OptimalCutoff(by="count")],
    ids=["eager", "backup", "optimal-cutoff"],
)
def test_other_round_simulations_warn_on_sigma_3(scheme):
    w = q.Workload(compute=_lognormal(0.1, 3.0), gradient_bytes="1MB", batch_size=8)
    c = q.Cluster(workers=4, bandwidth="40MB/s")
    with pytest.warns(AccuracyWarning, match=MATCH):
        scheme.solve(w, c, "simulate", rng=1, iterations=20_000)


def test_a_timer_that_bounds_the_rounds_does_not_warn():
    """The check is on the rounds, not on the law: a 0.2 s cutoff (twice the mean compute) bounds every
    round's wait by the later of the timer and the first of 4 completions, whose tail is a fourth power of
    the law's: 10 seeds, no warning."""
    w = q.Workload(compute=_lognormal(0.1, 3.0), gradient_bytes="1MB", batch_size=8)
    c = q.Cluster(workers=4, bandwidth="40MB/s")
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        for seed in range(10):
            q.StaticCutoff(timeout=0.2).solve(w, c, "simulate", rng=seed, iterations=20_000)
