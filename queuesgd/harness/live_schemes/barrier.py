"""Barrier parameter-server schemes run live: sync PS, backup workers, the static cutoff.

Rank 0 is the PS (:func:`~queuesgd.harness.ps_loops.barrier_ps`), ranks
``1 .. n`` the workers (:func:`~queuesgd.harness.ps_loops.ps_worker`); per
iteration the PS takes fresh gradients until it has all ``n`` / the first
``n - b`` / the cutoff passed, applies their average and replies.

On a real or ``tc tbf``-shaped network a worker pushes as soon as it is done,
while the stragglers still compute: sync PS is then predicted with its fine
model (one tensor, per-message costs, FIFO on the PS link), and backup
workers and the static cutoff (stragglers that finish) with their
shared-link forms (``link="shared"``, every push's arrival on the PS link,
Monte Carlo). The application-level shaper waits out the phase model's
round after the barrier instead, so with it the phase forms stay.

Examples
--------
>>> from queuesgd.harness.live_schemes.base import ModelInputs
>>> SYNC_PS.model({}, ModelInputs())[1], SYNC_PS.model({}, ModelInputs(emulation="app-shaper"))[1]
('fine', 'auto')
>>> BACKUP_WORKERS.gradients_per_update({"backups": 1}, 4), STATIC_CUTOFF.gradients_per_update({}, 4)
(3, 4)
>>> STATIC_CUTOFF.model({"cutoff": 0.03, "stragglers": "finish"}, ModelInputs(send_buffer=100.0))
(StaticCutoff(timeout=0.03, stragglers='finish', link='shared', send_buffer=100.0), 'simulate')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.live_schemes.base import LiveScheme, ModelInputs
from queuesgd.harness.plumbing import reply_group
from queuesgd.harness.ps_loops import barrier_ps, ps_worker
from queuesgd.schemes import BackupWorkers, StaticCutoff, SyncPS
from queuesgd.schemes.base import Scheme

__all__ = ["BACKUP_WORKERS", "STATIC_CUTOFF", "SYNC_PS"]


def _applied(params: Mapping[str, Any], n: int) -> int:
    """Gradients per update: all ``n`` but the backups (the cutoff's update waits for at least one)."""
    return n - params.get("backups", 0)


def _loop(
    ctx: Any, key: str, live: Any, steps: int, shaper: Any, warmup: int, seed: int, params: Mapping[str, Any]
) -> None:
    down = reply_group()
    cancel = params.get("stragglers") == "cancel"
    if ctx.rank != 0:
        ps_worker(ctx, key, live, steps, shaper, warmup, seed, down, stop_by_version=True, cancel=cancel)
        return
    need = _applied(params, ctx.world_size - 1)
    cutoff = params.get("cutoff")
    barrier_ps(ctx, key, live, steps, shaper, warmup, seed, down, need=need, cutoff=cutoff, cancel=cancel)


def _check_backups(params: dict[str, Any], n: int) -> None:
    if params["backups"] >= n:
        raise InvalidParameterError(
            "backups", params["backups"], f"an integer 0 <= backups < workers (= {n})"
        )


def _sync_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # The fine road reads the gradient as one tensor (see queuesgd.harness.campaign.predict_live).
    return SyncPS(), "fine" if inputs.shared else "auto"


def _backup_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    if inputs.shared and params["stragglers"] == "finish":
        return BACKUP_WORKERS.make(params, link="shared", send_buffer=inputs.send_buffer), "simulate"
    return BACKUP_WORKERS.make(params), "auto"


def _cutoff_model(params: Mapping[str, Any], inputs: ModelInputs) -> tuple[Scheme, str]:
    # The harness's cutoff is the scheme's timeout.
    if inputs.shared and params["stragglers"] == "finish":
        return STATIC_CUTOFF.make(params, link="shared", send_buffer=inputs.send_buffer), "simulate"
    return STATIC_CUTOFF.make(params), "auto"


_BARRIER = {
    "layout": "ps",
    "loop": _loop,
    "applied": _applied,
    "profile": "plain",
    "lock_step": True,
    "apriori": {},
}

#: Synchronous PS: the PS waits for all ``n`` gradients.
SYNC_PS = LiveScheme(SyncPS, model_fn=_sync_model, doc="the PS waits for all n gradients", **_BARRIER)
#: Backup workers: the PS applies the first ``n - b`` gradients.
BACKUP_WORKERS = LiveScheme(
    BackupWorkers,
    params=("backups", "stragglers"),
    check=_check_backups,
    model_fn=_backup_model,
    shared_link=True,
    doc="the PS applies the first n - b gradients",
    **_BARRIER,
)
#: Static cutoff: the PS applies the gradients in by the cutoff (at least one).
STATIC_CUTOFF = LiveScheme(
    StaticCutoff,
    params=("cutoff", "stragglers"),
    renamed={"cutoff": "timeout"},
    model_fn=_cutoff_model,
    shared_link=True,
    doc="the PS applies the gradients in by the cutoff (at least one)",
    **_BARRIER,
)
