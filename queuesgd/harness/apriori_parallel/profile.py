"""FSDP2's own step without a network, measured beforehand in a run of its own (:func:`profile_fsdp`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp
from queuesgd.harness.run_args import steps_and_warmup

__all__ = ["profile_fsdp"]


def profile_fsdp(
    kind: str,
    *,
    batch_size: int,
    copies: Iterable[int] = (1, 2),
    steps: int = 30,
    warmup: int = 10,
    model_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    timeout: float = 120.0,
    group: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """FSDP2's step without a network, measured in a separate run: ``k`` single-rank FSDP copies at once.

    On a CPU, FSDP's own per-unit work (the hooks, the copy into and out of
    the gather buffers, the DTensor bookkeeping) runs on the same core as the
    computation and costs more than the model's arithmetic for small models
    (the MLP's step: 1.2 ms bare, 4.5 ms under single-rank FSDP, on the
    development machine). A profile of the bare model leaves it out, as
    DDP's lock-step profile would leave out DDP's per-step work without its
    own measurement. Here every one of ``k`` processes trains the model
    wrapped exactly as :func:`~queuesgd.harness.fsdp.run_fsdp` wraps it, but
    sharded over a process group of its own (one rank: its collectives are
    local copies), for ``steps`` steps, the ``k`` copies sharing the cores
    as the ``k`` ranks of the run will.

    ``group=True`` (a spec's ``"fsdp_profile": "group"``): the ``k``
    processes are instead the ``k`` ranks of one FSDP group on loopback, as
    the run's ranks are, and each rank's collectives are timed where it
    issues them (:func:`~queuesgd.harness.fsdp.timed_collectives`) and taken
    out of its forward + backward: FSDP's own per-step work at the run's
    group size (a rank of two copies in and out of shards of its gathered
    and reduced buffers, which a single-rank group does not; on the
    development machine the rest of a two-rank mlp step was 5.7-6.0 ms
    against 3.4-3.6 ms for single-rank copies), without the network, which
    the calibration times. ``k = 1`` is the same either way.

    More than :func:`~queuesgd.harness.process_limit.process_limit` copies (8 per CPU core) are
    refused before any run, unless ``force``.

    Returns
    -------
    dict
        ``"compute"``: ``k`` -> every forward + backward time measured
        (after ``warmup`` steps, all copies; with ``group`` less the step's
        collectives); ``"update"``: ``k`` -> the median optimizer step;
        ``"measured"``: when; ``"model"``, ``"batch_size"``; with ``group``
        also ``"group": True``, ``"collectives"``: ``k`` -> each step's
        collectives taken out, and ``"collective_calls"``: their number.
    """
    from queuesgd.harness.fsdp import collective_seconds, fsdp_worker, timed_collectives
    from queuesgd.harness.launch import run_workers
    from queuesgd.schemes import ShardedDataParallel

    ks = sorted({_checks.integer("copies", k) for k in copies})
    check_processes("copies", ks, max(ks, default=1), force=force)
    steps, warmup = steps_and_warmup(steps, warmup)
    measured = stamp()
    compute: dict[int, list[float]] = {}
    update: dict[int, float] = {}
    taken: dict[int, list[float]] = {}
    counts: dict[int, list[int]] = {}
    for k in ks:
        solo = not group or k == 1

        def fn(ctx: Any, solo: bool = solo) -> None:
            with timed_collectives() as calls:
                fsdp_worker(
                    ctx,
                    kind,
                    steps,
                    batch_size=batch_size,
                    warmup=warmup,
                    seed=seed,
                    model_options=model_options,
                    solo=solo,
                    key=ShardedDataParallel.key,
                )
            ctx.report({"role": "collectives", "calls": [list(c) for c in calls]})

        records = run_workers(fn, k, timeout=timeout, force=force)
        calls = {r["rank"]: r["calls"] for r in records if r.get("role") == "collectives"}
        recs = [r for r in records if r.get("role") == "worker" and not r["warmup"]]
        out = [collective_seconds(calls[r["rank"]], r["t0"], r["t_backward"]) if group else 0.0 for r in recs]
        compute[k] = [float(r["t_backward"] - r["t0"] - c) for r, c in zip(recs, out)]
        taken[k] = out
        counts[k] = [sum(1 for c in calls[r["rank"]] if r["t0"] <= c[1] < r["t_backward"]) for r in recs]
        update[k] = float(np.median([r["t_update"] for r in recs]))
    doc: dict[str, Any] = {
        "model": kind,
        "batch_size": int(batch_size),
        "compute": compute,
        "update": update,
        "measured": measured,
    }
    if group:
        doc.update(group=True, collectives=taken, collective_calls=counts)
    return doc
