"""Issue 23: every cost is estimated before the allocation or the loop, and refused with a way on.

The inputs that used to hang or exhaust memory run in a child process with a
memory cap and a timeout, so that a regression fails here instead of hanging
CI or the machine.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import queuesgd as q
from queuesgd.batchmeans import MAX_SAMPLES, MAX_SIMULATION_SECONDS, check_simulation_size
from queuesgd.distributions import MAX_PHASES, Erlang, PhaseType, check_phases, fit_phase_type, sum_of
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.petri.statespace import state_space, surely_reachable
from queuesgd.prediction import MAX_SWEEP_ROWS
from queuesgd.schemes.parallel.pipeline import Pipeline
from queuesgd.schemes.parallel.pipeline_graph import (
    MAX_TASKS,
    check_task_count,
    peak_stash,
    pipeline_order,
    task_count,
)

REFUSED = """
def refused(f):
    import json, time
    t = time.perf_counter()
    try:
        f()
        out = {"error": None}
    except Exception as exc:
        out = {"error": type(exc).__name__, "message": str(exc)}
    out["seconds"] = time.perf_counter() - t
    print(json.dumps(out))
"""


def run_bounded(code: str, timeout: float = 60.0) -> list[dict]:
    """Run ``code`` in a child capped at 2 GiB; it prints one JSON record per line. A hang fails."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + REFUSED + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


# ---- pipelines: the task graph is counted before it is built ---------------------------------------
@pytest.mark.parametrize("p2p", ["eager", "rendezvous"])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("S", "M", "D"), [(1, 1, 1), (2, 3, 1), (3, 5, 2), (4, 2, 3)])
def test_task_count_is_the_size_of_the_graph_built(p2p, schedule, S, M, D):
    w = q.Workload(q.distributions.Exponential(mean=0.012), "12MB")  # random: every replica drawn
    for dp in ("allreduce", "sharded"):
        s = Pipeline(S, M, schedule=schedule, p2p=p2p, activation_bytes="1MB", data_parallel=dp)
        graph = s.task_graph(w, q.Cluster(S * D, "1GB/s"))
        assert task_count(S, M, D, sharded=dp == "sharded") == len(graph)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("S", "M"), [(1, 1), (1, 4), (2, 1), (3, 2), (4, 8), (5, 3)])
def test_peak_stash_in_closed_form_counts_the_order(schedule, S, M):
    peaks = []
    for order in pipeline_order(S, M, schedule):  # held from a forward to its backward, counted
        held = peak = 0
        for kind, _ in order:
            held += kind == "F"
            peak = max(peak, held)
            held -= kind == "B"
        peaks.append(peak)
    assert peak_stash(S, M, schedule) == peaks


def test_a_pipeline_graph_too_large_is_refused_with_the_closed_form_or_a_micro_batch_count():
    with pytest.raises(StateSpaceTooLargeError, match=r"14,000,008 tasks; at most 250,000") as info:
        check_task_count(4, 10**6)
    most = int(info.value.args[0].split("at most ")[2].split(" ")[0].replace(",", ""))
    assert task_count(4, most) <= MAX_TASKS < task_count(4, most + 1)
    with pytest.raises(StateSpaceTooLargeError, match="entries"):
        pipeline_order(8, 10**7, "gpipe")
    assert peak_stash(8, 10**7, "1f1b") == [8, 7, 6, 5, 4, 3, 2, 1]


def test_a_million_micro_batches_is_refused_at_once_and_the_closed_form_answers():
    rows = run_bounded(
        """
        import json
        from queuesgd import Workload, Cluster, predict
        from queuesgd.distributions import Exponential
        from queuesgd.schemes.parallel.pipeline import Pipeline
        w = Workload("12ms", "400MB", batch_size=8)
        refused(lambda: predict(Pipeline(4, 10**6), w, Cluster(4, "10GB/s")))
        refused(lambda: predict(Pipeline(8, 10**7), w, Cluster(8, "10GB/s")))
        r = Workload(Exponential(mean=0.012), "400MB")
        refused(lambda: predict(Pipeline(8, 10**7), r, Cluster(8, 1e10)))
        p = predict(Pipeline(8, 10**7), w, Cluster(8, "10GB/s"), "closed_form")
        print(json.dumps({"iteration_time": p.iteration_time}))
        """
    )
    for row in rows[:3]:
        assert row["error"] == "StateSpaceTooLargeError" and row["seconds"] < 5
        assert "fewer micro-batches" in row["message"]
    assert "method='closed_form'" in rows[0]["message"] and "is exact here" in rows[0]["message"]
    assert "not exact here" in rows[2]["message"]  # random compute: no closed form to offer
    # (M + S - 1)(t_f + t_b), t_f + t_b = 12 ms / 8 stages; D = 1: no collective, no send
    assert rows[3]["iteration_time"] == pytest.approx((10**7 + 7) * 0.012 / 8, rel=1e-12)


def test_the_cli_refuses_a_million_micro_batches_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "queuesgd", "predict", "--scheme", "pipeline", "--stages", "4"]
        + ["--microbatches", "1000000", "--workers", "4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr.startswith("queuesgd: error: the pipeline task graph") and "Traceback" not in done.stderr
    )


# ---- simulations: one guard, before allocating -----------------------------------------------------
def test_check_simulation_size_bounds_memory_and_time():
    check_simulation_size(MAX_SAMPLES // 4, 4)
    with pytest.raises(StateSpaceTooLargeError, match=f"at most {MAX_SAMPLES // 4 + 0:,}"):
        check_simulation_size(MAX_SAMPLES // 4 + 1, 4)
    per = 1e-3
    check_simulation_size(int(MAX_SIMULATION_SECONDS / per), 1, seconds_per_iteration=per)
    with pytest.raises(StateSpaceTooLargeError, match="would take about"):
        check_simulation_size(int(MAX_SIMULATION_SECONDS / per) + 10, 1, seconds_per_iteration=per)


SIMULATING = [
    ("sync-ps", "simulate"),
    ("async-ps", "simulate"),
    ("ring-allreduce", "simulate"),
    ("backup-workers", "simulate"),
    ("optimal-cutoff", "simulate"),
    ("adaptive-cutoff", "simulate"),
    ("eager-sgd", "simulate"),
    ("stale-synchronous", "simulate"),
    ("local-sgd", "simulate"),
    ("compressed-allreduce", "simulate"),
    ("sharded-dp", "fine"),
    ("pipeline", "fine"),
]


def test_every_simulation_refuses_a_billion_iterations_before_allocating():
    rows = run_bounded(
        f"""
        from queuesgd import Workload, Cluster, predict, registry
        from queuesgd.distributions import Exponential
        w = Workload(Exponential(mean=0.1), "10MB", batch_size=8)
        for key, method in {SIMULATING!r}:
            kw = dict(stages=2, microbatches=2) if key == "pipeline" else {{}}
            s = registry.make(key, **kw)
            refused(lambda: predict(s, w, Cluster(4, "1GB/s"), method=method, iterations=10**9, rng=0))
        """,
        timeout=120,
    )
    assert len(rows) == len(SIMULATING)
    for (key, _), row in zip(SIMULATING, rows):
        assert row["error"] == "StateSpaceTooLargeError", (key, row)
        assert "lower iterations=" in row["message"] and row["seconds"] < 5, (key, row)


@pytest.mark.parametrize("digits", [13, 401, 5000])
def test_more_iterations_than_any_simulation_takes_are_refused_by_the_iterations_check(digits):
    # fuzz audit F3: 10**400 iterations raised OverflowError in the size guard's message (schemes/laws.py)
    said = r"^iterations: got .*; accepted: an integer >= 1, at most 1,000,000,000,000"
    w, c = q.Workload(0.1, "1MB"), q.Cluster(2, "1GB/s")
    for method in ("simulate", "closed_form"):  # checked whatever the method
        with pytest.raises(InvalidParameterError, match=said):
            q.predict(q.SyncPS(), w, c, method, iterations=10 ** (digits - 1) + 1)


def test_the_cli_refuses_async_ps_simulating_a_billion_iterations():
    done = subprocess.run(
        [sys.executable, "-m", "queuesgd", "predict", "--scheme", "async-ps", "--method", "simulate"]
        + ["--iterations", "1000000000", "--workers", "4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "lower iterations=" in done.stderr and "Traceback" not in done.stderr


# ---- phase-type laws: phases counted before the k x k matrix ---------------------------------------
def test_a_billion_phases_are_refused_before_the_matrix():
    law = Erlang(10**9, mean=0.1)  # a law: samples and its CDF need no phases
    assert law.sample(0, 3).shape == (3,)
    with pytest.raises(StateSpaceTooLargeError, match=r"1,000,000,000 phases.*deterministic"):
        law.to_phase_type()
    assert Erlang(MAX_PHASES, mean=0.1).to_phase_type().phases == MAX_PHASES
    with pytest.raises(StateSpaceTooLargeError):
        check_phases(MAX_PHASES + 1, "x")
    with pytest.raises(InvalidParameterError, match="k_max"):
        fit_phase_type(0.1, scv=0.0, k_max=10**9)
    with pytest.raises(StateSpaceTooLargeError):
        sum_of(q.distributions.HyperExponential([0.5, 0.5], [1.0, 2.0]), 10**9)
    with pytest.raises(StateSpaceTooLargeError):
        PhaseType(np.eye(1, MAX_PHASES + 1)[0], -np.eye(MAX_PHASES + 1))


def test_the_cli_refuses_erlang_of_a_billion_phases_for_the_ctmc():
    done = subprocess.run(
        [sys.executable, "-m", "queuesgd", "predict", "--scheme", "sync-ps", "--method", "ctmc"]
        + ["--compute", "erlang:1000000000", "--workers", "4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "phases" in done.stderr and "Traceback" not in done.stderr


# ---- Petri nets: a lower bound on the markings, checked before generating --------------------------
def cycle(tokens: int, places: int = 3) -> q.PetriNet:
    net = q.PetriNet("cycle")
    for i in range(places):
        net.place(f"p{i}", tokens=tokens if i == 0 else 0)
    for i in range(places):
        net.timed(f"t{i}", rate=1.0, inputs={f"p{i}": 1}, outputs={f"p{(i + 1) % places}": 1})
    return net


@pytest.mark.parametrize(("tokens", "places"), [(0, 2), (1, 3), (4, 3), (5, 4)])
def test_surely_reachable_is_a_lower_bound(tokens, places):
    # N tokens on a cycle of P places reach every composition: C(N + P - 1, P - 1) markings.
    bound, _ = surely_reachable(cycle(tokens, places))
    assert bound == tokens + 1 if tokens else bound == 1
    assert bound <= len(state_space(cycle(tokens, places))) == math.comb(tokens + places - 1, places - 1)


def test_a_pnml_cycle_of_millions_of_tokens_is_refused_at_once():
    rows = run_bounded(
        """
        from queuesgd.petri.pnml import from_pnml
        from queuesgd.petri import state_space
        def doc(tokens):
            places = "".join(
                f'<place id="p{i}"><initialMarking><text>{tokens if i == 0 else 0}</text>'
                "</initialMarking></place>"
                for i in range(3)
            )
            trans = "".join(f'<transition id="t{i}"/>' for i in range(3))
            arcs = "".join(
                f'<arc id="a{i}" source="p{i}" target="t{i}"/>'
                f'<arc id="b{i}" source="t{i}" target="p{(i + 1) % 3}"/>'
                for i in range(3)
            )
            return ('<pnml><net id="n" type="http://www.pnml.org/version-2009/grammar/ptnet"><page id="g">'
                    + places + trans + arcs + "</page></net></pnml>")
        for tokens in (3 * 10**6, 10**9):
            net = from_pnml(doc(tokens), default_rate=1.0)
            refused(lambda: state_space(net))
        """
    )
    for row, tokens in zip(rows, ("3,000,001", "1,000,000,001")):
        assert row["error"] == "StateSpaceTooLargeError" and row["seconds"] < 2
        assert f"reaches {tokens} distinct markings" in row["message"] and "max_states=" in row["message"]


# ---- sweep: the executor and the grid --------------------------------------------------------------
def test_sweep_refuses_a_non_executor_and_a_grid_too_large_before_any_work():
    w, c = q.Workload(0.1, "10MB"), q.Cluster(2, "1GB/s")
    for bad in ("pool", object(), __import__("concurrent.futures").futures.ThreadPoolExecutor):
        with pytest.raises(InvalidParameterError, match="executor"):
            q.sweep(q.SyncPS(), w, c, executor=bad)
    side = math.isqrt(MAX_SWEEP_ROWS) + 1
    with pytest.raises(StateSpaceTooLargeError, match=f"{side} x {side} x 1 = {side * side:,} rows"):
        q.sweep(q.SyncPS(), w, c, workers=range(1, side + 1), bandwidth=np.arange(1, side + 1) * 1e9)
    import itertools

    with pytest.raises(InvalidParameterError, match=f"more than {MAX_SWEEP_ROWS:,} values"):
        q.sweep(q.SyncPS(), w, c, workers=itertools.count(1))
