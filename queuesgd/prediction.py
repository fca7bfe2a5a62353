"""``predict`` and ``sweep``: from (scheme, workload, cluster) to samples per second."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.cluster import ROW_FIELDS
from queuesgd.errors import InvalidParameterError, NotRepresentable, StateSpaceTooLargeError
from queuesgd.frames import column_rows, html_table, to_frame
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.prediction_inputs import prediction_inputs
from queuesgd.schemes.base import Scheme, SchemeSolution, StationBreakdown, check_executor, placement_note
from queuesgd.workload import Cluster, Workload

__all__ = ["MAX_SWEEP_ROWS", "Prediction", "StationBreakdown", "SweepResult", "predict", "sweep"]

#: Most rows one :func:`sweep` computes (the product of its axes' lengths), and most values one axis
#: takes: ten columns of ``10**7`` rows are about 1 GB. An axis is read no further than this bound, so an
#: endless iterable is refused too.
MAX_SWEEP_ROWS = 10_000_000


@dataclass(frozen=True)
class Prediction:
    """Predicted steady-state performance of a scheme on a cluster.

    Attributes
    ----------
    scheme : str
        The scheme's key (``"async-ps"``).
    workers : int
    throughput : float
        Training samples whose gradients are applied, per second.
    iteration_rate : float
        Model updates per second (also ``updates_per_second``).
    gradients_per_update : float
        Gradients folded into one update (1 for asynchronous SGD).
    iteration_time : float
        Mean time of one worker iteration, seconds.
    breakdown : mapping
        Seconds per worker iteration spent in ``compute``, ``communication``,
        ``update`` (service) and ``waiting`` (queueing for a busy resource).
    stations : mapping of str to StationBreakdown
        The same per station of the model.
    bottleneck : str
        The most utilized resource.
    staleness : float or None
        Mean staleness (updates applied between a gradient's parameter read
        and its own update) where the scheme has staleness, else None.
    method : str
        The solution method that ran (``"closed_form"``, ``"mva"``,
        ``"ctmc"``, ``"simulate"``, and for DDP ``"coarse"`` or ``"fine"``;
        ``"linearizer"`` where exact multi-class MVA was too large;
        ``"schweitzer"``, Bard-Schweitzer approximate MVA, where
        :class:`~queuesgd.AsyncPS`'s exact MVA would exceed 250,000 workers x
        stations (:data:`queuesgd.schemes.ps.async_ps.EXACT_MVA_SIZE`); ``reason``
        says so).
    reason : str
        Why that method was chosen, and any approximation it made (a
        phase-type fit of a non-exponential law, for instance).
    model : object
        The model that was solved (a :class:`~queuesgd.ClosedNetwork`, a
        :class:`~queuesgd.PetriNet`, a :class:`~queuesgd.formula.Formula`...).
    details : mapping
        Scheme-specific results (participation, staleness distribution,
        chosen cutoff, number of CTMC states, ...).
    interval : tuple of float or None
        95% confidence interval of ``throughput`` (simulation only).
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    scheme: str
    workers: int
    throughput: float
    iteration_rate: float
    gradients_per_update: float
    iteration_time: float
    breakdown: Mapping[str, float]
    stations: Mapping[str, StationBreakdown]
    bottleneck: str
    staleness: float | None
    method: str
    reason: str
    model: Any
    details: Mapping[str, Any] = field(default_factory=dict)
    interval: tuple[float, float] | None = None

    @property
    def updates_per_second(self) -> float:
        """Model updates per second (same as ``iteration_rate``)."""
        return self.iteration_rate

    @property
    def memory(self) -> Any:
        """Bytes one worker holds (a :class:`~queuesgd.schemes.memory.Memory`), where the scheme reports it.

        Sharded data parallelism and pipelines report it (``details["memory"]``);
        ``None`` for the other schemes.
        """
        return self.details.get("memory")

    def _repr_html_(self) -> str:
        """The prediction as an HTML table, which Jupyter shows when a cell's value is a Prediction."""
        rate = f"{_fmt_rate(self.throughput)} samples/s"
        if self.interval is not None:
            rate += f" (95% interval {_fmt_rate(self.interval[0])} to {_fmt_rate(self.interval[1])})"
        rows: list[tuple[str, str]] = [
            ("throughput", rate),
            ("updates per second", f"{self.iteration_rate:.6g}"),
            ("gradients per update", f"{self.gradients_per_update:.6g}"),
            ("iteration time", units.format_seconds(self.iteration_time)),
        ]
        rows += [(f"  {k}", units.format_seconds(v)) for k, v in self.breakdown.items()]
        rows.append(("bottleneck", self.bottleneck))
        if self.memory is not None:
            rows.append(("memory per worker", units.format_bytes(self.memory.total)))
        if self.staleness is not None:
            rows.append(("mean staleness", f"{self.staleness:.4g} updates"))
        rows += [("method", self.method), ("reason", self.reason)]
        caption = f"{self.scheme} with {self.workers} workers"
        return html_table(["quantity", "value"], rows, caption=caption)

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in self.breakdown.items())
        return (
            f"{self.scheme} with {self.workers} workers: {self.throughput:.6g} samples/s "
            f"({self.iteration_rate:.6g} updates/s; per iteration: {parts}; "
            f"bottleneck {self.bottleneck}; method {self.method})"
        )


def _wrap(
    scheme: Scheme, workload: Workload, cluster: Cluster, sol: SchemeSolution, reason: str
) -> Prediction:
    per_second = sol.iteration_rate * sol.gradients_per_update * workload.batch_size
    interval = None
    if sol.interval is not None:
        interval = (sol.interval[0] * workload.batch_size, sol.interval[1] * workload.batch_size)
    return Prediction(
        scheme=scheme.key,
        workers=cluster.workers,
        throughput=float(per_second),
        iteration_rate=float(sol.iteration_rate),
        gradients_per_update=float(sol.gradients_per_update),
        iteration_time=float(sol.iteration_time),
        breakdown=MappingProxyType(dict(sol.breakdown)),
        stations=MappingProxyType(dict(sol.stations)),
        bottleneck=sol.bottleneck,
        staleness=None if sol.staleness is None else float(sol.staleness),
        method=sol.method,
        reason=reason,
        model=sol.model,
        details=MappingProxyType(dict(sol.details)),
        interval=interval,
    )


def predict(
    scheme: Scheme,
    workload: Workload | str,
    cluster: Cluster,
    method: str = "auto",
    *,
    rng: np.random.Generator | int | None = None,
    iterations: int | None = None,
) -> Prediction:
    """Predict the throughput of ``scheme`` running ``workload`` on ``cluster``.

    Parameters
    ----------
    scheme : Scheme
        A coordination scheme, e.g. ``SyncPS()``, ``AsyncPS()``,
        ``BackupWorkers(backups=2)``.
    workload : Workload or str
        What one worker computes and sends per step, or a catalog name
        (``"resnet50"``).
    cluster : Cluster
        Workers, links, stragglers.
    method : str
        ``"auto"`` (the cheapest exact method that applies;
        ``Prediction.reason`` says which and why) or one of
        ``scheme.methods``: ``"closed_form"``, ``"mva"`` (exact mean value
        analysis), ``"ctmc"`` (the Markov chain of the scheme's Petri net,
        solved exactly; a non-exponential law is replaced by a phase-type fit
        and the reason says so) or ``"simulate"`` (Monte Carlo with the
        actual laws; ``Prediction.interval`` is its 95% confidence interval).
    rng : numpy.random.Generator or int, optional
        Randomness for ``"simulate"`` (and for schemes that sample): a
        Generator or an integer seed >= 0, checked whatever the method.
    iterations : int, optional
        Length of a simulation, in iterations (the scheme's default if None):
        an integer from 1 to :data:`~queuesgd.run_options.MAX_ITERATIONS`,
        checked whatever the method.

    Returns
    -------
    Prediction
        On a two-level cluster (``Cluster(gpus_per_node=...)``) whose placement
        the scheme's model does not read, the ``reason`` ends with the
        scheme's :func:`~queuesgd.schemes.base.placement_note`.

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster, predict
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> p = predict(AsyncPS(), w, Cluster(workers=1, bandwidth="1Gbit/s"))
    >>> round(p.throughput, 4)            # 32 samples / (0.1 s + 2 x 0.08 s)
    123.0769
    >>> p.method
    'mva'
    """
    scheme, workload, cluster, method, rng, iterations = prediction_inputs(
        scheme, workload, cluster, method, rng, iterations
    )
    scheme.check(workload, cluster)
    if method == "auto":
        used, why = scheme.auto_method(workload, cluster)
    else:
        used, why = method, f"requested: {method}"
    sol = scheme.solve(workload, cluster, used, rng=rng, iterations=iterations)
    reason = why if not sol.reason or sol.reason == why else f"{why}; {sol.reason}"
    note = placement_note(scheme, cluster)  # a two-level cluster whose placement the model does not read
    if note and note in scheme.caveats(cluster, workload):
        reason = f"{reason}; {note}"
    return _wrap(scheme, workload, cluster, sol, reason)


@dataclass(frozen=True)
class SweepResult:
    """A table of predictions, one row per configuration.

    Attributes
    ----------
    scheme : str
    columns : mapping of str to ndarray
        ``workers``, ``bandwidth`` (bytes/s), ``latency`` (s), one column per
        swept scheme parameter, ``throughput`` (samples/s),
        ``iteration_rate`` (updates/s), ``gradients_per_update``,
        ``scaling_factor`` (throughput / (workers x the throughput of one
        worker computing alone, ``batch_size / E[compute]``, as in Zhang et
        al., NetAI 2020; with a compute model, the model's one GPU:
        ``Scheme.single_worker_throughput``), ``bottleneck`` and ``method``.
    method : str
        The method(s) that ran, comma-separated when they differ by row.
    parameter_units : mapping of str to str
        The unit of each swept scheme parameter that takes one (``"s"``,
        ``"B"``...): its column holds the scheme's parsed value in that unit
        (``timeout="25ms"`` is 0.025), as :meth:`to_pandas` says in
        ``attrs["units"]``.
    """

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

    scheme: str
    columns: Mapping[str, np.ndarray]
    method: str
    parameter_units: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __len__(self) -> int:
        return len(self.columns["workers"])

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise InvalidParameterError("column", column, ", ".join(self.columns))
        return self.columns[column]

    def rows(self) -> list[dict[str, Any]]:
        """The table as a list of plain dicts (JSON-ready)."""
        return column_rows(self.columns)

    def to_pandas(self) -> Any:
        """The table as a :class:`pandas.DataFrame`, one row per configuration (needs pandas).

        Columns are those of :attr:`columns`, in SI units (bandwidth in bytes/s,
        latency in s, throughput in samples/s, a swept parameter in its
        :attr:`parameter_units`); ``frame.attrs`` holds the ``scheme``, the
        ``method`` and the ``units`` of each column.

        Raises
        ------
        MissingDependencyError
            Without pandas (``pip install -e ".[pandas]"``).

        Examples
        --------
        >>> from queuesgd import SyncPS, Workload, Cluster, sweep
        >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
        >>> df = sweep(SyncPS(), w, Cluster(1, "1Gbit/s"), workers=[1, 2]).to_pandas()
        >>> list(df.columns[:3]), df.attrs["units"]["throughput"]
        (['workers', 'bandwidth', 'latency'], 'samples/s')
        """
        units = {**_COLUMN_UNITS, **self.parameter_units}
        return to_frame(self.columns, units, scheme=self.scheme, method=self.method)

    def _repr_html_(self) -> str:
        """The table as HTML (the first and last rows of a long one), for Jupyter."""
        c = self.columns
        extra = [k for k in c if k not in _FIXED_COLUMNS]
        header = ["workers", "bandwidth", "latency", *extra, "samples/s", "updates/s"]
        header += ["gradients/update", "scaling factor", "bottleneck", "method"]
        n = len(self)
        shown = list(range(n)) if n <= _HTML_ROWS else [*range(_HTML_ROWS - 5), *range(n - 5, n)]
        rows = []
        for i in shown:
            lat = units.format_seconds(c["latency"][i]) if c["latency"][i] else "0 s"
            rows.append(
                [
                    int(c["workers"][i]),
                    units.format_bandwidth(c["bandwidth"][i]),
                    lat,
                    *(_fmt_param(c[k][i]) for k in extra),
                    _fmt_rate(c["throughput"][i]),
                    f"{c['iteration_rate'][i]:.4g}",
                    f"{c['gradients_per_update'][i]:.3g}",
                    f"{c['scaling_factor'][i]:.3f}",
                    c["bottleneck"][i],
                    c["method"][i],
                ]
            )
        if n > _HTML_ROWS:  # the elided rows' place: row (_HTML_ROWS - 5) onwards
            rows.insert(_HTML_ROWS - 5, ["..."] * len(header))
        note = f"{n} rows; .to_pandas() or .rows() gives them all" if n > _HTML_ROWS else ""
        caption = f"{self.scheme}: {n} configuration{'s' if n != 1 else ''}, method {self.method}"
        return html_table(header, rows, caption=caption, note=note)

    def table(self) -> str:
        """A plain-text table for a terminal."""
        c = self.columns
        extra = [k for k in c if k not in _FIXED_COLUMNS]
        head = f"{'workers':>8} {'bandwidth':>14} {'latency':>10} "
        head += "".join(f"{k:>10} " for k in extra)
        head += f"{'samples/s':>12} {'grads/upd':>9} {'scaling':>8}  bottleneck"
        lines = [head]
        for i in range(len(self)):
            lat = units.format_seconds(c["latency"][i]) if c["latency"][i] else "0 s"
            line = f"{c['workers'][i]:>8d} {units.format_bandwidth(c['bandwidth'][i]):>14} {lat:>10} "
            line += "".join(f"{_fmt_param(c[k][i]):>10} " for k in extra)
            line += (
                f"{_fmt_rate(c['throughput'][i]):>12} {c['gradients_per_update'][i]:>9.3g} "
                f"{c['scaling_factor'][i]:>8.3f}  {c['bottleneck'][i]}"
            )
            lines.append(line)
        return "\n".join(lines)


_FIXED_COLUMNS = (
    "workers",
    "bandwidth",
    "latency",
    "throughput",
    "iteration_rate",
    "gradients_per_update",
    "scaling_factor",
    "bottleneck",
    "method",
)


#: Units of the sweep's columns (``SweepResult.to_pandas().attrs["units"]``); others have none.
_COLUMN_UNITS = {
    "bandwidth": "B/s",
    "latency": "s",
    "throughput": "samples/s",
    "iteration_rate": "updates/s",
    "gradients_per_update": "gradients/update",
}

#: Most rows a sweep's HTML display shows (the first ones and the last 5).
_HTML_ROWS = 30


def _fmt_rate(v: float) -> str:
    """Samples/s with two decimals, or three significant digits below 0.01 (never a bare 0.00)."""
    return f"{v:.2f}" if v >= 0.01 or v == 0 else f"{v:.3g}"


def _fmt_param(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    return str(v)


def _grid(field: str, values: Any, default: Any, parse: Any) -> np.ndarray:
    if values is None:
        values = [default]
    elif isinstance(values, (str, int, float, np.number)):
        values = [values]
    elif not isinstance(values, Iterable):
        raise InvalidParameterError(field, values, "a value or an iterable of values")
    values = _bounded_list(field, values)
    out = np.array([parse(field, v) for v in values], dtype=float)
    if out.size == 0:
        raise InvalidParameterError(field, values, "a non-empty list")
    return out


def _bounded_list(field: str, values: Iterable[Any]) -> list[Any]:
    """At most :data:`MAX_SWEEP_ROWS` values of an iterable, read no further (an endless one is refused)."""
    out = list(itertools.islice(values, MAX_SWEEP_ROWS + 1))
    if len(out) > MAX_SWEEP_ROWS:
        raise InvalidParameterError(
            field, f"more than {MAX_SWEEP_ROWS:,} values", f"at most {MAX_SWEEP_ROWS:,}"
        )
    return out


def _param_values(name: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return [values]
    out = _bounded_list(name, values)
    if not out:
        raise InvalidParameterError(name, values, "a non-empty list")
    return out


def sweep(
    scheme: Scheme,
    workload: Workload | str,
    cluster: Cluster,
    *,
    workers: Iterable[int] | int | None = None,
    bandwidth: Iterable[Any] | Any = None,
    latency: Iterable[Any] | Any = None,
    method: str = "auto",
    rng: np.random.Generator | int | None = None,
    iterations: int | None = None,
    executor: Executor | None = None,
    **parameters: Any,
) -> SweepResult:
    """Predict every combination of workers x bandwidth x latency x scheme parameters.

    Values left out come from ``cluster`` and ``scheme``. Scheme parameters
    are given by name (``backups=[0, 1, 2]``, ``timeout=["50ms", "80ms"]``).
    Every parameter combination is one :meth:`~queuesgd.Scheme.solve_batch`
    call, which equals :func:`predict` row by row: where the scheme has a
    vectorized form of the method (a closed form, or exact MVA for
    :class:`~queuesgd.AsyncPS`) the whole workers x bandwidth x latency grid
    is one NumPy evaluation; otherwise every row is solved on its own.

    Parameters
    ----------
    scheme, workload, cluster, method
        As for :func:`predict`.
    workers, bandwidth, latency : value or iterable of values, optional
        The grid (``cluster``'s value where left out).
    rng : numpy.random.Generator or int, optional
        Randomness for the rows that sample. An integer seed is given to every
        row as is (each row equals :func:`predict` with that seed); a
        Generator is split into one independent stream per row before any row
        runs (rows of one configuration, the same values however spelled, are
        solved once and share it). Checked as :func:`predict` checks it, even
        where no row simulates.
    iterations : int, optional
        Length of each simulation, in iterations (the scheme's default if None);
        checked as :func:`predict` checks it, even where no row simulates.
    executor : concurrent.futures.Executor, optional
        Where the rows that are not vectorized (``"simulate"``, ``"ctmc"``,
        ``"fine"``...) run: a ``ProcessPoolExecutor``, a
        ``ThreadPoolExecutor`` or a Dask ``client.get_executor()`` (see
        ``docs/sweep-at-scale.md``). Rows go in chunks and come back in order;
        vectorized rows always stay in this process. With the same ``rng``
        the table equals, bit for bit, the one computed without an executor.
        The scheme, workload and cluster are pickled to the workers.
    **parameters
        Scheme parameters to sweep, by name. The column of a parameter
        that takes a unit (:meth:`~queuesgd.Scheme.parameter_unit`) holds
        the scheme's parsed value in SI units (``timeout=["25ms", 0.03]``
        gives 0.025 and 0.03, unit ``"s"`` in
        :attr:`SweepResult.parameter_units`); the others hold the values given.

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> from queuesgd import AsyncPS, Workload, Cluster, sweep
    >>> w = Workload(compute=0.1, gradient_bytes="10MB", batch_size=32)
    >>> t = sweep(AsyncPS(), w, Cluster(workers=1, bandwidth="1Gbit/s"),
    ...           workers=[1, 2, 4], bandwidth=["1Gbit/s", "10Gbit/s"])
    >>> len(t), round(float(t["throughput"][0]), 4)
    (6, 123.0769)

    The same simulated rows on a pool of threads (or processes, or a Dask cluster):

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from queuesgd import SyncPS
    >>> kw = dict(workers=[2, 4], method="simulate", rng=1, iterations=200)
    >>> with ThreadPoolExecutor(2) as pool:
    ...     par = sweep(SyncPS(), w, Cluster(1, "1Gbit/s"), executor=pool, **kw)
    >>> bool((par["throughput"] == sweep(SyncPS(), w, Cluster(1, "1Gbit/s"), **kw)["throughput"]).all())
    True
    """
    scheme, workload, cluster, method, rng, iterations = prediction_inputs(
        scheme, workload, cluster, method, rng, iterations
    )
    check_executor(executor)
    if cluster.speeds is not None and workers is not None:
        raise NotRepresentable(
            "sweep over workers needs homogeneous workers (speeds=None); use predict for heterogeneous ones"
        )
    known = scheme.parameters()
    for name in parameters:
        if name not in known:
            raise InvalidParameterError(
                name,
                parameters[name],
                f"a parameter of {type(scheme).__name__}: {', '.join(known) or 'none'}",
            )
    W = _grid("workers", workers, cluster.workers, ROW_FIELDS["workers"]).astype(int)
    B = _grid("bandwidth", bandwidth, cluster.bandwidth, ROW_FIELDS["bandwidth"])
    L = _grid("latency", latency, cluster.latency, ROW_FIELDS["latency"])
    names = list(parameters)
    axes = [_param_values(k, parameters[k]) for k in names]
    rows = len(W) * len(B) * len(L) * math.prod(len(a) for a in axes)
    if rows > MAX_SWEEP_ROWS:
        sizes = " x ".join(str(n) for n in (len(W), len(B), len(L), *(len(a) for a in axes)))
        raise StateSpaceTooLargeError(
            f"sweep of {sizes} = {rows:,} rows; at most {MAX_SWEEP_ROWS:,} are computed at once: split it "
            "into several sweeps (e.g. one per bandwidth) or take fewer values per axis"
        )
    combos = list(itertools.product(*axes))
    # every (workers, bandwidth, latency), workers slowest (the order of itertools.product)
    iw, ib, il = (a.ravel() for a in np.indices((len(W), len(B), len(L))))
    w, b, lat = W[iw], B[ib], L[il]
    parts: list[dict[str, Any]] = []
    for combo in combos:
        s = scheme.replace(**dict(zip(names, combo))) if names else scheme
        part = _sweep_one(s, workload, cluster, w, b, lat, method, rng, iterations, executor)
        for k, v in zip(names, combo):
            # a parameter with a unit is the scheme's parsed value, in SI units ("25ms" is 0.025)
            v = getattr(s, k) if s.parameter_unit(k) is not None else v
            part[k] = _constant_column(v, len(w))
        part["throughput"] = part["iteration_rate"] * part["gradients_per_update"] * workload.batch_size
        part["scaling_factor"] = part["throughput"] / (part["workers"] * s.single_worker_throughput(workload))
        parts.append(part)
    order = ["workers", "bandwidth", "latency", *names, "throughput", "iteration_rate"]
    order += ["gradients_per_update", "scaling_factor", "bottleneck", "method"]
    cols = {k: np.concatenate([p[k] for p in parts]) for k in order}
    used = ", ".join(dict.fromkeys(cols["method"].tolist()))
    units = {k: u for k in names if (u := scheme.parameter_unit(k)) is not None}
    return SweepResult(scheme.key, MappingProxyType(cols), used, MappingProxyType(units))


def _constant_column(value: Any, n: int) -> np.ndarray:
    """``n`` rows of ``value``: a number column, else an object column (a tuple stays one cell)."""
    if isinstance(value, (bool, int, float, np.number)):
        return np.full(n, value)
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def _sweep_one(
    scheme: Scheme,
    workload: Workload,
    cluster: Cluster,
    w: np.ndarray,
    b: np.ndarray,
    lat: np.ndarray,
    method: str,
    rng: Any,
    iterations: int | None,
    executor: Executor | None,
) -> dict[str, Any]:
    batch = scheme.solve_batch(
        workload, cluster, w, b, lat, method, rng=rng, iterations=iterations, executor=executor
    )
    return {
        "workers": w,
        "bandwidth": b,
        "latency": lat,
        "iteration_rate": np.array(batch.iteration_rate),
        "gradients_per_update": np.array(batch.gradients_per_update),
        "bottleneck": np.array(batch.bottleneck),
        "method": np.array(batch.method),
    }
