"""HybridParallel's ``tp_overlap``: the backward's tensor-parallel collectives hidden behind weight gradients.

Megatron-LM (``--async-tensor-model-parallel-allreduce``, since 2021; with
sequence parallelism the overlapped reduce-scatter, Korthikanti et al. 2022,
Section 4.2.2) starts, in the backward of each column-parallel linear (QKV
and the MLP's first product ``fc1``), the collective of its input gradient
and meanwhile computes that linear's weight gradient; Transformer Engine's
TP communication overlap does the same. With ``HybridParallel(tp_overlap=True)``
the backward's two TP collectives of a layer are exposed only as
``max(0, x - w)``: ``x`` the collective (the all-reduce; with sequence
parallelism the reduce-scatter, the row-parallel linears' all-gathers of the
output gradient staying exposed), ``w`` the weight-gradient product of the
linear that issues it, ``w_qkv`` for the attention block's, ``w_fc1`` for the
MLP's. A weight-gradient product has its forward product's volume: ``w`` is
that forward product's time (:func:`wgrad_times`). The forward's
collectives and those of a recomputed forward stay exposed.

Examples
--------
>>> round(float(exposed_per_layer(1.0, 1.0, 0.0, 0.4, 1.5, False)), 12)   # 2 forward + (1 - 0.4) + 0
2.6
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes_attention import step_flops

if TYPE_CHECKING:
    from queuesgd.compute_model import ComputeModel
    from queuesgd.model_shapes import TransformerShape
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["check_tp_overlap", "exposed_per_layer", "wgrad_times"]


def check_tp_overlap(scheme: HybridParallel) -> None:
    """Validate ``tp_overlap`` (a boolean); True is refused without a shape or with experts.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(tensor=8, tp_overlap=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.tp_overlap: got True; accepted: False without ...
    """
    name = "HybridParallel.tp_overlap"
    object.__setattr__(scheme, "tp_overlap", _checks.boolean(name, scheme.tp_overlap))
    if not scheme.tp_overlap:
        return
    if scheme.shape is None:
        raise InvalidParameterError(
            "HybridParallel.tp_overlap",
            True,
            "False without shape= (the weight-gradient products the collectives hide behind come from it)",
        )
    if scheme.experts is not None:
        raise InvalidParameterError(
            "HybridParallel.tp_overlap",
            True,
            "False with experts= (the experts' weight-gradient products are not modelled)",
        )


def wgrad_times(
    shape: TransformerShape,
    microbatch: int,
    *,
    tensor: int,
    sequence_parallel: bool,
    context: int,
    compute: float,
    model: ComputeModel | None = None,
    stretch: float = 1.0,
) -> tuple[float, float]:
    """Seconds of the weight-gradient products of QKV and of ``fc1``: one layer, one micro-batch, one rank.

    With ``model`` (a compute model) each is its forward product's time
    (:meth:`~queuesgd.compute_model.ComputeModel.operation_times`) times
    ``stretch`` (the slowest GPU's factor); without, its FLOPs at the rate
    the workload implies, ``compute`` (one micro-batch's forward + backward
    on one GPU, stretched) over :func:`~queuesgd.model_shapes_attention.step_flops`,
    as the scheme turns FLOP shares into seconds.

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(2, 1024, 16, 2048, 51200)
    >>> w = wgrad_times(s, 1, tensor=2, sequence_parallel=False, context=1,
    ...                           compute=step_flops(s, 1) / 1e14)          # 1e14 FLOP/s
    >>> [round(x / (2 * 2048 * 1024 * n / 2 / 1e14), 12) for x, n in zip(w, (3 * 1024, 4 * 1024))]
    [1.0, 1.0]
    """
    ops = shape.operations(microbatch, tensor=tensor, sequence_parallel=sequence_parallel, context=context)
    qkv, fc1 = (next(o for o in ops if o.name == name) for name in ("qkv", "fc1"))
    if model is None:
        rate = step_flops(shape, microbatch) / compute
        return qkv.flops / rate, fc1.flops / rate
    w_qkv, w_fc1 = (o.seconds for o in model.operation_times((qkv, fc1)))
    return stretch * w_qkv, stretch * w_fc1


def exposed_per_layer(
    one: Any,
    overlapped: Any,
    rest: Any,
    w_qkv: Any,
    w_fc1: Any,
    full: Any,
    maximum: Callable[[Any, Any], Any] | None = None,
) -> Any:
    """Exposed TP seconds of a layer and micro-batch: ``(2 or 4) one + 2 rest + sum max(0, overlapped - w)``.

    ``one`` a TP collective unit (the all-reduce, or reduce-scatter + all-gather
    with sequence parallelism), ``overlapped`` the part the column-parallel
    linear's backward issues (the all-reduce; the reduce-scatter), ``rest``
    ``one - overlapped`` (0; the all-gather), ``full`` full recomputation
    (its forward's two units exposed too). Works on floats, NumPy arrays
    (``full`` a bool array) and, with ``maximum=sympy.Max``, SymPy expressions.

    Examples
    --------
    >>> float(exposed_per_layer(3.0, 2.0, 1.0, 5.0, 0.5, True))     # 4 x 3 + 2 x 1 + 0 + 1.5
    15.5
    """
    import numpy as np

    top = np.maximum if maximum is None else maximum
    forward = (4 if full else 2) if isinstance(full, bool) else np.where(full, 4, 2)
    return forward * one + 2 * rest + top(0, overlapped - w_qkv) + top(0, overlapped - w_fc1)
