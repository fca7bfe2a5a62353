"""The schemes the harness runs live: one :class:`LiveScheme` row each, in one table (:data:`LIVE`).

Runners, campaigns, the a-priori protocol and the CLI find a live scheme here
(:func:`live_scheme`) and ask its row: the world layout, the parameters, the
worker loop, the update role, the calibration, the profile, the model. A
scheme key is written in one place, its row (the model class's ``key``, or
the row's ``name``). One file per family:

- :mod:`~queuesgd.harness.live_schemes.allreduce`: ring all-reduce, local SGD;
- :mod:`~queuesgd.harness.live_schemes.ddp`: PyTorch DDP on a real model;
- :mod:`~queuesgd.harness.live_schemes.barrier`: sync PS, backup workers, static cutoff;
- :mod:`~queuesgd.harness.live_schemes.event`: async PS, SSP;
- :mod:`~queuesgd.harness.live_schemes.eager`: eager-SGD;
- :mod:`~queuesgd.harness.live_schemes.parallel`: FSDP, pipelines.

The contract, field by field, is :mod:`~queuesgd.harness.live_schemes.base`.
Adding a live scheme is one file (its loop, its row) and one line in
:data:`LIVE` (``docs/design.md``, "Adding a live scheme").

Examples
--------
>>> list(LIVE)[:3]
['sync-ps', 'async-ps', 'ring-allreduce']
>>> live_scheme("sync-allreduce").key, live_scheme("ddp").scheme.__name__
('ring-allreduce', 'RingAllReduce')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuesgd import _checks, registry
from queuesgd.harness.live_schemes.allreduce import LOCAL_SGD, RING
from queuesgd.harness.live_schemes.barrier import BACKUP_WORKERS, STATIC_CUTOFF, SYNC_PS
from queuesgd.harness.live_schemes.base import (
    CALIBRATIONS,
    LAYOUTS,
    ROLES,
    LiveScheme,
    Loop,
    ModelInputs,
    Param,
)
from queuesgd.harness.live_schemes.ddp import DDP
from queuesgd.harness.live_schemes.eager import EAGER
from queuesgd.harness.live_schemes.event import ASYNC_PS, SSP
from queuesgd.harness.live_schemes.parallel import FSDP, PIPELINE
from queuesgd.schemes.base import Scheme

__all__ = [
    "CALIBRATIONS",
    "LAYOUTS",
    "LIVE",
    "ROLES",
    "LiveScheme",
    "Loop",
    "ModelInputs",
    "Param",
    "apriori_schemes",
    "live_scheme",
]

#: Every scheme the harness runs live, by key: the one table.
LIVE: Mapping[str, LiveScheme] = MappingProxyType(
    {
        row.key: row
        for row in (
            SYNC_PS,
            ASYNC_PS,
            RING,
            BACKUP_WORKERS,
            STATIC_CUTOFF,
            EAGER,
            SSP,
            LOCAL_SGD,
            DDP,
            FSDP,
            PIPELINE,
        )
    }
)


def live_scheme(name: Any, field: str = "scheme") -> LiveScheme:
    """The row of a live scheme: by key, by a registered alias of its model, or a scheme instance.

    Examples
    --------
    >>> live_scheme("tree-allreduce")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: scheme: got 'tree-allreduce'; accepted: one of ...
    """
    key = name.key if isinstance(name, Scheme) else name
    if isinstance(key, str):
        key = registry.ALIASES.get(key, key)
    return LIVE[_checks.choice(field, key, list(LIVE))]


def apriori_schemes() -> dict[str, str]:
    """Key to calibration kind of the schemes the a-priori protocol runs (rows with ``apriori``).

    Examples
    --------
    >>> apriori_schemes()["ddp"], apriori_schemes()["sync-ps"], "ring-allreduce" in apriori_schemes()
    ('allreduce', 'p2p', False)
    """
    return {k: row.calibration(row.apriori) for k, row in LIVE.items() if row.apriori is not None}
