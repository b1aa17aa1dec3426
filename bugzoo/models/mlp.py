"""``mlp``: a plain multilayer perceptron with dropout for the ``tabular`` dataset."""

from __future__ import annotations

from torch import Tensor, nn


class MLP(nn.Module):
    """``backbone`` (``depth`` hidden Linear-ReLU-Dropout blocks) followed by a linear ``head``."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 128, depth: int = 2,
                 dropout: float = 0.1):
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))
