"""HybridParallel's pipeline step from its stage times; uneven partitions of the layers (``stage_layers``).

Megatron-LM (``--decoder-first-pipeline-num-layers``,
``--decoder-last-pipeline-num-layers``) and DeepSpeed's pipeline engine
(``partition_method``) can give the pipeline stages unequal layer counts:
BLOOM-176B ran 70 layers on 12 stages as 5, 6 x 10, 5, the embedding and
the logit head each taking a layer's slot on the first and last stage.
``HybridParallel(stage_layers=(n_1, ..., n_p))`` (``sum n_i = l``) gives each
stage ``i`` the time ``tau_i = (n_i p / l) (compute + tp + cp + ep) + p2p``
of one micro-batch (its blocks, their collectives, and its sends, which do
not depend on its layers), the last stage the output layer besides, and the
step ``sum_i tau_i + (m - 1) max_i tau_i``
(:func:`~.megatron.stage_pipeline_time`): exact when the last stage is the
slowest, an upper bound under 1F1B when an earlier one is (``details
["slowest_stage"]`` says which). Only GPipe and 1F1B: the interleaved
schedule is refused (its uneven form is not derived here). The first stage's
memory counts its own ``n_1`` layers; the data-parallel collectives and the
update stay those of the model's average shard ``1 / (t p)`` (the shards
differ by the layers moved; not modelled). ``formula()`` has no uneven
partitions; the vectorized planner has one layout, ``"head-slots"`` (the
embedding and the head each a layer's slot: ``HybridSpace(layout=)``).

Examples
--------
>>> stage_layer_counts("stage_layers", "5:6:6:5", pipeline=4, layers=22, schedule="1f1b")
(5, 6, 6, 5)
>>> tm = StepTimes(5.0, 1.0, 0.5, 0.0, 0.0, 4, 8, 1, {}, head=1.0, stages=(5 / 6, 7 / 6, 7 / 6, 5 / 6))
>>> [round(x, 9) for x in tm.stage_taus], round(tm.step, 9)      # 24 layers as 5, 7, 7, 5: 27 + 7 x 7.5
([5.5, 7.5, 7.5, 6.5], 79.5)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.megatron import pipeline_time, stage_pipeline_time

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = ["StepTimes", "first_stage_layers", "stage_layer_counts", "stage_shares"]


@dataclass(frozen=True)
class StepTimes:
    """One configuration's seconds, per micro-batch on one GPU and per step.

    ``compute``, ``tp``, ``cp`` and ``ep`` are those of a stage of ``l / p``
    layers; ``stages`` (None: equal stages) each stage's layers over ``l / p``.
    """

    compute: float  # forward + backward + recomputation of one micro-batch
    tp: float  # tensor-parallel collectives of one micro-batch
    p2p: float  # pipeline sends of one micro-batch
    dp: float  # data-parallel collectives of one step
    update: float
    pipeline: int
    microbatches: int
    virtual: int
    algorithms: dict[str, str]
    cp: float = 0.0  # context-parallel K/V collectives of one micro-batch
    ep: float = 0.0  # expert-parallel all-to-alls of one micro-batch
    head: float = 0.0  # the output layer's compute, which the last stage adds to each micro-batch
    stages: tuple[float, ...] | None = None  # each stage's layers over l / p (uneven partitions)

    @property
    def tau(self) -> float:
        """One micro-batch on a stage of ``l / p`` layers without the head."""
        return self.compute + self.tp + self.p2p + self.cp + self.ep

    @property
    def stage_taus(self) -> tuple[float, ...]:
        """Each stage's time of one micro-batch, the head on the last."""
        work = self.compute + self.tp + self.cp + self.ep
        out = [r * work + self.p2p for r in self.stages] if self.stages else [self.tau] * self.pipeline
        out[-1] += self.head
        return tuple(out)

    @property
    def bubble(self) -> float:
        """The slowest stage's idle time: ``(p - 1) tau / v``; ``sum tau_i - max tau_i`` if uneven."""
        if self.stages is None:
            return (self.pipeline - 1) / self.virtual * self.tau
        taus = self.stage_taus
        return sum(taus) - max(taus)

    @property
    def slowest(self) -> int:
        """The slowest stage (the last of equals): it paces the pipeline."""
        taus = self.stage_taus
        return max(range(len(taus)), key=lambda i: (taus[i], i))

    def breakdown(self) -> dict[str, float]:
        """The slowest stage's step: its compute, its communication (and the step's data-parallel), idle."""
        m = self.microbatches
        if self.stages is None:
            compute = m * (self.compute + self.head)
            comm = m * (self.tp + self.p2p + self.cp + self.ep) + self.dp
        else:
            k = self.slowest
            r, head = self.stages[k], self.head if k == self.pipeline - 1 else 0.0
            compute = m * (r * self.compute + head)
            comm = m * (r * (self.tp + self.cp + self.ep) + self.p2p) + self.dp
        return {"compute": compute, "communication": comm, "waiting": self.bubble, "update": self.update}

    @property
    def step(self) -> float:
        if self.stages is None:
            pipe = pipeline_time(self.tau, self.head, self.pipeline, self.microbatches, self.virtual)
        else:
            pipe = stage_pipeline_time(self.stage_taus, self.microbatches)
        return pipe + self.dp + self.update


def stage_layer_counts(field: str, value: Any, *, pipeline: int, layers: int, schedule: str) -> Any:
    """``stage_layers``: None, or ``p`` layer counts >= 1 summing to ``l`` (on a command line ``5:6:6:5``).

    Refused for the interleaved schedule. Equal counts are kept (the step is
    then the equal stages' form, bit for bit).

    Examples
    --------
    >>> stage_layer_counts("s", [3, 4, 3], pipeline=3, layers=10, schedule="gpipe")
    (3, 4, 3)
    >>> stage_layer_counts("s", (3, 4), pipeline=3, layers=7, schedule="1f1b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: s: got (3, 4); accepted: None, or 3 layer counts >= 1 ...
    """
    if value is None:
        return None
    accepted = (
        f"None, or {pipeline} layer counts >= 1 (one per pipeline stage) summing to the {layers} layers, "
        "e.g. (5, 6, 6, 5) (on a command line 5:6:6:5)"
    )
    counts = value
    if isinstance(value, str):
        parts = value.strip().split(":")
        if value.strip().lower() == "none":
            return None
        if not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 7 for p in parts):
            raise InvalidParameterError(field, value, accepted)
        counts = [int(p) for p in parts]
    try:
        counts = _checks.integers(field, counts, maximum=_checks.MAX_COUNT)
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None
    if len(counts) != pipeline or sum(counts) != layers:
        raise InvalidParameterError(field, value, accepted)
    if schedule == "interleaved":
        raise InvalidParameterError(
            field, value, "None with schedule='interleaved' (uneven stages: GPipe and 1F1B only)"
        )
    return counts


def stage_shares(scheme: HybridParallel) -> tuple[float, ...] | None:
    """Each stage's layers over ``l / p``; None for equal stages (no ``stage_layers``, or all equal)."""
    counts = scheme.stage_layers
    if counts is None or len(set(counts)) == 1:
        return None
    mean = scheme.layer_count / scheme.pipeline
    return tuple(n / mean for n in counts)


def first_stage_layers(scheme: HybridParallel) -> float:
    """The first stage's layers: ``stage_layers[0]``, else ``l / p``."""
    if scheme.stage_layers is None:
        return scheme.layer_count / scheme.pipeline
    return float(scheme.stage_layers[0])
