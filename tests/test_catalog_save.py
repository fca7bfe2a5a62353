"""``catalog.save_workload`` writes exactly the path it is given and the trace beside it (issue 23).

The rules are those of ``queuesgd profile --out`` (``_checks.output_file``): a name ending in
``.json`` (nothing appended), no directory, device, FIFO, socket or symbolic link at either file,
an existing writable directory; everything is checked before the first byte is written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import queuesgd as q
from queuesgd.catalog import save_workload
from queuesgd.catalog_files import load_vector_add_curve
from queuesgd.catalog_save import check_layer_names
from queuesgd.catalog_trace import load_trace, microseconds
from queuesgd.errors import InvalidParameterError
from queuesgd.workload import Layer

LAYERS = [Layer("b", 40, 1e-4, 2e-5), Layer("w", 4000, 3e-4, 6e-5)]


def workload(layers: bool = True) -> q.Workload:
    return q.Workload(0.05, None if layers else 4040, batch_size=8, layers=LAYERS if layers else None)


def listing(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def test_exactly_the_named_file_and_its_trace_are_written(tmp_path):
    path = save_workload(workload(), tmp_path / "mine.json")
    assert path == tmp_path / "mine.json"
    assert listing(tmp_path) == {"mine.json", "mine.bk.log"}
    back = q.load_workload(path)
    assert list(back.layers) == LAYERS
    assert back.gradient_bytes == 4040.0  # 40 + 4000, the layers' bytes


def test_without_layers_only_the_json_is_written(tmp_path):
    save_workload(workload(layers=False), tmp_path / "flat.json")
    assert listing(tmp_path) == {"flat.json"}


@pytest.mark.parametrize("name", ["mine", "mine.JSON", "mine.json.bak", ".json", ""])
def test_a_name_without_json_is_refused_and_nothing_appended(tmp_path, name):
    with pytest.raises(InvalidParameterError) as info:
        save_workload(workload(), tmp_path / name if name else "")
    assert info.value.field == "path"
    assert listing(tmp_path) == set()


def test_a_directory_at_the_path_is_refused(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(InvalidParameterError, match="it is a directory"):
        save_workload(workload(), tmp_path / "d.json")
    assert listing(tmp_path) == {"d.json"} and listing(tmp_path / "d.json") == set()


def test_a_directory_where_the_trace_goes_is_refused_before_the_json_is_written(tmp_path):
    (tmp_path / "w.bk.log").mkdir()
    with pytest.raises(InvalidParameterError, match="it is a directory"):
        save_workload(workload(), tmp_path / "w.json")
    assert listing(tmp_path) == {"w.bk.log"}  # no w.json half-written


def test_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep")
    (tmp_path / "link.json").symlink_to(target)
    with pytest.raises(InvalidParameterError, match="symbolic link"):
        save_workload(workload(), tmp_path / "link.json")
    assert target.read_text() == "keep"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(InvalidParameterError, match="FIFO"):
        save_workload(workload(), tmp_path / "pipe.json")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_device_is_refused_and_nothing_is_written_beside_it():
    before = set(os.listdir("/dev"))
    with pytest.raises(InvalidParameterError, match="ending in .json"):
        save_workload(workload(), "/dev/full")
    assert set(os.listdir("/dev")) - before == set()  # no /dev/full.json, no /dev/full.bk.log


def test_a_missing_directory_is_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match="no directory"):
        save_workload(workload(), tmp_path / "missing" / "w.json")
    assert listing(tmp_path) == set()


def test_a_regular_file_is_replaced(tmp_path):
    (tmp_path / "old.json").write_text("stale")
    save_workload(workload(layers=False), tmp_path / "old.json")
    assert q.load_workload(tmp_path / "old.json").batch_size == 8


@pytest.mark.parametrize(("kwargs", "field"), [({"note": 3}, "note"), ({"note": b"x"}, "note")])
def test_wrong_types_are_refused_by_name(tmp_path, kwargs, field):
    with pytest.raises(InvalidParameterError) as info:
        save_workload(workload(), tmp_path / "w.json", **kwargs)
    assert info.value.field == field and listing(tmp_path) == set()
    with pytest.raises(InvalidParameterError) as info:
        save_workload("not a workload", tmp_path / "w.json")  # type: ignore[arg-type]
    assert info.value.field == "workload"


# -- what the system refuses after the checks, and arguments of the wrong type (fuzz audit F3) -----------
@pytest.mark.parametrize("layers", [True, False])
def test_a_write_the_system_refuses_is_one_error_naming_path(tmp_path, monkeypatch, layers):
    # FileNotFoundError, PermissionError, a full disk: raised as they were after output_file's checks passed
    import errno

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(
        InvalidParameterError, match=r"^path: got '.*\.(json|bk\.log)'; accepted: .*No space left"
    ):
        save_workload(workload(layers), tmp_path / "w.json")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_file_under_proc_is_refused_naming_path():
    # /proc is a writable directory to os.access as root, yet takes no new file: FileNotFoundError
    with pytest.raises(InvalidParameterError, match="^path: got '/proc/"):
        save_workload(workload(), "/proc/queuesgd-audit-f3.json")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: microseconds(None), "seconds"),
        (lambda: microseconds("1"), "seconds"),
        (lambda: microseconds(float("nan")), "seconds"),
        (lambda: microseconds(10**400), "seconds"),
        (lambda: load_trace(3), "path"),
        (lambda: load_trace(None), "path"),
        (lambda: load_vector_add_curve(1), "path"),
        (lambda: q.CostCurve.from_file(1.5), "path"),
        (lambda: check_layer_names("f", None), "f"),
        (lambda: check_layer_names("f", 3), "f"),
        (lambda: check_layer_names("f", "fc.weight"), "f"),
    ],
)
def test_arguments_of_the_wrong_type_are_refused_naming_them(call, field):
    # TypeError from float() and pathlib, and a str of names read one character at a time (passed)
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert info.value.field == field


def test_good_names_and_times_read_as_before():
    check_layer_names("model", ("fc.weight", "fc.bias"))
    # the shortest decimal of the float, point moved six places: 5.375578901785e-3 s
    assert microseconds(0.005375578901785) == "5375.578901785" and microseconds(0) == "0"
