"""The notebooks of ``examples/`` run, and are committed as ``make_notebooks.py`` writes them.

Each notebook ends with a cell that asserts its numbers against an independent
source (the formula against ``predict``, the sweep against ``predict`` row by
row, ``compare`` against ``predict`` and the recorded predictions), so
executing it is a test. The execution is skipped only where nbclient or
ipykernel is missing (the ``examples`` extra, part of ``test``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))


def _generator() -> ModuleType:
    pytest.importorskip("nbformat")
    spec = importlib.util.spec_from_file_location("make_notebooks", EXAMPLES / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_three_to_five_notebooks_and_a_readme() -> None:
    assert 3 <= len(NOTEBOOKS) <= 5
    readme = (EXAMPLES / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"]({path.name})" in readme, path.name


def test_notebooks_are_committed_without_outputs() -> None:
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, (path.name, cell["id"])


def test_notebooks_are_what_the_generator_writes() -> None:
    gen = _generator()
    assert sorted(gen.NOTEBOOKS) == [p.name for p in NOTEBOOKS]
    for name, cells in gen.NOTEBOOKS.items():
        stale = f"{name} is stale: run python examples/make_notebooks.py"
        assert (EXAMPLES / name).read_text() == gen.render(cells), stale


@pytest.fixture(scope="module")
def kernel_python() -> str:
    """The interpreter that kernel "python3" starts: it must be this one, which has queuesgd."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from jupyter_client import KernelManager

    executable = KernelManager(kernel_name="python3").format_kernel_cmd()[0]
    prefix = subprocess.run(
        [executable, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    assert prefix == sys.prefix, (
        f'kernel "python3" runs {executable} (prefix {prefix!r}), not this environment ({sys.prefix!r}): '
        "remove the stray kernelspec (jupyter kernelspec list) "
        "or install this one: python -m ipykernel install --sys-prefix"
    )
    return executable


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, kernel_python: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbclient
    import nbformat

    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits it: no display needed
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(EXAMPLES)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and the traceback, on any error
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    last = code[-1]
    assert "assert " in last.source and any(out.get("name") == "stdout" for out in last.outputs)
