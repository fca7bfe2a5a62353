"""A compute model that follows the shape: each kernel's time from its FLOPs, its bytes and a GEMM table.

One sustained FLOP/s rate per model cannot predict a range of model sizes,
micro-batches or tensor-parallel degrees: a GPU runs a large matrix product
near its peak and a small one far below it (the H100 table shipped with
queuesgd: 650-765 TFLOP/s for GPT-3's products, 28-112 TFLOP/s for ``h =
1024`` split 8 ways). :class:`ComputeModel` times every kernel of a
transformer layer (:meth:`~queuesgd.model_shapes.TransformerShape.operations`)
on its own:

- a **matrix product** by the roofline ``max(F / (peak x eff(m, n, k)), Q /
  memory_bandwidth)``, ``F = 2 batch m n k`` its FLOPs, ``Q`` the bytes of
  its operands and result, ``eff`` the :class:`~queuesgd.gemm_table.GemmTable`'s
  efficiency at its shape (interpolated in ``log2(batch m n k)``, clamped
  outside the measured range: see that module);
- a **memory-bound kernel** (layer norm, softmax, dropout, GeLU, residual
  adds) by ``Q / bandwidth``, the table's achieved bandwidth for its kind
  and size where it has one, else ``memory_bandwidth``;
- a **fused attention core** (kind ``"flash"``: FlashAttention, a shape with
  ``attention="flash"``) as a compute-bound kernel by the same roofline, its
  FLOPs (the scores' and the context's products) at the table's measured
  fused-attention efficiency (its ``flash`` rows, :mod:`queuesgd.flash_probe`)
  at the volume of its *scores* product (``b a / t`` products ``(q x d) @
  (d x s)``); a table without such rows gives its GEMM efficiency at that
  volume instead -- an assumption, a stand-in: the tables shipped with
  queuesgd measured plain GEMMs, no fused attention kernel;
- **backward** as twice the forward, every kernel (a product's two backward
  products have its volume, hence its efficiency; a memory-bound kernel's
  backward reads the saved input and the incoming gradient and writes a
  gradient: about twice the forward's traffic -- an assumption), but a flash
  core's: 2.5 times its forward (its backward runs five products against
  the forward's two, recomputing the scores: FlashAttention-2, Section
  3.1.2; :data:`~queuesgd.model_shapes_attention.FLASH_BACKWARD`);
- **recomputation**: ``"full"`` runs every block's forward again,
  ``"selective"`` the attention core's (scores, softmax, dropout, context;
  nothing for a flash core, whose backward already recomputes its scores);
  the output layer is not recomputed (Narayanan et al., SC 2021, eq. 3);
- **stages**: every pipeline stage runs ``l / p`` blocks, the last one the
  output layer too (:meth:`ComputeModel.stage_times`).

The same model then predicts another size, micro-batch or tensor-parallel
degree without a new anchor: only the shapes change.

Examples
--------
>>> from queuesgd.gemm_table import load_gemm_table
>>> from queuesgd.model_shapes import TransformerShape
>>> cm = ComputeModel(load_gemm_table("h100-bf16"), memory_bandwidth="3.35TB/s")
>>> small = TransformerShape(layers=24, hidden=1024, heads=16, sequence=2048, vocabulary=51200)
>>> big = TransformerShape(layers=96, hidden=12288, heads=96, sequence=2048, vocabulary=51200)
>>> [round(cm.achieved_flops(s, 1, tensor=8) / 1e12) for s in (small, big)]   # TFLOP/s of a block
[38, 492]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.gemm_table import GemmTable
from queuesgd.mixture_checks import MAX_CAPACITY_FACTOR, capacity_factor, mixture
from queuesgd.model_shapes import Operation, TransformerShape
from queuesgd.model_shapes_attention import FLASH_BACKWARD

__all__ = ["MAX_CAPACITY_FACTOR", "RECOMPUTE", "ComputeModel", "OperationTime", "check_experts_tuple"]

#: Activation recomputation a micro-batch's time can include.
RECOMPUTE: tuple[str | None, ...] = (None, "full", "selective")


def check_experts_tuple(experts: Any, field: str = "experts") -> tuple[int, int, float, int]:
    """``(E, e, capacity_factor, top_k)`` checked as :class:`~queuesgd.schemes.parallel.hybrid.HybridParallel`
    checks its fields: ``E``, ``e``, ``top_k`` integers >= 1 (at most ``MAX_COUNT``), ``e`` dividing ``E``,
    ``top_k <= E``, ``capacity_factor`` finite, > 0 and at most :data:`MAX_CAPACITY_FACTOR`.

    Examples
    --------
    >>> check_experts_tuple((8, 2, 1.25, 2.0))
    (8, 2, 1.25, 2)
    >>> check_experts_tuple((8, 3, 1.0, 1))
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: experts[1]: got 3; accepted: a divisor of the 8 experts ...
    """
    accepted = "a tuple (experts E, expert-parallel ranks e, capacity_factor, top_k)"
    if isinstance(experts, (str, bytes, Mapping)) or not isinstance(experts, Sequence) or len(experts) != 4:
        raise InvalidParameterError(field, experts, accepted)
    n, (e,), k = mixture(
        (f"{field}[0]", experts[0]),
        [(f"{field}[1]", experts[1])],
        (f"{field}[3]", experts[3]),
        of=f" ({field}[0])",
    )
    return n, e, capacity_factor(f"{field}[2]", experts[2]), k


@dataclass(frozen=True)
class OperationTime:
    """One kernel's forward time and what bounds it.

    Attributes
    ----------
    operation : Operation
    seconds : float
        Forward time.
    bound : str
        ``"compute"`` (the product's efficiency) or ``"memory"`` (its bytes).
    efficiency : float
        The table's efficiency at the product's shape (a flash core: its flash rows' at its scores
        product's volume, else the GEMM curve's there; nan for memory-bound kernels).
    clamped : bool
        The shape (or size) lies outside the table's measured range; its
        efficiency (bandwidth) is the nearest end's.
    """

    operation: Operation
    seconds: float
    bound: str
    efficiency: float
    clamped: bool


@dataclass(frozen=True)
class ComputeModel:
    """Kernel times of a transformer from a GEMM efficiency table and a memory bandwidth (a roofline).

    Parameters
    ----------
    table : GemmTable
        Efficiency by shape (and achieved bandwidth of memory-bound kernels) with its peak FLOP/s.
    memory_bandwidth : float, str or None
        The device memory's bandwidth (``"3.35TB/s"`` for an H100 SXM5): the roofline's
        memory term, and memory-bound kernels' rate where the table has no rows of their kind.
        ``None``: memory traffic is not counted (products at ``F / (peak eff)``, memory-bound
        kernels free unless the table has rows of their kind), the compute-only model.

    Examples
    --------
    >>> from queuesgd.gemm_table import GemmTable
    >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=2e12)
    >>> float(cm.gemm_time(4096, 4096, 4096))         # 2 x 4096^3 / (1e15 x 0.5)
    0.000274877906944
    >>> float(cm.gemm_time(1, 4096, 4096))            # a matrix-vector product: memory bound
    1.6785408e-05
    """

    table: GemmTable
    memory_bandwidth: float | str | None

    def __post_init__(self) -> None:
        if not isinstance(self.table, GemmTable):
            raise InvalidParameterError(
                "ComputeModel.table", self.table, "a GemmTable (load_gemm_table, GemmTable.from_rows)"
            )
        if self.memory_bandwidth is not None:
            bw = units.parse_bandwidth(self.memory_bandwidth, "ComputeModel.memory_bandwidth")
            object.__setattr__(
                self, "memory_bandwidth", _checks.positive("ComputeModel.memory_bandwidth", bw)
            )

    @property
    def _bandwidth(self) -> float:
        return float("inf") if self.memory_bandwidth is None else float(self.memory_bandwidth)

    @property
    def peak_flops(self) -> float:
        """The table's peak FLOP/s."""
        return self.table.peak_flops

    # ---- kernels (vectorized) -------------------------------------------------------------------
    def gemm_time(self, m: Any, n: Any, k: Any, batch: Any = 1, dtype_bytes: int = 2) -> Any:
        """Seconds of ``batch`` products ``(m x k) @ (k x n)``: ``max(F / (peak eff), Q / bandwidth)``.

        Vectorized over ``m, n, k, batch`` (NumPy broadcasting): numbers >= 1;
        ``dtype_bytes`` an integer from 1 to 16, as
        :meth:`~queuesgd.model_shapes.TransformerShape.operations` takes it.

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=2e12)
        >>> cm.gemm_time([1024, 4096], 4096, 4096).tolist()       # 2 m 4096^2 / 0.5e15
        [6.8719476736e-05, 0.000274877906944]
        >>> cm.gemm_time(4096, 4096, 4096, dtype_bytes="2")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: dtype_bytes: got '2'; accepted: an integer >= 1, at most 16
        """
        m, n, k, batch = (_checks.reals(f, x) for f, x in zip(("m", "n", "k", "batch"), (m, n, k, batch)))
        nb = _checks.integer("dtype_bytes", dtype_bytes, maximum=16)
        eff = self.table.efficiency(m, n, k, batch)  # refuses non-finite and < 1, naming the argument
        flops = 2.0 * batch * m * n * k
        traffic = batch * (m * k + k * n + m * n) * nb
        return np.maximum(flops / (self.table.peak_flops * eff), traffic / self._bandwidth)

    def memory_time(self, kind: str, nbytes: Any) -> Any:
        """Seconds of a memory-bound kernel of ``kind`` moving ``nbytes`` (vectorized over ``nbytes``).

        ``nbytes``: finite numbers >= 0 (a number or an array).

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> float(ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), 2e12).memory_time("gelu", 4e9))
        0.002
        >>> ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), 2e12).memory_time("gelu", -1.0)
        Traceback (most recent call last):
        ...
        queuesgd.errors.InvalidParameterError: nbytes: got -1.0; accepted: finite numbers >= 0 of bytes
        """
        accepted = "finite numbers >= 0 of bytes"
        q = _checks.reals("nbytes", nbytes, accepted=accepted)
        if not np.all(np.isfinite(q)) or np.any(q < 0):
            raise InvalidParameterError("nbytes", nbytes if q.ndim == 0 else "an array", accepted)
        return self._memory_seconds(kind, q)

    def _memory_seconds(self, kind: str, nbytes: Any) -> Any:
        """:meth:`memory_time` of checked ``nbytes``."""
        bw = self.table.bandwidth(kind, nbytes)
        return np.asarray(nbytes, dtype=float) / (self._bandwidth if bw is None else bw)

    def operation_times(self, operations: Any) -> tuple[OperationTime, ...]:
        """Each operation's forward time, bound and efficiency (see the module docstring).

        Examples
        --------
        >>> from queuesgd.gemm_table import load_gemm_table
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(load_gemm_table("h100-bf16"), "3.35TB/s")
        >>> ops = TransformerShape(2, 1024, 16, 2048, 51200).operations(1, tensor=8)
        >>> [(o.operation.name, round(o.efficiency, 3)) for o in cm.operation_times(ops)][1:3]
        [('qkv', 0.086), ('scores', 0.055)]
        """
        out = []
        for i, op in enumerate(operations):
            if not isinstance(op, Operation):
                raise InvalidParameterError(
                    f"operations[{i}]", op, "an Operation (TransformerShape.operations)"
                )
            if op.kind in ("gemm", "flash"):  # flash: its measured rows, else its scores product's GEMM
                flash = op.kind == "flash"
                efficiency = self.table.flash_efficiency if flash else self.table.efficiency
                eff = float(efficiency(op.m, op.n, op.k, op.batch))
                flops_time = op.flops / (self.table.peak_flops * eff)
                mem_time = op.bytes / self._bandwidth
                outside = self.table.flash_outside if flash else self.table.outside
                clamped = bool(outside(op.m, op.n, op.k, op.batch))
                bound = "compute" if flops_time >= mem_time else "memory"
                out.append(OperationTime(op, max(flops_time, mem_time), bound, eff, clamped))
            else:
                seconds = float(self._memory_seconds(op.kind, op.bytes))  # an Operation's bytes: checked
                curve = next((c for c in self.table.memory if c[0] == op.kind), None)
                clamped = curve is not None and not curve[1][0] <= np.log2(op.bytes) <= curve[1][-1]
                out.append(OperationTime(op, seconds, "memory", float("nan"), bool(clamped)))
        return tuple(out)

    # ---- a transformer --------------------------------------------------------------------------
    def forward_times(
        self,
        shape: TransformerShape,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        sequence_parallel: bool = False,
        dtype_bytes: int = 2,
    ) -> tuple[float, float]:
        """Forward seconds of one block and of the output layer, one micro-batch on one of ``tensor`` ranks.

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
        >>> t = TransformerShape(2, 1024, 16, 2048, 51200)
        >>> cm.forward_times(t, 1)[0] == t.block_flops(1) / 0.5e15       # memory traffic not counted
        True
        """
        f, _, head = self.block_times(
            shape, microbatch, tensor=tensor, sequence_parallel=sequence_parallel, dtype_bytes=dtype_bytes
        )
        return f, head

    def microbatch_time(
        self,
        shape: TransformerShape,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        pipeline: int = 1,
        sequence_parallel: bool = False,
        recompute: str | None = None,
        dtype_bytes: int = 2,
        context: int = 1,
    ) -> float:
        """Forward + backward (+ recomputation) of one micro-batch on one GPU of the *last* pipeline stage.

        The last stage is the slowest: it holds ``l / p`` blocks and the
        output layer (final layer norm, logits, loss), so it paces the
        pipeline. Its time is ``(l / p) (3 f + r) + 3 f_head``, the sum of
        :meth:`stage_times`; with ``pipeline=1`` that is the whole model.
        ``context``: the rank holds ``s / c`` of each sequence (context
        parallelism; :meth:`~queuesgd.model_shapes.TransformerShape.operations`).

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
        >>> t = TransformerShape(4, 1024, 16, 2048, 51200)
        >>> last = (2 * t.block_flops(1) + t.logits_flops(1)) * 3 / 2 / 0.5e15   # 2 blocks + the head, t = 2
        >>> round(cm.microbatch_time(t, 1, tensor=2, pipeline=2) / last, 12)
        1.0
        """
        blocks, head = self.stage_times(
            shape,
            microbatch,
            tensor=tensor,
            pipeline=pipeline,
            sequence_parallel=sequence_parallel,
            recompute=recompute,
            dtype_bytes=dtype_bytes,
            context=context,
        )
        return blocks + head

    def stage_times(
        self,
        shape: TransformerShape,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        pipeline: int = 1,
        sequence_parallel: bool = False,
        recompute: str | None = None,
        dtype_bytes: int = 2,
        context: int = 1,
        experts: tuple[int, int, float, int] | None = None,
    ) -> tuple[float, float]:
        """One stage's blocks, and the output layer the last stage adds: one micro-batch on one GPU.

        ``experts``: every block's MLP a mixture of experts (:meth:`block_parts`).

        ``(l / p) (f + f_b + r)`` and ``3 f_head``: ``f`` a block's forward on one
        of ``t`` ranks, ``f_b`` its backward (``2 f``; plus half a flash
        core's forward), ``r`` its recomputation (``f`` for ``"full"``, the
        eager attention core's forward for ``"selective"``, 0 for a flash
        core: :meth:`block_parts`), ``f_head`` the output
        layer's forward (vocabulary-parallel over ``t``), never recomputed
        (Narayanan et al., SC 2021, eq. 3). Every stage runs the blocks; the
        last one also runs the head. The first stage's embedding lookup is
        not counted (a gather of ``b s h`` values; its backward a scatter-add
        of as many).

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
        >>> t = TransformerShape(4, 1024, 16, 2048, 51200)
        >>> blocks, head = cm.stage_times(t, 1, pipeline=2)
        >>> r = 0.5e15                                               # peak x efficiency
        >>> round(blocks * r / (2 * 3 * t.block_flops(1)), 12), round(head * r / (3 * t.logits_flops(1)), 12)
        (1.0, 1.0)
        """
        if recompute not in RECOMPUTE:
            raise InvalidParameterError("recompute", recompute, "None, 'full' or 'selective'")
        p = _checks.integer("pipeline", pipeline, maximum=_checks.MAX_COUNT)
        f, bwd, core, head = self.block_parts(
            shape,
            microbatch,
            tensor=tensor,
            sequence_parallel=sequence_parallel,
            dtype_bytes=dtype_bytes,
            context=context,
            experts=experts,
        )
        r = {None: 0.0, "full": f, "selective": core}[recompute]
        return float(shape.layers / p * (f + bwd + r)), float(3.0 * head)

    def block_times(
        self,
        shape: TransformerShape,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        sequence_parallel: bool = False,
        dtype_bytes: int = 2,
        context: int = 1,
    ) -> tuple[float, float, float]:
        """Forward seconds of one block, of its selective recomputation, and of the output layer, on one rank.

        :meth:`block_parts` without the backward: ``f``, the selective
        recomputation's ``r`` (the eager attention core's forward; 0 for a
        flash core) and the head's forward.

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
        >>> t = TransformerShape(2, 1024, 16, 2048, 51200)
        >>> f, core, head = cm.block_times(t, 1)
        >>> core == 4 * 2048**2 * 1024 / 0.5e15, head == t.logits_flops(1) / 0.5e15   # 4 b s^2 h FLOPs
        (True, True)
        """
        kw = {"tensor": tensor, "sequence_parallel": sequence_parallel, "dtype_bytes": dtype_bytes}
        f, _, core, head = self.block_parts(shape, microbatch, context=context, **kw)
        return f, core, head

    def block_parts(
        self,
        shape: TransformerShape,
        microbatch: int = 1,
        *,
        tensor: int = 1,
        sequence_parallel: bool = False,
        dtype_bytes: int = 2,
        context: int = 1,
        experts: tuple[int, int, float, int] | None = None,
    ) -> tuple[float, float, float, float]:
        """One block's forward and backward seconds, its selective recomputation's, the head's forward.

        On one of ``tensor`` ranks, one micro-batch: the sums :meth:`stage_times`
        combines, for callers that combine them over many pipeline depths and
        recomputations at once (:func:`~queuesgd.schemes.parallel.hybrid_batch.batch_times`).
        The backward is twice the forward, plus ``FLASH_BACKWARD - 2 = 0.5``
        times a flash core's forward; the selective recomputation is the
        forward of the attention core's eager kernels (a flash core has none
        to rerun).

        ``experts = (E, e, capacity_factor, top_k)``: the block's MLP is a
        mixture of ``E`` experts over ``e`` expert-parallel ranks. Each of the
        ``T = b s / c`` tokens of a rank goes to ``top_k`` experts, each expert
        taking at most ``ceil(capacity_factor x top_k x T / E)`` of them from each
        rank (Megatron-Core's capacity, padded to it), so each of the ``E / e``
        local experts runs the MLP's kernels
        (:meth:`~queuesgd.model_shapes.TransformerShape.mlp_operations`) on ``e``
        such buffers, one expert after the other, each at its own GEMM
        efficiency (smaller products than the dense MLP's); the all-to-alls
        are communication, not timed here.

        Examples
        --------
        >>> from queuesgd.gemm_table import GemmTable
        >>> from queuesgd.model_shapes import TransformerShape
        >>> cm = ComputeModel(GemmTable.constant(0.5, peak_flops=1e15), memory_bandwidth=None)
        >>> t = TransformerShape(2, 1024, 16, 2048, 51200, attention="flash")
        >>> f, bwd, core, head = cm.block_parts(t, 1)
        >>> bwd == 2 * f + 0.5 * (4 * 2048**2 * 1024 / 0.5e15), core     # 2.5 x the flash core's forward
        (True, 0.0)
        >>> moe = cm.block_parts(t, 1, experts=(8, 2, 1.0, 2))[0]         # 8 experts on 2 ranks, top-2
        >>> round((moe - f) / (2 * 2 * 2048 * 1024 * 4096 / 0.5e15), 12)  # one more MLP's products
        1.0
        """
        if not isinstance(shape, TransformerShape):
            raise InvalidParameterError("shape", shape, "a TransformerShape")
        mix = None if experts is None else check_experts_tuple(experts)
        kw = {"tensor": tensor, "sequence_parallel": sequence_parallel, "dtype_bytes": dtype_bytes}
        kw["context"] = context
        block = self.operation_times(shape.operations(microbatch, **kw))
        f = sum(o.seconds for o in block)
        if mix is not None:
            f += self._experts_extra(shape, microbatch, mix, tensor, context, dtype_bytes)
        flash = sum(o.seconds for o in block if o.operation.kind == "flash")
        core = sum(o.seconds for o in block if o.operation.core and o.operation.kind != "flash")
        head = sum(o.seconds for o in self.operation_times(shape.head_operations(microbatch, **kw)))
        return float(f), float(2.0 * f + (FLASH_BACKWARD - 2.0) * flash), float(core), float(head)

    def _experts_extra(
        self, shape: TransformerShape, microbatch: int, experts: tuple[int, int, float, int], tensor: int,
        context: int, dtype_bytes: int,
    ) -> float:
        """The local experts' MLP kernels less the dense MLP's: what :meth:`block_parts` adds for them."""
        n, e, cf, k = experts
        tokens = microbatch * shape.sequence // context  # the rank's tokens, whole over t (dispatcher)
        rows = e * math.ceil(cf * k * tokens / n)
        local = self.operation_times(shape.mlp_operations(rows, tensor=tensor, dtype_bytes=dtype_bytes))
        dense = self.operation_times(shape.mlp_operations(tokens, tensor=tensor, dtype_bytes=dtype_bytes))
        return n // e * sum(o.seconds for o in local) - sum(o.seconds for o in dense)

    def achieved_flops(self, shape: TransformerShape, microbatch: int = 1, *, tensor: int = 1) -> float:
        """FLOP/s one of ``tensor`` ranks sustains over a block's forward: its FLOPs over its time."""
        f, _ = self.forward_times(shape, microbatch, tensor=tensor)
        return shape.block_flops(microbatch) / tensor / f
