"""House rule (DESIGN.md, "small modules named for what they hold"): no package module over 600 lines.

A module that grows past the bound holds more than one thing; split it by what
it holds (as ``hybrid_sends``, ``run_args`` and ``gemm_layer`` were split off)
rather than squeezing lines. Counted as ``wc -l`` counts: newline characters.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "queuesgd"
#: Most lines of one module of the package.
MAX_LINES = 600


def test_no_package_module_is_over_600_lines() -> None:
    sizes = {p.relative_to(ROOT.parent).as_posix(): p.read_bytes().count(b"\n") for p in ROOT.rglob("*.py")}
    assert len(sizes) > 100  # the package was found
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
