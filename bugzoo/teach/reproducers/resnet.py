"""The ResNet reproducer: synthetic striped and checkered pictures on a raw pixel scale, a
two-block residual network with batch norm that standardises its input with the training split's
statistics, AdamW with warm-up."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from bugzoo.bugs import Delta
from bugzoo.teach.reproducers._shared import CLIP1, HEADER, LOOP, OPTIMIZER

DEFAULTS: dict[str, object] = {"STEPS": 200, "LR": 3e-3, "N_TRAIN": 2000, "N_VAL": 500,
                               "NOISE": 1.0}

TEMPLATE = HEADER + '''
torch.manual_seed(0)
STEPS, BATCH, LR, EVAL_EVERY, SIZE, CLASSES = ${STEPS}, 32, ${LR}, 50, 16, 4
cast = 60 + 120 * torch.rand(1, 3, 1, 1)  # the camera's colour cast, on a raw 0-255-like scale
rows, cols = torch.meshgrid(torch.arange(float(SIZE)), torch.arange(float(SIZE)), indexing="ij")


def make_split(n):
    """Horizontal, vertical or diagonal stripes, or a checkerboard, in random colours."""
    y = torch.randint(0, CLASSES, (n,))
    period, phase = 3 + 3 * torch.rand(n, 1, 1), 2 * math.pi * torch.rand(n, 1, 1)
    wave = lambda t: torch.sin(2 * math.pi * t / period + phase)  # noqa: E731
    kinds = torch.stack([wave(rows), wave(cols), wave((rows + cols) / math.sqrt(2)),
                         wave(rows) * wave(cols).sign()], 1)
    colour = 0.3 + 0.7 * torch.rand(n, 3, 1, 1)
    x = colour * kinds[torch.arange(n), y][:, None] + ${NOISE} * torch.randn(n, 3, SIZE, SIZE)
    return x * 40 + cast, y


train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)
mean, std = train[0].mean((0, 2, 3), keepdim=True), train[0].std((0, 2, 3), keepdim=True)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.skip = (nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self, mean, std, widths=(16, 32)):
        super().__init__()
        self.register_buffer("mean", mean)  # the input's standardisation travels with the model
        self.register_buffer("std", std)
        self.backbone = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(),
            Block(widths[0], widths[0], 1), Block(widths[0], widths[1], 2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(widths[1], CLASSES)

    def forward(self, x):
        return self.head(self.backbone((x - self.mean) / self.std))


model = ResNet(mean, std)
''' + OPTIMIZER + LOOP

# Healthy variants of the fixed script, named after the clean scenarios they mirror
# (scenarios/resnet-clean-<name>.yaml)
BATCH_LINE = "STEPS, BATCH, LR, EVAL_EVERY, SIZE, CLASSES = ${STEPS}, 32,"
HEALTHY: dict[str, Delta] = {
    "batch128": Delta(((BATCH_LINE, BATCH_LINE.replace("32", "128")),)),
    "clip1": CLIP1,
    "lr_x0p3": Delta((), {"LR": 1e-3}),
    "narrow": Delta((("model = ResNet(mean, std)", "model = ResNet(mean, std, (8, 16))"),)),
    "wide": Delta((("model = ResNet(mean, std)", "model = ResNet(mean, std, (32, 64))"),)),
}

# The task's view of the template (bugzoo.teach.tasks): see the mlp's. The model standardises its
# own input, so the grader hands it raw pictures.
DESCRIPTION = ("a small residual network that sorts 16x16 colour pictures into 4 kinds: "
               "horizontal, vertical or diagonal stripes, or a checkerboard")
SOURCE, CLASSES, SIZE = "cast", 4, 16


def data_source(seed: int, settings: dict) -> Tensor:
    """The colour cast a script seeded ``seed`` draws first (``cast`` in the template)."""
    return 60 + 120 * torch.rand(1, 3, 1, 1, generator=torch.Generator().manual_seed(seed))


def fresh_split(cast: Tensor, n: int, seed: int, settings: dict) -> tuple[tuple[Tensor], Tensor]:
    """``n`` new raw pictures drawn as the template's ``make_split`` draws them, from a generator
    seeded ``seed``: the model's input and the labels."""
    g = torch.Generator().manual_seed(seed)
    rows, cols = torch.meshgrid(torch.arange(float(SIZE)), torch.arange(float(SIZE)),
                                indexing="ij")
    y = torch.randint(0, CLASSES, (n,), generator=g)
    period = 3 + 3 * torch.rand(n, 1, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, 1, generator=g)

    def wave(t: Tensor) -> Tensor:
        return torch.sin(2 * math.pi * t / period + phase)

    kinds = torch.stack([wave(rows), wave(cols), wave((rows + cols) / math.sqrt(2)),
                         wave(rows) * wave(cols).sign()], 1)
    colour = 0.3 + 0.7 * torch.rand(n, 3, 1, 1, generator=g)
    noise = float(settings["NOISE"]) * torch.randn(n, 3, SIZE, SIZE, generator=g)
    x = colour * kinds[torch.arange(n), y][:, None] + noise
    return (x * 40 + cast,), y
