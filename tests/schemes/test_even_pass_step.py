"""The planner's closed form of equal stages priced alike (``even_pass_step``) against pass timing.

Where the output layer covers a message (1F1B ``h >= s``, interleaved ``h / 3 >= s``, GPipe always)
the step of equal stages whose messages all cost ``s`` is the textbook ``m (tau + h) + (p - 1) tau / v``
less the ``m + 1`` messages Megatron does not send (GPipe plus ``(m - 1) max(0, s - h/3)``). The
reference here is the longest path through the schedule's passes, built from the public pieces
(:func:`chunk_messages`: none at the ends; :func:`chunk_passes`; :func:`pass_time`), for random
forward/backward splits, heads, micro-batches and depths.
"""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd.schemes.parallel.hybrid_sends import chunk_messages, crossing_patterns, even_pass_step
from queuesgd.schemes.parallel.hybrid_stages import chunk_passes
from queuesgd.schemes.parallel.megatron import SCHEDULES
from queuesgd.schemes.parallel.schedule_step import pass_time


def passes_step(key, code, m, a, b, fw, bw, h):
    """The slowest replica's pipeline, every chunk's passes with their messages (none at the ends)."""
    t, c, d, p, v, g = key
    x = np.full((1, p, v), 1.0 / v)
    worst = -np.inf
    for flags in crossing_patterns(t, c, d, p, g):
        msgs = chunk_messages(flags, v)
        price = np.array([[[0.0 if z is None else (b if z else a) for z in e] for e in row] for row in msgs])
        F, B = chunk_passes(x, np.array([fw]), np.array([bw]), price[None], np.array([h]))
        worst = max(worst, float(pass_time(F, B, np.array([m]), SCHEDULES[code])[0]))
    return worst


@pytest.mark.parametrize("code", [0, 1, 2])
def test_the_closed_form_is_the_pass_timing_where_it_holds(code):
    rng = np.random.default_rng(7 + code)
    seen = {True: 0, False: 0}
    for _ in range(120):
        p = int(rng.choice([2, 3, 4, 6, 8]))
        v = 1 if code < 2 else int(rng.choice([2, 3, 4]))
        m = int(rng.integers(1, 5)) * p if code == 2 else int(rng.integers(1, 33))
        t, d = (8, 1) if rng.random() < 0.5 else (1, 1)  # every boundary crosses (t = g), or none (p <= g)
        fw = rng.uniform(0.1, 2.0)
        bw, a, b = fw * rng.uniform(0.5, 4.0), rng.uniform(0.0, 0.3), rng.uniform(0.0, 0.6)
        s = b if t == 8 else a
        h = s * (3 if code == 2 else 1) * rng.uniform(0.5, 1.5)  # around the condition's edge
        holds, got = even_pass_step(8, [np.array([t]), 1, d, np.array([p]), v], np.array([code]), m, a, b,
                                    fw, bw, h, (1.0 / v, 1.0 / v, 1.0 / v))  # fmt: skip
        ref = passes_step((t, 1, d, p, v, 8), code, m, a, b, fw, bw, h)
        seen[bool(holds[0])] += 1
        if holds[0]:
            assert float(got[0]) == pytest.approx(ref, rel=1e-12, abs=0)
    assert seen[True] >= 40 and (code == 1 or seen[False] >= 20), seen


def test_it_does_not_hold_where_the_head_is_short_or_the_prices_or_stages_differ():
    one = dict(schedule=np.array([0]), microbatches=8, inside=0.1, across=0.5, forward=1.0, backward=2.0)
    cases = [
        ([8, 1, 1, 4, 1], 0.4, (1.0, 1.0, 1.0)),  # 1F1B, h < s: the middle stages pace; not this form
        ([2, 1, 2, 4, 1], 0.5, (1.0, 1.0, 1.0)),  # t c d = 4 < g = 8 < p t c d: two stages a node
        ([8, 1, 1, 4, 1], 0.5, (0.75, 1.0, 0.75)),  # head-slots stages
    ]
    for key, h, shares in cases:
        keys = [np.array([key[0]]), key[1], key[2], np.array([key[3]]), key[4]]
        holds, _ = even_pass_step(8, keys, head=h, shares=shares, **one)
        assert not holds[0]
    # and there the form is off: 1F1B with h = 0.4 < s = 0.5 on p = 4, m = 8
    _, cf = even_pass_step(8, [np.array([8]), 1, 1, np.array([4]), 1], head=0.4, shares=(1.0,) * 3, **one)
    ref = passes_step((8, 1, 1, 4, 1, 8), 0, 8, 0.1, 0.5, 1.0, 2.0, 0.4)
    assert abs(float(cf[0]) - ref) > 1e-3
