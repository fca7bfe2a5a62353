"""Real models for the live campaign and for profiling, built here (no torchvision, no downloads).

:func:`build` makes one by name (``"mlp"``, ``"cnn"``, ``"resnet18s"``) with
the shape of one input sample, so that the profiler, the live steps of the
parameter-server loops and the DDP loop train exactly the same network.

On these machines torchvision from the registry does not load beside the CPU
build of torch ("operator torchvision::nms does not exist"), so the campaign's
ResNet is written out: :func:`resnet18s`, a ResNet-18-style network for small
images (He et al., CVPR 2016; the CIFAR variant of section 4.2 with the
ImageNet model's four stages of two basic blocks): a 3x3 stem, stages of
``width, 2 width, 4 width, 8 width`` channels (stride 2 from the second on),
basic blocks of two 3x3 convolutions with batch normalization and an identity
or 1x1 projection shortcut, global average pooling and a linear classifier.
Random weights only.

Examples
--------
>>> import pytest; torch = pytest.importorskip("torch")
>>> net = resnet18s(classes=10, width=8)
>>> tuple(net(torch.zeros(2, 3, 32, 32)).shape)
(2, 10)
>>> sum(1 for _ in net.parameters())   # 20 conv weights (no bias), 20 batch norms x 2, the classifier's 2
62
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from queuesgd import _checks
from queuesgd.errors import InvalidParameterError, UnknownNameError
from queuesgd.harness._torch import require_torch
from queuesgd.profiler_factory import model_factory

__all__ = [
    "MODELS",
    "build",
    "check_model",
    "classes_of",
    "is_named",
    "build_seeded",
    "cnn",
    "encoder",
    "mlp",
    "parameter_count",
    "resnet18s",
    "seeded",
    "worker_batches",
]

T = TypeVar("T")

#: The harness's real models by name (:func:`build`).
MODELS = ("mlp", "cnn", "resnet18s", "encoder")

#: What a model may be called, for errors.
MODEL_NAMES = (
    f"a harness model ({', '.join(MODELS)}), or a named one: 'module.path:callable' (an nn.Module class or "
    "a factory marked @queuesgd.model_factory), 'torchvision:NAME' or 'queuesgd:KIND'"
)


def is_named(kind: Any) -> bool:
    """Whether ``kind`` names a model outside the harness's own (``"module:callable"`` and the like).

    Examples
    --------
    >>> is_named("mlp"), is_named("mypkg.models:Net"), is_named("torchvision:resnet18")
    (False, True, True)
    """
    return isinstance(kind, str) and ":" in kind


def check_model(kind: Any, field: str = "model") -> str:
    """``kind`` checked as a harness model or a named one; nothing is imported or built.

    A named model is ``"module.path:callable"``, ``"torchvision:NAME"`` or
    ``"queuesgd:KIND"`` (:func:`queuesgd.harness.model_build.build_model`
    builds it, with an ``input_shape`` and ``model_args``).

    Examples
    --------
    >>> check_model("cnn"), check_model("mypkg.models:Net")
    ('cnn', 'mypkg.models:Net')
    >>> check_model("mypkg.models:")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'mypkg.models:'; accepted: a harness model (mlp, ...
    >>> check_model("rnn")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: model: got 'rnn'; accepted: one of 'mlp', ..., 'module.path:callable'
    """
    if is_named(kind):
        module, _, attr = kind.partition(":")
        if module.strip() and attr.strip() and not any(c.isspace() for c in kind):
            return kind
        raise InvalidParameterError(field, kind, MODEL_NAMES)
    if not isinstance(kind, str):
        raise InvalidParameterError(field, kind, MODEL_NAMES)
    if kind not in MODELS:  # a harness model's name mistyped: the names, or a named model's form
        raise UnknownNameError(field, kind, [*MODELS, "module.path:callable"])
    return kind


def input_shape_of(value: Any, field: str = "input_shape") -> tuple[int, ...]:
    """One input sample's shape: one to eight integers >= 1 (a named model needs it).

    Examples
    --------
    >>> input_shape_of([3, 32, 32])
    (3, 32, 32)
    >>> input_shape_of(None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: input_shape: got None; accepted: one sample's shape, ...
    """
    accepted = "one sample's shape, a list of 1 to 8 integers >= 1 (e.g. [3, 32, 32]), for a named model"
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 8:
        raise InvalidParameterError(field, value, accepted)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 24 for v in value):
        raise InvalidParameterError(field, value, accepted)
    return tuple(int(v) for v in value)


@model_factory
def resnet18s(classes: int = 10, width: int = 16, in_channels: int = 3) -> Any:
    """A ResNet-18-style ``nn.Module`` for small images (e.g. 3x32x32), randomly initialized.

    Parameters
    ----------
    classes : int
        Outputs of the classifier.
    width : int
        Channels of the first stage (64 in the ImageNet ResNet-18; 16 keeps CPU steps short).
    in_channels : int
        Channels of the input images.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> sum(p.numel() for p in resnet18s(classes=10, width=64).parameters())   # CIFAR ResNet-18's count
    11173962
    """
    torch = require_torch()
    nn = torch.nn
    classes = _checks.integer("classes", classes)
    width = _checks.integer("width", width)
    in_channels = _checks.integer("in_channels", in_channels)

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x: Any) -> Any:
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + self.shortcut(x))

    layers: list[Any] = [
        nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
    ]
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for block in range(2):
            layers.append(BasicBlock(cin, cout, 2 if stage > 0 and block == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


@model_factory
def mlp(inputs: int = 784, hidden: int = 256, classes: int = 10) -> Any:
    """A multi-layer perceptron ``inputs -> hidden -> hidden -> classes`` with ReLUs.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> sum(p.numel() for p in mlp(32, 16, 4).parameters())   # (32*16 + 16) + (16*16 + 16) + (16*4 + 4)
    868
    """
    nn = require_torch().nn
    inputs, hidden, classes = (
        _checks.integer(f, v) for f, v in (("inputs", inputs), ("hidden", hidden), ("classes", classes))
    )
    return nn.Sequential(
        nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
    )


@model_factory
def cnn(image_side: int = 28, hidden: int = 256, classes: int = 10) -> Any:
    """A small CNN on single-channel images: two 3x3 convolutions with pooling, then ``hidden -> classes``.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> sum(p.numel() for p in cnn(28, 32, 10).parameters())
    26698
    """
    nn = require_torch().nn
    side = _checks.integer("image_side", image_side, minimum=4)
    hidden, classes = _checks.integer("hidden", hidden), _checks.integer("classes", classes)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * (side // 4) ** 2, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )


@model_factory
def encoder(width: int = 64, layers: int = 2, classes: int = 10, heads: int = 4) -> Any:
    """A transformer encoder classifier on sequences of ``width``-vectors (a model the harness was not
    developed on, for the DDP evidence of issue 21).

    ``layers`` post-norm ``nn.TransformerEncoderLayer`` blocks (``heads``
    heads, a 4x feed-forward, ReLU, no dropout), the mean over the sequence,
    then a linear classifier. Each block has ``12 width^2 + 13 width``
    parameters in 12 tensors.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> net = encoder(32, 2, 10)
    >>> tuple(net(torch.zeros(3, 5, 32)).shape), sum(p.numel() for p in net.parameters())
    ((3, 10), 25738)
    """
    torch = require_torch()
    nn = torch.nn
    width, layers = _checks.integer("width", width), _checks.integer("layers", layers)
    classes, heads = _checks.integer("classes", classes), _checks.integer("heads", heads)
    if width % heads:
        raise InvalidParameterError("width", width, f"a multiple of the {heads} attention heads")

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
            self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.head = nn.Linear(width, classes)

        def forward(self, x: Any) -> Any:
            return self.head(self.blocks(x).mean(dim=1))

    return Encoder()


def build(
    kind: str,
    *,
    classes: int = 10,
    hidden: int = 256,
    inputs: int = 784,
    image_side: int = 28,
    width: int = 16,
    layers: int = 2,
    seq: int = 16,
) -> tuple[Any, tuple[int, ...]]:
    """A harness model by name, and the shape of one input sample.

    ``"mlp"``: :func:`mlp` on ``(inputs,)``; ``"cnn"``: :func:`cnn` on
    ``(1, image_side, image_side)``; ``"resnet18s"``: :func:`resnet18s` of
    ``width`` on ``(3, 32, 32)`` images; ``"encoder"``: :func:`encoder` of
    ``width`` and ``layers`` on ``(seq, width)`` sequences. The caller seeds
    torch first for reproducible weights. (A named model as well:
    :func:`queuesgd.harness.model_build.build_model`.)

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> net, shape = build("resnet18s")
    >>> shape, sum(p.numel() for p in net.parameters())
    ((3, 32, 32), 701466)
    >>> build("rnn")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: model: got 'rnn'; accepted: one of 'mlp', 'cnn', 'resnet18s', 'encoder'
    """
    _checks.choice("model", kind, MODELS)
    if kind == "mlp":
        return mlp(inputs, hidden, classes), (int(inputs),)
    if kind == "cnn":
        return cnn(image_side, hidden, classes), (1, int(image_side), int(image_side))
    if kind == "encoder":
        return encoder(width, layers, classes), (_checks.integer("seq", seq), int(width))
    return resnet18s(classes, width), (3, 32, 32)


def build_seeded(kind: str, seed: int, model_options: Any = None) -> tuple[Any, tuple[int, ...]]:
    """:func:`build` with torch seeded by ``seed`` (the same initial parameters in every worker).

    The caller's global random state is left as it was (``torch.random.fork_rng``).

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> a, _ = build_seeded("mlp", 3, {"inputs": 4, "hidden": 2})
    >>> b, shape = build_seeded("mlp", 3, {"inputs": 4, "hidden": 2})
    >>> shape, all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    ((4,), True)
    """
    return seeded(seed, lambda: build(kind, **dict(model_options or {})))


def seeded(seed: int, make: Callable[[], T]) -> T:
    """``make()`` with torch seeded by ``seed``, the caller's global random state left as it was.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> seeded(1, lambda: torch.rand(2)).tolist() == seeded(1, lambda: torch.rand(2)).tolist()
    True
    """
    torch = require_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return make()


def classes_of(model_options: Mapping[str, Any] | None) -> int:
    """The classes of a model built with ``model_options``: labels ``0 .. classes - 1`` and its logits.

    ``model_options["classes"]``, or :func:`build`'s default (10) when it is
    not given, as for a named model (its ``classes`` option, the logits its
    ``model_args`` give).

    Examples
    --------
    >>> classes_of({"classes": 4, "hidden": 8}), classes_of(None), classes_of({"input_shape": [3]})
    (4, 10, 10)
    >>> import inspect; classes_of({}) == inspect.signature(build).parameters["classes"].default
    True
    """
    return int(dict(model_options or {}).get("classes", 10))


def worker_batches(
    seed: int,
    rank: int,
    batch_size: int,
    shape: tuple[int, ...],
    classes: int,
    count: int = 4,
    device: Any = None,
) -> list[tuple[Any, Any]]:
    """The synthetic mini-batches a worker of the live harness cycles through.

    ``count`` pairs of (random normal inputs of ``(batch_size, *shape)``,
    random labels in ``0 .. classes - 1``) from a generator seeded with
    ``seed * 7919 + rank``: every worker its own data, the same in every run.
    They are drawn on the CPU (the same numbers everywhere) and moved to
    ``device`` when one is given.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("torch")
    >>> x, y = worker_batches(0, 1, 4, (3,), 10)[0]
    >>> tuple(x.shape), tuple(y.shape)
    ((4, 3), (4,))
    """
    torch = require_torch()
    gen = torch.Generator().manual_seed(int(seed) * 7919 + int(rank))
    batches = [
        (
            torch.randn((batch_size, *shape), generator=gen),
            torch.randint(0, classes, (batch_size,), generator=gen),
        )
        for _ in range(count)
    ]
    if device is None:
        return batches
    return [(x.to(device), y.to(device)) for x, y in batches]


def parameter_count(
    kind: str,
    *,
    classes: int = 10,
    hidden: int = 256,
    inputs: int = 784,
    image_side: int = 28,
    width: int = 16,
    layers: int = 2,
    seq: int = 16,
) -> int:
    """Trainable parameters of :func:`build`'s model, counted from its layer shapes (no torch needed).

    Examples
    --------
    >>> parameter_count("mlp", hidden=16, inputs=32, classes=4)     # (32*16 + 16) + (16*16 + 16) + (16*4 + 4)
    868
    >>> parameter_count("resnet18s", width=64)                       # CIFAR ResNet-18's count
    11173962
    >>> parameter_count("encoder", width=32, layers=2)   # 2 x (12 x 32^2 + 13 x 32) + 32 x 10 + 10
    25738
    """
    _checks.choice("model", kind, MODELS)
    h, c = hidden, classes
    if kind == "encoder":  # attention in/out projections 4 w^2 + 4 w, feed-forward 8 w^2 + 5 w, 2 norms 4 w
        return layers * (12 * width**2 + 13 * width) + width * c + c
    if kind == "mlp":
        return (inputs * h + h) + (h * h + h) + (h * c + c)
    if kind == "cnn":
        conv = (1 * 8 * 9 + 8) + (8 * 16 * 9 + 16)
        return conv + (16 * (image_side // 4) ** 2 * h + h) + (h * c + c)
    total = 3 * width * 9 + 2 * width  # stem convolution (no bias) and its batch norm
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for _ in range(2):
            total += cin * cout * 9 + 2 * cout + cout * cout * 9 + 2 * cout
            if cin != cout:  # 1x1 projection shortcut and its batch norm
                total += cin * cout + 2 * cout
            cin = cout
    return total + cin * c + c
