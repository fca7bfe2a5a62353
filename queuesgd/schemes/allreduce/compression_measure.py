"""Compression and decompression times measured with PyTorch on this machine, as CostCurves.

:func:`measure_compression` gives the ``compress_time`` and
``decompress_time`` of
:class:`~queuesgd.schemes.allreduce.compressed_allreduce.CompressedAllReduce` (see
:mod:`queuesgd.schemes.allreduce.compression`). PyTorch is imported only when it runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.allreduce.compressed_allreduce import CompressedAllReduce
from queuesgd.schemes.allreduce.compression_costs import FP32, METHODS
from queuesgd.workload import CostCurve

__all__ = ["measure_compression"]


def measure_compression(
    method: str,
    sizes: Sequence[float | str],
    *,
    density: float = 0.01,
    rank: int = 4,
    repeats: int = 5,
    device: str = "cpu",
    timer: Callable[[], float] = time.perf_counter,
) -> tuple[CostCurve, CostCurve]:
    """Measure compression and decompression times with PyTorch on this machine, as two CostCurves.

    For each size (uncompressed bytes of an fp32 gradient of ``E = size/4``
    elements) the fastest of ``repeats`` timings (the one least disturbed by other
    processes), after one warm-up run:

    - ``"topk"``: compress = ``torch.topk`` of ``|g|`` keeping ``k =
      max(1, round(d E))`` elements and gathering their signed values;
      decompress = ``index_add_`` of one sparse vector (``k`` values) into a
      dense gradient (the model sums ``n`` of them);
    - ``"powersgd"``: the gradient as a square ``a x a`` matrix (``a =
      ceil(sqrt(E))``, zero-padded); compress = ``P = M Q``, a QR
      orthogonalisation of ``P``, ``Q = M^T P``; decompress = ``P Q^T``;
    - ``"fp16"``: compress = ``g.half()``, decompress = ``h.float()``.

    PyTorch is imported here (``pip install -e ".[validation]"``).

    Parameters
    ----------
    method : {"topk", "powersgd", "fp16"}
    sizes : sequence of float or str
        At least two strictly increasing sizes in bytes (``"4MiB"``).
    density, rank : float, int
        As :class:`CompressedAllReduce`.
    repeats : int
        Timings per size (the fastest is kept).
    device : str
        A torch device (``"cpu"``, ``"cuda"``); CUDA is synchronized around each timing.
    timer : callable
        A clock in seconds (``time.perf_counter``).

    Returns
    -------
    (CostCurve, CostCurve)
        Seconds against uncompressed bytes of compression and of decompression
        (``compress_time`` and ``decompress_time`` of :class:`CompressedAllReduce`).

    Examples
    --------
    >>> comp, dec = measure_compression("fp16", ["4KiB", "64KiB"], repeats=3)
    >>> comp.sizes, all(t > 0 for t in comp.times + dec.times)
    ((4096.0, 65536.0), True)
    """
    method = _checks.choice("method", method, METHODS)
    scheme = CompressedAllReduce(method, density=density, rank=rank)
    repeats = _checks.integer("repeats", repeats)
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise InvalidParameterError("sizes", sizes, "a sequence of at least two increasing sizes in bytes")
    parsed = [
        _checks.positive(f"sizes[{i}]", units.parse_bytes(s, f"sizes[{i}]")) for i, s in enumerate(sizes)
    ]
    if len(parsed) < 2 or any(y <= x for x, y in zip(parsed, parsed[1:])):
        raise InvalidParameterError("sizes", sizes, "at least two strictly increasing sizes in bytes")
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        from queuesgd.errors import MissingDependencyError

        raise MissingDependencyError("torch", "validation") from err
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def timed(fn: Callable[[], Any]) -> float:
        fn()  # warm-up
        out = []
        for _ in range(repeats):
            sync()
            t0 = timer()
            fn()
            sync()
            out.append(timer() - t0)
        return max(float(np.min(out)), 0.0)

    comp, dec = [], []
    gen = torch.Generator(device="cpu").manual_seed(0)
    for size in parsed:
        e = max(1, int(round(size / FP32)))
        g = torch.randn(e, generator=gen).to(dev)
        if method == "topk":
            k = max(1, int(round(scheme.density * e)))
            dense = torch.zeros(e, device=dev)

            def compress(g: Any = g, k: int = k) -> Any:
                idx = torch.topk(g.abs(), k, sorted=False).indices
                return g[idx], idx.to(torch.int32)

            vals, idx = compress()
            idx64 = idx.long()

            def decompress(dense: Any = dense, idx: Any = idx64, vals: Any = vals) -> Any:
                return dense.index_add_(0, idx, vals)

        elif method == "powersgd":
            a = math.isqrt(e - 1) + 1 if e > 1 else 1
            m = torch.zeros(a * a, device=dev)
            m[:e] = g
            m = m.view(a, a)
            q0 = torch.randn(a, scheme.rank, generator=gen).to(dev)

            def compress(m: Any = m, q0: Any = q0) -> Any:
                p = m @ q0
                p, _ = torch.linalg.qr(p)
                return p, m.T @ p

            p, q = compress()

            def decompress(p: Any = p, q: Any = q) -> Any:
                return p @ q.T

        else:
            h = g.half()

            def compress(g: Any = g) -> Any:
                return g.half()

            def decompress(h: Any = h) -> Any:
                return h.float()

        comp.append(timed(compress))
        dec.append(timed(decompress))
    return CostCurve(parsed, comp), CostCurve(parsed, dec)
