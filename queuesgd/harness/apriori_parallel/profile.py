"""FSDP2's own step without a network, measured beforehand in a run of its own (:func:`profile_fsdp`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.provenance import stamp

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

    Returns
    -------
    dict
        ``"compute"``: ``k`` -> every forward + backward time measured
        (after ``warmup`` steps, all copies); ``"update"``: ``k`` -> the
        median optimizer step; ``"measured"``: when; ``"model"``,
        ``"batch_size"``.
    """
    from queuesgd.harness.fsdp import fsdp_worker
    from queuesgd.harness.launch import run_workers
    from queuesgd.schemes import ShardedDataParallel

    ks = sorted({_checks.integer("copies", k) for k in copies})
    steps, warmup = _checks.steps_and_warmup(steps, warmup)
    measured = stamp()
    compute: dict[int, list[float]] = {}
    update: dict[int, float] = {}
    for k in ks:

        def fn(ctx: Any) -> None:
            fsdp_worker(
                ctx,
                kind,
                steps,
                batch_size=batch_size,
                warmup=warmup,
                seed=seed,
                model_options=model_options,
                solo=True,
                key=ShardedDataParallel.key,
            )

        recs = [
            r for r in run_workers(fn, k, timeout=timeout) if r.get("role") == "worker" and not r["warmup"]
        ]
        compute[k] = [float(r["t_backward"] - r["t0"]) for r in recs]
        update[k] = float(np.median([r["t_update"] for r in recs]))
    return {
        "model": kind,
        "batch_size": int(batch_size),
        "compute": compute,
        "update": update,
        "measured": measured,
    }
