"""eager-SGD run live: rounds of a partial all-reduce (solo or majority), as :class:`~queuesgd.EagerSGD`.

``collective="coordinator"`` (the default): rank 0 emulates the partial
collectives, which gloo lacks (:func:`~queuesgd.harness.event_loops.eager_ps`);
the workers push and pull as PS workers do. ``collective="ring"``: the same
rounds with the gradients in a real ``all_reduce`` among the workers
(:mod:`~queuesgd.harness.eager_loops`); rank 0 only activates them, and
worker 0 records each round (``role="round"``). Only the ring's runs are the
model's network, so the a-priori protocol runs that one, with the all-reduce
calibration of the ``n`` workers and eager-SGD's own loop profiled
(``profile="eager"``).

Examples
--------
>>> EAGER.check_params(None, 3)
{'mode': 'solo', 'max_stale': 32, 'collective': 'coordinator'}
>>> EAGER.update_role({"collective": "ring"}), EAGER.calibration({"collective": "ring"})
('round', 'allreduce')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.eager_loops import eager_activator, eager_ring_worker
from queuesgd.harness.event_loops import eager_ps
from queuesgd.harness.live_schemes.base import LiveScheme, ModelInputs, Param
from queuesgd.harness.plumbing import reply_group
from queuesgd.harness.ps_loops import ps_worker
from queuesgd.schemes import EagerSGD
from queuesgd.schemes.base import Scheme

__all__ = ["EAGER"]

#: How the rounds move the gradients: emulated by rank 0, or a real all-reduce among the workers.
COLLECTIVES = ("coordinator", "ring")


def _loop(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    import torch.distributed as dist

    down = reply_group()
    mode, max_stale = params["mode"], params["max_stale"]
    if params["collective"] == "ring":
        # The workers' own group for the rounds' all-reduce; rank 0 only activates them.
        ring = dist.new_group(ranks=list(range(1, ctx.world_size)), backend="gloo")
        if ctx.rank == 0:
            eager_activator(ctx, key, steps, warmup, seed, down, shaper, mode=mode, max_stale=max_stale)
        else:
            eager_ring_worker(ctx, key, live, steps, shaper, warmup, seed, down, ring)
    elif ctx.rank != 0:
        ps_worker(ctx, key, live, steps, shaper, warmup, seed, down, stop_by_version=True)
    else:
        eager_ps(ctx, key, live, steps, shaper, warmup, seed, down, mode=mode, max_stale=max_stale)


def _check(params: dict[str, Any], n: int) -> None:
    if params["mode"] == "majority" and n < 2:
        raise InvalidParameterError("mode", params["mode"], "'solo' for a single worker")


def _role(params: Mapping[str, Any]) -> str:
    return "round" if params.get("collective") == "ring" else "ps"


def _model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # How the harness moves the data (collective) is not the model's parameter.
    return EAGER.make(params, activation=inputs.activation), "auto"


#: eager-SGD: partial all-reduce rounds.
EAGER = LiveScheme(
    EagerSGD,
    "ps",
    _loop,
    params=("mode", "max_stale"),
    harness=(
        Param(
            "collective",
            "coordinator",
            lambda v: _checks.choice("collective", v, COLLECTIVES),
            "how the rounds move the gradients: emulated by rank 0, or a real all-reduce",
        ),
    ),
    check=_check,
    role=_role,
    model_fn=_model,
    profile="eager",
    apriori={"collective": "ring"},
    doc="rounds of a partial all-reduce (solo or majority)",
)
