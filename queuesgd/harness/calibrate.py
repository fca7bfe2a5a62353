"""Measure the network a live run uses: fit the alpha-beta model to timed collectives and messages.

The alpha-beta (Hockney) model prices one message of ``M`` bytes at
``alpha + M / B``. A ring all-reduce of ``M`` bytes over ``n`` ranks is
``2 (n - 1)`` such steps of ``M / n`` bytes each (Patarasuk and Yuan, *Bandwidth
optimal all-reduce algorithms for clusters of workstations*, JPDC 2009; Thakur,
Rabenseifner and Gropp, IJHPCA 2005)::

    t(M) = 2 (n - 1) alpha + 2 (n - 1) / n * M / B

Both are straight lines ``t = a + b M``. :func:`calibrate_allreduce` and
:func:`calibrate_p2p` time real operations of a few sizes in live worker
processes, take the median per size, fit the line by least squares on relative
residuals (every size counts alike, however small its time; a latency is never
negative), and invert it into ``alpha`` and ``B`` (:func:`fit_alpha_beta`).

Examples
--------
>>> from queuesgd.harness.calibrate import fit_alpha_beta
>>> n, alpha, B = 4, 1e-4, 1e8                      # 100 us, 100 MB/s
>>> sizes = [4096, 1 << 20, 8 << 20]
>>> times = [2 * (n - 1) * alpha + 2 * (n - 1) / n * M / B for M in sizes]
>>> fit = fit_alpha_beta(sizes, times, kind="allreduce", world_size=n)
>>> round(fit.alpha, 9), round(fit.bandwidth), round(fit.r2, 12)
(0.0001, 100000000, 1.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError

__all__ = [
    "AlphaBeta",
    "allreduce_probe",
    "calibrate_allreduce",
    "calibrate_p2p",
    "fit_alpha_beta",
    "fit_hinge",
    "p2p_probe",
]

_KINDS = ("allreduce", "p2p")


@dataclass(frozen=True)
class AlphaBeta:
    """A fitted alpha-beta network model.

    Attributes
    ----------
    alpha : float
        Latency of one message, seconds (for ``"allreduce"``: of one of the
        ring's ``2 (n - 1)`` steps).
    bandwidth : float
        Link bandwidth ``B``, bytes per second (``inf`` when the fitted slope
        is zero).
    samples : tuple of (float, float)
        ``(bytes, median seconds)`` per size: the points the line was fitted to.
    r2 : float
        Coefficient of determination of the fitted line on ``samples``.
    kind : str
        ``"allreduce"`` (ring all-reduce) or ``"p2p"`` (one message).
    world_size : int
        Ranks in the all-reduce (2 for ``"p2p"``).

    Examples
    --------
    >>> ab = AlphaBeta(alpha=1e-4, bandwidth=1e8, samples=(), r2=1.0, kind="allreduce", world_size=4)
    >>> round(ab.time(8e6), 6)  # 6 alpha + 1.5 M / B
    0.1206
    >>> round(AlphaBeta(1e-4, 1e8, (), 1.0, kind="p2p").time(1e6), 6)
    0.0101
    """

    alpha: float
    bandwidth: float
    samples: tuple[tuple[float, float], ...]
    r2: float
    kind: str = "allreduce"
    world_size: int = 2

    def time(self, nbytes: float) -> float:
        """Model time of one operation on ``nbytes`` bytes, seconds.

        Examples
        --------
        >>> AlphaBeta(0.001, 1e6, (), 1.0, kind="p2p").time(1000)
        0.002
        """
        intercept, slope = _line(self.kind, self.world_size, self.alpha, self.bandwidth)
        return intercept + slope * float(nbytes)


def _line(kind: str, n: int, alpha: float, bandwidth: float) -> tuple[float, float]:
    """``(a, b)`` of ``t = a + b M`` for the model: the inverse of :func:`_model`."""
    inv_b = 0.0 if math.isinf(bandwidth) else 1.0 / bandwidth
    if kind == "p2p":
        return alpha, inv_b
    return 2 * (n - 1) * alpha, 2 * (n - 1) / n * inv_b


def _model(kind: str, n: int, intercept: float, slope: float) -> tuple[float, float]:
    """``(alpha, B)`` from the fitted line ``t = a + b M``."""
    if kind == "p2p":
        return intercept, (math.inf if slope == 0 else 1.0 / slope)
    alpha = intercept / (2 * (n - 1))
    bandwidth = math.inf if slope == 0 else 2 * (n - 1) / (n * slope)
    return alpha, bandwidth


def fit_alpha_beta(
    nbytes: Sequence[float],
    seconds: Sequence[float],
    *,
    kind: str = "allreduce",
    world_size: int = 2,
) -> AlphaBeta:
    """Fit ``t = a + b M`` to timings and return the alpha-beta model it implies.

    Timings of the same size are reduced to their median first (robust to the
    noisy machine). The line minimizes the sum of squared *relative* residuals
    ``((a + b M_i - t_i) / t_i)^2``, so that the smallest size, which sets the
    latency, counts as much as the largest. A latency cannot be negative: when
    the fitted ``a`` is, the smallest messages went faster than the bandwidth
    allows (a token bucket's burst lets a few KB through at once), and the fit
    falls back to ``a = 0`` with the plain least-squares slope through the
    origin, ``b = sum(M t) / sum(M^2)``, which the largest messages set (the
    asymptotic bandwidth). Then ``alpha = a`` and ``B = 1 / b`` for
    ``"p2p"``; ``alpha = a / (2 (n - 1))`` and ``B = 2 (n - 1) / (n b)`` for the
    ring ``"allreduce"``.

    Parameters
    ----------
    nbytes : sequence of float
        Message size of each timing, bytes (at least two distinct sizes).
    seconds : sequence of float
        The measured times, seconds (> 0), same length as ``nbytes``.
    kind : {"allreduce", "p2p"}
        Which model the line is inverted with.
    world_size : int
        Ranks of the all-reduce (>= 2); ignored for ``"p2p"``.

    Returns
    -------
    AlphaBeta

    Examples
    --------
    >>> fit = fit_alpha_beta([1000, 1000, 2000, 9000], [0.0021, 0.0019, 0.003, 0.01], kind="p2p")
    >>> fit.samples  # medians per size
    ((1000.0, 0.002), (2000.0, 0.003), (9000.0, 0.01))
    >>> round(fit.alpha, 9), round(fit.bandwidth)
    (0.001, 1000000)
    """
    kind = _checks.choice("kind", kind, _KINDS)
    n = 2 if kind == "p2p" else _checks.integer("world_size", world_size, minimum=2)
    sizes = np.asarray(nbytes, dtype=float).ravel()
    times = np.asarray(seconds, dtype=float).ravel()
    if sizes.shape != times.shape:
        raise InvalidParameterError("seconds", f"{times.size} values", f"one per size ({sizes.size})")
    if sizes.size == 0 or not np.all(np.isfinite(sizes)) or np.any(sizes < 0):
        raise InvalidParameterError("nbytes", list(nbytes), "finite sizes in bytes >= 0")
    if not np.all(np.isfinite(times)) or np.any(times <= 0):
        raise InvalidParameterError("seconds", list(seconds), "finite times in seconds > 0")
    distinct = np.unique(sizes)
    if distinct.size < 2:
        raise InvalidParameterError(
            "nbytes", list(nbytes), "at least two distinct sizes (a line needs two points)"
        )
    medians = np.array([np.median(times[sizes == m]) for m in distinct])
    intercept, slope = _nonnegative_relative_fit(distinct, medians)
    residual = medians - (intercept + slope * distinct)
    ss_res = float(residual @ residual)
    centred = medians - medians.mean()
    ss_tot = float(centred @ centred)
    r2 = (1.0 - ss_res / ss_tot) if ss_tot > 0 else (1.0 if ss_res == 0 else math.nan)
    alpha, bandwidth = _model(kind, n, intercept, slope)
    samples = tuple((float(m), float(t)) for m, t in zip(distinct, medians))
    return AlphaBeta(alpha, bandwidth, samples, r2, kind=kind, world_size=n)


def fit_hinge(samples: Sequence[Sequence[float]], bucket: float) -> tuple[float, float]:
    """``(alpha, B)`` of ``t = alpha + max(0, S - bucket) / B``: a point-to-point link with a token bucket.

    On a ``tc tbf`` link the first ``bucket`` bytes after an idle gap pass at once, so a line through the
    sizes has intercept ``alpha - bucket / B``, which :func:`fit_alpha_beta` clips at 0: the per-message
    cost is lost. Here the sizes are first cut by the bucket (the sizes within it are one point, the median
    of their times), then fitted as :func:`fit_alpha_beta` fits a line (relative least squares, a latency
    of at least 0). ``samples`` are ``(bytes, seconds)``, e.g. a calibration's per-size medians.

    Examples
    --------
    >>> alpha, bw = fit_hinge([(1000, 0.0003), (4000, 0.0003), (104000, 0.0013), (404000, 0.0043)], 4000)
    >>> round(alpha, 9), round(bw)        # 0.3 ms a message, 100 MB/s beyond the first 4,000 bytes
    (0.0003, 100000000)
    """
    b = _checks.positive("bucket", bucket, allow_zero=True)
    pts = [(max(float(x) - b, 0.0), float(t)) for x, t in samples]
    cut = np.array(sorted({x for x, _ in pts}))
    if cut.size < 2:
        raise InvalidParameterError(
            "samples", list(samples), "at least one size beyond the bucket and one other"
        )
    medians = np.array([np.median([t for x, t in pts if x == c]) for c in cut])
    if not np.all(np.isfinite(medians)) or np.any(medians <= 0):
        raise InvalidParameterError("samples", list(samples), "times in seconds > 0")
    a, slope = _nonnegative_relative_fit(cut, medians)
    return float(a), (1.0 / slope if slope > 0 else math.inf)


def _nonnegative_relative_fit(sizes: np.ndarray, times: np.ndarray) -> tuple[float, float]:
    """``(a, b)``: least squares of ``(a + b M - t) / t``; if ``a < 0``: ``a = 0``, ``t = b M`` by LS."""
    design = np.column_stack([np.ones_like(sizes), sizes]) / times[:, None]
    scale = np.array([1.0, 1.0 / sizes.max()])  # columns of similar magnitude for lstsq
    a, b = np.linalg.lstsq(design * scale, np.ones_like(times), rcond=None)[0] * scale
    if a >= 0 and b >= 0:
        return float(a), float(b)
    if a < 0 and float(sizes @ times) > 0:
        # Small messages ran faster than the bandwidth allows (a token bucket's burst, or a latency
        # below what the clock resolves): no latency, and the slope the large messages set.
        return 0.0, float(sizes @ times / (sizes @ sizes))
    # Times fall with size: no bandwidth term; a = the relative least-squares constant.
    inv = 1.0 / times
    return float(inv.sum() / (inv @ inv)), 0.0


def _check_sizes(sizes: Iterable[Any], itemsize: int) -> list[int]:
    """Sizes in bytes rounded up to whole elements, at least two distinct ones."""
    out = []
    for s in sizes:
        nbytes = _checks.integer("sizes", s, minimum=1)
        out.append(itemsize * math.ceil(nbytes / itemsize))
    if len(set(out)) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct message sizes in bytes")
    return out


def _checked(
    sizes: Iterable[Any], itemsize: int, repeats: int, warmup: int, timeout: float, gap: float
) -> tuple[list[int], int, int, float, float]:
    """The arguments both calibrations take, checked: sizes in bytes, repeats, warmup, timeout, gap."""
    return (
        _check_sizes(sizes, itemsize),
        _checks.integer("repeats", repeats),
        _checks.integer("warmup", warmup, minimum=0),
        _checks.positive("timeout", timeout),
        _checks.positive("gap", gap, allow_zero=True),
    )


def _measure(
    kind: str,
    probe: Callable[[Any], None],
    world_size: int,
    sizes: list[int],
    repeats: int,
    timeout: float,
    setup: Callable[[int], None] | None,
    host: str,
    force: bool = False,
) -> AlphaBeta:
    """Run ``probe`` on ``world_size`` ranks (``host`` checked first) and fit ``kind`` to the spans."""
    from queuesgd.harness.launch import run_workers

    host = _checks.name("host", host)
    # One record per size: at 100 Mbit/s a size can take longer than run_workers' default
    # progress timeout, so only the wall-clock timeout applies.
    records = run_workers(
        probe, world_size, timeout=timeout, progress_timeout=None, setup=setup, host=host, force=force
    )
    nbytes, seconds = _span(records, sizes, repeats)
    return fit_alpha_beta(nbytes, seconds, kind=kind, world_size=world_size)


def _span(records: list[dict], sizes: list[int], repeats: int) -> tuple[list[float], list[float]]:
    """Per size and repeat: (latest end) - (latest start) over the ranks.

    All ranks share one clock (``time.perf_counter`` is CLOCK_MONOTONIC, system-wide, network
    namespaces included), so this is the operation's time from the moment the
    last rank joined: the barrier's exit skew is not counted.
    """
    nbytes, seconds = [], []
    by_size: dict[int, list[dict]] = {}
    for rec in records:
        if "size" in rec:
            by_size.setdefault(int(rec["size"]), []).append(rec)
    for size in sorted(set(sizes)):
        recs = by_size.get(size, [])
        if not recs:
            raise InvalidParameterError("records", f"none for {size} bytes", "one record per rank and size")
        starts = np.array([r["t0"] for r in recs], dtype=float)  # ranks x repeats
        ends = np.array([r["t1"] for r in recs], dtype=float)
        span = ends.max(axis=0) - starts.max(axis=0)
        nbytes += [float(size)] * repeats
        seconds += [float(s) for s in span]
    return nbytes, seconds


def allreduce_probe(
    ctx: Any,
    sizes: list[int],
    repeats: int,
    warmup: int,
    shaper: Any,
    gap: float = 0.0,
    device: str = "cpu",
) -> None:
    """In a worker process: time ``warmup + repeats`` all-reduces per size; report one record per size.

    Each record is ``{"size", "t0": [...], "t1": [...]}`` (the kept repeats, this rank's clock);
    ``gap`` seconds of idle precede each operation, ``shaper`` (or None) adds the emulated time; the
    tensor lives on ``device`` (on CUDA the operation is timed after :func:`torch.cuda.synchronize`).
    Run by :func:`calibrate_allreduce` and, inside a torchrun job, by :mod:`~queuesgd.harness.torchrun`.
    """
    from queuesgd.harness._torch import require_torch, use_device

    torch = require_torch()
    dist = torch.distributed
    dev, wait = use_device(device)
    for size in sizes:
        tensor = torch.ones(size // 4, dtype=torch.float32, device=dev)
        t0s, t1s = [], []
        for r in range(warmup + repeats):
            wait()
            dist.barrier()
            if gap > 0:  # idle like a worker between steps: gloo's threads go to sleep
                time.sleep(gap)
            t0 = time.perf_counter()
            dist.all_reduce(tensor)
            wait()
            if shaper is not None:
                shaper.after("allreduce", size, ctx.world_size, t0)
            t1 = time.perf_counter()
            if r >= warmup:
                t0s.append(t0)
                t1s.append(t1)
        ctx.report({"size": size, "t0": t0s, "t1": t1s})


def calibrate_allreduce(
    world_size: int,
    sizes: Sequence[int] = (4096, 1 << 20, 8 << 20),
    repeats: int = 10,
    *,
    setup: Callable[[int], None] | None = None,
    shaper: Any = None,
    warmup: int = 2,
    timeout: float = 120.0,
    host: str = "127.0.0.1",
    gap: float = 0.0,
    device: str = "cpu",
    force: bool = False,
) -> AlphaBeta:
    """Time ring all-reduces of a few sizes on ``world_size`` live ranks and fit the alpha-beta model.

    Each rank all-reduces a float32 tensor of every size ``warmup + repeats``
    times, each after a barrier; an operation's time is the latest end minus
    the latest start over the ranks (the ranks share one clock). The medians
    per size are fitted with :func:`fit_alpha_beta` (``kind="allreduce"``).

    Parameters
    ----------
    world_size : int
        Ranks (>= 2).
    sizes : sequence of int
        Tensor sizes in bytes (rounded up to whole float32 elements); at least
        two distinct ones. Include a small one (latency) and one of several MB
        (bandwidth).
    repeats : int
        Timed operations per size.
    setup : callable, optional
        ``setup(rank)`` run in each worker before the process group starts,
        e.g. :meth:`queuesgd.harness.netns.Namespaces.setup`.
    shaper : Shaper, optional
        An application-level shaper: each rank calls
        ``shaper.after("allreduce", nbytes, world_size, started)`` after the
        real operation, as the live runners do.
    warmup : int
        Untimed operations per size first (buffers, connections).
    timeout : float
        Wall-clock limit of the whole measurement, seconds.
    gap : float
        Seconds each rank sleeps before every timed operation, to time it as
        a training step meets it: after ``compute`` seconds of idling, when
        the communication threads have gone to sleep (a 1 MB all-reduce on
        two ranks took 1.8 ms after 20 ms of sleep and 0.9 ms back to back
        on the development machine). Default 0: back to back.
    host : str
        Address of the parent's rendezvous store as the workers see it: the
        bridge address (:attr:`~queuesgd.harness.netns.Namespaces.bridge_address`)
        when ``setup`` moves them into network namespaces.
    device : str
        Where the tensors live: ``"cpu"`` (the default) or a CUDA device that
        every rank shares (gloo then copies each tensor to host memory and
        back: the calibration times that as DDP meets it on that device).
    force : bool
        Start more ranks than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it.

    Returns
    -------
    AlphaBeta

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.shaping import Shaper
    >>> shaper = Shaper(bandwidth="400Mbit/s", latency="2ms")  # 50 MB/s: far slower than loopback
    >>> fit = calibrate_allreduce(2, sizes=(4096, 1 << 20), repeats=3, shaper=shaper)
    >>> # Loose bounds (a bits-for-bytes slip is 8x, a ms-for-s one 1000x): a doctest cannot wait out a
    >>> # busy machine, and a gloo collective here can wait a 4 ms scheduler tick (alpha once came out
    >>> # above 2.5x in a full run); the 10% bounds are in tests/harness/test_calibrate.py, retried when
    >>> # the machine was starved.
    >>> 0.25 < fit.alpha / 0.002 < 5, 0.5 < fit.bandwidth / 50e6 < 2
    (True, True)
    """
    n = _checks.integer("world_size", world_size, minimum=2)
    sizes_b, reps, warm, limit, idle = _checked(sizes, 4, repeats, warmup, timeout, gap)
    device = _checks.device("device", device)

    def fn(ctx: Any) -> None:
        allreduce_probe(ctx, sizes_b, reps, warm, shaper, idle, device)

    return _measure("allreduce", fn, n, sizes_b, reps, limit, setup, host, force)


def p2p_probe(ctx: Any, sizes: list[int], repeats: int, warmup: int, shaper: Any, gap: float = 0.0) -> None:
    """In a worker process: ping-pong between ranks 0 and 1; rank 0 reports one record per size.

    Element 0 of each message is its send time (shared clock); a record's ``t1`` is half the
    round trip after its ``t0``. Run by :func:`calibrate_p2p` and by :mod:`~queuesgd.harness.torchrun`.
    """
    from queuesgd.harness._torch import require_torch

    torch = require_torch()
    dist = torch.distributed
    rank, peer = ctx.rank, 1 - ctx.rank
    for size in sizes:
        message = torch.zeros(size // 8, dtype=torch.float64)
        t0s, t1s = [], []
        dist.barrier()
        for r in range(warmup + repeats):
            if rank == 0:
                if gap > 0:  # idle like a worker between steps (the peer blocks in recv meanwhile)
                    time.sleep(gap)
                t0 = time.perf_counter()
                message[0] = t0
                dist.send(message, peer)
                dist.recv(message, peer)
                if shaper is not None:
                    shaper.after("p2p", size, 2, float(message[0]))
                t1 = time.perf_counter()
                if r >= warmup:  # a round trip is two messages
                    t0s.append(t0)
                    t1s.append(t0 + (t1 - t0) / 2)
            else:
                dist.recv(message, peer)
                if shaper is not None:
                    shaper.after("p2p", size, 2, float(message[0]))
                message[0] = time.perf_counter()
                dist.send(message, peer)
        if rank == 0:
            ctx.report({"size": size, "t0": t0s, "t1": t1s})


def calibrate_p2p(
    sizes: Sequence[int] = (4096, 1 << 20, 8 << 20),
    repeats: int = 10,
    *,
    setup: Callable[[int], None] | None = None,
    shaper: Any = None,
    warmup: int = 2,
    timeout: float = 120.0,
    host: str = "127.0.0.1",
    gap: float = 0.0,
) -> AlphaBeta:
    """Time point-to-point messages between two live ranks (ping-pong) and fit ``alpha + M / B``.

    Rank 0 sends a message of each size to rank 1, which sends it back; one
    message's time is half the round trip (the usual ping-pong latency
    benchmark). With a ``shaper``, the receiver of each message calls
    ``shaper.after("p2p", nbytes, 2, sent)`` with the sender's send time,
    which travels in the message (the ranks share one clock).

    Parameters
    ----------
    sizes : sequence of int
        Message sizes in bytes (rounded up to whole float64 elements); at least
        two distinct ones.
    repeats, setup, shaper, warmup, timeout, host, gap
        As in :func:`calibrate_allreduce`.

    Returns
    -------
    AlphaBeta
        With ``kind="p2p"``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> from queuesgd.harness.shaping import Shaper
    >>> fit = calibrate_p2p(sizes=(4096, 1 << 20), repeats=3, shaper=Shaper("400Mbit/s", "2ms"))
    >>> 0.5 < fit.alpha / 0.002 < 2.5, 0.5 < fit.bandwidth / 50e6 < 2   # loose: see calibrate_allreduce
    (True, True)
    """
    sizes_b, reps, warm, limit, idle = _checked(sizes, 8, repeats, warmup, timeout, gap)

    def fn(ctx: Any) -> None:
        p2p_probe(ctx, sizes_b, reps, warm, shaper, idle)

    return _measure("p2p", fn, 2, sizes_b, reps, limit, setup, host)
