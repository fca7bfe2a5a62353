"""HybridParallel's ``zero_overlap``: the data-parallel collectives overlapped with the stage's compute.

Without it the scheme counts the data-parallel collectives as exposed
(Megatron SC'21's accounting, ``details["dp_per_step"]``). With
``HybridParallel(zero_overlap=True)`` (off by default; every ZeRO stage) the
step counts only what the compute cannot hide (``details["dp_exposed_per_step"]``).
Every bound below has the form of :func:`exposed_per_microbatch`,
``min(max(X - K, 0) + x1, X)``: a collective (or set of collectives) ``X``
behind compute ``K``, of which the part ``x1`` that one layer needs before
(or issues after) all of the stage's compute can never hide. ``n = l / p``
is the stage's layers and ``compute`` one micro-batch's forward + backward
(+ recomputation) of its blocks as ``times()`` has it, stretched by the
slowest GPU, *without* the output layer the last stage adds (the bound is
that of the stages without it, the most exposed).

**ZeRO 0, 1, 2** (PyTorch DDP's buckets, Megatron-Core's
``--overlap-grad-reduce`` and ``--overlap-param-gather``). The gradient
collective ``R`` (ZeRO 0: the all-reduce; 1 and 2: the reduce-scatter) runs
bucket by bucket behind the backward of the step's *last* micro-batch on the
stage, ``B`` seconds; the last layer's bucket (the first layer's gradients,
``R / n``) is ready only when nothing computes any more::

    exposed_R = min(max(R - B, 0) + R / n, R)

With ZeRO 1 and 2 the updated parameters' all-gather ``Gth`` runs behind the
next step's *first* micro-batch forward, ``F`` seconds; its first layer's
parameters (``Gth / n``) are needed before anything computes::

    exposed_G = min(max(Gth - F, 0) + Gth / n, Gth)

``F`` and ``B = compute - F`` (the backward and any recomputed forward, which
runs in the backward) split one micro-batch's blocks: with a compute model
``F`` is :meth:`~queuesgd.compute_model.ComputeModel.block_parts`' forward of
a block times ``n`` (the backward twice it, more with flash attention), else
the workload's forward share of the blocks' compute (``forward_time`` over
``forward_time + backward_time`` where the workload has them, else the
scheme's rule, a third: the backward twice the forward). Earlier micro-batches'
backwards are not used: their gradients are not complete before the last
one's (accumulation over the micro-batches).

**ZeRO 3** (FSDP2, DeepSpeed ZeRO-3). The scheme counts, per micro-batch, the
shard's parameters all-gathered twice (forward and backward) and its
gradients reduce-scattered once, ``Z = 2 g + r`` per micro-batch, ``m Z``
per step. FSDP2 and DeepSpeed gather the next layer's parameters while the
current layer computes (forward and backward prefetch) and reduce-scatter a
layer's gradients while the next layer's backward runs; one micro-batch
exposes::

    exposed = min(max(Z - C, 0) + z1, Z),        z1 = g / n

``C`` the micro-batch's ``compute``, ``z1`` one layer's forward all-gather
(the first layer's: nothing runs before it to hide it), taken as the stage's
gather over its ``n`` layers (the gather counted as one collective, as ``Z``
is; its latency share is ``Z``'s). With experts ``g`` and ``r`` (and, for
ZeRO 0-2, ``R`` and ``Gth``) include the local experts' collectives. The step
counts ``m`` times this.

**ZeRO 3 with FSDP's ``BACKWARD_POST``** (``zero_overlap="post"``; ZeRO 0-2 read
it as ``True``). PyTorch FSDP (version 1) with ``backward_prefetch=BACKWARD_POST``
-- MosaicML Composer's default -- issues the next unit's all-gather in the
current unit's post-backward hook, after that unit's gradient reduce-scatter,
and both run on one NCCL communicator, in order: the next unit's backward
waits for both. The forward's gathers are prefetched as above. One
micro-batch then exposes the forward's bound for its gather and, in the
backward, the reduce-scatter and the backward's gather whole::

    exposed = min(max(g - F, 0) + g / n, g) + (Z - g),     Z - g = g + r

``F`` the micro-batch's forward. It bounds the exposure from above (full
serialization in the backward, none of it hidden by the host running
ahead), as ``True`` bounds it from below.

Two regimes everywhere: collectives shorter than the compute expose only
one layer's share; longer, the collectives pace the compute and ``X - K + x1``
shows (never more than ``X``, the collectives without overlap: where the
whole compute is shorter than one layer's share). The bounds assume that the
collectives and the compute share nothing (separate CUDA streams, NVLink and
InfiniBand not contended by the compute, the kernels not slowed by NCCL's
SMs) and that the compute and the collectives spread evenly over the layers:
they are optimistic where one layer's collectives exceed that layer's
compute while the stage's total does not (that layer then waits). ZeRO 3
takes the last layer's reduce-scatter of a micro-batch as hidden behind the
next micro-batch (the step's last one too: one layer's reduce-scatter per
step not counted). With ZeRO 0-2 the pipeline's cool-down (the other
stages' last backwards) is not used either: the bound is the stage's own.
Anything but a boolean or ``"post"`` is refused. ``formula()`` raises
:class:`~queuesgd.errors.NotRepresentable` for the throughput with it on.

Examples
--------
>>> exposed_per_microbatch(3.0, 1.0, 5.0, 4)      # Z <= C: one layer's gather, 1 / 4
0.25
>>> exposed_per_microbatch(3.0, 1.0, 2.0, 4)      # Z > C: 3 - 2 + 1 / 4
1.25
>>> exposed_per_step(1, 4, 0.0, 2.0, 1.0, 6.0, 2.0, 4)  # ZeRO 1: (2 - 4 -> 0) + 2/4, then 1 - 2 -> 0, + 1/4
0.75
>>> exposed_per_step(3, 2, 8.0, 0.0, 1.0, 9.0, 3.0, 4, post=True)  # 2 x ((1 - 3 -> 0) + 1/4 + (4 - 1))
6.5
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["check_zero_overlap", "exposed_per_microbatch", "exposed_per_step"]


def check_zero_overlap(scheme: HybridParallel) -> None:
    """Validate ``zero_overlap``: a boolean (every ZeRO stage takes it) or ``"post"`` (FSDP's BACKWARD_POST).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(zero=1, zero_overlap="on").zero_overlap
    True
    >>> HybridParallel(zero=3, zero_overlap="POST").zero_overlap
    'post'
    >>> HybridParallel(zero_overlap=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.zero_overlap: got 2; accepted: true, false ...
    """
    name, value = "HybridParallel.zero_overlap", scheme.zero_overlap
    if isinstance(value, str) and value.strip().lower() == "post":
        object.__setattr__(scheme, "zero_overlap", "post")
        return
    try:
        object.__setattr__(scheme, "zero_overlap", _checks.boolean(name, value))
    except InvalidParameterError:
        accepted = "true, false or 'post' (ZeRO 3 under FSDP's BACKWARD_POST: its backward exposed)"
        raise InvalidParameterError(name, value, accepted) from None


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


def exposed_per_step(
    zero: Any,
    microbatches: Any,
    total: Any,
    reduce: Any,
    gather: Any,
    compute: Any,
    forward: Any,
    layers: Any,
    *,
    post: bool = False,
) -> Any:
    """Exposed data-parallel seconds of one step with ``zero_overlap`` (the module docstring's bounds).

    ``zero`` the ZeRO stage, ``microbatches`` ``m``, ``total`` the step's
    collectives without overlap (ZeRO 3: ``m Z``), ``reduce`` the gradient
    collective ``R`` (the all-reduce, ZeRO 0; the reduce-scatter, 1-2),
    ``gather`` one all-gather of the parameters (ZeRO 1-3: ``Gth``, ``g``; 0
    for ZeRO 0), ``compute`` one micro-batch's compute on the stage, ``forward``
    its forward ``F`` (the backward ``B = compute - forward``), ``layers`` ``n``.
    ZeRO 0-2: ``exposed_R + exposed_G``; ZeRO 3: ``m`` times
    :func:`exposed_per_microbatch` of ``total / m`` (with ``post``, FSDP's
    BACKWARD_POST: ``m`` times the forward's gather bound plus ``total / m -
    gather``). Floats or NumPy arrays (``zero`` then an array of stages).

    Examples
    --------
    >>> exposed_per_step(0, 4, 3.0, 3.0, 0.0, 2.0, 0.5, 3)     # ZeRO 0: 3 - 1.5 + 3/3
    2.5
    >>> exposed_per_step(3, 2, 6.0, 1.0, 1.0, 5.0, 2.0, 4)     # ZeRO 3: 2 x (max(3 - 5, 0) + 1/4)
    0.5
    """
    import numpy as np

    once = exposed_per_microbatch(reduce, reduce, compute - forward, layers) + exposed_per_microbatch(
        gather, gather, forward, layers
    )
    if post:  # the forward's gather behind the forward; the backward's collectives exposed whole
        per = exposed_per_microbatch(gather, gather, forward, layers) + (total / microbatches - gather)
    else:
        per = exposed_per_microbatch(total / microbatches, gather, compute, layers)
    if np.ndim(zero) == 0:
        return microbatches * per if zero == 3 else once
    return np.where(np.asarray(zero) == 3, microbatches * per, once)
