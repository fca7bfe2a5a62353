"""One default optimizer for the profile and the live harness (``queuesgd.training_optimizer``).

The a-priori predictions price a live run's optimizer step with the profile's, so the profile's default
and every live training loop must build the same optimizer. The values are the documented ones
(``queuesgd.profile``'s docstring: "SGD (lr 0.01, momentum 0.9) if None"), written out here rather than
read from the module; the source scan keeps a second definition from coming back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "queuesgd"


def test_the_profile_default_is_sgd_with_momentum() -> None:
    torch = pytest.importorskip("torch")
    from queuesgd.profiler_step import training_step

    step = training_step(
        torch.nn.Linear(3, 2),
        batch_size=4,
        input_shape=(3,),
        inputs=None,
        loss=None,
        autocast=None,
        accumulation=1,
        device="cpu",
        optimizer=None,
        seed=0,
    )
    assert type(step.opt) is torch.optim.SGD
    assert (step.opt.defaults["lr"], step.opt.defaults["momentum"]) == (0.01, 0.9)


def test_only_training_optimizer_builds_the_default_sgd() -> None:
    """Another SGD (a doctest's own) is fine; the default's lr or momentum written again is not."""
    pattern = re.compile(r"optim\.SGD\([^)]*(lr=0\.01|momentum=0\.9)")
    found = sorted(
        p.relative_to(ROOT.parent).as_posix()
        for p in ROOT.rglob("*.py")
        if pattern.search(p.read_text()) and p.name != "training_optimizer.py"
    )
    assert not found, f"the default SGD built outside queuesgd/training_optimizer.py: {found}"
