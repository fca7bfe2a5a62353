"""The what-if analysis of Zhang et al. (NetAI 2020): an independent replay and the paper's conclusions."""

from __future__ import annotations

import numpy as np
import pytest

from queuesgd import load_workload, whatif
from queuesgd.errors import InvalidParameterError, UnitError, UnknownNameError


def _replay(name: str, n: int, bits_per_s: float, compression: float) -> tuple[float, int]:
    """The paper's simulator as a plain event loop: fuse (5 ms / 64 MB), then FIFO all-reduces.

    Returns (overhead, messages): end of the last all-reduce minus the end of the backward pass.
    """
    w = load_workload(name)
    gaps = [layer.backward_time for layer in w.layers]
    sizes = [layer.gradient_bytes for layer in w.layers]
    messages, t, acc_t, acc_b = [], 0.0, 0.0, 0.0
    for g, s in zip(gaps, sizes):
        t += g
        acc_t += g
        acc_b += s
        if acc_t >= 0.005 or acc_b >= 64 * 1024 * 1024:  # 64 MiB, Horovod's fusion buffer
            messages.append((t, acc_b))
            acc_t, acc_b = 0.0, 0.0
    if acc_b > 0:
        messages.append((t, acc_b))
    free = 0.0
    for ready, size in messages:
        wire = (size * 8 * (n - 1) / n) / bits_per_s / compression
        add = (n - 1) * w.reduction_time(size / n)
        free = max(free, ready) + 2 * wire + add
    return max(free - t, 0.0), len(messages)


@pytest.mark.parametrize("name", ["resnet50", "resnet101", "vgg16"])
@pytest.mark.parametrize("n", [16, 64])
@pytest.mark.parametrize("gbps", [1, 10, 25, 100])
@pytest.mark.parametrize("comp", [1, 5])
def test_grid_matches_an_event_loop_replay(name, n, gbps, comp):
    r = whatif(name, workers=n, bandwidth=f"{gbps}Gbit/s", compression=comp)
    overhead, messages = _replay(name, n, gbps * 1e9, comp)
    t_batch = load_workload(name).compute_time
    assert r.messages == messages
    assert r.overhead == pytest.approx(overhead, rel=1e-9, abs=1e-12)
    assert r.scaling_factor == pytest.approx(t_batch / (t_batch + overhead), rel=1e-9)


def test_grid_shape_follows_list_arguments():
    r = whatif("resnet50", workers=[16, 32, 64], bandwidth=["1Gbit/s", "10Gbit/s"], compression=[1, 2, 5, 10])
    assert r.shape == (3, 2, 4) and r.axes == ("workers", "bandwidth", "compression")
    assert len(r) == 24
    single = whatif("resnet50", workers=32, bandwidth="10Gbit/s", compression=5)
    assert r.scaling_factor[1, 1, 2] == pytest.approx(single.scaling_factor, rel=1e-12)


@pytest.mark.parametrize("name", ["resnet50", "resnet101", "vgg16"])
def test_paper_conclusion_close_to_linear_at_100gbps_without_compression(name):
    """Zhang et al.: at full utilization of 100 Gbit/s no compression is needed (scaling close to 1)."""
    sf = whatif(name, workers=[16, 32, 64], bandwidth="100Gbit/s").scaling_factor
    assert np.all(sf >= 0.98)
    assert np.all(sf <= 1.0)


@pytest.mark.parametrize("name", ["resnet50", "resnet101"])
def test_paper_conclusion_2x_to_5x_compression_is_enough_at_10gbps(name):
    """Zhang et al.: at 10 Gbit/s, 2x to 5x gradient compression gives almost linear scale-out."""
    r = whatif(name, workers=[16, 32, 64], bandwidth="10Gbit/s", compression=[1, 2, 5])
    sf = r.scaling_factor  # (workers, compression)
    assert np.all(sf[:, 0] < 0.8)  # without compression 10 Gbit/s is the bottleneck
    assert np.all(sf[:, 2] >= 0.95)  # 5x: almost linear
    assert np.all(np.diff(sf, axis=1) > 0)  # more compression never hurts


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="compression"):
        whatif("resnet50", compression=0.5)
    with pytest.raises(InvalidParameterError, match="workers"):
        whatif("resnet50", workers=0)
    with pytest.raises(UnknownNameError, match="workload"):
        whatif("resnet5000")
    with pytest.raises(UnitError):
        whatif("resnet50", bandwidth="fast")
    with pytest.raises(InvalidParameterError, match="fusion_bytes"):
        whatif("resnet50", fusion_bytes=0)
    with pytest.raises(InvalidParameterError, match="workers"):
        whatif("resnet50", workers=[])
