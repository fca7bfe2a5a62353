"""The keys of a campaign spec that only its FSDP and pipeline lines read, checked.

They choose, per campaign, among inputs each diagnosed on rows already run and
then proven on held-out ones; their defaults keep what the earlier specs ran,
so that an old spec hashes and runs the same (:mod:`queuesgd.harness.apriori.spec`).

Keys::

    sharded_calibration   FSDP lines: "idle-median" (default) or "busy-mean" (per model, each collective
                          after the model's compute between two; apriori_parallel.SHARDED_MODES)
    fsdp_profile          FSDP lines: "solo" (default: FSDP's own step in k single-rank copies) or "group"
                          (in one group of k ranks on loopback, the collectives taken out; profile_fsdp)
    link_bucket           pipeline lines: true to model the emulated links' token bucket (netns.tbf_burst
                          of the rate, Pipeline(link_bucket=), the p2p link fitted as a hinge); default false
    pipeline_profile      pipeline lines: "probe" (default: unit profile + the tiny model's runtime probe),
                          "runtime" (the stages profiled inside torch's runtime on loopback; runtime_profile)
                          or "runtime-paired" (the same, per row, right before its run; campaign_pass)

The pipeline probes' own settings (``probes``) are
:func:`~queuesgd.harness.apriori_parallel.probes.probe_settings`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuesgd import _checks, units
from queuesgd.errors import InvalidParameterError

__all__ = ["DEFAULTS", "PIPELINE_PROFILES", "check_profile_link", "parallel_settings"]

#: Each key and its default (what a spec that does not name it gets).
DEFAULTS: Mapping[str, Any] = {
    "sharded_calibration": "idle-median",
    "fsdp_profile": "solo",
    "link_bucket": False,
    "pipeline_profile": "probe",
}

#: How a pipeline line's stages are profiled (``pipeline_profile``).
PIPELINE_PROFILES = ("probe", "runtime", "runtime-paired")


def parallel_settings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The parallel lines' keys of a spec document, checked, the defaults filled in.

    Examples
    --------
    >>> parallel_settings({"pipeline_profile": "runtime-paired"})["pipeline_profile"]
    'runtime-paired'
    >>> parallel_settings({})["sharded_calibration"], parallel_settings({})["link_bucket"]
    ('idle-median', False)
    >>> parallel_settings({"fsdp_profile": "both"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: spec.fsdp_profile: got 'both'; accepted: one of 'solo', 'group'
    """
    from queuesgd.harness.apriori_parallel.calibration import SHARDED_MODES

    get = {key: doc.get(key, default) for key, default in DEFAULTS.items()}
    return {
        "sharded_calibration": _checks.choice(
            "spec.sharded_calibration", get["sharded_calibration"], SHARDED_MODES
        ),
        "fsdp_profile": _checks.choice("spec.fsdp_profile", get["fsdp_profile"], ("solo", "group")),
        "link_bucket": _checks.boolean("spec.link_bucket", get["link_bucket"]),
        "pipeline_profile": _checks.choice(
            "spec.pipeline_profile", get["pipeline_profile"], PIPELINE_PROFILES
        ),
    }


def check_profile_link(spec: Any) -> None:
    """Refuse a spec whose paired pipeline profiles would run on a pipeline row's own link.

    With ``"pipeline_profile": "runtime-paired"`` and ``probes.runtime.link`` a rate, every pipeline row is
    profiled on an emulated link of that rate before its run: a profile must never read its row's own
    configuration, so the rate must differ from every pipeline row's. ``spec`` is a parsed
    :class:`~queuesgd.harness.apriori.CampaignSpec`.

    Examples
    --------
    >>> from queuesgd.harness.apriori import parse_spec
    >>> doc = {"name": "x", "models": {"mlp": {"batch_size": 16}}, "rates": ["1Gbit/s"], "steps": 30,
    ...        "warmup": 5, "passes": 1, "discard": {"rule": "none"}, "pipeline_profile": "runtime-paired",
    ...        "probes": {"runtime": {"link": "1Gbit/s"}},
    ...        "lines": [{"scheme": "pipeline", "models": ["mlp"], "workers": [2],
    ...                   "params": {"stages": 2, "microbatches": 2}}]}
    >>> parse_spec(doc)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: spec.probes.runtime.link: got '1Gbit/s'; accepted: a link other ...
    """
    from queuesgd.schemes import Pipeline

    link = spec.probes["runtime"]["link"]
    if spec.pipeline_profile != "runtime-paired" or link == "loopback":
        return
    rate = units.parse_bandwidth(link, "spec.probes.runtime.link")
    if rate in {c.rate for c in spec.configurations() if c.scheme == Pipeline.key}:
        raise InvalidParameterError(
            "spec.probes.runtime.link", link, "a link other than every pipeline row's (its runs' own)"
        )
