"""HybridParallel's ``zero_overlap``: ZeRO-3's collectives prefetched behind the stage's compute.

With ``zero=3`` the scheme counts, per micro-batch, the shard's parameters
all-gathered twice (forward and backward) and its gradients reduce-scattered
once over the data-parallel group, exposed (Megatron SC'21's accounting):
``Z = 2 g + r`` per micro-batch, ``m Z`` per step (``details["dp_per_step"]``).
FSDP2 and DeepSpeed ZeRO-3 instead gather the next layer's parameters while
the current layer computes (forward and backward prefetch) and reduce-scatter
a layer's gradients while the next layer's backward runs. With
``HybridParallel(zero=3, zero_overlap=True)`` (off by default) one
micro-batch exposes::

    exposed = min(max(Z - C, 0) + z1, Z),        z1 = g / n

``C`` the micro-batch's compute on the stage as ``times()`` has it (forward +
backward + recomputation of its ``n = l / p`` layers, stretched by the
slowest GPU; *without* the output layer the last stage adds, so the bound is
that of the stages without it, the most exposed), ``z1`` one layer's forward
all-gather (the first layer's: nothing runs before it to hide it), taken as
the stage's gather over its ``n`` layers (the gather counted as one
collective, as ``Z`` is; its latency share is ``Z``'s). With experts ``g``
and ``r`` include the local experts' gather and reduce-scatter. The step
counts ``m`` times this (``details["dp_exposed_per_step"]``).

Two regimes: collectives shorter than compute (``Z <= C``) expose only
``z1``; longer, the collectives pace the micro-batch and ``Z - C + z1`` shows
(never more than ``Z``, the collectives without overlap: where the whole
compute is shorter than one layer's gather).
The bound assumes that the collectives and the compute share nothing
(separate CUDA streams, NVLink and InfiniBand not contended by the compute,
the kernels not slowed by NCCL's SMs) and that the compute is spread evenly
over the layers: it is optimistic where one layer's collectives exceed that
layer's compute while the stage's total does not (that layer then waits),
and it takes the last layer's reduce-scatter of a micro-batch as hidden behind
the next micro-batch (the step's last one too: one layer's reduce-scatter
per step not counted). Refused unless ``zero=3`` (ZeRO 0-2 reduce once per
step, after the pipeline flush: nothing to prefetch). ``formula()`` raises
:class:`~queuesgd.errors.NotRepresentable` for the throughput with it on.

Examples
--------
>>> exposed_per_microbatch(3.0, 1.0, 5.0, 4)      # Z <= C: one layer's gather, 1 / 4
0.25
>>> exposed_per_microbatch(3.0, 1.0, 2.0, 4)      # Z > C: 3 - 2 + 1 / 4
1.25
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["check_zero_overlap", "exposed_per_microbatch"]


def check_zero_overlap(scheme: HybridParallel) -> None:
    """Validate ``zero_overlap`` (a boolean) and refuse it unless ``zero=3``.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(zero=1, zero_overlap=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.zero_overlap: got True; accepted: False unless ...
    """
    name = "HybridParallel.zero_overlap"
    object.__setattr__(scheme, "zero_overlap", _checks.boolean(name, scheme.zero_overlap))
    if scheme.zero_overlap and scheme.zero != 3:
        raise InvalidParameterError(
            name, True, f"False unless zero=3 (got zero={scheme.zero}: its collectives run once per step, "
            "after the pipeline flush, with nothing to overlap)",
        )  # fmt: skip


def exposed_per_microbatch(total: Any, gather: Any, compute: Any, layers: Any) -> Any:
    """ZeRO-3's exposed seconds of one micro-batch: ``min(max(total - compute, 0) + gather / layers, total)``.

    ``total`` the micro-batch's ZeRO-3 collectives ``Z`` (two gathers and a
    reduce-scatter), ``gather`` one gather of the stage's shard ``g``,
    ``compute`` the stage's compute ``C``, ``layers`` its layers ``n``.
    Floats or NumPy arrays.

    Examples
    --------
    >>> import numpy as np
    >>> exposed_per_microbatch(np.array([3.0, 3.0, 3.0]), 1.0, np.array([5.0, 2.0, 0.1]), 1).tolist()
    [1.0, 2.0, 3.0]
    """
    import numpy as np

    out = np.minimum(np.maximum(total - compute, 0.0) + gather / layers, total)
    return float(out) if np.ndim(out) == 0 else out
