"""TaskGraph: the model, its derived attributes and every validation error."""

import math
import time

import numpy as np
import pytest

from queuesgd.dag import Task, TaskGraph
from queuesgd.distributions import Deterministic, Exponential, Gamma, Normal
from queuesgd.errors import InvalidParameterError, UnknownNameError


def test_task_normalizes_its_fields():
    t = Task("x", "5ms", after="a", resource="net", group="comm")
    assert t.duration == 0.005 and t.after == ("a",) and t.resource == "net"
    assert Task("y", 2, after=iter(["a", "b"])).after == ("a", "b")
    assert Task("z", np.float64(1.5)).duration == 1.5 and type(Task("z", np.float64(1.5)).duration) is float


def test_graph_attributes_by_hand():
    speed = Gamma(4, mean=2.0)  # E = 2
    g = TaskGraph(
        [
            Task("load", 1.0, group="io"),
            Task("fwd", Exponential(mean=3.0), after="load", scale="speed", group="compute"),
            Task("send", 0.5, after="fwd", resource="net", group="comm"),
            Task("recv", 0.25, resource="net"),
            Task("save", Deterministic(4.0), after=["send", "recv"], resource="disk"),
        ],
        factors={"speed": speed},
        name="toy",
    )
    assert len(g) == 5 and g.name == "toy"
    assert g.names == ("load", "fwd", "send", "recv", "save")
    assert g.index("send") == 2
    assert g.resources == ("net", "disk")
    assert g.groups == ("io", "compute", "comm", "other")
    # mean of fwd: E[Exp(mean 3)] * E[Gamma mean 2] = 6
    np.testing.assert_allclose(g.mean_durations, [1.0, 6.0, 0.5, 0.25, 4.0], rtol=1e-15)
    assert not g.is_deterministic
    assert dict(g.factors) == {"speed": speed}
    with pytest.raises(TypeError):
        g.factors["x"] = speed  # read-only mapping
    with pytest.raises(AttributeError):
        g.name = "other"
    assert not g.mean_durations.flags.writeable
    assert repr(g) == "TaskGraph(name='toy', tasks=5, resources=('net', 'disk'), factors=('speed',))"


def test_is_deterministic_counts_deterministic_laws_as_constants():
    assert TaskGraph([Task("a", 1.0), Task("b", Deterministic(2.0))]).is_deterministic
    assert TaskGraph([Task("a", 1.0, scale="f")], factors={"f": Deterministic(2.0)}).is_deterministic
    assert not TaskGraph([Task("a", Exponential(1.0))]).is_deterministic
    assert not TaskGraph([Task("a", 1.0)], factors={"f": Exponential(1.0)}).is_deterministic


def test_duplicate_predecessors_are_merged():
    g = TaskGraph([Task("a", 1.0), Task("b", 1.0, after=["a", "a"])])
    assert g.structure.pred_ptr.tolist() == [0, 0, 1]


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"name": ""}, "Task.name"),
        ({"name": 3}, "Task.name"),
        ({"name": "x", "duration": -1.0}, "Task('x').duration"),
        ({"name": "x", "duration": math.nan}, "Task('x').duration"),
        ({"name": "x", "duration": math.inf}, "Task('x').duration"),
        ({"name": "x", "duration": "-2ms"}, "Task('x').duration"),
        ({"name": "x", "duration": "2 parsecs"}, "Task('x').duration"),
        ({"name": "x", "duration": True}, "Task('x').duration"),
        ({"name": "x", "duration": Normal(1.0, 1.0)}, "Task('x').duration"),
        ({"name": "x", "duration": Normal(5.0, 1.0)}, "Task('x').duration"),
        ({"name": "x", "after": 3}, "Task('x').after"),
        ({"name": "x", "after": ["a", ""]}, "Task('x').after"),
        ({"name": "x", "resource": ""}, "Task('x').resource"),
        ({"name": "x", "scale": 1}, "Task('x').scale"),
        ({"name": "x", "group": " "}, "Task('x').group"),
    ],
)
def test_bad_task_fields(kwargs, field):
    with pytest.raises(InvalidParameterError) as err:
        Task(**kwargs)
    assert err.value.field == field


def test_symbolic_law_is_refused():
    import sympy

    lam = sympy.Symbol("lam", positive=True)
    with pytest.raises(InvalidParameterError, match="numeric parameters"):
        Task("x", Exponential(lam))


def test_normal_law_far_from_zero_is_accepted():
    # P(X < 0) = Phi(-10) ~ 7.6e-24 <= 1e-9: accepted (and clipped at 0 if ever negative)
    assert Task("x", Normal(10.0, 1.0)).duration == Normal(10.0, 1.0)


def test_duplicate_name():
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph([Task("a"), Task("b"), Task("a")])
    assert err.value.field == "TaskGraph.tasks[2].name"
    assert err.value.got == "a"
    assert "not used by an earlier task" in str(err.value)


def test_unknown_predecessor_lists_a_few_names_only():
    tasks = [Task(f"t{i}") for i in range(10_000)] + [Task("x", after="missing")]
    with pytest.raises(UnknownNameError) as err:
        TaskGraph(tasks)
    assert err.value.field == "Task('x').after" and err.value.got == "missing"
    msg = str(err.value)
    assert "'t9'" in msg and "'t10'" not in msg and "... (9991 more)" in msg
    assert len(msg) < 300


def test_unknown_scale():
    with pytest.raises(UnknownNameError) as err:
        TaskGraph([Task("a", 1.0, scale="slow")], factors={"fast": Exponential(1.0)})
    assert err.value.field == "Task('a').scale"
    assert "'fast'" in str(err.value)


def test_unknown_task_name_in_index():
    with pytest.raises(UnknownNameError) as err:
        TaskGraph([Task("a")]).index("b")
    assert err.value.field == "task name"


@pytest.mark.parametrize(
    "tasks, cycle",
    [
        ([Task("a", after="a")], "a -> a"),
        ([Task("a", after="b"), Task("b", after="a")], "b -> a -> b"),
        (
            [Task("s"), Task("a", after=["s", "c"]), Task("b", after="a"), Task("c", after="b")],
            "b -> c -> a -> b",
        ),
    ],
)
def test_cycle(tasks, cycle):
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph(tasks)
    assert err.value.field == "TaskGraph.tasks"
    assert err.value.got == cycle
    assert "acyclic" in str(err.value)


def test_cycle_through_resource_tasks_is_reported_as_a_cycle():
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph([Task("a", after="b", resource="r"), Task("b", after="a", resource="r")])
    assert err.value.field == "TaskGraph.tasks"


@pytest.mark.parametrize(
    "tasks, field, got",
    [
        # direct dependency between two tasks of one resource
        (
            [Task("a", resource="R"), Task("b", after="a", resource="R")],
            "TaskGraph resource 'R'",
            "task 'b' depends on task 'a'",
        ),
        # through a plain task
        (
            [Task("a", resource="R"), Task("m", after="a"), Task("b", after="m", resource="R")],
            "TaskGraph resource 'R'",
            "task 'b' depends on task 'a' (a -> m -> b)",
        ),
        # through another resource: a (R) -> x (S) -> b (R)
        (
            [Task("a", resource="R"), Task("x", after="a", resource="S"), Task("b", after="x", resource="R")],
            "TaskGraph resource 'R'",
            "task 'b' depends on task 'a' (a -> x -> b)",
        ),
    ],
)
def test_resource_self_dependency(tasks, field, got):
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph(tasks)
    assert err.value.field == field
    assert err.value.got == got
    assert "must not depend on one another" in str(err.value)


def test_cycle_between_resources():
    # no task of R depends on another task of R, yet R feeds S and S feeds R
    tasks = [
        Task("a", resource="R1"),
        Task("b", after="a", resource="R2"),
        Task("c", resource="R2"),
        Task("d", after="c", resource="R1"),
    ]
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph(tasks)
    assert err.value.field.startswith("TaskGraph resource ")
    assert "task 'b' depends on task 'a'" in err.value.got
    assert "task 'd' depends on task 'c'" in err.value.got


def test_resources_fed_in_one_direction_are_fine():
    g = TaskGraph([Task("a", resource="R1"), Task("b", after="a", resource="R2"), Task("c", resource="R1")])
    assert g.resources == ("R1", "R2")


@pytest.mark.parametrize(
    "args, field",
    [
        (([],), "TaskGraph.tasks"),
        ((3,), "TaskGraph.tasks"),
        (([Task("a"), "b"],), "TaskGraph.tasks[1]"),
        (([Task("a")], {"f": 2.0}), "TaskGraph.factors['f']"),
        (([Task("a")], {"f": Normal(0.0, 1.0)}), "TaskGraph.factors['f']"),
        (([Task("a")], [("f", Exponential(1.0))]), "TaskGraph.factors"),
        (([Task("a")], {"": Exponential(1.0)}), "TaskGraph.factors key"),
        (([Task("a")], None, ""), "TaskGraph.name"),
    ],
)
def test_bad_graph_arguments(args, field):
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph(*args)
    assert err.value.field == field


def test_construction_of_30000_tasks_is_fast():
    # 300 layers of 100 tasks, each after two tasks of the previous layer; one resource per layer
    tasks = [
        Task(
            f"t{layer}_{j}",
            1.0,
            after=() if layer == 0 else (f"t{layer - 1}_{j}", f"t{layer - 1}_{(j + 1) % 100}"),
            resource=f"r{layer}" if j % 10 == 0 else None,
        )
        for layer in range(300)
        for j in range(100)
    ]
    t0 = time.perf_counter()
    g = TaskGraph(tasks)
    elapsed = time.perf_counter() - t0
    assert len(g) == 30_000 and len(g.resources) == 300
    assert elapsed < 5.0  # generous bound for a loaded CI machine; typically well under 1 s


def test_long_dependency_path_is_shortened_in_the_message():
    tasks = [Task("a", resource="R")] + [
        Task(f"m{i}", after="a" if i == 0 else f"m{i - 1}") for i in range(100)
    ]
    with pytest.raises(InvalidParameterError) as err:
        TaskGraph([*tasks, Task("b", after="m99", resource="R")])
    assert (
        err.value.got == "task 'b' depends on task 'a' (a -> m0 -> m1 -> ... 96 more ... -> m98 -> m99 -> b)"
    )


def test_a_graph_pickles_and_loads_as_the_same_graph():
    # a worker process (multiprocessing, Dask) gets a graph by pickle; it was refused (a mappingproxy)
    import pickle

    from queuesgd.dag import schedule, simulate

    g = TaskGraph(
        [
            Task("load", Exponential(2.0), resource="disk"),
            Task("a", 1.0, after=["load"], scale="slow", group="compute"),
            Task("b", Gamma(2.0, 0.5), resource="disk"),
            Task("c", 0.5, after=["a", "b"]),
        ],
        factors={"slow": Gamma(4.0, 0.25)},
        name="toy",
    )
    arrays = TaskGraph.from_arrays(
        ["x", "y", "z"], [1.0, 2.0, 0.5], [0, 0, 1, 3], [0, 0, 1], groups=["g", None, "g"]
    )
    for graph in (g, arrays):
        back = pickle.loads(pickle.dumps(graph))
        assert back.names == graph.names and back.groups == graph.groups and back.resources == graph.resources
        assert [t.after for t in back.tasks] == [t.after for t in graph.tasks]
        for field in ("pred_ptr", "pred_idx", "resource_of", "depth"):
            assert np.array_equal(getattr(back.structure, field), getattr(graph.structure, field))
        assert schedule(back).makespan == schedule(graph).makespan  # the means' schedule, the same numbers
        assert simulate(back, iterations=2_000, rng=5).mean == simulate(graph, iterations=2_000, rng=5).mean
