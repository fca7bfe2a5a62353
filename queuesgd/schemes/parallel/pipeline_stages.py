"""A workload split into pipeline stages: the partition of its layers and each stage's times and bytes.

- :func:`balanced_partition` -- the contiguous split of a list of layer
  costs into stages that minimizes the largest stage (exact dynamic
  programming over prefix sums).
- :func:`stage_split` -- the per-stage forward and backward times, gradient
  and parameter bytes of a workload split into stages
  (:class:`StageSplit`).

Examples
--------
>>> balanced_partition([1.0, 1.0, 2.0], 2)
(2, 1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

if TYPE_CHECKING:
    from queuesgd.workload import Workload

__all__ = ["BACKWARD_SHARE", "StageSplit", "balanced_partition", "stage_split"]

#: Share of a micro-batch's compute in the backward pass when the workload has no per-layer profile:
#: the usual ``t_b = 2 t_f`` (the backward pass of a matrix product is two matrix products).
BACKWARD_SHARE = 2.0 / 3.0


def balanced_partition(costs: Sequence[float], stages: int) -> tuple[int, ...]:
    """Contiguous split of ``costs`` (forward order) into ``stages`` non-empty parts, minimizing the largest.

    Exact: dynamic programming over prefix sums, ``best[k][j] = min_i
    max(best[k-1][i], P[j] - P[i])`` (the linear partition problem), vectorized
    over ``i``. Ties: the backtracking takes the smallest minimizing ``i``,
    so among optimal splits the last stage is as long as possible, then the
    one before it, and so on.

    Parameters
    ----------
    costs : sequence of float
        One cost per layer (seconds of forward + backward), in forward order; ``>= 0``.
    stages : int
        ``1 <= stages <= len(costs)``.

    Returns
    -------
    tuple of int
        Layers per stage, in forward order.

    Examples
    --------
    >>> balanced_partition([3.0, 1.0, 1.0, 1.0, 2.0], 3)   # 3 | 1 1 | 1 2: the largest is 3
    (1, 2, 2)
    """
    c = np.asarray(costs, dtype=float)
    n = c.size
    S = _checks.integer("stages", stages, minimum=1)
    if S > n:
        raise InvalidParameterError("stages", stages, f"at most the number of layers ({n})")
    P = np.concatenate(([0.0], np.cumsum(c)))
    INF = math.inf
    best = np.full((S + 1, n + 1), INF)
    arg = np.zeros((S + 1, n + 1), dtype=int)
    best[0, 0] = 0.0
    for k in range(1, S + 1):
        for j in range(k, n - (S - k) + 1):
            i = np.arange(k - 1, j)  # the stage k holds layers i .. j-1
            val = np.maximum(best[k - 1, i], P[j] - P[i])
            a = int(np.argmin(val))  # first minimizer: the smallest i, the longest stage k
            best[k, j], arg[k, j] = val[a], int(i[a])
    counts = []
    j = n
    for k in range(S, 0, -1):
        i = arg[k, j]
        counts.append(int(j - i))
        j = int(i)
    return tuple(reversed(counts))


@dataclass(frozen=True)
class StageSplit:
    """A workload split into pipeline stages (one micro-batch, a worker of speed 1).

    Attributes
    ----------
    counts : tuple of int or None
        Layers per stage in forward order (``None`` without a per-layer profile).
    forward, backward : tuple of float
        Seconds of one micro-batch's forward / backward pass through each stage.
    gradient_bytes, parameter_bytes : tuple of float
        Bytes of each stage's gradients and parameters.
    note : str
        How the times were obtained.

    Examples
    --------
    >>> from queuesgd import Workload, Layer
    >>> w = Workload(0.009, None, layers=[Layer("b", 100.0, "4ms", "2ms"), Layer("a", 300.0, "2ms", "1ms")])
    >>> s = stage_split(w, 2)
    >>> s.counts, [round(t, 9) for t in s.forward + s.backward], s.gradient_bytes   # stage 0 holds "a"
    ((1, 1), [0.001, 0.002, 0.002, 0.004], (300.0, 100.0))
    """

    counts: tuple[int, ...] | None
    forward: tuple[float, ...]
    backward: tuple[float, ...]
    gradient_bytes: tuple[float, ...]
    parameter_bytes: tuple[float, ...]
    note: str

    @property
    def stages(self) -> int:
        """Number of stages."""
        return len(self.forward)


def _layer_times(workload: Workload) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-layer forward and backward seconds in *forward* order, scaled so they add up to ``compute``."""
    layers = workload.layers
    assert layers is not None
    phases = workload.phase_times()
    bwd = np.array([layer.backward_time for layer in reversed(layers)], dtype=float)
    if phases.derived:
        # No forward times in the profile: the derived forward time is shared as the backward is.
        total_b = float(bwd.sum())
        fwd = (
            bwd * (phases.forward / total_b) if total_b > 0 else np.full(bwd.size, phases.forward / bwd.size)
        )
        how = "per-layer backward times; the derived forward time shared in proportion to them"
    else:
        fwd = np.array([layer.forward_time for layer in reversed(layers)], dtype=float)
        how = "per-layer forward and backward times"
    total = float(fwd.sum() + bwd.sum())
    compute = workload.compute_time
    if total <= 0:
        raise InvalidParameterError(
            "Workload.layers", "forward and backward times that are all 0", "some layer time > 0"
        )
    scale = compute / total
    if not math.isclose(scale, 1.0, rel_tol=1e-12):
        how += f", scaled by {scale:.6g} so that one micro-batch's forward + backward is compute"
    return fwd * scale, bwd * scale, how + f" ({phases.note})"


def stage_split(workload: Workload, stages: int, partition: Sequence[int] | str | None = None) -> StageSplit:
    """Split ``workload`` (one micro-batch through the whole model) into ``stages`` pipeline stages.

    With a per-layer profile the layers are taken in forward order (stage 0
    holds the first layers, the *end* of ``workload.layers``, which is in
    backward order). Each layer costs its forward and backward time, scaled
    together so that one micro-batch's forward + backward through all layers
    is ``workload.compute_time``; a backward-only profile shares the derived
    forward time (``Workload.phase_times``) in proportion to the layers'
    backward times. A stage's gradient bytes are the sum of its layers';
    its parameter bytes are those times ``parameter_bytes / gradient_bytes``
    (equal for a dense model).

    Without layers the model is split uniformly: every stage gets ``1/S`` of
    the compute, of which :data:`BACKWARD_SHARE` (2/3) is backward, and
    ``1/S`` of the bytes.

    Parameters
    ----------
    workload : Workload
    stages : int
    partition : None, "balanced" or sequence of int
        ``None``/``"balanced"``: :func:`balanced_partition` of the layers'
        forward + backward times; or the layers per stage in forward order
        (positive, adding up to the number of layers).

    Examples
    --------
    >>> from queuesgd import Workload, Layer
    >>> w = Workload(0.012, None, layers=[Layer("c", 1, "2ms", "1ms"), Layer("b", 2, "2ms", "1ms"),
    ...                                   Layer("a", 3, "4ms", "2ms")])
    >>> p = stage_split(w, 2)
    >>> p.counts, p.forward, p.backward, p.gradient_bytes
    ((1, 2), (0.002, 0.002), (0.004, 0.004), (3.0, 3.0))
    """
    S = _checks.integer("Pipeline.stages", stages, minimum=1)
    G, Pb = workload.gradient_bytes, workload.parameter_bytes
    if workload.layers is None:
        if partition is not None and not (isinstance(partition, str) and partition == "balanced"):
            raise InvalidParameterError(
                "Pipeline.partition", partition, "None or 'balanced' for a workload without layers"
            )
        c = workload.compute_time / S
        return StageSplit(
            None,
            (c * (1 - BACKWARD_SHARE),) * S,
            (c * BACKWARD_SHARE,) * S,
            (G / S,) * S,
            (Pb / S,) * S,
            "no per-layer profile: the model split uniformly, backward = 2 x forward",
        )
    fwd, bwd, note = _layer_times(workload)
    n = fwd.size
    if S > n:
        raise InvalidParameterError("Pipeline.stages", stages, f"at most the number of layers ({n})")
    if partition is None or (isinstance(partition, str) and partition == "balanced"):
        counts = balanced_partition(fwd + bwd, S)
        note = "balanced partition; " + note
    else:
        accepted = f"None, 'balanced', or {S} positive layer counts (forward order) adding up to {n}"
        if isinstance(partition, str) or not isinstance(partition, Sequence):
            raise InvalidParameterError("Pipeline.partition", partition, accepted)
        if len(partition) != S or any(
            isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in partition
        ):
            raise InvalidParameterError("Pipeline.partition", partition, accepted)
        if sum(int(k) for k in partition) != n:
            raise InvalidParameterError("Pipeline.partition", partition, accepted)
        counts = tuple(int(k) for k in partition)
        note = "given partition; " + note
    layers = tuple(reversed(workload.layers))
    grad = np.array([layer.gradient_bytes for layer in layers])
    edges = np.concatenate(([0], np.cumsum(counts)))
    fs = tuple(float(fwd[a:b].sum()) for a, b in zip(edges[:-1], edges[1:]))
    bs = tuple(float(bwd[a:b].sum()) for a, b in zip(edges[:-1], edges[1:]))
    gs = tuple(float(grad[a:b].sum()) for a, b in zip(edges[:-1], edges[1:]))
    return StageSplit(counts, fs, bs, gs, tuple(g * Pb / G for g in gs), note)
