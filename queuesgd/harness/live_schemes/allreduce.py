"""All-reduce schemes run live: ring all-reduce and local SGD (ranks ``0 .. n-1`` are the workers).

The loops are :mod:`~queuesgd.harness.allreduce_loops`'s; see
:mod:`~queuesgd.harness.runners` for what each does and records.

Examples
--------
>>> RING.key, RING.check_params(None, 4), LOCAL_SGD.check_params(None, 4)
('ring-allreduce', {}, {'period': 8})
>>> LOCAL_SGD.model({"period": 3})
(LocalSGD(period=3), 'auto')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd.harness.allreduce_loops import local_sgd, ring_allreduce
from queuesgd.harness.live_schemes.base import LiveScheme
from queuesgd.schemes import LocalSGD, RingAllReduce

__all__ = ["LOCAL_SGD", "RING"]


def _ring(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    ring_allreduce(ctx, key, live, steps, shaper, warmup, seed)


def _local(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    local_sgd(ctx, key, live, steps, shaper, warmup, seed, period=params["period"])


#: Synchronous SGD: compute, ``all_reduce`` the gradients, apply.
RING = LiveScheme(RingAllReduce, "allreduce", _ring, doc="compute; all_reduce / n; apply")
#: Local SGD: ``period`` local steps, then average the models.
LOCAL_SGD = LiveScheme(LocalSGD, "allreduce", _local, params=("period",), doc="H local steps, then average")
