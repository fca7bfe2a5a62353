"""Lazy access to PyTorch, an optional dependency of the live harness.

``queuesgd`` and ``queuesgd.harness`` import without torch; every function
that needs it calls :func:`require_torch` first.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, MissingDependencyError

__all__ = ["check_device", "ddp_device_ids", "require_torch", "use_device"]


def require_torch() -> ModuleType:
    """Return the ``torch`` module, or raise a clear error when it is missing.

    Raises
    ------
    MissingDependencyError
        ``torch is not installed: pip install -e ".[validation]" in the queuesgd checkout``.

    Examples
    --------
    >>> try:
    ...     ok = require_torch().__name__ == "torch"
    ... except MissingDependencyError as err:
    ...     ok = str(err) == 'torch is not installed: pip install -e ".[validation]" in the queuesgd checkout'
    >>> ok
    True
    """
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("torch", "validation") from None
    return torch


def use_device(device: str) -> tuple[object, Callable[[], None]]:
    """In a worker process: the ``torch.device`` to compute on, made current, and how to wait for it.

    ``"cpu"`` gives a no-op wait. A CUDA device becomes the process's current
    device (:func:`torch.cuda.set_device`), and the wait is
    :func:`torch.cuda.synchronize`: CUDA kernels and gloo's copies of CUDA
    tensors run asynchronously, so a host clock read after them measures
    nothing until the device is done. Call it in the worker, never in the
    parent: the launcher forks, and CUDA cannot be used in a child of a
    process that initialized it.

    Raises
    ------
    InvalidParameterError
        When ``device`` is not ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, or names
        a CUDA device this machine does not have.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> dev, wait = use_device("cpu")
    >>> str(dev), wait()
    ('cpu', None)
    """
    dev = check_device(device)
    if dev.type == "cpu":
        return dev, lambda: None
    torch = require_torch()
    torch.cuda.set_device(dev)
    return dev, torch.cuda.synchronize


def check_device(device: str, field: str = "device") -> object:
    """The ``torch.device`` ``device`` names, if this machine has it (``"cuda"`` is ``cuda:0``).

    Nothing is made current; CUDA is initialized only to count the devices.

    Raises
    ------
    InvalidParameterError
        When ``device`` is not ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, or names
        a CUDA device this machine does not have (a CPU build of torch has none).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> check_device("cpu")
    device(type='cpu')
    >>> check_device("meta")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: device: got 'meta'; accepted: 'cpu', 'cuda' or 'cuda:N' ...
    """
    name = _checks.device(field, device)
    torch = require_torch()
    dev = torch.device(name)
    if dev.type == "cpu":
        return dev
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = 0 if dev.index is None else dev.index
    if index >= count:
        raise InvalidParameterError(field, name, f"a CUDA device this machine has ({count} found)")
    return torch.device("cuda", index)


def ddp_device_ids(dev: object) -> list[object] | None:
    """DDP's ``device_ids`` for a module on ``dev``: None on the CPU, ``[dev]`` on one CUDA device.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> ddp_device_ids(torch.device("cpu")), ddp_device_ids(torch.device("cuda", 1))
    (None, [device(type='cuda', index=1)])
    """
    return None if getattr(dev, "type", "cpu") == "cpu" else [dev]
