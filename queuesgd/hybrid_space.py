"""The space of hybrid-parallel configurations a planner searches, and all of it evaluated at once.

A :class:`HybridSpace` names the values tried on each axis -- tensor
parallelism ``t``, pipeline stages ``p``, samples per micro-batch ``b``,
schedule, virtual stages ``v``, activation recomputation, ZeRO stage,
sequence parallelism -- or leaves an axis at every value that applies.
Data parallelism follows: ``d = workers / (t p)``, and ``m = G / (d b)``
micro-batches per step for a global batch of ``G``.
:func:`evaluate_space` lists every configuration
:class:`~queuesgd.HybridParallel` accepts on the cluster and evaluates them
all in one NumPy pass (:func:`~queuesgd.schemes.parallel.hybrid_batch.batch_times`),
into a :class:`HybridTable`. :func:`queuesgd.plan_parallelism` with
``space="hybrid"`` (or a ``HybridSpace``) runs it and keeps the fastest that
fit.

Which configurations count (the rules of Megatron-LM and of ``HybridParallel``):

- ``t`` divides the workers and the heads, and on a two-level cluster
  packs into nodes (a divisor or a multiple of ``gpus_per_node``);
- ``p`` divides the layers and ``workers / t``; ``d`` divides ``G``;
- ``b`` divides ``G / d`` (every replica the same ``m`` whole micro-batches);
- 1F1B and GPipe have ``v = 1``; the interleaved schedule needs ``p > 1``,
  ``m`` a multiple of ``p`` and ``p v`` dividing the layers;
- duplicates are left out: sequence parallelism only with ``t > 1``, a ZeRO
  stage above 0 only with ``d > 1`` (else they change nothing).

Examples
--------
>>> from queuesgd import Cluster
>>> from queuesgd.model_shapes import GPT3_XL
>>> c = Cluster(64, "200Gbit/s", "5us", gpus_per_node=8, node_bandwidth="300GB/s", rails=8)
>>> table = evaluate_space(GPT3_XL, c, HybridSpace(), global_batch=512, memory_limit=8e9, flops=150e12)
>>> len(table), int(table["fits"].sum())
(8010, 4204)
>>> r = table.row(table.order()[0])                    # the fastest that fits
>>> r["tensor"], r["pipeline"], r["data"], r["microbatch"], r["zero"], r["sequence_parallel"]
(2, 1, 32, 1, 2, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from queuesgd import _checks
from queuesgd.compute_model import ComputeModel
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.parallel.hybrid_batch import COLUMNS, batch_times
from queuesgd.schemes.parallel.megatron import RECOMPUTE, SCHEDULES

if TYPE_CHECKING:
    from queuesgd.cluster import Cluster
    from queuesgd.model_shapes import TransformerShape

__all__ = ["CONFIGURATION", "HybridSpace", "HybridTable", "evaluate_space"]

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
)


def _axis(field: str, value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    return tuple(dict.fromkeys(_checks.integers(field, value, maximum=_checks.MAX_COUNT)))


def _choices(field: str, value: Any, accepted: tuple[Any, ...], describe: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or value is None or not isinstance(value, (tuple, list)) or not value:
        raise InvalidParameterError(field, value, f"a non-empty tuple of {describe}")
    out = []
    for i, v in enumerate(value):
        v = None if isinstance(v, str) and v.lower() == "none" and None in accepted else v
        if isinstance(v, str):
            v = v.lower()
        if isinstance(v, bool) and accepted == (0, 1, 2, 3) or v not in accepted:
            raise InvalidParameterError(f"{field}[{i}]", value[i], describe)
        out.append(v)
    return tuple(dict.fromkeys(out))


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
        Of ``"1f1b"``, ``"gpipe"``, ``"interleaved"``. Default 1F1B and
        interleaved (GPipe takes as long as 1F1B in this model and holds more).
    virtual_stages : tuple of int or None
        ``v`` for the interleaved schedule. Default: every ``v >= 2`` with ``p v`` dividing the layers.
    recompute : tuple
        Of None, ``"selective"``, ``"full"``. Default all three.
    zero : tuple of int
        ZeRO stages. Default 0 to 3.
    sequence_parallel : tuple of bool
        Default both.
    keep : int
        How many of the fastest configurations that fit :func:`~queuesgd.plan_parallelism`
        predicts one by one and returns as candidates (default 10).

    Examples
    --------
    >>> HybridSpace(tensor=(8,), recompute=("none", "full")).recompute
    (None, 'full')
    >>> HybridSpace(zero=(4,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: HybridSpace.zero[0]: got 4; accepted: ZeRO stages 0, 1, 2 or 3
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

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        n = "HybridSpace"
        for f in ("tensor", "pipeline", "microbatch", "virtual_stages"):
            set_(self, f, _axis(f"{n}.{f}", getattr(self, f)))
        set_(
            self,
            "schedule",
            _choices(f"{n}.schedule", self.schedule, SCHEDULES, "'1f1b', 'gpipe', 'interleaved'"),
        )
        set_(
            self,
            "recompute",
            _choices(f"{n}.recompute", self.recompute, RECOMPUTE, "None, 'full' or 'selective'"),
        )
        set_(self, "zero", _choices(f"{n}.zero", self.zero, (0, 1, 2, 3), "ZeRO stages 0, 1, 2 or 3"))
        sp = self.sequence_parallel
        if isinstance(sp, (tuple, list)) and sp and all(isinstance(x, (bool, np.bool_)) for x in sp):
            set_(self, "sequence_parallel", tuple(dict.fromkeys(bool(x) for x in sp)))
        else:
            raise InvalidParameterError(f"{n}.sequence_parallel", sp, "a non-empty tuple of True/False")
        set_(self, "keep", _checks.integer(f"{n}.keep", self.keep, minimum=1, maximum=10_000))


def _divisors(x: int) -> list[int]:
    small = [i for i in range(1, int(x**0.5) + 1) if x % i == 0]
    return sorted(set(small) | {x // i for i in small})


def _enumerate(
    space: HybridSpace, shape: TransformerShape, cluster: Cluster, G: int
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every configuration of ``space`` that applies, as integer columns, and notes on unused given values."""
    n, gpn, l = cluster.workers, cluster.per_node, shape.layers
    notes: list[str] = []

    def packs(t: int) -> bool:
        return not cluster.two_level or (gpn % t == 0 if t <= gpn else t % gpn == 0)

    tensors = []
    for t in space.tensor or _divisors(n):
        why = (
            f"does not divide the {n} workers"
            if n % t
            else f"does not divide the {shape.heads} heads"
            if shape.heads % t
            else f"neither divides nor is a multiple of gpus_per_node (= {gpn})"
            if not packs(t)
            else ""
        )
        if not why:
            tensors.append(t)
        elif space.tensor is not None:
            notes.append(f"tensor {t}: not tried, {why}")
    for p in space.pipeline or ():
        if l % p:
            notes.append(f"pipeline {p}: not tried, does not divide the {l} layers")
    base: list[tuple[int, ...]] = []
    for t in tensors:
        for p in space.pipeline or _divisors(l):
            if l % p or (n // t) % p:
                continue
            d = n // (t * p)
            if G % d:
                continue
            each = G // d
            for b in space.microbatch or _divisors(each):
                if each % b:
                    continue
                m = each // b
                for sched in space.schedule:
                    code = SCHEDULES.index(sched)
                    if sched != "interleaved":
                        base.append((t, p, d, b, m, code, 1))
                        continue
                    if p == 1 or m % p:
                        continue
                    for v in space.virtual_stages or range(2, l // p + 1):
                        if l % (p * v) == 0:
                            base.append((t, p, d, b, m, code, v))
    names = ("tensor", "pipeline", "data", "microbatch", "microbatches", "schedule", "virtual_stages")
    rows = np.array(base, dtype=np.int64).reshape(-1, len(names))
    inner = np.array(
        [
            (RECOMPUTE.index(rc), z, int(sp))
            for rc, z, sp in product(space.recompute, space.zero, space.sequence_parallel)
        ],
        dtype=np.int64,
    )
    B, K = rows.shape[0], inner.shape[0]
    cols = {name: np.repeat(rows[:, j], K) for j, name in enumerate(names)}
    for j, name in enumerate(("recompute", "zero", "sequence_parallel")):
        cols[name] = np.tile(inner[:, j], B)
    keep = ((cols["sequence_parallel"] == 0) | (cols["tensor"] > 1)) & (
        (cols["zero"] == 0) | (cols["data"] > 1)
    )
    return {k: v[keep] for k, v in cols.items()}, notes


@dataclass(frozen=True)
class HybridTable:
    """Every configuration evaluated, as columns (one entry per configuration).

    Attributes
    ----------
    columns : mapping of str to ndarray
        :data:`CONFIGURATION` (``schedule`` and ``recompute`` as names, None
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
    """

    columns: Mapping[str, np.ndarray]
    memory_limit: float
    shape: Any
    cluster: Any
    optimizer: Any
    flops: float
    notes: tuple[str, ...] = ()
    compute: Any = None

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

        r = self.row(i)
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
        )
        return s, self.shape.workload(r["microbatch"], flops=self.flops, compute=self.compute)

    def to_pandas(self) -> Any:
        """The columns as a :class:`pandas.DataFrame` (pandas is imported only here)."""
        import pandas as pd

        return pd.DataFrame(dict(self.columns))


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
        ``G`` samples per step, the same for every configuration.
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
    """
    G = _checks.integer("global_batch", global_batch)
    cols, notes = _enumerate(space, shape, cluster, G)
    if compute is not None and not isinstance(compute, ComputeModel):
        raise InvalidParameterError("compute", compute, "None or a ComputeModel")
    workloads = {
        int(b): shape.workload(int(b), flops=flops, compute=compute) for b in np.unique(cols["microbatch"])
    }
    out = batch_times(shape, cluster, workloads, optimizer=optimizer, compute_model=compute, **cols)
    named: dict[str, np.ndarray] = {k: cols[k] for k in CONFIGURATION}
    named["schedule"] = np.array(SCHEDULES, dtype=object)[cols["schedule"]]
    named["recompute"] = np.array(RECOMPUTE, dtype=object)[cols["recompute"]]
    named["sequence_parallel"] = cols["sequence_parallel"].astype(bool)
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
    )
