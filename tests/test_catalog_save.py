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
