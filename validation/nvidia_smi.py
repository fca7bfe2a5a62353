"""``nvidia-smi`` read in bounded time, for the validation scripts that ask it about the GPU.

A hung driver must not hang a script: a query that fails or runs past its
timeout reads as an empty string.
"""

from __future__ import annotations

import subprocess

#: Seconds one ``nvidia-smi`` query may take: a hung driver gives an empty reading, not a hang.
SMI_TIMEOUT = 10.0


def query(what: str, index: int | None = None, timeout: float = SMI_TIMEOUT) -> str:
    """``nvidia-smi --query-gpu=WHAT`` (of GPU ``index``, or every GPU's lines), stripped; "" if it fails."""
    argv = ["nvidia-smi", *([f"--id={index}"] if index is not None else []), f"--query-gpu={what}"]
    try:
        out = subprocess.run(
            [*argv, "--format=csv,noheader"], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()
