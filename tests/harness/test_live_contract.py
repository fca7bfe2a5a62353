"""The live-scheme contract, checked over every row of the harness's table.

For each :class:`~queuesgd.harness.live_schemes.LiveScheme` in
:data:`~queuesgd.harness.live_schemes.LIVE` (as ``tests/schemes/test_contract.py``
does over the registry):

- its model class is registered, and its key is the class's key or a name
  of its own that no registered scheme takes;
- the layout agrees with ``world_size`` and ``workers``;
- the parameters round-trip: the defaults are the model class's own, a
  checked set checks to itself, an unknown parameter is refused;
- ``model()`` returns an instance of the row's class, with a method the
  class has, that :func:`queuesgd.predict` solves for a small workload and
  cluster, on both kinds of network;
- the update role is one the loops emit, the calibration follows it (or is
  the row's own: FSDP's collectives, a pipeline's link), the gradients per PS
  update are between 1 and ``n``, the profile is one the a-priori protocol
  (or the parallel one) has;
- run live for a few steps (two workers, emulated compute; DDP, FSDP and a
  two-stage pipeline on a tiny real model, each bounded by a wall-clock
  limit), every record carries the row's key and the update role's records
  give a measured throughput;
- no module of the harness outside the table writes a live scheme's key.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import pytest

import queuesgd as q
from queuesgd import registry
from queuesgd.errors import InvalidParameterError
from queuesgd.harness.apriori.profile import STEPS
from queuesgd.harness.apriori_parallel import KINDS, PROFILES
from queuesgd.harness.live_schemes import (
    CALIBRATIONS,
    LAYOUTS,
    LIVE,
    ROLES,
    LiveScheme,
    ModelInputs,
    live_scheme,
)

#: Parameters for rows whose model has required ones, or whose defaults a 3-worker run does not show.
PARAMS: dict[str, dict] = {
    "static-cutoff": {"cutoff": "40ms"},
    "backup-workers": {"backups": 1},
    "local-sgd": {"period": 2},
    "pipeline": {"stages": 2, "microbatches": 2},
}
#: Variants that take another branch of the row (loop or model).
VARIANTS: list[tuple[str, dict]] = [
    ("eager-sgd", {"collective": "ring"}),
    ("backup-workers", {"backups": 1, "stragglers": "cancel"}),
    ("pipeline", {"stages": 1, "microbatches": 2, "schedule": "gpipe"}),
]
CASES = [(key, PARAMS.get(key, {})) for key in LIVE] + VARIANTS
IDS = [f"{k}{'-' + '-'.join(f'{a}{b}' for a, b in p.items()) if p else ''}" for k, p in CASES]

W = q.Workload(q.distributions.Exponential(mean=0.02), "1MB", batch_size=16, update_time="1ms")
#: The same with one tensor, for the fine roads (the harness sends the gradient as one message).
W_ONE = dataclasses.replace(W, layers=[q.Layer("gradient", "1MB", 0.02)])
#: Four layers, for the parallel rows' fine roads (a pipeline's stages and FSDP's units are layers).
W_UNITS = dataclasses.replace(W, layers=[q.Layer(f"{i}.weight", "250KB", 0.005) for i in range(4)])
N = 3


def _n(params: dict) -> int:
    """The workers of a case: :data:`N`, or the multiple of a pipeline's stages below it."""
    stages = params.get("stages", 1)
    return stages * (N // stages)


def _cluster(n: int) -> q.Cluster:
    return q.Cluster(n, "1Gbit/s", latency="50us")


@pytest.mark.parametrize("key", list(LIVE))
def test_row_is_registered_and_named(key):
    row = LIVE[key]
    assert isinstance(row, LiveScheme) and row.key == key
    assert registry.resolve(row.scheme.key) is row.scheme
    names = {*registry.SCHEMES, *registry.ALIASES}
    assert row.key == row.scheme.key or row.key not in names
    assert live_scheme(key) is row


@pytest.mark.parametrize("key", list(LIVE))
def test_layout_agrees_with_world_size(key):
    row = LIVE[key]
    assert row.layout in LAYOUTS
    for n in (1, 2, 5):
        assert row.world_size(n) == n + (row.layout == "ps")
        assert row.workers(row.world_size(n)) == n
    if row.layout == "ps":
        with pytest.raises(InvalidParameterError, match="world_size"):
            row.workers(1)


@pytest.mark.parametrize(("key", "params"), CASES, ids=IDS)
def test_params_round_trip_with_the_model_class_defaults(key, params):
    row = LIVE[key]
    n = _n(params)
    checked = row.check_params(params, n)
    assert row.check_params(checked, n) == checked
    fields = {f.name: f for f in dataclasses.fields(row.scheme)}
    for p in row.params:
        f = fields[row.renamed.get(p, p)]
        if p not in params and f.default is not dataclasses.MISSING:
            assert checked[p] == f.default  # the model class's own default, not a retyped one
    assert set(checked) == {*row.params, *(h.name for h in row.harness)}
    with pytest.raises(InvalidParameterError, match="params"):
        row.check_params({**params, "no_such_parameter": 1}, n)


@pytest.mark.parametrize(("key", "params"), CASES, ids=IDS)
@pytest.mark.parametrize("emulation", ["none", "app-shaper"])
def test_model_is_the_row_class_and_predicts(key, params, emulation):
    row = LIVE[key]
    n = _n(params)
    checked = row.check_params(params, n)
    scheme, method = row.model(checked, ModelInputs(emulation=emulation, send_buffer=1000.0))
    assert type(scheme) is row.scheme
    assert method == "auto" or method in scheme.methods
    w = W if method != "fine" else W_UNITS if row.profile in PROFILES else W_ONE
    iterations = 2000 if method == "simulate" else None
    pred = q.predict(scheme, w, _cluster(n), method, rng=0, iterations=iterations)
    assert math.isfinite(pred.throughput) and pred.throughput > 0


def test_model_reads_the_measured_inputs():
    # The rows that say they read a measurement give it to the model; the others' models do not change.
    for row in LIVE.values():
        params = PARAMS.get(row.key, {})
        checked = row.check_params(params, _n(params))
        base = row.model(checked, ModelInputs())[0]
        held = row.model(checked, ModelInputs(send_buffer=1000.0, duplex=0.5))[0]
        assert (base != held) == (row.shared_link or row.duplex), row.key


@pytest.mark.parametrize(("key", "params"), CASES, ids=IDS)
def test_update_role_calibration_profile(key, params):
    row = LIVE[key]
    n = _n(params)
    checked = row.check_params(params, n)
    role = row.update_role(checked)
    assert role in ROLES
    by_role = "p2p" if role == "ps" else "allreduce"
    assert row.calibration(checked) == (row.calibrates or by_role) and row.calibrates != by_role
    if row.layout == "allreduce":
        assert role == "worker"
    assert 1 <= row.gradients_per_update(checked, n) <= n
    assert row.profile in (None, "eager", *STEPS, *PROFILES)
    assert not row.lock_step or (row.layout == "ps" and row.profile in STEPS)
    if row.profile in PROFILES:
        # The parallel protocol runs it (apriori_parallel), with a calibration calibrate_parallel makes.
        assert row.apriori is None and not row.same_run and row.calibration(checked) in KINDS
    assert row.calibration(checked) in CALIBRATIONS
    if row.apriori is not None:
        needed = row.check_params({**params, **row.apriori}, n)
        assert all(needed[k] == v for k, v in row.apriori.items())


def test_the_roles_are_the_loops():
    # Every role the rows name is written by a loop (a record's role), and the loops write no other
    # update role.
    harness = Path(q.__file__).parent / "harness"
    written = set()
    for path in harness.glob("*loops.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "base_record":
                written.add(node.args[1].value)
    assert set(ROLES) <= written
    assert {LIVE[k].update_role(p) for k, p in CASES} == set(ROLES)


#: String constants equal to a live key outside the table, each with why it is not a scheme key.
NOT_SCHEME_KEYS: set[tuple[str, str]] = {
    ("ddp.py", "ddp"),  # run_ddp's records' scheme; harness.ddp sits below the table
    ("apriori/profile.py", "ddp"),  # a profile's step name (DDP's step measured alone)
    ("apriori/predict.py", "ddp"),  # the same step name, read by predict_ddp
}


def _constants(tree: ast.AST) -> set[str]:
    """String constants of a module, docstrings left out."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }


def test_no_scheme_key_outside_the_table():
    harness = Path(q.__file__).parent / "harness"
    keys = set(LIVE) | {alias for alias, key in registry.ALIASES.items() if key in LIVE}
    found = set()
    for path in sorted(harness.rglob("*.py")):
        rel = path.relative_to(harness).as_posix()
        if rel.startswith("live_schemes/"):
            continue
        for value in _constants(ast.parse(path.read_text())) & keys:
            found.add((rel, value))
    assert found == NOT_SCHEME_KEYS


# ---- live: a few steps of every row ---------------------------------------------------------------


@pytest.mark.parametrize(("key", "params"), CASES, ids=IDS)
def test_live_records_carry_the_row(key, params):
    pytest.importorskip("torch")
    from queuesgd.harness import runners
    from queuesgd.harness.live import EmulatedCompute, RealModel
    from queuesgd.harness.run_records import measured_throughput

    row = LIVE[key]
    if row.same_run:
        live = EmulatedCompute("2ms", "4KB", batch_size=4)
    else:
        live = RealModel("mlp", batch_size=4, hidden=8, inputs=16, classes=4)
    steps = 14
    recs = runners.run(key, live, 2, steps, params=params, warmup=2, timeout=120)
    assert {r["scheme"] for r in recs if r.get("role") in ROLES} == {row.key}
    checked = row.check_params(params, 2)
    out = measured_throughput(recs, row.update_role(checked), live.batch_size)
    assert out["measured"] > 0 and out["updates"] >= 10
