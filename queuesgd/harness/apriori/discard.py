"""Which rows of a campaign count, fixed in its spec before anything runs: :class:`DiscardRule`.

A campaign (:class:`~queuesgd.harness.apriori.Campaign`) measures its inputs
(profiles, calibrations, pipeline probes) and then runs every configuration
live. Other processes on the machine slow both: a disturbed run is slower
than the machine the prediction describes, and a disturbed input makes the
prediction describe a slower machine than the run finds. The rule
(``"discard"`` of a spec) says what happens then:

- ``"disturbed"``: an input or a run during which others took more than
  ``limit`` of the machine (:func:`~queuesgd.harness.load.disturbed`) is
  measured again, up to ``attempts`` tries. A run still disturbed is kept,
  listed and not counted (reason ``"disturbed"``). An input still disturbed
  after its last try is kept too (the prediction needs one), and every row
  predicted from it records it (``inputs_disturbed``: the input's file,
  the foreign share, the steal and the tries); with ``inputs: true`` such a
  row is not counted (reason ``"inputs disturbed"``: decided when the
  prediction is stored, before its run, and no further run is tried, as
  none could make it count);
- ``"none"``: every input is measured once, every run counts (the rows
  still record ``inputs_disturbed``, as information).

``inputs`` defaults to false, so a spec without it means what it meant
before the field existed (and keeps its hash: a spec's hash is its
document's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DISCARD_RULES", "DiscardRule"]

#: How a run is discarded: ``"disturbed"`` (others took more than ``limit`` of the machine during it:
#: :func:`~queuesgd.harness.load.disturbed`; it is kept, listed and uncounted, and the configuration runs
#: again up to ``attempts`` times) or ``"none"`` (every run counts).
DISCARD_RULES = ("disturbed", "none")


@dataclass(frozen=True)
class DiscardRule:
    """Which runs are not counted, fixed before anything runs (see the module docstring).

    Parameters
    ----------
    rule : {"disturbed", "none"}
        See :data:`DISCARD_RULES`.
    attempts : int
        Tries of a run, and of an input's measurement, while the rule finds it disturbed.
    limit : float
        The share of the machine others may take (0.1 is 10%).
    inputs : bool
        Whether a row predicted from an input still disturbed after its last try is not counted.

    Examples
    --------
    >>> rule = DiscardRule("disturbed", attempts=3, limit=0.1)
    >>> busy, idle = ({"error": 0.05, "load": {"foreign_share": share}} for share in (0.3, 0.01))
    >>> rule.reason(busy), rule.reason(idle)
    ('disturbed', None)
    >>> none = DiscardRule("none")
    >>> none.reason(busy), none.reason({"failure": "x", "error": None})
    (None, 'failed')
    >>> kept = {"error": 0.05, "inputs_disturbed": [{"name": "profiles/mlp.json", "foreign_share": 0.4}]}
    >>> rule.reason(kept), DiscardRule("disturbed", 3, 0.1, inputs=True).reason(kept)
    (None, 'inputs disturbed')
    """

    rule: str
    attempts: int = 1
    limit: float = 0.10
    inputs: bool = False

    def reason(self, row: Mapping[str, Any]) -> str | None:
        """Why ``row`` is not counted (``"failed"``, ``"inputs disturbed"``, ``"disturbed"``), or None.

        An input still disturbed comes before the run's own disturbance: another run of the
        configuration would be predicted from the same inputs, so it could not count either.
        """
        from queuesgd.harness.load import disturbed

        if row.get("failure") is not None or row.get("error") is None:
            return "failed"
        if self.inputs and row.get("inputs_disturbed"):
            return "inputs disturbed"
        if self.rule == "disturbed" and disturbed(row.get("load"), self.limit):
            return "disturbed"
        return None

    def measure(
        self, name: str, fn: Callable[[], Any], say: Callable[[str], None] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """``fn()`` (an input's measurement) under a CPU meter, again while the rule finds it disturbed.

        Parameters
        ----------
        name : str
            The input (its file, relative to the campaign's folder): what its rows record.
        fn : callable
            Measures the input and returns it.
        say : callable, optional
            Called with a line for each disturbed try.

        Returns
        -------
        value, record
            The last try's value, and its record: ``name``, ``tries``, ``load`` (the last try's
            :class:`~queuesgd.harness.load.CpuMeter` result) and ``disturbed`` (by ``limit``, whatever
            the rule: information under ``"none"``).

        Examples
        --------
        >>> value, record = DiscardRule("disturbed", attempts=2).measure("probes/x.json", lambda: 42)
        >>> value, record["name"], record["tries"] in (1, 2)
        (42, 'probes/x.json', True)
        """
        from queuesgd.harness.load import CpuMeter, disturbed

        say = say or (lambda line: None)
        tries = self.attempts if self.rule == "disturbed" else 1
        for attempt in range(1, tries + 1):
            with CpuMeter() as meter:
                value = fn()
            load = meter.result()
            busy = disturbed(load, self.limit)
            if not busy:
                break
            taken = f"{_taken(load):.0%} of the machine taken by others"
            if attempt < tries:
                say(f"{name} disturbed ({taken}): again")
            else:
                say(
                    f"{name} still disturbed after {attempt} tries ({taken}): kept; its rows record it "
                    "(inputs_disturbed)" + ("" if self.inputs else " and count")
                )
        return value, {"name": name, "tries": attempt, "load": load, "disturbed": busy}

    @staticmethod
    def still_disturbed(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """What a row records of its inputs (:meth:`measure`'s records) that were disturbed at the last try.

        Examples
        --------
        >>> quiet = {"name": "a.json", "tries": 1, "load": {"foreign_share": 0.0}, "disturbed": False}
        >>> busy = {"name": "b.json", "tries": 3, "load": {"foreign_share": 0.45, "steal": 0.01},
        ...         "disturbed": True}
        >>> DiscardRule.still_disturbed([quiet, busy])
        [{'name': 'b.json', 'foreign_share': 0.45, 'steal': 0.01, 'tries': 3}]
        """
        return [
            {
                "name": r["name"],
                "foreign_share": float((r["load"] or {}).get("foreign_share", 0.0)),
                "steal": float((r["load"] or {}).get("steal", 0.0)),
                "tries": r["tries"],
            }
            for r in records
            if r["disturbed"]
        ]


def _taken(load: Mapping[str, Any] | None) -> float:
    return float((load or {}).get("foreign_share", 0.0)) + float((load or {}).get("steal", 0.0))
