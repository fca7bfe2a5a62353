"""The training step's default optimizer: SGD with learning rate 0.01 and momentum 0.9.

:func:`queuesgd.profile` times this optimizer's step when it is given none,
and the live harness (:mod:`~queuesgd.harness.ddp`, :mod:`~queuesgd.harness.fsdp`,
:mod:`~queuesgd.harness.contention`, :mod:`~queuesgd.harness.pipelining`)
trains with it: the a-priori predictions price a live run's optimizer step with
the profile's, so both build it here. Importing this module imports no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuesgd.harness import require_torch

__all__ = ["LEARNING_RATE", "MOMENTUM", "default_optimizer"]

#: SGD's learning rate in the profile's and the live runs' training step.
LEARNING_RATE = 0.01
#: SGD's momentum there (one momentum buffer per parameter).
MOMENTUM = 0.9


def default_optimizer(parameters: Iterable[Any]) -> Any:
    """``torch.optim.SGD(parameters, lr=LEARNING_RATE, momentum=MOMENTUM)``.

    Parameters
    ----------
    parameters : iterable of torch.Tensor or of parameter groups
        What the optimizer updates, as :class:`torch.optim.SGD` takes it.

    Returns
    -------
    torch.optim.SGD

    Raises
    ------
    MissingDependencyError
        When torch is not installed.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> opt = default_optimizer(torch.nn.Linear(2, 1).parameters())
    >>> type(opt).__name__, opt.defaults["lr"], opt.defaults["momentum"]
    ('SGD', 0.01, 0.9)
    """
    return require_torch().optim.SGD(parameters, lr=LEARNING_RATE, momentum=MOMENTUM)
