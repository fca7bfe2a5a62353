"""Event-driven parameter-server schemes run live: asynchronous PS and stale-synchronous parallel (SSP).

Rank 0 is the PS (:func:`~queuesgd.harness.event_loops.event_ps`): it
applies each gradient as it arrives and replies to its sender; ranks
``1 .. n`` are the workers (:func:`~queuesgd.harness.ps_loops.ps_worker`),
each running its own ``steps``. async-ps is shaped as the closed network of
:class:`~queuesgd.AsyncPS` (FCFS up- and downlink); SSP without link
contention, a worker at clock ``c`` replied to only when every worker's
clock is ``>= c - s``.

Examples
--------
>>> from queuesgd.harness.live_schemes.base import ModelInputs
>>> ASYNC_PS.model({}, ModelInputs(duplex=0.8))
(AsyncPS(service='deterministic', duplex=0.8), 'simulate')
>>> SSP.check_params(None, 3), SSP.gradients_per_update({"staleness": 1}, 3)
({'staleness': 1}, 1)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from queuesgd.harness.event_loops import event_ps
from queuesgd.harness.live_schemes.base import LiveScheme, ModelInputs
from queuesgd.harness.plumbing import reply_group
from queuesgd.harness.ps_loops import ps_worker
from queuesgd.schemes import AsyncPS, StaleSynchronous
from queuesgd.schemes.base import Scheme

__all__ = ["ASYNC_PS", "SSP"]


def _run(ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, **ps: Any) -> None:
    down = reply_group()
    if ctx.rank != 0:
        ps_worker(ctx, key, live, steps, shaper, warmup, seed, down, stop_by_version=False)
    else:
        event_ps(ctx, key, live, steps, shaper, warmup, seed, down, **ps)


def _async_loop(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    _run(ctx, key, live, steps, shaper, warmup, seed, staleness=math.inf, contention=True)


def _ssp_loop(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    # SSP's PS without link contention, as StaleSynchronous models it.
    _run(ctx, key, live, steps, shaper, warmup, seed, staleness=params["staleness"], contention=False)


def _async_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # The live PS applies a gradient in a measured, nearly constant time: a deterministic service.
    return AsyncPS(service="deterministic", duplex=inputs.duplex), "simulate"


def _ssp_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    if inputs.shared:
        return SSP.make(params, link="shared", send_buffer=inputs.send_buffer), "simulate"
    return SSP.make(params), "auto"


def _one(params: Mapping[str, Any], n: int) -> int:
    return 1


#: Asynchronous PS: each gradient applied as it arrives.
ASYNC_PS = LiveScheme(
    AsyncPS,
    "ps",
    _async_loop,
    model_fn=_async_model,
    applied=_one,
    duplex=True,
    apriori={},
    doc="apply on arrival",
)
#: Stale-synchronous parallel: a worker runs at most ``staleness`` clocks ahead of the slowest.
SSP = LiveScheme(
    StaleSynchronous,
    "ps",
    _ssp_loop,
    params=("staleness",),
    model_fn=_ssp_model,
    applied=_one,
    shared_link=True,
    apriori={},
    doc="at most `staleness` clocks ahead of the slowest worker",
)
