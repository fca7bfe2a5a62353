"""What-if analysis of Zhang et al., *Is Network the Bottleneck of Distributed Training?* (NetAI 2020).

If the network ran at full line rate, how well would data-parallel training
scale? The model (section 4 of the paper, reimplemented on the task graphs of
:mod:`queuesgd.dag`):

- one worker's backward pass replays the single-GPU per-tensor trace: tensor
  ``i``'s gradient is ready ``sum(gap[:i+1])`` after the backward pass starts;
- gradients are fused (:func:`~queuesgd.schemes.fine.fine.fuse`): a message is
  flushed once it holds ``>= fusion_time`` of backward computation or
  ``>= fusion_bytes`` bytes (5 ms and 64 MiB, Horovod's defaults);
- messages are all-reduced one at a time, FIFO, on a ring of ``N`` workers,
  overlapping the rest of the backward pass: reduce-scatter of
  ``S (N-1)/N`` bytes at line rate plus ``N - 1`` vector additions of
  ``S/N`` bytes (the GPU vector-add cost curve), then all-gather of
  ``S (N-1)/N`` bytes; compression by a ratio ``c`` divides the bytes on the
  wire (not the additions, as in the paper's simulator);
- overhead ``= end of the last all-reduce - end of the backward pass``, and
  scaling factor ``= t_batch / (t_batch + overhead)`` with ``t_batch`` the
  single-GPU batch time (the workload's compute time).

Every configuration of a grid shares one task graph (the messages do not
depend on ``N``, the bandwidth or the compression), so the whole grid is one
batched longest-path evaluation.

Examples
--------
>>> r = whatif("resnet50", workers=64, bandwidth="100Gbit/s")
>>> round(r.scaling_factor, 3), r.messages
(0.995, 12)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from queuesgd import _checks, units
from queuesgd.cluster import MAX_WORKERS, MIN_BANDWIDTH
from queuesgd.dag import schedule
from queuesgd.errors import InvalidParameterError
from queuesgd.file_writes import save_figure
from queuesgd.frames import require_xarray, to_frame
from queuesgd.schemes.fine.fine import allreduce_graph, fuse, ring_message_costs
from queuesgd.workload import Cluster, Workload

__all__ = ["WhatIf", "whatif"]

_AXES = ("workload", "workers", "bandwidth", "compression")
#: Units of the result's columns (those not listed have none).
_UNITS = {"bandwidth": "B/s", "overhead": "s", "iteration_time": "s", "batch_time": "s"}

#: Most task durations one batched schedule holds (configurations x tasks): larger grids go in chunks.
CHUNK_VALUES = 2**22
#: Most configurations one call evaluates (about 10 us each on the catalog's profiles: 20 s).
MAX_CONFIGURATIONS = 2_000_000
#: Largest compression ratio taken: a gigabyte of gradient is then a byte on the wire (a larger ratio
#: only overflows the line rate it multiplies).
MAX_COMPRESSION = 1e9


@dataclass(frozen=True)
class WhatIf:
    """Result of :func:`whatif`: one row per configuration, and grids by argument.

    Attributes
    ----------
    columns : mapping of str to ndarray
        ``workload``, ``workers``, ``bandwidth`` (bytes/s), ``compression``,
        ``scaling_factor``, ``overhead`` (s), ``messages`` (fused messages
        per iteration), ``iteration_time`` (s, ``t_batch + overhead``) and
        ``batch_time`` (s), one row per configuration, the last argument
        varying fastest.
    shape : tuple of int
        The grid's shape: one axis per argument given as a list, in the order
        workload, workers, bandwidth, compression (``()`` when every argument
        is a scalar).
    axes : tuple of str
        The names of those axes.
    """

    columns: Mapping[str, np.ndarray]
    shape: tuple[int, ...]
    axes: tuple[str, ...]

    def _grid(self, column: str) -> Any:
        values = self.columns[column]
        return values.reshape(self.shape) if self.shape else values[0].item()

    @property
    def scaling_factor(self) -> Any:
        """``t_batch / (t_batch + overhead)``: a float, or an array of :attr:`shape`."""
        return self._grid("scaling_factor")

    @property
    def overhead(self) -> Any:
        """Seconds from the end of the backward pass to the end of the last all-reduce."""
        return self._grid("overhead")

    @property
    def messages(self) -> Any:
        """Fused messages per iteration (an int, or an array of :attr:`shape`)."""
        return self._grid("messages")

    def __len__(self) -> int:
        return len(self.columns["workers"])

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per configuration (JSON-ready)."""
        return [{k: v[i].item() for k, v in self.columns.items()} for i in range(len(self))]

    def to_pandas(self) -> Any:
        """One row per configuration as a :class:`pandas.DataFrame` (needs pandas).

        The columns are those of :attr:`columns` (bandwidth in bytes/s, times in
        seconds); ``frame.attrs["units"]`` names each column's unit.

        Raises
        ------
        MissingDependencyError
            Without pandas (``pip install -e ".[pandas]"``).

        Examples
        --------
        >>> df = whatif("resnet50", workers=[16, 64], bandwidth="10Gbit/s").to_pandas()
        >>> df[["workers", "scaling_factor"]].round(3).values.tolist()
        [[16.0, 0.572], [64.0, 0.54]]
        """
        return to_frame(self.columns, _UNITS)

    def to_xarray(self) -> Any:
        """The grid as an :class:`xarray.Dataset` (needs xarray).

        Its dimensions are :attr:`axes` (the arguments given as lists, with
        their values as coordinates); an argument given as a scalar is a
        scalar coordinate. The data variables are ``scaling_factor``,
        ``overhead``, ``messages``, ``iteration_time`` and ``batch_time``, each
        shaped :attr:`shape`, equal to the properties of the same names.

        Raises
        ------
        MissingDependencyError
            Without xarray (``pip install -e ".[xarray]"``).

        Examples
        --------
        >>> ds = whatif("resnet50", workers=[16, 64], compression=[1, 5]).to_xarray()
        >>> ds["scaling_factor"].dims, ds["scaling_factor"].sel(workers=64, compression=5).round(3).item()
        (('workers', 'compression'), 0.994)
        """
        xr = require_xarray()
        full = tuple(self.shape[self.axes.index(a)] if a in self.axes else 1 for a in _AXES)
        coords: dict[str, Any] = {}
        for d, axis in enumerate(_AXES):
            along = self.columns[axis].reshape(full)
            values = np.moveaxis(along, d, 0).reshape(full[d], -1)[:, 0]
            unit = {"units": _UNITS[axis]} if _UNITS.get(axis) else {}
            if axis in self.axes:
                coords[axis] = xr.Variable((axis,), values, attrs=unit)
            else:
                coords[axis] = xr.Variable((), values[0], attrs=unit)
        data = {}
        for name in ("scaling_factor", "overhead", "messages", "iteration_time", "batch_time"):
            values = self.columns[name].reshape(self.shape)
            attrs = {"units": _UNITS[name]} if _UNITS.get(name) else {}
            data[name] = xr.Variable(self.axes, values, attrs=attrs)
        return xr.Dataset(data, coords=coords)

    def table(self) -> str:
        """Scaling factors as text: one line per (workload, workers, compression), one column per bandwidth.

        Examples
        --------
        >>> print(whatif("vgg16", workers=[16, 64], bandwidth=["10Gbit/s", "100Gbit/s"]).table())
        workload  workers  compression   10 Gbit/s  100 Gbit/s  messages
        vgg16          16            1       0.212       0.999        15
        vgg16          64            1       0.201       0.993        15
        """
        c = self.columns
        bws = list(dict.fromkeys(c["bandwidth"].tolist()))
        heads = [units.format_bandwidth(b) for b in bws]
        wide = max(9, *(len(str(w)) for w in c["workload"].tolist()))
        lines = [
            f"{'workload':<{wide}} {'workers':>7}  {'compression':>11} "
            + " ".join(f"{h:>11}" for h in heads)
            + "  messages"
        ]
        keys = list(
            dict.fromkeys(zip(c["workload"].tolist(), c["workers"].tolist(), c["compression"].tolist()))
        )
        for wl, n, comp in keys:
            m = (c["workload"] == wl) & (c["workers"] == n) & (c["compression"] == comp)
            cells = []
            for b in bws:
                hit = m & (c["bandwidth"] == b)
                cells.append(f"{float(c['scaling_factor'][hit][0]):>11.3f}")
            msgs = int(c["messages"][m][0])
            lines.append(f"{wl:<{wide}} {n:>7}  {comp:>11.4g} " + " ".join(cells) + f"  {msgs:>8}")
        return "\n".join(lines)

    def plot(self, path: str) -> None:
        """Save scaling factor against bandwidth, one curve per (workload, workers, compression)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as err:  # pragma: no cover - depends on the environment
            from queuesgd.errors import MissingDependencyError

            raise MissingDependencyError("matplotlib", "plot") from err
        c = self.columns
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        keys = list(
            dict.fromkeys(zip(c["workload"].tolist(), c["workers"].tolist(), c["compression"].tolist()))
        )
        for wl, n, comp in keys:
            m = (c["workload"] == wl) & (c["workers"] == n) & (c["compression"] == comp)
            order = np.argsort(c["bandwidth"][m])
            label = f"{wl}, {n} workers" + (f", {comp:g}x compression" if comp != 1 else "")
            ax.plot(
                c["bandwidth"][m][order] * 8 / 1e9, c["scaling_factor"][m][order], marker="o", label=label
            )
        ax.set_xscale("log")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("bandwidth (Gbit/s)")
        ax.set_ylabel("scaling factor")
        ax.set_title("What-if at full line rate (Zhang et al., NetAI 2020)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        try:
            save_figure("plot", fig, path, dpi=120)
        finally:
            plt.close(fig)


def _axis(name: str, value: Any, convert: Any) -> tuple[list[Any], bool]:
    """A list of converted values, each once, and whether the argument was a list (a 0-d array is one).

    Two items that convert to the same value (``16, 16``; ``"10Gbit/s", "1.25GB/s"``) are refused: the
    grid would hold the configuration twice, and the table one row or column for both.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if not items:
            raise InvalidParameterError(name, value, "a value or a non-empty list of values")
        out = [convert(v) for v in items]
        for i, v in enumerate(out):
            j = next((j for j in range(i) if out[j] == v), None)
            if j is not None:
                same = f"items {j} and {i}"  # a Workload's repr is long
                if isinstance(v, (int, float)):
                    same = f"{items[j]!r} and {items[i]!r}"
                raise InvalidParameterError(name, value, f"distinct values ({same} are the same)")
        return out, True
    return [convert(value)], False


def _labels(given: list[Any], workloads: list[Workload]) -> list[str]:
    """The rows' name of each workload: its name, or where two share one, the file or list position.

    Examples
    --------
    >>> w = [Workload(0.1, 1e6, name="x"), Workload(0.2, 1e6, name="x"), Workload(0.3, 1e6, name="y")]
    >>> _labels(["a.json", w[1], "y"], w)
    ['a.json', 'x[1]', 'y']
    """
    names = [w.name or "workload" for w in workloads]
    labels = [
        n if names.count(n) == 1 else (g if isinstance(g, str) else f"{n}[{i}]")
        for i, (n, g) in enumerate(zip(names, given))
    ]
    if len(set(labels)) != len(labels):  # a file named as another workload's name: number them all
        labels = [n if names.count(n) == 1 else f"{n}[{i}]" for i, n in enumerate(names)]
    if len(set(labels)) != len(labels):
        raise InvalidParameterError("workload", labels, "workloads with distinct names")
    return labels


def _workload(value: Any) -> Workload:
    if isinstance(value, Workload):
        if value.layers is None:
            raise InvalidParameterError(
                "workload", value.name, "a workload with a per-tensor profile (layers), e.g. 'resnet50'"
            )
        return value
    if isinstance(value, str):
        from queuesgd.catalog import load_workload

        return load_workload(value)
    raise InvalidParameterError(
        "workload", value, "a catalog name such as 'resnet50' or a Workload with layers"
    )


def _compression(value: Any) -> float:
    accepted = f"a ratio >= 1 (1 = no compression), at most {MAX_COMPRESSION:g}: a finite number"
    try:
        ratio = _checks.positive("compression", value, maximum=MAX_COMPRESSION)
    except InvalidParameterError:
        raise InvalidParameterError("compression", value, accepted) from None
    if ratio < 1:
        raise InvalidParameterError("compression", value, accepted)
    return ratio


def _bandwidth(value: Any) -> float:
    bandwidth = _checks.positive("bandwidth", units.parse_bandwidth(value, "bandwidth"))
    if bandwidth < MIN_BANDWIDTH:
        raise InvalidParameterError(
            "bandwidth", value, "at least 1 bit/s (0.125 bytes/s), e.g. '10Gbit/s'; a plain number is bytes/s"
        )
    return bandwidth


def whatif(
    workload: str | Workload | Sequence[str | Workload] = "resnet50",
    workers: int | Sequence[int] = 64,
    bandwidth: float | str | Sequence[float | str] = "10Gbit/s",
    compression: float | Sequence[float] = 1,
    *,
    latency: float | str = 0.0,
    fusion_bytes: float | str | None = "64MiB",
    fusion_time: float | str | None = "5ms",
    overlap: bool = True,
) -> WhatIf:
    """Scaling factor of ring all-reduce training if the network ran at full line rate.

    Parameters
    ----------
    workload : str, Workload, or a list of them
        A catalog name (``"resnet50"``, ``"resnet101"``, ``"vgg16"``) or a
        :class:`~queuesgd.workload.Workload` with a per-tensor profile; its
        compute time is the single-GPU batch time ``t_batch``.
    workers : int or list of int
        Ring size ``N`` (at most :data:`~queuesgd.cluster.MAX_WORKERS`, a million).
    bandwidth : float, str or list
        Line rate per link (bytes/s, or ``"10Gbit/s"``).
    compression : float or list of float
        Gradient compression ratio ``>= 1`` (bytes on the wire divided by it), at most
        :data:`MAX_COMPRESSION` (1e9).
    latency : float or str
        Per-step latency ``alpha`` of the ring (``2 (N-1) alpha`` per
        all-reduce); the paper's model has none (0). At most 1e9 s.
    fusion_bytes, fusion_time : float, str or None
        Fusion thresholds (64 MiB and 5 ms in the paper); ``None`` disables one.
    overlap : bool
        Overlap communication with the backward pass (the paper: yes). A
        bool; 0/1 and the strings true/false, yes/no, on/off are taken too.

    Returns
    -------
    WhatIf
        ``.scaling_factor``, ``.overhead`` and ``.messages``: scalars when
        every argument is a scalar, else arrays shaped by the list arguments.

    Examples
    --------
    >>> r = whatif("resnet50", workers=[16, 64], bandwidth="10Gbit/s", compression=[1, 5])
    >>> r.shape, r.axes
    ((2, 2), ('workers', 'compression'))
    >>> r.scaling_factor.round(3)
    array([[0.572, 0.998],
           [0.54 , 0.994]])
    """
    workloads, w_list = _axis("workload", workload, _workload)
    labels = _labels(list(workload) if w_list else [workload], workloads)
    ns, n_list = _axis("workers", workers, lambda v: _checks.integer("workers", v, maximum=MAX_WORKERS))
    bws, b_list = _axis("bandwidth", bandwidth, _bandwidth)
    comps, c_list = _axis("compression", compression, _compression)
    alpha = _checks.duration("latency", latency)
    overlap = _checks.boolean("overlap", overlap)
    flags = (w_list, n_list, b_list, c_list)
    shape = tuple(len(v) for v, f in zip((workloads, ns, bws, comps), flags) if f)
    axes = tuple(a for a, f in zip(_AXES, flags) if f)

    total = len(workloads) * len(ns) * len(bws) * len(comps)
    if total > MAX_CONFIGURATIONS:
        raise InvalidParameterError(
            "whatif grid",
            f"{len(workloads)} x {len(ns)} x {len(bws)} x {len(comps)} = {total:,} configurations",
            f"at most {MAX_CONFIGURATIONS:,} per call (about 10 us each, so about {total * 1e-5:,.0f} s); "
            "split the grid into several calls",
        )
    ns_arr, bws_arr, comps_arr = np.array(ns, dtype=int), np.array(bws, dtype=float), np.array(comps)
    parts = []
    for wl, label in zip(workloads, labels):
        buckets = fuse(wl, fusion_bytes, fusion_time)
        sizes = np.array([b.nbytes for b in buckets])
        model = allreduce_graph(
            wl, Cluster(1, 1.0), buckets, np.zeros(len(buckets)), overlap=overlap, update_time=0.0
        )
        # every (workers, bandwidth, compression), workers slowest, as itertools.product orders them
        i, j, k = (a.ravel() for a in np.indices((len(ns), len(bws), len(comps))))
        overhead = np.empty(i.size)
        tasks = len(model.graph.mean_durations)
        step = max(1, CHUNK_VALUES // tasks)  # rows per schedule: memory bounded for any grid
        for lo in range(0, i.size, step):
            rows = slice(lo, lo + step)
            n = ns_arr[i[rows]].astype(float)[:, None]
            bw = bws_arr[j[rows]][:, None]
            comp = comps_arr[k[rows]][:, None]
            # Zhang et al.: reduce-scatter and all-gather each move S (N-1)/N bytes per link at line
            # rate, divided by the compression ratio (as a faster line); the N - 1 additions of S/N
            # bytes are not.
            durations = np.tile(model.graph.mean_durations, (n.shape[0], 1))
            with np.errstate(over="ignore"):  # beyond the float range: an infinite rate, no time on the wire
                rate = bw * comp
            durations[:, list(model.comm_tasks)] = ring_message_costs(
                n, sizes[None, :], rate, alpha, wl.reduction_time
            )
            sched = schedule(model.graph, durations, critical_path=False)
            end_backward = sched.finish[:, model.backward_ends[0]]
            overhead[rows] = np.maximum(sched.makespan - end_backward, 0.0)
        t_batch = wl.compute_time
        parts.append(
            {
                "workload": np.full(i.size, label),
                "workers": ns_arr[i],
                "bandwidth": bws_arr[j],
                "compression": comps_arr[k],
                "scaling_factor": t_batch / (t_batch + overhead),
                "overhead": overhead,
                "messages": np.full(i.size, len(buckets)),
                "iteration_time": t_batch + overhead,
                "batch_time": np.full(i.size, t_batch),
            }
        )
    columns = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    return WhatIf(columns=columns, shape=shape, axes=axes)
