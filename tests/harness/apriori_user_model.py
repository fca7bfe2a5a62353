"""A user's own model, importable by name (``apriori_user_model:TinyNet``), for the a-priori CLI test.

Nothing in the harness knows it: the campaign builds it from its name, as a user's ``module:callable``.
"""

from __future__ import annotations

from torch import nn


class TinyNet(nn.Module):
    """``inputs -> hidden -> classes`` with a ReLU: two weight tensors and two biases."""

    def __init__(self, inputs: int = 16, hidden: int = 8, classes: int = 4) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):  # noqa: ANN001, ANN201 - a user's model, as users write them
        return self.body(x)
