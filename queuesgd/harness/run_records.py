"""What a live run's records measured: its throughput, and its own compute law and update time.

The records are those of :func:`queuesgd.harness.runners.run` (one per step
of every worker, and the parameter server's updates). The a-priori protocol
and the same-run diagnosis (:func:`queuesgd.harness.campaign.validate`) both
measure a run with :func:`measured_throughput`; only the diagnosis predicts
from the run's own compute (:func:`same_run_profile`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd.errors import WorkerFailure
from queuesgd.harness.live_schemes import live_scheme

__all__ = ["measured_throughput", "same_run_profile", "update_role"]


def update_role(key: str, params: Mapping[str, Any] | None = None) -> str:
    """The role of the records that carry a live scheme's updates, for :func:`measured_throughput`.

    ``"worker"`` (all-reduce schemes and DDP: worker 0's steps), ``"round"``
    (eager-SGD with ``collective="ring"``: worker 0's rounds) or ``"ps"``.

    Examples
    --------
    >>> update_role("sync-ps"), update_role("eager-sgd", {"collective": "ring"})
    ('ps', 'round')
    """
    return live_scheme(key).update_role(params)


def measured_throughput(records: Sequence[Mapping[str, Any]], role: str, batch: int) -> dict[str, Any]:
    """Samples per second between the first and last update after the warm-up, with a 95% interval.

    The updates are the records of ``role``: ``"worker"`` (worker 0's steps,
    each applying ``applied`` gradients: all-reduce and DDP) or ``"ps"`` (the
    parameter server's updates). The rate is ``batch x applied`` per update
    over the time between updates, with a batch-means ratio interval
    (:func:`queuesgd.batchmeans.ratio_interval`).

    Examples
    --------
    >>> recs = [{"role": "worker", "rank": 0, "step": i, "warmup": i < 2, "t0": 0.1 * i,
    ...          "t_end": 0.1 * (i + 1), "applied": 2} for i in range(40)]
    >>> out = measured_throughput(recs, "worker", batch=8)     # 2 x 8 samples every 0.1 s
    >>> round(out["measured"], 9), out["updates"]
    (160.0, 38)
    """
    from queuesgd.batchmeans import ratio_interval

    ups = [r for r in records if r.get("role") == role and (role == "ps" or r.get("worker", r["rank"]) == 0)]
    ups.sort(key=lambda r: r["t_end"])
    first = next((i for i, r in enumerate(ups) if not r.get("warmup")), None)
    if first is None or len(ups) - first < 10:
        raise WorkerFailure(
            None, f"too few measured updates ({0 if first is None else len(ups) - first})", list(records)
        )
    anchor = ups[first - 1]["t_end"] if first > 0 else ups[first]["t0"]
    times = np.array([anchor] + [r["t_end"] for r in ups[first:]])
    applied = np.array([float(r.get("applied", 1)) for r in ups[first:]])
    rate, (lo, hi) = ratio_interval(applied * batch, np.diff(times))
    return {"measured": rate, "measured_low": lo, "measured_high": hi, "updates": int(applied.size)}


def same_run_profile(
    records: Sequence[Mapping[str, Any]], key: str, params: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A run's own compute law and update time, from its records: what a same-run diagnosis predicts with.

    ``compute`` holds every measured step's compute seconds without its
    injected delay (the delay is modelled apart, ``Cluster.stragglers``);
    ``update_time`` is the median update, per gradient for the parameter
    server (it applies the mean of ``applied`` gradients at once).

    Examples
    --------
    >>> recs = [{"role": "worker", "rank": 1, "warmup": False, "t_compute": 0.012, "delay": 0.002},
    ...         {"role": "ps", "rank": 0, "warmup": False, "t_update": 0.004, "applied": 2}]
    >>> out = same_run_profile(recs, "sync-ps")
    >>> out["compute"].tolist(), out["update_time"]
    ([0.01], 0.002)
    """
    work = [r for r in records if r.get("role") == "worker" and not r.get("warmup") and "t_compute" in r]
    # t_compute includes an injected delay (the "delay" field); the delay is modelled separately
    # (Cluster.stragglers), so the compute law is the rest.
    compute = np.array(
        [float(r["t_compute"]) - float(r.get("delay") or 0.0) for r in work if not r.get("aborted")]
    )
    if compute.size == 0:
        raise WorkerFailure(None, "no measured compute times", list(records))
    updates = []
    role = update_role(key, params)
    for r in records:
        if r.get("warmup") or r.get("t_update") is None or r.get("role") != role:
            continue
        if role == "ps":  # the PS applies the mean of `applied` gradients: per gradient
            updates.append(float(r["t_update"]) / max(float(r.get("applied", 1)), 1.0))
        else:  # every worker applies one mean (all-reduce, eager-SGD's rounds)
            updates.append(float(r["t_update"]))
    return {"compute": compute, "update_time": float(np.median(updates)) if updates else 0.0}
