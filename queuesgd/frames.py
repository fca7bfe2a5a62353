"""Result tables for the scientific-Python stack: pandas, xarray and Jupyter's HTML display.

pandas and xarray are optional (the extras ``pandas`` and ``xarray``); each
is imported only when a conversion asks for it, and a missing one is a
:class:`~queuesgd.errors.MissingDependencyError` naming the extra to install.

Examples
--------
>>> print(html_table(["a", "b"], [[1, "<x>"]], caption="two & one"))
<table>
<caption>two &amp; one</caption>
<thead><tr><th>a</th><th>b</th></tr></thead>
<tbody>
<tr><td>1</td><td>&lt;x&gt;</td></tr>
</tbody>
</table>
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, MissingDependencyError
from queuesgd.sequence_checks import items, one_dimensional

__all__ = ["column_rows", "html_table", "require_pandas", "require_xarray", "to_frame"]


def require_pandas() -> Any:
    """The ``pandas`` module, or a :class:`~queuesgd.errors.MissingDependencyError` naming the extra.

    Examples
    --------
    >>> require_pandas().__name__
    'pandas'
    """
    try:
        import pandas
    except ImportError:
        raise MissingDependencyError("pandas", "pandas") from None
    return pandas


def require_xarray() -> Any:
    """The ``xarray`` module, or a :class:`~queuesgd.errors.MissingDependencyError` naming the extra.

    Examples
    --------
    >>> require_xarray().__name__
    'xarray'
    """
    try:
        import xarray
    except ImportError:
        raise MissingDependencyError("xarray", "xarray") from None
    return xarray


def to_frame(columns: Mapping[str, Any], units: Mapping[str, str], **attrs: Any) -> Any:
    """A :class:`pandas.DataFrame` of ``columns`` (copied), with ``attrs["units"]`` per column.

    Examples
    --------
    >>> df = to_frame({"workers": [1, 2], "throughput": [3.0, 5.0]}, {"throughput": "samples/s"})
    >>> df["throughput"].tolist(), df.attrs["units"]
    ([3.0, 5.0], {'workers': '', 'throughput': 'samples/s'})
    """
    columns = _columns(columns)
    if not isinstance(units, Mapping) or not all(isinstance(u, str) for u in units.values()):
        raise InvalidParameterError("units", units, "a mapping of column names to unit strings")
    pd = require_pandas()
    frame = pd.DataFrame({k: np.array(v) for k, v in columns.items()})
    frame.attrs.update(attrs)
    frame.attrs["units"] = {k: units.get(k, "") for k in columns}
    return frame


def column_rows(columns: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """One plain dict per row of equal-length columns (NumPy scalars as Python numbers: JSON-ready).

    Examples
    --------
    >>> column_rows({"workers": np.array([1, 2]), "method": np.array(["mva", "mva"], dtype=object)})
    [{'workers': 1, 'method': 'mva'}, {'workers': 2, 'method': 'mva'}]
    """
    columns = _columns(columns)
    n = len(next(iter(columns.values()))) if columns else 0
    out = []
    for i in range(n):
        row = {}
        for k, v in columns.items():
            x = v[i]
            row[k] = x.item() if isinstance(x, np.generic) else x
        out.append(row)
    return out


def html_table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str = "", note: str = ""
) -> str:
    """An HTML table (every cell escaped), with an optional caption and a note under it.

    Parameters
    ----------
    header : sequence of str
        Column titles.
    rows : sequence of sequences
        Cells, converted with ``str``.
    caption : str
        Shown above the table.
    note : str
        Shown in a last row spanning every column (``"... 90 more rows"``).

    Returns
    -------
    str
        HTML for a notebook's ``_repr_html_``.

    Raises
    ------
    InvalidParameterError
        ``header`` or ``rows`` (or a row) not a sequence, ``caption`` or ``note`` not a str.
    """
    header = items("header", header, "a sequence of column titles")
    body = [
        items(f"rows[{i}]", row, "a sequence of cells") for i, row in enumerate(items("rows", rows, "rows"))
    ]
    for field, text in (("caption", caption), ("note", note)):
        if not isinstance(text, str):
            raise InvalidParameterError(field, text, "a str ('' for none)")
    esc = html.escape
    lines = ["<table>"]
    if caption:
        lines.append(f"<caption>{esc(caption)}</caption>")
    lines.append("<thead><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in header) + "</tr></thead>")
    lines.append("<tbody>")
    for row in body:
        lines.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>")
    if note:
        lines.append(f'<tr><td colspan="{len(header)}">{esc(note)}</td></tr>')
    lines.append("</tbody>")
    lines.append("</table>")
    return "\n".join(lines)


def _columns(columns: Any) -> dict[str, Any]:
    """``columns`` if it maps str names to sequences or 1-d arrays of one length, else an error naming it."""
    accepted = "a mapping of column names (str) to sequences or 1-d arrays of one length"
    if not isinstance(columns, Mapping) or not all(isinstance(k, str) for k in columns):
        raise InvalidParameterError("columns", columns, accepted)
    lengths = {k: _length(f"columns[{k!r}]", v, accepted) for k, v in columns.items()}
    if len(set(lengths.values())) > 1:
        raise InvalidParameterError("columns", lengths, f"{accepted} (the lengths differ)")
    return dict(columns)


def _length(field: str, column: Any, accepted: str) -> int:
    """The length of a column, a 1-d array not copied (a sweep's columns hold up to 10**7 rows)."""
    one_dimensional(field, column, accepted)
    return len(column) if isinstance(column, np.ndarray) else len(items(field, column, accepted))
