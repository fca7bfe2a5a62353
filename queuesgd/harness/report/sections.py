"""The report's sections: which rows go where (by where their inputs came from), targets, campaign runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


# ------------------------------------------------------------------------------------ sections
@dataclass(frozen=True)
class Section:
    """One section of the report: which rows, what their predictions were made from, and the target.

    Attributes
    ----------
    key : str
        What :func:`section_of` returns for its rows.
    title : str
        The section's heading.
    target : (float, float) or None
        Per scheme, the largest median and largest max absolute relative
        error that meet the target; None: the rows are not evidence of
        accuracy and get no accuracy figure.
    campaign : str
        The command that produces its rows.
    inputs : str
        What the predictions of its rows were made from (Markdown).
    """

    key: str
    title: str
    target: tuple[float, float] | None
    campaign: str
    inputs: str


#: The report's sections, in order. Only the first three are counted in accuracy figures.
SECTIONS: tuple[Section, ...] = (
    Section(
        "real-apriori",
        "Real training, a-priori inputs",
        (0.10, 0.20),
        "python validation/run_apriori.py",
        "Real models trained live (the `workload` column), each predicted *before* it ran from inputs "
        "measured elsewhere: a profile from a separate single-worker profiling run (with concurrent copies "
        "for the core sharing of k workers on this machine), a network calibration from a separate run "
        "made beforehand, and the cluster description (workers, cores). Every row records "
        "`inputs: a-priori`, when its profile and calibration were measured and when the prediction was "
        "made (`predicted_at`).",
    ),
    Section(
        "real-gpu",
        "Real training on one GPU, a-priori inputs",
        (0.10, 0.20),
        "python validation/run_gpu.py",
        "Run on a machine with a CUDA device. DDP on one CUDA device shared by n worker processes (gloo "
        "all-reduces the CUDA buckets through host memory over loopback; NCCL refuses two ranks on one "
        "device), each run predicted *before* it ran from a profile measured on the same device in "
        "separate runs (one worker layer by layer, and k copies in lock step for the sharing of the GPU "
        "by k workers) and an all-reduce calibration of CUDA tensors among n ranks made beforehand at the"
        " sizes of DDP's buckets. Rows record `inputs: a-priori`, `device` and the device's name (the "
        "`cores` column). Not preregistered: its five passes ran before a campaign spec was written "
        "(`specs/gpu.json` came later and has not run), and the model changed between passes (the notes); "
        "the headline pools every pass.",
    ),
    Section(
        "emulated-network",
        "Emulated compute on a real network (a diagnosis: compute from the same run)",
        (0.05, 0.15),
        "python validation/run_campaign.py",
        "Compute is a timed wait drawn from the configured law (`compute law` column), replayed on a real "
        "network: network namespaces joined by a bridge with `tc tbf` (`netns-tbf`), or loopback (`none`). "
        "The prediction's inputs come from the same configuration: the compute law is the empirical law of "
        "the compute times measured in the run (the configured law's draws, injected delays subtracted), "
        "the parameter server's update time is measured in the run, and the network is an alpha-beta fit "
        "of timed operations on the same links just before the run. So this section tests the coordination "
        "and network models against a real network, not an a-priori estimate of compute: a diagnosis of "
        "those models (its inputs come from the run), judged on its own target. Rows written "
        "before rows carried an `inputs` field have none; they were made this way "
        "(`queuesgd.harness.campaign.compare_records`).",
    ),
    Section(
        "replay",
        "Model replay (application shaper): the model compared with itself",
        None,
        "python validation/run_campaign.py",
        "The campaign's lines with `network: app` (and every line where the harness cannot make network "
        "namespaces). With the application-level shaper (`app-shaper`) the harness does the real operation "
        "and then "
        "sleeps until the alpha-beta model's time for it (for the PS schemes, the phase model's round); "
        "the compute times and the update time are measured in the same run. The prediction therefore "
        "restates what the harness was told to wait: agreement checks the harness and the solvers' "
        "bookkeeping, not the model's accuracy. These rows get no accuracy figure and are counted in none.",
    ),
    Section(
        "diagnosis",
        "Diagnosis and discarded runs",
        None,
        "queuesgd validate --workload mlp|cnn, or python -m queuesgd.harness.torchrun --compare",
        "Rows no accuracy figure counts: real models whose compute law and update time were measured in "
        "the run itself (`inputs: same-run`, or no `inputs` field), a diagnosis of where a model misses; "
        "and runs a campaign set aside by its discard rule (`counted: false`, the reason in `discarded`, "
        "e.g. `disturbed`: other processes took more than a tenth of the machine), whatever their inputs. "
        "Listed, never counted.",
    ),
)


_SECTION_BY_KEY = {s.key: s for s in SECTIONS}


def section_of(row: Mapping[str, Any]) -> str:
    """The report section of a validation row: ``"real-apriori"``, ``"emulated-network"``, ``"replay"``
    or ``"diagnosis"``.

    - ``emulation == "app-shaper"`` (any workload): ``"replay"``, the network
      time was slept out from the model's own formula;
    - the emulated workload (``workload == "emulated"``, the default when the
      field is missing) on a real network (``emulation`` ``"netns-tbf"`` or
      ``"none"``, or missing on a failed run): ``"emulated-network"``;
    - real training (any other ``workload``) with ``inputs == "a-priori"``:
      ``"real-gpu"`` when it ran on a CUDA ``device``, else ``"real-apriori"``;
    - anything else (real training with ``inputs`` ``"same-run"`` or missing,
      or an emulation this report does not know): ``"diagnosis"``, never counted;
    - a row of a spec's campaign (it records ``spec_hash``) that its campaign
      did not count (``counted`` false: failed, disturbed, or predicted from
      inputs that stayed disturbed, by the discard rule the spec registered
      before it ran): ``"diagnosis"``. Its ``counted`` is the whole decision:
      a row the spec's rule kept (``"rule": "none"``, or a ``limit`` other
      than a tenth) is not set aside afterwards by another rule;
    - any other row that is disturbed (marked ``disturbed``, or whose recorded
      ``load`` shows that other processes and other guests of the host took
      more than a tenth of the machine during it,
      :func:`queuesgd.harness.load.disturbed` with its default limit), or
      marked ``counted`` false: ``"diagnosis"``.

    Examples
    --------
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "netns-tbf"})
    'real-apriori'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "none", "device": "cuda"})
    'real-gpu'
    >>> section_of({"workload": "emulated", "emulation": "netns-tbf"})
    'emulated-network'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "app-shaper"})
    'replay'
    >>> section_of({"workload": "mlp", "inputs": "same-run", "emulation": "none"})
    'diagnosis'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "none", "disturbed": True})
    'diagnosis'
    >>> section_of({"workload": "mlp", "inputs": "a-priori", "emulation": "netns-tbf",
    ...             "load": {"foreign_share": 0.0, "steal": 0.39}})   # the host gave the CPUs away
    'diagnosis'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "netns-tbf", "counted": False,
    ...             "discarded": "inputs disturbed"})
    'diagnosis'
    >>> section_of({"workload": "cnn", "inputs": "a-priori", "emulation": "none", "device": "cuda",
    ...             "spec_hash": "35902758", "counted": True, "disturbed": True,
    ...             "load": {"foreign_share": 0.3}})   # its spec's rule is "none": counted, as registered
    'real-gpu'
    """
    from queuesgd.harness.load import disturbed

    if row.get("spec_hash") is not None:  # a spec's campaign decided, by the rule it registered
        if row.get("counted") is False:
            return "diagnosis"
    elif row.get("disturbed") or disturbed(row.get("load")) or row.get("counted") is False:
        return "diagnosis"
    emulation = row.get("emulation")
    if emulation == "app-shaper":
        return "replay"
    if (row.get("workload") or "emulated") == "emulated":
        return "emulated-network" if emulation in (None, "netns-tbf", "none") else "diagnosis"
    if row.get("inputs") == "a-priori" and emulation in (None, "netns-tbf", "none"):
        return "real-gpu" if str(row.get("device") or "cpu").startswith("cuda") else "real-apriori"
    return "diagnosis"


def by_section(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The rows grouped by :func:`section_of`, every section present, in the order of :data:`SECTIONS`.

    Examples
    --------
    >>> groups = by_section([{"workload": "emulated", "emulation": "app-shaper"}])
    >>> {k: len(v) for k, v in groups.items()}
    {'real-apriori': 0, 'real-gpu': 0, 'emulated-network': 0, 'replay': 1, 'diagnosis': 0}
    """
    out: dict[str, list[Mapping[str, Any]]] = {s.key: [] for s in SECTIONS}
    for r in rows:
        out[section_of(r)].append(r)
    return out


def target_met(stats: Mapping[str, Any], target: tuple[float, float]) -> bool:
    """Whether one scheme's :func:`summary` entry meets ``(median, max)``: both errors known and within.

    Examples
    --------
    >>> target_met({"median_abs_error": 0.08, "max_abs_error": 0.2}, (0.10, 0.20))
    True
    >>> target_met({"median_abs_error": 0.08, "max_abs_error": 0.21}, (0.10, 0.20))
    False
    """
    med, mx = stats.get("median_abs_error"), stats.get("max_abs_error")
    return med is not None and mx is not None and med <= target[0] and mx <= target[1]


#: Rows further apart than this (or made by other code) belong to different campaign runs.
RUN_GAP_MINUTES = 30.0


def campaign_runs(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The campaign runs a set of rows mixes: one entry per run, its time span and its code version.

    Rows sorted by ``started`` form one run while each starts within
    :data:`RUN_GAP_MINUTES` of the previous one and was made by the same
    code (``commit``; older rows record none) or, for rows of a spec's
    campaign, belongs to the same campaign (``campaign``): a campaign is one
    run even where the checkout's commit moved while it ran, and it lists
    every commit its rows record.

    Examples
    --------
    >>> rows = [{"started": "2026-11-25T13:20:00+0000"}, {"started": "2026-11-25T13:49:00+0000"},
    ...         {"started": "2026-11-26T15:55:00+0000", "commit": "1f387f7aa"},
    ...         {"started": "2026-11-26T15:59:00+0000", "commit": "2e0000000"}]
    >>> campaign_runs(rows)  # doctest: +NORMALIZE_WHITESPACE
    ['2026-11-25 13:20-13:49 (code not recorded)', '2026-11-26 15:55 (commit 1f387f7)',
     '2026-11-26 15:59 (commit 2e00000)']
    >>> two = [{"started": "2026-11-26T20:36:00+0000", "commit": "aaaaaaa", "campaign": "parallel"},
    ...        {"started": "2026-11-26T20:40:00+0000", "commit": "bbbbbbb+dirty", "campaign": "parallel"}]
    >>> campaign_runs(two)
    ['2026-11-26 20:36-20:40 (campaign parallel; commits aaaaaaa, bbbbbbb+dirty)']
    """
    import datetime as dt

    dated = []
    for r in rows:
        try:
            when = dt.datetime.strptime(str(r.get("started")), "%Y-%m-%dT%H:%M:%S%z")
        except ValueError:
            continue
        key = ("campaign", r["campaign"]) if r.get("campaign") else ("commit", r.get("commit"))
        dated.append((when, key, r.get("commit")))
    dated.sort(key=lambda x: x[0])
    runs: list[list[tuple[Any, Any, Any]]] = []
    for when, key, commit in dated:
        last = runs[-1][-1] if runs else None
        if last and key == last[1] and (when - last[0]).total_seconds() <= 60 * RUN_GAP_MINUTES:
            runs[-1].append((when, key, commit))
        else:
            runs.append([(when, key, commit)])
    out = []
    for run in runs:
        first, end = run[0][0], run[-1][0]
        span = first.strftime("%Y-%m-%d %H:%M")
        if end.strftime("%H:%M") != first.strftime("%H:%M"):
            span += "-" + end.strftime("%H:%M" if end.date() == first.date() else "%Y-%m-%d %H:%M")
        kind, name = run[0][1]
        if kind == "campaign":
            commits = list(dict.fromkeys(short_commit(c) for _, _, c in run if c))
            said = {0: "code not recorded", 1: f"commit {commits[0]}" if commits else ""}
            code = f"campaign {name}; " + said.get(len(commits), f"commits {', '.join(commits)}")
        else:
            code = f"commit {short_commit(name)}" if name else "code not recorded"
        out.append(f"{span} ({code})")
    return out


def short_commit(commit: Any) -> str:
    """A commit as its first 7 hex digits, what follows the hash kept (``+dirty``: code not as committed).

    Examples
    --------
    >>> short_commit("0123456789abcdef+dirty"), short_commit(None)
    ('0123456+dirty', '')
    """
    head, plus, rest = str(commit or "").partition("+")
    return head[:7] + plus + rest


def last_run(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """The latest ``started`` of the rows (ISO strings of one format compare as times), or None."""
    times = [str(r["started"]) for r in rows if r.get("started")]
    return max(times) if times else None
