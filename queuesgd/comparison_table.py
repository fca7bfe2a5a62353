"""The result of :func:`~queuesgd.compare`: measured against predicted throughput, one row per configuration.

:class:`Comparison` holds the columns and shows them as a plain-text table,
a :class:`pandas.DataFrame` or HTML; :func:`percent` writes an error in a
few characters, however large.

Examples
--------
>>> rows = [{"scheme": "async-ps", "workload": "w", "workers": 2, "bandwidth": 1e9, "latency": 0.0,
...          "batch_size": 32, "measured": 100.0, "predicted": 110.0, "error": 0.1}]
>>> c = comparison_from_rows(rows, ())
>>> len(c), c.summary()
(1, 'median |error| 10.0%, max 10.0% over 1 configuration')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from queuesgd import units
from queuesgd.errors import InvalidParameterError
from queuesgd.frames import column_rows, html_table, to_frame
from queuesgd.frozen_pickle import frozen_reduce
from queuesgd.measured_columns import CONFIG_COLUMNS

__all__ = ["Comparison", "comparison_from_rows", "percent"]

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

    __reduce__ = frozen_reduce  # picklable despite its read-only mappings

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
            Without pandas (``pip install -e ".[pandas]"``).
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


def comparison_from_rows(rows: list[dict[str, Any]], notes: tuple[str, ...]) -> Comparison:
    """A :class:`Comparison` of one dict per configuration: its columns in display order.

    Parameters
    ----------
    rows : list of dict
        One per configuration: the configuration columns, scheme parameters
        as ``param:<name>`` keys, and the result columns of
        :class:`Comparison` (one missing in a row is None there).
    notes : tuple of str
        The comparison's notes, kept in order, each once.

    Returns
    -------
    Comparison
        Columns ``scheme``, ``workload``, ``workers``, ``bandwidth``,
        ``latency``, the parameters (``param:`` dropped, object arrays),
        ``batch_size``, then the result columns; text columns are object
        arrays.
    """
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
