"""The harness's real models: the closed-form parameter counts against torch's own count."""

from __future__ import annotations

import pytest

from queuesgd.errors import UnknownNameError
from queuesgd.harness import models

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("kind", "sizes"),
    [
        ("mlp", {"inputs": 32, "hidden": 16, "classes": 4}),
        ("mlp", {}),
        ("cnn", {"image_side": 28, "hidden": 32}),
        ("cnn", {"image_side": 13, "hidden": 8, "classes": 3}),
        ("resnet18s", {"width": 8}),
        ("resnet18s", {"width": 16, "classes": 100}),
        ("encoder", {"width": 32, "layers": 2, "seq": 5}),
        ("encoder", {"width": 384, "layers": 10, "seq": 16}),  # the held-out DDP campaign's: 17.7M
    ],
)
def test_parameter_count_matches_torch(kind, sizes):
    net, shape = models.build(kind, **sizes)
    assert models.parameter_count(kind, **sizes) == sum(p.numel() for p in net.parameters())
    out = net(torch.zeros(2, *shape))
    assert tuple(out.shape) == (2, sizes.get("classes", 10))


def test_live_real_model_trains_the_built_network():
    from queuesgd.harness.live import RealModel

    spec = RealModel("resnet18s", batch_size=2, width=4)
    step = spec.make(0, seed=0)
    assert step.compute() > 0
    assert step.nbytes == 4 * models.parameter_count("resnet18s", width=4) == spec.gradient_bytes


def test_encoder_sends_four_ddp_buckets():
    """The held-out campaign's encoder fills DDP's default buckets (1 MiB first, 25 MiB cap) four times."""
    from queuesgd.schemes.fine.ddp_buckets import ddp_buckets
    from queuesgd.workload import Layer, Workload

    net, _ = models.build("encoder", width=384, layers=10)
    # DDP's ready order, roughly: the parameters in reverse (the profile's measured order is used in the runs)
    layers = [Layer(n, 4 * p.numel(), 1e-4) for n, p in reversed(list(net.named_parameters()))]
    sizes = [b.nbytes for b in ddp_buckets(Workload(1.0, None, layers=layers))]
    assert len(sizes) == 4 and sum(sizes) == 4 * models.parameter_count("encoder", width=384, layers=10)


def test_unknown_model_is_refused():
    with pytest.raises(UnknownNameError, match="resnet18s"):
        models.build("vgg")
