"""HybridParallel's ``tp_overlap``: tensor-parallel collectives hidden behind the layer's GEMMs.

``tp_overlap`` takes ``False`` (default: every TP collective exposed), ``True``
(or ``"backward"``, its synonym, stored as ``True``) and ``"all"``.

**True: the backward's collectives behind the weight gradients.** Megatron-LM
(``--async-tensor-model-parallel-allreduce``, since 2021; with sequence
parallelism the overlapped reduce-scatter, Korthikanti et al. 2022, Section
4.2.2) starts, in the backward of each column-parallel linear (QKV and the
MLP's first product ``fc1``), the collective of its input gradient and
meanwhile computes that linear's weight gradient. The backward's two TP
collectives of a layer are exposed only as ``max(0, x - w)``: ``x`` the
collective (the all-reduce; with sequence parallelism the reduce-scatter, the
row-parallel linears' all-gathers of the output gradient staying exposed),
``w`` the weight-gradient product of the linear that issues it, ``w_qkv`` for
the attention block's, ``w_fc1`` for the MLP's. A weight-gradient product has
its forward product's volume: ``w`` is that forward product's time
(:func:`gemm_times`). The forward's collectives and those of a recomputed
forward stay exposed (:func:`exposed_per_layer`).

**"all": every TP collective pipelined with its GEMM** (Transformer Engine's
userbuffers TP communication overlap, Megatron-Core ``--tp-comm-overlap``,
torchtitan's async TP; needs sequence parallelism). Each layer's forward has
four collectives of the activations, each paired with the GEMM that consumes
or produces them: all-gather -> ``qkv``, ``proj`` -> reduce-scatter,
all-gather -> ``fc1`` (gated MLPs: the gate and up products together),
``fc2`` -> reduce-scatter. The GEMM and the ring exchange are split into
``t`` chunks and run as a two-stage pipeline (Wang et al., ASPLOS 2023,
"Overlap communication with dependent computation via decomposition"), so a
pair takes ``max(x, g) + min(x, g) / t`` and exposes
(:func:`pipelined_exposed`)::

    e(x, g, t) = max(0, x - g) + min(x, g) / t

``x`` the all-gather or reduce-scatter of ``A`` over the ``t`` ranks, ``g``
the GEMM's forward time (:func:`gemm_times`). The backward has the same four
pairs with the data-gradient GEMMs (the forward's volumes; the backward's
all-gathers and reduce-scatters taken as the forward's), a recomputed forward
(``recompute="full"``) a third set: per layer and micro-batch
(:func:`exposed_all_per_layer`)::

    (2, or 3 with full recomputation) x [e(ag, g_qkv) + e(rs, g_proj) + e(ag, g_fc1) + e(rs, g_fc2)]

It assumes the weight-gradient GEMMs are not used to hide anything (Transformer
Engine overlaps the backward's collectives with the data-gradient GEMMs), the
``t`` chunks equal, and NCCL's (or userbuffers') SMs not slowing the GEMMs.

Examples
--------
>>> round(float(exposed_per_layer(1.0, 1.0, 0.0, 0.4, 1.5, False)), 12)   # 2 forward + (1 - 0.4) + 0
2.6
>>> pipelined_exposed(1.0, 3.0, 4), pipelined_exposed(3.0, 1.0, 4)       # 1/4; 3 - 1 + 1/4
(0.25, 2.25)
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

__all__ = [
    "ALL_GEMMS",
    "TP_OVERLAP",
    "check_tp_overlap",
    "exposed_all_per_layer",
    "exposed_per_layer",
    "gemm_times",
    "pipelined_exposed",
    "scheme_exposed_per_layer",
    "tp_overlap_value",
    "wgrad_times",
]

#: ``tp_overlap``'s values (``"backward"`` is read as True), in the order of the vectorized codes 0, 1, 2.
TP_OVERLAP: tuple[bool | str, ...] = (False, True, "all")
#: The GEMMs of a layer's forward that ``"all"`` pairs with the all-gather, reduce-scatter, all-gather,
#: reduce-scatter of the activations (:meth:`~queuesgd.model_shapes.TransformerShape.operations`' names).
ALL_GEMMS: tuple[str, ...] = ("qkv", "proj", "fc1", "fc2")


def tp_overlap_value(value: Any, field: str = "HybridParallel.tp_overlap") -> bool | str:
    """``False``, ``True`` or ``"all"`` from a flag, ``"backward"`` (= True) or ``"all"`` (any case).

    Examples
    --------
    >>> tp_overlap_value("backward"), tp_overlap_value("ALL"), tp_overlap_value("off"), tp_overlap_value(1)
    (True, 'all', False, True)
    >>> tp_overlap_value("some")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.tp_overlap: got 'some'; accepted: False, True (or...
    """
    if isinstance(value, str) and value.strip().lower() in ("backward", "all"):
        return True if value.strip().lower() == "backward" else "all"
    try:
        return _checks.boolean(field, value)
    except InvalidParameterError:
        raise InvalidParameterError(
            field, value, "False, True (or 'backward': the backward's collectives behind the weight "
            "gradients) or 'all' (every TP collective pipelined with its GEMM, Transformer Engine's overlap)",
        ) from None  # fmt: skip


def check_tp_overlap(scheme: HybridParallel) -> None:
    """Validate ``tp_overlap`` (:func:`tp_overlap_value`); refused without a shape or with experts.

    ``"all"`` is refused also without sequence parallelism (its collectives are all-gathers and
    reduce-scatters). With ``t = 1`` there is no TP collective: True and ``"all"`` change nothing.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(tensor=8, tp_overlap=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.tp_overlap: got True; accepted: False without ...
    >>> HybridParallel(tensor=8, shape="2:1024:16:2048:51200", tp_overlap="all")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.tp_overlap: got 'all'; accepted: False or True ...
    """
    name = "HybridParallel.tp_overlap"
    value = tp_overlap_value(scheme.tp_overlap, name)
    object.__setattr__(scheme, "tp_overlap", value)
    if not value:
        return
    if scheme.shape is None:
        raise InvalidParameterError(
            name, value, "False without shape= (the products the collectives hide behind come from it)"
        )
    if value == "all" and not scheme.sequence_parallel:
        raise InvalidParameterError(
            name, value, "False or True without sequence_parallel=True (Transformer Engine's overlap "
            "pipelines the all-gathers and reduce-scatters of sequence parallelism with the GEMMs)",
        )  # fmt: skip


def gemm_times(
    shape: TransformerShape,
    microbatch: int,
    names: tuple[str, ...],
    *,
    tensor: int,
    sequence_parallel: bool,
    context: int,
    compute: float,
    model: ComputeModel | None = None,
    stretch: float = 1.0,
) -> tuple[float, ...]:
    """Seconds of a layer's forward products ``names`` (of :data:`ALL_GEMMS`): one micro-batch, one rank.

    With ``model`` (a compute model) each is its time
    (:meth:`~queuesgd.compute_model.ComputeModel.operation_times`) times
    ``stretch`` (the slowest GPU's factor); without, its FLOPs at the rate
    the workload implies, ``compute`` (one micro-batch's forward + backward
    on one GPU, stretched) over :func:`~queuesgd.model_shapes_attention.step_flops`,
    as the scheme turns FLOP shares into seconds. A weight-gradient or
    data-gradient product has its forward product's volume, so its time.

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(2, 1024, 16, 2048, 51200)
    >>> g = gemm_times(s, 1, ALL_GEMMS, tensor=2, sequence_parallel=True, context=1,
    ...                compute=step_flops(s, 1) / 1e14)                   # 1e14 FLOP/s
    >>> [round(x / (2 * 2048 * 1024 * 1024 / 2 / 1e14), 12) for x in g]   # 3h, h, 4h, 4h columns over h
    [3.0, 1.0, 4.0, 4.0]
    """
    ops = shape.operations(microbatch, tensor=tensor, sequence_parallel=sequence_parallel, context=context)
    chosen = [next(o for o in ops if o.name == name) for name in names]
    if model is None:
        rate = step_flops(shape, microbatch) / compute
        return tuple(o.flops / rate for o in chosen)
    return tuple(stretch * o.seconds for o in model.operation_times(chosen))


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

    Their forward products' times, :func:`gemm_times` of ``("qkv", "fc1")``.

    Examples
    --------
    >>> from queuesgd.model_shapes import TransformerShape
    >>> s = TransformerShape(2, 1024, 16, 2048, 51200)
    >>> w = wgrad_times(s, 1, tensor=2, sequence_parallel=False, context=1,
    ...                           compute=step_flops(s, 1) / 1e14)          # 1e14 FLOP/s
    >>> [round(x / (2 * 2048 * 1024 * n / 2 / 1e14), 12) for x, n in zip(w, (3 * 1024, 4 * 1024))]
    [1.0, 1.0]
    """
    kw = {"tensor": tensor, "sequence_parallel": sequence_parallel, "context": context, "compute": compute}
    w_qkv, w_fc1 = gemm_times(shape, microbatch, ("qkv", "fc1"), **kw, model=model, stretch=stretch)
    return w_qkv, w_fc1


def exposed_per_layer(
    one: Any,
    overlapped: Any,
    rest: Any,
    w_qkv: Any,
    w_fc1: Any,
    full: Any,
    maximum: Callable[[Any, Any], Any] | None = None,
    experts: bool = False,
) -> Any:
    """Exposed TP seconds of a layer and micro-batch: ``(2 or 4) one + 2 rest + sum max(0, overlapped - w)``.

    ``one`` a TP collective unit (the all-reduce, or reduce-scatter + all-gather
    with sequence parallelism), ``overlapped`` the part the column-parallel
    linear's backward issues (the all-reduce; the reduce-scatter), ``rest``
    ``one - overlapped`` (0; the all-gather), ``full`` full recomputation
    (its forward's two units exposed too). Works on floats, NumPy arrays
    (``full`` a bool array) and, with ``maximum=sympy.Max``, SymPy expressions.
    ``experts``: the MLP is a mixture of experts, whose collectives (Megatron-Core's
    token dispatcher's) hide behind none of its products: ``w_fc1`` counts as 0.

    Examples
    --------
    >>> float(exposed_per_layer(3.0, 2.0, 1.0, 5.0, 0.5, True))     # 4 x 3 + 2 x 1 + 0 + 1.5
    15.5
    """
    import numpy as np

    top = np.maximum if maximum is None else maximum
    w_fc1 = 0.0 * w_fc1 if experts else w_fc1
    forward = (4 if full else 2) if isinstance(full, bool) else np.where(full, 4, 2)
    return forward * one + 2 * rest + top(0, overlapped - w_qkv) + top(0, overlapped - w_fc1)


def pipelined_exposed(
    x: Any,
    g: Any,
    chunks: Any,
    maximum: Callable[[Any, Any], Any] | None = None,
    minimum: Callable[[Any, Any], Any] | None = None,
) -> Any:
    """Exposed communication of a collective ``x`` pipelined with a GEMM ``g`` in ``chunks``: ``e(x, g, t)``.

    ``max(0, x - g) + min(x, g) / chunks``: the pair takes ``max(x, g) + min(x, g) / chunks`` (a
    two-stage pipeline of equal chunks), of which ``g`` is the GEMM's. Floats, NumPy arrays or, with
    ``maximum=sympy.Max, minimum=sympy.Min``, SymPy expressions.

    Examples
    --------
    >>> pipelined_exposed(2.0, 6.0, 8), pipelined_exposed(6.0, 2.0, 8)    # 2/8; 6 - 2 + 2/8
    (0.25, 4.25)
    """
    import numpy as np

    top = np.maximum if maximum is None else maximum
    low = np.minimum if minimum is None else minimum
    out = top(0, x - g) + low(x, g) / chunks
    return float(out) if maximum is None and np.ndim(out) == 0 else out


def exposed_all_per_layer(
    ag: Any,
    rs: Any,
    g_qkv: Any,
    g_proj: Any,
    g_fc1: Any,
    g_fc2: Any,
    chunks: Any,
    full: Any,
    maximum: Callable[[Any, Any], Any] | None = None,
    minimum: Callable[[Any, Any], Any] | None = None,
    experts: bool = False,
) -> Any:
    """``tp_overlap="all"``'s exposed TP seconds of a layer and micro-batch (the module docstring).

    ``(2 or 3) [e(ag, g_qkv) + e(rs, g_proj) + e(ag, g_fc1) + e(rs, g_fc2)]`` with
    :func:`pipelined_exposed`, ``ag`` and ``rs`` the all-gather and reduce-scatter of the
    activations, ``g_*`` the four GEMMs' forward times, ``chunks`` ``t``, ``full`` full
    recomputation (a third set). Floats, NumPy arrays (``full`` a bool array) or SymPy.
    ``experts``: the MLP's collectives hide behind nothing (``g_fc1``, ``g_fc2`` count as 0),
    as in :func:`exposed_per_layer`.

    Examples
    --------
    >>> exposed_all_per_layer(1.0, 1.0, 3.0, 1.0, 4.0, 4.0, 4, False)     # 2 x 4 x 1/4
    2.0
    >>> exposed_all_per_layer(1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 2, True)      # 3 x 4 x (0.5 + 0.25)
    9.0
    """
    import numpy as np

    g_fc1, g_fc2 = (0.0 * g_fc1, 0.0 * g_fc2) if experts else (g_fc1, g_fc2)
    e = [pipelined_exposed(x, g, chunks, maximum, minimum) for x, g in ((ag, g_qkv), (rs, g_proj))]
    e += [pipelined_exposed(x, g, chunks, maximum, minimum) for x, g in ((ag, g_fc1), (rs, g_fc2))]
    sets = (3 if full else 2) if isinstance(full, bool) else np.where(full, 3, 2)
    return sets * (e[0] + e[1] + e[2] + e[3])


def scheme_exposed_per_layer(
    scheme: HybridParallel, microbatch: int, one: float, rs: float, ag: float, compute: float, stretch: float
) -> float:
    """The exposed TP seconds of a layer and micro-batch of ``scheme`` with ``tp_overlap`` on.

    ``one`` the TP collective unit (the all-reduce; reduce-scatter ``rs`` + all-gather ``ag``
    with sequence parallelism), ``compute`` and ``stretch`` as :func:`gemm_times` takes them.
    True: :func:`exposed_per_layer`; ``"all"``: :func:`exposed_all_per_layer` with ``t`` chunks.
    With experts the MLP's TP collectives hide behind nothing (its products are taken as 0 s):
    Megatron-Core's token dispatcher gathers the tokens over the TP group and scatters them back
    with plain collectives, outside the linear layers whose products the overlap uses; the
    attention's collectives overlap as without experts.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> s = HybridParallel(tensor=2, shape="2:1024:16:2048:51200", sequence_parallel=True, tp_overlap="all")
    >>> scheme_exposed_per_layer(s, 1, 0.0, 0.0, 0.0, 1.0, 1.0)          # nothing to expose
    0.0
    """
    kw: dict[str, Any] = {"tensor": scheme.tensor, "sequence_parallel": scheme.sequence_parallel}
    kw.update(context=scheme.context, compute=compute, model=scheme.compute_model, stretch=stretch)
    full = scheme.recompute == "full"
    moe = scheme.experts is not None
    if scheme.tp_overlap == "all":
        g = gemm_times(scheme.shape, microbatch, ALL_GEMMS, **kw)
        return exposed_all_per_layer(ag, rs, *g, scheme.tensor, full, max, min, experts=moe)
    w = wgrad_times(scheme.shape, microbatch, **kw)
    return exposed_per_layer(one, rs, one - rs, *w, full, max, experts=moe)
