"""The live validation harness: run a scheme with PyTorch worker processes and compare with the model.

PyTorch is optional (``pip install -e ".[validation]"``) and imported only
when a live run starts. The pieces:

- :func:`validate` (:mod:`~queuesgd.harness.campaign`): calibrate, run,
  profile, predict, compare -- the whole loop, one row per configuration;
- :func:`run_workers` (:mod:`~queuesgd.harness.launch`): fork ``n`` gloo
  processes with timeouts and a clean teardown;
- :mod:`~queuesgd.harness.runners`: one worker loop per scheme;
- :mod:`~queuesgd.harness.live`: emulated (timed-wait) and real (small
  PyTorch model) workloads, straggler injection;
- :mod:`~queuesgd.harness.shaping`, :mod:`~queuesgd.harness.netns`: network
  emulation (application-level alpha-beta shaper; namespaces with ``tc tbf``);
- :mod:`~queuesgd.harness.calibrate`: alpha-beta fits of the network;
- :mod:`~queuesgd.harness.report`: JSON, CSV, plots and the accuracy report.

See ``docs/validation.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "validate": "queuesgd.harness.campaign",
    "ValidationResult": "queuesgd.harness.campaign",
    "LIVE_SCHEMES": "queuesgd.harness.layout",
    "live_key": "queuesgd.harness.layout",
    "run_workers": "queuesgd.harness.launch",
    "WorkerContext": "queuesgd.harness.launch",
    "EmulatedCompute": "queuesgd.harness.live",
    "RealModel": "queuesgd.harness.live",
    "Shaper": "queuesgd.harness.shaping",
    "AlphaBeta": "queuesgd.harness.calibrate",
    "calibrate_allreduce": "queuesgd.harness.calibrate",
    "calibrate_p2p": "queuesgd.harness.calibrate",
    "fit_alpha_beta": "queuesgd.harness.calibrate",
    "Namespaces": "queuesgd.harness.netns",
    "available": "queuesgd.harness.netns",
    "remove_stale": "queuesgd.harness.netns",
    "require_torch": "queuesgd.harness._torch",
    "check_device": "queuesgd.harness._torch",
    "run_fsdp": "queuesgd.harness.fsdp",
    "run_pipeline": "queuesgd.harness.pipelining",
    "profile_stages": "queuesgd.harness.pipelining",
    "predict_fsdp": "queuesgd.harness.apriori_parallel",
    "predict_pipeline": "queuesgd.harness.apriori_parallel",
    "calibrate_parallel": "queuesgd.harness.apriori_parallel",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'queuesgd.harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
