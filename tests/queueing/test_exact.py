"""Exact MVA kernels against independent sources.

Sources: hand-computed MVA written as fractions, the Erlang-B form of the
machine-repairman model, the convolution algorithm (normalization constants,
computed here with Python fractions or in log-space), a brute-force enumeration
of the multi-class product-form solution, and the asymptotic bounds.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.queueing import _exact
from queuesgd.queueing.symbolic import repairman_throughput

F = Fraction
INF = np.inf


def solve1(demands, servers, n_max):
    """Single network through the batched kernel; ``servers`` 0 marks a delay."""
    is_delay = np.array([c == 0 for c in servers])
    srv = np.array([INF if c == 0 else float(c) for c in servers])
    X, R, Q = _exact.single_class(np.array([demands], dtype=float), is_delay, srv, n_max)
    return X[0], R[0], Q[0]


# --------------------------------------------------------------------------- hand-computed MVA
def test_repairman_by_hand():
    # Delay Z=2, Queue D=1.
    # N=1: R = (2, 1),                     X = 1/3,  Q_q = 1/3
    # N=2: R_q = 1 * (1 + 1/3) = 4/3,      X = 2 / (2 + 4/3) = 3/5,  Q_q = 4/5
    # N=3: R_q = 1 * (1 + 4/5) = 9/5,      X = 3 / (2 + 9/5) = 15/19
    X, R, Q = solve1([2.0, 1.0], [0, 1], 3)
    assert X == pytest.approx([1 / 3, 3 / 5, 15 / 19], rel=1e-15)
    assert R[:, 1] == pytest.approx([1, 4 / 3, 9 / 5], rel=1e-15)
    assert Q[:, 0] == pytest.approx([2 / 3, 6 / 5, 30 / 19], rel=1e-15)


def test_three_stations_by_hand():
    # Delay 1, Queue 1, Queue 2.
    # N=1: R = (1, 1, 2), X = 1/4, Q = (1/4, 1/4, 1/2)
    # N=2: R = (1, 5/4, 3), sum 21/4, X = 8/21, Q = (8/21, 10/21, 8/7)
    # N=3: R = (1, 31/21, 30/7), sum 142/21, X = 63/142
    X, R, Q = solve1([1.0, 1.0, 2.0], [0, 1, 1], 3)
    assert X == pytest.approx([1 / 4, 8 / 21, 63 / 142], rel=1e-15)
    assert R[1] == pytest.approx([1, 5 / 4, 3], rel=1e-15)
    assert Q[1] == pytest.approx([8 / 21, 10 / 21, 8 / 7], rel=1e-15)
    assert R[2] == pytest.approx([1, 31 / 21, 30 / 7], rel=1e-15)


def test_two_server_queue_by_hand():
    # Delay 1 + Queue(D=1, c=2). Convolution: f_delay(n) = 1/n!, f_queue(n) = 1/prod min(j, 2)
    # = 1, 1, 1/2, 1/4. G(0..3) = 1, 2, 2, 17/12, so X(n) = G(n-1)/G(n) = 1/2, 1, 24/17.
    X, R, Q = solve1([1.0, 1.0], [0, 2], 3)
    assert X == pytest.approx([1 / 2, 1, 24 / 17], rel=1e-14)
    # N=2: the queue holds 0, 1 or 2 jobs with weights 1/2, 1, 1/2 (over G=2): Q = (1 + 1)/2 = 1.
    assert Q[1, 1] == pytest.approx(1.0, rel=1e-14)


def test_queue_with_more_servers_than_jobs_is_a_delay():
    X, R, _ = solve1([1.0, 3.0], [0, 8], 5)
    assert X == pytest.approx(np.arange(1, 6) / 4.0, rel=1e-15)
    assert R[:, 1] == pytest.approx(3.0, rel=1e-15)


# --------------------------------------------------------------------------- repairman closed form
def _erlang_b_throughput(r: F, D: F, n_max: int) -> list[F]:
    """X(N) = (1 - p0) / D with p0 = (r^N/N!) / sum_{j<=N} r^j/j!, exactly."""
    out, term, total = [], F(1), F(1)
    for n in range(1, n_max + 1):
        term = term * r / n
        total += term
        out.append((1 - term / total) / D)
    return out


@pytest.mark.parametrize("Z, D", [(F(5), F(1, 10)), (F(1), F(1)), (F(3, 2), F(1, 4))])
def test_repairman_matches_erlang_b_up_to_200(Z, D):
    X, _, Q = solve1([float(Z), float(D)], [0, 1], 200)
    expected = np.array([float(x) for x in _erlang_b_throughput(Z / D, D, 200)])
    np.testing.assert_allclose(X, expected, rtol=1e-12)
    # Little's law at the delay: Q_think = X Z.
    np.testing.assert_allclose(Q[:, 0], expected * float(Z), rtol=1e-12)


# --------------------------------------------------------------------------- convolution algorithm
def _log_factors(D: float, c: float, n_max: int) -> np.ndarray:
    """log f(n) = n log D - sum_{j<=n} log min(j, c); c = inf for a delay."""
    j = np.arange(1, n_max + 1)
    alpha = np.minimum(j, c)
    return np.concatenate([[0.0], np.cumsum(math.log(D) - np.log(alpha))])


def _log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = len(a)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    terms = np.where(j <= i, a[np.clip(i - j, 0, None)] + b[j], -np.inf)
    m = terms.max(axis=1)
    return m + np.log(np.exp(terms - m[:, None]).sum(axis=1))


def _convolution(demands, servers, N):
    """Throughput X(1..N) and queue lengths Q_k(N) from normalization constants (log-space)."""
    logf = [_log_factors(d, INF if c == 0 else c, N) for d, c in zip(demands, servers, strict=True)]
    logG = logf[0]
    for lf in logf[1:]:
        logG = _log_convolve(logG, lf)
    X = np.exp(logG[:-1] - logG[1:])
    Q = []
    for k in range(len(logf)):
        rest = [lf for i, lf in enumerate(logf) if i != k]
        logG_k = rest[0]
        for lf in rest[1:]:
            logG_k = _log_convolve(logG_k, lf)
        n = np.arange(N + 1)
        # Q_k(N) = sum_n n f_k(n) G_{-k}(N - n) / G(N)
        Q.append(float(np.sum(n[1:] * np.exp(logf[k][1:] + logG_k[N - n[1:]] - logG[N]))))
    return X, np.array(Q)


def _convolution_exact(demands, servers, N):
    """X(1..N) with fractions; demands are Fractions, servers ints (0 = delay)."""

    def factors(D, c):
        f = [F(1)]
        for j in range(1, N + 1):
            f.append(f[-1] * D / (j if c == 0 else min(j, c)))
        return f

    G = factors(demands[0], servers[0])
    for D, c in zip(demands[1:], servers[1:], strict=True):
        f = factors(D, c)
        G = [sum(G[i] * f[n - i] for i in range(n + 1)) for n in range(N + 1)]
    return [G[n - 1] / G[n] for n in range(1, N + 1)]


def test_multiserver_matches_exact_convolution():
    demands = [F(3), F(2), F(1, 2), F(1, 3)]
    servers = [0, 4, 1, 2]
    X, _, _ = solve1([float(d) for d in demands], servers, 60)
    expected = np.array([float(x) for x in _convolution_exact(demands, servers, 60)])
    np.testing.assert_allclose(X, expected, rtol=1e-12)


@pytest.mark.parametrize("servers", [[0, 4, 1], [0, 8, 2], [0, 16, 3]])
def test_multiserver_near_saturation_matches_convolution(servers):
    # N = 500 drives the multi-server queue (the bottleneck) above 99% utilization,
    # where p(0|n) = 1 - sum_{j>=1} p(j|n) would have lost every digit.
    c = servers[1]
    demands = [5.0, 1.0 * c, 0.6 * servers[2]]
    N = 500
    X, R, Q = solve1(demands, servers, N)
    X_ref, Q_ref = _convolution(demands, servers, N)
    utilization = X[-1] * demands[1] / c
    assert utilization > 0.99
    np.testing.assert_allclose(X, X_ref, rtol=1e-9)
    np.testing.assert_allclose(Q[-1], Q_ref, rtol=1e-8)
    assert Q[-1].sum() == pytest.approx(N, rel=1e-12)
    assert np.all(np.diff(X) >= -1e-12 * X[1:])


def test_single_multiserver_queue_alone_at_saturation():
    # Tiny think time, 8 servers, 500 jobs: p(0|n) is ~1e-300 and the queue is 100% busy.
    demands = [1e-3, 8.0]
    X, _, Q = solve1(demands, [0, 8], 500)
    X_ref, Q_ref = _convolution(demands, [0, 8], 500)
    np.testing.assert_allclose(X, X_ref, rtol=1e-9)
    np.testing.assert_allclose(Q[-1], Q_ref, rtol=1e-8)
    assert X[-1] == pytest.approx(1.0, rel=1e-9)


def test_float_recursion_matches_rational_recursion():
    # Rational demands take the exact path, whose p(0|n) comes from the utilization law
    # (sum_{j<c} (c-j) p(j|n) = c - X D) instead of the float path's sub-network ratios.
    demands = [F(7, 2), F(3), F(5, 2), F(1, 5)]
    servers = [0, 3, 5, 1]
    D = np.array([[sympy.Rational(d.numerator, d.denominator) for d in demands]], dtype=object)
    is_delay = np.array([s == 0 for s in servers])
    srv = np.array([INF if s == 0 else float(s) for s in servers])
    Xe, Re, Qe = _exact.single_class(D, is_delay, srv, 30)
    X, R, Q = solve1([float(d) for d in demands], servers, 30)
    np.testing.assert_allclose(X, Xe[0].astype(float), rtol=1e-13)
    np.testing.assert_allclose(Q, Qe[0].astype(float), rtol=1e-13)


# --------------------------------------------------------------------------- batching
def test_batched_equals_one_by_one():
    rng = np.random.default_rng(7)
    is_delay = np.array([True, False, False, False, False])
    servers = np.array([INF, 1, 2, 1, 5.0])
    D = rng.uniform(0.05, 3.0, size=(50, 5))
    X, R, Q = _exact.single_class(D, is_delay, servers, 40)
    for m in range(50):
        Xm, Rm, Qm = _exact.single_class(D[m : m + 1], is_delay, servers, 40)
        np.testing.assert_allclose(X[m], Xm[0], rtol=1e-14)
        np.testing.assert_allclose(R[m], Rm[0], rtol=1e-14)
        np.testing.assert_allclose(Q[m], Qm[0], rtol=1e-14)


def test_long_recursion_20_stations():
    rng = np.random.default_rng(3)
    K = 20
    D = rng.uniform(0.1, 1.0, size=(1, K))
    is_delay = np.zeros(K, bool)
    is_delay[0] = True
    servers = np.ones(K)
    servers[0] = INF
    servers[1:4] = [2, 4, 8]
    X, R, Q = _exact.single_class(D, is_delay, servers, 10_000)
    assert X.shape == (1, 10_000) and R.shape == Q.shape == (1, 10_000, K)
    # The bottleneck bound 1 / max_k(D_k / c_k) is reached at large N.
    assert X[0, -1] == pytest.approx(1 / np.max(D[0, 1:] / servers[1:]), rel=1e-6)
    np.testing.assert_allclose(Q.sum(axis=2)[0], np.arange(1, 10_001), rtol=1e-12)


# --------------------------------------------------------------------------- multi-class
def _compositions(n, k):
    """All ways to put n identical jobs into k stations."""
    for cut in itertools.combinations(range(n + k - 1), k - 1):
        parts, prev = [], -1
        for c in (*cut, n + k - 1):
            parts.append(c - prev - 1)
            prev = c
        yield parts


def _brute_force_product_form(D, servers, N):
    """Enumerate every state; X_c = G(N - e_c)/G(N), Q_kc = E[n_kc] (fractions, exact).

    Station weights (BCMP): delay prod_c D^n/n!; queue with c servers
    |n|!/prod_c n_c! * prod_c D^n / prod_{j<=|n|} min(j, c).
    """
    K, C = len(D), len(N)

    def weight(state):  # state[k][c]
        w = F(1)
        for k in range(K):
            n = state[k]
            tot = sum(n)
            for c in range(C):
                w *= F(D[k][c]) ** n[c]
            if servers[k] == 0:
                for c in range(C):
                    w /= math.factorial(n[c])
            else:
                w *= math.factorial(tot)
                for c in range(C):
                    w /= math.factorial(n[c])
                for j in range(1, tot + 1):
                    w /= min(j, servers[k])
        return w

    def G_and_Q(pop):
        G, Qs = F(0), [[F(0)] * C for _ in range(K)]
        for per_class in itertools.product(*(_compositions(pop[c], K) for c in range(C))):
            state = [[per_class[c][k] for c in range(C)] for k in range(K)]
            w = weight(state)
            G += w
            for k in range(K):
                for c in range(C):
                    Qs[k][c] += state[k][c] * w
        return G, [[q / G for q in row] for row in Qs]

    G, Q = G_and_Q(N)
    X = []
    for c in range(C):
        less = list(N)
        less[c] -= 1
        X.append(G_and_Q(less)[0] / G)
    return X, Q


@pytest.mark.parametrize("servers", [[0, 1, 1], [0, 1, 2], [0, 3, 2]])
def test_multi_class_matches_brute_force(servers):
    D = [[F(2), F(1)], [F(1, 2), F(3, 2)], [F(1), F(1, 3)]]
    N = [3, 2]
    X_ref, Q_ref = _brute_force_product_form(D, servers, N)
    is_delay = np.array([s == 0 for s in servers])
    srv = np.array([INF if s == 0 else float(s) for s in servers])
    X, R, Q = _exact.multi_class(np.array(D, dtype=float), is_delay, srv, np.array(N), max_states=1000)
    np.testing.assert_allclose(X, [float(x) for x in X_ref], rtol=1e-12)
    np.testing.assert_allclose(Q, [[float(q) for q in row] for row in Q_ref], rtol=1e-12)
    np.testing.assert_allclose(Q.sum(axis=0), N, rtol=1e-12)
    np.testing.assert_allclose(Q, X[None, :] * R, rtol=1e-14)


def test_multi_class_zero_demand_class():
    # Class 1 never visits station 2 (demand 0): it contributes nothing there.
    D = [[F(1), F(2)], [F(1), F(1)], [F(0), F(1, 2)]]
    N = [2, 2]
    X_ref, Q_ref = _brute_force_product_form(D, [0, 1, 1], N)
    X, R, Q = _exact.multi_class(
        np.array(D, dtype=float),
        np.array([True, False, False]),
        np.array([INF, 1.0, 1.0]),
        np.array(N),
        max_states=100,
    )
    np.testing.assert_allclose(X, [float(x) for x in X_ref], rtol=1e-12)
    assert R[2, 0] == 0 and Q[2, 0] == 0
    np.testing.assert_allclose(Q, [[float(q) for q in row] for row in Q_ref], rtol=1e-12, atol=1e-15)


def test_identical_classes_merge_into_one():
    # Two classes with the same demands behave as one class of N1 + N2 jobs.
    d = np.array([4.0, 1.0, 0.5, 2.0])
    is_delay = np.array([True, False, False, False])
    servers = np.array([INF, 1.0, 3.0, 2.0])
    X, R, Q = _exact.multi_class(
        np.stack([d, d], axis=1), is_delay, servers, np.array([7, 5]), max_states=1000
    )
    X1, R1, Q1 = _exact.single_class(d[None, :], is_delay, servers, 12)
    assert X.sum() == pytest.approx(X1[0, -1], rel=1e-12)
    np.testing.assert_allclose(X / X.sum(), [7 / 12, 5 / 12], rtol=1e-12)
    np.testing.assert_allclose(Q.sum(axis=1), Q1[0, -1], rtol=1e-12)


def test_identical_classes_merge_near_saturation():
    # 8-server bottleneck at > 99% utilization with 300 jobs split over two identical classes.
    d = np.array([2.0, 8.0, 0.5])
    is_delay = np.array([True, False, False])
    servers = np.array([INF, 8.0, 1.0])
    X, R, Q = _exact.multi_class(
        np.stack([d, d], axis=1), is_delay, servers, np.array([180, 120]), max_states=100_000
    )
    X_ref, Q_ref = _convolution(list(d), [0, 8, 1], 300)
    assert X.sum() * d[1] / 8 > 0.99
    assert X.sum() == pytest.approx(X_ref[-1], rel=1e-9)
    np.testing.assert_allclose(Q.sum(axis=1), Q_ref, rtol=1e-8)


def test_state_space_too_large():
    D = np.ones((2, 3))
    with pytest.raises(StateSpaceTooLargeError) as info:
        _exact.multi_class(
            D, np.array([True, False]), np.array([INF, 1.0]), np.array([99, 99, 99]), max_states=10_000
        )
    msg = str(info.value)
    assert "1,000,000" in msg and "10,000" in msg and "linearizer" in msg and "schweitzer" in msg
    assert isinstance(info.value, ValueError)


def test_bad_arguments_are_named():
    with pytest.raises(InvalidParameterError, match="n_max"):
        _exact.single_class([[1.0, 1.0]], [True, False], [INF, 1.0], 0)
    with pytest.raises(InvalidParameterError, match="servers"):
        _exact.single_class([[1.0, 1.0]], [True, False], [INF, 1.5], 3)
    with pytest.raises(InvalidParameterError, match="D"):
        _exact.single_class([[1.0, -1.0]], [True, False], [INF, 1.0], 3)


# --------------------------------------------------------------------------- symbolic
def test_symbolic_single_class_equals_repairman_closed_form():
    Z, D = sympy.symbols("Z D", positive=True)
    X, R, Q = _exact.single_class(np.array([[Z, D]], dtype=object), [True, False], [INF, 1.0], 3)
    for n in (1, 2, 3):
        assert sympy.simplify(X[0, n - 1] - repairman_throughput(Z, D, n)) == 0
    # Substituting numbers gives the numeric kernel.
    Xn, Rn, Qn = solve1([2.5, 0.7], [0, 1], 3)
    vals = {Z: sympy.Rational(5, 2), D: sympy.Rational(7, 10)}
    np.testing.assert_allclose([float(x.subs(vals)) for x in X[0]], Xn, rtol=1e-12)
    np.testing.assert_allclose([[float(r.subs(vals)) for r in row] for row in R[0]], Rn, rtol=1e-12)


def test_symbolic_multiserver_and_float_demands():
    a, b = sympy.symbols("a b", positive=True)
    D = np.array([[1.5, a, b]], dtype=object)  # a float stays exact: 1.5 -> 3/2
    X, R, Q = _exact.single_class(D, [True, False, False], [INF, 2.0, 1.0], 4)
    Xn, Rn, Qn = solve1([1.5, 0.8, 0.3], [0, 2, 1], 4)
    vals = {a: sympy.Rational(4, 5), b: sympy.Rational(3, 10)}
    np.testing.assert_allclose([float(x.subs(vals)) for x in X[0]], Xn, rtol=1e-12)
    np.testing.assert_allclose([[float(q.subs(vals)) for q in row] for row in Q[0]], Qn, rtol=1e-12)
    # Results are cancelled rational functions: numerator and denominator are polynomials.
    num, den = sympy.fraction(sympy.together(X[0, -1]))
    assert num.is_polynomial(a, b) and den.is_polynomial(a, b)


def test_symbolic_multi_class_equals_brute_force():
    x = sympy.Symbol("x", positive=True)
    D = np.array([[2, 1], [x, sympy.Rational(3, 2)], [1, sympy.Rational(1, 3)]], dtype=object)
    servers = [0, 2, 1]
    is_delay = np.array([True, False, False])
    srv = np.array([INF, 2.0, 1.0])
    X, R, Q = _exact.multi_class(D, is_delay, srv, np.array([2, 2]), max_states=100)
    X_ref, Q_ref = _brute_force_product_form(
        [[F(2), F(1)], [F(1, 2), F(3, 2)], [F(1), F(1, 3)]], servers, [2, 2]
    )
    for c in range(2):
        assert X[c].subs(x, sympy.Rational(1, 2)) == sympy.Rational(X_ref[c].numerator, X_ref[c].denominator)
    assert sympy.simplify(Q.sum(axis=0)[0] - 2) == 0


# --------------------------------------------------------------------------- end to end through mva
def test_population_series_through_mva():
    from queuesgd.queueing.mva import mva
    from queuesgd.queueing.network import ClosedNetwork, Delay, Queue

    net = ClosedNetwork([Delay("think", 3.0), Queue("cpu", 0.02, servers=4), Queue("disk", 0.004)], 10)
    series = mva(net, population=range(1, 1025))
    assert len(series) == 1024
    for n in (1, 7, 200, 1024):
        one = mva(net, population=n)
        assert series.throughput[n - 1] == pytest.approx(one.throughput, rel=1e-14)
        assert series.queue_length["cpu"][n - 1] == pytest.approx(one.queue_length["cpu"], rel=1e-14)
    X_ref, _ = _convolution([3.0, 0.02, 0.004], [0, 4, 1], 1024)
    np.testing.assert_allclose(series.throughput, X_ref, rtol=1e-9)


def test_mva_exact_multi_class_state_space_error():
    from queuesgd.queueing.mva import mva
    from queuesgd.queueing.network import ClosedNetwork, Delay, Queue

    net = ClosedNetwork(
        [Delay("z", {"a": 1.0, "b": 2.0}), Queue("q", {"a": 0.5, "b": 0.1})], {"a": 300, "b": 300}
    )
    with pytest.raises(StateSpaceTooLargeError, match="90,601"):
        mva(net, max_states=50_000)


# --------------------------------------------------------------------------- property
@st.composite
def networks(draw):
    K = draw(st.integers(1, 5))
    demands = draw(st.lists(st.floats(0.01, 10.0), min_size=K, max_size=K))
    kinds = draw(st.lists(st.integers(0, 4), min_size=K, max_size=K))  # 0: delay, else servers
    if all(k == 0 for k in kinds):
        kinds[0] = 1
    return demands, kinds


@settings(max_examples=60, deadline=None)
@given(networks(), st.integers(1, 80))
def test_throughput_monotone_and_within_asymptotic_bounds(net, n_max):
    demands, kinds = net
    X, R, Q = solve1(demands, kinds, n_max)
    n = np.arange(1, n_max + 1)
    assert np.all(np.diff(X) >= -1e-12 * X[1:])
    bottleneck = max(d / k for d, k in zip(demands, kinds, strict=True) if k > 0)
    bound = np.minimum(n / sum(demands), 1.0 / bottleneck)
    assert np.all(X <= bound * (1 + 1e-12))
    np.testing.assert_allclose(Q.sum(axis=1), n, rtol=1e-10)
