"""Hybrid (3D) parallelism as Megatron-LM runs it: tensor x pipeline x data, with ZeRO and recomputation.

``t`` tensor-parallel ranks split every transformer layer, ``p`` pipeline
stages split the layers, ``d`` data-parallel replicas split the batch:
``workers = t p d``. The model is Megatron's own analysis (Narayanan et al.,
SC 2021; Korthikanti et al., 2022), as a closed form; every assumption
(``docs/schemes/hybrid.md`` says the same):

1. **Workload.** As :class:`~queuesgd.Pipeline`: the workload profiles one
   micro-batch of ``batch_size`` samples through the *whole* model on one
   GPU (``compute``: forward + backward; forward the layers' share where
   they have forward times, else a third; ``update_time`` the whole
   model's optimizer step). A :class:`~queuesgd.model_shapes.TransformerShape`
   (``shape=``) gives the layers ``l``, the tensor-parallel message ``A = b s h``
   x 2 bytes (``b = batch_size``) and the activations; without one,
   ``layers`` and ``hidden_bytes`` give ``l`` and ``A`` (and activation
   memory is not counted).
2. **Compute** splits the blocks evenly and puts the output layer on the
   last stage: one micro-batch costs each GPU ``C (1 - H) / (t p)`` for its
   ``l / p`` blocks, and the last stage ``C H / t`` more (``H`` the logits'
   share of the model's FLOPs, :func:`~.megatron.head_share`: ``2 b s h V``
   forward, twice that backward, vocabulary-parallel over ``t``; zero
   without a shape, then every stage is equal). The first stage's embedding
   lookup is not counted. Recomputation adds the blocks' forward
   (``"full"``; the output layer is not recomputed, eq. 3) or the attention
   cores' forward (``"selective"``: ``4 b s^2 h`` FLOPs per layer, their
   share of the model's FLOPs times ``C``; none with flash attention:
   :func:`~.megatron.selective_share`). Compute is taken at its mean,
   paced by the slowest GPU (``1 / min(speeds)``). With ``compute_model=``
   (a :class:`~queuesgd.compute_model.ComputeModel`, and a shape) it follows
   the shape instead: each kernel of a layer split ``t`` ways at its own
   GEMM efficiency (:meth:`~queuesgd.compute_model.ComputeModel.stage_times`:
   the blocks of a stage, and the head the last stage adds), so a smaller
   model, micro-batch or larger ``t`` runs each product less efficiently;
   ``C`` is then not used.
3. **Tensor parallelism** (Megatron, Section 3.3): per layer and micro-batch
   2 all-reduces of ``A`` bytes over the ``t`` ranks in the forward pass, 2 in
   the backward (2 more there with full recomputation), each in the pass that
   issues it (:mod:`~.hybrid_passes`), not overlapped; with sequence parallelism each
   is a reduce-scatter plus an all-gather (Korthikanti, Section 4.2.2). The group is
   packed inside a node. ``tp_overlap=True`` hides the backward's two behind the
   weight gradients of QKV and fc1; ``"all"`` pipelines each with its GEMM (:mod:`~.hybrid_overlap`).
4. **Pipeline.** Per micro-batch each model chunk sends its activation forward and
   its gradient backward, blocking, ``A / t`` bytes (Section 4.1), except the first
   chunk's gradient and the last chunk's activation (Megatron sends neither), each
   boundary over NVLink or the GPU's share of the rails (:mod:`~.hybrid_sends`); without
   sequence parallelism the receiving ``t`` ranks all-gather ``A`` inside the node. Each
   stage's (chunk's) micro-batch is a forward and a backward pass, the last stage's output
   layer a third forward; the step is the longest path through GPipe's, 1F1B's or the
   interleaved schedule's order of those passes (:mod:`~.schedule_step`; Sections 2.2.1-2.2.2),
   ``stage_layers=`` unequal layer counts (:mod:`~.hybrid_stages`). The bubble is reported as
   ``(p - 1)/(v m)``; ``formula()`` is the textbook ``m (tau + head) + (p - 1) tau / v``
   (:func:`~.megatron.pipeline_time`) less the ``m + 1`` unsent messages, where exact.
5. **Data parallelism** after the pipeline flush, exposed, over the ``d``
   ranks holding the same shard (``k`` per node when ``t`` packs fewer than
   a node; every GPU's group uses the rails at once): ZeRO 0 all-reduces
   the shard's gradients ``G/(t p)``; ZeRO 1 and 2 reduce-scatter them and
   all-gather the updated parameters (Megatron's distributed optimizer);
   ZeRO 3 gathers the parameters before each micro-batch's forward and backward and
   reduce-scatters its gradients (FSDP/DeepSpeed stage 3, no overlap). ``zero_overlap=True``
   overlaps them with the stage's compute (ZeRO 0-2: the gradient collective behind the last
   micro-batch's backward, the gather behind the next step's first forward; ZeRO 3: prefetched;
   :mod:`~.hybrid_zero`). The update is ``u / (t p)``, ``u / (t p d)`` with ZeRO.
6. **Collectives** by :func:`~queuesgd.schemes.parallel.collectives.collective_time`:
   NCCL's choice among ring, tree and hierarchical, or the cluster's measured
   bus bandwidth.
7. **Memory per GPU** of the busiest stage, every part of it that stage's
   (:mod:`~.hybrid_memory`): its own ``L_i`` layers, the embeddings (first
   stage), the final norm and output matrix (last; tied, Megatron's copy)
   over ``t``, ZeRO over ``d`` (:func:`~.megatron.hybrid_memory`; ZeRO 3 two
   gathered layers besides), activations per :func:`~.megatron.layer_activation_bytes`
   times :func:`~.megatron.stage_layers_in_flight` (GPipe ``m L_i``, 1F1B ``min(p - i, m) L_i``).
8. **Context parallelism** (``context=c``, Megatron-Core): each of ``c`` ranks holds
   ``s / c`` of every sequence (``workers = t c p d``). Compute, the TP messages, the
   sends and the activations are over ``c``; per layer and micro-batch the keys and
   values (:func:`~.megatron.kv_bytes`) are all-gathered in the forward pass, and in
   the backward again (and in a recomputed forward) with their gradients' reduce-scatter,
   exposed (an upper bound: Megatron-Core overlaps its ring); gradients and ZeRO go over
   the ``d c`` ranks holding the same parameters.
9. **Experts** (``experts=E``; :mod:`~.hybrid_moe`): the MLPs' compute times
   ``capacity_factor x top_k``; per layer and micro-batch two all-to-alls
   (:func:`~.megatron.alltoall_bytes`) over the ``e`` expert-parallel ranks in the
   forward pass, their two transposes in the backward (two more with full
   recomputation); ZeRO and the experts' gradients over the ``d c / e`` ranks holding them.

Examples
--------
>>> from queuesgd import Workload, Cluster, predict
>>> w = Workload("30ms", "1GB", batch_size=1)
>>> c = Cluster(16, "200Gbit/s", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
>>> p = predict(HybridParallel(tensor=1, pipeline=4, microbatches=8), w, c)
>>> round(p.details["bubble"], 6), p.method                 # (p - 1)/m
(0.375, 'closed_form')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from queuesgd import _checks
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes import TransformerShape
from queuesgd.model_shapes_llama import parse_shape
from queuesgd.model_shapes_mlp import check_workload
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.memory import Memory
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.schemes.parallel.hybrid_checks import (
    check_layers_and_shape,
    check_names,
    check_no_random_stragglers,
    check_schedule,
)
from queuesgd.schemes.parallel.hybrid_formula import QUANTITIES, hybrid_formula
from queuesgd.schemes.parallel.hybrid_memory import busiest_stage_memory
from queuesgd.schemes.parallel.hybrid_moe import check_experts, expert_bytes, expert_share
from queuesgd.schemes.parallel.hybrid_overlap import check_tp_overlap, scheme_exposed_per_layer
from queuesgd.schemes.parallel.hybrid_passes import forward_collectives
from queuesgd.schemes.parallel.hybrid_reason import at_mean, caveats, closed_form_reason
from queuesgd.schemes.parallel.hybrid_sends import message_times, slowest_replica, stage_sends
from queuesgd.schemes.parallel.hybrid_stages import StepTimes, stage_chunks, stage_layer_counts, stage_shares
from queuesgd.schemes.parallel.hybrid_zero import check_zero_overlap, exposed_per_step
from queuesgd.schemes.parallel.megatron import (
    alltoall_bytes,
    bubble_fraction,
    head_share,
    kv_bytes,
    selective_share,
)
from queuesgd.workload import Cluster

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Workload

__all__ = ["QUANTITIES", "HybridParallel", "parse_shape"]


@dataclass(frozen=True)
class HybridParallel(Scheme):
    """Tensor x pipeline x data parallelism (Megatron-LM's PTD-P), with ZeRO, sequence parallelism, recompute.

    Parameters
    ----------
    tensor, pipeline : int
        ``t`` tensor-parallel ranks (packed inside a node), ``p`` pipeline stages.
    data : int or None
        ``d`` data-parallel replicas; ``None``: ``workers / (t p)``.
    microbatches : int
        ``m`` micro-batches per step and replica (a multiple of ``p`` for the interleaved schedule).
    schedule : {"1f1b", "gpipe", "interleaved"}
        Any case, as ``recompute`` and the optimizer's name (:mod:`queuesgd.name_checks`).
    virtual_stages : int
        ``v`` model chunks per GPU: interleaved, ``v >= 2``; 1 otherwise.
    sequence_parallel : bool
        Reduce-scatter + all-gather instead of all-reduce; activations over ``t``.
    recompute : None, "full" or "selective"
    zero : int
        ZeRO stage 0-3 over the data-parallel group.
    shape : TransformerShape, str or None
        The model's shapes (or ``"l:h:a:s:V"``, with optional Llama keywords: :func:`parse_shape`);
        see the module docstring.
    layers : int or None
        ``l`` without a shape (default 1).
    hidden_bytes : float or str
        ``A`` without a shape: bytes of one micro-batch's hidden states (``b s h`` x 2).
    optimizer : str or float
        Bytes of optimizer state per byte of parameters, the parameters counted as the workload
        holds them (16-bit with a shape: 2 bytes each). The default, 6, is ZeRO's mixed-precision
        Adam, ``K = 12`` bytes per parameter (an fp32 master copy and two fp32 moments) over 2 bytes
        per 16-bit parameter. A name is :data:`~queuesgd.schemes.memory.OPTIMIZER_STATE`'s factor:
        ``"adam"`` is 2 (two moments the size of the parameters, no master copy: 4 bytes per
        16-bit parameter, a third of the default), ``"momentum"`` 1, ``"sgd"`` 0.
    compute_model : ComputeModel or None
        Kernel times by shape (needs ``shape``): one micro-batch's compute from the layer's
        products at their GEMM efficiency on ``t`` ranks instead of ``C / (t p)``.
    context : int
        ``c`` context-parallel ranks (default 1, off): each holds ``s / c`` of every sequence;
        ``workers = t c p d``. See the module docstring, item 8.
    experts : int or None
        ``E`` experts in every layer's MLP (a mixture of experts; default None, dense). Needs ``shape``.
    expert_parallel : int
        ``e`` ranks the experts are split over (a divisor of ``E`` and of ``d``; default 1).
    capacity_factor : float
        Expert capacity over the even share (GShard, Switch Transformer; default 1.0).
    top_k : int
        Experts each token goes to (default 1: Switch; 2: GShard).
    stage_layers : sequence of int or None
        Uneven stages: ``p`` layer counts summing to ``l`` (interleaved: in chunks; :mod:`~.hybrid_stages`).
    tp_overlap : bool or "backward" or "all"
        True (or ``"backward"``): the backward's TP collectives overlapped with the weight-gradient GEMMs
        of QKV and fc1 (Megatron's async all-reduce); ``"all"``: every TP collective pipelined with its
        GEMM in ``t`` chunks (Transformer Engine, ``--tp-comm-overlap``; needs ``sequence_parallel``).
        Default False; needs ``shape``: :mod:`~.hybrid_overlap`.
    zero_overlap : bool or "post"
        The data-parallel collectives overlapped with the stage's compute (default False; any ZeRO stage):
        ZeRO 0-2's gradient collective behind the last micro-batch's backward and ZeRO 1-2's gather behind
        the next step's first forward (DDP buckets, Megatron-Core's ``--overlap-grad-reduce`` and
        ``--overlap-param-gather``), ZeRO-3's prefetched (FSDP/DeepSpeed): :mod:`~.hybrid_zero`.
        ``"post"``: ZeRO 3 under FSDP's ``BACKWARD_POST``, the forward's gathers prefetched and the
        backward's collectives exposed (an upper bound; ZeRO 0-2 read it as True).

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> from queuesgd import Cluster, predict
    >>> c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> s = HybridParallel(tensor=2, pipeline=4, microbatches=16, shape=GPT3_XL, recompute="selective")
    >>> p = predict(s, GPT3_XL.workload(1, flops=150e12), c)
    >>> round(p.throughput, 1), round(p.memory.total / 1e9, 2)
    (337.0, 5.49)
    """

    key: ClassVar[str] = "hybrid"
    parameter_units: ClassVar[dict[str, str]] = {"hidden_bytes": "B"}

    tensor: int = 1
    pipeline: int = 1
    data: int | None = None
    microbatches: int = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    sequence_parallel: bool = False
    recompute: str | None = None
    zero: int = 0
    shape: TransformerShape | str | None = None
    layers: int | None = None
    hidden_bytes: float | str = 0.0
    optimizer: str | float = 6.0
    compute_model: ComputeModel | None = None
    context: int = 1
    experts: int | None = None
    expert_parallel: int = 1
    capacity_factor: float = 1.0
    top_k: int = 1
    stage_layers: tuple[int, ...] | None = None
    tp_overlap: bool | str = False
    zero_overlap: bool | str = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        n = "HybridParallel"
        for f in (
            "tensor",
            "pipeline",
            "microbatches",
            "virtual_stages",
            "context",
            "expert_parallel",
            "top_k",
        ):
            set_(self, f, _checks.integer(f"{n}.{f}", getattr(self, f), maximum=_checks.MAX_COUNT))
        if self.data is not None:
            set_(self, "data", _checks.integer(f"{n}.data", self.data, maximum=_checks.MAX_COUNT))
        check_names(self)  # schedule, recompute, optimizer: any case
        set_(self, "sequence_parallel", _checks.boolean(f"{n}.sequence_parallel", self.sequence_parallel))
        set_(self, "zero", _checks.integer(f"{n}.zero", self.zero, minimum=0, maximum=3))
        set_(self, "shape", parse_shape(self.shape))
        if self.layers is not None:
            set_(self, "layers", _checks.integer(f"{n}.layers", self.layers, maximum=_checks.MAX_COUNT))
        set_(self, "hidden_bytes", _checks.size(f"{n}.hidden_bytes", self.hidden_bytes))
        if self.compute_model is not None and not isinstance(self.compute_model, ComputeModel):
            raise InvalidParameterError(f"{n}.compute_model", self.compute_model, "None or a ComputeModel")
        if self.compute_model is not None and self.shape is None:
            raise InvalidParameterError(
                f"{n}.compute_model", self.compute_model, "None without shape= (its kernels come from it)"
            )
        check_experts(self)
        check_tp_overlap(self)
        check_zero_overlap(self)
        kw = {"pipeline": self.pipeline, "layers": self.layer_count, "schedule": self.schedule}
        kw["virtual"] = self.virtual_stages
        set_(self, "stage_layers", stage_layer_counts(f"{n}.stage_layers", self.stage_layers, **kw))
        check_schedule(self)  # v >= 2 interleaved, 1 otherwise; interleaved: p > 1, p | m
        check_layers_and_shape(self)

    # ---- configuration --------------------------------------------------------------------------
    @property
    def layer_count(self) -> int:
        """``l``: the shape's layers, else ``layers`` (default 1)."""
        return self.shape.layers if self.shape is not None else (self.layers or 1)

    def replicas(self, cluster: Cluster) -> int:
        """``d``: ``data``, or ``workers / (t c p)``."""
        if self.data is not None:
            return self.data
        return cluster.workers // (self.tensor * self.context * self.pipeline)

    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Refuse ``workers != t c p d``, tensor groups that do not pack into nodes, ``RandomDelay``.

        And a workload of another model than ``shape``
        (:func:`~queuesgd.model_shapes_mlp.check_workload`).
        """
        t, p, c = self.tensor, self.pipeline, self.context
        n = cluster.workers
        if n % (t * c * p) or n != t * c * p * self.replicas(cluster):
            what = "tensor x pipeline x data" if c == 1 else "tensor x context x pipeline x data"
            counts = f"{t} x {p}" if c == 1 else f"{t} x {c} x {p}"
            raise InvalidParameterError(
                "Cluster.workers", n, f"{what} = {counts} x {self.data or 'd'} workers"
            )
        if self.replicas(cluster) % self.expert_parallel:
            raise InvalidParameterError(
                "HybridParallel.expert_parallel",
                self.expert_parallel,
                f"a divisor of the data-parallel replicas (= {self.replicas(cluster)}): experts split "
                "within the data-parallel group",
            )
        gpn = cluster.per_node
        if cluster.two_level and (gpn % t if t <= gpn else t % gpn):
            raise InvalidParameterError(
                "HybridParallel.tensor", t, f"a divisor or a multiple of gpus_per_node (= {gpn})"
            )
        check_no_random_stragglers(cluster)
        if self.shape is not None:  # the bytes per parameter come from the workload: it must be this model's
            check_workload(self.shape, workload, hint="the shape's own is TransformerShape.workload(b)")

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """Always ``closed_form``: Megatron's analysis (its one road)."""
        return "closed_form", "closed_form: Megatron's analytical model of PTD-P (the scheme's one road)"

    def message_bytes(self, workload: Workload) -> float:
        """``A``: one micro-batch's hidden states, ``b s h`` x 2 bytes (``hidden_bytes`` without a shape)."""
        if self.shape is None:
            return float(self.hidden_bytes)
        return self.shape.boundary_bytes(workload.batch_size)

    def _recompute_share(
        self, workload: Workload, forward: float, experts: float = 0.0, head: float = 0.0
    ) -> float:
        """Extra compute of one micro-batch, as a share of ``C`` (the blocks'; the head is not recomputed)."""
        if self.recompute == "full":
            return forward * (1.0 - head) if self.experts is None else forward * (1.0 - head + experts)
        if self.recompute == "selective":  # the eager attention cores' forward; none with flash
            return selective_share(self.shape, workload.batch_size)
        return 0.0

    def times(self, workload: Workload, cluster: Cluster) -> StepTimes:
        """Every part of one step in seconds (see the module docstring); ``tp`` the exposed TP time."""
        return self._times(workload, cluster)[0]

    def _times(self, workload: Workload, cluster: Cluster) -> tuple[StepTimes, float, float]:
        """:meth:`times`, and the TP collectives of one micro-batch and the step's DP, exposed or not."""
        t, p, m, v = self.tensor, self.pipeline, self.microbatches, self.virtual_stages
        c, e = self.context, self.expert_parallel
        d = self.replicas(cluster)
        gpn = cluster.per_node
        stretch = 1.0 / float(cluster.speed_factors.min())
        C = workload.compute_time * stretch
        f, bwd = workload.forward_time, workload.backward_time
        forward = f / (f + bwd) if f is not None and bwd and f + bwd > 0 else 1.0 / 3.0
        if self.compute_model is None:
            xs = expert_share(self, workload)
            hs = 0.0 if self.shape is None else head_share(self.shape, workload.batch_size)
            compute = C * (1.0 - hs + xs + self._recompute_share(workload, forward, xs, hs)) / (t * p * c)
            head = C * hs / (t * c)
        else:  # the shape's kernels on one of t ranks, each at its GEMM efficiency
            mix = None if self.experts is None else (self.experts, e, self.capacity_factor, self.top_k)
            compute, head = self.compute_model.stage_times(
                self.shape,
                workload.batch_size,
                tensor=t,
                pipeline=p,
                sequence_parallel=self.sequence_parallel,
                recompute=self.recompute,
                context=c,
                experts=mix,
            )
            compute, head = stretch * compute, stretch * head
        A = self.message_bytes(workload)
        Ac = A / c  # this rank's tokens' hidden states
        algorithms: dict[str, str] = {}

        def coll(op: str, nbytes: float, ranks: int, per_node: int, tag: str) -> float:
            ct = collective_time(op, nbytes, cluster, ranks, per_node=per_node)
            algorithms[tag] = ct.algorithm
            return ct.seconds

        k_tp = min(t, gpn)
        ag = 0.0  # the all-gather of sequence parallelism
        if self.sequence_parallel:
            rs = coll("reduce_scatter", Ac, t, k_tp, "tp")
            ag = coll("allgather", Ac, t, k_tp, "tp_ag")
            one = rs + ag
        else:
            one = rs = coll("allreduce", Ac, t, k_tp, "tp")
        full = self.recompute == "full"
        per_layer = (6 if full else 4) * one
        tp = exposed = self.layer_count / p * per_layer
        if self.tp_overlap:  # behind the weight gradients (True) or pipelined with every GEMM ("all")
            hidden = scheme_exposed_per_layer(self, workload.batch_size, one, rs, ag, C, stretch)
            exposed = self.layer_count / p * hidden
        cp = ep = gather = a2a = 0.0
        if c > 1:  # K/V: all-gather forward, again backward, reduce-scatter of their gradients
            k_cp = math.gcd(c, gpn // t) if t < gpn else 1
            kv = kv_bytes(A, t, self.shape.kv / self.shape.heads)  # grouped-query: g = k h / a columns
            gather = coll("allgather", kv, c, k_cp, "cp")
            rs_kv = coll("reduce_scatter", kv, c, k_cp, "cp_rs")
            cp = self.layer_count / p * ((3 if full else 2) * gather + rs_kv)
        if self.experts is not None:  # dispatch and combine, forward, backward (and a recomputed forward)
            k_ep = math.gcd(e, gpn // (t * c)) if t * c < gpn else 1
            size = alltoall_bytes(
                A,
                context=c,
                tensor=t,
                sequence_parallel=self.sequence_parallel,
                capacity_factor=self.capacity_factor,
                top_k=self.top_k,
            )
            a2a = coll("alltoall", size, e, k_ep, "ep")
            ep = self.layer_count / p * (6 if full else 4) * a2a
        p2p, sends = 0.0, ()
        if p > 1:  # each boundary over NVLink or the rails, where its ranks are (hybrid_sends)
            # scatter/gather (Megatron 4.1): each rank sends A/t; without SP the receiving stage's t
            # ranks all-gather the whole A over NVLink (with SP each rank keeps its sequence shard)
            regather = 0.0 if self.sequence_parallel or t == 1 else coll("allgather", Ac, t, k_tp, "p2p_ag")
            p2p, sends = stage_sends(t, c, d, p, v, gpn, *message_times(cluster, Ac / t, regather))
        dc = d * c  # parameters are replicated over the context-parallel ranks too
        k_dp = math.gcd(dc, gpn // t) if t < gpn else 1
        X = expert_bytes(self, workload)
        G = (workload.gradient_bytes - X) / (t * p) if X else workload.gradient_bytes / (t * p)
        P = (workload.parameter_bytes - X) / (t * p) if X else workload.parameter_bytes / (t * p)

        reduces: list[float] = []  # each group's gradient collective and one gather (zero_overlap)
        gathers: list[float] = []

        def data_parallel(G: float, P: float, ranks: int, k: int, tag: str) -> float:
            if self.zero == 0:
                reduces.append(coll("allreduce", G, ranks, k, tag))
                return reduces[-1]
            if self.zero in (1, 2):
                reduces.append(coll("reduce_scatter", G, ranks, k, tag))
                gathers.append(coll("allgather", P, ranks, k, tag + "_ag"))
                return reduces[-1] + gathers[-1]
            gathers.append(coll("allgather", P, ranks, k, tag + "_ag"))
            return m * (2 * gathers[-1] + coll("reduce_scatter", G, ranks, k, tag))

        dp = data_parallel(G, P, dc, k_dp, "dp")
        if X:  # the local experts' states over the expert-data-parallel group: the d c / e ranks with them
            Px = X * (self.experts // e) / (t * p)
            k_x = math.gcd(dc // e, max(k_dp // math.gcd(e, k_dp), 1))
            dp += data_parallel(Px, Px, dc // e, k_x, "dp_experts")
            shard = P / (dc if self.zero else 1) + Px / (dc // e if self.zero else 1)
            update = workload.update_time * shard / workload.parameter_bytes
        else:
            update = workload.update_time / (t * p * (dc if self.zero else 1))
        shares, chunks, n = stage_shares(self), stage_chunks(self, bool(sends)), self.layer_count / p
        dp_all, passes = dp, bool(chunks or shares or sends)  # unequal stages: their passes are timed
        if self.zero_overlap or passes:  # the blocks' forward: ZeRO's overlap, the stages' passes
            if self.compute_model is None:
                fwd = C * (1.0 - hs + xs) * forward / (t * p * c)
            else:  # a block's forward from the compute model (its backward twice it, more with flash)
                kw = {"tensor": t, "sequence_parallel": self.sequence_parallel, "context": c, "experts": mix}
                fwd = stretch * (n * self.compute_model.block_parts(self.shape, workload.batch_size, **kw)[0])
        if self.zero_overlap:  # behind the stage's compute, one layer's share exposed (hybrid_zero)
            post = self.zero_overlap == "post"
            dp = exposed_per_step(self.zero, m, dp, sum(reduces), sum(gathers), compute, fwd, n, post=post)
        steps = StepTimes(compute, exposed, p2p, dp, update, p, m, v, algorithms, cp, ep, head, shares)
        cf = forward_collectives(n, one, exposed / n, self.tp_overlap == "all", full, gather, a2a)
        steps = replace(steps, chunks=chunks, forward=fwd if passes else None, schedule=self.schedule,
                        collectives_forward=cf)  # fmt: skip
        return slowest_replica(steps, sends), tp, dp_all

    def memory(self, workload: Workload, cluster: Cluster) -> Memory:
        """Bytes per GPU of the busiest stage (item 7; :func:`~.hybrid_memory.busiest_stage_memory`).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> w = Workload(1.0, "15GB")                    # 7.5B parameters in 16 bits
        >>> m = HybridParallel(zero=2, layers=60).memory(w, Cluster(64, "1GB/s"))
        >>> round(m.total / 1e9, 1)                      # ZeRO Figure 1, P_os+g
        16.6
        """
        return busiest_stage_memory(self, workload, cluster)

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory:
        """:meth:`memory` (the first stage's, the most any GPU holds)."""
        return self.memory(workload, cluster)

    def single_worker_throughput(self, workload: Workload) -> float:
        """One GPU alone: with a compute model, the model on one GPU (``t = c = p = d = 1``), kernels timed.

        Without one, the workload's compute (:meth:`Scheme.single_worker_throughput`).

        Examples
        --------
        >>> from queuesgd.compute_model import ComputeModel
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd import Cluster, predict
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=100e12), "1TB/s")
        >>> s = HybridParallel(tensor=2, shape="2:1024:16:2048:51200", compute_model=cm)
        >>> w = s.shape.workload(1)
        >>> alone = predict(s.replace(tensor=1), w, Cluster(1, "1GB/s")).throughput
        >>> s.single_worker_throughput(w) == alone
        True
        """
        if self.compute_model is None:
            return super().single_worker_throughput(workload)
        alone = replace(
            self, tensor=1, pipeline=1, data=1, context=1, expert_parallel=1, schedule="1f1b",
            virtual_stages=1, stage_layers=None, sequence_parallel=False, tp_overlap=False, zero=0,
            zero_overlap=False,
        )  # fmt: skip
        step = alone.solve_closed_form(workload, Cluster(1, 1e12)).iteration_time
        return self.microbatches * workload.batch_size / step

    caveats = caveats  # a random compute law is taken at its mean (hybrid_reason.caveats)

    # ---- the road --------------------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Megatron's model: ``m (tau + head) + (p-1)/v tau + data-parallel collectives + update``.

        The breakdown is the slowest stage's (the last, which runs the head,
        unless ``stage_layers`` makes another slower): its compute, its
        communication, its idle time ``(p - 1) tau / v`` (``sum tau_i - max tau_i``).
        """
        tm, tp, dp = self._times(workload, cluster)
        m = self.microbatches
        breakdown = tm.breakdown()
        reason = closed_form_reason(self, tm, cluster, exact=not at_mean(workload, cluster))
        return SchemeSolution(
            iteration_rate=1.0 / tm.step,
            gradients_per_update=float(self.replicas(cluster) * m),
            iteration_time=tm.step,
            breakdown=breakdown,
            method="closed_form",
            reason=reason,
            details={
                "memory": self.memory(workload, cluster),
                "bubble": bubble_fraction(self.pipeline, m, self.virtual_stages),
                "tp_per_microbatch": tp,
                "tp_exposed_per_microbatch": tm.tp,
                "p2p_per_microbatch": tm.p2p,
                "cp_per_microbatch": tm.cp,
                "ep_per_microbatch": tm.ep,
                "head_per_microbatch": tm.head,
                "stage_times": tm.stage_taus,
                "slowest_stage": tm.slowest,
                "dp_per_step": dp,
                "dp_exposed_per_step": tm.dp,
                "algorithms": dict(tm.algorithms),
            },
            bottleneck=max(breakdown, key=lambda key: breakdown[key]),
        )

    # ---- formula ---------------------------------------------------------------------------------
    def formula(self, compute: str = "deterministic", quantity: str = "throughput") -> Formula:
        """Throughput (samples/s), the bubble fraction, or the TP communication per layer, as a Formula.

        Ring collectives: tensor-parallel inside a node (``B_intra``,
        ``alpha_intra``), data-parallel and pipeline sends at each GPU's
        share of the network (``B``, ``alpha``); ``C`` one micro-batch's
        forward + backward on one GPU (backward twice the forward), ``C_h``
        the output layer's part of it (with a shape: the last stage runs it,
        ``t`` ways), ``A`` its hidden states' bytes (sent ``A / t`` per rank,
        then all-gathered over the ``t`` ranks without sequence parallelism),
        ``G`` the model's gradient (= parameter) bytes. Equal to
        :meth:`solve_closed_form` where each tensor-parallel group fills
        whole nodes (the throughput's condition ``t >= g``, ``g`` the GPUs
        per node: :meth:`~queuesgd.formula.Formula.evaluate` asks for it) and
        NCCL's choice is the ring (:func:`~.hybrid_formula.hybrid_formula`;
        without context or expert parallelism).

        Examples
        --------
        >>> HybridParallel(schedule="interleaved", pipeline=4, microbatches=8, virtual_stages=2).formula(
        ...     quantity="bubble").expr
        (p - 1)/(M*v)
        >>> HybridParallel(tensor=8).formula(quantity="tp_communication").expr
        4*A*(2*t - 2)/(B_intra*t) + 4*alpha_intra*(2*t - 2)
        """
        return hybrid_formula(self, compute, quantity)
