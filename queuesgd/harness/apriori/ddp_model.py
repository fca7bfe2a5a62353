"""How the a-priori protocol models DDP: a ring all-reduce over DDP's buckets, and the sizes to calibrate."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from queuesgd import _checks
from queuesgd.harness.apriori.profile import Profile

__all__ = ["ddp_calibration_sizes", "ddp_scheme"]


def ddp_calibration_sizes(
    profiles: Iterable[Profile], *, smallest: int = 4096, largest: int = 4 << 20
) -> tuple[int, ...]:
    """All-reduce sizes to calibrate DDP's network at: a small one, every bucket DDP will send, a large one.

    The buckets come from each profile's layers and DDP's own bucket
    policy with its defaults (:func:`~queuesgd.schemes.fine.ddp_buckets.ddp_buckets`:
    1 MiB first bucket, then 25 MiB), so the calibration times the sizes the
    runs will send, known before any run, and the fit is anchored where the
    prediction evaluates it; ``smallest`` (latency) and ``largest``
    (bandwidth) span them. Sizes are whole float32 elements.

    Examples
    --------
    >>> from queuesgd.workload import Layer, Workload
    >>> w = Workload(0.01, None, layers=[Layer(f"t{i}", "600KiB", "1ms") for i in range(4)])
    >>> p = Profile("mlp", 8, {}, w, {1: [0.01]}, {1: 0.001}, 2, "now")
    >>> ddp_calibration_sizes([p])    # DDP's buckets: 1200 KiB (closes past 1 MiB), then 1200 KiB
    (4096, 1228800, 4194304)
    """
    sizes = [_checks.integer("smallest", smallest), _checks.integer("largest", largest)]
    for profile in profiles:
        sizes += [b.nbytes for b in ddp_scheme().buckets(profile.workload)]
    return tuple(sorted({4 * math.ceil(s / 4) for s in sizes}))  # whole float32 elements


def ddp_scheme(overlap: bool = True) -> Any:
    """The scheme that models DDP: ring all-reduce, DDP's buckets, overlap on (or off).

    The DDP row's model (:data:`queuesgd.harness.live_schemes.DDP`), with ``overlap`` as asked.

    Examples
    --------
    >>> ddp_scheme().fusion, ddp_scheme(overlap=False).overlap
    ('ddp', False)
    """
    from dataclasses import replace

    from queuesgd.harness.live_schemes.ddp import DDP

    scheme, _ = DDP.model({})
    return replace(scheme, overlap=overlap)
