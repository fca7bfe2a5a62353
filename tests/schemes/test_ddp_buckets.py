"""DDP's gradient buckets (``queuesgd.schemes.fine.ddp_buckets``) and the ``fusion="ddp"`` policy.

Independent sources:

- PyTorch's own assignment, ``torch._C._distributed_c10d._compute_bucket_assignment_by_size``
  (the function DDP's C++ reducer calls), on hand-made size lists and on the
  parameters of a real model;
- the buckets a real ``DistributedDataParallel`` (one-process gloo group)
  uses after its rebuild, read from the reducer and from its logging data;
- the makespan of a three-layer iteration computed by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd import Cluster, Layer, RingAllReduce, SyncPS, TreeAllReduce, Workload, load_workload, predict
from queuesgd.errors import InvalidParameterError
from queuesgd.schemes.fine.ddp_buckets import assign_by_size, ddp_buckets
from queuesgd.workload import CostCurve

MiB = 1024 * 1024


def _workload(sizes, gap=1e-3) -> Workload:
    """Layers of ``sizes`` bytes in ready order, ``gap`` seconds of backward computation each."""
    return Workload(1.0, None, layers=[Layer(f"t{i}", float(s), gap) for i, s in enumerate(sizes)])


def _torch_ranges(torch, sizes, limits) -> list[tuple[int, int]]:
    """PyTorch's assignment of float32 tensors of ``sizes`` bytes, in the given order, as ranges."""
    from torch._C._distributed_c10d import _compute_bucket_assignment_by_size

    tensors = [torch.empty(int(s) // 4) for s in sizes]
    n = len(tensors)
    # tensor_indices given: the order is kept, as in the reducer's rebuild (ready order).
    buckets, _ = _compute_bucket_assignment_by_size(
        tensors, [int(v) for v in limits], [False] * n, list(range(n))
    )
    for b in buckets:  # one dtype: every bucket is a contiguous, increasing range
        assert b == list(range(b[0], b[-1] + 1))
    return [(b[0], b[-1]) for b in buckets]


def _resnet_sizes(torch, order: str) -> list[int]:
    from queuesgd.harness.models import resnet18s

    net = resnet18s(classes=10, width=16)
    sizes = [p.numel() * p.element_size() for p in net.parameters()]
    return sizes[::-1] if order == "reverse registration" else sizes


HAND_MADE = {
    "many small": (list(4 * np.random.default_rng(1).integers(1, 1000, size=300)), [4096, 16384]),
    "one huge": ([40, 4 * 10_000_000, 40, 40], [MiB, 25 * MiB]),
    "exactly at the caps": ([200, 200, 400, 400, 800, 4, 796, 800], [400, 800]),
    "every tensor alone (cap 0)": ([4, 8, 12], [0]),
    "first limit larger": ([400, 400, 400, 100, 100], [1000, 100]),
    "one limit": ([100] * 10, [250]),
    "three limits": ([100] * 10, [100, 200, 300]),
}


@pytest.mark.parametrize("case", sorted(HAND_MADE))
def test_assignment_equals_pytorchs_on_hand_made_sizes(case):
    torch = pytest.importorskip("torch")
    sizes, limits = HAND_MADE[case]
    expected = _torch_ranges(torch, sizes, limits)
    assert assign_by_size(sizes, limits) == expected
    if len(limits) <= 2:  # ddp_buckets: limits [first_bucket, bucket_cap]
        first, cap = limits[0], limits[-1]
        buckets = ddp_buckets(_workload(sizes), cap, first)
        assert [(b.first, b.last) for b in buckets] == expected
        assert [b.nbytes for b in buckets] == [float(sum(sizes[a : z + 1])) for a, z in expected]


@pytest.mark.parametrize("order", ["registration", "reverse registration"])
@pytest.mark.parametrize("limits", [[MiB, 25 * MiB], [64 * 1024, 256 * 1024], [256 * 1024, 256 * 1024]])
def test_assignment_equals_pytorchs_on_a_real_models_parameters(order, limits):
    torch = pytest.importorskip("torch")
    sizes = _resnet_sizes(torch, order)
    expected = _torch_ranges(torch, sizes, limits)
    assert len(expected) > 1
    buckets = ddp_buckets(_workload(sizes), limits[1], limits[0])
    assert [(b.first, b.last) for b in buckets] == expected
    assert sum(b.nbytes for b in buckets) == sum(sizes)
    # small_last (DDP_SET_LAST_BUCKET_CAP=1): PyTorch's assignment over the reversed order, reversed back.
    n = len(sizes)
    reverse = _torch_ranges(torch, sizes[::-1], limits)
    last = ddp_buckets(_workload(sizes), limits[1], limits[0], small_last=True)
    assert [(b.first, b.last) for b in last] == [(n - 1 - z, n - 1 - a) for a, z in reversed(reverse)]


def test_ready_is_the_last_gradients_ready_time():
    w = Workload(
        1.0, None, layers=[Layer("a", "600KiB", "1ms"), Layer("b", "600KiB", "2ms"), Layer("c", 4, "3ms")]
    )
    (b0, b1) = ddp_buckets(w)
    assert (b0.first, b0.last, b0.ready) == (0, 1, pytest.approx(3e-3, abs=1e-15))
    assert (b1.first, b1.last, b1.ready) == (2, 2, pytest.approx(6e-3, abs=1e-15))


# ----------------------------------------------------------------------------- a real DDP
def _real_ddp_buckets(torch, net, x, bucket_cap_mb):
    """Train ``net`` under DDP (1-process gloo group) and return what it saw and built.

    Returns the parameter names in the order their gradients became ready in
    the first backward pass (the order the reducer records for its rebuild),
    their sizes, the rebuilt buckets as lists of names (read from the reducer
    after two steps: the rebuild happens at the start of the second forward
    pass) and DDP's logging data after a third step (it reports the rebuilt
    sizes from then on).
    """
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    from torch.nn.parallel import DistributedDataParallel

    names = {id(p): n for n, p in net.named_parameters()}
    sizes = {n: p.numel() * p.element_size() for n, p in net.named_parameters()}
    ready: list[list[str]] = []
    for n, p in net.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=n: ready[-1].append(n))
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        kwargs = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
        ddp = DistributedDataParallel(net, **kwargs)
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        assert len(ddp.reducer._get_zeros_like_grad_buckets()) == 1  # 2.13: no bucketing before the rebuild
        for _ in range(2):
            ready.append([])
            opt.zero_grad()
            ddp(x).sum().backward()
            opt.step()
        rebuilt = [[names[id(p)] for p in b.parameters()] for b in ddp.reducer._get_zeros_like_grad_buckets()]
        ready.append([])
        opt.zero_grad()
        ddp(x).sum().backward()
        logged = ddp._get_ddp_logging_data()
        cap_bytes = ddp.bucket_bytes_cap
    finally:
        dist.destroy_process_group()
    assert ready[0] == ready[1] == ready[2]
    return ready[0], [sizes[n] for n in ready[0]], rebuilt, logged, cap_bytes


def _check_against_ddp(order, sizes, rebuilt, logged, buckets):
    assert [order[b.first : b.last + 1] for b in buckets] == rebuilt
    logged_sizes = [int(v) for v in logged["rebuilt_bucket_sizes"].split(",")]
    assert [b.nbytes for b in buckets] == [float(v) for v in logged_sizes]
    assert sum(logged_sizes) == sum(sizes)


def test_buckets_of_a_real_ddp_with_an_explicit_cap():
    """``bucket_cap_mb`` given: DDP's first bucket has the same cap (``first_bucket=None``)."""
    torch = pytest.importorskip("torch")
    from queuesgd.harness.models import resnet18s

    torch.manual_seed(0)
    net = resnet18s(classes=10, width=8)
    order, sizes, rebuilt, logged, cap = _real_ddp_buckets(torch, net, torch.randn(2, 3, 32, 32), 0.05)
    assert cap == int(0.05 * MiB) and len(rebuilt) >= 5
    # the ready order is not the reverse of the registration order (a batch norm's weight before its bias)
    assert order != [n for n, _ in net.named_parameters()][::-1]
    w = Workload(1.0, None, layers=[Layer(n.replace(".", "/"), s, 1e-3) for n, s in zip(order, sizes)])
    _check_against_ddp(order, sizes, rebuilt, logged, ddp_buckets(w, cap, None))
    # the 1 MiB first bucket would be wrong here: it swallows several of DDP's buckets
    assert len(ddp_buckets(w, cap, "1MiB")) < len(rebuilt)


def test_buckets_of_a_real_ddp_with_the_default_cap():
    """``bucket_cap_mb`` left at its default: 25 MiB buckets after a first one of 1 MiB."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10),
    )  # fmt: skip
    order, sizes, rebuilt, logged, cap = _real_ddp_buckets(torch, net, torch.randn(2, 256), None)
    assert cap == 25 * MiB and sum(sizes) > 50 * MiB
    w = Workload(1.0, None, layers=[Layer(n.replace(".", "/"), s, 1e-3) for n, s in zip(order, sizes)])
    buckets = ddp_buckets(w)  # the defaults: "25MiB", "1MiB"
    _check_against_ddp(order, sizes, rebuilt, logged, buckets)
    assert len(buckets) == 3
    assert buckets[0].nbytes >= MiB and buckets[0].nbytes - sizes[buckets[0].last] < MiB
    # with the first bucket at the cap, DDP would have built fewer, larger buckets
    assert [(b.first, b.last) for b in ddp_buckets(w, "25MiB", None)] != [(b.first, b.last) for b in buckets]


# ----------------------------------------------------------------------------- the fusion policy
#: Backward order: "a" (40 MB) ready 10 ms into the backward pass, "b" (1 MB) at 20 ms, "c" (4 MB) at 40 ms.
TOY = Workload(
    "50ms",
    None,
    layers=[Layer("a", 40e6, "10ms"), Layer("b", 1e6, "10ms"), Layer("c", 4e6, "20ms")],
    update_time="1ms",
    add_cost=CostCurve([0, 1e8], [0, 1e-3]),  # a vector addition of x bytes: x / 1e11 s
)
TWO = Cluster(2, "1GB/s")


def test_fine_model_with_ddp_buckets_by_hand():
    # limits [2 MB, 4 MB]: "a" closes the first bucket (40 MB >= 2 MB); "b" + "c" = 5 MB >= 4 MB the second.
    # The ring of 2 costs S/B + reduce(S/2): 40.2 ms and 5.025 ms. Forward 0-10 ms (50 ms - 40 ms of
    # backward); bucket 0 ready at 20 ms, on the network 20-60.2 ms; bucket 1 ready at 50 ms, waits for
    # the network (FIFO): 60.2-65.225 ms; the update: 1 ms.
    ring = RingAllReduce(fusion="ddp", bucket_cap=4e6, first_bucket=2e6)
    assert [(b.first, b.last, b.nbytes) for b in ring.buckets(TOY)] == [(0, 0, 40e6), (1, 2, 5e6)]
    p = predict(ring, TOY, TWO, method="fine")
    assert p.iteration_time == pytest.approx(0.066225, abs=1e-12)
    assert p.details["message_bytes"] == (40e6, 5e6)
    assert p.details["non_overlapped_communication"] == pytest.approx(0.015225, abs=1e-12)
    # the coarse road: 50 ms + max(5.025, 45.225 - 30) ms exposed + 1 ms -- the network never idles
    assert predict(ring, TOY, TWO, method="coarse").iteration_time == pytest.approx(0.066225, abs=1e-12)
    # a first bucket of 50 MB takes all 45 MB: ready at 50 ms, 45 ms + 0.225 ms of reduction, 1 ms update
    one = RingAllReduce(fusion="ddp", bucket_cap=4e6, first_bucket=50e6)
    assert [(b.first, b.last) for b in one.buckets(TOY)] == [(0, 2)]
    assert predict(one, TOY, TWO, method="fine").iteration_time == pytest.approx(0.096225, abs=1e-12)


@pytest.mark.parametrize("scheme", [RingAllReduce, TreeAllReduce, SyncPS])
@pytest.mark.parametrize("method", ["fine", "coarse"])
def test_ddp_policy_on_a_catalog_workload(scheme, method):
    w = load_workload("resnet50")
    s = scheme(fusion="ddp")
    expected = ddp_buckets(w, "25MiB", "1MiB")
    assert s.buckets(w) == expected and len(expected) > 2
    assert expected[0].nbytes >= MiB and all(b.nbytes >= 25 * MiB for b in expected[1:-1])
    p = predict(s, w, Cluster(8, "10Gbit/s"), method=method)
    assert p.method == method and p.iteration_time > w.compute_time
    assert p.details["messages"] == len(expected)


def test_threshold_policy_is_unchanged():
    w = load_workload("resnet50")
    assert RingAllReduce(fusion="threshold").buckets(w) == RingAllReduce().buckets(w)


@pytest.mark.parametrize(
    ("kwargs", "field", "accepted"),
    [
        ({"fusion": "nope"}, "RingAllReduce.fusion", "'threshold'"),
        ({"fusion": None}, "RingAllReduce.fusion", "'ddp'"),
        ({"fusion": "ddp", "bucket_cap": -1}, "RingAllReduce.bucket_cap", ">= 0"),
        ({"fusion": "ddp", "bucket_cap": "-25MiB"}, "RingAllReduce.bucket_cap", ">= 0"),
        ({"fusion": "ddp", "first_bucket": -1.0}, "RingAllReduce.first_bucket", ">= 0"),
        ({"bucket_cap": "10MiB"}, "RingAllReduce.bucket_cap", "fusion='ddp'"),
        ({"first_bucket": None}, "RingAllReduce.first_bucket", "fusion='ddp'"),
        ({"fusion": "ddp", "fusion_bytes": "32MiB"}, "RingAllReduce.fusion_bytes", "fusion='threshold'"),
        ({"fusion": "ddp", "fusion_time": None}, "RingAllReduce.fusion_time", "fusion='threshold'"),
    ],
)
def test_bad_values_name_the_field(kwargs, field, accepted):
    with pytest.raises(InvalidParameterError) as err:
        RingAllReduce(**kwargs)
    assert err.value.field == field and accepted in err.value.accepted


def test_bad_values_of_the_function():
    w = _workload([4, 8])
    with pytest.raises(InvalidParameterError, match="bucket_cap"):
        ddp_buckets(w, -1)
    with pytest.raises(InvalidParameterError, match="first_bucket"):
        ddp_buckets(w, "25MiB", "-1MiB")
    with pytest.raises(InvalidParameterError, match="limits"):
        assign_by_size([4, 8], [])
    with pytest.raises(InvalidParameterError, match="sizes"):
        assign_by_size([4, -8], [16])
