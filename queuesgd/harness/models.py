"""Real models for the live campaign and for profiling, built here (no torchvision, no downloads).

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

from typing import Any

from queuesgd import _checks
from queuesgd.harness._torch import require_torch

__all__ = ["resnet18s"]


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
