"""Regression tests of the defects tests/test_api_fuzz.py found in the public API (issue 23), one class each.

- numbers read without a type check: ``float()``/``np.array(dtype=float)`` of ``10**400`` (OverflowError),
  of a string (``"784"`` read as 784, ``bytearray(b"12")`` as ``[49, 50]``) or of an object (TypeError):
  ``_checks.real``/``_checks.reals`` (BatchSolution, mva_batch, the distributions, PhaseType's matrix);
- objects used before their type is checked (AttributeError/TypeError): Formula, mva_batch's template,
  read_trace's path (``_checks.file_path``);
- whatif's arguments: overlap a flag, workers and compression bounded, latency a duration;
- a cost guard before the work: repairman_throughput's finite sum, mva_batch's recursion.
"""

from __future__ import annotations

import math
import re
import time
from fractions import Fraction

import numpy as np
import pytest
import sympy

import queuesgd as q
from queuesgd import _checks
from queuesgd.distributions import Empirical, Exponential, HyperExponential, LogNormal, Normal, PhaseType
from queuesgd.errors import InvalidParameterError, StateSpaceTooLargeError
from queuesgd.queueing.batch import mva_batch
from queuesgd.queueing.symbolic import MAX_REPAIRMAN_POPULATION, repairman_throughput

HUGE = 10**400
NET = q.ClosedNetwork([q.Delay("think", 2.0), q.Queue("cpu", 1.0)], population=1)


# ---------------------------------------------------------------- the shared checks


@pytest.mark.parametrize(
    "value",
    [
        HUGE,
        [1.0, HUGE],
        "784",
        ["1", "2"],
        b"12",
        bytearray(b"12"),
        True,
        [True],
        1 + 2j,
        {1: 2},
        {1.0},
        object(),
        [[1.0], [1.0, 2.0]],
        None,
    ],
)
def test_reals_refuses_what_is_not_a_real_number(value):
    with pytest.raises(InvalidParameterError, match="^x: got"):
        _checks.reals("x", value)


def test_reals_keeps_numbers_and_their_shape():
    assert _checks.reals("x", [[1, 2.5]]).tolist() == [[1.0, 2.5]]
    assert _checks.reals("x", [10**30]).tolist() == [1e30]  # an object array of Python ints, in range
    out = _checks.reals("x", [np.float64(np.nan), np.int64(-3)])
    assert math.isnan(out[0]) and out[1] == -3.0  # values are the caller's to bound


@pytest.mark.parametrize("value", [HUGE, Fraction(HUGE), True, np.bool_(True), "1", 1j, math.nan, math.inf])
def test_real_refuses_non_finite_and_non_real(value):
    with pytest.raises(InvalidParameterError):
        _checks.real("mu", value)


def test_integer_refuses_a_fraction_beyond_the_float_range():
    with pytest.raises(InvalidParameterError):
        _checks.integer("n", Fraction(HUGE))
    assert _checks.integer("n", Fraction(4)) == 4


@pytest.mark.parametrize("value", [10**30, None, b"/tmp/x", "", "a\0b", 3.5, ["/tmp/x"]])
def test_file_path_refuses_what_is_not_a_path(value):
    with pytest.raises(InvalidParameterError, match="^path: got"):
        _checks.file_path("path", value)


# ---------------------------------------------------------------- BatchSolution


@pytest.mark.parametrize(
    "field, value",
    [
        ("iteration_rate", HUGE),
        ("iteration_rate", "784"),
        ("iteration_rate", b"x"),
        ("iteration_rate", q.SyncPS()),
        ("iteration_rate", -1.0),
        ("iteration_rate", math.inf),
        ("gradients_per_update", "1GB/s"),
        ("gradients_per_update", [1.0, 2.0, 3.0]),
        ("bottleneck", 1.0),
        ("bottleneck", b"x"),
        ("method", None),
        ("method", [1, 2]),
    ],
)
def test_batch_solution_fields_are_checked(field, value):
    args = {"iteration_rate": [1.0, 2.0], "gradients_per_update": 1.0, "bottleneck": "", "method": "mva"}
    with pytest.raises(InvalidParameterError, match=f"^BatchSolution.{field}: got"):
        q.BatchSolution(**{**args, field: value})


def test_batch_solution_broadcasts_and_keeps_unsolved_rows():
    b = q.BatchSolution([1.0, np.nan], 2, "cpu", ["mva", ""])
    assert b.iteration_rate[0] == 1.0 and math.isnan(b.iteration_rate[1])
    assert b.gradients_per_update.tolist() == [2.0, 2.0] and b.bottleneck.tolist() == ["cpu", "cpu"]
    assert b.method.tolist() == ["mva", ""]


# ---------------------------------------------------------------- Formula


@pytest.mark.parametrize(
    "field, value",
    [
        ("expr", None),
        ("expr", "n / t"),
        ("expr", 1.0),
        ("symbols", None),
        ("symbols", {"n": "n"}),
        ("symbols", {"m": sympy.Symbol("n", positive=True)}),
        ("meaning", None),
        ("meaning", {"n": 1}),
        ("name", None),
        ("assumptions", 3),
    ],
)
def test_formula_fields_are_checked(field, value):
    n = sympy.Symbol("n", positive=True)
    args = {"expr": 2 * n, "symbols": {"n": n}, "meaning": {"n": "workers"}, "name": "x", "assumptions": ""}
    with pytest.raises(InvalidParameterError, match=f"^Formula.{field}: got"):
        q.Formula(**{**args, field: value})


# ---------------------------------------------------------------- mva_batch


@pytest.mark.parametrize(
    "args",
    [
        (None, [[2.0, 1.0]], 2),
        ("net", [[2.0, 1.0]], 2),
        (NET, [["2", "1"]], 2),
        (NET, [[HUGE, 1.0]], 2),
        (NET, "21", 2),
        (NET, [[2.0, 1.0]], "3"),
        (NET, [[2.0, 1.0]], 10**30),
        (NET, [[2.0, 1.0]], [1, 2]),
        (NET, [[2.0, 1.0]], HUGE),
        (NET, [[2.0, 1.0]], 2.5),
    ],
)
def test_mva_batch_arguments_are_checked(args):
    with pytest.raises(InvalidParameterError):
        mva_batch(*args)


def test_mva_batch_refuses_a_long_recursion_before_it_starts():
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match="distinct demand rows up to population 1,000,000"):
        mva_batch(NET, np.arange(1, 2001, dtype=float)[:, None] * [1.0, 1.0], 10**6)
    assert time.perf_counter() - start < 2
    # the machine repairman, Z = 2, D = 1: X(3) = 15/19 by hand; zero networks give an empty answer
    assert mva_batch(NET, [[2.0, 1.0]], np.int64(3)).throughput[0] == pytest.approx(15 / 19, rel=1e-12)
    assert mva_batch(NET, np.zeros((0, 2)), 3).throughput.size == 0


# ---------------------------------------------------------------- read_trace


@pytest.mark.parametrize("path", [10**30, None, b"trace.json", 3.5, ["trace.json"]])
def test_read_trace_checks_the_path_type(path):
    with pytest.raises(InvalidParameterError, match="^path: got"):
        q.read_trace(path, batch_size=32)


# ---------------------------------------------------------------- whatif


@pytest.mark.parametrize(
    "kwargs",
    [
        {"overlap": np.array([1.0, np.nan])},
        {"overlap": 2},
        {"overlap": None},
        {"compression": HUGE},
        {"compression": "5"},
        {"compression": True},
        {"compression": 0.5},
        {"compression": 1e300},
        {"workers": 10**30},
        {"workers": [4, 10**30]},
        {"latency": 1e30},
        {"bandwidth": 1e-300},
    ],
)
def test_whatif_arguments_are_checked(kwargs):
    field = next(iter(kwargs))
    with pytest.raises(InvalidParameterError, match=f"^{field}: got"):
        q.whatif("resnet50", **kwargs)


def test_whatif_reads_flags_and_zero_dimensional_arrays_as_their_values():
    plain = q.whatif("resnet50", workers=16, compression=2.0, overlap=False).scaling_factor
    assert (
        q.whatif("resnet50", workers=np.array(16), compression=np.array(2.0), overlap="off").scaling_factor
        == plain
    )
    assert q.whatif("resnet50", workers=16, compression=2.0, overlap=True).scaling_factor > plain


# ---------------------------------------------------------------- repairman_throughput


@pytest.mark.parametrize("N", [10**30, 1e300, MAX_REPAIRMAN_POPULATION + 1])
def test_repairman_refuses_a_huge_finite_sum_at_once(N):
    start = time.perf_counter()
    with pytest.raises(StateSpaceTooLargeError, match="Leave N out"):
        repairman_throughput(2.0, 1.0, N)
    assert time.perf_counter() - start < 1


def test_repairman_with_symbolic_demands_has_the_symbolic_mva_limit():
    Z = sympy.Symbol("Z", positive=True)
    with pytest.raises(StateSpaceTooLargeError, match="N <= 26 with symbolic demands"):
        repairman_throughput(Z, 1, 27)
    # N = 2: X = (1 - p0) / D with p0 = (Z^2/2) / (1 + Z + Z^2/2), by hand
    expected = 1 - (Z**2 / 2) / (1 + Z + Z**2 / 2)
    assert sympy.simplify(repairman_throughput(Z, 1, 2) - expected) == 0
    # the symbolic-N form, which the message points to, agrees at N = 3 (r = 2: 15/19)
    N = sympy.Symbol("N", positive=True, integer=True)
    assert float(repairman_throughput(2, 1).subs(N, 3)) == pytest.approx(15 / 19, rel=1e-12)


# ---------------------------------------------------------------- the distributions


@pytest.mark.parametrize(
    "make",
    [
        lambda: Normal(HUGE, 1.0),
        lambda: Normal(0.1, HUGE),
        lambda: LogNormal(HUGE, 1.0),
        lambda: Empirical(HUGE),
        lambda: Empirical([0.1, HUGE]),
        lambda: Empirical(["0.1", "0.2"]),
        lambda: Empirical(bytearray(b"12")),
        lambda: Empirical([True, False]),
        lambda: HyperExponential(HUGE, [1.0]),
        lambda: HyperExponential([0.5, 0.5], ["1", "2"]),
        lambda: PhaseType(HUGE, [[-1.0]]),
        lambda: PhaseType([1.0], [["-1"]]),
        lambda: PhaseType([1.0], [[-HUGE]]),
    ],
)
def test_distribution_parameters_are_real_numbers(make):
    with pytest.raises(InvalidParameterError):
        make()


def test_a_symbolic_law_substituted_with_a_complex_number_is_refused():
    lam = sympy.Symbol("lambda", positive=True)
    for value in (sympy.I, sympy.zoo):
        with pytest.raises(InvalidParameterError, match="Exponential.rate"):
            Exponential(lam).subs({lam: value})
    assert Exponential(lam).subs({lam: 4}).mean == 0.25


def test_closed_network_population_is_bounded_before_any_work():
    """A population of 10**9 (MVA's recursion would hold 10**9 floats per array) or an endless range of
    populations is refused at once, naming the field; the largest accepted population is MAX_COUNT."""
    import itertools

    from queuesgd.queueing import ClosedNetwork, Delay, Queue, mva

    stations = [Delay("think", 4.0), Queue("cpu", 1.0)]
    with pytest.raises(InvalidParameterError, match=r"^population: .*at most 1,000,000"):
        ClosedNetwork(stations, population=10**9)
    with pytest.raises(InvalidParameterError, match=r"population\['a'\]"):
        ClosedNetwork(stations, population={"a": 10**7})
    net = ClosedNetwork(stations, population=2)
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=r"^population"):
        mva(net, population=itertools.count(1))
    assert time.perf_counter() - start < 5.0
    assert ClosedNetwork(stations, population=_checks.MAX_COUNT).population == 10**6
    # the bound leaves the answer unchanged below it: N = 2 by hand, X = 2 / (4 + R) with R = 1 + Q(1)
    assert mva(net, population=[1, 2]).throughput.tolist() == pytest.approx([1 / 5, 2 / (4 + 1 + 1 / 5)])


def test_numpy_scalars_are_numbers_and_zero_dimensional_arrays_a_clear_refusal():
    # audit 2026-11-28: Pipeline(activation_bytes=np.int64(2)) was refused (plain 2 and np.float64(2)
    # accepted); a 0-d array raised a raw TypeError in four constructors
    from queuesgd import HybridParallel, Pipeline, ShardedDataParallel

    for value, got in ((np.int64(2), 2.0), (np.float32(2.5), 2.5), (Fraction(5, 2), 2.5), (np.array(3), 3.0)):
        assert Pipeline(2, 4, activation_bytes=value).activation_bytes == got
    with pytest.raises(InvalidParameterError, match=r"^Pipeline.activation_bytes: got np.True_"):
        Pipeline(2, 4, activation_bytes=np.bool_(True))
    for make, field in (
        (lambda: Pipeline(2, 4, partition=np.array(2)), "Pipeline.partition"),
        (lambda: ShardedDataParallel(units=np.array(2)), "ShardedDataParallel.units"),
        (lambda: HybridParallel(pipeline=2, stage_layers=np.array(2)), "HybridParallel.stage_layers"),
    ):
        with pytest.raises(InvalidParameterError, match=f"^{field}: got array\\(2\\)"):
            make()


def test_a_shapes_workload_names_the_rate_and_the_dtype_it_refuses():
    # audit 2026-11-28: GPT3_XL.workload(1, flops=1) named Layer('final_norm').backward_time, an object the
    # user never made; workload(dtype_bytes=1000) was accepted where operations() refuses past 16
    from queuesgd.model_shapes import GPT3_XL

    block = 2 * GPT3_XL.block_flops(1)  # a block's backward, twice its forward FLOPs, at 1 FLOP/s
    said = re.escape(f"(a block: {block:.3g} s)")
    with pytest.raises(InvalidParameterError, match=r"^flops: got 1; .*" + said):
        GPT3_XL.workload(1, flops=1)
    with pytest.raises(InvalidParameterError, match=r"^dtype_bytes: got 17; .*at most 16"):
        GPT3_XL.workload(1, dtype_bytes=17)
    with pytest.raises(InvalidParameterError, match=r"^dtype_bytes: got 99; .*at most 16"):
        GPT3_XL.boundary_bytes(1, dtype_bytes=99)
