"""Approximate MVA (Bard-Schweitzer, Linearizer) vs exact MVA, closed forms and LINE."""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd import ClosedNetwork, Delay, Queue, mva
from queuesgd.errors import ConvergenceError
from queuesgd.queueing import _approx


def random_net(rng: np.random.Generator, *, classes: int, multi_server: bool = False) -> ClosedNetwork:
    """A random product-form network; one class gets plain-number demands."""
    names = [f"c{j}" for j in range(classes)]

    def demands(lo: float, hi: float, p_visit: float):
        if classes == 1:
            return float(rng.uniform(lo, hi))
        return {c: float(rng.uniform(lo, hi)) for c in names if rng.random() < p_visit} or {names[0]: 1.0}

    stations = []
    if rng.random() < 0.7:
        stations.append(Delay("think", demands(0.5, 5.0, 1.0)))
    for k in range(int(rng.integers(2, 6))):
        servers = int(rng.integers(1, 4)) if multi_server else 1
        # Every class visits the first queue; later queues are skipped at random.
        stations.append(Queue(f"q{k}", demands(0.05, 2.0, 1.0 if k == 0 else 0.85), servers=servers))
    if classes == 1:
        return ClosedNetwork(stations, int(rng.integers(1, 8)))
    return ClosedNetwork(stations, {c: int(rng.integers(1, 8)) for c in names})


def throughputs(r) -> np.ndarray:
    return (
        np.array(list(r.throughput.values())) if hasattr(r.throughput, "values") else np.array([r.throughput])
    )


def relative_errors(classes: int, n: int, seed: int, multi_server: bool = False):
    rng = np.random.default_rng(seed)
    out = {"schweitzer": [], "linearizer": []}
    for _ in range(n):
        net = random_net(rng, classes=classes, multi_server=multi_server)
        exact = throughputs(mva(net))
        for method in out:
            out[method].append(np.max(np.abs(throughputs(mva(net, method)) / exact - 1)))
    return {m: np.array(v) for m, v in out.items()}


@pytest.mark.parametrize("classes", [1, 2, 3])
def test_error_magnitudes_on_random_nets(classes):
    err = relative_errors(classes, 60, seed=classes)
    # Known magnitudes: Schweitzer a few % on throughput (worst cases ~10-20%
    # with classes of 1-2 customers), Linearizer well under 1%.
    assert err["schweitzer"].mean() < 0.05
    assert err["schweitzer"].max() < 0.25
    assert err["linearizer"].mean() < 0.005
    assert err["linearizer"].max() < 0.02
    assert err["linearizer"].mean() < err["schweitzer"].mean() / 5


def test_exact_at_population_one_single_class():
    rng = np.random.default_rng(7)
    for _ in range(20):
        net = random_net(rng, classes=1, multi_server=True).with_population(1)
        exact = mva(net).throughput
        for method in ("schweitzer", "linearizer"):
            assert mva(net, method).throughput == pytest.approx(exact, rel=1e-9)


def test_linearizer_exact_at_population_two_single_class():
    # At N = 2 the core at N - 1 = 1 is exact and the fixed point of the
    # fraction differences is exact MVA; three passes get within 1e-3.
    net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=2)
    assert mva(net).throughput == pytest.approx(0.6, rel=1e-12)
    assert mva(net, "linearizer").throughput == pytest.approx(0.6, rel=1e-3)


def test_schweitzer_closed_form_repairman():
    # N = 2, Z = 2, D = 1: R = 1 + Q/2 and X = 2/(2 + R) give R = sqrt(2).
    net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=2)
    r = mva(net, "schweitzer")
    assert r.throughput == pytest.approx(2 / (2 + np.sqrt(2)), rel=1e-9)
    assert r.residence_time["cpu"] == pytest.approx(np.sqrt(2), rel=1e-9)


def test_multi_server_seidmann_reasonable():
    err = relative_errors(1, 40, seed=11, multi_server=True)
    # Seidmann's approximation adds its own error on top of the AMVA.
    assert err["linearizer"].mean() < 0.03
    assert err["schweitzer"].mean() < 0.06


def test_seidmann_reports_station_totals():
    net = ClosedNetwork([Delay("z", 1.0), Queue("pool", 2.0, servers=4)], population=1)
    r = mva(net, "schweitzer")
    # Population 1: the queue part gives D/c, the delay part D(c-1)/c: total D.
    assert r.residence_time["pool"] == pytest.approx(2.0)
    assert r.queue_length["pool"] + r.queue_length["z"] == pytest.approx(1.0)


def test_queue_lengths_sum_to_population():
    rng = np.random.default_rng(3)
    for _ in range(10):
        net = random_net(rng, classes=2, multi_server=True)
        N = net.population_vector
        for method in ("schweitzer", "linearizer"):
            r = mva(net, method)
            totals = np.array([sum(r.queue_length[s][c] for s in net.station_names) for c in net.classes])
            np.testing.assert_allclose(totals, N, rtol=1e-8)


def test_large_population_approaches_bottleneck():
    net = ClosedNetwork([Delay("z", 5.0), Queue("a", 0.5), Queue("b", 0.25)], population=5000)
    for method in ("schweitzer", "linearizer"):
        assert mva(net, method).throughput == pytest.approx(2.0, rel=1e-3)


def test_kernels_directly_handle_zero_population_class():
    D = np.array([[1.0, 2.0], [0.5, 0.5]])
    delay = np.array([True, False])
    servers = np.array([np.inf, 1.0])
    for kernel in (_approx.schweitzer, _approx.linearizer):
        X, R, Q = kernel(D, delay, servers, np.array([3, 0]), tol=1e-12, max_iter=10_000)
        assert X[1] == 0.0 and np.all(Q[:, 1] == 0.0)
        X1, _, _ = kernel(D[:, :1], delay, servers, np.array([3]), tol=1e-12, max_iter=10_000)
        assert X[0] == pytest.approx(X1[0], rel=1e-9)


def test_convergence_error_names_method():
    net = ClosedNetwork([Delay("z", 1.0), Queue("a", 1.0), Queue("b", 0.9)], population=50)
    for method in ("schweitzer", "linearizer"):
        with pytest.raises(ConvergenceError, match=rf"{method}: .*max_iter=2 .*last change"):
            mva(net, method, max_iter=2)


def test_population_series():
    net = ClosedNetwork([Delay("z", 1.0), Queue("q", 0.5)], population=1)
    s = mva(net, "linearizer", population=range(1, 6))
    exact = mva(net, population=range(1, 6))
    np.testing.assert_allclose(s.throughput, exact.throughput, rtol=1e-2)


def _line_pfqn():
    pytest.importorskip("line_solver")
    from line_solver.api.pfqn.linearizer import pfqn_linearizer
    from line_solver.api.pfqn.mva import pfqn_bs

    return pfqn_bs, pfqn_linearizer


def test_against_line_solver_amva():
    # Peer check: LINE's pfqn_bs (Bard-Schweitzer) and pfqn_linearizer
    # (Chandy-Neuse, 3 passes) on the same demands.
    pfqn_bs, pfqn_linearizer = _line_pfqn()
    rng = np.random.default_rng(5)
    for _ in range(8):
        C = int(rng.integers(1, 4))
        K = int(rng.integers(2, 5))
        L = rng.uniform(0.1, 2.0, (K, C))
        Z = rng.uniform(0.0, 3.0, C)
        N = rng.integers(1, 7, C)
        D = np.vstack([Z[None, :], L])
        delay = np.array([True] + [False] * K)
        servers = np.array([np.inf] + [1.0] * K)
        Xs, _, _ = _approx.schweitzer(D, delay, servers, N, tol=1e-13, max_iter=100_000)
        Xl, _, _ = _approx.linearizer(D, delay, servers, N, tol=1e-13, max_iter=100_000)
        Xbs = np.asarray(pfqn_bs(L, N.astype(float), Z, 1e-13, 100_000)[0]).ravel()
        Xlin = np.asarray(
            pfqn_linearizer(L, N.astype(float), Z, ["PS"] * K, tol=1e-13, maxiter=100_000)[5]
        ).ravel()
        np.testing.assert_allclose(Xs, Xbs, rtol=1e-8)
        np.testing.assert_allclose(Xl, Xlin, rtol=1e-8)


def test_every_methods_arguments_are_checked_read_or_not():
    # audit 2026-11-28: tol=nan ran 10,000 Schweitzer iterations, then advised raising tol; the exact
    # method took NaN limits it does not read
    from queuesgd.errors import InvalidParameterError

    net = ClosedNetwork([Delay("think", 2.0), Queue("cpu", 1.0)], population=2)
    for kwargs, field in (
        (dict(method="schweitzer", tol=float("nan")), "tol"),
        (dict(method="schweitzer", tol=-1.0), "tol"),
        (dict(method="linearizer", tol=2.0), "tol"),
        (dict(method="exact", max_iter=float("nan")), "max_iter"),
        (dict(method="exact", max_states=0), "max_states"),
    ):
        with pytest.raises(InvalidParameterError, match=f"^{field}: got"):
            mva(net, **kwargs)
    assert mva(net, method="exact", tol=0.5).throughput == pytest.approx(0.6, rel=1e-15)  # by hand: 2/(2+4/3)
