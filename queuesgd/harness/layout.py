"""Which schemes the live harness runs, and with which world layout -- read from :mod:`queuesgd.registry`.

The registry's ``live`` column is the only table: ``"allreduce"`` (ranks
``0 .. n-1`` are the workers) or ``"ps"`` (rank 0 is the parameter server or
coordinator, ranks ``1 .. n`` the workers).

Examples
--------
>>> LIVE_SCHEMES["ring-allreduce"], live_key("sync-allreduce")
('allreduce', 'ring-allreduce')
>>> world_size("ring-allreduce", 4), world_size("async-ps", 4)
(4, 5)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from queuesgd import _checks, registry
from queuesgd.schemes.base import Scheme

__all__ = ["LIVE_SCHEMES", "live_key", "world_size"]


class _LiveView(Mapping):
    """Scheme key -> world layout, for the registered schemes with a live runner (follows the registry)."""

    def _table(self) -> dict[str, str]:
        return {e.key: e.live for e in registry.entries() if e.live is not None}

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


#: Scheme key -> world layout (``"allreduce"`` or ``"ps"``) of every scheme the harness runs live.
LIVE_SCHEMES: Mapping[str, str] = _LiveView()


def live_key(scheme: Any, field: str = "scheme") -> str:
    """The registry key of a scheme the harness runs live (a key, an alias, or a scheme instance).

    Examples
    --------
    >>> live_key("tree-allreduce")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: scheme: got 'tree-allreduce'; accepted: one of ...
    """
    name = scheme.key if isinstance(scheme, Scheme) else scheme
    if isinstance(name, str):
        name = registry.ALIASES.get(name, name)
    return _checks.choice(field, name, list(LIVE_SCHEMES))


def world_size(scheme_key: str, workers: int) -> int:
    """Processes needed to run ``workers`` workers of a scheme (``n``, or ``n + 1`` with a PS).

    Examples
    --------
    >>> world_size("sync-allreduce", 2)
    2
    """
    key = live_key(scheme_key)
    n = _checks.integer("workers", workers)
    return n if LIVE_SCHEMES[key] == "allreduce" else n + 1
