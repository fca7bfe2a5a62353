"""Shared by the tests of the published measurements: a script of ``validation/`` loaded as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

VALIDATION = Path(__file__).resolve().parents[1] / "validation"


def load_script(name: str) -> ModuleType:
    """``validation/<name>.py`` as a module; ``validation/`` goes on the path for its imports."""
    if str(VALIDATION) not in sys.path:
        sys.path.insert(0, str(VALIDATION))
    spec = importlib.util.spec_from_file_location(name, VALIDATION / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
