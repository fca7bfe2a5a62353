"""What a pipeline costs besides its passes and its one-way messages, probed before any run of a campaign.

Two probes, each in runs of its own, *never* fitted to the campaign's runs
(they see none of the real model's computation):

- **the runtime's own work per action** (:func:`probe_runtime`,
  :func:`action_overhead`): ``torch.distributed.pipelining`` trains the
  harness MLP shrunk to almost no arithmetic (:data:`TINY_OPTIONS`, two
  samples per micro-batch) at exactly a campaign configuration's stages,
  schedule and micro-batches, on the campaign's link; the step it measures
  is the runtime's work and its messages. :func:`action_overhead` then solves
  the row's own model (:func:`~queuesgd.harness.apriori_parallel.predict_pipeline`
  on the tiny model's stage profile and the link's calibration) for the
  :class:`~queuesgd.Pipeline` ``action_overhead`` ``h`` (seconds per forward
  or backward pass, serial with the pass on the stage's thread) at which the
  model's step equals the probe's. The model fed ``h`` reproduces the
  probe's own step to the root finder's tolerance: a *self-consistency*
  check, reported as such, not evidence. The real model's prediction then
  takes ``h`` a priori.
- **the link's fused exchanges** (:func:`calibrate_exchange`): on the
  campaign's link, a message one way alone and two messages posted in one
  ``batch_isend_irecv`` in opposite directions
  (:func:`~queuesgd.harness.duplex.measure_exchange`) over a sweep of sizes;
  :meth:`ExchangeCalibration.share` reads the share at the activation's size,
  :class:`~queuesgd.Pipeline`'s ``duplex``.

Why per configuration: a probe on 2026-11-25 found the runtime's cost per
micro-batch not constant (0.26-0.43 ms on one stage, 0.65-0.85 ms with 1F1B
and 0.92-1.21 ms with GPipe on two, growing with the micro-batches), so a
single constant would be a fit; the probe at the campaign's own ``(S,
schedule, M)`` measures each one.

Examples
--------
>>> c = ExchangeCalibration(None, (4096, 65536, 1048576), (1e-4, 3e-4, 9e-3), (1.3e-4, 4e-4, 1.2e-2),
...                         "none", "then")
>>> c.shares, c.share(4096), c.share(262144)       # interpolated in log(size) between 64 KiB and 1 MiB
((0.769, 0.75, 0.75), 0.769, 0.75)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.duplex import STATISTICS
from queuesgd.harness.process_limit import check_processes
from queuesgd.harness.provenance import stamp
from queuesgd.harness.records_json import load_fields, save_fields
from queuesgd.harness.run_args import steps_and_warmup

__all__ = [
    "DEFAULT_PROBES",
    "TINY_MICROBATCH",
    "TINY_MODEL",
    "TINY_OPTIONS",
    "ExchangeCalibration",
    "action_overhead",
    "calibrate_exchange",
    "probe_runtime",
    "probe_settings",
    "profile_tiny",
]

#: The harness model the runtime probe trains, its sizes (16 inputs, 8 hidden units: almost no
#: arithmetic) and the samples of one micro-batch.
TINY_MODEL = "mlp"
TINY_OPTIONS: Mapping[str, int] = {"inputs": 16, "hidden": 8}
TINY_MICROBATCH = 2


#: The probes' settings a campaign spec may give (``probes``), and their defaults.
DEFAULT_PROBES: Mapping[str, Mapping[str, Any]] = {
    "runtime": {"steps": 60, "warmup": 15, "runs": 3, "repetitions": 50, "link": "loopback"},
    "exchange": {
        "sizes": (4096, 65536, 262144, 1 << 20),
        "repeats": 20,
        "at_activations": False,
        "statistic": "median",
        "stream": 1,
    },
}


def probe_settings(value: Any, field: str = "spec.probes") -> dict[str, dict[str, Any]]:
    """The probes' settings of a campaign spec, checked, the defaults filled in (:data:`DEFAULT_PROBES`).

    Examples
    --------
    >>> probe_settings({"runtime": {"runs": 5}})["runtime"]
    {'steps': 60, 'warmup': 15, 'runs': 5, 'repetitions': 50, 'link': 'loopback'}
    >>> probe_settings({"exchange": {"sizes": [64]}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec.probes.exchange.sizes: got [64]; accepted: at least two ...
    """
    given = {} if value is None else value
    if not isinstance(given, Mapping) or any(k not in DEFAULT_PROBES for k in given):
        raise InvalidParameterError(field, value, "an object with runtime and/or exchange settings")
    out: dict[str, dict[str, Any]] = {}
    for probe, defaults in DEFAULT_PROBES.items():
        mine = given.get(probe, {})
        if not isinstance(mine, Mapping) or any(k not in defaults for k in mine):
            raise InvalidParameterError(f"{field}.{probe}", mine, f"an object of {', '.join(defaults)}")
        out[probe] = {**defaults, **mine}
    run = out["runtime"]
    for key in ("runs", "repetitions"):
        run[key] = _checks.integer(f"{field}.runtime.{key}", run[key], maximum=10_000)
    run["steps"], run["warmup"] = steps_and_warmup(run["steps"], run["warmup"], f"{field}.runtime.")
    # where a paired in-runtime profile runs: "loopback", or an emulated link of its own rate (e.g.
    # "10Gbit/s": the namespaces' per-packet path, with transfers short enough to leave the passes alone)
    if run["link"] != "loopback":
        from queuesgd import units

        units.parse_bandwidth(run["link"], f"{field}.runtime.link")
    sweep = out["exchange"]
    sweep["repeats"] = _checks.integer(f"{field}.exchange.repeats", sweep["repeats"], maximum=10_000)
    sizes = _checks.integers(f"{field}.exchange.sizes", sweep["sizes"], maximum=1 << 30)
    if len(set(sizes)) < 2:
        raise InvalidParameterError(f"{field}.exchange.sizes", sweep["sizes"], "at least two distinct sizes")
    sweep["sizes"] = sorted(set(sizes))
    # true: the sweep also times the activations the pipeline lines' models can send (every unit's output)
    sweep["at_activations"] = _checks.boolean(f"{field}.exchange.at_activations", sweep["at_activations"])
    # "mean": each size's times are the repeats' means (a bimodal exchange's cost), not their medians
    sweep["statistic"] = _checks.choice(f"{field}.exchange.statistic", sweep["statistic"], tuple(STATISTICS))
    # > 1: that many messages (and exchanges) back to back per repeat, as a schedule's steady state sends them
    sweep["stream"] = _checks.integer(f"{field}.exchange.stream", sweep["stream"], maximum=1000)
    return out


@dataclass(frozen=True)
class ExchangeCalibration:
    """Times of a message alone and of a fused exchange both ways, per size, on one link.

    Attributes
    ----------
    rate : float or None
        The emulated link's rate, bytes/s (None: loopback).
    sizes : tuple of int
        Message sizes, bytes.
    alone, both : tuple of float
        Seconds of one message one way, and of two messages in opposite
        directions posted together (:func:`~queuesgd.harness.duplex.exchange_probe`):
        the repeats' ``statistic``.
    emulation, measured : str
        How the link was made (``"netns-tbf"`` or ``"none"``), and when.
    statistic : {"median", "mean"}
        How each size's repeats were summarised (files written before it was recorded: ``"median"``).
    stream : int
        Messages timed back to back per repeat (files written before it was recorded: 1).
    """

    rate: float | None
    sizes: tuple[int, ...]
    alone: tuple[float, ...]
    both: tuple[float, ...]
    emulation: str
    measured: str
    statistic: str = "median"
    stream: int = 1

    @property
    def shares(self) -> tuple[float, ...]:
        """Per size, the share of the rate each direction keeps: ``alone / both`` clipped to ``(0, 1]``."""
        from queuesgd.harness.duplex import duplex_share

        return tuple(duplex_share(alone=a, both=b) for a, b in zip(self.alone, self.both))

    def share(self, nbytes: float) -> float:
        """The share at ``nbytes``: linear in ``log(size)`` between the measured sizes, constant beyond.

        Examples
        --------
        >>> ExchangeCalibration(None, (1000, 100000), (1.0, 1.0), (1.0, 2.0), "none", "then").share(10000)
        0.75
        """
        x = _checks.positive("nbytes", nbytes)
        return round(float(np.interp(math.log(x), np.log(self.sizes), self.shares)), 3)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the calibration as JSON."""
        return save_fields(self, path, {"shares": self.shares})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ExchangeCalibration:
        """Read a calibration written by :meth:`save`.

        Examples
        --------
        >>> import tempfile
        >>> c = ExchangeCalibration(1.25e7, (4096, 65536), (1e-3, 6e-3), (1.2e-3, 8e-3), "netns-tbf", "then")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     ExchangeCalibration.load(c.save(Path(d) / "x.json")) == c
        True
        """
        return load_fields(
            cls,
            path,
            "calibration",
            "a file written by ExchangeCalibration.save",
            dict.fromkeys(("sizes", "alone", "both"), tuple),
            ignore=("shares",),
        )


def calibrate_exchange(
    rate: float | str | None = None,
    *,
    sizes: Iterable[int] = (4096, 65536, 262144, 1 << 20),
    repeats: int = 10,
    timeout: float = 300.0,
    statistic: str = "median",
    stream: int = 1,
) -> ExchangeCalibration:
    """Time fused exchanges against one-way messages on a two-rank link, beforehand (a size sweep).

    Parameters
    ----------
    rate : float, str or None
        The emulated link's rate (network namespaces and ``tc tbf``); None: loopback.
    sizes : iterable of int
        Message sizes in bytes (at least two distinct).
    repeats, timeout
        Timed repeats of each phase per size; wall-clock limit of each size's run.
    statistic : {"median", "mean"}
        Each size's times over its repeats (:func:`~queuesgd.harness.duplex.measure_exchange`).
    stream : int
        Messages back to back per repeat (:func:`~queuesgd.harness.duplex.measure_exchange`).

    Returns
    -------
    ExchangeCalibration
    """
    from queuesgd import units
    from queuesgd.harness.duplex import measure_exchange
    from queuesgd.harness.netns import on_network

    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    sizes_b = sorted({4 * max(1, math.ceil(_checks.integer("sizes", s) / 4)) for s in sizes})
    if len(sizes_b) < 2:
        raise InvalidParameterError("sizes", list(sizes), "at least two distinct sizes in bytes")
    reps = _checks.integer("repeats", repeats)
    stat = _checks.choice("statistic", statistic, tuple(STATISTICS))
    k = _checks.integer("stream", stream, maximum=1000)
    measured = stamp()

    def go(setup: Any, host: str) -> list[dict[str, float]]:
        kw = {"setup": setup, "host": host, "timeout": timeout, "statistic": stat, "stream": k}
        return [measure_exchange(n, reps, **kw) for n in sizes_b]

    out, emulation = on_network(2, bw, go)
    return ExchangeCalibration(
        bw,
        tuple(int(m["nbytes"]) for m in out),
        tuple(m["alone"] for m in out),
        tuple(m["both"] for m in out),
        emulation,
        measured,
        stat,
        k,
    )


def profile_tiny(repetitions: int = 50) -> Any:
    """The stage profile of the runtime probe's model (:data:`TINY_OPTIONS`, one micro-batch of 2)."""
    from queuesgd.harness.pipelining import profile_stages

    return profile_stages(
        TINY_MODEL, microbatch=TINY_MICROBATCH, model_options=dict(TINY_OPTIONS), repetitions=repetitions
    )


def probe_runtime(
    stages: int,
    schedule: str,
    microbatches: int,
    rate: float | str | None = None,
    *,
    profile: Any,
    steps: int = 60,
    warmup: int = 15,
    runs: int = 1,
    timeout: float = 300.0,
    force: bool = False,
) -> dict[str, Any]:
    """Train the tiny model with the real pipelining runtime at ``(stages, schedule, microbatches)``.

    On the link of ``rate`` (network namespaces; None: loopback), with the
    balanced split of ``profile`` (:func:`profile_tiny`). The step is measured
    as a campaign row's is (:func:`~queuesgd.harness.run_records.measured_throughput`:
    updates after the warm-up): ``microbatches x 2`` samples over the rate.
    With ``runs > 1`` the tiny model trains that many times, each in
    processes of its own, and the step is the median run's (a run of a few
    milliseconds per step is easily moved by the machine's other work). ``force``: more stages than
    8 per CPU core (:func:`~queuesgd.harness.process_limit.process_limit`), refused without it.

    Returns
    -------
    dict
        ``stages``, ``schedule``, ``microbatches``, ``rate``, ``split``,
        ``step`` (seconds), ``step_low``/``step_high`` (the median run's 95%
        interval), ``steps`` (every run's step), ``emulation``, ``measured``.
    """
    from queuesgd import units
    from queuesgd.harness.netns import on_network
    from queuesgd.harness.pipelining import balanced_split, run_pipeline
    from queuesgd.harness.run_records import measured_throughput

    S = check_processes("stages", stages, _checks.integer("stages", stages), force=force)
    M = _checks.integer("microbatches", microbatches)
    bw = None if rate is None else _checks.positive("rate", units.parse_bandwidth(rate, "rate"))
    split = balanced_split(profile.unit_times(), S)
    measured = stamp()

    def go(setup: Any, host: str) -> list[dict]:
        return run_pipeline(
            TINY_MODEL,
            S,
            M,
            steps,
            schedule=schedule,
            batch_size=TINY_MICROBATCH * M,
            warmup=warmup,
            split=split,
            model_options=dict(TINY_OPTIONS),
            timeout=timeout,
            setup=setup,
            host=host,
            force=force,
        )

    n = _checks.integer("runs", runs)
    samples = M * TINY_MICROBATCH
    found = []
    for _ in range(n):
        records, emulation = on_network(S, bw, go)
        found.append(measured_throughput(records, "worker", TINY_MICROBATCH))
    found.sort(key=lambda out: out["measured"])
    out = found[(n - 1) // 2]  # the median run (the lower middle one of an even count)
    return {
        "stages": S,
        "schedule": schedule,
        "microbatches": M,
        "rate": bw,
        "split": split,
        "step": samples / out["measured"],
        "step_low": samples / out["measured_high"],
        "step_high": samples / out["measured_low"],
        "steps": [samples / f["measured"] for f in found],
        "emulation": emulation,
        "measured": measured,
    }


def action_overhead(
    probe: Mapping[str, Any],
    profile: Any,
    calibration: Calibration | None,
    *,
    duplex: float = 1.0,
    rtol: float = 1e-4,
    link_bucket: float = 0.0,
) -> dict[str, Any]:
    """The runtime's work per pass ``h`` at which the row's model gives the probe's own step.

    Solves ``step(h) = probe["step"]`` for ``h >= 0`` (Brent's method on
    ``[0, probe step]``), where ``step(h)`` is
    :func:`~queuesgd.harness.apriori_parallel.predict_pipeline` of the tiny
    model's ``profile`` on ``calibration`` (the probe's link) at the probe's
    stages, schedule, micro-batches and split, with
    ``Pipeline(action_overhead=h, duplex=duplex, link_bucket=link_bucket)``. The model's step grows
    with ``h`` (every pass lasts ``h`` longer), so the root is unique; where
    the model without any overhead is already as slow as the probe, ``h = 0``.

    Returns
    -------
    dict
        ``action_overhead`` (seconds), ``probe_step``, ``model_step_without``
        (``h = 0``), ``model_step`` (at ``h``) and ``self_consistency``
        (``model_step / probe_step - 1``: the root finder's residual, a
        check of the inversion, not evidence about any other run).

    Examples
    --------
    Two units of 1 ms forward and 2 ms backward, 0.5 ms messages, M = 2,
    1F1B with rendezvous messages, no update: ``(M + 1)(t_f + t_b + c) =
    10.5`` ms a step without overhead (:func:`~queuesgd.harness.apriori_parallel.predict_pipeline`);
    a probe that took 16.5 ms is ``(M + 1) x 2 h = 6 h`` more: ``h = 1`` ms.

    >>> from queuesgd.harness.apriori import Calibration
    >>> from queuesgd.harness.pipelining import StageProfile
    >>> prof = StageProfile("mlp", 2, {}, ("0", "2"), (0.001, 0.001), (0.002, 0.002), (400.0, 400.0),
    ...                     (64.0, 40.0), (0.006, 0.006), 0.0, "then")
    >>> link = Calibration("p2p", 2, None, 5e-4, float("inf"), 1.0, "none", "before")
    >>> probe = {"stages": 2, "schedule": "1f1b", "microbatches": 2, "split": [1, 1], "step": 0.0165}
    >>> out = action_overhead(probe, prof, link)
    >>> [round(out[k], 9) for k in ("action_overhead", "model_step_without", "self_consistency")]
    [0.001, 0.0105, 0.0]
    """
    from scipy.optimize import brentq

    from queuesgd.harness.apriori_parallel.predict import predict_pipeline

    target = _checks.positive("probe.step", probe["step"])

    def step(h: float) -> float:
        pred = predict_pipeline(
            profile,
            calibration,
            probe["stages"],
            probe["microbatches"],
            schedule=probe["schedule"],
            split=probe.get("split"),
            action_overhead=h,
            duplex=duplex,
            link_bucket=link_bucket,
        )
        return float(pred["iteration_time"])

    without = step(0.0)
    h = 0.0
    if without < target:
        h = float(brentq(lambda x: step(x) - target, 0.0, target, rtol=rtol, xtol=1e-9))
    at = step(h)
    return {
        "action_overhead": h,
        "probe_step": target,
        "model_step_without": without,
        "model_step": at,
        "self_consistency": at / target - 1.0,
    }
