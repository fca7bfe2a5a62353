"""The parallel lines' spec keys (``apriori.spec_parallel``): every registered campaign parses the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori import parse_spec
from queuesgd.harness.apriori.spec_parallel import DEFAULTS, parallel_settings

VALIDATION = Path(__file__).resolve().parents[2] / "validation"
REGISTERED = sorted(VALIDATION.glob("campaigns/*/spec.json"))


@pytest.mark.parametrize("path", REGISTERED, ids=lambda p: p.parent.name)
def test_every_registered_campaign_parses_to_the_hash_it_recorded(path):
    """The spec each campaign registered before it ran (its ``spec.json``: the document and the sha256 then
    computed) is accepted by today's code with the same hash, its parallel keys as written or defaulted,
    and the spec file of the same name under ``validation/specs/`` (where there is one) is that document."""
    record = json.loads(path.read_text())
    spec = parse_spec(record["spec"])
    assert spec.hash == record["hash"]
    for key, default in DEFAULTS.items():
        assert getattr(spec, key) == record["spec"].get(key, default)
    source = VALIDATION / "specs" / f"{record['spec']['name']}.json"
    if source.exists():
        assert parse_spec(json.loads(source.read_text())).hash == record["hash"]


def test_the_parallel_keys_refuse_what_they_do_not_know_naming_the_field():
    assert parallel_settings({"link_bucket": "on"})["link_bucket"] is True
    for key, bad in (("sharded_calibration", "busy"), ("pipeline_profile", "paired"), ("link_bucket", 2)):
        with pytest.raises(InvalidParameterError, match=f"spec.{key}"):
            parallel_settings({key: bad})


def test_a_paired_profile_link_is_refused_where_it_is_a_pipeline_rows_own():
    """``probes.runtime.link`` at a rate of the spec's pipeline rows is refused when the spec is read (the
    profile would read its row's own configuration); at another rate, or unpaired, it is accepted."""
    record = json.loads((VALIDATION / "campaigns" / "pipeline-link-heldout" / "spec.json").read_text())
    doc = record["spec"]
    assert parse_spec(doc).probes["runtime"]["link"] == "10Gbit/s"
    own = {**doc, "probes": {**doc["probes"], "runtime": {**doc["probes"]["runtime"], "link": "100Mbit/s"}}}
    with pytest.raises(InvalidParameterError, match="spec.probes.runtime.link"):
        parse_spec(own)
    assert parse_spec({**own, "pipeline_profile": "runtime"}).pipeline_profile == "runtime"
