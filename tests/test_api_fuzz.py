"""Standing fuzz of the public Python API (issue 23): junk arguments give a queuesgd error, never another.

Hypothesis calls every callable and class of ``queuesgd.__all__`` (predict, sweep, derive, whatif,
compare, Workload, Cluster, the schemes, the distributions, load_workload, ...) with each argument
either left out (where it has a default), a plausible value, or junk (NaN, infinities, ``10**400``,
bools, strings, bytes, containers, objects of other types, ``/dev/zero``). Every call must return or
raise a :class:`~queuesgd.errors.QueuesgdError` -- not another exception type -- within a time bound,
and write nothing (the calls run in an empty directory, checked afterwards). The calls run in a child
process capped at 3 GiB, so an unbounded allocation fails the test instead of the machine.

Entry points left out: ``validate`` (starts processes), ``profile`` and ``plain_step_time`` (run a
torch model; tests/test_profiler_hardening.py fuzzes their parameters), the decorators
``model_factory``/``inputs_factory`` (they accept any callable), and the abstract classes.

The command line has its own fuzz (tests/test_cli_fuzz.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("hypothesis")

#: Seconds one call may take before it counts as a hang.
CALL_BOUND = 5
#: Examples per entry point (derandomized: the same examples on every run).
EXAMPLES = 40

#: Defects the fuzz finds that are reported but not yet fixed, by entry point and exception type
#: (none is a failure here). Empty: every one found so far is fixed, with a regression test in
#: tests/test_api_edges.py.
KNOWN: dict[tuple[str, str], str] = {}

CHILD = r"""
import inspect, json, math, os, resource, signal, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
import numpy as np
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st
import queuesgd as q
from queuesgd.errors import QueuesgdError

BOUND, EXAMPLES = int(sys.argv[1]), int(sys.argv[2])


class Hang(BaseException):
    pass


def _alarm(*_):
    raise Hang()


signal.signal(signal.SIGALRM, _alarm)
W = q.Workload(0.1, "10MB", batch_size=32)
N_, T_, Z_ = sympy.symbols("n t Z", positive=True)
GOOD = {
    "workload": [W, "resnet50"], "cluster": [q.Cluster(4, "1GB/s")], "scheme": [q.RingAllReduce(), "sync-ps"],
    "workers": [4, 2], "bandwidth": ["1GB/s", 1e9], "latency": [0.0, "5us"], "compute": [0.1, "10ms"],
    "gradient_bytes": ["10MB", 1e6], "name": ["x"], "batch_size": [32], "method": ["auto"],
    "mean": [0.1], "rate": [10.0], "k": [3], "value": [0.1], "samples": [[0.1, 0.2, 0.3]],
    # past the first argument of BatchSolution, Formula, mva_batch, repairman_throughput, whatif and
    # the phase-type laws
    "iteration_rate": [[1.0, 2.0], 0.5], "gradients_per_update": [1.0, [1.0, 2.0]], "bottleneck": ["", "cpu"],
    "expr": [N_ / T_], "symbols": [{"n": N_, "t": T_}], "meaning": [{"n": "workers"}],
    "template": [q.ClosedNetwork([q.Delay("think", 2.0), q.Queue("cpu", 1.0)], population=1)],
    "demands": [[[2.0, 1.0]], np.array([[2.0, 1.0], [1.0, 1.0]])], "population": [3, [1, 2]],
    "think": [2.0, Z_], "service": [1.0], "N": [3, 30], "compression": [1, [1, 5]], "overlap": [False],
    "probs": [[0.5, 0.5]], "rates": [[1.0, 2.0]], "alpha": [[1.0]], "T": [[[-1.0]]],
}
JUNK = [None, True, False, -1, 0, 1, 2.7, math.nan, math.inf, -math.inf, 10**30, 10**400, -(10**30), "",
        "abc", "784", "1e400", "-1", "nan", b"x", bytearray(b"12"), [], [1, 2], [[1]], {}, {"a": 1}, {1, 2},
        (1,),
        object(), 1 + 2j, np.array([1.0, np.nan]), np.float64(np.nan), np.int64(-3), 1e-300, 1e300,
        "resnet50", "/dev/zero", "1GB/s", "10ms", lambda: 1, q.Workload(0.1, "1MB"), q.Cluster(2, "1GB/s"),
        q.SyncPS(), sympy.I, sympy.Symbol("x")]
SKIP = {"validate", "profile", "plain_step_time", "model_factory", "inputs_factory", "Distribution", "Scheme"}
names = [n for n in q.__all__ if n not in SKIP and callable(getattr(q, n)) and not n.startswith("_")]
report = {"entry_points": 0, "failures": []}


def where(err):
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "/queuesgd/" in f.filename]
    return f"{frames[-1].filename.split('/queuesgd/', 1)[1]}:{frames[-1].lineno}" if frames else "?"


def fuzz(fn, name, params):
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        kwargs = {}
        for p in params:
            choices = ["junk"] + (["good"] if p.name in GOOD else [])
            choices += ["omit"] if p.default is not p.empty else []
            how = data.draw(st.sampled_from(choices))
            if how == "omit":
                continue
            pool = GOOD[p.name] if how == "good" else JUNK
            kwargs[p.name] = pool[data.draw(st.integers(0, len(pool) - 1))]
        signal.alarm(BOUND)
        try:
            fn(**kwargs)
        except QueuesgdError:
            pass
        except BaseException as err:  # noqa: BLE001 - everything else is a finding
            kind = "Hang" if isinstance(err, Hang) else type(err).__name__
            report["failures"].append({"entry": name, "type": kind, "at": where(err),
                                       "message": str(err)[:200],
                                       "kwargs": {k: repr(v)[:60] for k, v in kwargs.items()}})
        finally:
            signal.alarm(0)

    return run


for name in names:
    fn = getattr(q, name)
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_")]
    except (TypeError, ValueError):
        continue
    report["entry_points"] += 1
    fuzz(fn, name, params)()
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def fuzz_report(tmp_path_factory) -> dict:
    cwd = tmp_path_factory.mktemp("fuzz-cwd")
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(CALL_BOUND), str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["written"] = sorted(p.name for p in cwd.iterdir() if p.name != ".hypothesis")  # its own notes
    return report


def test_every_public_entry_point_was_fuzzed(fuzz_report):
    import queuesgd as q

    left_out = 8  # validate, profile, plain_step_time, 2 decorators, 2 abstract classes, __version__
    assert fuzz_report["entry_points"] >= len(q.__all__) - left_out - 2


def test_junk_arguments_raise_queuesgd_errors_only(fuzz_report):
    new = [f for f in fuzz_report["failures"] if (f["entry"], f["type"]) not in KNOWN]
    assert not new, "\n".join(json.dumps(f) for f in new[:20])


def test_nothing_is_written_by_junk_arguments(fuzz_report):
    assert fuzz_report["written"] == []
