"""``derive``: a scheme's throughput as a SymPy formula.

Examples
--------
>>> from queuesgd import SyncPS, derive
>>> f = derive(SyncPS(), compute="deterministic")
>>> sorted(f.free_names)
['B', 'G', 'P', 'alpha', 'm', 'n', 's', 't', 'u']
"""

from __future__ import annotations

from typing import Any

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.formula import Formula
from queuesgd.schemes.base import Scheme

__all__ = ["derive", "COMPUTE_LAWS"]

#: Compute-time laws ``derive`` knows: exponential (rate ``mu``) and deterministic (time ``t``).
COMPUTE_LAWS = ("exponential", "deterministic")


def derive(scheme: Scheme | str, compute: str = "exponential", **options: Any) -> Formula:
    """The throughput of ``scheme`` (samples per second) as a :class:`~queuesgd.formula.Formula`.

    Parameters
    ----------
    scheme : Scheme or str
        A scheme object, or its CLI name (``"sync-ps"``) for its default parameters.
    compute : {"exponential", "deterministic"}
        The law of a worker's compute time: exponential of rate ``mu`` (the
        expected maximum of ``n`` is ``H_n / mu``) or deterministic ``t``.
    **options
        Passed to the scheme's ``formula`` (e.g. ``workers=4`` for
        :class:`~queuesgd.AsyncPS`, whose MVA has a closed form only for a
        fixed population).

    Returns
    -------
    Formula

    Raises
    ------
    NotRepresentable
        The scheme has no closed form (the message says which method to use).

    Examples
    --------
    >>> from queuesgd import derive
    >>> f = derive("ring-allreduce", compute="deterministic")
    >>> round(f.evaluate(n=8, t=0.1, m=32, S=100e6, B=1.25e9, alpha=0, u=0), 3)   # 256 / (0.1 + 0.14)
    1066.667
    """
    if isinstance(scheme, str):
        from queuesgd.registry import make

        scheme = make(scheme)
    if not isinstance(scheme, Scheme):
        raise InvalidParameterError("scheme", scheme, "a scheme object such as SyncPS(), or its name")
    compute = _checks.choice("compute", compute, COMPUTE_LAWS)
    return scheme.formula(compute, **options)
