"""Random training augmentation, drawn from a generator the training set holds.

``data.augment`` (off by default) names the transform: a random horizontal flip, a random crop
of the image padded by ``crop_padding`` zeros, and additive Gaussian noise, each drawn per
example. The draws come from the training set's own ``generator``, as a ``Dataset`` that
creates ``self.rng = np.random.default_rng(seed)`` in ``__init__`` draws from its own: with
worker processes (``harness.num_workers``) each worker reads a copy of the set, generator
included, and the loader's ``worker_init_fn`` must reseed it (:mod:`bugzoo.data.base`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn

from bugzoo.data.base import Split


@dataclass(frozen=True)
class Augmentation:
    """The transform: ``flip`` and ``crop_padding`` apply to images (N, C, H, W), ``noise`` (the
    standard deviation, in standardised units) to any float input."""

    flip: bool = False
    crop_padding: int = 0
    noise: float = 0.0

    def __call__(self, x: Tensor, g: torch.Generator) -> Tensor:
        """``x`` transformed example by example, every draw from ``g``."""
        out = torch.empty_like(x)
        image = x.dim() == 4
        pad = self.crop_padding if image else 0
        padded = nn.functional.pad(x, (pad,) * 4) if pad else x
        for i in range(len(x)):
            example = padded[i]
            if image and self.flip and bool(torch.rand(1, generator=g) < 0.5):
                example = example.flip(-1)
            if pad:
                top, left = torch.randint(0, 2 * pad + 1, (2,), generator=g).tolist()
                example = example[:, top:top + x.shape[-2], left:left + x.shape[-1]]
            out[i] = example
            if self.noise:
                out[i] += self.noise * torch.randn(example.shape, generator=g)
        return out


@dataclass
class AugmentedSplit(Split):
    """A training split read through ``augmentation``, drawn from the split's own
    ``generator``."""

    augmentation: Augmentation | None = None
    generator: torch.Generator | None = None

    @classmethod
    def of(cls, split: Split, augmentation: Augmentation, seed: int) -> AugmentedSplit:
        """``split`` augmented, with a generator of its own seeded with ``seed``."""
        plain = {f.name: getattr(split, f.name) for f in fields(Split)}
        return cls(**plain, augmentation=augmentation,
                   generator=torch.Generator().manual_seed(seed))

    def inputs(self, index: Tensor | slice) -> tuple[Tensor, ...]:
        x, *rest = Split.inputs(self, index)
        return (self.augmentation(x, self.generator), *rest)
