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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.batchmeans import check_iterations, half_width, ratio_interval, warmup_cut
from queuesgd.errors import InvalidParameterError
from queuesgd.frames import column_rows, html_table, to_frame
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

#: Most configurations one comparison predicts unless ``max_configurations=`` says more.
MAX_CONFIGURATIONS = 1000
#: Longest estimated run of the predictions, in seconds, unless ``max_seconds=`` says more.
MAX_SECONDS = 30.0
#: Rough seconds of one prediction per method, for the cost guard (measured on one CPU core with
#: resnet50 at 2-64 workers, rounded up): ``mva`` grows with the square of the workers (capped at
#: 3 s, where it switches algorithm), ``simulate`` with the iterations over the scheme's default.
PREDICTION_SECONDS = {
    "closed_form": 0.001,
    "mva": 0.003,
    "coarse": 0.002,
    "fine": 0.02,
    "ctmc": 0.5,
    "simulate": 2.0,
}

#: Units of the comparison's columns (``to_pandas().attrs["units"]``); others have none.
_UNITS = {
    "bandwidth": "B/s",
    "latency": "s",
    "measured": "samples/s",
    "measured_low": "samples/s",
    "measured_high": "samples/s",
    "predicted": "samples/s",
    "predicted_low": "samples/s",
    "predicted_high": "samples/s",
}


@dataclass(frozen=True)
class Comparison:
    """Measured against predicted throughput, one row per configuration.

    Attributes
    ----------
    columns : mapping of str to ndarray
        ``scheme``, ``workload``, ``workers``, ``bandwidth`` (B/s),
        ``latency`` (s), one column per scheme parameter that was measured,
        ``batch_size``; ``measured`` (samples/s) with ``measured_low`` and
        ``measured_high`` (its 95% interval; NaN where there is none),
        ``measurement`` (``samples_per_second``, ``time`` or ``step_time``),
        ``count`` (measured updates after the warm-up, or runs),
        ``samples_from`` (``measured``, or ``model`` where the samples per
        update came from the prediction); ``predicted`` (samples/s) with
        ``predicted_low``/``predicted_high`` (a simulation's interval, else
        NaN); ``error`` (``predicted / measured - 1``) with ``error_low`` and
        ``error_high`` (the error over the measured interval); ``method``;
        ``where`` (the rows it came from).
    """

    columns: Mapping[str, np.ndarray]
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.columns["workers"])

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise InvalidParameterError("column", column, ", ".join(self.columns))
        return self.columns[column]

    @property
    def median_abs_error(self) -> float:
        """Median of ``|error|`` over the configurations."""
        return float(np.median(np.abs(self.columns["error"])))

    @property
    def max_abs_error(self) -> float:
        """Largest ``|error|`` over the configurations."""
        return float(np.max(np.abs(self.columns["error"])))

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per configuration (JSON-ready: NaN where there is no interval)."""
        return column_rows(self.columns)

    def _cells(self, i: int) -> list[str]:
        c = self.columns
        params = self._params()
        lat = units.format_seconds(c["latency"][i]) if c["latency"][i] else "0 s"
        return [
            str(c["scheme"][i]),
            str(c["workload"][i]),
            str(int(c["workers"][i])),
            units.format_bandwidth(c["bandwidth"][i]),
            lat,
            *("" if c[k][i] is None else str(c[k][i]) for k in params),
            _interval_text(c["measured"][i], c["measured_low"][i], c["measured_high"][i], "{:.4g}"),
            _interval_text(c["predicted"][i], c["predicted_low"][i], c["predicted_high"][i], "{:.4g}"),
            _interval_text(c["error"][i], c["error_low"][i], c["error_high"][i], percent),
            str(c["method"][i]),
        ]

    def _params(self) -> list[str]:
        fixed = set(CONFIG_COLUMNS) | set(_RESULT_COLUMNS)
        return [k for k in self.columns if k not in fixed]

    def _header(self) -> list[str]:
        head = ["scheme", "workload", "workers", "bandwidth", "latency", *self._params()]
        return head + ["measured samples/s", "predicted samples/s", "error", "method"]

    def summary(self) -> str:
        """``median |error| 3.1%, max 7.9% over 4 configurations``."""
        n = len(self)
        return (
            f"median |error| {percent(self.median_abs_error, sign=False)}, "
            f"max {percent(self.max_abs_error, sign=False)} "
            f"over {n} configuration{'s' if n != 1 else ''}"
        )

    def table(self, *, notes: bool = True) -> str:
        """A plain-text table: one line per configuration, 95% intervals in brackets, a summary and the notes.

        Parameters
        ----------
        notes : bool
            End with the :attr:`notes` (``note: ...`` lines), if any.

        Examples
        --------
        >>> import queuesgd as q
        >>> w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> runs = {"workers": [1, 1], "samples_per_second": [121.0, 123.0]}
        >>> print(q.compare(runs, q.AsyncPS(), w, q.Cluster(1, "1Gbit/s")).table())
        ... # doctest: +NORMALIZE_WHITESPACE
        scheme    workload  workers  bandwidth  latency  measured samples/s  predicted samples/s
            error                       method
        async-ps  workload  1        1 Gbit/s   0 s      122 [109.3, 134.7]  123.1
            +0.9% [-8.6%, +12.6%]       mva
        median |error| 0.9%, max 0.9% over 1 configuration
        """
        head = self._header()
        body = [self._cells(i) for i in range(len(self))]
        widths = [max(len(r[j]) for r in [head, *body]) for j in range(len(head))]
        lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *body]]
        tail = [f"note: {n}" for n in self.notes] if notes else []
        return "\n".join([*lines, self.summary(), *tail])

    def to_pandas(self) -> Any:
        """The comparison as a :class:`pandas.DataFrame` (needs pandas); units in ``frame.attrs["units"]``.

        Raises
        ------
        MissingDependencyError
            Without pandas (``pip install queuesgd[pandas]``).
        """
        return to_frame(self.columns, _UNITS)

    def _repr_html_(self) -> str:
        rows = [self._cells(i) for i in range(len(self))]
        return html_table(self._header(), rows, caption="measured against predicted", note=self.summary())


#: Result columns after the configuration ones, in order.
_RESULT_COLUMNS = (
    "measured",
    "measured_low",
    "measured_high",
    "measurement",
    "count",
    "samples_from",
    "predicted",
    "predicted_low",
    "predicted_high",
    "error",
    "error_low",
    "error_high",
    "method",
    "where",
)


#: Columns of strings (kept as object arrays).
_TEXT_COLUMNS = ("scheme", "workload", "measurement", "samples_from", "method", "where")


def percent(fraction: float, *, sign: bool = True) -> str:
    """``fraction`` as a percentage of a few characters, however large or small.

    Examples
    --------
    >>> percent(0.0088), percent(-0.5), percent(1e300), percent(0.0123, sign=False)
    ('+0.9%', '-50.0%', '+1e+302%', '1.2%')
    """
    value = fraction * 100 if math.isfinite(fraction) else fraction
    if not math.isfinite(value):
        return f"{value:+}%" if sign else f"{value}%"
    fmt = ("{:+" if sign else "{:") + (".1f}%" if abs(value) < 1e4 else ".3g}%")
    return fmt.format(value)


def _interval_text(value: float, low: float, high: float, fmt: Any) -> str:
    form = fmt.format if isinstance(fmt, str) else fmt
    text = form(value)
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{form(low)}, {form(high)}]"
    return text


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
    if isinstance(given, str):
        return registry.make(given, "scheme", **chosen)
    return given.replace(**chosen) if chosen else given


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
        cut = warmup_cut(d.size) if warmup is None else warmup
        if cut >= d.size:
            raise InvalidParameterError(
                "warmup", warmup, f"fewer updates than a run has ({d.size} in a run of {m.where})"
            )
        kept_d.append(d[cut:])
        kept_s.append(s[cut:] * u[cut:])
        kept_u.append(u[cut:])
    d, s = np.concatenate(kept_d), np.concatenate(kept_s)
    what = "intervals between logged steps" if m.updates is not None else "updates"
    check_iterations(d.size, f"measured {what} after the warm-up ({m.where})")
    if not d.sum() > 0:
        raise InvalidParameterError(f"measured {m.kind} ({m.where})", "no elapsed time", "increasing times")
    with np.errstate(all="ignore"):  # an implausible log (1e-300 s steps) gets a note, not a warning
        rate, (low, high) = ratio_interval(s, d)
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidParameterError(
            f"measured {m.kind} ({m.where})", f"a throughput of {rate!r} samples/s", "a finite throughput > 0"
        )
    return rate, low, high, int(np.concatenate(kept_u).sum()), source


def _relative(predicted: float, measured: float) -> float:
    """``predicted / measured - 1``: NaN without a measured bound, infinite below a zero one."""
    if math.isnan(measured):
        return math.nan
    return predicted / measured - 1.0 if measured > 0 else math.inf


def prediction_seconds(
    scheme: Scheme, workload: Workload, cluster: Cluster, method: str, iterations: int | None
) -> float:
    """Rough seconds :func:`~queuesgd.predict` takes for one configuration (:data:`PREDICTION_SECONDS`).

    ``method`` may be ``"auto"`` (the scheme's choice for this configuration).

    Examples
    --------
    >>> import queuesgd as q
    >>> w = q.Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> twice = 2 * q.SyncPS.simulation_iterations
    >>> prediction_seconds(q.SyncPS(), w, q.Cluster(4, "1Gbit/s"), "simulate", twice)
    4.0
    """
    used = scheme.auto_method(workload, cluster)[0] if method == "auto" else method
    per = PREDICTION_SECONDS.get(used, 0.1)
    if used == "mva":
        per = min(3.0, per + 2e-6 * cluster.workers**2)
    if used == "simulate" and iterations is not None:
        per *= iterations / scheme.simulation_iterations
    return per


def _guard_count(n: int, max_configurations: int) -> None:
    """Refuse, before anything is built, more configurations than allowed (and say how to go on)."""
    if n > max_configurations:
        raise InvalidParameterError(
            "max_configurations",
            max_configurations,
            f"at least the {n:,} configurations of the measurements (each is one prediction): raise "
            "max_configurations= (CLI: --max-configurations), or check that no column varies from row "
            "to row (leave it out with ignore= / --ignore)",
        )


def _guard_time(seconds: list[float], methods: list[str], max_seconds: float) -> None:
    """Refuse, before any prediction, predictions estimated to run longer than allowed."""
    total, n = float(sum(seconds)), len(seconds)
    if total > max_seconds:
        used = ", ".join(dict.fromkeys(methods))
        raise InvalidParameterError(
            "max_seconds",
            max_seconds,
            f"at least the estimated {total:,.0f} s of {n:,} predictions (method {used}, about "
            f"{total / n:.3g} s each): raise max_seconds= (CLI: --max-seconds), use a faster method "
            "(closed_form or mva where the scheme has one), fewer simulated iterations, or fewer "
            "configurations",
        )


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
        Updates dropped at the start of each run (timestamps and step times);
        default: the first :data:`~queuesgd.batchmeans.WARMUP` fraction.
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
        or ``"ns"``.
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
        warm-up), a scheme / workload / bandwidth / workers given nowhere,
        or more configurations or estimated time than allowed.

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
    from queuesgd.rng import as_generator

    # every argument is checked before the log is read or anything is predicted
    method = _checks.name("method", method)
    if warmup is not None:
        warmup = _checks.integer("warmup", warmup, minimum=0)
    if iterations is not None:
        iterations = _checks.integer("iterations", iterations)
    if rng is not None:
        as_generator(rng)
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
    _guard_count(len(measurements), max_configurations)
    setups = []
    for m in measurements:
        c = _cluster(m, cluster, workers)
        s = _scheme(m, scheme, extra)
        w = _workload(m, workload, batch_size, loaded)
        s.check_method(method, auto=True)
        setups.append((m, s, w, c))
    methods = [s.auto_method(w, c)[0] if method == "auto" else method for _, s, w, c in setups]
    _guard_time(
        [prediction_seconds(s, w, c, method, iterations) for _, s, w, c in setups], methods, max_seconds
    )
    rows: list[dict[str, Any]] = []
    notes: list[str] = [n for m in measurements for n in m.notes]
    for m, s, w, c in setups:
        p = predict(s, w, c, method, rng=rng, iterations=iterations)
        rate, low, high, count, source = _measured_rate(m, p, w.batch_size, warmup)
        plo, phi = p.interval if p.interval is not None else (math.nan, math.nan)
        ratio = p.throughput / rate
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
    params_seen = list(dict.fromkeys(k for r in rows for k in r if k.startswith("param:")))
    order = ["scheme", "workload", "workers", "bandwidth", "latency", *params_seen, "batch_size"]
    order += list(_RESULT_COLUMNS)
    out: dict[str, np.ndarray] = {}
    for k in order:
        values = [r.get(k) for r in rows]
        name = k.removeprefix("param:")
        if k.startswith("param:") or k in _TEXT_COLUMNS:
            out[name] = np.array(values, dtype=object)
        else:
            out[name] = np.array(values)
    return Comparison(MappingProxyType(out), tuple(dict.fromkeys(notes)))
