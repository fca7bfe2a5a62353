"""predict / sweep plumbing: method choice, reasons, errors, scheme-parameter sweeps."""

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError, NotRepresentable, UnknownNameError

W = q.Workload(compute=0.05, gradient_bytes="20MB", batch_size=16, update_time="4ms")
C = q.Cluster(workers=4, bandwidth="1Gbit/s", latency="1ms")


def test_auto_says_what_it_chose_and_why():
    p = q.predict(q.AsyncPS(), W, C)
    assert p.method == "mva" and "product-form" in p.reason
    r = q.predict(q.AsyncPS(), W, C, method="mva")
    assert r.reason.startswith("requested")
    assert r.throughput == pytest.approx(p.throughput, rel=1e-15)


def test_throughput_is_rate_times_gradients_times_batch():
    p = q.predict(q.AsyncPS(), W, C)
    assert p.throughput == pytest.approx(p.iteration_rate * p.gradients_per_update * W.batch_size, rel=1e-15)
    # breakdown adds up to the iteration time
    assert sum(p.breakdown.values()) == pytest.approx(p.iteration_time, rel=1e-12)


def test_unknown_method_lists_the_schemes_methods():
    with pytest.raises(UnknownNameError, match="mva"):
        q.predict(q.AsyncPS(), W, C, method="closed_form_magic")


def test_sweep_rejects_parameters_the_scheme_lacks():
    with pytest.raises(InvalidParameterError, match="backups"):
        q.sweep(q.AsyncPS(), W, C, backups=[1, 2])


def test_sweep_over_workers_needs_identical_workers():
    het = q.Cluster(workers=2, bandwidth="1Gbit/s", speeds=[1, 2])
    with pytest.raises(NotRepresentable, match="homogeneous"):
        q.sweep(q.AsyncPS(), W, het, workers=[1, 2])


def test_sweep_scaling_factor_definition():
    t = q.sweep(q.AsyncPS(), W, C, workers=[1, 2, 8])
    for row in t.rows():
        single = W.batch_size / W.compute_time
        assert row["scaling_factor"] == pytest.approx(
            row["throughput"] / (row["workers"] * single), rel=1e-14
        )
        assert row["method"] == "mva"
