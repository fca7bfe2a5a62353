"""HybridParallel's checks across fields: its names, the schedule's ``p v m``, what a shape fixes.

Names (``schedule``, ``recompute``, the optimizer's) are read in any case,
surrounding spaces ignored (:mod:`queuesgd.name_checks`, the rule
:class:`~queuesgd.hybrid_space.HybridSpace` reads its axes by). The
interleaved schedule needs ``p > 1``, ``v >= 2`` (with one chunk per stage
Megatron-LM runs plain 1F1B: ``schedule="1f1b"``) and ``m`` a multiple of
``p``; the other schedules ``v = 1``.

With ``shape=`` the shape gives the layers, the heads and the hidden states:
``layers`` must be None or the shape's, ``p v`` must divide the layers
(without ``stage_layers``), ``t`` must divide the heads, the key-value heads
and the MLP's inner size, ``c`` the sequence, and ``hidden_bytes`` must stay
0. Without a shape, selective recomputation and context parallelism are
refused (their costs come from the shape), and a ``layers`` that is given
must be a multiple of ``p v`` (without ``stage_layers``); left out, the
scheme splits one abstract layer's compute evenly over the stages.

Examples
--------
>>> from queuesgd.schemes.parallel.hybrid import HybridParallel
>>> HybridParallel(pipeline=4, layers=8).layer_count
8
>>> HybridParallel(pipeline=8, layers=2)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: HybridParallel.layers: got 2; accepted: None, or a multiple of ...
>>> HybridParallel(shape="2:64:4:32:100", hidden_bytes="1MB")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: HybridParallel.hidden_bytes: got 1000000.0; accepted: 0 with shape= ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from queuesgd.errors import InvalidParameterError
from queuesgd.name_checks import name_choice
from queuesgd.schemes.memory import optimizer_field
from queuesgd.schemes.parallel.megatron import RECOMPUTE, SCHEDULES

if TYPE_CHECKING:
    from queuesgd.cluster import Cluster
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["check_layers_and_shape", "check_names", "check_no_random_stragglers", "check_schedule"]

N = "HybridParallel"


def check_names(scheme: HybridParallel) -> None:
    """Read ``schedule``, ``recompute`` and a named ``optimizer`` in any case, kept as listed.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> s = HybridParallel(schedule="GPipe", recompute="Full", optimizer="ADAM")
    >>> s.schedule, s.recompute, s.optimizer
    ('gpipe', 'full', 'adam')
    """
    set_ = object.__setattr__
    set_(scheme, "schedule", name_choice(f"{N}.schedule", scheme.schedule, SCHEDULES))
    set_(scheme, "recompute", name_choice(f"{N}.recompute", scheme.recompute, RECOMPUTE))
    set_(scheme, "optimizer", optimizer_field(f"{N}.optimizer", scheme.optimizer))


def check_schedule(scheme: HybridParallel) -> None:
    """``v = 1`` but interleaved; interleaved: ``p > 1``, ``m`` a multiple of ``p``, ``v >= 2``.

    Megatron-LM turns a virtual pipeline size of 1 into none and runs the
    schedule without interleaving (``megatron/training/arguments.py``,
    ``validate_args``); an interleaved row with ``v = 1`` here would take
    1F1B's time and price more activation memory than 1F1B holds.

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(pipeline=4, microbatches=8, schedule="interleaved")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.virtual_stages: got 1; accepted: an integer >= 2 ...
    """
    v = scheme.virtual_stages
    if scheme.schedule != "interleaved":
        if v != 1:
            raise InvalidParameterError(f"{N}.virtual_stages", v, "1 unless schedule='interleaved'")
        return
    if scheme.pipeline == 1:  # nothing to interleave: the step would be 1F1B's, v ignored
        accepted = "'1f1b' or 'gpipe' with pipeline=1 (interleaving needs stages)"
        raise InvalidParameterError(f"{N}.schedule", "interleaved", accepted)
    if scheme.microbatches % scheme.pipeline:
        raise InvalidParameterError(
            f"{N}.microbatches",
            scheme.microbatches,
            f"a multiple of pipeline (= {scheme.pipeline}) for the interleaved schedule (Megatron needs it)",
        )
    if v == 1:
        raise InvalidParameterError(
            f"{N}.virtual_stages",
            v,
            "an integer >= 2 with schedule='interleaved' (model chunks per stage; with one chunk Megatron-LM "
            "runs plain 1F1B: schedule='1f1b')",
        )


def check_layers_and_shape(scheme: HybridParallel) -> None:
    """Refuse the combinations of the module docstring, naming the field (``InvalidParameterError``).

    Examples
    --------
    >>> from queuesgd.schemes.parallel.hybrid import HybridParallel
    >>> HybridParallel(context=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridParallel.context: got 2; accepted: 1 without shape= ...
    """
    pv = scheme.pipeline * scheme.virtual_stages
    shape = scheme.shape
    if shape is None:
        _without_shape(scheme, pv)
        return
    if scheme.layers is not None and scheme.layers != shape.layers:
        raise InvalidParameterError(f"{N}.layers", scheme.layers, f"None or shape.layers ({shape.layers})")
    if scheme.stage_layers is None and shape.layers % pv:  # the shape fixes l: name p, or v if p divides l
        p, v, l = scheme.pipeline, scheme.virtual_stages, shape.layers
        if v > 1 and l % p == 0:
            accepted = f"a divisor >= 2 of the {l // p} layers per stage (the shape's l / p = {l} / {p})"
            raise InvalidParameterError(f"{N}.virtual_stages", v, accepted)
        raise InvalidParameterError(f"{N}.pipeline", p, f"p x v dividing the {l} layers (v = {v})")
    shape.check_tensor(scheme.tensor, f"{N}.tensor")  # heads, key-value heads, MLP inner size
    if shape.sequence % scheme.context:
        raise InvalidParameterError(
            f"{N}.context", scheme.context, f"a divisor of the sequence ({shape.sequence} tokens)"
        )
    if scheme.hidden_bytes:
        raise InvalidParameterError(
            f"{N}.hidden_bytes", scheme.hidden_bytes, "0 with shape= (the shape gives b s h x 2 bytes)"
        )


def _without_shape(scheme: HybridParallel, pv: int) -> None:
    if scheme.recompute == "selective":
        raise InvalidParameterError(
            f"{N}.recompute",
            "selective",
            "None or 'full' without shape= (the attention cores' share of the compute comes from the shape)",
        )
    if scheme.context != 1:
        raise InvalidParameterError(
            f"{N}.context", scheme.context, "1 without shape= (the key-value exchange comes from the shape)"
        )
    if scheme.layers is not None and scheme.stage_layers is None and scheme.layers % pv:
        raise InvalidParameterError(
            f"{N}.layers", scheme.layers, f"None, or a multiple of p x v (= {pv}) without stage_layers="
        )


def check_no_random_stragglers(cluster: Cluster) -> None:
    """Refuse a cluster with random stragglers: Megatron's closed form has the slowest GPU's speed only.

    Examples
    --------
    >>> from queuesgd import Cluster, RandomDelay
    >>> check_no_random_stragglers(Cluster(4, "1GB/s", stragglers=RandomDelay(1, "10ms")))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: Cluster.stragglers: got ...; accepted: None for HybridParallel ...
    """
    if cluster.stragglers is not None:
        raise InvalidParameterError(
            "Cluster.stragglers", cluster.stragglers, "None for HybridParallel (give speeds instead)"
        )
