"""Memory per worker: what a worker holds for training, by kind, reported beside throughput.

Sharded data parallelism (ZeRO, FSDP) and pipeline parallelism trade
throughput for memory, so a prediction of either is incomplete without the
memory each worker needs. :class:`Memory` is that quantity, in bytes, split
as the ZeRO paper splits it (Rajbhandari et al., SC 2020): the parameters,
the gradients, the optimizer state, and the activations kept for the
backward pass. Schemes that report it put it in
``SchemeSolution.details["memory"]``; :attr:`queuesgd.Prediction.memory`
reads it.

The optimizer state is counted in bytes per byte of parameters
(:data:`OPTIMIZER_STATE`): plain SGD keeps none, SGD with momentum one
buffer, Adam two (its first and second moments), each the size of the
parameters. Mixed-precision master copies are not counted separately: give
the parameters' and gradients' bytes as the workload holds them and add a
master copy through ``optimizer_factor`` if the run keeps one (ZeRO's
``K = 12`` bytes per parameter for Adam with fp32 master weights, against 2
bytes per fp16 parameter, is ``optimizer_factor = 6``).

Examples
--------
>>> m = Memory(parameters=4e9, gradients=4e9, optimizer=optimizer_state_bytes(4e9, "adam"))
>>> m.total, m.optimizer
(16000000000.0, 8000000000.0)
>>> m.scaled(parameters=1 / 8, gradients=1 / 8, optimizer=1 / 8).total
2000000000.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.name_checks import name_choice

__all__ = [
    "DEFAULT_UNIT_BYTES",
    "MAX_DEFAULT_UNITS",
    "MAX_OPTIMIZER_STATE",
    "OPTIMIZER_STATE",
    "Memory",
    "check_optimizer",
    "ddp_memory",
    "default_unit_count",
    "optimizer_field",
    "optimizer_state_bytes",
    "profiled_memory",
]

#: Bytes of optimizer state per byte of parameters, by optimizer.
OPTIMIZER_STATE: dict[str, float] = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0}
#: Most optimizer state a number may give, in bytes per byte of parameters (ZeRO's Adam with fp32
#: master weights is 6): far above any optimizer, below the magnitudes that only a typo gives.
MAX_OPTIMIZER_STATE = 1000.0
#: Largest unit of the default cut of a model without a per-layer profile, bytes of parameters: 25 MiB,
#: the bucket PyTorch DDP communicates gradients in by default (``bucket_cap_mb=25``; the ``bucket_cap``
#: default of :class:`~queuesgd.RingAllReduce`).
DEFAULT_UNIT_BYTES = 25 * 2**20
#: Most units of that default cut (a model above 1,024 x 25 MiB = 25 GiB gets larger units), so that
#: one step's task graph stays at a few thousand tasks.
MAX_DEFAULT_UNITS = 1024


def check_optimizer(field: str, value: Any) -> float:
    """The optimizer state factor of ``value``: a name in :data:`OPTIMIZER_STATE` (any case) or a number >= 0.

    A name is read by :func:`queuesgd.name_checks.name_choice` (``"ADAM"`` is ``"adam"``).

    Examples
    --------
    >>> check_optimizer("o", "adam"), check_optimizer("o", " Momentum"), check_optimizer("o", 6)
    (2.0, 1.0, 6.0)
    >>> check_optimizer("opt", "lamb")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: opt: got 'lamb'; accepted: one of 'sgd', ... (any case) or a number ...
    """
    also = f"or a number from 0 to {MAX_OPTIMIZER_STATE:g} (bytes of optimizer state per byte of parameters)"
    if isinstance(value, str):
        return OPTIMIZER_STATE[name_choice(field, value, OPTIMIZER_STATE, also=also)]
    try:
        return float(_checks.positive(field, value, allow_zero=True, maximum=MAX_OPTIMIZER_STATE))
    except InvalidParameterError:
        raise UnknownNameError(field, value, OPTIMIZER_STATE, also=f"(any case) {also}") from None


def optimizer_field(field: str, value: Any) -> Any:
    """A scheme's ``optimizer`` field as kept: a name as listed in :data:`OPTIMIZER_STATE`, a number as given.

    Checked by :func:`check_optimizer`; a name in any case is kept as the listed one, so that
    the field reads the same however it was spelled.

    Examples
    --------
    >>> optimizer_field("o", " ADAM "), optimizer_field("o", 6)
    ('adam', 6)
    """
    check_optimizer(field, value)
    return name_choice(field, value, OPTIMIZER_STATE) if isinstance(value, str) else value


def default_unit_count(parameter_bytes: float) -> int:
    """Units a model without a per-layer profile is cut into (ZeRO, FSDP): ``ceil(P / 25 MiB)``, 1 to 1,024.

    ZeRO stage 3 holds the shard of the training state plus the parameters
    it has gathered for the unit at work (Rajbhandari et al., SC 2020,
    Section 5.3: each partition is broadcast when it is needed and
    discarded after). A model held as one unit would gather all of its
    parameters at once, which is no sharding at all. Without layers to cut
    at, the model is cut into ``k`` units of equal bytes, ``P / k <=``
    :data:`DEFAULT_UNIT_BYTES` (DDP's 25 MiB bucket), at most
    :data:`MAX_DEFAULT_UNITS`. Two such units gathered (with prefetch) are
    a small share of a 1 GB-scale shard: ZeRO's Figure 1 model (7.5e9 fp16
    parameters on 64 GPUs) is 573 units of 26.2 MB, and stage 3 holds 1.875
    GB of shard plus 52 MB gathered.

    Examples
    --------
    >>> default_unit_count(15e9), default_unit_count(100e6), default_unit_count(1e6), default_unit_count(0)
    (573, 4, 1, 1)
    >>> default_unit_count(2e12)       # 1,024 units of 1.95 GB: give layers for a finer cut
    1024
    """
    p = float(_checks.positive("parameter_bytes", parameter_bytes, allow_zero=True))
    return int(min(max(math.ceil(p / DEFAULT_UNIT_BYTES), 1), MAX_DEFAULT_UNITS))


def optimizer_state_bytes(parameter_bytes: float, optimizer: str | float = "adam") -> float:
    """Bytes of optimizer state for ``parameter_bytes`` bytes of parameters.

    Examples
    --------
    >>> optimizer_state_bytes(1e6, "momentum"), optimizer_state_bytes(1e6, "sgd")
    (1000000.0, 0.0)
    """
    return float(parameter_bytes) * check_optimizer("optimizer", optimizer)


@dataclass(frozen=True)
class Memory:
    """Bytes one worker holds for training, by kind.

    Attributes
    ----------
    parameters, gradients, optimizer, activations : float
        Bytes of parameters (including any gathered for the layer at work),
        gradients, optimizer state, and activations kept for the backward
        pass (at their peak).
    transient : float
        Bytes the backward pass holds for a moment beyond the gradients and
        kept activations counted above: the gradient flowing into an
        operation and the one it makes (a language model's logits'
        gradient), a checkpointed segment's recomputed activations. A
        profile predicts it from the step's structure
        (:func:`queuesgd.profiler_memory.backward_peak`, ``transient_bytes``
        in its provenance; :func:`profiled_memory`); 0 where nothing gives
        it. Shown only when not 0.
    ddp_buckets : float
        Bytes of PyTorch DDP's flat gradient buckets, a second copy of the
        gradients that data parallelism adds to a worker
        (:func:`ddp_memory`). Shown only when not 0.

    Examples
    --------
    >>> Memory(1e9, 1e9, 2e9, 5e8)
    Memory(parameters=1 GB, gradients=1 GB, optimizer=2 GB, activations=500 MB, total=4.5 GB)
    >>> Memory(1e9, 1e9, 2e9, 5e8, transient=1e9).total
    5500000000.0
    >>> Memory(1e9, 1e9, 0, ddp_buckets=1e9)
    Memory(parameters=1 GB, gradients=1 GB, optimizer=0 B, activations=0 B, ddp_buckets=1 GB, total=3 GB)
    """

    parameters: float
    gradients: float
    optimizer: float
    activations: float = 0.0
    transient: float = 0.0
    ddp_buckets: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            try:
                object.__setattr__(self, f.name, _checks.positive(f"Memory.{f.name}", v, allow_zero=True))
            except InvalidParameterError:
                raise InvalidParameterError(f"Memory.{f.name}", v, "finite bytes >= 0") from None

    @property
    def total(self) -> float:
        """All of it, bytes."""
        return sum(getattr(self, f.name) for f in fields(self))

    def scaled(self, **factors: float) -> Memory:
        """A copy with some kinds multiplied by a factor (a shard: ``parameters=1 / n``)."""
        unknown = set(factors) - {f.name for f in fields(self)}
        if unknown:
            raise UnknownNameError("Memory.scaled", sorted(unknown)[0], [f.name for f in fields(self)])
        return replace(self, **{k: getattr(self, k) * float(v) for k, v in factors.items()})

    def as_dict(self) -> dict[str, float]:
        """Bytes by kind and ``total``, for tables.

        Examples
        --------
        >>> Memory(1.0, 2.0, 3.0).as_dict()
        {'parameters': 1.0, 'gradients': 2.0, 'optimizer': 3.0, 'activations': 0.0, 'total': 6.0}
        """
        kinds = {f.name: getattr(self, f.name) for f in fields(self)}
        for shown_if_not_zero in ("transient", "ddp_buckets"):
            if not kinds[shown_if_not_zero]:
                del kinds[shown_if_not_zero]
        return {**kinds, "total": self.total}

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={units.format_bytes(v)}" for k, v in self.as_dict().items())
        return f"Memory({parts})"


def profiled_memory(workload: Any) -> Memory | None:
    """One worker's :class:`Memory` from a profile's provenance, the backward pass's transient included.

    Reads what :func:`queuesgd.profile` records: ``parameter_bytes``,
    ``optimizer_state_bytes``, ``kept_activation_bytes`` and
    ``transient_bytes`` (predicted from the step's structure, every device),
    and the workload's gradient bytes. None for a workload without them (a
    hand-written one, or a profile made before they were recorded).

    Examples
    --------
    >>> from queuesgd import Workload
    >>> w = Workload(0.1, "4MB", provenance={"parameter_bytes": 4e6, "optimizer_state_bytes": 4e6,
    ...                                      "kept_activation_bytes": 2e6, "transient_bytes": 3e6})
    >>> profiled_memory(w)
    Memory(parameters=4 MB, gradients=4 MB, optimizer=4 MB, activations=2 MB, transient=3 MB, total=17 MB)
    >>> profiled_memory(Workload(0.1, "4MB")) is None
    True
    """
    prov = getattr(workload, "provenance", None) or {}
    keys = ("parameter_bytes", "optimizer_state_bytes", "kept_activation_bytes", "transient_bytes")
    if not all(k in prov for k in keys):
        return None
    return Memory(
        parameters=prov["parameter_bytes"],
        gradients=float(workload.gradient_bytes),
        optimizer=prov["optimizer_state_bytes"],
        activations=prov["kept_activation_bytes"],
        transient=prov["transient_bytes"],
    )


def ddp_memory(workload: Any) -> Memory | None:
    """One data-parallel worker's :class:`Memory` under PyTorch DDP: the profiled step's, plus DDP's buckets.

    What a worker of synchronous all-reduce data parallelism holds is one
    worker's training step (:func:`profiled_memory`: parameters, gradients,
    optimizer state, kept activations, the backward pass's transient) and
    what ``torch.nn.parallel.DistributedDataParallel`` adds to it: its
    reducer's gradient buckets. The reducer allocates one flat tensor per
    bucket (``bucket.gradients = at::empty(...)`` in
    ``torch/csrc/distributed/c10d/reducer.cpp``), together as large as the
    gradients it reduces (every trainable parameter, a tied one once), and
    keeps them for its life (rebuilt once, in gradient-ready order, at the
    second iteration). With the default ``gradient_as_bucket_view=False``
    each ``.grad`` stays a tensor of its own: the backward pass copies it
    into its bucket (divided by the world size), the all-reduce runs on the
    bucket, and the result is copied back. So the default DDP holds the
    gradients twice: :attr:`Memory.ddp_buckets` is the workload's gradient
    bytes. (``gradient_as_bucket_view=True`` makes each ``.grad`` a view of
    its bucket and saves most of that copy, torch's documentation says up to
    the gradients' size; it is not modeled here.) The buckets do not depend
    on the number of workers; DDP's other state (a used-parameter map, its
    buffers' broadcast) is a few bytes per parameter tensor and is not
    counted. Held against the CPU allocator's peak of a real DDP step
    (``tests/schemes/test_allreduce_memory.py``).

    None for a workload without the profile's memory keys (see
    :func:`profiled_memory`).

    Examples
    --------
    >>> from queuesgd import Workload
    >>> w = Workload(0.1, "4MB", provenance={"parameter_bytes": 4e6, "optimizer_state_bytes": 4e6,
    ...                                      "kept_activation_bytes": 2e6, "transient_bytes": 3e6})
    >>> ddp_memory(w).ddp_buckets, ddp_memory(w).total       # 17 MB of the step, 4 MB of buckets
    (4000000.0, 21000000.0)
    >>> ddp_memory(Workload(0.1, "4MB")) is None
    True
    """
    mem = profiled_memory(workload)
    if mem is None:
        return None
    return replace(mem, ddp_buckets=float(workload.gradient_bytes))
