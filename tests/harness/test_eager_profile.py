"""eager-SGD's loop profile (harness.eager_profile): its steps and activations against set compute times."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from queuesgd.harness.eager_profile import eager_loop_times  # noqa: E402
from queuesgd.harness.live import EmulatedCompute  # noqa: E402
from queuesgd.harness.runners import run  # noqa: E402


@pytest.mark.timing
def test_loop_steps_are_the_set_compute_plus_a_small_restart():
    # Workers that wait 20 ms per step (speeds 1 and 0.5: 20 and 40 ms) on loopback: worker 0's step from a
    # round's end to its next hand-off is its 20 ms and the loop's restart (well under 5 ms on a quiet
    # machine; bounded for a busy one); every activation is positive and short against a step.
    live = EmulatedCompute("20ms", 4000, speeds=(1.0, 0.5))
    recs = run("eager-sgd", live, 2, 40, params={"collective": "ring"}, warmup=5, seed=3, timeout=60)
    out = eager_loop_times(recs)
    steps = np.asarray(out["step"])
    assert len(steps) >= 25
    assert 0.020 <= np.median(steps) <= 0.020 + 0.008, np.median(steps)
    act = np.asarray(out["activation"])
    assert len(act) >= 25 and act.min() > 0 and np.median(act) < 0.008, np.median(act)
    assert out["update"] >= 0.0
