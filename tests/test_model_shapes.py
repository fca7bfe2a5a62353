"""TransformerShape against published counts and formulas (independent sources)."""

from __future__ import annotations

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.model_shapes import GPT3_XL, TransformerShape


def test_gpt3_xl_has_the_published_size():
    # Brown et al. (2020), Table 2.1 calls it "1.3B"; GPT-2 XL-like shapes give 1.3157e9 with a tied head.
    assert 1.30e9 < GPT3_XL.parameters < 1.32e9
    # Narayanan et al. (SC 2021), eq. 2's parameter count: 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)),
    # which omits only the final layer norm (2h).
    l, h, V, s = 24, 2048, 50257, 2048
    megatron = 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    assert GPT3_XL.parameters - 2 * h == pytest.approx(megatron, rel=1e-12)


@pytest.mark.parametrize("b", [1, 4])
def test_iteration_flops_are_megatrons_without_recomputation(b):
    # Narayanan et al. eq. 3 is 96 b s l h^2 (1 + s/6h + V/16lh) WITH recomputation (4 passes of the
    # forward); without it, 3 passes: 72 b s l h^2 (1 + s/6h + V/12lh).
    s, l, h, V = 2048, 24, 2048, 50257
    assert GPT3_XL.iteration_flops(b) == pytest.approx(
        72 * b * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    )


def test_workload_times_and_sizes_by_hand():
    t = TransformerShape(layers=2, hidden=8, heads=2, sequence=4, vocabulary=10)
    w = t.workload(1, flops=1000.0, dtype_bytes=4, memory_bandwidth=100.0, update_bytes_per_parameter=2)
    # block: 24*4*64 + 4*16*8 = 6656 FLOPs forward -> 6.656 s; logits 2*4*8*10 = 640 -> 0.64 s
    names = [layer.name for layer in w.layers]
    assert names == ["final_norm", "block1", "block0", "embedding"]
    assert [layer.forward_time for layer in w.layers] == pytest.approx([0.64, 6.656, 6.656, 0.0])
    assert [layer.backward_time for layer in w.layers] == pytest.approx([1.28, 13.312, 13.312, 0.0])
    # parameters: blocks 12*64 + 13*8 = 872 each; embeddings (10 + 4) * 8 = 112; final norm 16 -> 1872
    assert [layer.gradient_bytes for layer in w.layers] == [64.0, 3488.0, 3488.0, 448.0]
    assert w.gradient_bytes == 1872 * 4
    assert w.compute_time == pytest.approx(3 * (2 * 6.656 + 0.64))
    assert w.update_time == pytest.approx(1872 * 2 / 100.0)
    # Korthikanti et al. eq. 2: s b h (34 + 5 a s / h) per layer = 4*8*(34 + 5) = 1248; two layers
    assert t.activation_bytes(1) == 2 * 1248
    assert t.boundary_bytes(3) == 3 * 4 * 8 * 2


def test_bad_shapes_are_refused():
    with pytest.raises(InvalidParameterError, match="TransformerShape.heads"):
        TransformerShape(layers=2, hidden=10, heads=3, sequence=4, vocabulary=10)
    with pytest.raises(InvalidParameterError, match="TransformerShape.layers"):
        TransformerShape(layers=0, hidden=8, heads=2, sequence=4, vocabulary=10)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layers": 2.7}, "TransformerShape.layers"),
        ({"layers": 10**7}, "TransformerShape.layers"),  # one Layer per block: bounded before building
        ({"hidden": 2**40}, "TransformerShape.hidden"),
        ({"sequence": "2048"}, "TransformerShape.sequence"),
        ({"name": 5}, "TransformerShape.name"),
        ({"name": ""}, "TransformerShape.name"),
    ],
)
def test_shape_fields_are_checked_by_name(kwargs, field):
    shape = {"layers": 2, "hidden": 8, "heads": 2, "sequence": 4, "vocabulary": 10, **kwargs}
    with pytest.raises(InvalidParameterError) as err:
        TransformerShape(**shape)
    assert str(err.value).startswith(f"{field}:")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda t: t.workload(1, memory_bandwidth=0), "memory_bandwidth"),
        (lambda t: t.workload(1, update_bytes_per_parameter=-1), "update_bytes_per_parameter"),
        (lambda t: t.workload(1, update_bytes_per_parameter="x"), "update_bytes_per_parameter"),
        (lambda t: t.workload(2.5), "microbatch"),
        (lambda t: t.workload(2**60), "microbatch"),
        (lambda t: t.activation_bytes(10**400), "microbatch"),
        (lambda t: t.boundary_bytes(1, dtype_bytes=1.5), "dtype_bytes"),
    ],
)
def test_workload_arguments_are_checked_by_name(call, field):
    with pytest.raises(InvalidParameterError) as err:
        call(TransformerShape(layers=2, hidden=8, heads=2, sequence=4, vocabulary=10))
    assert str(err.value).startswith(f"{field}:")
