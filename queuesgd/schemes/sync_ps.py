"""Synchronous SGD with a parameter server: wait for every worker, then one PS round.

Source: the coarse-grained synchronous model of Li, Paolieri, Golubchik et
al. (IEEE TPDS 2022; see ``docs/schemes/sync-ps.md``): every iteration all
``n`` workers compute, the barrier waits for the slowest (``E[max_i X_i]``),
then the ``n`` gradients are pushed to the PS, applied, and the parameters
pulled back by the ``n`` workers (:func:`~queuesgd.schemes.costs.ps_round`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from queuesgd.schemes.barrier import BarrierScheme
from queuesgd.schemes.costs import ps_round

__all__ = ["SyncPS"]


@dataclass(frozen=True)
class SyncPS(BarrierScheme):
    """Synchronous SGD with a (possibly sharded) parameter server.

    Each iteration: all ``n`` workers compute a gradient; when the last one
    is done, the ``n`` gradients go to the PS (one transfer at a time per
    shard link), the PS applies them, and the ``n`` workers pull the new
    parameters. Iterations are i.i.d., so

    ``iteration time = E[max_i X_i] + 2 alpha + n (G + P) / (s B) + n u / s``

    for any compute laws (order statistics, exact), and the throughput is
    ``n m / iteration time`` samples per second.

    Methods: ``"closed_form"`` (default), ``"ctmc"`` (the GSPN of
    :func:`~queuesgd.schemes.barrier.barrier_net`: ``n + 1`` markings for
    identical exponential workers) and ``"simulate"``.

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
