"""Validation results on disk: JSON, CSV, measured-vs-predicted plots, and the accuracy report.

The report (:func:`write_report`) puts every row in a section by where its
prediction's inputs came from (:func:`section_of`, :data:`SECTIONS`): real
training predicted a priori, emulated compute on a real network, the
application shaper's replay of the model (not evidence of accuracy), and
real-training diagnoses with inputs from the same run.

A validation row is a plain dict with at least ``scheme``, ``workers``,
``measured`` (samples/s, mean), ``measured_low`` / ``measured_high`` (its 95%
interval), ``predicted`` (samples/s) and ``error`` (``predicted / measured -
1``), plus the configuration (``steps``, ``workload``, ``straggler``,
``bandwidth``, ``emulation``, ``method`` ...). These functions need no torch.

Examples
--------
>>> rows = [{"scheme": "ring-allreduce", "workers": 2, "measured": 100.0, "predicted": 103.0, "error": 0.03},
...         {"scheme": "ring-allreduce", "workers": 4, "measured": 180.0, "predicted": 171.0, "error": -0.05}]
>>> summary(rows)["ring-allreduce"]
{'configurations': 2, 'median_abs_error': 0.04, 'max_abs_error': 0.05}
"""

from queuesgd.harness.report.markdown import write_report
from queuesgd.harness.report.plots import plot_rows
from queuesgd.harness.report.rows import (
    counted_rows,
    format_table,
    jsonable,
    make_folder,
    read_rows,
    summary,
    write_rows,
)
from queuesgd.harness.report.sections import (
    SECTIONS,
    Section,
    by_section,
    campaign_runs,
    last_run,
    section_of,
    target_met,
)

__all__ = [
    "SECTIONS",
    "Section",
    "by_section",
    "campaign_runs",
    "counted_rows",
    "format_table",
    "jsonable",
    "make_folder",
    "last_run",
    "plot_rows",
    "read_rows",
    "section_of",
    "summary",
    "target_met",
    "write_report",
    "write_rows",
]
