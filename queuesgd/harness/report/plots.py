"""The measured-against-predicted plot of validation rows (matplotlib, imported when a plot is drawn)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from queuesgd.errors import InvalidParameterError, MissingDependencyError
from queuesgd.file_writes import save_figure


def _band_limits(grid: np.ndarray, band: float) -> tuple[np.ndarray, np.ndarray]:
    """Measured values within ``|predicted / measured - 1| <= band`` of the predicted ``grid``."""
    return grid / (1.0 + band), grid / (1.0 - band)


def plot_rows(
    rows: Sequence[Mapping[str, Any]],
    path: str | os.PathLike[str],
    title: str = "",
    *,
    band: float = 0.15,
) -> Path:
    """Measured against predicted samples/s, one marker per scheme, with the y = x line and a ±``band`` band.

    The band holds the points whose error ``predicted / measured - 1`` is
    within ``±band``. Axes are logarithmic when the rates span more than a
    factor of 20. A path ending in ``.svg`` is written as SVG with a fixed
    hash salt and no date, so the same rows give the same file (it can be
    committed); any other suffix is written as a 120 dpi raster.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("matplotlib", "plot") from err
    if not 0 < band < 1:
        raise InvalidParameterError("band", band, "a fraction between 0 and 1")
    out = Path(path)
    svg = out.suffix.lower() == ".svg"
    rc = {"svg.hashsalt": "queuesgd", "svg.fonttype": "none"} if svg else {}
    done = [r for r in rows if r.get("predicted") is not None and r.get("measured") is not None]
    with matplotlib.rc_context(rc):
        fig, ax = plt.subplots(figsize=(5.5, 5))
        markers = "osD^v<>pX*"
        for i, scheme in enumerate(dict.fromkeys(r["scheme"] for r in done)):
            mine = [r for r in done if r["scheme"] == scheme]
            x = [float(r["predicted"]) for r in mine]
            y = [float(r["measured"]) for r in mine]
            lo = [float(r["measured"]) - float(r.get("measured_low") or r["measured"]) for r in mine]
            hi = [float(r.get("measured_high") or r["measured"]) - float(r["measured"]) for r in mine]
            ax.errorbar(x, y, yerr=[lo, hi], fmt=markers[i % len(markers)], ms=5, capsize=2, label=scheme)
        if done:
            values = [v for r in done for v in (float(r["predicted"]), float(r["measured"])) if v > 0]
            top, bottom = 1.1 * max(values), min(values) / 1.1
            log = top / bottom > 20
            grid = np.geomspace(bottom, top, 50) if log else np.linspace(0, top, 2)
            ax.plot(grid, grid, "k-", lw=0.8, label="measured = predicted")
            low, high = _band_limits(grid, band)
            ax.fill_between(grid, low, high, color="0.85", alpha=0.5, label=f"error within ±{100 * band:g}%")
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlim(bottom, top)
                ax.set_ylim(bottom, top)
            else:
                ax.set_xlim(0, top)
                ax.set_ylim(0, top)
        ax.set_xlabel("predicted samples/s")
        ax.set_ylabel("measured samples/s")
        ax.set_title(title or "queuesgd: measured against predicted", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        try:
            if svg:
                save_figure("out", fig, out, format="svg", metadata={"Date": None, "Creator": None})
            else:
                save_figure("out", fig, out, dpi=120)
        finally:
            plt.close(fig)
    return out
