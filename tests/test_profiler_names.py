"""queuesgd.profiler.resolve_model's names: 'torchvision:NAME' and 'queuesgd:KIND'."""

from __future__ import annotations

import sys
import types

import pytest

from queuesgd.errors import InvalidParameterError
from queuesgd.profiler import resolve_model

torch = pytest.importorskip("torch")


def _fake_torchvision(monkeypatch, get_model):
    pkg = types.ModuleType("torchvision")
    models = types.ModuleType("torchvision.models")
    models.get_model = get_model
    pkg.models = models
    monkeypatch.setitem(sys.modules, "torchvision", pkg)
    monkeypatch.setitem(sys.modules, "torchvision.models", models)


def test_torchvision_name_builds_the_model_with_random_weights(monkeypatch):
    calls = []

    def get_model(name, **kwargs):
        calls.append((name, kwargs))
        return torch.nn.Linear(3, 2)

    _fake_torchvision(monkeypatch, get_model)
    net = resolve_model("torchvision:resnet18")
    assert isinstance(net, torch.nn.Linear)
    assert calls == [("resnet18", {"weights": None})]  # nothing to download


def test_torchvision_unknown_name_and_a_torchvision_that_does_not_load(monkeypatch):
    def get_model(name, **kwargs):
        raise ValueError(f"Unknown model {name}")

    _fake_torchvision(monkeypatch, get_model)
    with pytest.raises(InvalidParameterError, match="list_models"):
        resolve_model("torchvision:nonet")
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision raises ImportError
    monkeypatch.delitem(sys.modules, "torchvision.models")
    with pytest.raises(InvalidParameterError, match=r"torchvision loads.*queuesgd:resnet18s"):
        resolve_model("torchvision:resnet18")


def test_queuesgd_name_is_the_harness_model():
    from queuesgd.harness.models import parameter_count

    net = resolve_model("queuesgd:resnet18s")
    assert sum(p.numel() for p in net.parameters()) == parameter_count("resnet18s") == 701_466
