"""The stored inputs of an a-priori row: the profile and calibration files it was predicted from.

A row records when its profile and its calibration were measured
(``row["profile"]["measured"]``, ``row["calibration"]["measured"]``); the
files carrying those stamps are its inputs. :func:`stored_inputs` indexes a
validation folder's files; :func:`inputs_of` finds a row's, or None where
they were overwritten before they were kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.calibration import Calibration
from queuesgd.harness.apriori.profile import Profile

__all__ = ["StoredInputs", "inputs_of", "stored_inputs"]


@dataclass(frozen=True)
class StoredInputs:
    """Profiles by ``(model, measured)`` and calibrations by ``(kind, measured)``."""

    profiles: Mapping[tuple[str, str], Profile]
    calibrations: Mapping[tuple[str, str], Calibration]


def stored_inputs(folder: str | os.PathLike[str]) -> StoredInputs:
    """Every profile and calibration file under ``folder/*/profiles`` and ``folder/*/calibrations``.

    A campaign's own folder (``folder/campaigns/NAME/``, :class:`~queuesgd.harness.apriori.Campaign`)
    is read too. Files of other kinds there (FSDP or pipeline profiles, workload files) are skipped.
    """
    root = Path(folder)
    profiles: dict[tuple[str, str], Profile] = {}
    calibrations: dict[tuple[str, str], Calibration] = {}
    for path in sorted([*root.glob("*/profiles/*.json"), *root.glob("campaigns/*/profiles/*.json")]):
        try:
            p = Profile.load(path)
        except InvalidParameterError:
            continue
        profiles[(p.model, p.measured)] = p
    for path in sorted([*root.glob("*/calibrations/*.json"), *root.glob("campaigns/*/calibrations/*.json")]):
        try:
            c = Calibration.load(path)
        except InvalidParameterError:
            continue
        calibrations[(c.kind, c.measured)] = c
    return StoredInputs(profiles, calibrations)


def inputs_of(row: Mapping[str, Any], stored: StoredInputs) -> tuple[Profile, Calibration | None] | None:
    """The profile and calibration (None on loopback) ``row`` was predicted from, or None if not stored.

    Examples
    --------
    >>> inputs_of({"inputs": "same-run"}, StoredInputs({}, {})) is None
    True
    """
    if row.get("inputs") != "a-priori" or not isinstance(row.get("profile"), Mapping):
        return None
    profile = stored.profiles.get((row.get("workload"), row["profile"].get("measured")))
    cal = row.get("calibration")
    calibration = None if not cal else stored.calibrations.get((cal.get("kind"), cal.get("measured")))
    if profile is None or (cal and calibration is None):
        return None
    return profile, calibration
