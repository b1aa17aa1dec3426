"""Shared data containers: splits, the dataset bundle, batching and normalisation."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor


@dataclass
class Split:
    """One split of a dataset: inputs, integer labels and, for sequences, true lengths.

    ``pad_to``: sequence batches are padded to this fixed width (like a tokenizer's
    ``padding="max_length"``) instead of being trimmed to their longest row.
    """

    x: Tensor
    y: Tensor
    lengths: Tensor | None = None
    pad_to: int | None = None

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, index: Tensor) -> Split:
        lengths = None if self.lengths is None else self.lengths[index]
        return Split(self.x[index], self.y[index], lengths, self.pad_to)

    def inputs(self, index: Tensor | slice) -> tuple[Tensor, ...]:
        """The model inputs for some rows; sequences trimmed to the longest row or ``pad_to``."""
        x = self.x[index]
        if self.lengths is None:
            return (x,)
        lengths = self.lengths[index]
        return (x[:, : self.pad_to or int(lengths.max())], lengths)


@dataclass
class DataBundle:
    """A dataset with its three splits. ``holdout`` is never shown to the training loop."""

    name: str
    num_classes: int
    train: Split
    val: Split
    holdout: Split
    pad_id: int | None = None
    serve_pad_to: int | None = None  # serving pads every request batch to this fixed width
    vocab_size: int | None = None
    norm_dims: tuple[int, ...] | None = None  # dims to standardise over; None: raw tokens
    # next-token data: each row's labels are its tokens, and a model predicts every token from
    # the ones before it (``num_classes`` is then the vocabulary)
    next_token: bool = False
    info: dict = field(default_factory=dict)

    def with_splits(self, **splits: Split) -> DataBundle:
        return replace(self, **splits)


@dataclass
class Batch:
    """A training or evaluation batch: ``inputs`` go to the model, ``y`` to the loss."""

    inputs: tuple[Tensor, ...]
    y: Tensor

    def to(self, device: torch.device) -> Batch:
        return Batch(tuple(t.to(device) for t in self.inputs), self.y.to(device))


@dataclass
class WorkerInfo:
    """What ``torch.utils.data.get_worker_info()`` gives a worker process: its id, the number of
    workers, its seed (the epoch's base seed plus its id) and its own copy of the dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: Split


def reseed_dataset_generator(worker: WorkerInfo) -> None:
    """A ``worker_init_fn``: each worker reseeds the generator its copy of the dataset holds
    from its own seed (PyTorch reseeds torch's, ``random``'s and NumPy's global generators per
    worker, never one a dataset holds)."""
    generator = getattr(worker.dataset, "generator", None)
    if generator is not None:
        generator.manual_seed(worker.seed)


class BatchLoader:
    """Iterates over a split in batches; reshuffles every epoch from its own generator.

    Index-based batching keeps per-batch cost tiny (one gather), unlike per-sample collation.

    ``num_workers`` > 0 reads the batches as a ``DataLoader`` with that many non-persistent
    worker processes does, in this process: every epoch each worker starts from its own copy
    of the split (as fork or pickling gives it, any generator it holds included), torch's
    ``worker_init_fn`` runs on it with the worker's seed (the epoch's base seed, drawn from the
    loader's generator, plus the worker's id), and batch ``b`` is made by worker
    ``b % num_workers``, in order.
    """

    def __init__(self, split: Split, batch_size: int, shuffle: bool, seed: int = 0,
                 drop_last: bool = False, num_workers: int = 0,
                 worker_init_fn: Callable[[WorkerInfo], None] | None = None):
        self.split = split
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = torch.Generator().manual_seed(seed)
        self.num_workers = num_workers
        self.worker_init_fn = worker_init_fn

    def __len__(self) -> int:
        n = len(self.split)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def start_workers(self) -> list[Split]:
        """The epoch's workers' copies of the split, each after ``worker_init_fn`` ran in it."""
        base_seed = int(torch.empty((), dtype=torch.int64).random_(generator=self.generator))
        copies = []
        for worker_id in range(self.num_workers):
            worker = WorkerInfo(worker_id, self.num_workers, base_seed + worker_id,
                                copy.deepcopy(self.split))
            if self.worker_init_fn is not None:
                self.worker_init_fn(worker)
            copies.append(worker.dataset)
        return copies

    def __iter__(self) -> Iterator[Batch]:
        workers = self.start_workers() if self.num_workers else None
        n = len(self.split)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        for b, start in enumerate(range(0, n, self.batch_size)):
            index = order[start : start + self.batch_size]
            if self.drop_last and len(index) < self.batch_size:
                break
            split = workers[b % self.num_workers] if workers else self.split
            yield Batch(split.inputs(index), split.y[index])


def forever(loader: BatchLoader) -> Iterator[Batch]:
    """Cycle through a loader epoch after epoch."""
    while True:
        yield from loader


@dataclass(frozen=True)
class Normalization:
    """Per-feature (or per-channel) mean and std used to standardise inputs."""

    mean: Tensor
    std: Tensor

    def apply(self, split: Split) -> Split:
        return replace(split, x=(split.x - self.mean) / self.std)


def f_scores(x: Tensor, y: Tensor, num_classes: int) -> Tensor:
    """One-way ANOVA F statistic of each feature (column of ``x``) against the labels: the
    variance between class means over the variance within classes (scikit-learn's
    ``f_classif``)."""
    x = x.double()
    overall = x.mean(0)
    between = torch.zeros_like(overall)
    within = torch.zeros_like(overall)
    for c in range(num_classes):
        rows = x[y == c]
        if len(rows):
            mean = rows.mean(0)
            between += len(rows) * (mean - overall) ** 2
            within += ((rows - mean) ** 2).sum(0)
    present = int((torch.bincount(y, minlength=num_classes) > 0).sum())
    return (between / max(present - 1, 1)) / (within / max(len(x) - present, 1)).clamp_min(1e-12)


def fit_normalization(x: Tensor, reduce_dims: tuple[int, ...]) -> Normalization:
    """Mean and std of ``x`` over ``reduce_dims`` (kept for broadcasting)."""
    mean = x.mean(dim=reduce_dims, keepdim=True)
    std = x.std(dim=reduce_dims, keepdim=True).clamp_min(1e-6)
    return Normalization(mean.squeeze(0), std.squeeze(0))
