"""Communication costs and per-worker compute laws shared by the schemes.

Every cost is an alpha-beta model (a latency per message plus bytes over
bandwidth) written with plain arithmetic, so the same function evaluates
NumPy arrays (sweeps) and SymPy symbols (:func:`queuesgd.derive`).

- :func:`ps_round` -- one synchronous parameter-server round after the
  barrier: ``k`` gradients pushed to and applied by the PS, parameters
  pulled by ``pulls`` workers, through ``s`` shards.
- :func:`ring_allreduce` -- ``2(n-1)/n * S/B + 2(n-1) alpha``.
- :func:`tree_allreduce` -- binary-tree reduce then broadcast,
  ``2 ceil(log2 n) (alpha + S/B)``.
- :func:`hierarchical_allreduce` -- ring inside each node, ring across the
  node leaders, ring inside each node again.

Examples
--------
>>> ring_allreduce(4, 100e6, 1.25e9, 0.0)        # 2 x 3/4 x 0.08 s
0.12
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "hierarchical_allreduce",
    "ps_round",
    "ring_allgather",
    "ring_allreduce",
    "ring_reduce_scatter",
    "tree_allreduce",
]


def _is_sym(*values: Any) -> bool:
    return any(type(v).__module__.startswith("sympy") for v in values)


def ps_round(
    gradients: Any,
    pulls: Any,
    gradient_bytes: Any,
    parameter_bytes: Any,
    bandwidth: Any,
    latency: Any,
    update_time: Any,
    shards: Any = 1,
) -> tuple[Any, Any]:
    """``(communication, update)`` seconds of one synchronous PS round after the barrier.

    The PS's links are the bottleneck and carry one transfer at a time per
    shard: ``gradients`` pushes of ``gradient_bytes / shards`` on each shard
    link, then the PS applies them (``update_time / shards`` each, shards in
    parallel), then ``pulls`` downloads of ``parameter_bytes / shards``. One
    latency each way: ``communication = 2 latency + (gradients G + pulls P)
    / (shards B)``, ``update = gradients u / shards``.

    Examples
    --------
    >>> ps_round(4, 4, 10e6, 10e6, 1.25e8, 0.0, 0.01)   # 8 x 0.08 s; 4 x 0.01 s
    (0.64, 0.04)
    """
    comm = 2 * latency + (gradients * gradient_bytes + pulls * parameter_bytes) / (shards * bandwidth)
    return comm, gradients * update_time / shards


def ring_allreduce(n: Any, size: Any, bandwidth: Any, latency: Any) -> Any:
    """Ring all-reduce of ``size`` bytes on ``n`` workers: ``2(n-1)/n * size/B + 2(n-1) latency``.

    Reduce-scatter then all-gather, each ``n - 1`` steps of ``size / n``
    bytes (Patarasuk and Yuan 2009; Thakur et al. 2005). One worker costs 0.

    Examples
    --------
    >>> ring_allreduce(2, 1e6, 1e9, 1e-5)         # 1 ms + 20 us
    0.00102
    """
    return 2 * (n - 1) / n * size / bandwidth + 2 * (n - 1) * latency


def ring_allgather(n: Any, size: Any, bandwidth: Any, latency: Any) -> Any:
    """Ring all-gather of ``size`` bytes in all (``size / n`` per rank): ``(n-1)/n S/B + (n-1) alpha``.

    ``n - 1`` steps, each sending one ``S/n`` shard to the next rank (Thakur
    et al. 2005). Numbers, NumPy arrays or SymPy symbols. One rank costs 0.

    Examples
    --------
    >>> ring_allgather(4, 100e6, 1.25e9, 0.0)        # 3/4 x 0.08 s
    0.06
    """
    return (n - 1) / n * size / bandwidth + (n - 1) * latency


def ring_reduce_scatter(n: Any, size: Any, bandwidth: Any, latency: Any) -> Any:
    """Ring reduce-scatter of ``size`` bytes (each rank ends with its reduced ``size / n`` shard).

    ``(n-1)/n S/B + (n-1) alpha``, the first half of a ring all-reduce
    (Patarasuk and Yuan 2009); the vector additions are added by
    :func:`~queuesgd.schemes.parallel.sharded_graph.unit_costs` (``(n-1)`` additions of ``S/n`` bytes, as
    :func:`~queuesgd.schemes.fine.fine.ring_message_costs` does).

    Examples
    --------
    >>> ring_reduce_scatter(2, 1e6, 1e9, 1e-5)       # 0.5 ms + 10 us
    0.00051
    """
    return (n - 1) / n * size / bandwidth + (n - 1) * latency


def tree_allreduce(n: Any, size: Any, bandwidth: Any, latency: Any) -> Any:
    """Binary-tree all-reduce: reduce up then broadcast down, ``2 ceil(log2 n) (latency + size/B)``.

    The whole message moves at every level (no pipelining), which is the
    latency-optimal choice for small messages (Thakur et al. 2005).

    Examples
    --------
    >>> tree_allreduce(8, 1e6, 1e9, 0.0)          # 2 x 3 levels x 1 ms
    0.006
    """
    if _is_sym(n):
        import sympy

        depth = sympy.ceiling(sympy.log(n, 2))
    else:
        depth = np.ceil(np.log2(np.asarray(n, dtype=float)) - 1e-12)
        depth = np.maximum(depth, 0.0)
        depth = float(depth) if np.ndim(depth) == 0 else depth
    return 2 * depth * (latency + size / bandwidth)


def hierarchical_allreduce(
    n: Any,
    per_node: Any,
    size: Any,
    bandwidth: Any,
    latency: Any,
    intra_bandwidth: Any,
    intra_latency: Any,
) -> Any:
    """Two-level all-reduce: inside each node of ``per_node`` workers, then across ``n / per_node`` nodes.

    Reduce-scatter inside the node (ring of ``g = per_node``), all-reduce of
    each worker's ``size / g`` shard across the ``m = n / g`` nodes (ring,
    ``g`` rings in parallel on one node link, so ``size`` bytes cross it in
    total), then all-gather inside the node (Jia et al. 2018, hierarchical
    all-reduce as in NCCL/Horovod):

    ``2 (g-1)/g * size/B_intra + 2 (g-1) alpha_intra + 2 (m-1)/m * size/B + 2 (m-1) alpha``.

    Examples
    --------
    >>> round(hierarchical_allreduce(8, 4, 1e6, 1e8, 0.0, 1e10, 0.0), 9)  # 2 nodes
    0.01015
    """
    g = per_node
    m = n / per_node
    intra = 2 * (g - 1) / g * size / intra_bandwidth + 2 * (g - 1) * intra_latency
    inter = 2 * (m - 1) / m * size / bandwidth + 2 * (m - 1) * latency
    return intra + inter
