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
2. **Compute** splits evenly: one micro-batch costs ``C / (t p)`` per GPU
   (GEMM efficiency that falls with ``t`` is not modelled). Recomputation
   adds one forward (``"full"``) or the attention cores' forward
   (``"selective"``: ``4 b s^2 h`` FLOPs per layer, their share of the
   model's FLOPs times ``C``). Compute is taken at its mean, paced by the
   slowest GPU (``1 / min(speeds)``). With ``compute_model=`` (a
   :class:`~queuesgd.compute_model.ComputeModel`, and a shape) it follows
   the shape instead: each kernel of a layer split ``t`` ways at its own
   GEMM efficiency (:meth:`~queuesgd.compute_model.ComputeModel.microbatch_time`),
   so a smaller model, micro-batch or larger ``t`` runs each product less
   efficiently; ``C`` is then not used.
3. **Tensor parallelism** (Megatron, Section 3.3): per layer and micro-batch
   2 all-reduces of ``A`` bytes forward and 2 backward over the ``t`` ranks
   (2 more with full recomputation), not overlapped; with sequence
   parallelism each is a reduce-scatter plus an all-gather of ``A``
   (Korthikanti, Section 4.2.2). The group is packed inside a node.
4. **Pipeline.** Per micro-batch each GPU sends its activation and receives
   a gradient ``v`` times (once per model chunk), blocking, ``A / t`` bytes
   each (Megatron's scatter/gather, Section 4.1), to the next stage ``t d``
   ranks on: over NVLink if that rank is in the node, else over the GPU's
   share of the rails. With ``tau`` one micro-batch's time on a GPU
   (compute, tensor-parallel collectives, sends), the pipeline takes
   ``(m + (p - 1)/v) tau``: the bubble is ``(p - 1)/(v m)`` of the ideal
   ``m tau`` (Sections 2.2.1-2.2.2; ``v = 1`` for GPipe and 1F1B).
5. **Data parallelism** after the pipeline flush, exposed, over the ``d``
   ranks holding the same shard (``k`` per node when ``t`` packs fewer than
   a node; every GPU's group uses the rails at once): ZeRO 0 all-reduces
   the shard's gradients ``G/(t p)``; ZeRO 1 and 2 reduce-scatter them and
   all-gather the updated parameters (Megatron's distributed optimizer);
   ZeRO 3 gathers the parameters before each micro-batch's forward and
   backward and reduce-scatters its gradients (FSDP/DeepSpeed stage 3,
   no overlap). The update is ``u / (t p)``, ``u / (t p d)`` with ZeRO.
6. **Collectives** by :func:`~queuesgd.schemes.collectives.collective_time`:
   NCCL's choice among ring, tree and hierarchical, or the cluster's measured
   bus bandwidth.
7. **Memory per GPU** of the first stage (it holds the embeddings and the
   most activations): parameters and gradients of its ``l/p`` layers (and
   the embeddings) over ``t``, ZeRO over ``d``
   (:func:`~.megatron.hybrid_memory`; ZeRO 3 also holds two gathered
   layers), activations per :func:`~.megatron.layer_activation_bytes` times
   :func:`~.megatron.layers_in_flight`.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from queuesgd import _checks
from queuesgd.compute_model import ComputeModel
from queuesgd.distributions import Deterministic
from queuesgd.errors import InvalidParameterError, NotRepresentable
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.base import Scheme, SchemeSolution
from queuesgd.schemes.collectives import collective_time
from queuesgd.schemes.costs import ring_allgather, ring_allreduce, ring_reduce_scatter
from queuesgd.schemes.megatron import (
    RECOMPUTE,
    SCHEDULES,
    bubble_fraction,
    hybrid_memory,
    layer_activation_bytes,
    layers_in_flight,
)
from queuesgd.schemes.memory import Memory, check_optimizer

if TYPE_CHECKING:
    from queuesgd.formula import Formula
    from queuesgd.workload import Cluster, Workload

__all__ = ["HybridParallel", "parse_shape"]

#: What ``formula(quantity=...)`` gives.
QUANTITIES: tuple[str, ...] = ("throughput", "bubble", "tp_communication")


def parse_shape(value: Any) -> TransformerShape | None:
    """A :class:`TransformerShape`, from itself or ``"layers:hidden:heads:sequence:vocabulary"``.

    Examples
    --------
    >>> parse_shape("96:12288:96:2048:51200").parameters       # GPT-3 175B
    174615846912
    """
    if value is None or isinstance(value, TransformerShape):
        return value
    accepted = (
        "a TransformerShape, None, or 'layers:hidden:heads:sequence:vocabulary' (e.g. 96:12288:96:2048:51200)"
    )
    if not isinstance(value, str):
        raise InvalidParameterError("HybridParallel.shape", value, accepted)
    parts = value.split(":")
    if len(parts) != 5 or not all(p.strip().isdigit() for p in parts):
        raise InvalidParameterError("HybridParallel.shape", value, accepted)
    return TransformerShape(*(int(p) for p in parts), name="transformer")


@dataclass(frozen=True)
class _Times:
    """One configuration's seconds, per micro-batch on one GPU and per step."""

    compute: float  # forward + backward + recomputation of one micro-batch
    tp: float  # tensor-parallel collectives of one micro-batch
    p2p: float  # pipeline sends of one micro-batch
    dp: float  # data-parallel collectives of one step
    update: float
    pipeline: int
    microbatches: int
    virtual: int
    algorithms: dict[str, str]

    @property
    def tau(self) -> float:
        return self.compute + self.tp + self.p2p

    @property
    def bubble(self) -> float:
        return (self.pipeline - 1) / self.virtual * self.tau

    @property
    def step(self) -> float:
        return self.microbatches * self.tau + self.bubble + self.dp + self.update


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
    virtual_stages : int
        ``v`` model chunks per GPU (interleaved only; 1 otherwise).
    sequence_parallel : bool
        Reduce-scatter + all-gather instead of all-reduce; activations over ``t``.
    recompute : None, "full" or "selective"
    zero : int
        ZeRO stage 0-3 over the data-parallel group.
    shape : TransformerShape, str or None
        The model's shapes (or ``"l:h:a:s:V"``); see the module docstring.
    layers : int or None
        ``l`` without a shape (default 1).
    hidden_bytes : float or str
        ``A`` without a shape: bytes of one micro-batch's hidden states (``b s h`` x 2).
    optimizer : str or float
        Optimizer state per byte of parameters (default 6: ZeRO's ``K = 12``).
    compute_model : ComputeModel or None
        Kernel times by shape (needs ``shape``): one micro-batch's compute from the layer's
        products at their GEMM efficiency on ``t`` ranks instead of ``C / (t p)``.

    Examples
    --------
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> from queuesgd import Cluster, predict
    >>> c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
    >>> s = HybridParallel(tensor=2, pipeline=4, microbatches=16, shape=GPT3_XL, recompute="selective")
    >>> p = predict(s, GPT3_XL.workload(1, flops=150e12), c)
    >>> round(p.throughput, 1), round(p.memory.total / 1e9, 2)
    (382.0, 5.49)
    """

    key: ClassVar[str] = "hybrid"

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

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        n = "HybridParallel"
        for f in ("tensor", "pipeline", "microbatches", "virtual_stages"):
            set_(self, f, _checks.integer(f"{n}.{f}", getattr(self, f), maximum=_checks.MAX_COUNT))
        if self.data is not None:
            set_(self, "data", _checks.integer(f"{n}.data", self.data, maximum=_checks.MAX_COUNT))
        set_(self, "schedule", _checks.choice(f"{n}.schedule", self.schedule, SCHEDULES))
        set_(self, "sequence_parallel", _checks.boolean(f"{n}.sequence_parallel", self.sequence_parallel))
        rc = None if isinstance(self.recompute, str) and self.recompute.lower() == "none" else self.recompute
        if rc not in RECOMPUTE:
            raise InvalidParameterError(f"{n}.recompute", self.recompute, "None, 'full' or 'selective'")
        set_(self, "recompute", rc)
        set_(self, "zero", _checks.integer(f"{n}.zero", self.zero, minimum=0, maximum=3))
        set_(self, "shape", parse_shape(self.shape))
        if self.layers is not None:
            set_(self, "layers", _checks.integer(f"{n}.layers", self.layers, maximum=_checks.MAX_COUNT))
        set_(self, "hidden_bytes", _checks.size(f"{n}.hidden_bytes", self.hidden_bytes))
        check_optimizer(f"{n}.optimizer", self.optimizer)
        if self.compute_model is not None and not isinstance(self.compute_model, ComputeModel):
            raise InvalidParameterError(f"{n}.compute_model", self.compute_model, "None or a ComputeModel")
        if self.compute_model is not None and self.shape is None:
            raise InvalidParameterError(
                f"{n}.compute_model", self.compute_model, "None without shape= (its kernels come from it)"
            )
        if self.schedule != "interleaved" and self.virtual_stages != 1:
            raise InvalidParameterError(
                f"{n}.virtual_stages", self.virtual_stages, "1 unless schedule='interleaved'"
            )
        if self.schedule == "interleaved":
            if self.microbatches % self.pipeline:
                raise InvalidParameterError(
                    f"{n}.microbatches",
                    self.microbatches,
                    f"a multiple of pipeline (= {self.pipeline}) "
                    "for the interleaved schedule (Megatron requires it)",
                )
        if self.shape is not None:
            if self.layers is not None and self.layers != self.shape.layers:
                raise InvalidParameterError(
                    f"{n}.layers", self.layers, f"None or shape.layers ({self.shape.layers})"
                )
            if self.shape.layers % (self.pipeline * self.virtual_stages):
                raise InvalidParameterError(
                    f"{n}.pipeline",
                    self.pipeline,
                    f"p x v dividing the {self.shape.layers} layers (v = {self.virtual_stages})",
                )
            if self.shape.heads % self.tensor:
                raise InvalidParameterError(
                    f"{n}.tensor", self.tensor, f"a divisor of the {self.shape.heads} heads"
                )
        elif self.recompute == "selective":
            raise InvalidParameterError(
                f"{n}.recompute",
                "selective",
                "None or 'full' without shape= (the attention cores' share "
                "of the compute comes from the shape)",
            )

    # ---- configuration --------------------------------------------------------------------------
    @property
    def layer_count(self) -> int:
        """``l``: the shape's layers, else ``layers`` (default 1)."""
        return self.shape.layers if self.shape is not None else (self.layers or 1)

    def replicas(self, cluster: Cluster) -> int:
        """``d``: ``data``, or ``workers / (t p)``."""
        return self.data if self.data is not None else cluster.workers // (self.tensor * self.pipeline)

    def check(self, workload: Workload, cluster: Cluster) -> None:
        """Refuse ``workers != t p d``, tensor groups that do not pack into nodes, and ``RandomDelay``."""
        t, p = self.tensor, self.pipeline
        n = cluster.workers
        if n % (t * p) or n != t * p * self.replicas(cluster):
            raise InvalidParameterError(
                "Cluster.workers", n, f"tensor x pipeline x data = {t} x {p} x {self.data or 'd'} workers"
            )
        gpn = cluster.per_node
        if cluster.two_level and (gpn % t if t <= gpn else t % gpn):
            raise InvalidParameterError(
                "HybridParallel.tensor", t, f"a divisor or a multiple of gpus_per_node (= {gpn})"
            )
        if cluster.stragglers is not None:
            raise InvalidParameterError(
                "Cluster.stragglers", cluster.stragglers, "None for HybridParallel (give speeds instead)"
            )

    def auto_method(self, workload: Workload, cluster: Cluster) -> tuple[str, str]:
        """Always ``closed_form``: Megatron's analysis (its one road)."""
        return "closed_form", "closed_form: Megatron's analytical model of PTD-P (the scheme's one road)"

    def message_bytes(self, workload: Workload) -> float:
        """``A``: one micro-batch's hidden states, ``b s h`` x 2 bytes (``hidden_bytes`` without a shape)."""
        if self.shape is None:
            return float(self.hidden_bytes)
        return self.shape.boundary_bytes(workload.batch_size)

    def _recompute_share(self, workload: Workload, forward: float) -> float:
        """Extra compute of one micro-batch, as a share of ``C``."""
        if self.recompute == "full":
            return forward
        if self.recompute == "selective":
            s = self.shape
            b = workload.batch_size
            return s.layers * 4.0 * b * s.sequence**2 * s.hidden / s.iteration_flops(b)
        return 0.0

    def times(self, workload: Workload, cluster: Cluster) -> _Times:
        """Every part of one step in seconds (see the module docstring)."""
        t, p, m, v = self.tensor, self.pipeline, self.microbatches, self.virtual_stages
        d = self.replicas(cluster)
        gpn = cluster.per_node
        stretch = 1.0 / float(cluster.speed_factors.min())
        C = workload.compute_time * stretch
        f, bwd = workload.forward_time, workload.backward_time
        forward = f / (f + bwd) if f is not None and bwd and f + bwd > 0 else 1.0 / 3.0
        if self.compute_model is None:
            compute = C * (1.0 + self._recompute_share(workload, forward)) / (t * p)
        else:  # the shape's kernels on one of t ranks, each at its GEMM efficiency
            compute = stretch * self.compute_model.microbatch_time(
                self.shape,
                workload.batch_size,
                tensor=t,
                pipeline=p,
                sequence_parallel=self.sequence_parallel,
                recompute=self.recompute,
            )
        A = self.message_bytes(workload)
        algorithms: dict[str, str] = {}

        def coll(op: str, nbytes: float, ranks: int, per_node: int, tag: str) -> float:
            ct = collective_time(op, nbytes, cluster, ranks, per_node=per_node)
            algorithms[tag] = ct.algorithm
            return ct.seconds

        k_tp = min(t, gpn)
        if self.sequence_parallel:
            one = coll("reduce_scatter", A, t, k_tp, "tp") + coll("allgather", A, t, k_tp, "tp_ag")
        else:
            one = coll("allreduce", A, t, k_tp, "tp")
        per_layer = (6 if self.recompute == "full" else 4) * one
        tp = self.layer_count / p * per_layer
        p2p = 0.0
        if p > 1:
            inside = t * d < gpn
            bw = cluster.intra_bandwidth if inside else cluster.network_bandwidth / gpn
            lat = cluster.intra_latency if inside else cluster.latency
            p2p = 2 * v * (lat + A / t / bw)
        k_dp = math.gcd(d, gpn // t) if t < gpn else 1
        G = workload.gradient_bytes / (t * p)
        P = workload.parameter_bytes / (t * p)
        if self.zero == 0:
            dp = coll("allreduce", G, d, k_dp, "dp")
        elif self.zero in (1, 2):
            dp = coll("reduce_scatter", G, d, k_dp, "dp") + coll("allgather", P, d, k_dp, "dp_ag")
        else:
            dp = m * (2 * coll("allgather", P, d, k_dp, "dp_ag") + coll("reduce_scatter", G, d, k_dp, "dp"))
        update = workload.update_time / (t * p * (d if self.zero else 1))
        return _Times(compute, tp, p2p, dp, update, p, m, v, algorithms)

    def memory(self, workload: Workload, cluster: Cluster) -> Memory:
        """Bytes per GPU of the first stage (see the module docstring, item 7).

        Examples
        --------
        >>> from queuesgd import Workload, Cluster
        >>> w = Workload(1.0, "15GB")                    # 7.5B parameters in 16 bits
        >>> m = HybridParallel(zero=2, layers=60).memory(w, Cluster(64, "1GB/s"))
        >>> round(m.total / 1e9, 1)                      # ZeRO Figure 1, P_os+g
        16.6
        """
        t, p = self.tensor, self.pipeline
        d = self.replicas(cluster)
        s = self.shape
        if s is None:
            P = workload.parameter_bytes / (t * p)
            G = workload.gradient_bytes / (t * p)
            layer = P / max(self.layer_count / p, 1.0)
            act = 0.0
        else:
            nbytes = (
                workload.parameter_bytes / s.parameters
            )  # bytes per parameter, as the workload holds them
            count = (
                s.layers / p * s.block_parameters + s.embedding_parameters + (2 * s.hidden if p == 1 else 0)
            )
            P = G = count * nbytes / t
            layer = s.block_parameters * nbytes / t
            per = layer_activation_bytes(
                s.sequence,
                workload.batch_size,
                s.hidden,
                s.heads,
                tensor=t,
                sequence_parallel=self.sequence_parallel,
                recompute=self.recompute,
            )
            flight = layers_in_flight(s.layers, p, self.microbatches, self.schedule, self.virtual_stages)
            act = per * flight
        gathered = 2 * layer if d > 1 else 0.0
        return hybrid_memory(
            P, G, d, self.zero, optimizer=self.optimizer, gathered_bytes=gathered, activation_bytes=act
        )

    def memory_per_worker(self, workload: Workload, cluster: Cluster) -> Memory:
        """:meth:`memory` (the first stage's, the most any GPU holds)."""
        return self.memory(workload, cluster)

    # ---- the road --------------------------------------------------------------------------------
    def solve_closed_form(
        self, workload: Workload, cluster: Cluster, *, rng: Any = None, iterations: int | None = None
    ) -> SchemeSolution:
        """Megatron's model: ``(m + (p-1)/v) tau + data-parallel collectives + update``."""
        tm = self.times(workload, cluster)
        m = self.microbatches
        breakdown = {
            "compute": m * tm.compute,
            "communication": m * (tm.tp + tm.p2p) + tm.dp,
            "waiting": tm.bubble,
            "update": tm.update,
        }
        exact = isinstance(workload.compute, Deterministic) and len(set(cluster.speed_factors.tolist())) == 1
        reason = (
            f"closed form (Megatron-LM, Narayanan et al. SC'21): t={self.tensor} p={self.pipeline} "
            f"d={self.replicas(cluster)} m={m} {self.schedule}"
            + (f" v={self.virtual_stages}" if self.schedule == "interleaved" else "")
            + f", bubble (p-1)/(v m) = {bubble_fraction(self.pipeline, m, self.virtual_stages):.4g}"
            + (", compute by kernel from the GEMM table" if self.compute_model is not None else "")
            + ", collectives "
            + ", ".join(f"{k} {a}" for k, a in tm.algorithms.items())
            + (
                ""
                if exact
                else "; compute at its mean, paced by the slowest GPU (random or unequal times "
                "make the real step longer)"
            )
        )
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
                "tp_per_microbatch": tm.tp,
                "p2p_per_microbatch": tm.p2p,
                "dp_per_step": tm.dp,
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
        forward + backward on one GPU (backward twice the forward), ``A``
        its hidden states' bytes, ``G`` the model's gradient (= parameter)
        bytes. Equal to :meth:`solve_closed_form` where NCCL's choice is the ring.

        Examples
        --------
        >>> HybridParallel(schedule="interleaved", pipeline=4, microbatches=8, virtual_stages=2).formula(
        ...     quantity="bubble").expr
        (p - 1)/(M*v)
        >>> HybridParallel(tensor=8).formula(quantity="tp_communication").expr
        4*A*(2*t - 2)/(B_intra*t) + 4*alpha_intra*(2*t - 2)
        """
        import sympy

        from queuesgd.formula import Formula

        compute = _checks.choice("compute", compute, ("exponential", "deterministic"))
        quantity = _checks.choice("quantity", quantity, QUANTITIES)
        if compute != "deterministic":
            raise NotRepresentable(
                "HybridParallel has a closed form for deterministic compute only (compute='deterministic')"
            )
        pos = {"positive": True}
        ints = {k: sympy.Symbol(k, integer=True, **pos) for k in ("t", "p", "d", "M", "v", "m", "l")}
        reals = {k: sympy.Symbol(k, **pos) for k in ("C", "B_intra", "B", "G")}
        nonneg = {k: sympy.Symbol(k, nonnegative=True) for k in ("A", "alpha_intra", "alpha", "u", "C_a")}
        sy = {**ints, **reals, **nonneg}
        t, p, d, M, m, l = (sy[k] for k in ("t", "p", "d", "M", "m", "l"))
        v = sy["v"] if self.schedule == "interleaved" else 1
        A, Bi, ai, B, a, G = (sy[k] for k in ("A", "B_intra", "alpha_intra", "B", "alpha", "G"))
        one = ring_allreduce(t, A, Bi, ai)  # = reduce-scatter + all-gather with sequence parallelism
        per_layer = (6 if self.recompute == "full" else 4) * one
        meaning = {
            "t": "tensor-parallel ranks",
            "p": "pipeline stages",
            "d": "data-parallel replicas",
            "M": "micro-batches per step",
            "v": "model chunks per GPU (interleaved)",
            "m": "samples per micro-batch",
            "l": "transformer layers",
            "C": "forward and backward time of one micro-batch, whole model, one GPU, s",
            "C_a": "forward time of the attention cores of one micro-batch, whole model, one GPU, s",
            "A": "activation bytes of one micro-batch (b s h x 2), the TP all-reduce message",
            "B_intra": "bandwidth inside a node, bytes/s",
            "alpha_intra": "latency inside a node, s",
            "B": "link bandwidth per GPU between nodes, bytes/s",
            "alpha": "one-way latency between nodes, s",
            "G": "gradient bytes of the whole model (dense: = parameter bytes)",
            "u": "optimizer step of the whole model, s",
        }
        if quantity == "bubble":
            expr, name = bubble_fraction(p, M, v), "pipeline bubble fraction"
        elif quantity == "tp_communication":
            expr, name = per_layer, "tensor-parallel communication per layer and micro-batch, s"
        else:
            extra = {None: 0, "full": sy["C"] / 3, "selective": sy["C_a"]}[self.recompute]
            tau = (
                (sy["C"] + extra) / (t * p)
                + l / p * per_layer
                + 2 * v * (a + A / (t * B)) * sympy.Min(p - 1, 1)
            )
            Gs = G / (t * p)
            if self.zero == 0:
                dp = ring_allreduce(d, Gs, B, a)
            elif self.zero in (1, 2):
                dp = ring_reduce_scatter(d, Gs, B, a) + ring_allgather(d, Gs, B, a)
            else:
                dp = M * (2 * ring_allgather(d, Gs, B, a) + ring_reduce_scatter(d, Gs, B, a))
            update = sy["u"] / (t * p * (d if self.zero else 1))
            expr = d * M * m / ((M + (p - 1) / v) * tau + dp + update)
            name = f"{self.key} throughput ({self.schedule}, recompute {self.recompute}, ZeRO {self.zero})"
        return Formula.pruned(
            expr,
            sy,
            meaning,
            name,
            "Megatron-LM's model (Narayanan et al. SC'21; Korthikanti et al. 2022): ring collectives, "
            "tensor parallelism inside a node, blocking pipeline sends of A/t, data-parallel collectives "
            "exposed after the flush; deterministic balanced stages",
        )
