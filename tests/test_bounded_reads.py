"""Issue 23: every read is bounded (size and depth), refuses special files and names the file."""

from __future__ import annotations

import os

import pytest

import queuesgd as q
from queuesgd.catalog_files import MAX_JSON_DEPTH, read_bytes, read_json, read_lines, read_text
from queuesgd.errors import InvalidParameterError
from queuesgd.petri.pnml import from_pnml


def workload_json(name: str, compute: str) -> str:
    return f'{{"name": "{name}", "compute": {compute}, "batch_size": 8, "gradient_bytes": "1MB"}}'


def test_a_workload_nested_200k_deep_is_refused_without_recursing(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(workload_json("deep", "[" * 200_000 + "]" * 200_000))
    with pytest.raises(InvalidParameterError, match="deep.json: got 'arrays and objects nested 200001 deep'"):
        q.load_workload(path)


def test_nesting_is_counted_outside_strings_only(tmp_path):
    path = tmp_path / "strs.json"
    note = '"' + "[" * (MAX_JSON_DEPTH + 10) + '\\" {{"'  # brackets and an escaped quote inside a string
    path.write_text(workload_json("strs", '"10ms"')[:-1] + f', "note": {note}}}')
    assert q.load_workload(path).compute_time == pytest.approx(0.01)
    ok = tmp_path / "ok.json"
    ok.write_text("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert read_json(ok) is not None
    ok.write_text("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    with pytest.raises(InvalidParameterError, match=f"nested {MAX_JSON_DEPTH + 1} deep"):
        read_json(ok)


def test_a_workload_that_is_not_utf8_names_the_file_and_byte(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"name": "bad", "x": "\xff"}')
    with pytest.raises(InvalidParameterError, match=r"bad.json'; accepted: a UTF-8 text file \(byte 22"):
        q.load_workload(path)


def test_a_bom_is_read_as_nothing(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + workload_json("bom", '"10ms"').encode())
    assert q.load_workload(path).batch_size == 8


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_special_files_are_refused_before_reading(tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    for reader in (read_bytes, read_text, read_json, read_lines):
        with pytest.raises(InvalidParameterError, match="a regular file"):
            reader(link)
    with pytest.raises(InvalidParameterError):
        q.load_workload(link)
    with pytest.raises(InvalidParameterError, match="a regular file"):
        from_pnml("/dev/zero")
    with pytest.raises(InvalidParameterError, match="a regular file"):
        read_bytes(tmp_path)  # a directory


def test_a_file_larger_than_the_bound_is_refused_reading_one_byte_past_it(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 101)
    assert read_bytes(path, max_bytes=101) == b"x" * 101
    with pytest.raises(InvalidParameterError, match="at most 100 bytes"):
        read_bytes(path, max_bytes=100)
    with pytest.raises(InvalidParameterError, match="readable file"):
        read_bytes(tmp_path / "missing.txt")


def test_the_cli_reports_a_deep_workload_in_one_line(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "deep.json"
    path.write_text(workload_json("deep", "[" * 200_000 + "]" * 200_000))
    done = subprocess.run(
        [sys.executable, "-m", "queuesgd", "predict", "--workload", str(path), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("queuesgd: error: deep.json")


def test_an_integer_longer_than_python_reads_names_the_file_line_and_length(tmp_path, capsys):
    """Python's int() refuses more than 4,300 digits: a bare ValueError (a traceback on the CLI) before."""
    from queuesgd.cli import main

    path = tmp_path / "long.json"
    path.write_text(workload_json("long", '"10ms"')[:-1] + ',\n "note": ' + "9" * 5000 + "}")
    expected = (
        "long.json line 2: got 'an integer of 5,000 digits (at most 4,300 are read)'; "
        "accepted: valid JSON, its integers of at most 4,300 digits"
    )
    with pytest.raises(InvalidParameterError) as err:
        q.load_workload(path)
    assert str(err.value) == expected
    assert main(["predict", "--workload", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"queuesgd: error: {expected}"]
