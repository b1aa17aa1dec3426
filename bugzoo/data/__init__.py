"""Seeded offline datasets, each with train / val / holdout splits."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from bugzoo.data.base import Batch, BatchLoader, DataBundle, Normalization, Split
from bugzoo.data.images import make_images
from bugzoo.data.language import make_language
from bugzoo.data.reviews import make_reviews
from bugzoo.data.tabular import make_tabular

DATASETS: dict[str, Callable[..., DataBundle]] = {
    "tabular": make_tabular,
    "reviews": make_reviews,
    "images": make_images,
    "language": make_language,  # for the causal language model
}


@lru_cache(maxsize=8)
def _cached(name: str, items: tuple) -> DataBundle:
    return DATASETS[name](**dict(items))


def load_dataset(name: str, **params) -> DataBundle:
    """Generate (or reuse, within this process) the named dataset.

    Callers must treat the returned tensors as read-only; bugs that alter data build new splits.
    """
    if name not in DATASETS:
        raise KeyError(name)
    return _cached(name, tuple(sorted(params.items())))


__all__ = ["DATASETS", "Batch", "BatchLoader", "DataBundle", "Normalization", "Split",
           "load_dataset"]
