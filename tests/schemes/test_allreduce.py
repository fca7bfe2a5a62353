"""All-reduce schemes against costs computed by hand in the test (ring, tree,
hierarchical), the CTMC of the barrier's GSPN, and a hand-derived optimum of
the ring's throughput in n."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from queuesgd.distributions import Deterministic, Exponential
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.prediction import predict, sweep
from queuesgd.schemes.allreduce.allreduce import HierarchicalAllReduce, RingAllReduce, TreeAllReduce
from queuesgd.workload import Cluster, Workload

MU = 5.0
S = 40e6
BW = 1.25e9  # 10 Gbit/s
ALPHA = 20e-6
U = 3e-3
W = Workload(Exponential(MU), S, batch_size=16, update_time=U)


def H(n: int) -> float:
    return sum(1.0 / i for i in range(1, n + 1))


def ring_by_hand(n: int) -> float:
    return 2 * (n - 1) / n * S / BW + 2 * (n - 1) * ALPHA


def tree_by_hand(n: int) -> float:
    levels = {1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 16: 4}[n]
    return 2 * levels * (ALPHA + S / BW)


def hier_by_hand(n: int, g: int, b_intra: float, a_intra: float, alpha: float = ALPHA) -> float:
    r = n // g
    intra = 2 * (g - 1) / g * S / b_intra + 2 * (g - 1) * a_intra
    inter = 2 * (r - 1) / r * S / BW + 2 * (r - 1) * alpha
    return intra + inter


CASES = [
    (RingAllReduce(), ring_by_hand),
    (TreeAllReduce(), tree_by_hand),
    (
        HierarchicalAllReduce(per_node=2, intra_bandwidth="100GB/s", intra_latency="2us"),
        lambda n: hier_by_hand(n, 2, 1e11, 2e-6),
    ),
]


@pytest.mark.parametrize("scheme, cost", CASES, ids=lambda v: getattr(v, "key", ""))
@pytest.mark.parametrize("n", [2, 4, 8])
def test_closed_form_and_ctmc(scheme, cost, n):
    c = Cluster(n, BW, latency=ALPHA)
    expected = H(n) / MU + cost(n) + U
    cf = predict(scheme, W, c)
    ct = predict(scheme, W, c, "ctmc")
    assert cf.iteration_time == pytest.approx(expected, rel=1e-12)
    assert cf.breakdown["communication"] == pytest.approx(cost(n), rel=1e-12)
    assert cf.breakdown["update"] == U
    assert ct.iteration_time == pytest.approx(expected, rel=1e-9)
    assert cf.throughput == pytest.approx(n * 16 / expected, rel=1e-12)


def test_one_worker_has_no_communication():
    c = Cluster(1, BW, latency=ALPHA)
    for scheme in (RingAllReduce(), TreeAllReduce(), HierarchicalAllReduce(per_node=1)):
        p = predict(scheme, W, c)
        assert p.iteration_time == pytest.approx(1 / MU + U, rel=1e-12)
        assert predict(scheme, W, c, "ctmc").iteration_time == pytest.approx(1 / MU + U, rel=1e-9)


@pytest.mark.parametrize("scheme, cost", CASES, ids=lambda v: getattr(v, "key", ""))
def test_formula_matches_closed_form(scheme, cost):
    f = scheme.formula()
    extra = {"g": 2, "B_intra": 1e11, "alpha_intra": 2e-6} if "g" in f.symbols else {}
    for n in (2, 4, 8):
        p = predict(scheme, W, Cluster(n, BW, latency=ALPHA))
        x = f.evaluate(n=n, mu=MU, m=16, S=S, B=BW, alpha=ALPHA, u=U, **extra)
        assert x == pytest.approx(p.throughput, rel=1e-12)


def test_ring_optimum_in_n_by_hand():
    # X(n) = n m / (t + u + c (n-1)/n + d (n-1)), c = 2S/B, d = 2 alpha.
    # d/dn [n / D(n)] = 0  <=>  D - n D' = t + u + c - d - 2c/n = 0  <=>  n* = 2c / (t + u + c - d)
    f = RingAllReduce().formula("deterministic")
    t, u, S_, B, a = (f.symbols[k] for k in ("t", "u", "S", "B", "alpha"))
    c, d = 2 * S_ / B, 2 * a
    n_star = 2 * c / (t + u + c - d)
    # SymPy cannot prove the sign of d2X/dn2 there, and it is in fact a minimum: optimize refuses it
    with pytest.raises(NotRepresentable, match="not proved to be a maximum.*a minimum, not a maximum"):
        f.optimize("n")
    # the ring's 2(n-1) latency terms grow linearly and H_n/mu only logarithmically: X -> m / (2 alpha)
    fe = RingAllReduce().formula()
    assert sympy.simplify(fe.limit("n") - fe.symbols["m"] / (2 * fe.symbols["alpha"])) == 0
    # D - n D' changes sign from - to + at n*: the stationary point is the *minimum* of the
    # throughput (one worker has no all-reduce at all); beyond it X climbs towards m / (2 alpha).
    vals = {"t": 0.02, "u": 0.0, "S": 100e6, "B": 1.25e9, "alpha": 5e-3, "m": 1}
    n_cont = float(n_star.subs({f.symbols[k]: v for k, v in vals.items()}))
    assert n_cont == pytest.approx(2 * 0.16 / (0.02 + 0.16 - 0.01), rel=1e-12)
    at = {f.symbols[k]: v for k, v in vals.items()}  # n continuous: evaluate() takes integers only
    x = [float(f.expr.subs({**at, f.symbols["n"]: k})) for k in (n_cont - 0.5, n_cont, n_cont + 0.5)]
    assert x[1] < x[0] and x[1] < x[2]
    best = f.optimize("n", upper=10_000, **vals)  # X(1) = 50 > X(2), then X climbs: largest at the bound
    assert (best.argmax, best.interior, best.monotone) == (10_000, False, None)
    assert best.maximum == pytest.approx(10_000 / (0.02 + 0.16 * 9_999 / 10_000 + 0.01 * 9_999), rel=1e-12)


def test_hierarchical_per_node_must_divide_workers():
    with pytest.raises(InvalidParameterError, match="HierarchicalAllReduce.per_node") as err:
        predict(HierarchicalAllReduce(per_node=4), W, Cluster(6, BW))
    assert "divisor" in str(err.value)
    with pytest.raises(InvalidParameterError, match="HierarchicalAllReduce.per_node"):
        HierarchicalAllReduce(per_node=0)
    with pytest.raises(InvalidParameterError, match="HierarchicalAllReduce.intra_bandwidth"):
        HierarchicalAllReduce(intra_bandwidth=-1.0)


def test_sweep_equals_predict_row_by_row():
    w = Workload(Deterministic(0.05), S, batch_size=16)
    for scheme in (RingAllReduce(), TreeAllReduce()):
        t = sweep(scheme, w, Cluster(1, BW), workers=[1, 2, 3, 16], latency=[0.0, ALPHA])
        for row in t.rows():
            p = predict(scheme, w, Cluster(row["workers"], row["bandwidth"], latency=row["latency"]))
            assert row["throughput"] == pytest.approx(p.throughput, rel=1e-12)
    t = sweep(HierarchicalAllReduce(per_node=4), w, Cluster(4, BW), workers=[4, 8, 16])
    expected = [16 * n / (0.05 + hier_by_hand(n, 4, 1.25e10, 0.0, alpha=0.0)) for n in (4, 8, 16)]
    assert np.allclose(t["throughput"], expected, rtol=1e-12, atol=0)
    assert math.isfinite(t["scaling_factor"][0])
