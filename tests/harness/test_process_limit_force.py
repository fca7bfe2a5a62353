"""Every public entry point that starts processes applies the per-core rule, and ``force`` passes it.

The rule (``harness.process_limit``): at most 8 live processes per CPU core unless forced. The CPU
count is patched to 1 (so the limit is 8, a number fixed here, not read from the code under test)
and ``os.fork`` to fail: without ``force`` each entry point must refuse 9 processes with an error
naming its own argument before anything is forked; with ``force=True`` it must get past the rule
to its first fork (nothing is started: the patched fork raises).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from queuesgd.errors import InvalidParameterError

pytest.importorskip("torch")

LIMIT = 8  # 8 per core x the one core patched in


class Forked(Exception):
    """Raised by the patched ``os.fork``: the entry point got past every check to its first fork."""


@pytest.fixture
def one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden() -> int:
        raise Forked

    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setattr(os, "fork", forbidden)


def _probe(ctx: Any, size: int, repeats: int, warmup: int) -> None:  # pragma: no cover - never forked
    ctx.report({})


def _entries() -> list[tuple[str, str, Callable[[bool], Any]]]:
    """(id, the argument the refusal names, call(force)) asking for 9 processes (LIMIT + 1)."""
    from queuesgd.harness.apriori import calibrate_network, make_profile
    from queuesgd.harness.apriori_parallel import calibrate_parallel, profile_fsdp
    from queuesgd.harness.apriori_parallel.run import measure_inputs
    from queuesgd.harness.contention import measure_concurrency, measure_synchronized
    from queuesgd.harness.ddp import run_ddp
    from queuesgd.harness.eager_profile import measure_eager
    from queuesgd.harness.fsdp import run_fsdp
    from queuesgd.harness.incast import measure_incast
    from queuesgd.harness.launch import run_probe
    from queuesgd.harness.overlap import measure_overlap
    from queuesgd.harness.pipelining import profile_stages, run_pipeline
    from queuesgd.harness.pipelining.runtime_profile import profile_runtime

    mlp = {"inputs": 16, "hidden": 8}
    return [
        ("run_ddp", "workers", lambda f: run_ddp("mlp", 9, 3, warmup=1, force=f)),
        ("run_fsdp", "workers", lambda f: run_fsdp("mlp", 9, 3, warmup=1, force=f)),
        # 3 replicas of a 3-stage pipeline: 9 processes, the split given (no profile run first)
        ("run_pipeline", "replicas x stages",
         lambda f: run_pipeline("mlp", 3, 3, 3, batch_size=6, warmup=1, split=(1, 1, 1), replicas=3,
                                model_options=mlp, force=f)),
        ("profile_stages", "copies",
         lambda f: profile_stages("mlp", microbatch=4, model_options=mlp, copies=9, force=f)),
        ("profile_runtime", "stages",
         lambda f: profile_runtime("mlp", 9, 9, schedule="1f1b", microbatch=1, split=[1] * 9, force=f)),
        # the largest count refused before the first (1 copy) runs
        ("measure_concurrency", "copies",
         lambda f: measure_concurrency("mlp", (1, 9), batch_size=8, force=f)),
        ("measure_synchronized", "copies",
         lambda f: measure_synchronized("mlp", (1, 9), batch_size=8, force=f)),
        ("measure_incast", "senders", lambda f: measure_incast(senders=8, force=f)),  # 8 + the receiver
        ("calibrate_parallel", "workers", lambda f: calibrate_parallel("sharded", 9, force=f)),
        ("profile_fsdp", "copies",
         lambda f: profile_fsdp("mlp", batch_size=8, copies=(1, 9), model_options=mlp, force=f)),
        ("run_probe", "world_size", lambda f: run_probe(_probe, 9, 8, 1, 0, force=f)),
        ("measure_overlap", "workers", lambda f: measure_overlap(9, force=f)),
        ("calibrate_network", "workers", lambda f: calibrate_network("allreduce", 9, None, force=f)),
        ("make_profile", "copies",
         lambda f: make_profile("mlp", batch_size=8, copies=(2, 9), model_options=mlp, force=f)),
        # eager-SGD's k workers are k + 1 processes (rank 0 activates): 8 workers are 9
        ("make_profile eager", "eager",
         lambda f: make_profile("mlp", batch_size=8, copies=(2,), eager=(8,), model_options=mlp, force=f)),
        ("measure_eager", "workers",
         lambda f: measure_eager("mlp", [2, 8], batch_size=8, model_options=mlp, force=f)),
        ("measure_inputs", "copies",
         lambda f: measure_inputs("fsdp", "mlp", batch_size=8, workers=[9], model_options=mlp, force=f)),
    ]  # fmt: skip


ENTRIES = _entries()


@pytest.mark.parametrize(("field", "call"), [e[1:] for e in ENTRIES], ids=[e[0] for e in ENTRIES])
def test_refused_past_the_limit_without_force(
    one_core: None, field: str, call: Callable[[bool], Any]
) -> None:
    with pytest.raises(InvalidParameterError) as err:
        call(False)  # a fork would raise Forked instead: the refusal comes before any process
    assert err.value.field == field
    assert err.value.accepted.startswith(f"at most {LIMIT} worker processes on 1 CPU core(s), or force=True")
    assert "Estimate: 9 processes" in err.value.accepted


@pytest.mark.parametrize("call", [e[2] for e in ENTRIES], ids=[e[0] for e in ENTRIES])
def test_force_passes_the_limit_to_the_first_fork(one_core: None, call: Callable[[bool], Any]) -> None:
    with pytest.raises(Forked):
        call(True)


def test_probe_runtime_forced_past_the_limit(one_core: None) -> None:
    # the tiny model's pipeline: its 9 stages are refused by the rule, and with force by the model's
    # own limit (fewer units than stages), which comes after the rule
    from queuesgd.harness.apriori_parallel.probes import probe_runtime
    from queuesgd.harness.pipelining.units import unit_count

    class Profile:
        def unit_times(self) -> list[float]:
            return [1.0] * 9

    with pytest.raises(InvalidParameterError) as err:
        probe_runtime(9, "1f1b", 9, profile=Profile())
    assert err.value.field == "stages" and "or force=True" in err.value.accepted
    from queuesgd.harness.apriori_parallel.probes import TINY_MODEL, TINY_OPTIONS

    units = unit_count(TINY_MODEL, dict(TINY_OPTIONS))
    if units >= 9:  # pragma: no cover - the tiny model has fewer units than that
        with pytest.raises(Forked):
            probe_runtime(9, "1f1b", 9, profile=Profile(), force=True)
    else:
        with pytest.raises(InvalidParameterError, match=rf"model's {units} units"):
            probe_runtime(9, "1f1b", 9, profile=Profile(), force=True)


def test_busy_spinners_count_against_the_limit(one_core: None) -> None:
    # The spinners that stand in for computing workers are processes too: 9 alone, or a point-to-point
    # calibration's 3 ranks with 6 beside them, are refused naming `busy` (no gloo ranks to count);
    # forced, each gets to its first fork.
    from queuesgd.harness.apriori import calibrate_network
    from queuesgd.harness.busy import BusyProcesses

    calls = [lambda f: BusyProcesses(9, force=f).__enter__(),
             lambda f: calibrate_network("p2p", 1, None, busy=6, force=f)]  # fmt: skip
    for call in calls:
        with pytest.raises(InvalidParameterError) as err:
            call(False)
        assert err.value.field == "busy"
        assert err.value.accepted.startswith(f"at most {LIMIT} processes on 1 CPU core(s), or force=True")
        assert "Estimate: 9 processes" in err.value.accepted and "gloo" not in err.value.accepted
        with pytest.raises(Forked):
            call(True)
    with pytest.raises(Forked):
        calibrate_network("p2p", 1, None, busy=5)  # 3 + 5 = 8: within the limit, on to the first fork
