"""What the device scripts record about a GPU's first use, and their stack dumps: one copy for both.

``run_profile_fidelity.py`` and ``probe_device_first_use.py`` both record the size of the driver's JIT
cache (PTX compiled for a GPU on first use lands there; it grows when that happens) and both dump every
thread's stack periodically and when a time limit's SIGTERM ends the run.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def jit_cache() -> Path:
    """The driver's cache of PTX compiled for this GPU: ``$CUDA_CACHE_PATH``, else ``~/.nv/ComputeCache``."""
    return Path(os.environ.get("CUDA_CACHE_PATH") or Path.home() / ".nv" / "ComputeCache")


def jit_cache_bytes() -> int | None:
    """Bytes in the driver's JIT cache now (None where there is none): it grows when PTX is compiled."""
    root = jit_cache()
    if not root.is_dir():
        return None
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


@contextlib.contextmanager
def stack_dumps(file: Any, every: float) -> Iterator[None]:
    """Every thread's stack to ``file`` every ``every`` seconds, and on SIGTERM (then its default)."""
    faulthandler.dump_traceback_later(every, repeat=True, file=file)
    # killed by a time limit (timeout's SIGTERM): every thread's stack first, then the default action
    faulthandler.register(signal.SIGTERM, file=file, all_threads=True, chain=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        faulthandler.unregister(signal.SIGTERM)
