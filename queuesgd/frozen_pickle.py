"""Pickling the library's frozen results, whose read-only mappings (``MappingProxyType``) pickle refuses.

A :class:`~queuesgd.Prediction`, a queueing network's MVA result, a task
graph's simulation and the planner's table hold their mappings as
``types.MappingProxyType`` so that no caller can change them; ``pickle``
refuses that type, so none of them could be returned from a worker process
(``multiprocessing``, Dask). :func:`frozen_reduce`, set as a class's
``__reduce__``, pickles such an object as its attributes with every
read-only mapping (nested ones too, and those inside plain tuples) turned
into a plain dict marked as one, and builds it again, read-only, when
loaded. Nothing global is registered: other libraries' mapping proxies
pickle as before (not at all).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

__all__ = ["frozen_reduce"]


class _ReadOnly(dict):  # type: ignore[type-arg]
    """A mapping that was a ``MappingProxyType``, while it is pickled."""


def _down(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return _ReadOnly({k: _down(v) for k, v in value.items()})
    if type(value) is tuple:
        return tuple(_down(v) for v in value)
    return value


def _up(value: Any) -> Any:
    if isinstance(value, _ReadOnly):
        return MappingProxyType({k: _up(v) for k, v in value.items()})
    if type(value) is tuple:
        return tuple(_up(v) for v in value)
    return value


def _rebuild(cls: type, state: dict[str, Any]) -> Any:
    """``cls`` with ``state`` as its attributes, its read-only mappings read-only again (not re-checked)."""
    obj = object.__new__(cls)
    for name, value in state.items():
        object.__setattr__(obj, name, _up(value))
    return obj


def frozen_reduce(self: Any) -> tuple[Any, ...]:
    """``__reduce__`` of a frozen dataclass holding ``MappingProxyType`` mappings (see the module).

    Examples
    --------
    >>> import pickle
    >>> import queuesgd as q
    >>> p = q.predict(q.RingAllReduce(), q.Workload(compute=0.1, gradient_bytes=1e8, batch_size=32),
    ...               q.Cluster(4, "10Gbit/s"))
    >>> back = pickle.loads(pickle.dumps(p))
    >>> back == p, type(back.breakdown).__name__, back.breakdown["compute"] == p.breakdown["compute"]
    (True, 'mappingproxy', True)
    """
    return (_rebuild, (type(self), {name: _down(v) for name, v in vars(self).items()}))
