"""The harness's record writers: a path the system refuses is one error naming the argument and the path.

``/proc`` is a directory every Linux process sees and no process may create a file in (even root), so
each writer kind is given a file there: a JSON record (``records_json.write_json``, which every saved
calibration, profile and campaign document goes through), a folder for one, the rows (JSON and CSV,
``report.write_rows``), the Markdown report (``report.write_report``) and torchrun's JSON-lines log.
The reason the error quotes is read here from the system itself (``open`` of the same path), not from
the code under test.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from queuesgd.errors import InvalidParameterError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="writes under /proc")

ROWS = [{"scheme": "async-ps", "workers": 2, "measured": 100.0, "predicted": 104.0, "error": 0.04}]


def _reason(path: str) -> str:
    """What the system says when ``path`` is opened for writing (the refusal the writers must quote)."""
    try:
        with open(path, "w"):
            pass
    except OSError as err:
        return err.strerror
    os.remove(path)  # pragma: no cover - a system that took the file: the test cannot run here
    pytest.skip(f"{path} could be written here")


def _refused(err: pytest.ExceptionInfo[InvalidParameterError], field: str, path: str, accepted: str) -> None:
    assert err.value.field == field
    assert err.value.got == path
    assert err.value.accepted == f"{accepted} ({_reason(path)})"
    assert "\n" not in str(err.value)  # one line


def test_a_json_record_refused_by_the_system_names_its_path() -> None:
    from queuesgd.harness.apriori import Calibration
    from queuesgd.harness.records_json import write_json

    with pytest.raises(InvalidParameterError) as err:
        write_json("/proc/queuesgd-record.json", {"x": 1})
    _refused(err, "path", "/proc/queuesgd-record.json", "a regular file to write")
    cal = Calibration("allreduce", 2, None, 1e-4, 1e9, 1.0, "none", "now")
    with pytest.raises(InvalidParameterError) as err:  # a record's own save goes the same way
        cal.save("/proc/queuesgd-calibration.json")
    _refused(err, "path", "/proc/queuesgd-calibration.json", "a regular file to write")


def test_a_record_folder_refused_by_the_system_names_it() -> None:
    from queuesgd.harness.records_json import write_json

    with pytest.raises(InvalidParameterError) as err:
        write_json("/proc/queuesgd-folder/record.json", {"x": 1})
    assert err.value.field == "path" and err.value.got == "/proc/queuesgd-folder"
    assert err.value.accepted.startswith("a writable folder (")


def test_rows_refused_by_the_system_name_the_folder_argument() -> None:
    from queuesgd.harness.report import write_rows

    with pytest.raises(InvalidParameterError) as err:
        write_rows(ROWS, "/proc")
    _refused(err, "out", "/proc/results.json", "a regular file to write")


def test_the_report_refused_by_the_system_names_its_path() -> None:
    from queuesgd.harness.report import write_report

    with pytest.raises(InvalidParameterError) as err:
        write_report(ROWS, "/proc/queuesgd-report.md", machine="test")
    _refused(err, "path", "/proc/queuesgd-report.md", "a regular file to write")


def test_torchruns_log_refused_by_the_system_names_out() -> None:
    from queuesgd.harness.torchrun import _JsonLines

    with pytest.raises(InvalidParameterError) as err:
        _JsonLines(Path("/proc/rank0.jsonl"))
    _refused(err, "--out", "/proc/rank0.jsonl", "a regular file to write")


def test_rows_written_are_the_rows_read_back(tmp_path: Path) -> None:
    # the CSV now goes through write_text: the same table as csv.DictWriter writes to a file
    import csv

    from queuesgd.harness.report import read_rows, write_rows

    rows = [*ROWS, {"scheme": "ssp", "workers": 4, "measured": 50.5, "params": {"staleness": 2}}]
    json_path, csv_path = write_rows(rows, tmp_path)[:2]
    assert read_rows(json_path) == rows
    with open(csv_path, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [r["scheme"] for r in table] == ["async-ps", "ssp"]
    assert table[1]["params"] == '{"staleness": 2}' and table[0]["params"] == ""
    assert csv_path.read_bytes().count(b"\r\n") == 3  # csv's own line ends, untranslated
