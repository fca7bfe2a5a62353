"""``compare``: a user's own measured training runs against predictions of the same configurations.

The measurements come from the user's logs (:mod:`queuesgd.measured` reads
them): a table of samples per second per configuration, or the timestamps
(or durations) of the training steps. Each configuration is predicted with
:func:`~queuesgd.predict`, and the error ``predicted / measured - 1`` is
reported with the interval the measurement allows:

- from step timestamps, the measured throughput is the samples applied over
  the time they took, after a warm-up (the first :data:`~queuesgd.batchmeans.WARMUP`
  fraction of each run unless ``warmup=`` says otherwise), with the
  batch-means 95% interval of the ratio (:func:`~queuesgd.batchmeans.ratio_interval`:
  20 batches of consecutive steps, at least 5 steps each);
- from several runs' samples per second, the mean with the Student-t 95%
  interval of the runs (one run: no interval).

Examples
--------
>>> import queuesgd as q
>>> w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
>>> runs = {"workers": [1, 1, 1], "samples_per_second": [120.0, 124.0, 122.0]}
>>> r = q.compare(runs, q.AsyncPS(), w, q.Cluster(1, "1Gbit/s"))
>>> row = r.rows()[0]
>>> round(row["predicted"], 2), row["measured"], round(row["error"], 4)   # 32 / 0.26 s
(123.08, 122.0, 0.0088)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from queuesgd.batchmeans import check_iterations, half_width, ratio_interval_of_runs, warmup_cut
from queuesgd.comparison_cost import (
    MAX_CONFIGURATIONS,
    MAX_SECONDS,
    PREDICTION_SECONDS,
    check_count,
    check_time,
    prediction_seconds,
)
from queuesgd.comparison_table import Comparison, comparison_from_rows, percent
from queuesgd.errors import InvalidParameterError
from queuesgd.measured import CONFIG_COLUMNS, MEASURE_COLUMNS, Measurement, read_measured
from queuesgd.prediction import Prediction, predict
from queuesgd.schemes.base import Scheme
from queuesgd.workload import Cluster, Workload

__all__ = [
    "MAX_CONFIGURATIONS",
    "MAX_SECONDS",
    "PREDICTION_SECONDS",
    "Comparison",
    "compare",
    "percent",
    "prediction_seconds",
]

# Comparison and percent (the result and its table) are queuesgd.comparison_table's; the cost guard
# (MAX_CONFIGURATIONS, MAX_SECONDS, PREDICTION_SECONDS, prediction_seconds) is queuesgd.comparison_cost's.


def _pick(m: Measurement, column: str, argument: Any, name: str, flag: str | None = None) -> Any:
    """The value of a configuration column, or the argument when the column is absent; not both."""
    cli = f" (CLI: {flag})" if flag else ""
    if column in m.config:
        if argument is not None:
            raise InvalidParameterError(
                name, argument, f"None when the measurements have a '{column}' column{cli} ({m.where})"
            )
        return m.config[column]
    if argument is None:
        raise InvalidParameterError(name, None, f"a {name} argument{cli} or a '{column}' column ({m.where})")
    return argument


def _scheme(m: Measurement, scheme: Any, params: Mapping[str, Any]) -> Scheme:
    from queuesgd import registry

    given = _pick(m, "scheme", scheme, "scheme", "--scheme")
    if isinstance(given, str):
        cls = registry.resolve(given, "scheme")
    elif isinstance(given, Scheme):
        cls = type(given)
    else:
        raise InvalidParameterError("scheme", given, "a scheme object such as SyncPS() or a scheme name")
    own = cls.parameters()
    for p in m.params:
        if p not in own:
            raise InvalidParameterError(
                f"measured column {p!r}",
                m.params[p],
                f"a configuration column ({', '.join(CONFIG_COLUMNS)}), a measurement "
                f"({', '.join(MEASURE_COLUMNS)}; 'samples', 'run', 'step'), or a parameter of {cls.__name__} "
                f"({', '.join(own) or 'none'}); ignore= (--ignore) drops other columns, columns= (--column) "
                "renames them",
            )
    chosen = {**params, **m.params}
    try:
        if isinstance(given, str):
            return registry.make(given, "scheme", **chosen)
        return given.replace(**chosen) if chosen else given
    except InvalidParameterError as err:
        cells = [p for p in m.params if err.field.rpartition(".")[2].split("[")[0] == p]
        if not cells:  # an argument's value (params=, --param), not a cell: its message as it is
            raise
        where = f"{m.where}, column {cells[0]}"  # a cell of the log: its place, as every other cell's
        raise InvalidParameterError(err.field, err.got, f"{err.accepted} ({where})") from None


def _workload(m: Measurement, workload: Any, batch_size: int | None, loaded: dict[str, Workload]) -> Workload:
    given = _pick(m, "workload", workload, "workload", "--workload")
    if isinstance(given, str):  # a catalog name, loaded once per comparison
        from queuesgd.catalog import load_workload

        if given not in loaded:
            loaded[given] = load_workload(given)
        given = loaded[given]
    if not isinstance(given, Workload):
        raise InvalidParameterError("workload", given, "a Workload or the name of a catalog workload")
    if "batch_size" in m.config or batch_size is not None:
        given = dataclasses.replace(
            given, batch_size=_pick(m, "batch_size", batch_size, "batch_size", "--batch-size")
        )
    return given


def _cluster(m: Measurement, cluster: Cluster | None, workers: int | None) -> Cluster:
    n = _pick(m, "workers", workers, "workers", "--workers")
    changes = {k: m.config[k] for k in ("bandwidth", "latency", "ps_shards") if k in m.config}
    if cluster is None:
        if "bandwidth" not in changes:
            raise InvalidParameterError(
                "bandwidth", None, f"a 'bandwidth' column or a cluster (CLI: --bandwidth) ({m.where})"
            )
        return Cluster(n, **changes)
    return dataclasses.replace(cluster.with_workers(n), **changes)


def _measured_rate(
    m: Measurement, p: Prediction, batch_size: int, warmup: int | None
) -> tuple[float, float, float, int, str]:
    """``(rate, low, high, count, samples_from)`` of one configuration's measurements."""
    if m.kind == "samples_per_second":
        if warmup is not None:
            raise InvalidParameterError(
                "warmup",
                warmup,
                f"None with samples_per_second measurements (a run's throughput: no updates to drop; "
                f"CLI: --warmup) ({m.where})",
            )
        v = m.values
        mean = float(v.mean())
        half = half_width(v) if v.size >= 2 else math.nan
        return mean, mean - half, mean + half, int(v.size), "measured"
    if 0 in m.runs:
        raise InvalidParameterError(
            f"measured times ({m.where})",
            "a run with one timestamp",
            "at least two timestamps per run (the first starts the clock)",
        )
    cuts = np.cumsum(m.runs)[:-1]
    durations = np.split(m.values, cuts)
    updates = np.split(m.updates if m.updates is not None else np.ones(m.values.size), cuts)
    if m.samples is not None:
        per_update, source = np.split(m.samples, cuts), "measured"
    else:  # the model's samples per update: the comparison is then one of update rates
        per_update = [np.full(d.size, p.gradients_per_update * batch_size) for d in durations]
        source = "model"
    kept_d, kept_s, kept_u = [], [], []
    for d, s, u in zip(durations, per_update, updates):
        cut = warmup_cut(d.size) if warmup is None else _warmup_intervals(u, warmup)
        if cut >= d.size:
            raise InvalidParameterError(
                "warmup", warmup, f"fewer updates than a run has ({int(u.sum())} in a run of {m.where})"
            )
        kept_d.append(d[cut:])
        kept_s.append(s[cut:] * u[cut:])
        kept_u.append(u[cut:])
    d = np.concatenate(kept_d)
    what = "intervals between logged steps" if m.updates is not None else "updates"
    check_iterations(d.size, f"measured {what} after the warm-up ({m.where})")
    if not d.sum() > 0:
        raise InvalidParameterError(f"measured {m.kind} ({m.where})", "no elapsed time", "increasing times")
    with np.errstate(all="ignore"):  # an implausible log (1e-300 s steps) gets a note, not a warning
        rate, (low, high) = ratio_interval_of_runs(kept_s, kept_d)  # batches within runs: order-free
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidParameterError(
            f"measured {m.kind} ({m.where})", f"a throughput of {rate!r} samples/s", "a finite throughput > 0"
        )
    return rate, low, high, int(np.concatenate(kept_u).sum()), source


def _warmup_intervals(updates: np.ndarray, warmup: int) -> int:
    """The intervals that hold the first ``warmup`` updates (a partly covered interval whole).

    Examples
    --------
    >>> _warmup_intervals(np.array([10.0, 10.0, 10.0]), 5), _warmup_intervals(np.ones(4), 2)
    (1, 2)
    """
    if warmup <= 0:
        return 0
    return int(np.searchsorted(np.cumsum(updates), warmup, side="left")) + 1


def _relative(predicted: float, measured: float) -> float:
    """``predicted / measured - 1``: NaN without a measured bound, infinite below a zero one."""
    if math.isnan(measured):
        return math.nan
    return predicted / measured - 1.0 if measured > 0 else math.inf


def compare(
    measured: Any,
    scheme: Scheme | str | None = None,
    workload: Workload | str | None = None,
    cluster: Cluster | None = None,
    *,
    method: str = "auto",
    warmup: int | None = None,
    ignore: Iterable[str] = (),
    params: Mapping[str, Any] | None = None,
    rng: np.random.Generator | int | None = 0,
    iterations: int | None = None,
    workers: int | None = None,
    batch_size: int | None = None,
    columns: Mapping[str, str] | None = None,
    log_pattern: str | None = None,
    time_unit: str = "auto",
    max_configurations: int = MAX_CONFIGURATIONS,
    max_seconds: float = MAX_SECONDS,
) -> Comparison:
    """Compare measured throughput with the predictions for the same configurations.

    Parameters
    ----------
    measured : str, path, DataFrame, mapping or list of dicts
        The measurements (see :mod:`queuesgd.measured` for the columns): a
        CSV file (``"-"``: standard input), a text log (with
        ``log_pattern``), a :class:`pandas.DataFrame`, a mapping of column
        name to values, or a list of row dicts. Each row has one of
        ``samples_per_second`` (one run's throughput), ``time`` (when an
        update was applied, seconds) or ``step_time`` (one update's
        duration), and optionally ``workers``, ``scheme``, ``workload``,
        ``bandwidth``, ``latency``, ``ps_shards``, ``batch_size``,
        ``samples`` (samples one update applied), ``run`` (a run's label),
        ``step`` (the step a row was logged at) and scheme parameters.
    scheme : Scheme or str, optional
        The scheme of every row, unless the rows have a ``scheme`` column.
    workload : Workload or str, optional
        The workload (or catalog name) of every row, unless the rows have a
        ``workload`` column.
    cluster : Cluster, optional
        Bandwidth, latency, shards and stragglers for rows whose cells do not
        give them (the workers come from the rows or ``workers``).
    method : str
        Passed to :func:`~queuesgd.predict`.
    warmup : int, optional
        Updates dropped at the start of each run (timestamps and step times;
        with a ``step`` column the logged intervals that hold the first
        ``warmup`` updates, the last one whole); default: the first
        :data:`~queuesgd.batchmeans.WARMUP` fraction of each run's intervals.
        Only None with ``samples_per_second``.
    ignore : iterable of str
        Columns of the log to leave out (``loss``, ``epoch``, ...).
    params : mapping, optional
        Scheme parameters for every row (columns override them).
    rng : numpy.random.Generator or int, optional
        Randomness for simulated predictions (seed 0 by default, so a
        comparison repeats exactly).
    iterations : int, optional
        Length of a simulated prediction.
    workers, batch_size : int, optional
        The workers, and the samples per worker per step, of rows without a
        ``workers`` (``batch_size``) cell; the workload's batch size otherwise.
    columns : mapping of str to str, optional
        queuesgd's column name -> the log's own (``{"samples_per_second":
        "train/throughput"}``).
    log_pattern : str, optional
        Read ``measured`` as a text log with this regular expression (or a
        name in :data:`~queuesgd.measured.LOG_PATTERNS`): its named groups
        are the columns.
    time_unit : str
        The unit of a ``time`` column: ``"auto"`` (seconds, or a Unix time
        recognized by its size, said in a note), ``"s"``, ``"ms"``, ``"us"``
        or ``"ns"``; also of a ``step_time`` without a unit (``"auto"``:
        seconds). Only ``"auto"`` with ``samples_per_second``.
    max_configurations : int
        Most configurations predicted (:data:`MAX_CONFIGURATIONS`).
    max_seconds : float
        Longest estimated time of the predictions (:data:`MAX_SECONDS`;
        estimated before any runs, per configuration and method, from
        :data:`PREDICTION_SECONDS`).

    Returns
    -------
    Comparison
        One row per configuration, in the order of first appearance, and its
        notes (rows skipped, a time unit recognized, a measurement that
        differs from the prediction by more than 10x, ...).

    Raises
    ------
    InvalidParameterError
        A malformed file or cell (naming the line and column), an unknown
        column, too few steps for a batch-means interval (100 after the
        warm-up), ``warmup`` or ``time_unit`` where they have no effect, a
        measurement whose error is not a finite number, a scheme / workload /
        bandwidth / workers given nowhere, or more configurations or
        estimated time than allowed.

    Examples
    --------
    Step timestamps: a step ends every 0.25 s (the first time starts the clock),
    and each applies 64 samples, so 256 samples/s were measured.

    >>> import queuesgd as q
    >>> w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> log = {"workers": [2] * 201, "time": [0.25 * i for i in range(201)], "samples": [64] * 201}
    >>> r = q.compare(log, q.SyncPS(), w, q.Cluster(2, "1Gbit/s"))
    >>> r.rows()[0]["measured"], r.rows()[0]["count"]          # 200 steps less 5% warm-up
    (256.0, 190)
    """
    from queuesgd import _checks
    from queuesgd.run_options import run_options

    # every argument is checked before the log is read or anything is predicted
    method = _checks.name("method", method)
    if warmup is not None:
        warmup = _checks.integer("warmup", warmup, minimum=0)
    rng, iterations = run_options(rng, iterations)
    if workers is not None:
        workers = _checks.integer("workers", workers)
    if batch_size is not None:
        batch_size = _checks.integer("batch_size", batch_size)
    max_configurations = _checks.integer("max_configurations", max_configurations)
    max_seconds = _checks.positive("max_seconds", max_seconds)
    if params is not None and not isinstance(params, Mapping):
        raise InvalidParameterError("params", params, "a mapping of scheme parameter name -> value")
    extra = {_checks.name("params", k): v for k, v in (params or {}).items()}
    if cluster is not None and not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster or None")
    if isinstance(scheme, Scheme):
        scheme.check_method(method, auto=True)
    loaded: dict[str, Workload] = {}
    if isinstance(workload, str):  # an unknown name is refused before the log is read
        from queuesgd.catalog import load_workload

        loaded[workload] = load_workload(workload)
    measurements = read_measured(
        measured, ignore=ignore, columns=columns, log_pattern=log_pattern, time_unit=time_unit
    )
    # every configuration is built, and the cost of its prediction estimated, before any prediction runs
    check_count(len(measurements), max_configurations)
    setups = []
    for m in measurements:
        c = _cluster(m, cluster, workers)
        s = _scheme(m, scheme, extra)
        w = _workload(m, workload, batch_size, loaded)
        s.check_method(method, auto=True)
        setups.append((m, s, w, c))
    methods = [s.auto_method(w, c)[0] if method == "auto" else method for _, s, w, c in setups]
    check_time(
        [prediction_seconds(s, w, c, method, iterations) for _, s, w, c in setups], methods, max_seconds
    )
    rows: list[dict[str, Any]] = []
    notes: list[str] = [n for m in measurements for n in m.notes]
    for m, s, w, c in setups:
        p = predict(s, w, c, method, rng=rng, iterations=iterations)
        rate, low, high, count, source = _measured_rate(m, p, w.batch_size, warmup)
        plo, phi = p.interval if p.interval is not None else (math.nan, math.nan)
        ratio = p.throughput / rate
        if not math.isfinite(ratio):
            raise InvalidParameterError(
                f"measured {m.kind} ({m.where})",
                f"a throughput of {rate:.6g} samples/s",
                f"one whose error against the prediction ({p.throughput:.6g} samples/s) is a finite number",
            )
        if not 0.1 <= ratio <= 10:
            notes.append(
                f"{m.where}: predicted {p.throughput:.4g} and measured {rate:.4g} samples/s differ by "
                f"{max(ratio, 1 / ratio) if ratio > 0 else math.inf:.3g}x: check the log's units "
                "(time_unit=, a unit on step times), its samples per update, and the workload"
            )
        if source == "model":
            notes.append(
                "no 'samples' column: samples per update are the model's (the rows compare update rates)"
            )
        row: dict[str, Any] = {
            "scheme": p.scheme,
            "workload": w.name or "workload",
            "workers": c.workers,
            "bandwidth": c.bandwidth,
            "latency": c.latency,
            **{f"param:{k}": v for k, v in m.params.items()},
            "batch_size": w.batch_size,
            "measured": rate,
            "measured_low": low,
            "measured_high": high,
            "measurement": m.kind,
            "count": count,
            "samples_from": source,
            "predicted": p.throughput,
            "predicted_low": plo,
            "predicted_high": phi,
            "error": _relative(p.throughput, rate),
            # the error over the measured interval (a higher measurement, a lower error)
            "error_low": _relative(p.throughput, high),
            "error_high": _relative(p.throughput, low),
            "method": p.method,
            "where": m.where,
        }
        rows.append(row)
    return comparison_from_rows(rows, tuple(notes))
