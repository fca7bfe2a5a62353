"""``validate``: run a scheme live, profile it, predict it with queuesgd, and compare.

For every configuration (scheme x workers):

1. **calibrate** the network the run will use: timed all-reduces (all-reduce
   schemes) or point-to-point messages (parameter-server schemes) of a few
   sizes, fitted to ``t = a + b M`` and turned into the alpha-beta parameters
   ``(latency, bandwidth)`` of :class:`~queuesgd.Cluster`
   (:mod:`queuesgd.harness.calibrate`);
2. **run** the scheme with ``n`` live worker processes
   (:mod:`queuesgd.harness.runners`), recording every step;
3. **profile**: the measured compute times of the run (an
   :class:`~queuesgd.distributions.Empirical` law), the gradient size, and the
   parameter server's measured time to apply a gradient;
4. **predict** with the matching queuesgd scheme and method, and report the
   relative error of predicted against measured samples per second.

The measured throughput is ``batch x gradients applied / elapsed`` between the
first and the last update after the warm-up steps, with a 95% batch-means
interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.distributions import Deterministic, Distribution, Empirical
from queuesgd.errors import InvalidParameterError, MissingDependencyError, WorkerFailure
from queuesgd.harness.layout import LIVE_SCHEMES, live_key
from queuesgd.harness.live_schemes import ModelInputs, live_scheme
from queuesgd.harness.live_schemes.allreduce import RING
from queuesgd.harness.process_limit import worker_counts
from queuesgd.harness.provenance import code_version, stamp
from queuesgd.harness.run_args import check_run, run_seconds
from queuesgd.harness.run_records import measured_throughput, same_run_profile, update_role
from queuesgd.workload import RandomDelay

__all__ = [
    "LIVE_SCHEMES",
    "ValidationResult",
    "compare_records",
    "predict_live",
    "parse_straggler",
    "validate",
]


@dataclass(frozen=True)
class ValidationResult:
    """Rows of a validation campaign (one per configuration) and how to show them.

    Attributes
    ----------
    rows : tuple of dict
        Each with ``scheme``, ``workers``, ``steps``, ``workload``, ``straggler``, ``bandwidth``,
        ``emulation``, ``measured``, ``measured_low``, ``measured_high`` (samples/s), ``predicted``,
        ``error`` (predicted / measured - 1), ``method``, ``calibration``, ``load`` (the machine's CPU
        use during the run: :class:`~queuesgd.harness.load.CpuMeter`) and, for a failed run, ``failure``.
    """

    rows: tuple[dict[str, Any], ...]
    failures: tuple[str, ...] = field(default=())

    def table(self) -> str:
        """The rows as a text table."""
        from queuesgd.harness.report import format_table

        return format_table(self.rows)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per scheme: configurations, median and max absolute relative error."""
        from queuesgd.harness.report import summary

        return summary(self.rows)

    def write(self, out_dir: str) -> list[Any]:
        """Write JSON, CSV and a PNG plot into ``out_dir``; returns the paths."""
        from queuesgd.harness.report import write_rows

        return write_rows(self.rows, out_dir)


def parse_straggler(text: str | None, mean: float, field: str = "straggler") -> Distribution:
    """A straggler spec to the compute law with the given mean.

    ``None`` or ``"none"``: deterministic compute; ``"lognormal:SCV"``,
    ``"gamma:SCV"``, ``"exponential"``, ``"erlang:K"``, ``"normal:CV"``: that
    law with the compute mean. Random delays (eager-SGD's recipe) are not a
    compute law: they are ``random_delay="K:DELAY"`` (:func:`queuesgd.specs.random_delay`).

    Examples
    --------
    >>> law = parse_straggler("lognormal:0.3", 0.02)
    >>> round(law.mean, 6), round(law.scv, 6)
    (0.02, 0.3)
    >>> parse_straggler("delay:1:10ms", 0.02)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: straggler: got 'delay:1:10ms'; accepted: none, ... K:DELAY...
    """
    from queuesgd.specs import compute_law

    if text is None or text.strip().lower() in ("", "none"):
        return Deterministic(mean)
    try:
        return compute_law(text, mean, field=field)
    except InvalidParameterError as err:
        delay = "--random-delay" if field.startswith("--") else "random_delay"
        raise InvalidParameterError(
            field, text, f"none, {err.accepted} (a random delay is {delay} K:DELAY, e.g. 2:320ms)"
        ) from None




def _checked_params(key: str, params: Mapping[str, Any] | None, counts: list[int]) -> dict[str, Any]:
    """The scheme's parameters, checked at every worker count before any run (errors: ``params.NAME``)."""
    if params is not None and not isinstance(params, Mapping):
        raise InvalidParameterError("params", params, "a mapping of parameter names to values")
    for n in counts:
        try:
            live_scheme(key).check_params(dict(params or {}), n)
        except InvalidParameterError as err:
            name = err.field.rpartition(".")[2]  # "BackupWorkers.backups" or "backups": the parameter
            where = "params" if name == "params" else f"params.{name}"
            raise InvalidParameterError(where, err.got, f"{err.accepted} (at n = {n})") from None
    return dict(params or {})


def validate(
    scheme: str = RING.key,
    workers: int | Sequence[int] = (2, 4, 8),
    steps: int = 200,
    *,
    workload: str = "emulated",
    compute: float | str = "20ms",
    gradient_bytes: float | str = "1MB",
    batch_size: int = 32,
    straggler: str | None = None,
    random_delay: str | RandomDelay | None = None,
    bandwidth: float | str | None = None,
    latency: float | str = 0.0,
    network: str = "auto",
    params: Mapping[str, Any] | None = None,
    warmup: int | None = None,
    timeout: float | None = None,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
    force: bool = False,
) -> ValidationResult:
    """Run ``scheme`` live for each worker count, predict it, and compare.

    Parameters
    ----------
    scheme : str
        One of :data:`LIVE_SCHEMES` (``"sync-allreduce"`` is an alias of
        ``"ring-allreduce"``).
    workers : int or sequence of int
        Distinct worker counts; one configuration each.
    steps : int
        Training steps per worker (20 to 1,000,000), warm-up included.
    workload : str
        ``"emulated"`` (compute is a timed wait: 8 to 16 workers fit on two
        cores) or ``"mlp"`` / ``"cnn"`` (a real small model on synthetic data;
        above two workers on two cores this measures the machine).
    compute : float or str
        Mean compute time per step of the emulated workload.
    gradient_bytes : float or str
        Size of the exchanged gradient (emulated workload).
    batch_size : int
        Samples per step per worker.
    straggler : str, optional
        Compute-time law (see :func:`parse_straggler`).
    random_delay : str or RandomDelay, optional
        ``"K:DELAY"``: ``K`` workers drawn anew every step sleep ``DELAY``
        (eager-SGD's recipe; :func:`queuesgd.specs.random_delay`).
    bandwidth : float or str, optional
        Emulated link bandwidth; ``None`` runs at loopback speed.
    latency : float or str
        Emulated one-way latency (application-level shaper only).
    network : str
        ``"auto"`` (network namespaces with ``tc tbf`` when root can make
        them and no latency is asked for, else the application-level
        shaper), ``"netns"``, ``"app"``.
    params : mapping, optional
        Scheme parameters (``{"backups": 1}``, ``{"cutoff": 0.03}``, ``{"mode": "majority"}``, ...),
        checked at every worker count before any run (an error names ``params.backups``).
    warmup : int, optional
        Steps left out of the measurement (default ``max(5, steps // 10)``).
    timeout : float, optional
        Wall-clock limit per run, seconds (default: generous, from the
        expected duration); the network calibration before the run and the
        send-buffer probe (shared-link schemes on a real network) each get
        the same limit of their own.
    seed : int
        Seed of the workers' random compute times (0 to ``2**32 - 1``).
    progress : callable, optional
        ``progress(label, done, total)`` called as steps complete.
    on_row : callable, optional
        ``on_row(row)`` called with each configuration's row as soon as it is made (e.g. to write it).
    force : bool
        Run more processes than :func:`~queuesgd.harness.process_limit.process_limit` (8 per CPU
        core), refused before anything starts without it (``--force``).

    Returns
    -------
    ValidationResult
    """
    from queuesgd.busbw import bandwidth_value

    key = live_key(scheme)
    counts = worker_counts("workers", workers, live_scheme(key).world_size, force=force)
    run = check_run(steps, warmup, workload, compute, gradient_bytes, batch_size, random_delay, seed,
                    fewest_workers=min(counts))  # fmt: skip
    steps, warm, workload, nbytes, batch, seed = run.steps, run.warmup, run.workload, run.gradient_bytes, \
        run.batch_size, run.seed  # fmt: skip
    law = parse_straggler(straggler, run.compute)
    delays = run.random_delay
    bw = None if bandwidth is None else bandwidth_value("bandwidth", bandwidth)
    lat = run_seconds("latency", latency, steps)
    network = _checks.choice("network", network, ("auto", "netns", "app"))
    options = _checked_params(key, params, counts)
    if timeout is not None:
        timeout = _checks.duration("timeout", timeout, allow_zero=False)

    _network(network, bw, lat, live_scheme(key).world_size(max(counts)))  # its refusals: before any run
    rows = []
    failures = []
    for n in counts:
        row: dict[str, Any] = {
            "scheme": key,
            "workers": n,
            "steps": steps,
            "warmup": warm,
            "workload": workload,
            "straggler": straggler or "none",
            "random_delay": None if delays is None else f"{delays.count}:{delays.delay:g}s",
            "bandwidth": bw,
            "latency": lat,
            "params": options,
            "started": stamp(),
            "commit": code_version(),
        }
        try:
            row.update(
                _run_one(
                    key,
                    n,
                    steps,
                    warm,
                    workload,
                    law,
                    delays,
                    nbytes,
                    batch,
                    bw,
                    lat,
                    network,
                    options,
                    timeout,
                    seed,
                    progress,
                    force,
                )
            )
        except Exception as err:  # a run's failure (a worker's, a measurement's): its row; the others run
            if isinstance(err, MissingDependencyError):  # torch missing: no run can start (the CLI: status 2)
                raise
            failure = str(err) if isinstance(err, WorkerFailure) else f"{type(err).__name__}: {err}"
            row.update(failure=failure, measured=None, predicted=None, error=None)
            failures.append(f"{key} n={n}: {failure}")
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return ValidationResult(tuple(rows), tuple(failures))


# ------------------------------------------------------------------------------------ one configuration
def _network(network: str, bandwidth: float | None, latency: float, world: int) -> tuple[str, Any]:
    """Which emulation runs: ``("none" | "netns-tbf" | "app-shaper", Namespaces or None)``."""
    if bandwidth is None and latency == 0:
        return "none", None
    if network in ("auto", "netns") and latency == 0:
        from queuesgd.harness.netns import Namespaces, available

        ok, why = available()
        if ok:
            # In a namespace without a resolver c10d warns, for every connection, that it cannot
            # name the peer (EAI_AGAIN): harmless, and one screen of noise per run. The level is read
            # when torch is first imported, so this quiets it only if the harness imports torch; a
            # level the user set is kept.
            os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
            return "netns-tbf", Namespaces(world, rate=bandwidth)
        if network == "netns":
            raise InvalidParameterError("network", network, f"'auto' or 'app' ({why})")
    if network == "netns":
        raise InvalidParameterError("network", network, "'auto' or 'app' (tc cannot add latency here)")
    return "app-shaper", None


def _model(
    key: str,
    params: Mapping[str, Any],
    emulation: str = "none",
    duplex: float = 1.0,
    send_buffer: float = 0.0,
    activation: float = 0.0,
) -> tuple[Any, str]:
    """The queuesgd scheme that models a live scheme, and the method to use: its row's
    :meth:`~queuesgd.harness.live_schemes.LiveScheme.model` (see the family modules of
    :mod:`queuesgd.harness.live_schemes` for each scheme's forms).

    On a real or ``tc tbf``-shaped network (``emulation`` other than
    ``"app-shaper"``) the live PS loops push as soon as a worker is done, so
    backup workers and the static cutoff (``stragglers="finish"``) and SSP
    are modelled with ``link="shared"`` (every push's arrival time on the PS
    link; see :mod:`queuesgd.schemes.barrier.ps_arrivals`). The application shaper
    waits out the phase model's round instead, so with it the phase forms stay.
    ``duplex`` (async-ps): the share of the PS link's rate each direction
    keeps while both transmit, as a calibration measured it. ``send_buffer``
    (backup workers, static cutoff, SSP on a shared link): the bytes of a reply
    the PS's socket buffer takes at once, as a calibration measured it.
    """
    inputs = ModelInputs(emulation, duplex, send_buffer, activation)
    return live_scheme(key).model(params, inputs)


def _run_one(
    key: str,
    n: int,
    steps: int,
    warm: int,
    workload: str,
    law: Distribution,
    random_delay: Any,
    nbytes: int,
    batch: int,
    bandwidth: float | None,
    latency: float,
    network: str,
    params: Mapping[str, Any],
    timeout: float | None,
    seed: int,
    progress: Callable[[str, int, int], None] | None,
    force: bool = False,
) -> dict[str, Any]:
    from queuesgd.harness import calibrate, load, runners
    from queuesgd.harness.live import EmulatedCompute, RealModel
    from queuesgd.harness.shaping import Shaper

    row = live_scheme(key)
    checked = row.check_params(params, n)
    world = row.world_size(n)
    if workload == "emulated":
        rd = None if random_delay is None else (random_delay.count, random_delay.delay)
        live: Any = EmulatedCompute(law, nbytes, batch_size=batch, random_delay=rd)
    else:
        live = RealModel(kind=workload, batch_size=batch)
        nbytes = live.gradient_bytes
    emulation, namespaces = _network(network, bandwidth, latency, world)
    shaper = Shaper(bandwidth, latency) if emulation == "app-shaper" else Shaper()
    expected = steps * (float(law.mean) + 0.05) * (3 if row.layout == "ps" else 1)
    limit = timeout if timeout is not None else 120.0 + 4.0 * expected
    label = f"{key} n={n}"
    done = [0]
    total = steps * n

    def on_record(rec: Mapping[str, Any]) -> None:
        if progress is not None and rec.get("role") == "worker":
            done[0] += 1
            progress(label, min(done[0], total), total)

    def go(setup: Any, host: str) -> tuple[Any, list[dict], float]:
        # Sizes around the run's message, and the run's idle time between operations: the fit
        # describes the network as a training step meets it (see calibrate's ``gap``).
        sizes = (4096, max(nbytes, 8192), 4 * max(nbytes, 8192))
        # The calibration, the send-buffer probe and the run are three launches, each with the wall-clock
        # limit of its own (up to 3 x limit in all): a hung calibration ends at the run's limit too.
        common = {"setup": setup, "shaper": shaper if shaper.active else None, "host": host, "timeout": limit}
        gap = float(law.mean)
        if row.calibration(checked) == "allreduce":  # the workers' own all-reduce (eager-SGD's ring too)
            fit = calibrate.calibrate_allreduce(n, sizes, gap=gap, force=force, **common) if n > 1 else None
        else:
            fit = calibrate.calibrate_p2p(sizes, gap=gap, **common)
        held = 0.0
        if row.shared_link and emulation != "app-shaper":
            from queuesgd.harness.duplex import measure_send_buffer

            probe = measure_send_buffer(4 * max(nbytes, 1 << 20), setup=setup, host=host, timeout=limit)
            held = probe["send_buffer"]
        recs = runners.run(
            key,
            live,
            n,
            steps,
            shaper=shaper,
            params=checked,
            warmup=warm,
            seed=seed,
            timeout=limit,
            setup=setup,
            on_record=on_record,
            host=host,
            force=force,
        )
        return fit, recs, held

    with load.CpuMeter() as meter:  # the machine's CPU use meanwhile (the row's load: the report's rule)
        if namespaces is not None:
            with namespaces as net:
                fit, records, held = go(net.setup, net.bridge_address)
        else:
            fit, records, held = go(None, "127.0.0.1")
    out = compare_records(
        key,
        n,
        records,
        fit,
        batch=live.batch_size,
        gradient_bytes=nbytes,
        random_delay=random_delay,
        params=checked,
        seed=seed,
        emulation=emulation,
        send_buffer=held,
    )
    return {**out, "load": meter.result()}


def predict_live(
    key: str,
    n: int,
    compute: Distribution,
    update_time: float,
    fit: Any,
    *,
    batch: int,
    gradient_bytes: float,
    random_delay: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    emulation: str = "none",
    duplex: float = 1.0,
    send_buffer: float = 0.0,
    activation: float = 0.0,
) -> Any:
    """Predict a live scheme's run with the queuesgd model that describes what the harness runs.

    The one place that maps a live scheme to its model (:func:`_model`), used
    with inputs measured in the run itself (:func:`compare_records`, a
    diagnosis) and with a-priori inputs (:mod:`queuesgd.harness.apriori`).

    Parameters
    ----------
    key : str
        The live scheme (:data:`LIVE_SCHEMES`).
    n : int
        Workers.
    compute : Distribution
        One worker's compute time per step.
    update_time : float
        Seconds of one update (the PS's, per gradient applied; the worker's for all-reduce).
    fit : AlphaBeta, Calibration or None
        The network's alpha-beta fit (``alpha``, ``bandwidth``); None: no communication.
    batch, gradient_bytes, random_delay, params, seed, emulation
        As the run was configured; ``emulation`` chooses sync-PS's form (see below).
    duplex : float
        async-ps: the share of its rate each direction of the PS's link
        keeps while both transmit (:func:`~queuesgd.harness.duplex.measure_duplex`;
        1: full duplex, the default where nothing measured it).
    send_buffer : float
        backup-workers, static-cutoff, stale-synchronous on a real network:
        bytes of a reply the PS's socket buffer takes at once
        (:func:`~queuesgd.harness.duplex.measure_send_buffer`; 0: a send
        blocks until its replies have left).
    activation : float
        eager-SGD: seconds from a round's trigger to its start
        (``EagerSGD(activation=...)``; 0: at once).

    Returns
    -------
    Prediction

    Examples
    --------
    Four ring all-reduce workers, 20 ms of compute and 1 ms of update a step, a 1 MB gradient on a
    link fitted to 100 us and 1 GB/s: the ring's ``2 (n - 1)`` latencies and ``2 (n - 1) / n`` of the
    gradient per link, 0.6 + 1.5 ms, in every step.

    >>> from queuesgd.distributions import Deterministic
    >>> from queuesgd.harness.calibrate import AlphaBeta
    >>> fit = AlphaBeta(alpha=1e-4, bandwidth=1e9, samples=(), r2=1.0)
    >>> law = Deterministic(0.02)
    >>> pred = predict_live("ring-allreduce", 4, law, 0.001, fit, batch=32, gradient_bytes=1e6)
    >>> round(pred.iteration_time, 6), round(pred.throughput, 3), round(4 * 32 / 0.0231, 3)
    (0.0231, 5541.126, 5541.126)

    Notes
    -----
    On a real (or ``tc tbf``-shaped) network a sync-PS worker pushes as soon
    as it is done, while the stragglers still compute; the phase model
    starts every push after the barrier, so sync PS is predicted with the
    fine model (one tensor, per-message costs, FIFO on the PS link). The
    application-level shaper instead waits out the phase model's round after
    the barrier, so with it the closed form is used. For the same reason
    backup workers, the static cutoff (stragglers that finish) and SSP are
    predicted with their shared-link arrival-time forms (``link="shared"``,
    Monte Carlo) except under the application shaper.
    """
    from queuesgd.prediction import predict
    from queuesgd.workload import Cluster, Layer, Workload

    checked = live_scheme(key).check_params(params, n)
    scheme, method = _model(key, checked, emulation, duplex, send_buffer, activation)
    bw_fit, alpha_fit = (math.inf, 0.0) if fit is None else (fit.bandwidth, fit.alpha)
    # The fine road reads the gradient as one tensor: the harness sends it as one message.
    layers = [Layer("gradient", gradient_bytes, 0.0)] if method == "fine" else None
    w = Workload(compute, gradient_bytes, batch_size=batch, update_time=update_time, layers=layers)
    c = Cluster(n, bw_fit if math.isfinite(bw_fit) else 1e15, latency=alpha_fit, stragglers=random_delay)
    return predict(scheme, w, c, method, rng=seed, iterations=20_000 if method == "simulate" else None)


def compare_records(
    key: str,
    n: int,
    records: Sequence[Mapping[str, Any]],
    fit: Any,
    *,
    batch: int,
    gradient_bytes: int,
    random_delay: Any = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    emulation: str = "none",
    send_buffer: float = 0.0,
) -> dict[str, Any]:
    """Measure a live run's records, profile it, predict it, and return the comparison row.

    Shared by :func:`validate` (runs on this machine) and
    ``python -m queuesgd.harness.torchrun --compare`` (records gathered
    from a cluster). The compute law and the update time come from the run's
    own records, so the row is a diagnosis (``inputs: "same-run"``); the
    a-priori protocol is :mod:`queuesgd.harness.apriori`. ``fit`` is the
    run's :class:`~queuesgd.harness.calibrate.AlphaBeta` (``None``: no
    communication, one all-reduce worker).
    """
    checked = live_scheme(key).check_params(params, n)
    out = measured_throughput(records, update_role(key, checked), batch)
    prof = same_run_profile(records, key, checked)
    pred = predict_live(
        key,
        n,
        Empirical(prof["compute"]),
        prof["update_time"],
        fit,
        batch=batch,
        gradient_bytes=gradient_bytes,
        random_delay=random_delay,
        params=checked,
        seed=seed,
        emulation=emulation,
        send_buffer=send_buffer,
    )
    bw_fit, alpha_fit = (math.inf, 0.0) if fit is None else (fit.bandwidth, fit.alpha)
    out.update(
        predicted=pred.throughput,
        error=pred.throughput / out["measured"] - 1.0,
        method=pred.method,
        emulation=emulation,
        calibration={
            "kind": None if fit is None else fit.kind,
            "alpha": alpha_fit,
            "bandwidth": bw_fit,
            "r2": None if fit is None else fit.r2,
            "send_buffer": send_buffer,
        },
        compute_mean=float(np.mean(prof["compute"])),
        compute_scv=float(np.var(prof["compute"]) / np.mean(prof["compute"]) ** 2),
        update_time=prof["update_time"],
        gradient_bytes=gradient_bytes,
        params=dict(checked),
        inputs="same-run",
    )
    return out
