"""Why is the checkpointing row's CUDA peak 0.89x Memory? (issue 21, passes 7-9) A diagnosis.

    PYTHONPATH=. python validation/diagnose_checkpoint_memory.py --out OUT.json

In passes 7-9 on an H200 the GPT-2-small-style model in bf16 with activation
checkpointing peaked at 0.889x Memory's total (6131 MiB measured, 6894 MiB
predicted: the memory pass's transient term was 3503 MiB, 482 MiB more than
without checkpointing), while the same model without it was at 0.97x and
every CPU model at 0.98-1.02x (a GPT with checkpointing, fp32 and bf16, at
1.00-1.01x: the CPU does not reproduce it). For both GPU rows (the cases of
``profile_fidelity_cases.py``), after two plain steps:

- the memory pass (:func:`queuesgd.profiler_memory.backward_peak`): kept,
  recomputed, peak and where it is reached (``peak_node``);
- one plain step under ``torch.cuda.memory._record_memory_history``: the
  allocator's running total over its events (:func:`peak_of_trace`), where it
  peaks and the largest blocks alive then, each with the frames that
  allocated it.

Nothing here feeds a prediction.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CASES = ("gpt2-small bf16 (token ids, tied, labels)", "gpt2-small bf16, activation checkpointing")
TOP = 12


def _where(frames: list[dict[str, Any]], keep: int = 4) -> list[str]:
    """The innermost Python frames of an allocation, ``file:line name`` (torch's own files left out)."""
    mine = [f for f in frames if f.get("filename", "").endswith(".py") and "/torch/" not in f["filename"]]
    return [f"{Path(f['filename']).name}:{f.get('line')} {f.get('name')}" for f in (mine or frames)[:keep]]


def peak_of_trace(events: list[dict[str, Any]], start: int = 0, top: int = TOP) -> dict[str, Any]:
    """The running total of a CUDA allocator trace (``alloc`` +, ``free_completed`` -), and its peak.

    ``start`` is the bytes allocated when the trace began. Returns the peak
    (bytes), the index of the event that reached it, and the ``top``
    largest blocks alive then (``size``, ``where``: :func:`_where` of the
    frames that allocated it).

    >>> ev = [{"action": "alloc", "addr": 1, "size": 10}, {"action": "alloc", "addr": 2, "size": 5},
    ...       {"action": "free_completed", "addr": 1, "size": 10}, {"action": "alloc", "addr": 3, "size": 7}]
    >>> got = peak_of_trace(ev, start=100)
    >>> got["peak_bytes"], got["peak_event"], [b["size"] for b in got["alive_at_peak"]]
    (115, 1, [10, 5])
    """
    live: dict[int, dict[str, Any]] = {}
    total = peak = start
    at, alive = -1, []
    for i, e in enumerate(events):
        if e.get("action") == "alloc":
            live[e["addr"]] = e
            total += e["size"]
        elif e.get("action") == "free_completed" and e.get("addr") in live:
            total -= live.pop(e["addr"])["size"]
        else:
            continue
        if total > peak:
            peak, at = total, i
            alive = sorted(live.values(), key=lambda b: -b["size"])[:top]
    return {
        "peak_bytes": peak,
        "peak_event": at,
        "events": len(events),
        "alive_at_peak": [{"size": b["size"], "where": _where(b.get("frames", []))} for b in alive],
    }


def _probe(case: Any) -> dict[str, Any]:
    import torch

    from queuesgd.profiler_memory import backward_peak

    step = case.build_step("cuda")
    mib = 2.0**20
    with step.modes_kept(), step.errors():
        for _ in range(2):
            step.run()
        torch.cuda.synchronize()
        m = backward_peak(step)
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=1_000_000)
        try:
            step.run()
            torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    events = (snap.get("device_traces") or [[]])[0]
    real = peak_of_trace(events, start=start)
    real["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    real["start_bytes"] = start
    return {
        "name": case.name,
        "memory_pass_mib": {k: v / mib for k, v in m.items() if isinstance(v, int) and k != "nodes"},
        "memory_pass_peak_node": m["peak_node"],
        "memory_pass_nodes": m["nodes"],
        "step": real,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    opts = parser.parse_args()
    import gc

    import torch
    from profile_fidelity_cases import gpu_cases

    doc: dict[str, Any] = {
        "device_name": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cases": [],
    }
    by_name = {c.name: c for c in gpu_cases()}
    for name in CASES:
        try:
            row = _probe(by_name[name])
        except Exception as exc:  # a diagnosis: record the failure, go on
            row = {"name": name, "error": f"{type(exc).__name__}: {exc}"[:500]}
        doc["cases"].append(row)
        opts.out.write_text(json.dumps(doc, indent=1))
        step = row.get("step", {})
        print(
            name,
            json.dumps(row.get("memory_pass_mib", {}), default=lambda x: round(x, 1)),
            row.get("memory_pass_peak_node", ""),
            f"real peak {step.get('peak_bytes', 0) / 2**20:.0f} MiB at event {step.get('peak_event')}",
            row.get("error", ""),
            flush=True,
        )
        for block in step.get("alive_at_peak", [])[:6]:
            print(f"    {block['size'] / 2**20:8.1f} MiB  {' <- '.join(block['where'][:3])}", flush=True)
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
