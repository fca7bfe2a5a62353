"""Synchronous SGD with a parameter server: wait for every worker, then one PS round.

Source: the coarse-grained synchronous model of Li, Paolieri, Golubchik et
al. (IEEE TPDS 2022; see ``docs/schemes/sync-ps.md``): every iteration all
``n`` workers compute, the barrier waits for the slowest (``E[max_i X_i]``),
then the ``n`` gradients are pushed to the PS, applied, and the parameters
pulled back by the ``n`` workers (:func:`~queuesgd.schemes.costs.ps_round`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from queuesgd.schemes.barrier.barrier import BarrierScheme
from queuesgd.schemes.costs import ps_round
from queuesgd.schemes.fine.fine import Bucket, FineModel, ps_graph, shard_of
from queuesgd.schemes.fine.finegrained import FineGrained
from queuesgd.workload import Cluster, Workload

__all__ = ["SyncPS"]


@dataclass(frozen=True)
class SyncPS(FineGrained, BarrierScheme):
    """Synchronous SGD with a (possibly sharded) parameter server.

    Each iteration: all ``n`` workers compute a gradient; when the last one
    is done, the ``n`` gradients go to the PS (one transfer at a time per
    shard link), the PS applies them, and the ``n`` workers pull the new
    parameters. Iterations are i.i.d., so

    ``iteration time = E[max_i X_i] + 2 alpha + n (G + P) / (s B) + n u / s``

    for any compute laws (order statistics, exact), and the throughput is
    ``n m / iteration time`` samples per second.

    Methods: ``"closed_form"`` (default), ``"ctmc"`` (the GSPN of
    :func:`~queuesgd.schemes.barrier.kofn.barrier_net`: ``n + 1`` markings for
    identical exponential workers) and ``"simulate"`` -- the coarse phase
    model, no overlap -- and, with a per-tensor profile, ``"fine"`` (the task
    graph of :func:`~queuesgd.schemes.fine.fine.ps_graph`: push, apply and pull per
    message, overlapping the backward pass) and ``"coarse"`` (the phase model
    with an overlap window and the PS link's contention; see
    ``docs/fine-grained.md``).

    Parameters
    ----------
    overlap : bool
        Wait-free back-propagation in the fine model (push a message as soon
        as its gradients are ready).
    fusion_bytes, fusion_time : float, str or None
        Tensor fusion thresholds of the fine model (:func:`~queuesgd.schemes.fine.fine.fuse`);
        ``None`` (the default) pushes every tensor on its own.
    fusion : str
        The fusion policy: ``"threshold"`` (the two thresholds above) or
        ``"ddp"`` (PyTorch DDP's buckets, :func:`~queuesgd.schemes.fine.ddp_buckets.ddp_buckets`).
    bucket_cap, first_bucket : float, str or None
        DDP's bucket limits with ``fusion="ddp"`` (25 MiB and 1 MiB; see
        :class:`~queuesgd.schemes.fine.finegrained.FineGrained`).

    Examples
    --------
    >>> from queuesgd import Workload, Cluster, predict
    >>> from queuesgd.distributions import Exponential
    >>> w = Workload(Exponential(mean=0.1), "10MB", batch_size=32)
    >>> p = predict(SyncPS(), w, Cluster(workers=2, bandwidth="1GB/s"))
    >>> round(p.iteration_time, 12)           # 0.1 x (1 + 1/2) + 4 x 10 MB / 1 GB/s
    0.19
    >>> p.method, p.gradients_per_update
    ('closed_form', 2.0)
    """

    key: ClassVar[str] = "sync-ps"

    overlap: bool = True
    fusion_bytes: float | str | None = None
    fusion_time: float | str | None = None
    fusion: str = "threshold"
    bucket_cap: float | str = "25MiB"
    first_bucket: float | str | None = "1MiB"

    def __post_init__(self) -> None:
        self._check_fine_fields()

    def fine_model(self, workload: Workload, cluster: Cluster) -> FineModel:
        return ps_graph(workload, cluster, self.buckets(workload), overlap=self.overlap)

    def _coarse_exposed(
        self,
        workload: Workload,
        cluster: Cluster,
        buckets: Sequence[Bucket],
        to_barrier: float,
        stretch: float,
    ) -> tuple[float, float, float, float, str]:
        # Per shard link (the slowest decides). Contention: all n workers push each of the shard's
        # messages through it, one at a time (n (alpha + g/B) per message). Message k is pushed no
        # earlier than its ready time plus its pushes, nor than the first message's ready time plus all
        # pushes up to k (the two end terms of the FIFO recursion); then it is applied, and the
        # outgoing link still has the pulls of k and of every later message to carry.
        n, bw, lat = cluster.workers, cluster.bandwidth, cluster.latency
        g, p = workload.gradient_bytes, workload.parameter_bytes
        backward = workload.phase_times().backward * stretch
        start = to_barrier - backward  # the backward pass starts (slowest worker's pace)
        shard = shard_of(buckets, cluster.ps_shards)
        worst = (-1.0, 0.0, 0.0, 0.0, 0.0, 0)
        for j in range(cluster.ps_shards):
            mine = [b for b, s in zip(buckets, shard) if s == j]
            if not mine:
                continue
            push = np.array([n * (lat + b.nbytes / bw) for b in mine])
            apply = np.array([n * workload.update_time * b.nbytes / g for b in mine])
            pull = np.array([n * (lat + b.nbytes * p / g / bw) for b in mine])
            if self.overlap:
                ready = start + np.array([b.ready for b in mine]) * stretch
            else:
                ready = np.full(len(mine), to_barrier)
            pushed = np.maximum(ready + push, ready[0] + np.cumsum(push))
            later_pulls = np.cumsum(pull[::-1])[::-1]
            end = float(np.max(pushed + apply + later_pulls))
            exposed = max(float(pushed[-1]) - to_barrier, 0.0)
            window = max(to_barrier - float(ready[0]), 0.0)
            if end > worst[0]:
                worst = (end, exposed, window, float(push.sum() + pull.sum()), end - to_barrier - exposed, j)
        end, exposed, window, total, tail, busiest = worst
        note = (
            f"PS link contention factor {n} (the n workers' pushes share each shard link); slowest shard "
            f"{busiest} of {cluster.ps_shards}; tail: the last message's update and pulls, or the pulls' "
            "backlog on the outgoing link"
        )
        return exposed, tail, window, total, note

    def costs(
        self, n: Any, k: Any, workload: Any, bandwidth: Any, latency: Any, shards: Any
    ) -> tuple[Any, Any]:
        """``ps_round(n, n, ...)``: ``n`` gradients pushed and applied, ``n`` parameter pulls.

        Examples
        --------
        >>> from queuesgd import Workload
        >>> SyncPS().costs(2, 2, Workload(0.1, "10MB"), 1e9, 0.0, 1)
        (0.04, 0.0)
        """
        return ps_round(
            k,
            n,
            workload.gradient_bytes,
            workload.parameter_bytes,
            bandwidth,
            latency,
            workload.update_time,
            shards,
        )

    def _assumptions(self) -> str:
        return (
            "n i.i.d. compute times; the barrier waits for all n; then n gradients pushed to and applied "
            "by the PS and n parameter pulls, one transfer at a time per shard link; no overlap"
        )
