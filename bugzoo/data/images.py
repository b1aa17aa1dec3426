"""``images``: small synthetic pictures (3x16x16) whose class is a spatial pattern.

Classes are horizontal stripes, vertical stripes, diagonal stripes, a checkerboard, a ring and
a cross, drawn with random frequency, phase, position and colours plus noise. Pixels are on a
0-255-like scale with per-channel offsets, far from mean 0 / std 1.
"""

from __future__ import annotations

import math

import torch

from bugzoo.data.base import DataBundle, Split

CLASSES = ("horizontal", "vertical", "diagonal", "checker", "ring", "cross")


def _pattern(kind: int, size: int, g: torch.Generator) -> torch.Tensor:
    coords = torch.arange(size, dtype=torch.float32)
    r, c = torch.meshgrid(coords, coords, indexing="ij")
    period = float(torch.empty(1).uniform_(3.0, 6.0, generator=g))
    phase = float(torch.empty(1).uniform_(0, 2 * math.pi, generator=g))
    wave = lambda t: torch.sin(2 * math.pi * t / period + phase)  # noqa: E731
    if kind == 0:
        return wave(r)
    if kind == 1:
        return wave(c)
    if kind == 2:
        return wave((r + c) / math.sqrt(2))
    if kind == 3:
        return wave(r) * wave(c).sign()
    cy, cx = (torch.empty(2).uniform_(5, size - 5, generator=g)).tolist()
    if kind == 4:
        radius = float(torch.empty(1).uniform_(2.5, 5.0, generator=g))
        dist = ((r - cy) ** 2 + (c - cx) ** 2).sqrt()
        return 2 * torch.exp(-((dist - radius) ** 2) / 1.5) - 1
    width = float(torch.empty(1).uniform_(0.8, 1.6, generator=g))
    bar = torch.maximum(torch.exp(-((r - cy) ** 2) / width), torch.exp(-((c - cx) ** 2) / width))
    return 2 * bar - 1


def make_images(seed: int = 0, n_train: int = 4000, n_val: int = 1000, n_holdout: int = 1000,
                size: int = 16, noise: float = 1.0) -> DataBundle:
    g = torch.Generator().manual_seed(seed)
    n = n_train + n_val + n_holdout
    y = torch.randint(len(CLASSES), (n,), generator=g)
    x = torch.empty(n, 3, size, size)
    for i in range(n):
        pattern = _pattern(int(y[i]), size, g)
        colour = torch.empty(3, 1, 1).uniform_(0.3, 1.0, generator=g)
        x[i] = colour * pattern
    x += noise * torch.randn(x.shape, generator=g)
    channel_offset = torch.tensor([120.0, 90.0, 60.0]).view(1, 3, 1, 1)
    channel_scale = torch.tensor([40.0, 25.0, 60.0]).view(1, 3, 1, 1)
    x = x * channel_scale + channel_offset
    cut1, cut2 = n_train, n_train + n_val
    return DataBundle(
        name="images",
        num_classes=len(CLASSES),
        train=Split(x[:cut1], y[:cut1]),
        val=Split(x[cut1:cut2], y[cut1:cut2]),
        holdout=Split(x[cut2:], y[cut2:]),
        norm_dims=(0, 2, 3),
        info={"classes": CLASSES},
    )
