"""validation/diagnose_checkpoint_memory.py: the running total of a CUDA allocator trace, counted by hand."""

from __future__ import annotations

from validation_scripts import load_script


def test_the_peak_and_what_is_alive_then():
    mod = load_script("diagnose_checkpoint_memory")
    frames = [{"filename": "/x/torch/nn/functional.py", "line": 3, "name": "linear"},
              {"filename": "/w/model.py", "line": 12, "name": "forward"}]  # fmt: skip
    ev = [
        {"action": "alloc", "addr": 1, "size": 100, "frames": frames},
        {"action": "segment_alloc", "addr": 9, "size": 10_000},  # a segment: not a tensor's bytes
        {"action": "alloc", "addr": 2, "size": 40},
        {"action": "free_requested", "addr": 1, "size": 100},  # not yet free on the stream
        {"action": "alloc", "addr": 3, "size": 30},
        {"action": "free_completed", "addr": 1, "size": 100},
        {"action": "alloc", "addr": 4, "size": 50},
        {"action": "free_completed", "addr": 77, "size": 5},  # allocated before the trace: not counted
    ]
    got = mod.peak_of_trace(ev, start=1000, top=2)
    # by hand: 1100, 1140, 1170 (the peak, event 4), 1070, 1120
    assert got["peak_bytes"] == 1170 and got["peak_event"] == 4 and got["events"] == 8
    assert [b["size"] for b in got["alive_at_peak"]] == [100, 40]
    assert got["alive_at_peak"][0]["where"] == ["model.py:12 forward"]
