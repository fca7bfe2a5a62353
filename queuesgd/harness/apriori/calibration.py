"""The network calibration of the a-priori protocol, made in a run of its own before the runs it serves.

:class:`Calibration` and :func:`calibrate_network` (see :mod:`queuesgd.harness.apriori`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp
from queuesgd.harness.records_json import load_fields, save_fields

__all__ = ["Calibration", "calibrate_network"]


@dataclass(frozen=True)
class Calibration:
    """A network calibration made beforehand: an alpha-beta fit and how it was measured.

    Attributes
    ----------
    kind : str
        ``"allreduce"`` (ring all-reduce of ``workers`` ranks) or ``"p2p"``.
    workers : int
        Ranks of the all-reduce (2 for ``"p2p"``).
    rate : float
        The emulated link rate that was set, bytes per second.
    alpha, bandwidth, r2 : float
        The fit (:class:`~queuesgd.harness.calibrate.AlphaBeta`).
    emulation : str
        ``"netns-tbf"`` or ``"none"``.
    measured : str
        When.
    overlap : mapping or None
        All-reduce calibrations: how much of an all-reduce hid behind
        computation on these ranks (:func:`~queuesgd.harness.overlap.measure_overlap`:
        ``comm``, ``compute``, ``both``, ``eta``, ``nbytes``); None if not measured.
    duplex : mapping or None
        Point-to-point calibrations: how much a host's sending and receiving
        slow each other (:func:`~queuesgd.harness.duplex.measure_duplex`:
        ``alone``, ``both``, ``duplex``, ``nbytes``); None if not measured
        (then the link counts as full duplex).
    busy : int
        CPU-bound processes that ran beside the calibration
        (:class:`~queuesgd.harness.busy.BusyProcesses`): the workers that
        compute while a message crosses the link in the run it serves.
    send_buffer : float or None
        Point-to-point calibrations: bytes of a message that a send hands to
        the kernel before it waits for the link
        (:func:`~queuesgd.harness.duplex.measure_send_buffer`); None if not
        measured (then a send blocks until its message has left).
    incast : mapping or None
        Point-to-point calibrations: how long each push holds the PS's link
        when pushes queue for it and the PS answers each
        (:func:`~queuesgd.harness.incast.measure_incast`: ``sizes``,
        ``occupancy``, ``gap``, ``bandwidth``, ...); None if not measured
        (then a push holds it ``M / B``, the ping-pong's rate).
    device : str
        Where the calibrated tensors lived: ``"cpu"`` or the CUDA device the
        ranks shared (gloo's copies to and from host memory included).
    samples : sequence of (float, float)
        ``(bytes, median seconds)`` per size: the points the fit was made
        from (empty in calibrations written before they were kept).
    """

    kind: str
    workers: int
    rate: float | None
    alpha: float
    bandwidth: float
    r2: float
    emulation: str
    measured: str
    overlap: Mapping[str, float] | None = None
    duplex: Mapping[str, float] | None = None
    busy: int = 0
    send_buffer: float | None = None
    incast: Mapping[str, Any] | None = None
    device: str = "cpu"
    samples: Sequence[Sequence[float]] = ()

    def fit_text(self) -> str:
        """The fit in words: ``alpha ..., B ...`` (``B unbounded`` where the fitted slope was zero).

        Examples
        --------
        >>> Calibration("p2p", 2, None, 1e-4, math.inf, 1.0, "none", "then").fit_text()
        'alpha 100 us, B unbounded'
        """
        bw = "unbounded" if math.isinf(self.bandwidth) else units.format_bandwidth(self.bandwidth)
        return f"alpha {units.format_seconds(self.alpha)}, B {bw}"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the calibration as JSON (an infinite bandwidth as null)."""
        return save_fields(self, path, {"bandwidth": None if math.isinf(self.bandwidth) else self.bandwidth})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Calibration:
        """Read a calibration written by :meth:`save` (fields added since take their defaults).

        Examples
        --------
        >>> import json, tempfile
        >>> c = Calibration("p2p", 2, None, 1e-4, math.inf, 1.0, "none", "then", samples=((1e3, 2e-4),))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = c.save(Path(d) / "c.json")
        ...     doc, back = json.loads(path.read_text()), Calibration.load(path)
        >>> doc["bandwidth"], back.bandwidth, doc["samples"], back == c  # an infinite bandwidth: null
        (None, inf, [[1000.0, 0.0002]], True)
        """
        return load_fields(
            cls,
            path,
            "calibration",
            "a calibration file written by Calibration.save",
            {
                "bandwidth": lambda b: math.inf if b is None else float(b),
                "samples": lambda s: tuple((float(b), float(t)) for b, t in s),
            },
        )


def calibrate_network(
    kind: str,
    workers: int,
    rate: float | str | None,
    *,
    gap: float = 0.0,
    sizes: Iterable[int] = (4096, 1 << 20, 4 << 20),
    repeats: int = 10,
    timeout: float = 300.0,
    busy: int = 0,
    device: str = "cpu",
    force: bool = False,
) -> Calibration:
    """Calibrate the emulated network a run will use, in a run of its own (namespaces and ``tc tbf``).

    Parameters
    ----------
    kind : {"allreduce", "p2p"}
        Timed ring all-reduces among ``workers`` ranks, or ping-pong messages
        between two ranks (the parameter server's link).
    workers : int
        Ranks of the all-reduce.
    rate : float, str or None
        The link rate (``"1Gbit/s"``); None: loopback, no emulation.
    gap : float
        Idle seconds before each timed operation (the step's compute time,
        from the profile; see :func:`~queuesgd.harness.calibrate.calibrate_allreduce`).
    sizes, repeats, timeout
        As :func:`~queuesgd.harness.calibrate.calibrate_allreduce`.
    busy : int
        ``"p2p"``: CPU-bound processes to run beside the measurement
        (:class:`~queuesgd.harness.busy.BusyProcesses`), standing in for the
        workers that compute while a message crosses the link (on shared
        cores the kernel's per-packet work waits for them). The a-priori
        campaign gives ``n - 1`` for the asynchronous schemes (async-ps,
        SSP), whose other workers compute during a transfer, and 0 for the
        barrier schemes, whose workers communicate in lock step.
    device : str
        ``"allreduce"``: where the tensors live, ``"cpu"`` or the CUDA
        device that every rank shares (as DDP's buckets on one GPU).
    force : bool
        Start more ranks than :func:`~queuesgd.harness.process_limit.process_limit`
        (8 per CPU core), refused without it before any starts
        (or any namespace is made).

    An all-reduce calibration also measures, on the same ranks and network,
    how much of an all-reduce of the largest size hides behind computation
    (:func:`~queuesgd.harness.overlap.measure_overlap`). A point-to-point
    calibration also measures, with a third host, how much a host's sending
    and receiving of 1 MiB messages slow each other
    (:func:`~queuesgd.harness.duplex.measure_duplex`), how much of a reply
    a send hands to the kernel (:func:`~queuesgd.harness.duplex.measure_send_buffer`),
    and how long each push holds the receiver's link when two senders push
    back to back and every push is answered, as at a parameter server
    (:func:`~queuesgd.harness.incast.measure_incast`).

    Returns
    -------
    Calibration
    """
    from queuesgd.harness import calibrate

    kind = _checks.choice("kind", kind, ("allreduce", "p2p"))
    workers = _checks.integer("workers", workers, minimum=2 if kind == "allreduce" else 1)
    busy = _checks.integer("busy", busy, minimum=0)
    if busy and kind != "p2p":
        raise InvalidParameterError(
            "busy", busy, "0 for an all-reduce calibration (its ranks are the workers)"
        )
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    device = _checks.device("device", device)
    if device != "cpu" and kind != "allreduce":
        raise InvalidParameterError("device", device, "'cpu' for a point-to-point calibration")
    sizes = list(sizes)
    measured = stamp()

    def go(setup: Any, host: str) -> Any:
        if kind == "allreduce":
            from queuesgd.harness.overlap import measure_overlap

            at = {"setup": setup, "host": host, "timeout": timeout, "device": device, "force": force}
            fit = calibrate.calibrate_allreduce(workers, sizes, repeats, gap=gap, **at)
            nbytes = max(sizes)
            over = measure_overlap(workers, nbytes, **at)
            return fit, {**over, "nbytes": float(nbytes)}, None, None
        from queuesgd.harness.busy import BusyProcesses
        from queuesgd.harness.duplex import measure_duplex, measure_send_buffer
        from queuesgd.harness.incast import measure_incast

        with BusyProcesses(busy, force=force):
            fit = calibrate.calibrate_p2p(sizes, repeats, setup=setup, host=host, gap=gap, timeout=timeout)
            duplex = measure_duplex(1 << 20, repeats, setup=setup, host=host, timeout=timeout)
            held = measure_send_buffer(4 << 20, 5, setup=setup, host=host, timeout=timeout)
            incast = measure_incast(senders=2, setup=setup, host=host, timeout=timeout)
        return fit, None, duplex, (held["send_buffer"], incast)

    from queuesgd.harness.netns import on_network

    # p2p: two ranks, and a third for the duplex and incast probes
    world = check_processes("workers", workers, workers if kind == "allreduce" else 3, force=force)
    check_processes("busy", busy, world + busy, force=force, ranks=False)  # the spinners run beside the ranks
    (fit, over, duplex, ps_link), emulation = on_network(world, bw, go)
    held, incast = ps_link if ps_link is not None else (None, None)
    return Calibration(
        kind,
        workers,
        bw,
        fit.alpha,
        fit.bandwidth,
        fit.r2,
        emulation,
        measured,
        over,
        duplex,
        busy,
        held,
        incast,
        device,
        fit.samples,
    )
