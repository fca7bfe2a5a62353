"""Every constructor field of every registered scheme refuses bad input at the edge (issue 23).

Each field is fed a battery of bad values -- NaN and infinities, booleans as numbers, ``2.7`` where
an integer is meant, strings and bytes as sequences, absurd magnitudes (``10**30``, ``1e30``,
``10**400``), objects of the wrong type -- and must raise an :class:`InvalidParameterError` whose
``field`` names it: not another exception type, not a silent accept. The table of field kinds
covers every parameter of every registered scheme, so a new field must be classified here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from queuesgd import registry
from queuesgd._checks import MAX_COUNT
from queuesgd.errors import InvalidParameterError, short_repr
from queuesgd.units import MAX_BYTES, MAX_SECONDS

#: Required arguments, and what a field needs to be read at all (a policy that reads it).
REQUIRED = {"StaticCutoff": {"timeout": 0.1}, "Pipeline": {"stages": 2, "microbatches": 4}}
CONTEXT = {
    ("CompressedAllReduce", "rank"): {"compressor": "powersgd"},
    ("Pipeline", "link_bucket"): {"p2p": "rendezvous"},
    ("HybridParallel", "tp_overlap"): {"shape": "2:64:4:32:100", "tensor": 2, "sequence_parallel": True},
    **{
        (cls.__name__, f): {"fusion": "ddp"}
        for cls in registry.SCHEMES.values()
        for f in ("bucket_cap", "first_bucket")
    },
}

COUNTS = {
    "period",
    "max_stale",
    "staleness",
    "window",
    "samples",
    "rank",
    "per_node",
    "backups",
    "stages",
    "microbatches",
    "units",
    "stage",
    "tensor",
    "pipeline",
    "data",
    "virtual_stages",
    "zero",
    "layers",
    "context",
    "experts",
    "expert_parallel",
    "top_k",
    "stage_layers",
}
SIZES = {
    "fusion_bytes",
    "bucket_cap",
    "first_bucket",
    "send_buffer",
    "activation_bytes",
    "stash_bytes",
    "hidden_bytes",
    "link_bucket",
}
DURATIONS = {
    "fusion_time",
    "timeout",
    "intra_latency",
    "activation",
    "compress_time",
    "decompress_time",
    "action_overhead",
}
FLAGS = {"overlap", "prefetch", "sequence_parallel", "tp_overlap", "zero_overlap"}  # tp_overlap: or "all"
FRACTIONS = {"density", "overlap_efficiency", "duplex"}
NAMES = {
    "service",
    "stragglers",
    "link",
    "by",
    "mode",
    "fusion",
    "compressor",
    "schedule",
    "data_parallel",
    "p2p",
    "partition",
    "predictor",
    "recompute",
    "shape",
    "compute_model",
}
OPTIMIZERS = {"optimizer"}  # a name, or bytes of state per byte of parameters (3 and 2.7 are meant)
RATES = {"intra_bandwidth"}
FACTORS = {"capacity_factor"}  # a positive number, above 1 on purpose (GShard's 2.0)
KINDS = COUNTS | SIZES | DURATIONS | FLAGS | FRACTIONS | NAMES | OPTIMIZERS | RATES | FACTORS


class Opaque:
    """An object of no accepted type (no ``sample`` method, not a number, not a name)."""


#: Refused by every field whatever its kind.
EVERYWHERE = [
    float("nan"),
    np.float64("nan"),
    -float("inf"),
    -1,
    -0.5,
    10**400,
    -(10**400),
    1 + 2j,
    Opaque(),
    b"1",
    bytearray(b"12"),
    {},
    {"a": 1},
    "nan",
    "1e400",
    "",
    "  ",
]
BAD = {
    "count": [2.7, True, False, 10**30, 1e30, 10**10, float("inf"), "2.7", "abc", 10**5000],
    "size": [True, 1e30, 10**30, MAX_BYTES * 2, "1e30", "2048PiB", "abc", "inf", [1], (1, 2, 3)],
    "duration": [True, 1e30, 10**30, MAX_SECONDS * 2, "1e30", "1e30s", "abc", "inf", [1]],
    "flag": [2, 0.5, 1.0, "maybe", None, [True], "784"],
    "fraction": [1.5, 2, True, "abc", None, [0.5], float("inf")],
    "name": [3, True, "nope", [1], 2.7],
    "optimizer": [True, "nope", "AdamW", 1e30, 1001, [2], None],
    "rate": [True, 1e-300, "abc", None, [1]],
    "factor": [True, 0, 0.0, "1.5", "abc", None, [1.25], float("inf"), 1e30, 10**30],
}
#: Values a field of that kind takes on purpose, though they look odd (checked to be accepted and kept).
ACCEPTED = {
    ("ShardedDataParallel", "units"): [("2:3", (2, 3)), ([1, 2], (1, 2)), (4.0, 4)],
    ("StaleSynchronous", "staleness"): [(math.inf, math.inf), (0, 0)],
    ("LocalSGD", "period"): [(4.0, 4), (MAX_COUNT, MAX_COUNT), (np.int64(3), 3)],
    ("ShardedDataParallel", "prefetch"): [(0, False), (np.True_, True), ("off", False)],
    ("CompressedAllReduce", "compress_time"): [("1ns", 1e-9), (MAX_SECONDS, MAX_SECONDS)],
    ("ShardedDataParallel", "activation_bytes"): [("1MB", 1e6), (MAX_BYTES, MAX_BYTES), (2.5, 2.5)],
    ("ShardedDataParallel", "optimizer"): [(6, 6), ("sgd", "sgd"), (" Adam ", "adam")],  # any case
    ("HybridParallel", "tp_overlap"): [
        (0, False),
        ("off", False),
        (np.False_, False),
        ("backward", True),  # a synonym of True
        ("ALL", "all"),  # Transformer Engine's overlap of every TP collective (needs sequence_parallel)
    ],
    ("Pipeline", "optimizer"): [(" Momentum", "momentum"), (1.5, 1.5)],
    ("HybridParallel", "optimizer"): [("ADAM", "adam")],
    ("HybridParallel", "zero_overlap"): [(0, False), ("off", False), (np.False_, False)],
}


def kind(field: str) -> str:
    table = {
        "count": COUNTS,
        "size": SIZES,
        "duration": DURATIONS,
        "flag": FLAGS,
        "fraction": FRACTIONS,
        "name": NAMES,
        "optimizer": OPTIMIZERS,
        "rate": RATES,
        "factor": FACTORS,
    }
    for name, members in table.items():
        if field in members:
            return name
    raise AssertionError(f"field {field!r} is not classified in tests/test_scheme_fields.py")


def cases() -> list[tuple[str, str, object]]:
    out = []
    for entry in registry.entries():
        cls = entry.cls
        if not cls.__module__.startswith("queuesgd."):
            continue  # a user scheme registered by another test
        for field in cls.parameters():
            bad = [*EVERYWHERE, *BAD[kind(field)]]
            if (cls.__name__, field) == ("StaleSynchronous", "staleness"):
                bad.remove(float("inf"))  # math.inf is asynchronous SGD
            if (cls.__name__, field) == ("Pipeline", "activation_bytes"):
                bad.remove([1])  # one value per stage boundary (S - 1 = 1)
            if field == "predictor":
                bad.remove("nan")
                bad += ["nan"]  # a string has no sample()
            out += [(cls.__name__, field, value) for value in bad]
    return out


def build(cls_name: str, field: str, value: object) -> object:
    cls = registry.SCHEMES[next(k for k, c in registry.SCHEMES.items() if c.__name__ == cls_name)]
    kwargs = {**REQUIRED.get(cls_name, {}), **CONTEXT.get((cls_name, field), {}), field: value}
    return cls(**kwargs)


def test_every_field_of_every_registered_scheme_is_classified():
    fields = {(e.cls.__name__, f) for e in registry.entries() for f in e.cls.parameters()}
    assert len(fields) > 60  # 15 schemes
    assert {f for _, f in fields} <= KINDS


@pytest.mark.parametrize(("cls_name", "field", "value"), cases(), ids=lambda v: short_repr(v)[:30])
def test_bad_value_is_refused_naming_the_field(cls_name, field, value):
    with pytest.raises(InvalidParameterError) as info:
        build(cls_name, field, value)
    assert field in info.value.field, str(info.value)
    assert cls_name in info.value.field or field in str(info.value)
    assert len(str(info.value)) < 1000  # a 5000-digit integer is not printed whole


@pytest.mark.parametrize(("cls_name", "field"), sorted(ACCEPTED))
def test_odd_but_meant_values_are_accepted_and_kept(cls_name, field):
    for value, kept in ACCEPTED[(cls_name, field)]:
        assert getattr(build(cls_name, field, value), field) == kept


def test_stage_zero_is_plain_ddp_on_purpose_and_other_stages_are_refused():
    # Stage 0 is documented as DDP for comparison (its memory is P + G + O, unsharded).
    assert build("ShardedDataParallel", "stage", 0).stage == 0
    for bad in (4, -1, 2.5, True, "3", None, float("nan")):
        with pytest.raises(InvalidParameterError, match=r"ShardedDataParallel\.stage"):
            build("ShardedDataParallel", "stage", bad)


def test_huge_local_sgd_period_is_refused_not_turned_into_the_no_communication_limit():
    # 10**30 local steps used to predict n m / t exactly (the limit H -> inf), a plausible number.
    with pytest.raises(InvalidParameterError, match="at most 1,000,000"):
        build("LocalSGD", "period", 10**30)


def test_adaptive_cutoff_samples_are_costed_before_the_simulation():
    import queuesgd as q
    from queuesgd.errors import StateSpaceTooLargeError

    w = q.Workload(0.1, "1MB", batch_size=32)
    with pytest.raises(StateSpaceTooLargeError, match="samples="):
        q.predict(q.AdaptiveCutoff(samples=MAX_COUNT), w, q.Cluster(1000, "1GB/s"))
    with pytest.raises(StateSpaceTooLargeError, match="iterations"):
        q.predict(q.AdaptiveCutoff(samples=MAX_COUNT), w, q.Cluster(4, "1GB/s"))
