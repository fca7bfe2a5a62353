"""RingAllReduce(overlap_efficiency=eta): the step eta of the way from the serial step to the overlapped one.

Independent sources: the serial step by hand (compute, then the ring's
``2 (n-1)/n S/B``), the overlapped and serial steps of the same scheme with
``overlap`` on and off, and the blend by hand from them.
"""

from __future__ import annotations

import pytest

import queuesgd as q
from queuesgd.errors import InvalidParameterError

W = q.Workload(0.1, None, batch_size=8, layers=[q.Layer("a", "50MB", 0.05), q.Layer("b", "50MB", 0.05)])
C = q.Cluster(workers=4, bandwidth="1GB/s")
PER_LAYER = {"fusion_bytes": None, "fusion_time": None}


def _fine(**kw):
    return q.predict(q.RingAllReduce(**PER_LAYER, **kw), W, C, "fine")


def test_blend_of_the_overlapped_and_serial_steps():
    full, serial = _fine(), _fine(overlap=False)
    assert serial.iteration_time == pytest.approx(0.1 + 2 * 3 / 4 * 0.1, rel=1e-12)  # nothing hides
    assert full.iteration_time < serial.iteration_time
    for eta in (0.0, 0.3, 0.9):
        got = _fine(overlap_efficiency=eta)
        want = eta * full.iteration_time + (1 - eta) * serial.iteration_time
        assert got.iteration_time == pytest.approx(want, rel=1e-12)
        assert got.throughput == pytest.approx(4 * 8 / want, rel=1e-12)
        assert "overlap efficiency" in got.reason
    # Hand-computed: 0.3 x 0.2 + 0.7 x 0.25.
    assert _fine(overlap_efficiency=0.3).iteration_time == pytest.approx(0.235, rel=1e-9)
    assert _fine(overlap_efficiency=1.0).iteration_time == full.iteration_time


def test_checked_and_fine_only():
    with pytest.raises(InvalidParameterError, match="overlap_efficiency"):
        q.RingAllReduce(overlap_efficiency=1.5)
    with pytest.raises(InvalidParameterError, match="overlap_efficiency"):
        q.RingAllReduce(overlap=False, overlap_efficiency=0.5)
    assert "overlap_efficiency" in q.RingAllReduce().ignored_parameters("closed_form")
    assert "overlap_efficiency" not in q.RingAllReduce().ignored_parameters("fine")
