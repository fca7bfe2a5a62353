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

__all__ = ["Comparison", "compare"]

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
            _interval_text(
                c["error"][i] * 100, c["error_low"][i] * 100, c["error_high"][i] * 100, "{:+.1f}%"
            ),
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
            f"median |error| {self.median_abs_error:.1%}, max {self.max_abs_error:.1%} "
            f"over {n} configuration{'s' if n != 1 else ''}"
        )

    def table(self) -> str:
        """A plain-text table: one line per configuration, 95% intervals in brackets, and a summary.

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
        return "\n".join([*lines, self.summary()])

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


def _interval_text(value: float, low: float, high: float, fmt: str) -> str:
    text = fmt.format(value)
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{fmt.format(low)}, {fmt.format(high)}]"
    return text


def _pick(m: Measurement, column: str, argument: Any, name: str) -> Any:
    """The value of a configuration column, or the argument when the column is absent; not both."""
    if column in m.config:
        if argument is not None:
            raise InvalidParameterError(
                name, argument, f"None when the measurements have a '{column}' column ({m.where})"
            )
        return m.config[column]
    if argument is None:
        raise InvalidParameterError(name, None, f"a {name} argument or a '{column}' column ({m.where})")
    return argument


def _scheme(m: Measurement, scheme: Any, params: Mapping[str, Any]) -> Scheme:
    from queuesgd import registry

    given = _pick(m, "scheme", scheme, "scheme")
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
                f"({', '.join(MEASURE_COLUMNS)}; 'samples', 'run'), or a parameter of {cls.__name__} "
                f"({', '.join(own) or 'none'}); ignore= (--ignore) drops other columns",
            )
    chosen = {**params, **m.params}
    if isinstance(given, str):
        return registry.make(given, "scheme", **chosen)
    return given.replace(**chosen) if chosen else given


def _workload(m: Measurement, workload: Any) -> Workload:
    given = _pick(m, "workload", workload, "workload")
    if isinstance(given, str):
        from queuesgd.catalog import load_workload

        given = load_workload(given)
    if not isinstance(given, Workload):
        raise InvalidParameterError("workload", given, "a Workload or the name of a catalog workload")
    if "batch_size" in m.config:
        given = dataclasses.replace(given, batch_size=m.config["batch_size"])
    return given


def _cluster(m: Measurement, cluster: Cluster | None) -> Cluster:
    if cluster is not None and not isinstance(cluster, Cluster):
        raise InvalidParameterError("cluster", cluster, "a Cluster or None")
    n = m.config["workers"]
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
    durations = np.split(m.values, np.cumsum(m.runs)[:-1])
    if m.samples is not None:
        samples, source = np.split(m.samples, np.cumsum(m.runs)[:-1]), "measured"
    else:  # the model's samples per update: the comparison is then one of update rates
        samples, source = [np.full(d.size, p.gradients_per_update * batch_size) for d in durations], "model"
    kept_d, kept_s = [], []
    for d, s in zip(durations, samples):
        cut = warmup_cut(d.size) if warmup is None else warmup
        if cut >= d.size:
            raise InvalidParameterError(
                "warmup", warmup, f"fewer updates than a run has ({d.size} in a run of {m.where})"
            )
        kept_d.append(d[cut:])
        kept_s.append(s[cut:])
    d, s = np.concatenate(kept_d), np.concatenate(kept_s)
    check_iterations(d.size, f"measured updates after the warm-up ({m.where})")
    if not d.sum() > 0:
        raise InvalidParameterError(f"measured {m.kind} ({m.where})", "no elapsed time", "increasing times")
    rate, (low, high) = ratio_interval(s, d)
    return rate, low, high, int(d.size), source


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
) -> Comparison:
    """Compare measured throughput with the predictions for the same configurations.

    Parameters
    ----------
    measured : str, path, DataFrame, mapping or list of dicts
        The measurements (see :mod:`queuesgd.measured` for the columns): a
        CSV file, a :class:`pandas.DataFrame`, a mapping of column name to
        values, or a list of row dicts. Each row has ``workers`` and one of
        ``samples_per_second`` (one run's throughput), ``time`` (when an
        update was applied, seconds) or ``step_time`` (one update's
        duration), and optionally ``scheme``, ``workload``, ``bandwidth``,
        ``latency``, ``ps_shards``, ``batch_size``, ``samples`` (samples one
        update applied), ``run`` (a run's label) and scheme parameters.
    scheme : Scheme or str, optional
        The scheme of every row, unless the rows have a ``scheme`` column.
    workload : Workload or str, optional
        The workload (or catalog name) of every row, unless the rows have a
        ``workload`` column; a ``batch_size`` column overrides its batch size.
    cluster : Cluster, optional
        Bandwidth, latency, shards and stragglers for rows whose cells do not
        give them (the workers always come from the rows).
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

    Returns
    -------
    Comparison
        One row per configuration, in the order of first appearance.

    Raises
    ------
    InvalidParameterError
        A malformed file or cell (naming the line and column), an unknown
        column, too few steps for a batch-means interval (100 after the
        warm-up), or a scheme / workload / bandwidth given nowhere.

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
    if warmup is not None:
        from queuesgd import _checks

        warmup = _checks.integer("warmup", warmup, minimum=0)
    extra = dict(params or {})
    measurements = read_measured(measured, ignore=ignore)
    rows: list[dict[str, Any]] = []
    for m in measurements:
        s = _scheme(m, scheme, extra)
        w = _workload(m, workload)
        c = _cluster(m, cluster)
        p = predict(s, w, c, method, rng=rng, iterations=iterations)
        rate, low, high, count, source = _measured_rate(m, p, w.batch_size, warmup)
        plo, phi = p.interval if p.interval is not None else (math.nan, math.nan)
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
    columns: dict[str, np.ndarray] = {}
    for k in order:
        values = [r.get(k) for r in rows]
        name = k.removeprefix("param:")
        if k.startswith("param:") or k in (
            "scheme",
            "workload",
            "measurement",
            "samples_from",
            "method",
            "where",
        ):
            columns[name] = np.array(values, dtype=object)
        else:
            columns[name] = np.array(values)
    return Comparison(MappingProxyType(columns))
