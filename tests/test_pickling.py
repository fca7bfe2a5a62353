"""The library's results pickle and load as themselves: what a worker process (multiprocessing, Dask) sends.

Each was refused before (`cannot pickle 'mappingproxy' object`): their mappings are read-only proxies.
Loaded, each is equal to the original field by field (arrays element by element), and its mappings are
read-only again.
"""

from __future__ import annotations

import dataclasses
import pickle
from types import MappingProxyType

import numpy as np
import pytest

import queuesgd as q
from queuesgd.comparison_table import comparison_from_rows
from queuesgd.dag import Task, TaskGraph, simulate
from queuesgd.distributions import Exponential, Gamma
from queuesgd.hybrid_space import HybridSpace, evaluate_space
from queuesgd.measured_runs import measurement
from queuesgd.model_shapes import GPT3_XL
from queuesgd.queueing import ClosedNetwork, Delay, Queue, mva
from queuesgd.schemes.parallel.collectives import collective_time
from queuesgd.schemes.solution import SchemeSolution

W = q.Workload(compute=Gamma(4.0, 0.025), gradient_bytes=2e7, batch_size=32)
C = q.Cluster(4, "10Gbit/s")


def _same(a, b, where="") -> None:
    """Equal, recursively: mappings key by key (read-only where the original is), arrays by element."""
    assert type(a) is type(b), where
    if isinstance(a, MappingProxyType | dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, TaskGraph):  # no __eq__: the same tasks, in order, and the same structure
        assert a.tasks == b.tasks and a.groups == b.groups and a.name == b.name, where
        for field in ("pred_ptr", "pred_idx", "resource_of", "depth"):
            assert np.array_equal(getattr(a.structure, field), getattr(b.structure, field)), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), where
    elif (dataclasses.is_dataclass(a) or hasattr(a, "__dict__")) and not isinstance(a, type):
        for name in vars(a):
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _results():
    graph = TaskGraph([Task("a", Exponential(4.0)), Task("b", 0.5, after=["a"], group="tail")])
    network = ClosedNetwork(
        [Delay("think", {"a": 1.0, "b": 2.0}), Queue("cpu", {"a": 0.4, "b": 0.2}), Queue("disk", 0.3)],
        population={"a": 3, "b": 2},
    )
    table = evaluate_space(GPT3_XL, q.Cluster(64, "200Gbit/s", "5us", gpus_per_node=8,
                           node_bandwidth="300GB/s", rails=8), HybridSpace(), global_batch=512,
                           memory_limit=8e9, flops=150e12)  # fmt: skip
    rows = [{"scheme": "async-ps", "workload": "w", "workers": 2, "bandwidth": 1e9, "latency": 0.0,
             "batch_size": 32, "measured": 100.0, "predicted": 110.0, "error": 0.1}]  # fmt: skip
    group = {"config": {"workers": 2}, "params": {"lr": 0.1}, "rows": [0, 1, 2],
             "runs": {"": [(0.0, None, None, 0), (0.5, None, None, 1), (1.0, None, None, 2)]}}  # fmt: skip
    return {
        "Prediction (ring)": q.predict(q.RingAllReduce(), W, C),
        "Prediction (async-ps, stations)": q.predict(q.AsyncPS(), W, C),
        "Prediction (async-ps, its Petri net)": q.predict(
            q.AsyncPS(), W, q.Cluster(2, "10Gbit/s"), method="ctmc"
        ),
        "SweepResult": q.sweep(q.AsyncPS(), W, C, workers=[1, 2, 4]),
        "Simulation": simulate(graph, iterations=500, rng=1),
        "MVAResult": mva(network),
        "MVASeries": mva(ClosedNetwork([Delay("z", 1.0), Queue("q", 0.5)], 1), population=range(1, 4)),
        "ClosedNetwork": network,
        "HybridTable": table,
        "Formula": q.RingAllReduce().formula(),
        "Comparison": comparison_from_rows(rows, ()),
        "Measurement": measurement(group, "time", str, "auto", ()),
        "CollectiveTime": collective_time(
            "allreduce",
            1e9,
            q.Cluster(16, "100Gbit/s", "5us", gpus_per_node=8, node_bandwidth="100GB/s", rails=8),
            16,
        ),  # fmt: skip
        "SchemeSolution": SchemeSolution(2.0, 4.0, 0.5, {"compute": 0.1}, "mva", ""),
    }


RESULTS = _results()


@pytest.mark.parametrize("name", list(RESULTS))
def test_a_result_pickles_and_loads_as_itself(name):
    original = RESULTS[name]
    back = pickle.loads(pickle.dumps(original))
    _same(original, back, name)
    proxies = [v for v in vars(back).values() if isinstance(v, MappingProxyType)]
    assert proxies, f"{name} holds no read-only mapping: nothing here was refused before"
    with pytest.raises(TypeError):
        proxies[0]["new"] = 1  # read-only again


def test_a_prediction_solved_on_its_petri_net_equals_itself_loaded_and_solved_again():
    # A PetriNet compared by identity made a loaded prediction (or the same prediction solved again)
    # unequal to the original, though every number agreed; nets now compare by what they declare.
    solved = RESULTS["Prediction (async-ps, its Petri net)"]
    assert isinstance(solved.model, q.PetriNet)
    again = q.predict(q.AsyncPS(), W, q.Cluster(2, "10Gbit/s"), method="ctmc")
    assert pickle.loads(pickle.dumps(solved)) == solved == again
    assert again.model is not solved.model and hash(again.model) == hash(solved.model)
    # a net that differs in one rate, one token or its name is another net
    other = q.predict(q.AsyncPS(), q.Workload(0.2, "20MB", batch_size=32), q.Cluster(2, "10Gbit/s"),
                      method="ctmc")  # fmt: skip
    assert other.model != solved.model and other != solved
    copy = pickle.loads(pickle.dumps(solved.model))
    name = next(iter(copy.places))
    copy._places[name] = dataclasses.replace(copy.places[name], tokens=copy.places[name].tokens + 1)
    assert copy != solved.model
    renamed = pickle.loads(pickle.dumps(solved.model))
    renamed.name = solved.model.name + "-2"
    assert renamed != solved.model
