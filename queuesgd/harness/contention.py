"""How a training step slows down when ``k`` workers share the machine's cores: measured, not fitted.

On a machine with fewer cores than workers (two cores here, up to eight
workers), every worker's step is slower than on its own: the processes share
the cores, the memory bandwidth and the caches. An a-priori prediction needs
that slowdown *before* the run, so it is measured in the profiling step:
:func:`measure_concurrency` starts ``k`` processes (one thread each) that
each profile the same model at the same time with :func:`queuesgd.profile`
(no communication between them), for every ``k`` asked, and keeps each
copy's measured step times. Synchronous training keeps its workers in step,
so ``k`` copies computing together is what ``k`` training workers do between
two all-reduces; the prediction of an ``n``-worker run then uses the law
measured with ``k = n`` copies (:meth:`queuesgd.harness.apriori.Profile.workload_at`).

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> m = measure_concurrency("mlp", (1, 2), batch_size=8, repetitions=5, warmup=1,
...                         model_options={"inputs": 16, "hidden": 8})
>>> sorted(m), m[2]["compute"].size        # two copies, five steps each
([1, 2], 10)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.harness.launch import WorkerContext, run_workers

__all__ = ["measure_concurrency"]


def _copy(
    ctx: WorkerContext,
    kind: str,
    batch_size: int,
    repetitions: int,
    warmup: int,
    seed: int,
    model_options: Mapping[str, Any],
) -> None:
    """One copy: profile the model after a barrier (all copies start together); report the steps."""
    import torch.distributed as dist

    from queuesgd.harness.models import build
    from queuesgd.profiler import profile

    def factory() -> Any:
        return build(kind, **model_options)[0]

    shape = build(kind, **model_options)[1]
    dist.barrier()
    work = profile(
        factory,
        batch_size=batch_size,
        input_shape=shape,
        threads=1,
        warmup=warmup,
        repetitions=repetitions,
        seed=seed,
        name=kind,
    )
    ctx.report(
        {
            "compute": [float(v) for v in work.compute.samples],
            "update": float(work.update_time),
            "workload": work if ctx.rank == 0 else None,
        }
    )


def measure_concurrency(
    kind: str,
    copies: Iterable[int] = (1, 2, 4, 8),
    *,
    batch_size: int,
    repetitions: int = 20,
    warmup: int = 3,
    seed: int = 0,
    model_options: Mapping[str, Any] | None = None,
    timeout: float = 600.0,
) -> dict[int, dict[str, Any]]:
    """Profile ``k`` concurrent copies of a harness model's training step, for each ``k`` in ``copies``.

    Parameters
    ----------
    kind : str
        A harness model (:data:`queuesgd.harness.models.MODELS`).
    copies : iterable of int
        Numbers of concurrent processes (one thread each).
    batch_size, repetitions, warmup, seed
        As :func:`queuesgd.profile` (each copy measures ``repetitions`` steps).
    model_options : mapping, optional
        Sizes for :func:`~queuesgd.harness.models.build`.
    timeout : float
        Wall-clock limit of each ``k``'s run, seconds.

    Returns
    -------
    dict
        ``{k: {"compute": array of every copy's forward + backward times,
        "update": array of each copy's median optimizer step,
        "workload": copy 0's layer-wise Workload}}``.
    """
    from queuesgd.harness.models import MODELS

    _checks.choice("model", kind, MODELS)
    counts = sorted({_checks.integer("copies", k) for k in copies})
    if not counts:
        from queuesgd.errors import InvalidParameterError

        raise InvalidParameterError("copies", copies, "one or more integers >= 1")
    options = dict(model_options or {})
    batch_size = _checks.integer("batch_size", batch_size)
    repetitions = _checks.integer("repetitions", repetitions, minimum=2)
    warmup = _checks.integer("warmup", warmup, minimum=0)
    out: dict[int, dict[str, Any]] = {}
    for k in counts:

        def fn(ctx: WorkerContext) -> None:
            _copy(ctx, kind, batch_size, repetitions, warmup, seed, options)

        records = run_workers(fn, k, timeout=timeout)
        records.sort(key=lambda r: r["rank"])
        out[k] = {
            "compute": np.concatenate([np.asarray(r["compute"], dtype=float) for r in records]),
            "update": np.array([r["update"] for r in records]),
            "workload": records[0]["workload"],
        }
    return out
