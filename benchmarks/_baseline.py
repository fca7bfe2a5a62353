"""Time an earlier commit's code in the same benchmark run, for before/after ratios.

The package as it was at ``rev`` is extracted with ``git archive`` into a
temporary directory (the repository and its working tree are left alone) and a
snippet runs against it in a subprocess, single-threaded like the benchmark.
The snippet prints one JSON line last; that is returned.

Example: ``python benchmarks/bench_statespace.py --baseline 8e320b6~`` times
the solver and generator before issue 13 (the default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_at(rev: str, code: str, timeout: float = 3600) -> dict:
    """Run ``code`` (Python source printing a JSON line last) with ``queuesgd`` as of ``rev``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "queuesgd"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="queuesgd-baseline-") as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = dict(os.environ, PYTHONPATH=tmp, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        here = os.path.realpath(tmp)
        guard = f"import os, queuesgd\nassert os.path.realpath(queuesgd.__file__).startswith({here!r})\n"
        out = subprocess.run(
            [sys.executable, "-c", guard + code],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            raise RuntimeError(f"baseline {rev} failed:\n{out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def describe(rev: str) -> str:
    """``rev`` as a short hash and subject line."""
    return subprocess.run(
        ["git", "log", "-1", "--format=%h %s", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()[:90]
