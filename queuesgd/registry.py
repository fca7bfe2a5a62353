"""The one registry of schemes: name (and aliases) to scheme class, above :mod:`queuesgd.schemes`.

The CLI, :func:`queuesgd.derive` and the live harness all resolve names here,
so a scheme is registered once and known everywhere. A user scheme can be
registered too (:func:`register`). Which schemes the harness runs live, and
how, is the harness's own table (:data:`queuesgd.harness.live_schemes.LIVE`).

| key | class |
|---|---|
| ``sync-ps`` | :class:`~queuesgd.SyncPS` |
| ``async-ps`` | :class:`~queuesgd.AsyncPS` |
| ``ring-allreduce`` (``sync-allreduce``) | :class:`~queuesgd.RingAllReduce` |
| ``tree-allreduce`` | :class:`~queuesgd.TreeAllReduce` |
| ``hierarchical-allreduce`` | :class:`~queuesgd.HierarchicalAllReduce` |
| ``backup-workers`` | :class:`~queuesgd.BackupWorkers` |
| ``static-cutoff`` | :class:`~queuesgd.StaticCutoff` |
| ``optimal-cutoff``, ``adaptive-cutoff`` | cutoffs |
| ``eager-sgd`` | :class:`~queuesgd.EagerSGD` |
| ``stale-synchronous`` | :class:`~queuesgd.StaleSynchronous` |
| ``local-sgd`` | :class:`~queuesgd.LocalSGD` |
| ``sharded-dp`` (``fsdp``, ``zero``) | :class:`~queuesgd.ShardedDataParallel` |
| ``pipeline`` | :class:`~queuesgd.Pipeline` |
| ``hybrid`` (``3d``, ``megatron``) | :class:`~queuesgd.HybridParallel` |
| ``compressed-allreduce`` | :class:`~queuesgd.CompressedAllReduce` |

Examples
--------
>>> from queuesgd import registry
>>> registry.resolve("sync-allreduce").__name__
'RingAllReduce'
>>> registry.make("backup-workers", backups=2)
BackupWorkers(backups=2, stragglers='finish', link='phase', send_buffer=0.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.schemes import (
    AdaptiveCutoff,
    AsyncPS,
    BackupWorkers,
    CompressedAllReduce,
    EagerSGD,
    HierarchicalAllReduce,
    HybridParallel,
    LocalSGD,
    OptimalCutoff,
    Pipeline,
    RingAllReduce,
    ShardedDataParallel,
    StaleSynchronous,
    StaticCutoff,
    SyncPS,
    TreeAllReduce,
)
from queuesgd.schemes.base import Scheme

__all__ = [
    "ALIASES",
    "SCHEMES",
    "Entry",
    "entries",
    "make",
    "register",
    "resolve",
    "unregister",
]


@dataclass(frozen=True)
class Entry:
    """One registered scheme.

    Attributes
    ----------
    cls : type of Scheme
    aliases : tuple of str
        Other names accepted for it.
    """

    cls: type[Scheme]
    aliases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.cls.key


_ENTRIES: dict[str, Entry] = {}
_ALIAS_OF: dict[str, str] = {}


class _SchemesView(Mapping):
    """Key to scheme class, read-only, following the registry."""

    def __getitem__(self, key: str) -> type[Scheme]:
        return _ENTRIES[key].cls

    def __iter__(self) -> Any:
        return iter(_ENTRIES)

    def __len__(self) -> int:
        return len(_ENTRIES)


#: Key to scheme class of every registered scheme (a live, read-only view).
SCHEMES: Mapping[str, type[Scheme]] = _SchemesView()
#: Alias to key (a live, read-only view).
ALIASES: Mapping[str, str] = MappingProxyType(_ALIAS_OF)


def register(cls: type[Scheme], *, aliases: tuple[str, ...] = ()) -> type[Scheme]:
    """Register a scheme class under its ``key`` (and ``aliases``); returns the class.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> from queuesgd import RingAllReduce
    >>> @dataclass(frozen=True)
    ... class MyRing(RingAllReduce):
    ...     key: ClassVar[str] = "my-ring"
    >>> register(MyRing) is MyRing, resolve("my-ring").__name__
    (True, 'MyRing')
    >>> unregister("my-ring")
    """
    if not (isinstance(cls, type) and issubclass(cls, Scheme)) or not cls.key:
        raise InvalidParameterError("register(cls)", cls, "a Scheme subclass with a non-empty key")
    names = (cls.key, *aliases)
    for name in names:
        taken = _ENTRIES.get(name) or _ENTRIES.get(_ALIAS_OF.get(name, ""))
        if taken is not None and taken.cls is not cls:
            raise InvalidParameterError(
                "register(cls)", name, f"a name not taken (it is {taken.cls.__name__})"
            )
    _ENTRIES[cls.key] = Entry(cls, tuple(aliases))
    for alias in aliases:
        _ALIAS_OF[alias] = cls.key
    return cls


def unregister(key: str) -> None:
    """Remove a registered scheme and its aliases."""
    entry = _ENTRIES.pop(resolve(key).key)
    for alias in entry.aliases:
        _ALIAS_OF.pop(alias, None)


def entries() -> tuple[Entry, ...]:
    """Every registered scheme, in registration order."""
    return tuple(_ENTRIES.values())


def _key(name: Any, field: str) -> str:
    if isinstance(name, Scheme):
        name = name.key
    if isinstance(name, str):
        key = _ALIAS_OF.get(name, name)
        if key in _ENTRIES:
            return key
    raise UnknownNameError(field, name, [*_ENTRIES, *_ALIAS_OF])


def resolve(name: str, field: str = "scheme") -> type[Scheme]:
    """The scheme class of a key or alias; an unknown name is an error listing the known ones.

    Examples
    --------
    >>> resolve("nope")                     # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: scheme: got 'nope'; accepted: ...
    """
    return _ENTRIES[_key(name, field)].cls


def make(name: str, field: str = "scheme", **params: Any) -> Scheme:
    """An instance of the scheme ``name`` with ``params`` (its defaults for the rest).

    Examples
    --------
    >>> make("eager-sgd", mode="majority").mode
    'majority'
    """
    cls = resolve(name, field)
    own = cls.parameters()
    for p in params:
        if p not in own:
            raise InvalidParameterError(
                p, params[p], f"a parameter of {cls.__name__}: {', '.join(own) or 'none'}"
            )
    try:
        return cls(**params)
    except TypeError:
        missing = [
            f.name
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.name not in params
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        raise InvalidParameterError(
            field, name, f"a {cls.__name__}(...) with its required parameters ({', '.join(missing)})"
        ) from None


for _cls, _aliases in (
    (SyncPS, ()),
    (AsyncPS, ()),
    (RingAllReduce, ("sync-allreduce",)),
    (TreeAllReduce, ()),
    (HierarchicalAllReduce, ()),
    (BackupWorkers, ()),
    (StaticCutoff, ()),
    (OptimalCutoff, ()),
    (AdaptiveCutoff, ()),
    (EagerSGD, ()),
    (StaleSynchronous, ()),
    (LocalSGD, ()),
    (ShardedDataParallel, ("fsdp", "zero")),
    (Pipeline, ()),
    (CompressedAllReduce, ()),
    (HybridParallel, ("3d", "megatron")),
):
    register(_cls, aliases=_aliases)
