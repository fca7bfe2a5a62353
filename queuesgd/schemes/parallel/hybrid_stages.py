"""HybridParallel's pipeline step from its stage times; uneven partitions of the layers (``stage_layers``).

Megatron-LM (``--decoder-first-pipeline-num-layers``,
``--decoder-last-pipeline-num-layers``) and DeepSpeed's pipeline engine
(``partition_method``) can give the pipeline stages unequal layer counts:
BLOOM-176B ran 70 layers on 12 stages as 5, 6 x 10, 5, the embedding and
the logit head each taking a layer's slot on the first and last stage.
``HybridParallel(stage_layers=(n_1, ..., n_p))`` (``sum n_i = l``) gives each
stage ``i`` the time ``tau_i = (n_i p / l) (compute + tp + cp + ep) + p2p``
of one micro-batch (its blocks, their collectives, and its sends, which do
not depend on its layers), the last stage the output layer besides, as a
forward and a backward pass (:func:`chunk_passes`, one chunk a stage, as
below), and the step the longest path through the schedule's order of
those passes (:func:`~.schedule_step.pass_time`; exact, as an event
simulation of GPipe and 1F1B with every stage's and every boundary's own
times gives, ``tests/schemes/test_stage_step.py``): GPipe ``sum f_i + (m -
1) max f_i + sum b_i + (m - 1) max b_i``, 1F1B the graph of its order.
Both are the textbook ``sum_i tau_i + (m - 1) max_i tau_i``
(:func:`~.megatron.stage_pipeline_time`, the step before) where the last
stage is the slowest forward and backward; where an earlier stage is the
slowest, 1F1B is below it (the later stages' fill and drain overlap its
warm-up), and GPipe above it where the slowest forward and the slowest
backward are on different stages (``details["slowest_stage"]`` says which
stage is the slowest). Each stage's memory counts its own ``n_i``
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
besides; :attr:`StepTimes.chunk_times`), as a forward and a backward pass
(:func:`chunk_passes`): the blocks' work split as the compute splits
(``StepTimes.forward``, the blocks' forward, over ``compute``: a third, or
the workload's forward share, less with recomputation, whose forward is in
the backward), a send each way (where the boundaries' prices differ,
:mod:`~.hybrid_sends`, each its own: ``StepTimes.sends``; such stages are
timed as these chunks too), the head a third forward.
The step (:func:`~.schedule_step.interleaved_pass_time`) is exact for these passes:

- where every chunk but the two end ones has the same passes, the first
  chunk's are not longer and the last's not shorter (even stages;
  head-slots when the head's passes are at least a layer's), the closed
  form (:func:`~.schedule_step.interleaved_chunk_time`)

      ``m (v c + h) + (p - 1) c - d``,

  ``c`` a middle chunk, ``d = c - c_00`` what the first chunk saves, ``h =
  c_last - c``;
- otherwise the longest path through Megatron-LM's order of the ``2 m v p``
  passes (:func:`~.interleaved_graph.interleaved_step`: each pass after its
  GPU's previous pass and its input, forwards stage to stage, backwards
  back; a graph of ``O(p^2 v)`` passes whatever ``m``).

Both equal a pass-by-pass simulation of Megatron-LM's interleaved order
(``tests/pipeline_schedule_sim.py``: warm-up ``2 (p - r - 1) + (v - 1) p``
forwards on GPU ``r``, then one forward and one backward, then the
cool-down) to ``1e-12``. The closed form alone, with ``e = max(0, c -
c_last)`` subtracted and ``c`` the largest chunk but the last, is an upper
bound elsewhere when every pass splits forward:backward alike (the step is a
max-plus function of the pass times: raising chunks can only lengthen it):
over ``p = 2..8``, ``v = 2..4``, ``m = p, 2p, 3p, 4p``, the first and the
last chunk one layer fewer, 2-4 layers a chunk, random sends and head (252
cases, ``tests/schemes/test_hybrid_interleaved_stages.py``) it was 0 to
+14.2% over (mean 0.8%; layers and head 1:2 with sends 1:1: 0 to +20.2%),
stages of unequal chunk sizes up to +17.3% (+25.4% off that grid: ``p = 3,
v = 2, m = 9``, ``stage_layers=(3, 2, 3)``), which is why the step no
longer uses it there; with passes that split unlike (the head's 1:2 against
the blocks' share) it is not even a bound. The even form's generalisation
``m max tau_i + (sum tau_i - max tau_i) / v`` is neither exact nor a bound
(-0.85% to +8.0% on that grid). The breakdown's waiting is the step less
``m max tau_i``; the reported bubble stays ``(p - 1)/(v m)``.

Examples
--------
>>> stage_layer_counts("stage_layers", "5:6:6:5", pipeline=4, layers=22, schedule="1f1b")
(5, 6, 6, 5)
>>> from dataclasses import replace
>>> tm = StepTimes(5.0, 1.0, 0.5, 0.0, 0.0, 4, 8, 1, {}, head=1.0, stages=(5 / 6, 7 / 6, 7 / 6, 5 / 6))
>>> [round(x, 9) for x in tm.stage_taus], round(tm.step, 9)      # 24 layers as 5, 7, 7, 5: under 27 + 7 x 7.5
([5.5, 7.5, 7.5, 6.5], 78.5)
>>> round(replace(tm, schedule="gpipe").step, 9)                   # 1F1B 1 s less; GPipe the textbook form
79.5
>>> chunk_layers((7, 8, 8, 7), 2)                                 # interleaved, v = 2
((3, 4), (4, 4), (4, 4), (4, 3))
>>> tm = StepTimes(7.5, 0.0, 0.2, 0.0, 0.0, 4, 8, 2, {}, head=0.5,
...                stages=(7 / 7.5, 8 / 7.5, 8 / 7.5, 7 / 7.5),
...                chunks=((3 / 7.5, 4 / 7.5), (4 / 7.5,) * 2, (4 / 7.5,) * 2, (4 / 7.5, 3 / 7.5)))
>>> [[round(x, 9) for x in row] for row in tm.chunk_times], round(tm.step, 9)   # head < a layer: the graph
([[3.1, 4.1], [4.1, 4.1], [4.1, 4.1], [4.1, 3.6]], 73.633333333)
>>> from queuesgd.schemes.parallel.schedule_step import interleaved_chunk_time
>>> round(interleaved_chunk_time(tm.chunk_times, 8), 9)               # the bound: 8 x 8.2 + 12.3 - 1 - 0.5
76.4
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.hybrid_passes import block_passes
from queuesgd.schemes.parallel.megatron import pipeline_time
from queuesgd.schemes.parallel.pipeline_stages import BACKWARD_SHARE
from queuesgd.schemes.parallel.schedule_step import interleaved_chunk_time, interleaved_pass_time, pass_time

if TYPE_CHECKING:
    from queuesgd.schemes.parallel.hybrid import HybridParallel

__all__ = [
    "StepTimes",
    "chunk_layers",
    "chunk_passes",
    "interleaved_chunk_time",  # re-exported: they live in schedule_step
    "interleaved_pass_time",
    "stage_chunks",
    "stage_layer_counts",
    "stage_shares",
]


@dataclass(frozen=True)
class StepTimes:
    """One configuration's seconds, per micro-batch on one GPU and per step.

    ``compute``, ``tp``, ``cp`` and ``ep`` are those of a stage of ``l / p``
    layers; ``stages`` (None: equal stages) each stage's layers over ``l / p``;
    ``chunks`` (None: not interleaved, or equal chunks sent alike) each chunk's;
    ``sends`` (None: ``p2p / 2 v`` each) each stage's ``v`` chunks' forward and
    backward message of one micro-batch where the boundaries' prices differ
    (:mod:`~.hybrid_sends`), ``p2p`` then the most a stage sends; ``forward``
    the blocks' forward on ``l / p`` layers (the chunks' passes, :func:`chunk_passes`).
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
    sends: tuple[tuple[tuple[float, float], ...], ...] | None = None  # each chunk's forward, backward message
    forward: float | None = None  # the blocks' forward (part of compute) on l / p layers; None: a third
    schedule: str = "1f1b"  # "1f1b" or "gpipe" (v = 1); v > 1: "interleaved"
    collectives_forward: float | None = None  # tp + cp + ep's in the forward (hybrid_passes); None: pro rata

    def _chunk_rows(self) -> tuple[tuple[float, ...], ...]:
        v = self.virtual
        return self.chunks or tuple((x / v,) * v for x in (self.stages or (1.0,) * self.pipeline))

    @property
    def messages(self) -> np.ndarray:
        """Each chunk's forward and backward message of one micro-batch, ``(p, v, 2)`` (else p2p / 2 v)."""
        if self.sends is not None:
            return np.asarray(self.sends, dtype=float)
        return np.full((self.pipeline, self.virtual, 2), self.p2p / (2 * self.virtual))

    @property
    def chunk_times(self) -> tuple[tuple[float, ...], ...]:
        """Each stage's ``v`` chunks' time of one micro-batch (``chunks``), the head in the last one.

        Without ``chunks`` each stage's ``v`` chunks are equal: ``1 / v`` of its
        layers (``stages``, or ``l / p`` each).
        """
        work = self.compute + self.tp + self.cp + self.ep
        out = (np.asarray(self._chunk_rows(), dtype=float) * work + self.messages.sum(axis=-1)).tolist()
        out[-1][-1] += self.head
        return tuple(tuple(row) for row in out)

    @property
    def forward_share(self) -> float:
        """The forward pass's share of the blocks' work: ``forward / compute`` (without ``forward``, 1/3)."""
        if self.forward is None or self.compute <= 0:
            return 1.0 - BACKWARD_SHARE
        return self.forward / self.compute

    @property
    def block_passes(self) -> tuple[float, float]:
        """The blocks' forward and backward pass on ``l / p`` layers (:func:`~.hybrid_passes.block_passes`).

        The collectives as each pass issues them (``collectives_forward``); without it, as the compute.
        """
        coll = self.tp + self.cp + self.ep
        cf = coll * self.forward_share if self.collectives_forward is None else self.collectives_forward
        return block_passes(self.compute, self.forward_share * self.compute, coll, cf)

    @property
    def chunk_passes(self) -> tuple[np.ndarray, np.ndarray]:
        """Each chunk's forward and backward pass of one micro-batch, ``(p, v)`` (:func:`chunk_passes`)."""
        return chunk_passes(self._chunk_rows(), *self.block_passes, self.messages, self.head)

    @cached_property
    def _pipe(self) -> float:
        """Unequal stages' pipeline: the longest path through the schedule's passes (:func:`pass_time`)."""
        sched = "interleaved" if self.virtual > 1 or self.chunks is not None else self.schedule
        return float(pass_time(*self.chunk_passes, self.microbatches, sched))

    @property
    def tau(self) -> float:
        """One micro-batch on a stage of ``l / p`` layers without the head."""
        return self.compute + self.tp + self.p2p + self.cp + self.ep

    @property
    def stage_taus(self) -> tuple[float, ...]:
        """Each stage's time of one micro-batch, the head on the last."""
        work = self.compute + self.tp + self.cp + self.ep
        if self.sends:
            rows = zip(self.stages or (1.0,) * self.pipeline, self.sends)
            out = [r * work + sum(f + b for f, b in ys) for r, ys in rows]
        else:
            out = [r * work + self.p2p for r in self.stages] if self.stages else [self.tau] * self.pipeline
        out[-1] += self.head
        return tuple(out)

    @property
    def even(self) -> bool:
        """Equal stages: neither ``stages`` nor ``sends`` (closed form :func:`~.megatron.pipeline_time`)."""
        return self.stages is None and self.sends is None

    @property
    def bubble(self) -> float:
        """The slowest stage's idle time: ``(p - 1) tau / v``; uneven, the pipeline less ``m max tau_i``."""
        if self.even:
            return (self.pipeline - 1) / self.virtual * self.tau
        return self._pipe - self.microbatches * max(self.stage_taus)

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
            send = sum(f + b for f, b in self.sends[k]) if self.sends else self.p2p
            compute = m * (r * self.compute + head)
            comm = m * (r * (self.tp + self.cp + self.ep) + send) + self.dp
        return {"compute": compute, "communication": comm, "waiting": self.bubble, "update": self.update}

    @property
    def step(self) -> float:
        if self.even:
            pipe = pipeline_time(self.tau, self.head, self.pipeline, self.microbatches, self.virtual)
        else:
            pipe = self._pipe
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


def chunk_passes(
    layers: Any, forward: Any, backward: Any, messages: Any, head: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Each chunk's forward and backward pass of one micro-batch (a stage's where ``v = 1``).

    Chunk ``(r, k)`` of ``x_rk`` (its layers over ``l / p``) takes ``x_rk
    forward`` and ``x_rk backward`` of blocks (``forward``, ``backward``: the
    two passes of ``l / p`` layers, compute and the collectives each issues,
    :func:`~.hybrid_passes.block_passes`), and its two messages
    (``messages[r][k]``: the activation it sends after its forward, the
    gradient after its backward, each priced by the boundary it crosses, 0
    where none is sent, :mod:`~.hybrid_sends`); the last GPU's last chunk adds
    the output layer ``head``, a third forward (``2 b s h V`` FLOPs, twice
    that backward). The two add up to :attr:`StepTimes.chunk_times`.

    Parameters
    ----------
    layers : array_like, shape (p, v) or (n, p, v)
        ``x_rk``.
    forward, backward, head : float or array_like of shape (n,)
        Per configuration; arrays give passes of shape ``(n, p, v)``.
    messages : array_like, shape (p, v, 2) or (n, p, v, 2)
        Each chunk's forward and backward message.

    Examples
    --------
    >>> f, b = chunk_passes([[0.5, 1.0], [1.0, 0.5]], 0.75, 2.25, [[[0.1, 0.0]] * 2, [[0.1, 0.4]] * 2], 0.9)
    >>> f.round(12).tolist(), b.round(12).tolist()          # GPU 1's gradients over a slower boundary
    ([[0.475, 0.85], [0.85, 0.775]], [[1.125, 2.25], [2.65, 2.125]])
    """
    x = np.asarray(layers, dtype=float)
    fw, bw, h = (np.asarray(a, dtype=float)[..., None, None] for a in (forward, backward, head))
    s = np.asarray(messages, dtype=float)
    tail = np.zeros(x.shape[-2:])
    tail[-1, -1] = 1.0
    fwd = x * fw + s[..., 0] + tail * h * (1.0 - BACKWARD_SHARE)
    bwd = x * bw + s[..., 1] + tail * h * BACKWARD_SHARE
    return fwd, bwd


def stage_shares(scheme: HybridParallel) -> tuple[float, ...] | None:
    """Each stage's layers over ``l / p``; None for equal stages (no ``stage_layers``, or all equal).

    Under the interleaved schedule equal counts whose chunks differ (:func:`chunk_layers`) are uneven.
    """
    counts = scheme.stage_layers
    if counts is None or (len(set(counts)) == 1 and stage_chunks(scheme) is None):
        return None
    mean = scheme.layer_count / scheme.pipeline
    return tuple(n / mean for n in counts)


def stage_chunks(scheme: HybridParallel, mixed: bool = False) -> tuple[tuple[float, ...], ...] | None:
    """Interleaved: each chunk's layers over ``l / p``; None where the chunks are equal (and not ``mixed``).

    ``mixed``: the boundaries are priced differently (:func:`~.hybrid_sends.stage_sends`), which makes
    equal chunks unequal stages, timed as such: their rows then too, ``1 / v`` each.
    """
    if scheme.schedule != "interleaved":
        return None
    p, v = scheme.pipeline, scheme.virtual_stages
    chunks = None if scheme.stage_layers is None else chunk_layers(scheme.stage_layers, v)
    if chunks is not None and len({x for row in chunks for x in row}) > 1:
        mean = scheme.layer_count / p
        return tuple(tuple(x / mean for x in row) for row in chunks)
    return tuple((1.0 / v,) * v for _ in range(p)) if mixed else None
