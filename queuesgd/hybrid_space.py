"""The space of hybrid-parallel configurations a planner searches, and all of it evaluated at once.

A :class:`HybridSpace` names the values tried on each axis -- tensor
parallelism ``t``, pipeline stages ``p``, samples per micro-batch ``b``,
schedule, virtual stages ``v``, activation recomputation, ZeRO stage,
sequence parallelism, context parallelism ``c``, expert parallelism ``e``
(a mixture-of-experts model), the stages' layout, the TP and the
data-parallel overlap -- or leaves an axis at every value that applies.
Data parallelism follows: ``d = workers / (t c p)``
(``HybridParallel.replicas``), and ``m = G / (d b)`` micro-batches per step
for a global batch of ``G`` (the ``c`` ranks of a replica share its
sequences, each holding ``s / c`` of every one).
:func:`evaluate_space` lists every configuration
:class:`~queuesgd.HybridParallel` accepts on the cluster and evaluates them
all in one NumPy pass (:func:`~queuesgd.schemes.parallel.hybrid_batch.batch_times`),
into a :class:`HybridTable`. :func:`queuesgd.plan_parallelism` with
``space="hybrid"`` (or a ``HybridSpace``) runs it and keeps the fastest that
fit.

Which configurations count (the rules of Megatron-LM and of ``HybridParallel``):

- ``t`` divides the workers, the heads, the key-value heads and the MLP's
  inner size (``TransformerShape.check_tensor``), and on a two-level
  cluster packs into nodes (a divisor or a multiple of ``gpus_per_node``);
- ``c`` divides the sequence and ``workers / t`` (the ``c`` ranks are ``t``
  apart; no packing rule of their own);
- ``p`` divides ``workers / (t c)``, and the layers (layout ``"even"``) or,
  layout ``"head-slots"`` (``p > 1``), ``n = (l + 2) / p``
  is whole and ``n >= 2``: the stages hold ``n - 1, n, ..., n, n - 1``
  layers (``HybridParallel(stage_layers=...)``); a ``p`` that does not
  divide the layers appears only with it; ``d`` divides ``G``;
- ``b`` divides ``G / d`` (every replica the same ``m`` whole micro-batches);
- 1F1B and GPipe have ``v = 1``; the interleaved schedule needs ``p > 1``,
  ``m`` a multiple of ``p`` and ``p v`` dividing the layers (``"even"``) or,
  ``"head-slots"``, ``v`` dividing ``n`` with ``n / v >= 2`` (the first
  stage's first chunk and the last stage's last hold ``n / v - 1`` layers,
  the others ``n / v``: :mod:`~queuesgd.schemes.parallel.hybrid_stages`);
- with ``E`` experts, ``e`` divides ``E`` and ``d`` (the experts split
  inside the data-parallel group); without experts ``e = 1``;
- ``tp_overlap="all"`` only with sequence parallelism (HybridParallel's rule);
- duplicates are left out: sequence parallelism and ``tp_overlap`` only with ``t > 1``, a ZeRO
  stage above 0 and ``zero_overlap=True`` only with ``d c > 1`` (ZeRO shards over the ``d c`` ranks
  holding the same parameters, and they alone run data-parallel collectives to overlap; with one
  rank neither changes anything), and for a
  shape with flash attention selective recomputation when None is tried
  too (it reruns nothing there: the same configurations, said in a note), and
  head-slots with ``p = 2`` when ``"even"`` is tried too (for 1F1B and GPipe it is the even split;
  interleaved, its chunks are not the even ones, and it is kept).

Examples
--------
>>> from queuesgd import Cluster
>>> from queuesgd.model_shapes import GPT3_XL
>>> c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
>>> table = evaluate_space(GPT3_XL, c, HybridSpace(), global_batch=512, memory_limit=8e9, flops=150e12)
>>> len(table), int(table["fits"].sum())
(8010, 4220)
>>> r = table.row(table.order()[0])                    # the fastest that fits
>>> r["tensor"], r["pipeline"], r["data"], r["microbatch"], r["zero"], r["sequence_parallel"]
(2, 1, 32, 1, 2, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import product
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.cluster import Cluster
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.hybrid_space_checks import (  # memory_limit_bytes: the planners' reading, exported here too
    axis,
    bool_or,
    boolean_axis,
    check_experts,
    choices,
    divisors,
    global_batch_value,
    memory_limit_bytes,
    microbatch_workloads,
)
from queuesgd.model_shapes import TransformerShape
from queuesgd.schemes.parallel.hybrid_batch import COLUMNS, batch_times
from queuesgd.schemes.parallel.hybrid_checks import check_no_random_stragglers
from queuesgd.schemes.parallel.hybrid_layout import (
    LAYOUTS,
    head_slot_layers,
    head_slots_applies,
    head_slots_interleaved,
)
from queuesgd.schemes.parallel.hybrid_overlap import TP_OVERLAP, tp_overlap_value
from queuesgd.schemes.parallel.megatron import RECOMPUTE, SCHEDULES

__all__ = ["CONFIGURATION", "HybridSpace", "HybridTable", "evaluate_space", "memory_limit_bytes"]

#: The columns of a :class:`HybridTable` that name a configuration (the others are its predictions).
CONFIGURATION: tuple[str, ...] = (
    "tensor",
    "pipeline",
    "data",
    "microbatch",
    "microbatches",
    "schedule",
    "virtual_stages",
    "sequence_parallel",
    "recompute",
    "zero",
    "context",
    "expert_parallel",
    "tp_overlap",
    "layout",
    "zero_overlap",
)


@dataclass(frozen=True)
class HybridSpace:
    """The values :func:`evaluate_space` tries on each axis (``None``: every value that applies).

    Parameters
    ----------
    tensor, pipeline : tuple of int or None
        ``t`` and ``p``. Default: the divisors that apply (module docstring).
    microbatch : tuple of int or None
        Samples per micro-batch ``b``. Default: every divisor of ``G / d``.
    schedule : tuple of str
        Of ``"1f1b"``, ``"gpipe"``, ``"interleaved"`` (names in any case, as ``HybridParallel``'s:
        :mod:`queuesgd.name_checks`; so ``recompute`` and ``layout``). Default 1F1B and
        interleaved (GPipe takes as long as 1F1B in this model and holds more).
    virtual_stages : tuple of int or None
        ``v >= 2`` for the interleaved schedule (1F1B and GPipe rows have ``v = 1``; with one chunk
        Megatron-LM does not interleave). Default: every ``v >= 2`` with ``p v`` dividing the layers.
    recompute : tuple
        Of None, ``"selective"``, ``"full"``. Default all three.
    zero : tuple of int
        ZeRO stages. Default 0 to 3.
    sequence_parallel : tuple of bool
        Default both.
    keep : int
        How many of the fastest configurations that fit :func:`~queuesgd.plan_parallelism`
        predicts one by one and returns as candidates (default 10).
    context : tuple of int or None
        Context-parallel degrees ``c`` (``HybridParallel.context``): each of
        ``c`` ranks holds ``s / c`` of every sequence, ``d = workers / (t c
        p)``. ``None``: every divisor of the sequence that divides the
        workers. Default ``(1,)``, off: context parallelism is for sequences
        too long for one GPU's activations, and at the usual 2048 tokens it
        adds K/V collectives to every layer to save activations that
        recomputation saves too; asking for it (``None`` or the degrees) keeps
        the space of a dense model at sequence 2048 the size it was. A value
        that does not divide the model's sequence is refused by
        :func:`evaluate_space` (``HybridParallel`` refuses it for any cluster).
    expert_parallel : tuple of int or None
        Expert-parallel degrees ``e`` with ``experts`` (divisors of ``E`` and
        of ``d``). ``None`` (the default): every divisor of ``E`` that
        divides ``d``; a dense model (``experts=None``) has only ``e = 1``.
    experts : int or None
        ``E`` experts in every layer's MLP (``HybridParallel.experts``): the
        model's, the same in every row (not an axis). Default None, dense.
    capacity_factor : float
        As ``HybridParallel.capacity_factor`` (default 1.0; only with ``experts``).
    top_k : int
        As ``HybridParallel.top_k`` (default 1; only with ``experts``).
    tp_overlap : tuple of bool or "backward" or "all"
        ``HybridParallel.tp_overlap``: True (``"backward"``), the backward's TP collectives behind the
        weight gradients; ``"all"``, every TP collective pipelined with its GEMM (sequence-parallel
        rows only). Default ``(False,)``, off (as the published predictions); ``(False, True, "all")``
        tries all three (with ``experts`` the MLP's collectives stay exposed, as in HybridParallel).
        The table's column holds False, True or ``"all"``.
    layout : tuple of str
        How the stages split the layers: ``"even"`` (``l / p`` each) and/or ``"head-slots"``
        (the embedding and the output layer each take a layer's slot: ``n - 1, n, ..., n, n - 1``,
        ``n = (l + 2) / p``; :mod:`~queuesgd.schemes.parallel.hybrid_layout`). Default ``("even",)``.
    zero_overlap : tuple of bool
        ``HybridParallel.zero_overlap``: True, the data-parallel collectives overlapped with the
        stage's compute (DDP's buckets, Megatron-Core's ``--overlap-grad-reduce`` and
        ``--overlap-param-gather``, FSDP's prefetch; every ZeRO stage). Default ``(False,)``, off
        (as the published predictions); ``(False, True)`` tries both (True only where ``d c > 1``:
        with one data-parallel rank there is nothing to overlap). The table's column holds booleans.

    Examples
    --------
    >>> HybridSpace(tensor=(8,), recompute=("none", "full")).recompute
    (None, 'full')
    >>> HybridSpace(zero=(4,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridSpace.zero[0]: got 4; accepted: ZeRO stages 0, 1, 2 or 3
    >>> HybridSpace(context=None, experts=8).expert_parallel is None   # every c and e that apply
    True
    >>> HybridSpace(expert_parallel=(3,), experts=8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridSpace.expert_parallel[0]: got 3; accepted: a divisor of ...
    """

    tensor: tuple[int, ...] | None = None
    pipeline: tuple[int, ...] | None = None
    microbatch: tuple[int, ...] | None = None
    schedule: tuple[str, ...] = ("1f1b", "interleaved")
    virtual_stages: tuple[int, ...] | None = None
    recompute: tuple[str | None, ...] = (None, "selective", "full")
    zero: tuple[int, ...] = (0, 1, 2, 3)
    sequence_parallel: tuple[bool, ...] = (False, True)
    keep: int = 10
    context: tuple[int, ...] | None = (1,)
    expert_parallel: tuple[int, ...] | None = None
    experts: int | None = None
    capacity_factor: float = 1.0
    top_k: int = 1
    tp_overlap: tuple[bool | str, ...] = (False,)
    layout: tuple[str, ...] = ("even",)
    zero_overlap: tuple[bool, ...] = (False,)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        n = "HybridSpace"
        for f in ("tensor", "pipeline", "microbatch", "virtual_stages", "context", "expert_parallel"):
            set_(self, f, axis(f"{n}.{f}", getattr(self, f), 2 if f == "virtual_stages" else 1))
        check_experts(self)
        set_(
            self,
            "schedule",
            choices(f"{n}.schedule", self.schedule, SCHEDULES, "'1f1b', 'gpipe', 'interleaved' (any case)"),
        )
        set_(
            self,
            "recompute",
            choices(f"{n}.recompute", self.recompute, RECOMPUTE, "None, 'full' or 'selective' (any case)"),
        )
        set_(self, "zero", choices(f"{n}.zero", self.zero, (0, 1, 2, 3), "ZeRO stages 0, 1, 2 or 3"))
        set_(self, "sequence_parallel", boolean_axis(f"{n}.sequence_parallel", self.sequence_parallel))
        set_(self, "zero_overlap", boolean_axis(f"{n}.zero_overlap", self.zero_overlap))
        ov = self.tp_overlap
        named = ("backward", "all")
        if not (isinstance(ov, (tuple, list)) and ov and all(bool_or(x, named) for x in ov)):
            raise InvalidParameterError(f"{n}.tp_overlap", ov, "a non-empty tuple of True, False, 'all'")
        set_(self, "tp_overlap", tuple(dict.fromkeys(tp_overlap_value(x, f"{n}.tp_overlap") for x in ov)))
        described = "'even' or 'head-slots' (any case)"
        set_(self, "layout", choices(f"{n}.layout", self.layout, LAYOUTS, described))
        set_(self, "keep", _checks.integer(f"{n}.keep", self.keep, minimum=1, maximum=10_000))


def _enumerate(
    space: HybridSpace, shape: TransformerShape, cluster: Cluster, G: int
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every configuration of ``space`` that applies, as integer columns, and notes on unused given values."""
    n, gpn, l = cluster.workers, cluster.per_node, shape.layers
    notes: list[str] = []

    def packs(t: int) -> bool:
        return not cluster.two_level or (gpn % t == 0 if t <= gpn else t % gpn == 0)

    tensors = []
    for t in space.tensor or divisors(n):
        why = (
            f"does not divide the {n} workers"
            if n % t
            else f"does not divide the {shape.heads} heads"
            if shape.heads % t
            else f"does not divide the {shape.kv} key-value heads"
            if shape.kv % t
            else f"does not divide ffn_hidden (= {shape.ffn})"
            if shape.ffn % t
            else f"neither divides nor is a multiple of gpus_per_node (= {gpn})"
            if not packs(t)
            else ""
        )
        if not why:
            tensors.append(t)
        elif space.tensor is not None:
            notes.append(f"tensor {t}: not tried, {why}")
    even, heads = "even" in space.layout, "head-slots" in space.layout

    def layouts(p: int) -> tuple[int, ...]:  # the layouts of 1F1B and GPipe at p (interleaved: below)
        e = even and l % p == 0
        return (0,) * e + (1,) * (heads and head_slots_applies(l, p) and not (e and p == 2))

    def interleaved_layouts(p: int) -> list[tuple[int, int]]:  # (v, layout): even, then head-slots chunks
        vs = space.virtual_stages or range(2, (l + 2) // p + 1)
        out = [(v, 0) for v in vs if even and v <= l // p and l % (p * v) == 0]
        return out + [(v, 1) for v in vs if heads and head_slots_interleaved(l, p, v)]

    for p in space.pipeline or ():
        if not layouts(p):
            why = f"does not divide the {l} layers" if even else "is not a head-slots depth"
            notes.append(f"pipeline {p}: not tried, {why}" + (" nor a head-slots depth" * (even and heads)))
    seq = shape.sequence
    for i, c in enumerate(space.context or ()):
        if seq % c:
            raise InvalidParameterError(
                f"HybridSpace.context[{i}]", c, f"a divisor of the sequence ({seq} tokens)"
            )
    contexts = space.context or [c for c in divisors(seq) if n % c == 0]
    E = space.experts
    ep_axis = (space.expert_parallel or divisors(E)) if E is not None else (1,)
    base: list[tuple[int, ...]] = []
    sizes = divisors(G) if space.microbatch is None else space.microbatch  # b divides G / d, so G
    too_many = 0  # (t, c, p, b) whose m = G / (d b) is above what HybridParallel takes
    for t in tensors:
        for c in contexts:
            if (n // t) % c:
                continue
            for p in space.pipeline or sorted(set(divisors(l)) | set(divisors(l + 2) if heads else ())):
                if not layouts(p) or (n // (t * c)) % p:
                    continue
                d = n // (t * c * p)
                if G % d:
                    continue
                es = [e for e in ep_axis if d % e == 0]
                each = G // d
                for b in sizes:
                    if each % b:
                        continue
                    m = each // b
                    if m > _checks.MAX_COUNT:
                        too_many += 1
                        continue
                    for sched in space.schedule:
                        code, ks = SCHEDULES.index(sched), layouts(p)
                        if sched != "interleaved":
                            vk: Iterable[tuple[int, int]] = [(1, k) for k in ks]
                        elif p == 1 or m % p:
                            continue
                        else:
                            vk = interleaved_layouts(p)
                        base.extend((t, p, d, b, m, code, v, c, e, k) for v, k in vk for e in es)
    # every row takes each of these
    inner_names = ("recompute", "zero", "sequence_parallel", "tp_overlap", "zero_overlap")
    names = tuple(c for c in CONFIGURATION if c not in inner_names)  # base's order: t p d b m sched v c e k
    rows = np.array(base, dtype=np.int64).reshape(-1, len(names))
    inner = np.array(
        [
            (RECOMPUTE.index(rc), z, int(sp), TP_OVERLAP.index(ov), int(zo))
            for rc, z, sp, ov, zo in product(
                space.recompute, space.zero, space.sequence_parallel, space.tp_overlap, space.zero_overlap
            )
        ],
        dtype=np.int64,
    )
    B, K = rows.shape[0], inner.shape[0]
    cols = {name: np.repeat(rows[:, j], K) for j, name in enumerate(names)}
    for j, name in enumerate(inner_names):
        cols[name] = np.tile(inner[:, j], B)
    keep = ((cols["sequence_parallel"] + cols["tp_overlap"] == 0) | (cols["tensor"] > 1)) & (
        (cols["zero"] + cols["zero_overlap"] == 0) | (cols["data"] * cols["context"] > 1)
    )
    keep &= (cols["tp_overlap"] != 2) | (cols["sequence_parallel"] == 1)  # "all" needs SP
    if shape.attention == "flash" and None in space.recompute and "selective" in space.recompute:
        keep &= cols["recompute"] != RECOMPUTE.index("selective")  # reruns nothing: the rows of None
        notes.append("recompute 'selective': left out, with flash attention it is the same as None")
    for ax, given, why in (
        ("context", space.context, f"t c p dividing the {n} workers and d dividing the global batch {G}"),
        ("expert_parallel", space.expert_parallel if E is not None else None, "dividing any d"),
    ):
        used = set(np.unique(rows[:, names.index(ax)]).tolist())
        if B:
            notes.extend(
                f"{ax} {x}: not tried, no configuration with {why}" for x in given or () if x not in used
            )
    for ax, given, why in (  # noted whatever the row count: a table of none says why
        ("microbatch", space.microbatch, f"b must divide a replica's share of the global batch {G}"),
        ("virtual_stages", space.virtual_stages, "interleaved, v chunks of whole layers, M a multiple of p"),
    ):
        used = set(np.unique(rows[:, names.index(ax)]).tolist()) if B else set()
        unused = [x for x in given or () if x not in used]
        notes.extend(f"{ax} {x}: not tried, no configuration takes it ({why})" for x in unused)
    if too_many:
        notes.append(
            f"{too_many:,} (t, c, p, b) left out: m = G / (d b) above {_checks.MAX_COUNT:,} micro-batches "
            "per step (the most HybridParallel.microbatches takes; a larger b or d has fewer)"
        )
    if B and heads and not (rows[:, names.index("layout")] == 1).any():
        notes.append(HEAD_SLOTS_NONE)
    return {k: v[keep] for k, v in cols.items()}, notes


#: The note when no head-slots row applies (the depths ``hybrid_layout`` accepts).
HEAD_SLOTS_NONE = (
    "layout 'head-slots': not tried, no depth applies (GPipe, 1F1B: p > 2 with (l + 2) / p whole; "
    "interleaved: v dividing n = (l + 2) / p with n / v >= 2)"
)


@dataclass(frozen=True)
class HybridTable:
    """Every configuration evaluated, as columns (one entry per configuration).

    Attributes
    ----------
    columns : mapping of str to ndarray
        :data:`CONFIGURATION` (``schedule``, ``recompute`` and ``layout`` as names, None
        for no recomputation), then the predictions of
        :data:`~queuesgd.schemes.parallel.hybrid_batch.COLUMNS` (``throughput`` in
        samples/s, ``memory`` bytes per GPU, ...) and ``fits`` (``memory <= memory_limit``).
    memory_limit : float
        Bytes per GPU.
    shape, cluster, optimizer, flops
        The question (to rebuild row ``i``'s scheme and workload: :meth:`scheme`).
    notes : tuple of str
        Values given on an axis that never apply, and why.
    compute : ComputeModel or None
        The compute model the rows were timed with (``HybridParallel.compute_model``), if any.
    experts : tuple or None
        The model's mixture of experts, ``(E, capacity_factor, top_k)``, or None (dense).
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    columns: Mapping[str, np.ndarray]
    memory_limit: float
    shape: Any
    cluster: Any
    optimizer: Any
    flops: float
    notes: tuple[str, ...] = ()
    compute: Any = None
    experts: tuple[int, float, int] | None = None

    def __len__(self) -> int:
        return len(self.columns["throughput"])

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise InvalidParameterError("column", name, ", ".join(self.columns))
        return self.columns[name]

    def order(self) -> np.ndarray:
        """Indices of the configurations that fit, fastest first (ties: the less memory first)."""
        fit = np.flatnonzero(self.columns["fits"])
        rank = np.lexsort((self.columns["memory"][fit], -self.columns["throughput"][fit]))
        return fit[rank]

    def row(self, i: int) -> dict[str, Any]:
        """Configuration ``i`` and its predictions as plain Python values."""
        out: dict[str, Any] = {}
        for k, col in self.columns.items():
            v = col[int(i)]
            out[k] = v.item() if isinstance(v, np.generic) else v
        return out

    def scheme(self, i: int) -> Any:
        """Row ``i`` as ``(HybridParallel, Workload)``: what ``predict`` takes with :attr:`cluster`."""
        from queuesgd.schemes.parallel.hybrid import HybridParallel

        r, l = self.row(i), self.shape.layers
        moe = {}
        if self.experts is not None:
            moe = dict(zip(("experts", "capacity_factor", "top_k"), self.experts))
        s = HybridParallel(
            tensor=r["tensor"],
            pipeline=r["pipeline"],
            data=r["data"],
            microbatches=r["microbatches"],
            schedule=r["schedule"],
            virtual_stages=r["virtual_stages"],
            sequence_parallel=r["sequence_parallel"],
            recompute=r["recompute"],
            zero=r["zero"],
            shape=self.shape,
            optimizer=self.optimizer,
            compute_model=self.compute,
            context=r["context"],
            expert_parallel=r["expert_parallel"],
            tp_overlap=r["tp_overlap"],
            zero_overlap=r["zero_overlap"],
            stage_layers=None if r["layout"] == "even" else head_slot_layers(l, r["pipeline"]),
            **moe,
        )
        return s, self.shape.workload(r["microbatch"], flops=self.flops, compute=self.compute)

    def to_pandas(self) -> Any:
        """The columns as a :class:`pandas.DataFrame` (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(dict(self.columns))


def _check_inputs(shape: Any, cluster: Any, space: Any, memory_limit: Any, compute: Any) -> float:
    """Refuse what ``predict`` of a row would refuse, or what is not of its type; the limit in bytes."""
    if not isinstance(shape, TransformerShape):
        raise InvalidParameterError("shape", shape, "a TransformerShape(...)")
    if not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster(...)")
    check_no_random_stragglers(cluster)  # as HybridParallel.check
    if not isinstance(space, HybridSpace):
        raise InvalidParameterError("space", space, "a HybridSpace(...)")
    if compute is not None and not isinstance(compute, ComputeModel):
        raise InvalidParameterError("compute", compute, "None or a ComputeModel")
    return memory_limit_bytes(memory_limit)


def evaluate_space(
    shape: TransformerShape,
    cluster: Cluster,
    space: HybridSpace,
    *,
    global_batch: int,
    memory_limit: float,
    optimizer: str | float = 6.0,
    flops: float = 125e12,
    compute: ComputeModel | None = None,
) -> HybridTable:
    """Every configuration of ``space`` for ``shape`` on ``cluster``, evaluated in one NumPy pass.

    Row ``i`` equals ``predict(*table.scheme(i), cluster)`` (its throughput,
    iteration time and memory per GPU; tested to 1e-12 relative).

    Parameters
    ----------
    shape : TransformerShape
    cluster : Cluster
    space : HybridSpace
    global_batch : int
        ``G`` samples per step, the same for every configuration (1 to
        :data:`~queuesgd.hybrid_space_checks.MAX_GLOBAL_BATCH`, ``10**9``).
    memory_limit : float
        Bytes per GPU.
    optimizer : str or float
        Optimizer state per byte of parameters (``HybridParallel.optimizer``).
    flops : float
        The sustained rate of the workloads (``shape.workload(b, flops=flops)``).
    compute : ComputeModel or None
        Kernel times by shape instead of ``flops``: every row's stage and head times from
        :meth:`~queuesgd.compute_model.ComputeModel.stage_times` at its ``b``, ``t``,
        ``p``, sequence parallelism and recomputation (``HybridParallel(compute_model=)``).

    Returns
    -------
    HybridTable

    Examples
    --------
    >>> from queuesgd import Cluster
    >>> from queuesgd.model_shapes import GPT3_XL
    >>> c = Cluster(16, "100Gbit/s", gpus_per_node=8, node_bandwidth="300GB/s", rails=4)
    >>> t = evaluate_space(GPT3_XL, c, HybridSpace(tensor=(8,), pipeline=(2,), recompute=(None,), zero=(0,),
    ...                    sequence_parallel=(False,)), global_batch=16, memory_limit=80e9)
    >>> len(t), sorted(set(int(x) for x in t["microbatch"]))      # d = 1: b divides 16
    (25, [1, 2, 4, 8, 16])
    >>> sorted(set(int(v) for v in t["virtual_stages"][t["schedule"] == "interleaved"]))  # 2 v divides 24
    [2, 3, 4, 6, 12]
    >>> t = evaluate_space(GPT3_XL, c, HybridSpace(tensor=(2,), pipeline=(1,), context=None), global_batch=16,
    ...                    memory_limit=80e9)
    >>> sorted({(int(k), int(d)) for k, d in zip(t["context"], t["data"])})      # c d = 16 / t
    [(1, 8), (2, 4), (4, 2), (8, 1)]
    """
    G = global_batch_value(global_batch)
    memory_limit = _check_inputs(shape, cluster, space, memory_limit, compute)
    cols, notes = _enumerate(space, shape, cluster, G)
    moe = None if space.experts is None else (space.experts, space.capacity_factor, space.top_k)
    kw = {} if moe is None else dict(zip(("experts", "capacity_factor", "top_k"), moe))
    sizes = np.unique(cols["microbatch"]).tolist()
    workloads, over, note = microbatch_workloads(shape, sizes, flops=flops, compute=compute)
    if over:  # one micro-batch computes for longer than a Workload takes
        cols = {k: v[~np.isin(cols["microbatch"], over)] for k, v in cols.items()}
        notes.append(note)
    out = batch_times(shape, cluster, workloads, optimizer=optimizer, compute_model=compute, **cols, **kw)
    named: dict[str, np.ndarray] = {k: cols[k] for k in CONFIGURATION}
    named["schedule"] = np.array(SCHEDULES, dtype=object)[cols["schedule"]]
    named["recompute"] = np.array(RECOMPUTE, dtype=object)[cols["recompute"]]
    named["sequence_parallel"] = cols["sequence_parallel"].astype(bool)
    named["tp_overlap"] = np.array(TP_OVERLAP, dtype=object)[cols["tp_overlap"]]
    named["layout"] = np.array(LAYOUTS, dtype=object)[cols["layout"]]
    named["zero_overlap"] = cols["zero_overlap"].astype(bool)
    named.update({k: out[k] for k in COLUMNS})
    named["fits"] = out["memory"] <= memory_limit
    for v in named.values():
        v.setflags(write=False)
    return HybridTable(
        MappingProxyType(named),
        float(memory_limit),
        shape,
        cluster,
        optimizer,
        float(flops),
        tuple(notes),
        compute,
        moe,
    )
