"""``queuesgd catalog list | show``."""

from __future__ import annotations

import argparse


def run_catalog(args: argparse.Namespace) -> int:
    from queuesgd.catalog import list_workloads, load_workload

    if args.action == "list":
        for name in list_workloads():
            w = load_workload(name)
            print(
                f"{name:<12} batch {w.batch_size:<4} compute {w.compute.mean * 1e3:8.2f} ms  "
                f"gradient {w.gradient_bytes / 1e6:8.1f} MB"
            )
        return 0
    print(_show_workload(args.name))
    return 0


def _show_workload(name: str) -> str:
    """A catalog entry as a two-column table: the model's numbers with units, then its provenance."""
    from queuesgd import units
    from queuesgd.catalog import load_workload, workload_info

    w = load_workload(name)
    info = workload_info(name)
    law = w.compute
    rows = [
        ("name", f"{w.name or name}" + (f" ({info['display_name']})" if info.get("display_name") else "")),
        ("compute", f"{units.format_seconds(w.compute_time)} per step, {type(law).__name__} law"),
        ("batch size", f"{w.batch_size} samples per worker step"),
        ("one worker alone", f"{w.samples_per_second_single:.4g} samples/s"),
        ("gradient", units.format_bytes(w.gradient_bytes)),
        ("parameters", units.format_bytes(w.parameter_bytes)),
        ("update time", units.format_seconds(w.update_time)),
    ]
    if w.layers:
        back = units.format_seconds(w.backward_time) if w.backward_time is not None else "unknown"
        rows.append(("layers", f"{len(w.layers)} gradient tensors, backward pass {back}"))
    for key in ("description", "hardware", "framework", "dtype"):
        if isinstance(info.get(key), str):
            rows.append((key, info[key]))
    source = info.get("source")
    if isinstance(source, dict) and isinstance(source.get("paper"), str):
        rows.append(("source", source["paper"]))
    rows.append(("file", str(info["path"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
