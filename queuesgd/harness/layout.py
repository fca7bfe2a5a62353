"""Which schemes ``queuesgd validate`` runs live, and with which world layout -- read from the live table.

The table is :data:`queuesgd.harness.live_schemes.LIVE` (one
:class:`~queuesgd.harness.live_schemes.LiveScheme` per scheme); a row's
``layout`` is ``"allreduce"`` (ranks ``0 .. n-1`` are the workers) or
``"ps"`` (rank 0 is the parameter server or coordinator, ranks ``1 .. n``
the workers). :data:`LIVE_SCHEMES` holds the rows whose runs can be
compared with a prediction from their own records (``same_run``: all but
DDP, which the a-priori protocol runs).

Examples
--------
>>> LIVE_SCHEMES["ring-allreduce"], live_key("sync-allreduce")
('allreduce', 'ring-allreduce')
>>> world_size("ring-allreduce", 4), world_size("async-ps", 4)
(4, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuesgd import _checks
from queuesgd.harness.live_schemes import LIVE, live_scheme

__all__ = ["LIVE_SCHEMES", "live_key", "world_size"]

#: Scheme key -> world layout (``"allreduce"`` or ``"ps"``) of every scheme ``queuesgd validate`` runs live.
LIVE_SCHEMES: Mapping[str, str] = MappingProxyType({k: row.layout for k, row in LIVE.items() if row.same_run})


def live_key(scheme: Any, field: str = "scheme") -> str:
    """The key of a scheme ``queuesgd validate`` runs live (a key, an alias, or a scheme instance).

    Examples
    --------
    >>> live_key("tree-allreduce")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: scheme: got 'tree-allreduce'; accepted: one of ...
    """
    key = live_scheme(scheme, field).key
    return _checks.choice(field, key, list(LIVE_SCHEMES))


def world_size(scheme_key: str, workers: int) -> int:
    """Processes needed to run ``workers`` workers of a live scheme (``n``, or ``n + 1`` with a PS).

    Examples
    --------
    >>> world_size("sync-allreduce", 2)
    2
    """
    return live_scheme(scheme_key).world_size(workers)
