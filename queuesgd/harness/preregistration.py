"""Whether a campaign's spec was committed before the campaign ran, read from the git history.

A preregistered campaign's spec (``validation/specs/NAME.json``) is
committed before the campaign runs, and every row of the campaign records
the spec's hash (``spec_hash``: :func:`~queuesgd.harness.apriori.spec_text.spec_hash`
of the spec's document) and when its inputs were measured, its prediction
made and its run started. :func:`check_registration` finds the first commit
in which the spec file's content has that hash (an edit made after it, which
changes the hash, does not hide it), and compares that commit's time with
the earliest time the rows record (:func:`first_row_time`):

- ``registered-before``: the commit is at least a second earlier (git's
  times are in whole seconds, some rows' too);
- ``registered-after``: the commit is at least a second later, in a full
  history (the campaign ran before its spec was committed);
- ``unknown``: everything else, with the reason: no git, not a repository,
  a shallow clone whose history does not reach far enough, a spec never
  committed with that hash, rows without times, or both times within one
  second. Never ``registered-before`` without a commit that shows it.

The commit times are the committer's (``%cI``), which a rebase renews:
a rebased history can read ``registered-after``, never the reverse.

Examples
--------
>>> import tempfile
>>> result = check_registration(tempfile.mkdtemp(), "spec.json", [{"spec_hash": "ab" * 32}])
>>> result.status, result.describe()
('unknown', 'not checked (no history)')
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.spec_text import spec_document, spec_hash

__all__ = [
    "AFTER",
    "BEFORE",
    "ROW_TIMES",
    "UNKNOWN",
    "Registration",
    "check_registration",
    "first_row_time",
    "registering_commit",
]

BEFORE, AFTER, UNKNOWN = "registered-before", "registered-after", "unknown"

#: The fields of a campaign's row that say when something of the campaign happened (a dot is a nested
#: field): its inputs measured, its prediction made and stored, its run started.
ROW_TIMES = (
    "profile_measured",
    "profile.measured",
    "fsdp_profile_measured",
    "calibration_measured",
    "calibration.measured",
    "exchange_measured",
    "probes.measured",
    "predicted_at",
    "prediction_stored",
    "started",
    "run_started",
)

#: The resolution of git's commit times (and of the rows' second-stamped times).
SECOND = dt.timedelta(seconds=1)

#: The reason of an ``unknown`` that the history here cannot settle (no git, a shallow clone).
NO_HISTORY = "no history"

#: Longest wait for one git command, in seconds.
GIT_TIMEOUT = 60


@dataclass(frozen=True)
class Registration:
    """The outcome of :func:`check_registration`.

    Attributes
    ----------
    status : str
        ``registered-before``, ``registered-after`` or ``unknown``.
    spec_hash : str
        The hash the rows record.
    commit : str or None
        The first commit whose spec file has that hash (None where none was found).
    committed : datetime or None
        That commit's time (the committer's).
    first_row : datetime or None
        The earliest time the rows record (:func:`first_row_time`).
    reason : str
        Why the status is ``unknown`` (empty otherwise).
    code : tuple of int
        ``(contain, recorded)``: of the rows that record the commit of the
        code they ran (``commit``, a ``+dirty`` mark stripped), how many ran
        code whose history contains the spec's commit (``git merge-base
        --is-ancestor``: no clock involved), and how many record one.
        ``(0, 0)`` where no commit was found or none is recorded.
    """

    status: str
    spec_hash: str
    commit: str | None = None
    committed: dt.datetime | None = None
    first_row: dt.datetime | None = None
    reason: str = ""
    code: tuple[int, int] = (0, 0)

    def describe(self) -> str:
        """One line for the report: the status, the spec's commit and its time, the first row's time.

        Examples
        --------
        >>> utc = dt.UTC
        >>> Registration(BEFORE, "ab" * 32, "0123456789" * 4, dt.datetime(2026, 11, 26, 20, 55, 1, tzinfo=utc),
        ...              dt.datetime(2026, 11, 26, 20, 55, 2, tzinfo=utc)).describe()
        'committed before its first row: spec committed in `0123456` at 2026-11-26 20:55:01 UTC; first row 2026-11-26 20:55:02 UTC'
        """  # noqa: E501
        times = (
            f"spec committed in `{(self.commit or '')[:7]}` at {_utc(self.committed)}; "
            f"first row {_utc(self.first_row)}"
        )
        contain, recorded = self.code
        if recorded:
            times += f"; the code {contain} of {recorded} rows ran contains that commit"
        if self.status == BEFORE:
            return f"committed before its first row: {times}"
        if self.status == AFTER:
            return f"**committed AFTER its first row**: {times}"
        found = f"; {times}" if self.commit and self.first_row else ""
        return f"not checked ({self.reason}){found}"


def _utc(when: dt.datetime | None) -> str:
    if when is None:
        return "-"
    text = when.astimezone(dt.UTC).isoformat(sep=" ")
    return text.removesuffix("+00:00") + " UTC"


def _row_time(row: Mapping[str, Any], field: str) -> dt.datetime | None:
    value: Any = row
    for part in field.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return None
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise InvalidParameterError(
            f"row {field}", value, "an ISO 8601 time with its offset (2026-11-26T20:55:02+0000)"
        )
    return when


def first_row_time(rows: Iterable[Mapping[str, Any]]) -> dt.datetime | None:
    """The earliest of the times the rows record in :data:`ROW_TIMES`; None where they record none.

    Raises
    ------
    InvalidParameterError
        Naming the field, for a time that is not ISO 8601 with its offset
        (a time without one cannot be put in order with a commit's).

    Examples
    --------
    >>> rows = [{"started": "2026-11-26T21:10:32+0000", "profile": {"measured": "2026-11-26T20:59:47+00:00"}},
    ...         {"predicted_at": "2026-11-26T22:00:00+01:00"}]
    >>> first_row_time(rows).isoformat()
    '2026-11-26T20:59:47+00:00'
    >>> first_row_time([{"started": "yesterday"}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: row started: got 'yesterday'; accepted: an ISO 8601 time ...
    """
    times = [t for row in rows for f in ROW_TIMES if (t := _row_time(row, f)) is not None]
    return min(times, default=None)


class _NoHistory(Exception):
    """Git cannot answer here (not installed, not a repository): the check is not made."""


def _git(repo: Path, *args: str, binary: bool = False) -> Any:
    if shutil.which("git") is None:
        raise _NoHistory("git is not installed")
    try:
        done = subprocess.run(
            ["git", "-C", os.fspath(repo), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise _NoHistory(f"git failed: {err}") from None
    if done.returncode != 0:
        raise _NoHistory(done.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
    return done.stdout if binary else done.stdout.decode("utf-8", "replace")


def _history(repo: Path, spec_path: str | os.PathLike[str]) -> tuple[Path, str, list[tuple[str, str, str]]]:
    """The repository's top, the spec's path in it, and its commits oldest first: (commit, time, path)."""
    top = Path(_git(repo, "rev-parse", "--show-toplevel").strip())
    spec = Path(spec_path)
    if not spec.is_absolute():
        spec = Path(repo) / spec
    try:
        inside = Path(os.path.realpath(spec)).relative_to(os.path.realpath(top)).as_posix()
    except ValueError:
        raise InvalidParameterError(
            "spec_path", os.fspath(spec_path), f"a file inside the repository {top}"
        ) from None
    # --follow: the spec's versions under earlier names too; each commit lists the name it has there.
    log = _git(top, "log", "--follow", "--format=%x00%H %cI", "--name-only", "--", inside)
    commits = []
    for entry in log.split("\x00")[1:]:
        head, _, names = entry.partition("\n")
        commit, when = head.split(" ")
        name = next((n for n in names.splitlines() if n.strip()), inside)
        commits.append((commit, when, name))
    return top, inside, commits[::-1]


def registering_commit(
    repo: str | os.PathLike[str], spec_path: str | os.PathLike[str], wanted: str
) -> tuple[str, dt.datetime] | None:
    """The first commit whose version of the spec file hashes to ``wanted``, and its time.

    Every version of the file (under earlier names too) is read from the
    history and hashed as the harness hashes a spec
    (:func:`~queuesgd.harness.apriori.spec_text.spec_document`, then
    :func:`~queuesgd.harness.apriori.spec_text.spec_hash`); a version that is
    not a JSON document is passed over. Of the commits whose version has the
    hash, the one with the earliest time (the committer's; the oldest in the
    history where two tie). None where no version has the hash.

    Parameters
    ----------
    repo : path-like
        A folder inside the git repository.
    spec_path : path-like
        The spec file: absolute, or relative to ``repo``.
    wanted : str
        The registered hash (64 hex digits), as the rows record it.

    Raises
    ------
    InvalidParameterError
        If ``spec_path`` is outside the repository, or git cannot read the
        history here (``repo`` is not in a repository, or git is missing).

    Examples
    --------
    >>> import tempfile
    >>> registering_commit(tempfile.mkdtemp(), "spec.json", "ab" * 32)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: repo: got '...'; accepted: a folder in a git repository (...)
    """
    try:
        return _first_match(Path(repo), spec_path, wanted)
    except _NoHistory as err:
        raise InvalidParameterError(
            "repo", os.fspath(repo), f"a folder in a git repository ({err})"
        ) from None


def _first_match(
    repo: Path, spec_path: str | os.PathLike[str], wanted: str
) -> tuple[str, dt.datetime] | None:
    top, _, commits = _history(repo, spec_path)
    found: tuple[str, dt.datetime] | None = None
    for commit, when, name in commits:  # oldest first; the earliest time wins, whatever the order
        try:
            raw = _git(top, "show", f"{commit}:{name}", binary=True)
            match = spec_hash(spec_document(raw, f"{commit}:{name}")) == wanted
        except (_NoHistory, InvalidParameterError, ValueError):  # deleted there, or not JSON
            continue
        committed = dt.datetime.fromisoformat(when)
        if match and (found is None or committed < found[1]):
            found = (commit, committed)
    return found


def _code_containing(repo: Path, commit: str, rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """``(rows whose recorded code commit has ``commit`` in its history, rows that record one)``.

    A row's code commit was the checkout's HEAD when it ran, so a spec commit
    in its history existed then: evidence of the order that no clock gives.
    A recorded commit the history lacks counts as not containing it.
    """
    verdict: dict[str, bool] = {}
    contain = recorded = 0
    for row in rows:
        code = str(row.get("commit") or "").partition("+")[0]
        if not code:
            continue
        recorded += 1
        if code not in verdict:
            try:
                _git(repo, "merge-base", "--is-ancestor", commit, code)
                verdict[code] = True
            except _NoHistory:  # exit 1 (not an ancestor) or an unknown commit
                verdict[code] = False
        contain += verdict[code]
    return contain, recorded


def _registered_hash(rows: Sequence[Mapping[str, Any]]) -> str | None:
    hashes = {str(r["spec_hash"]) for r in rows if r.get("spec_hash")}
    if len(hashes) > 1:
        raise InvalidParameterError(
            "rows", f"{len(hashes)} spec hashes", "the rows of one campaign (one spec_hash)"
        )
    return next(iter(hashes), None)


def check_registration(
    repo: str | os.PathLike[str],
    spec_path: str | os.PathLike[str],
    rows: Sequence[Mapping[str, Any]],
) -> Registration:
    """Whether the spec the rows record was committed before the earliest of them.

    Parameters
    ----------
    repo : path-like
        A folder inside the git repository (any folder: outside one, or
        without git, the result is ``unknown``, "no history").
    spec_path : path-like
        The spec file (absolute, or relative to ``repo``), as committed
        (``validation/specs/NAME.json``).
    rows : sequence of dict
        The campaign's rows: each records the same ``spec_hash`` and some of
        the times of :data:`ROW_TIMES`.

    Returns
    -------
    Registration
        ``registered-before`` only where the first commit whose spec has the
        rows' hash is at least a second before the earliest row time;
        ``registered-after`` where it is at least a second after it in a
        full (not shallow) history; otherwise ``unknown`` with the reason.

    Raises
    ------
    InvalidParameterError
        If the rows record more than one spec hash, or a time that is not
        ISO 8601 with its offset, or ``spec_path`` is outside the repository.

    Examples
    --------
    >>> import tempfile
    >>> check_registration(tempfile.mkdtemp(), "spec.json", []).reason
    'the rows record no spec_hash'
    """
    wanted = _registered_hash(rows)
    if wanted is None:
        return Registration(UNKNOWN, "", reason="the rows record no spec_hash")
    first = first_row_time(rows)
    try:
        shallow = _git(Path(repo), "rev-parse", "--is-shallow-repository").strip() == "true"
        found = _first_match(Path(repo), spec_path, wanted)
    except _NoHistory:
        return Registration(UNKNOWN, wanted, first_row=first, reason=NO_HISTORY)
    if found is None:
        why = NO_HISTORY if shallow else f"no commit of {os.fspath(spec_path)} has the hash {wanted[:12]}"
        return Registration(UNKNOWN, wanted, first_row=first, reason=why)
    commit, committed = found
    code = _code_containing(Path(repo), commit, rows)
    if first is None:
        return Registration(UNKNOWN, wanted, commit, committed, reason="the rows record no time", code=code)
    if committed + SECOND <= first:
        return Registration(BEFORE, wanted, commit, committed, first, code=code)
    if committed >= first + SECOND:  # a shallow history may lack an earlier commit of the same content
        status, why = (UNKNOWN, NO_HISTORY) if shallow else (AFTER, "")
        return Registration(status, wanted, commit, committed, first, why, code)
    same = "the spec's commit and the first row are within one second"
    return Registration(UNKNOWN, wanted, commit, committed, first, same, code)
