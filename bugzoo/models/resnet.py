"""``resnet``: a small residual network with BatchNorm for the ``images`` dataset."""

from __future__ import annotations

from torch import Tensor, nn

from bugzoo.data import DataBundle
from bugzoo.models import ModelSpec


class ResidualBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    """Stem conv, residual stages of widths ``widths`` (stride 2 after the first), pooling, head."""

    def __init__(self, num_classes: int, in_channels: int = 3, widths: tuple[int, ...] = (16, 32)):
        super().__init__()
        stages: list[nn.Module] = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False),
                                   nn.BatchNorm2d(widths[0]), nn.ReLU()]
        cin = widths[0]
        for i, width in enumerate(widths):
            stages.append(ResidualBlock(cin, width, stride=1 if i == 0 else 2))
            cin = width
        stages += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.backbone = nn.Sequential(*stages)
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))


def build(data: DataBundle, spectral_norm: bool = False, **params) -> nn.Module:
    """The ResNet; ``spectral_norm`` wraps each convolution of the backbone in spectral
    normalisation (``torch.nn.utils.parametrizations.spectral_norm``; the head stays as it is)."""
    model = ResNet(data.num_classes, data.train.x.shape[1], **params)
    if spectral_norm:
        for layer in list(model.backbone.modules()):
            if isinstance(layer, nn.Conv2d):
                nn.utils.parametrizations.spectral_norm(layer)
    return model


SPEC = ModelSpec(
    name="resnet", dataset="images", description="small residual network with BatchNorm", build=build,
    params={"widths": [16, 32], "spectral_norm": False},
    run_cost_s=8.8,
)
