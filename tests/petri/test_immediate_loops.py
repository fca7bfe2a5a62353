"""Loops of immediate transitions with extreme branching, against closed forms in mpmath and exact rationals.

A loop's absorption probabilities and expected firings were solved by sparse LU
of ``I - A``: a retry loop that repeats with probability ``1 - 1e-12`` lost 2e-5
(``1 - p`` formed by subtraction), and an exit of probability 1e-14 was zeroed
as round-off (a throughput 0.33 off). :mod:`queuesgd.petri.absorption` now
eliminates without subtractions.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
import sympy
from petri_helpers import retry_loop

from queuesgd.errors import AccuracyWarning
from queuesgd.petri import absorption


@pytest.mark.parametrize(("wf", "ws"), [(3.0, 1.0), (1e9, 1.0), (1e12, 1.0), (1e14, 1.0), (1.0, 1e-12)])
def test_a_retry_loop_fails_wf_over_ws_times_per_start(wf, ws):
    # Geometric number of failures per start: mean p / (1 - p) = wf / ws; one start per second.
    sol = retry_loop(wf, ws).solve()
    assert sol.method == "gth"
    assert sol.throughput("bad") == pytest.approx(float(Fraction(wf) / Fraction(ws)), rel=1e-14)
    assert sol.throughput("ok") == pytest.approx(1.0, rel=1e-14)
    assert sol.throughput("again") == pytest.approx(sol.throughput("bad"), rel=1e-14)


def test_the_retry_loop_against_exact_rationals():
    exact = retry_loop(sympy.Integer(10**12), sympy.Integer(1)).solve(symbolic=True)
    assert exact.throughput("bad") == 10**12
    numeric = retry_loop(1e12, 1.0).solve().throughput("bad")
    assert numeric == pytest.approx(float(exact.throughput("bad")), rel=1e-14)


@pytest.mark.parametrize("e", [1e-10, 1e-13, 1e-14, 1e-16])
def test_a_rare_exit_of_the_loop_is_kept(e):
    # The retry loop (bad: weight 1, back to try; ok: 1, to idle) with a third branch, rare (e, to
    # stuck, left at rate r = e). Renewal: a start leads to stuck with probability e / (1 + e), then
    # waits 1 / r; starts per second 1 / (1 + (e / (1 + e)) / r) = 1/2 to 1e-14.
    r = e
    net = retry_loop(1.0, 1.0)
    net.place("stuck")
    net.immediate("rare", inputs={"try": 1}, outputs={"stuck": 1}, weight=e)
    net.timed("recover", rate=r, inputs={"stuck": 1}, outputs={"idle": 1})
    E, R = mp.mpf(e), mp.mpf(r)
    ref = 1 / (1 + (E / (1 + E)) / R)
    assert net.solve().throughput("start") == pytest.approx(float(ref), rel=1e-14)


def test_loops_past_the_dense_limit_fall_back_to_lu_and_warn(monkeypatch):
    monkeypatch.setattr(absorption, "DENSE_LOOP", 0)
    with pytest.warns(AccuracyWarning, match="sparse LU") as seen:
        sol = retry_loop(3.0, 1.0).solve()
    assert [w.filename for w in seen] == [__file__]  # the user's line, not the library's
    assert sol.throughput("bad") == pytest.approx(3.0, rel=1e-12)


def test_elimination_equals_lu_on_a_random_loop(monkeypatch):
    # 40 vanishing markings, random branching into each other and 7 tangible ones
    rng = np.random.default_rng(4)
    nv, nt = 40, 7
    src, dst, tan = [], [], []
    for v in range(nv):
        for w in rng.choice(nv, 3, replace=False):
            src.append(v), dst.append(int(w)), tan.append(False)
        src.append(v), dst.append(int(rng.integers(nt))), tan.append(True)
    src, dst, tan = np.array(src), np.array(dst), np.array(tan)
    p = rng.uniform(0.1, 1.0, src.size)
    p /= np.bincount(src, weights=p)[src]
    j = rng.integers(0, 3, src.size)
    X, Y = absorption.absorb_numeric(nv, nt, src, j, p, dst, tan, np.arange(3))
    monkeypatch.setattr(absorption, "DENSE_LOOP", 0)
    with pytest.warns(AccuracyWarning):
        X_lu, Y_lu = absorption.absorb_numeric(nv, nt, src, j, p, dst, tan, np.arange(3))
    np.testing.assert_allclose(X, X_lu, rtol=1e-12, atol=1e-15)
    for a, b in zip(Y, Y_lu, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(X.sum(axis=1), 1.0, rtol=1e-14)
