"""Model-parallel training run live: FSDP2 (fully sharded) and pipelines, on real models.

Both train a real harness model (a :class:`~queuesgd.harness.live.RealModel`,
no injected stragglers) on gloo, every rank a worker (``layout="allreduce"``),
and worker 0's steps carry the updates (``role="worker"``). Neither can be
predicted from its own run's records (``same_run=False``): the a-priori
protocol of :mod:`queuesgd.harness.apriori_parallel` measures the row's
``profile`` and its calibration (``calibrates``) beforehand.

- :data:`FSDP`: ``fully_shard`` per child block with parameters, then the
  root (:func:`~queuesgd.harness.fsdp.fsdp_worker`); the model is
  :class:`~queuesgd.ShardedDataParallel` at stage 3 with neither prefetch nor
  overlap (on a CPU with gloo FSDP2 waits for every collective where it
  issues it; see :func:`~queuesgd.harness.apriori_parallel.predict_fsdp`),
  ``optimizer="momentum"`` (the run's SGD), ``method="fine"``; the units are
  the profile's child blocks, which the prediction sets. The calibration is
  gloo's all-gather and reduce-scatter among the ranks (``"sharded"``).
- :data:`PIPELINE`: ``torch.distributed.pipelining`` with ``D = n / stages``
  replicas (:func:`~queuesgd.harness.pipelining.pipeline_worker`); its
  parameters are :class:`~queuesgd.Pipeline`'s ``stages``, ``microbatches``,
  ``schedule`` and ``split`` (the class's ``partition``, in units: None or
  ``"balanced"`` is the balanced split of a short profile, made by rank 0
  before the stages are built). The live model's ``batch_size`` is a
  micro-batch (each record's ``applied = D x M`` gradients are micro-batch
  gradients, as the model's workload is one micro-batch). The model takes
  ``optimizer="momentum"`` and gloo's rendezvous messages
  (``p2p="rendezvous"``), ``method="fine"``; the prediction sets the
  activation bytes its profile measured and what the pipeline probes
  measured beforehand (``action_overhead``, ``duplex``:
  :mod:`~queuesgd.harness.apriori_parallel.probes`). The calibration is the
  boundary's point-to-point link (``"p2p"``, two ranks).

Examples
--------
>>> FSDP.key, FSDP.layout, FSDP.calibration(), FSDP.model({})[1]
('sharded-dp', 'allreduce', 'sharded', 'fine')
>>> PIPELINE.check_params({"stages": 2, "microbatches": 4}, 4)
{'stages': 2, 'microbatches': 4, 'schedule': '1f1b', 'split': None}
>>> PIPELINE.check_params({"stages": 2, "microbatches": 4}, 3)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
queuesgd.errors.InvalidParameterError: workers: got 3; accepted: a multiple of stages (= 2): D replicas ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.fsdp import fsdp_worker
from queuesgd.harness.live_schemes.base import LiveScheme, ModelInputs, real_model, real_model_loop
from queuesgd.harness.pipelining.units import SCHEDULES
from queuesgd.harness.pipelining.worker import pipeline_worker
from queuesgd.schemes import Pipeline, ShardedDataParallel
from queuesgd.schemes.base import Scheme

__all__ = ["FSDP", "PIPELINE"]


def _fsdp_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # FSDP2 on a CPU with gloo overlaps no collective with the computation (predict_fsdp says why).
    return ShardedDataParallel(stage=3, prefetch=False, overlap=False, optimizer="momentum"), "fine"


def _pipeline_loop(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    live = real_model(live, "a pipeline trains")
    M = params["microbatches"]
    pipeline_worker(
        ctx,
        live.kind,
        params["stages"],
        M,
        steps,
        schedule=params["schedule"],
        batch_size=M * live.batch_size,
        warmup=warmup,
        split=None if params["split"] in (None, "balanced") else params["split"],
        key=key,
        seed=seed,
        model_options=live.sizes(),
    )


def _check_pipeline(params: dict[str, Any], n: int) -> None:
    S, M = params["stages"], params["microbatches"]
    if n % S:
        raise InvalidParameterError(
            "workers", n, f"a multiple of stages (= {S}): D replicas of the {S}-stage pipeline"
        )
    _checks.choice("schedule", params["schedule"], SCHEDULES)
    if params["schedule"] == "1f1b" and M < S:
        # torch's Schedule1F1B refuses fewer micro-batches than stages.
        raise InvalidParameterError("microbatches", M, f"at least the stages ({S}) for 1F1B")


def _pipeline_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # torch's loops on gloo: a message moves once its receive is posted (measure_p2p_rendezvous.py).
    return PIPELINE.make(params, optimizer="momentum", p2p="rendezvous"), "fine"


#: FSDP2 (ZeRO-3) on a real model.
FSDP = LiveScheme(
    ShardedDataParallel,
    "allreduce",
    real_model_loop(fsdp_worker, "FSDP trains"),
    model_fn=_fsdp_model,
    profile="sharded",
    calibrates="sharded",
    same_run=False,
    doc="FSDP2: fully_shard per child block; all-gathers before each unit's passes, reduce-scatters after",
)
#: Pipeline parallelism (GPipe or 1F1B) on a real model, ``n / stages`` replicas.
PIPELINE = LiveScheme(
    Pipeline,
    "allreduce",
    _pipeline_loop,
    params=("stages", "microbatches", "schedule", "split"),
    renamed={"split": "partition"},
    check=_check_pipeline,
    model_fn=_pipeline_model,
    profile="stages",
    calibrates="p2p",
    same_run=False,
    doc="torch.distributed.pipelining: S stages, M micro-batches per step, D = n / S replicas",
)
