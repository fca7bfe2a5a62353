"""Real pipeline-parallel training with ``torch.distributed.pipelining`` on gloo, and its stage profile.

A harness model (:func:`queuesgd.harness.models.build`, an ``nn.Sequential``)
is cut into *units*: each child that holds parameters, together with the
parameter-free children that follow it (a ReLU, a pooling, a flatten), so
that every unit has parameters and a gradient to send (:func:`model_units`:
3 units for the MLP, 4 for the CNN, 11 for ``resnet18s``). A pipeline of
``S`` stages takes contiguous runs of units (``split``: ``S`` unit counts,
in forward order; None: the split that minimizes the slowest stage's
forward + backward time in a profile, :func:`balanced_split`).

:func:`run_pipeline` runs ``workers = D x S`` gloo processes: rank
``r S + s`` holds stage ``s`` of replica ``r``. Every rank builds the whole
model from the same seed and keeps its stage's units; a
``torch.distributed.pipelining.PipelineStage`` with static input and output
shapes of one micro-batch (``batch_size / microbatches`` samples), on a
process group of the replica's ``S`` ranks; the schedule
``ScheduleGPipe`` (all forwards, then all backwards; Huang et al., GPipe,
NeurIPS 2019) or ``Schedule1F1B`` (PipeDream-Flush; Narayanan et al., SC
2021) with cross-entropy on the last stage (each micro-batch's mean;
the schedule divides the gradients by ``M``, so a step's gradient is the
whole mini-batch's mean gradient). With ``D > 1`` each stage's gradients
are then averaged across the ``D`` replicas (one all-reduce of the stage's
flattened gradients on a process group of the replicas of that stage).
Then SGD (:func:`~queuesgd.training_optimizer.default_optimizer`), one thread per process.

Each rank reports one record per step: ``t0`` (step start), ``t_backward``
(end of the schedule's step: every micro-batch's forward and backward of
this stage), ``t_allreduce`` (after the replicas' all-reduce; equal to
``t_backward`` when ``D = 1``), ``t_end`` (after the optimizer step),
``applied = D x M`` (micro-batch gradients per update: the throughput is
``applied x micro-batch samples`` per step, as
:func:`queuesgd.harness.run_records.measured_throughput` computes it with
``batch`` the micro-batch size), ``loss`` on the last stage (the mean of
the micro-batch losses). Rank 0 reports ``role: "stages"``: the split,
each stage's parameter bytes and each boundary's activation bytes per
micro-batch, measured from the tensor each stage sent (a forward hook on
the stage's module). With ``report_parameters=True`` every rank reports its
stage's parameters after the last step.

:func:`profile_stages` is the separate profiling run the a-priori
prediction takes its stage times from (:mod:`~queuesgd.harness.pipelining.profile`).
The live table runs the same loop as the row
:data:`~queuesgd.harness.live_schemes.parallel.PIPELINE`.

The modules: :mod:`~queuesgd.harness.pipelining.units` (units, splits),
:mod:`~queuesgd.harness.pipelining.profile` (the stage profile),
:mod:`~queuesgd.harness.pipelining.worker` (a stage's loop) and
:mod:`~queuesgd.harness.pipelining.run` (:func:`run_pipeline`).

Examples
--------
>>> import pytest; _ = pytest.importorskip("torch")
>>> recs = run_pipeline("mlp", 2, 4, steps=3, batch_size=8, warmup=1, split=[1, 2],
...                     model_options={"hidden": 16}, timeout=120)
>>> info = next(r for r in recs if r.get("role") == "stages")
>>> info["split"], info["activation_bytes"]         # 2 samples x 16 floats x 4 bytes leave stage 0
([1, 2], [128])
"""

from queuesgd.harness.pipelining.profile import StageProfile, default_split, profile_stages
from queuesgd.harness.pipelining.run import run_pipeline
from queuesgd.harness.pipelining.units import SCHEDULES, balanced_split, check_split, model_units, unit_count
from queuesgd.harness.pipelining.worker import agreed_split, pipeline_worker

__all__ = [
    "SCHEDULES",
    "StageProfile",
    "agreed_split",
    "balanced_split",
    "check_split",
    "default_split",
    "model_units",
    "pipeline_worker",
    "profile_stages",
    "run_pipeline",
    "unit_count",
]
