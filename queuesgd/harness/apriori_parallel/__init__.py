"""The a-priori protocol for fully sharded (FSDP) and pipeline-parallel training.

As for DDP (:mod:`queuesgd.harness.apriori`), a prediction of a live run
uses only inputs measured *before* it, in runs of their own. The live
schemes are rows of the table (:mod:`queuesgd.harness.live_schemes.parallel`:
``FSDP``, ``PIPELINE``); the protocol asks them
(:mod:`~queuesgd.harness.apriori_parallel.run`). By concern:

- :mod:`~queuesgd.harness.apriori_parallel.calibration`: the network, beforehand
  (:func:`calibrate_parallel`: gloo's all-gather and reduce-scatter among the
  FSDP ranks, :class:`ShardedCalibration`; batched point-to-point messages
  for a pipeline's activations);
- :mod:`~queuesgd.harness.apriori_parallel.profile`: FSDP's own step without a
  network (:func:`profile_fsdp`; the pipeline's stage profile is
  :func:`queuesgd.harness.pipelining.profile_stages`);
- :mod:`~queuesgd.harness.apriori_parallel.predict`: :func:`predict_fsdp`
  and :func:`predict_pipeline`, each the row's model on those inputs;
- :mod:`~queuesgd.harness.apriori_parallel.probes`: what a pipeline costs
  besides its passes and one-way messages, probed before the runs
  (:func:`probe_runtime` and :func:`action_overhead`: the runtime's work per
  pass; :func:`calibrate_exchange`: the link's fused exchanges both ways);
- :mod:`~queuesgd.harness.apriori_parallel.run`: the protocol by the table
  (:func:`measure_inputs`, :func:`predict_parallel`, :func:`run_parallel`)
  and the result row (:func:`run_parallel_apriori`).

Examples
--------
>>> from queuesgd.workload import Layer, Workload
>>> layers = [Layer("2.bias", 40.0, 1e-4), Layer("2.weight", 400.0, 2e-4), Layer("0.weight", 64.0, 3e-4)]
>>> fsdp_unit_counts(Workload(0.01, None, layers=layers)), calibration_ranks("p2p", 8)
([1, 2], 2)
"""

from queuesgd.harness.apriori_parallel.calibration import (
    KINDS,
    ShardedCalibration,
    batch_p2p_probe,
    calibrate_parallel,
    calibration_ranks,
    collective_probe,
)
from queuesgd.harness.apriori_parallel.predict import fsdp_unit_counts, predict_fsdp, predict_pipeline
from queuesgd.harness.apriori_parallel.probes import (
    TINY_MICROBATCH,
    TINY_MODEL,
    TINY_OPTIONS,
    ExchangeCalibration,
    action_overhead,
    calibrate_exchange,
    probe_runtime,
    profile_tiny,
)
from queuesgd.harness.apriori_parallel.profile import profile_fsdp
from queuesgd.harness.apriori_parallel.run import (
    PROFILES,
    load_inputs,
    measure_inputs,
    parallel_scheme,
    predict_parallel,
    rebuild_parallel,
    run_parallel,
    run_parallel_apriori,
    save_inputs,
    stored_parallel_inputs,
)

__all__ = [
    "KINDS",
    "PROFILES",
    "TINY_MICROBATCH",
    "TINY_MODEL",
    "TINY_OPTIONS",
    "ExchangeCalibration",
    "ShardedCalibration",
    "action_overhead",
    "batch_p2p_probe",
    "calibrate_exchange",
    "calibrate_parallel",
    "calibration_ranks",
    "collective_probe",
    "fsdp_unit_counts",
    "load_inputs",
    "measure_inputs",
    "parallel_scheme",
    "predict_fsdp",
    "predict_parallel",
    "predict_pipeline",
    "probe_runtime",
    "profile_fsdp",
    "profile_tiny",
    "rebuild_parallel",
    "run_parallel",
    "run_parallel_apriori",
    "save_inputs",
    "stored_parallel_inputs",
]
