"""Seconds an operation takes as a piecewise-linear function of its size in bytes: :class:`CostCurve`.

Plain data, as :class:`~queuesgd.workload.Workload` holds it (``add_cost``:
the GPU vector addition of a reduction). :func:`byte_sizes` checks the sizes
a curve, or a workload's reduction time, is asked for.

Examples
--------
>>> CostCurve([0, 100], [1.0, 3.0])(25)
1.5
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.catalog_files import load_vector_add_curve
from queuesgd.errors import InvalidParameterError
from queuesgd.sequence_checks import items
from queuesgd.units import parse_bytes, parse_seconds

__all__ = ["CostCurve", "byte_sizes"]


@dataclass(frozen=True, repr=False)
class CostCurve:
    """Seconds an operation takes as a function of its size in bytes (piecewise linear).

    Plain data: measured points ``(sizes[i], times[i])``, for instance the
    GPU vector-addition curve of the catalog (``cuda_vec_add.log``), which
    gives the reduction cost of a ring all-reduce. Calling the curve
    interpolates it:

    - between two points, linearly (as the traces' authors do);
    - below the smallest size, the smallest size's time (a fixed launch cost);
    - above the largest size, the last segment extrapolated linearly (the
      curve is linear in the size there); a negative extrapolation (a last
      segment that falls) is clipped at 0.

    Parameters
    ----------
    sizes : sequence of float
        Sizes in bytes, ``>= 0`` and strictly increasing; at least two.
    times : sequence of float
        Seconds at those sizes, ``>= 0``; one per size.

    Examples
    --------
    >>> curve = CostCurve([0, 100], [1.0, 3.0])
    >>> curve
    CostCurve(sizes=(0.0, 100.0), times=(1.0, 3.0))
    >>> curve(25), curve(200)
    (1.5, 5.0)
    >>> curve([50, 150])
    array([2., 4.])
    >>> CostCurve.from_file()  # the catalog's V100 vector-add curve
    CostCurve(<25 points: 40 B to 6.71089e+08 B, 1.04448e-05 s to 0.00243368 s>)
    """

    sizes: tuple[float, ...]
    times: tuple[float, ...]

    def __post_init__(self) -> None:
        accepted = "strictly increasing sizes in bytes (>= 0), at least two"
        sizes = _float_tuple("CostCurve.sizes", self.sizes, accepted, parse_bytes)
        if len(sizes) < 2 or any(b <= a for a, b in zip(sizes, sizes[1:])):
            raise InvalidParameterError("CostCurve.sizes", self.sizes, accepted)
        times_accepted = f"one time in seconds (>= 0) per size ({len(sizes)} values)"
        times = _float_tuple("CostCurve.times", self.times, times_accepted, parse_seconds)
        if len(times) != len(sizes):
            raise InvalidParameterError("CostCurve.times", self.times, times_accepted)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "times", times)

    def __repr__(self) -> str:
        if len(self.sizes) <= 4:
            return f"CostCurve(sizes={self.sizes!r}, times={self.times!r})"
        return (
            f"CostCurve(<{len(self.sizes)} points: {self.sizes[0]:.6g} B to {self.sizes[-1]:.6g} B, "
            f"{self.times[0]:.6g} s to {self.times[-1]:.6g} s>)"
        )

    def __call__(self, nbytes: Any) -> float | np.ndarray:
        """Seconds for ``nbytes`` bytes (a float for a scalar, an array of the same shape otherwise).

        A unit string (``"64MiB"``) is accepted for a scalar.

        Examples
        --------
        >>> CostCurve([0, 100], [1.0, 3.0])("50B")
        2.0
        """
        x = byte_sizes(nbytes)
        xs = np.asarray(self.sizes)
        ys = np.asarray(self.times)
        out = np.interp(x, xs, ys)
        above = x > xs[-1]
        if np.any(above):
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            out = np.where(above, np.maximum(ys[-1] + slope * (x - xs[-1]), 0.0), out)
        return float(out) if out.ndim == 0 else out

    @classmethod
    def from_file(cls, path: str | os.PathLike[str] | None = None) -> CostCurve:
        """Read a curve file of ``bytes,seconds`` lines (``None``: the catalog's V100 vector-add curve).

        The file is parsed by :func:`queuesgd.catalog_files.load_vector_add_curve`.

        Examples
        --------
        >>> curve = CostCurve.from_file()
        >>> len(curve.sizes), curve(671088640)
        (25, 0.00243368)
        """
        sizes, times = load_vector_add_curve(path)
        return cls(tuple(sizes), tuple(times))


def byte_sizes(nbytes: Any) -> np.ndarray:
    """``nbytes`` (a number, a unit string or an array) as a float array of finite sizes >= 0.

    Raises :class:`~queuesgd.errors.InvalidParameterError` (field ``nbytes``)
    for anything else: NaN, a negative size, a bool, a string in a list, an
    integer beyond the float range (``10**400``).

    Examples
    --------
    >>> byte_sizes("2kB"), byte_sizes([0, 5])
    (array(2000.), array([0., 5.]))
    """
    if isinstance(nbytes, str):
        nbytes = parse_bytes(nbytes, "nbytes")
    x = _checks.reals("nbytes", nbytes, accepted="finite sizes in bytes >= 0")  # 10**400, True: refused
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise InvalidParameterError("nbytes", nbytes, "finite sizes in bytes >= 0")
    return x


def _float_tuple(field_name: str, value: Any, accepted: str, parse: Any) -> tuple[float, ...]:
    return tuple(parse(v, f"{field_name}[{i}]") for i, v in enumerate(items(field_name, value, accepted)))
