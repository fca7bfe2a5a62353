"""Lazy access to PyTorch, an optional dependency of the live harness.

``queuesgd`` and ``queuesgd.harness`` import without torch; every function
that needs it calls :func:`require_torch` first.
"""

from __future__ import annotations

from types import ModuleType

from queuesgd.errors import MissingDependencyError

__all__ = ["require_torch"]


def require_torch() -> ModuleType:
    """Return the ``torch`` module, or raise a clear error when it is missing.

    Raises
    ------
    MissingDependencyError
        ``torch is not installed: pip install queuesgd[validation]``.

    Examples
    --------
    >>> try:
    ...     ok = require_torch().__name__ == "torch"
    ... except MissingDependencyError as err:
    ...     ok = str(err) == "torch is not installed: pip install queuesgd[validation]"
    >>> ok
    True
    """
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "validation") from None
    return torch
