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
["slowest_stage"]`` says which). Each stage's memory counts its own ``n_i``
layers, and the memory per GPU is the busiest stage's (:mod:`~.hybrid_memory`);
the data-parallel collectives and the update stay those of
the model's average shard ``1 / (t p)`` (the shards differ by the layers
moved; not modelled). ``formula()`` has no uneven partitions (it raises
NotRepresentable); the vectorized planner has one layout, ``"head-slots"``
(the embedding and the head each a layer's slot: ``HybridSpace(layout=)``),
under every schedule.

The interleaved schedule (Llama 3 405B: 126 layers on 16 stages as 7, 8 x
14, 7). Each GPU ``r`` holds ``v`` chunks, virtual stages ``k p + r``
(Narayanan et al., SC 2021, Section 2.2.2). The rule
(:func:`chunk_layers`): stage ``i``'s ``n_i`` layers form ``v`` chunks of
``n_i / v`` where ``v`` divides ``n_i``; the first stage may hold one layer
less than a multiple ``k v``, its *first* chunk then ``k - 1``, and the last
stage likewise its *last* chunk, as Megatron-Core's
``account_for_embedding_in_pipeline_split`` and
``account_for_loss_in_pipeline_split`` shorten the first and the last
virtual stage (its ``--decoder-first/last-pipeline-num-layers`` give a whole
stage's chunks ``n_i / v`` each, the first case); every chunk keeps at least
one layer; other counts are refused. Chunk ``k`` of stage ``r`` takes
``c_rk = (n_rk p / l) work + p2p / v`` (the last stage's last the head
besides; :attr:`StepTimes.chunk_times`), and the step
(:func:`interleaved_chunk_time`) is

    ``m (v c + h) + (p - 1) c - d - e``,

``c`` the largest chunk but the last stage's last, ``d = c - c_00`` what the
first chunk saves, ``h = max(0, c_last - c)``, ``e = max(0, c - c_last)``.
Against a pass-by-pass simulation of Megatron-LM's interleaved order
(``tests/pipeline_schedule_sim.py``: warm-up ``2 (p - r - 1) + (v - 1) p``
forwards on GPU ``r``, then one forward and one backward, then the
cool-down; exact against ``(m + (p - 1)/v)(f + b)`` for even stages) it is
*exact* where every chunk but the two end ones takes ``c`` and ``e = 0``
(even stages; head-slots with the head at least one layer's time), for any
split of the passes between forward and backward, and an *upper bound*
otherwise when every pass splits alike (the step is a max-plus function of
the pass times: raising the chunks to that family can only lengthen it).
Measured (``tests/schemes/test_hybrid_interleaved_stages.py``): over ``p =
2..8``, ``v = 2..4``, ``m = p, 2p, 3p, 4p``, the first and the last chunk
one layer fewer, 2-4 layers a chunk, random sends and head (252 cases) the
error is 0 to +14.2% (mean 0.8%; layers and head 1:2 with sends 1:1: 0 to
+20.2%), at most +4.8% (+5.4%) for ``p >= 3`` (at ``p = 2`` no stage of
full chunks paces the pipeline, and the bound still takes ``v c``); any
chunks of the rule, stages of unequal chunk sizes: at most +17.3% on that grid (+25.4% found off it,
``p = 3, v = 2, m = 9``, ``stage_layers=(3, 2, 3)``; still an upper bound). The even
form's generalisation ``m max tau_i + (sum tau_i - max tau_i) / v`` is
neither exact nor a bound there (-0.85% to +8.0%). The breakdown's waiting
is the step less ``m max tau_i``; the reported bubble stays ``(p - 1)/(v
m)``.

Examples
--------
>>> stage_layer_counts("stage_layers", "5:6:6:5", pipeline=4, layers=22, schedule="1f1b")
(5, 6, 6, 5)
>>> tm = StepTimes(5.0, 1.0, 0.5, 0.0, 0.0, 4, 8, 1, {}, head=1.0, stages=(5 / 6, 7 / 6, 7 / 6, 5 / 6))
>>> [round(x, 9) for x in tm.stage_taus], round(tm.step, 9)      # 24 layers as 5, 7, 7, 5: 27 + 7 x 7.5
([5.5, 7.5, 7.5, 6.5], 79.5)
>>> chunk_layers((7, 8, 8, 7), 2)                                 # interleaved, v = 2
((3, 4), (4, 4), (4, 4), (4, 3))
>>> tm = StepTimes(7.5, 0.0, 0.2, 0.0, 0.0, 4, 8, 2, {}, head=0.5,
...                stages=(7 / 7.5, 8 / 7.5, 8 / 7.5, 7 / 7.5),
...                chunks=((3 / 7.5, 4 / 7.5), (4 / 7.5,) * 2, (4 / 7.5,) * 2, (4 / 7.5, 3 / 7.5)))
>>> [[round(x, 9) for x in row] for row in tm.chunk_times], round(tm.step, 9)   # 8 x 8.2 + 3 x 4.1 - 1 - 0.5
([[3.1, 4.1], [4.1, 4.1], [4.1, 4.1], [4.1, 3.6]], 76.4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.megatron import pipeline_time, stage_pipeline_time

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = [
    "StepTimes",
    "chunk_layers",
    "interleaved_chunk_time",
    "stage_chunks",
    "stage_layer_counts",
    "stage_shares",
]


@dataclass(frozen=True)
class StepTimes:
    """One configuration's seconds, per micro-batch on one GPU and per step.

    ``compute``, ``tp``, ``cp`` and ``ep`` are those of a stage of ``l / p``
    layers; ``stages`` (None: equal stages) each stage's layers over ``l / p``;
    ``sends`` (None: ``p2p / v`` each) each stage's ``v`` chunks' sends of one
    micro-batch where the boundaries' prices differ (:mod:`~.hybrid_sends`), ``p2p`` then the most a
    stage sends.
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
    chunks: tuple[tuple[float, ...], ...] | None = None  # interleaved: each chunk's layers over l / p
    sends: tuple[tuple[float, ...], ...] | None = None  # each stage's chunks' sends, unless all p2p / v

    @property
    def chunk_times(self) -> tuple[tuple[float, ...], ...]:
        """Each stage's ``v`` chunks' time of one micro-batch (``chunks``), the head in the last one.

        Without ``chunks`` each stage's ``v`` chunks are equal: ``1 / v`` of its
        layers (``stages``, or ``l / p`` each).
        """
        work, send = self.compute + self.tp + self.cp + self.ep, self.p2p / self.virtual
        v = self.virtual
        rows = self.chunks or tuple((x / v,) * v for x in (self.stages or (1.0,) * self.pipeline))
        sends = self.sends or tuple((send,) * v for _ in rows)
        out = [[x * work + y for x, y in zip(row, ys)] for row, ys in zip(rows, sends)]
        out[-1][-1] += self.head
        return tuple(tuple(row) for row in out)

    @property
    def tau(self) -> float:
        """One micro-batch on a stage of ``l / p`` layers without the head."""
        return self.compute + self.tp + self.p2p + self.cp + self.ep

    @property
    def stage_taus(self) -> tuple[float, ...]:
        """Each stage's time of one micro-batch, the head on the last."""
        work = self.compute + self.tp + self.cp + self.ep
        if self.sends:
            out = [r * work + sum(ys) for r, ys in zip(self.stages or (1.0,) * self.pipeline, self.sends)]
        else:
            out = [r * work + self.p2p for r in self.stages] if self.stages else [self.tau] * self.pipeline
        out[-1] += self.head
        return tuple(out)

    @property
    def even(self) -> bool:
        """Equal stages: neither ``stages`` nor ``sends`` (closed form :func:`~.megatron.pipeline_time`)."""
        return self.stages is None and self.sends is None

    @property
    def chunked(self) -> bool:
        """Unequal chunks under the interleaved schedule (:func:`interleaved_chunk_time`)."""
        return self.chunks is not None or (self.sends is not None and self.virtual > 1)

    @property
    def bubble(self) -> float:
        """The slowest stage's idle time: ``(p - 1) tau / v``; ``sum tau_i - max tau_i`` if uneven."""
        if self.even:
            return (self.pipeline - 1) / self.virtual * self.tau
        taus = self.stage_taus
        if self.chunked:
            return interleaved_chunk_time(self.chunk_times, self.microbatches) - self.microbatches * max(taus)
        return sum(taus) - max(taus)

    @property
    def slowest(self) -> int:
        """The slowest stage (the last of equals): it paces the pipeline."""
        taus = self.stage_taus
        return max(range(len(taus)), key=lambda i: (taus[i], i))

    def breakdown(self) -> dict[str, float]:
        """The slowest stage's step: its compute, its communication (and the step's data-parallel), idle."""
        m = self.microbatches
        if self.even:
            compute = m * (self.compute + self.head)
            comm = m * (self.tp + self.p2p + self.cp + self.ep) + self.dp
        else:
            k = self.slowest
            r, head = (self.stages or (1.0,) * self.pipeline)[k], self.head if k == self.pipeline - 1 else 0.0
            send = sum(self.sends[k]) if self.sends else self.p2p
            compute = m * (r * self.compute + head)
            comm = m * (r * (self.tp + self.cp + self.ep) + send) + self.dp
        return {"compute": compute, "communication": comm, "waiting": self.bubble, "update": self.update}

    @property
    def step(self) -> float:
        if self.even:
            pipe = pipeline_time(self.tau, self.head, self.pipeline, self.microbatches, self.virtual)
        elif self.chunked:
            pipe = interleaved_chunk_time(self.chunk_times, self.microbatches)
        else:
            pipe = stage_pipeline_time(self.stage_taus, self.microbatches)
        return pipe + self.dp + self.update


def stage_layer_counts(
    field: str, value: Any, *, pipeline: int, layers: int, schedule: str, virtual: int = 1
) -> Any:
    """``stage_layers``: None, or ``p`` layer counts >= 1 summing to ``l`` (on a command line ``5:6:6:5``).

    With the interleaved schedule each count must split into the ``v``
    chunks of :func:`chunk_layers`. Equal counts (and equal chunks) are kept
    (the step is then the equal stages' form, bit for bit).

    Examples
    --------
    >>> stage_layer_counts("s", [3, 4, 3], pipeline=3, layers=10, schedule="gpipe")
    (3, 4, 3)
    >>> stage_layer_counts("s", (3, 4), pipeline=3, layers=7, schedule="1f1b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: s: got (3, 4); accepted: None, or 3 layer counts >= 1 ...
    >>> stage_layer_counts("s", "7:8:8:7", pipeline=4, layers=30, schedule="interleaved", virtual=4)
    (7, 8, 8, 7)
    >>> stage_layer_counts("s", "6:9:9:6", pipeline=4, layers=30, schedule="interleaved", virtual=2)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: s: got '6:9:9:6'; accepted: ... a multiple of v = 2 ...
    """
    if value is None:
        return None
    accepted = (
        f"None, or {pipeline} layer counts >= 1 (one per pipeline stage) summing to the {layers} layers, "
        "e.g. (5, 6, 6, 5) (on a command line 5:6:6:5)"
    )
    counts = value
    if isinstance(value, str):
        if value.strip().lower() == "none":
            return None
        counts = _checks.colon_counts(value)
        if counts is None:
            raise InvalidParameterError(field, value, accepted)
    try:
        counts = _checks.integers(field, counts, maximum=_checks.MAX_COUNT)
    except InvalidParameterError:
        raise InvalidParameterError(field, value, accepted) from None
    if len(counts) != pipeline or sum(counts) != layers:
        raise InvalidParameterError(field, value, accepted)
    if schedule == "interleaved" and chunk_layers(counts, virtual) is None:
        end = (2 * virtual - 1,) * (pipeline > 1)
        example = end + (2 * virtual,) * (pipeline - 2 * (pipeline > 1)) + end
        raise InvalidParameterError(
            field,
            value,
            f"with schedule='interleaved', counts that split into v = {virtual} chunks of at least one "
            f"layer: each a multiple of v = {virtual} (n / v each), the first and the last (p > 1) also "
            "one less than a multiple of v (their first, resp. last, chunk one layer fewer), e.g. "
            f"{example}",
        )
    return counts


def chunk_layers(counts: Any, virtual: int) -> tuple[tuple[int, ...], ...] | None:
    """Each stage's ``v`` model chunks' layers under the interleaved schedule; None if they do not split.

    Stage ``i``'s ``n_i`` layers form ``v`` chunks of ``n_i / v`` where ``v``
    divides ``n_i``; the first stage may hold one layer less than a multiple
    ``k v``, its *first* chunk then ``k - 1`` (the embedding's slot), and the
    last stage likewise its *last* chunk (the output layer's slot), as
    Megatron-Core's ``account_for_embedding_in_pipeline_split`` /
    ``account_for_loss_in_pipeline_split`` shorten the first and the last
    virtual stage; every chunk at least one layer.

    Examples
    --------
    >>> chunk_layers((7, 8, 8, 7), 2)                    # Llama 3 405B's ends, 30 layers here
    ((3, 4), (4, 4), (4, 4), (4, 3))
    >>> chunk_layers((6, 9, 9, 6), 3), chunk_layers((1, 3, 2), 2)
    (((2, 2, 2), (3, 3, 3), (3, 3, 3), (2, 2, 2)), None)
    """
    v, p = int(virtual), len(counts)
    out = []
    for i, n in enumerate(counts):
        k = (n + 1) // v
        if n % v == 0:
            out.append((n // v,) * v)
        elif p > 1 and i in (0, p - 1) and (n + 1) % v == 0 and k >= 2:
            out.append((k - 1,) + (k,) * (v - 1) if i == 0 else (k,) * (v - 1) + (k - 1,))
        else:
            return None
    return tuple(out)


def interleaved_chunk_time(chunks: Any, microbatches: int) -> float:
    """Interleaved 1F1B of ``m`` micro-batches through chunks of times ``c_rk``: an upper bound.

    ``chunks[r][k]``: one micro-batch's forward + backward through device
    ``r``'s chunk ``k`` (``p >= 2``). With ``c`` the largest chunk but the
    last device's last, ``d = c - c_00`` what the first chunk saves, and the
    last chunk ``c_last = c + h`` (``h >= 0``) or ``c - e`` (``e >= 0``), the
    step is at most ``m (v c + h) + (p - 1) c - d - e``: exact when every
    other chunk takes ``c`` and ``e = 0`` (:mod:`this module <.hybrid_stages>`
    says why and by how much otherwise).

    Examples
    --------
    >>> interleaved_chunk_time([[1.0, 1.0]] * 4, 8)          # even: (m + (p - 1)/v) v c
    19.0
    >>> interleaved_chunk_time([[0.75, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.5]], 8)   # 8 x 2.5 + 3 - 0.25
    22.75
    """
    p, v, m = len(chunks), len(chunks[0]), microbatches
    last = chunks[-1][-1]
    c = max(x for r, row in enumerate(chunks) for k, x in enumerate(row) if (r, k) != (p - 1, v - 1))
    return m * (v * c + max(0.0, last - c)) + (p - 1) * c - (c - chunks[0][0]) - max(0.0, c - last)


def stage_shares(scheme: HybridParallel) -> tuple[float, ...] | None:
    """Each stage's layers over ``l / p``; None for equal stages (no ``stage_layers``, or all equal).

    Under the interleaved schedule equal counts whose chunks differ (:func:`chunk_layers`) are uneven.
    """
    counts = scheme.stage_layers
    if counts is None or (len(set(counts)) == 1 and stage_chunks(scheme) is None):
        return None
    mean = scheme.layer_count / scheme.pipeline
    return tuple(n / mean for n in counts)


def stage_chunks(scheme: HybridParallel) -> tuple[tuple[float, ...], ...] | None:
    """Interleaved with ``stage_layers``: each chunk's layers over ``l / p``; None if the chunks are equal."""
    if scheme.stage_layers is None or scheme.schedule != "interleaved":
        return None
    chunks = chunk_layers(scheme.stage_layers, scheme.virtual_stages)
    if chunks is None or len({x for row in chunks for x in row}) == 1:
        return None
    mean = scheme.layer_count / scheme.pipeline
    return tuple(tuple(x / mean for x in row) for row in chunks)
