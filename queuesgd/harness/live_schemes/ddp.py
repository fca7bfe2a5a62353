"""DDP run live: PyTorch's ``DistributedDataParallel`` on a real model, predicted as a ring all-reduce.

The loop is :func:`~queuesgd.harness.ddp.ddp_worker` (DDP buckets the
gradients and overlaps their all-reduces with the backward pass itself);
the model is :class:`~queuesgd.RingAllReduce` with DDP's bucket assignment
(``fusion="ddp"``) and the overlap on, predicted tensor by tensor
(``method="fine"``). DDP runs a real model only (a
:class:`~queuesgd.harness.live.RealModel`) and injects no stragglers.

Examples
--------
>>> DDP.key, DDP.layout, DDP.check_params(None, 2), DDP.profile
('ddp', 'allreduce', {'device': 'cpu'}, 'ddp')
>>> scheme, method = DDP.model({})
>>> type(scheme).__name__, scheme.fusion, scheme.overlap, method
('RingAllReduce', 'ddp', True, 'fine')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.harness.ddp import ddp_worker
from queuesgd.harness.live_schemes.base import LiveScheme, ModelInputs, Param, real_model_loop
from queuesgd.schemes import RingAllReduce
from queuesgd.schemes.base import Scheme

__all__ = ["DDP"]


def _model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # DDP's own bucket assignment with its defaults (1 MiB first bucket, 25 MiB cap), as ddp_worker runs it.
    return RingAllReduce(overlap=True, fusion="ddp"), "fine"


#: DistributedDataParallel on a real model.
DDP = LiveScheme(
    RingAllReduce,
    "allreduce",
    real_model_loop(ddp_worker, "DDP trains", "device"),
    model_fn=_model,
    harness=(Param("device", "cpu", lambda v: _checks.device("device", v), "the tensors' device"),),
    profile="ddp",
    apriori={},
    same_run=False,
    name="ddp",
    doc="DistributedDataParallel: bucketed all-reduces overlapping the backward pass",
)
