"""A saved workload's per-layer times read back to the last bit (issue 22).

The trace wrote ``repr(seconds * 1e6)`` and read ``float(text) / 1e6``: two roundings, and about one time
in 25 came back one unit in the last place off. The second held-out campaign's ViT profile (pass 1) lost
layer 24's (``blocks.layers.4.self_attn.in_proj_bias``) backward time that way (0.005375578901785 in
memory, 0.005375578901785001 read back), and its 8-worker DDP prediction rebuilt 2 ulp off
(tests/harness/test_rebuild_predictions.py, ULP_ONLY).
"""

from __future__ import annotations

import math
import random

from queuesgd.catalog import load_trace, load_workload, save_workload
from queuesgd.catalog_trace import microseconds
from queuesgd.units import MAX_SECONDS
from queuesgd.workload import Layer, Workload

#: The ViT's layer 24 backward time that the campaign had in memory (the one of its two readings that
#: rebuilds all three stored rows of the pass exactly).
LOST = 0.005375578901785


def _save_and_load(tmp_path, times):
    layers = tuple(Layer(f"t{i}", 4.0 * (i + 1), b, f) for i, (b, f) in enumerate(times))
    work = Workload(0.5, None, batch_size=8, layers=layers, name="w")
    return load_workload(save_workload(work, tmp_path / "w.json"))


def test_the_old_writing_lost_the_campaigns_value():
    assert float(repr(LOST * 1e6)) / 1e6 != LOST


def test_the_lost_value_round_trips_bit_exactly(tmp_path):
    back = _save_and_load(tmp_path, [(LOST, LOST), (LOST / 3, LOST / 7)])
    assert [(x.backward_time, x.forward_time) for x in back.layers] == [(LOST, LOST), (LOST / 3, LOST / 7)]
    assert back.layers[0].backward_time.hex() == LOST.hex()
    no_forward = _save_and_load(tmp_path, [(LOST, None), (LOST / 3, None)])
    assert [(x.backward_time, x.forward_time) for x in no_forward.layers] == [(LOST, None), (LOST / 3, None)]


def test_every_time_round_trips_bit_exactly(tmp_path):
    rng = random.Random(22)
    times = [(10 ** rng.uniform(-9, 2), 10 ** rng.uniform(-9, 2)) for _ in range(3000)]
    # the extremes a layer time may take: the smallest double, and the largest duration (units.MAX_SECONDS)
    times += [(0.0, 0.0), (5e-324, math.ulp(1.0)), (MAX_SECONDS, 123.456)]
    times += [(math.nextafter(MAX_SECONDS, 0), 1.0)]
    assert sum(b * 1e6 / 1e6 != b for b, _ in times) > 50  # the old reading loses some of them
    back = _save_and_load(tmp_path, times)
    assert [(x.backward_time, x.forward_time) for x in back.layers] == times


def test_older_traces_are_read_as_before(tmp_path):
    # A trace without the exact header keeps float(text) / 1e6, so the stored inputs rebuild as before.
    path = tmp_path / "old.bk.log"
    path.write_text(
        "# queuesgd profile: gap_us,bytes,forward_us,name (backward order)\n1\n1\n5375.578901785,4,,a\n"
    )
    assert load_trace(path)[0].backward_time == 5375.578901785 / 1e6 != LOST
    assert microseconds(LOST) == "5375.578901785"
