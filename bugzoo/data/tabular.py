"""``tabular``: a seeded classification table whose features live on very different scales.

Each class is a mixture of two Gaussian clusters in a latent space; a random linear map and a
per-feature scale spanning six orders of magnitude turn it into raw features. Without
standardisation the large features swamp the small ones. ``noise_features`` appends columns of
pure noise (a wide table where feature selection is part of the pipeline).
"""

from __future__ import annotations

import torch

from bugzoo.data.base import DataBundle, Split


def make_tabular(seed: int = 0, n_train: int = 4000, n_val: int = 1000, n_holdout: int = 1000,
                 num_classes: int = 6, num_features: int = 16, latent_dim: int = 8,
                 noise: float = 0.9, noise_features: int = 0) -> DataBundle:
    g = torch.Generator().manual_seed(seed)
    n = n_train + n_val + n_holdout
    centers = torch.randn(num_classes, 2, latent_dim, generator=g) * 1.6
    y = torch.randint(num_classes, (n,), generator=g)
    cluster = torch.randint(2, (n,), generator=g)
    latent = centers[y, cluster] + noise * torch.randn(n, latent_dim, generator=g)
    mixing = torch.randn(latent_dim, num_features, generator=g) / latent_dim**0.5
    scales = 10.0 ** torch.empty(num_features).uniform_(-2, 3, generator=g)
    offsets = torch.randn(num_features, generator=g) * scales * 3
    x = (latent @ mixing) * scales + offsets
    if noise_features:
        x = torch.cat([x, torch.randn(n, noise_features, generator=g)], dim=1)
    cut1, cut2 = n_train, n_train + n_val
    return DataBundle(
        name="tabular",
        num_classes=num_classes,
        train=Split(x[:cut1], y[:cut1]),
        val=Split(x[cut1:cut2], y[cut1:cut2]),
        holdout=Split(x[cut2:], y[cut2:]),
        norm_dims=(0,),
        info={"num_features": num_features + noise_features},
    )
