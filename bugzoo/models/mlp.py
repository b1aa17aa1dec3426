"""``mlp``: a plain multilayer perceptron with dropout for the ``tabular`` dataset."""

from __future__ import annotations

from torch import Tensor, nn

from bugzoo.data import DataBundle
from bugzoo.models import ModelSpec


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


def build(data: DataBundle, spectral_norm: bool = False, **params) -> nn.Module:
    """The MLP; ``spectral_norm`` wraps each hidden Linear layer in spectral normalisation
    (``torch.nn.utils.parametrizations.spectral_norm``; the head stays as it is)."""
    model = MLP(data.train.x.shape[1], data.num_classes, **params)
    if spectral_norm:
        for layer in model.backbone:
            if isinstance(layer, nn.Linear):
                nn.utils.parametrizations.spectral_norm(layer)
    return model


SPEC = ModelSpec(
    name="mlp", dataset="tabular", description="multilayer perceptron with dropout", build=build,
    params={"hidden": 128, "depth": 2, "dropout": 0.1, "spectral_norm": False},
    run_cost_s=1.3,
)
