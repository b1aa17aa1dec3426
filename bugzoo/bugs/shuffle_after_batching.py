"""shuffle_after_batching: the training rows, stored grouped by class, are cut into batches in
storage order and only the order of the batches is shuffled, so each batch holds one class."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import Batch, BatchLoader


class PrebatchedLoader(BatchLoader):
    """Batches cut once, in the order the rows are stored; each epoch shuffles the list of
    batches (``dataset.batch(32).shuffle(...)``), never the rows inside them."""

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.split)
        batches = torch.arange(n).split(self.batch_size)
        if self.drop_last and n % self.batch_size:
            batches = batches[:-1]
        for b in torch.randperm(len(batches), generator=self.generator).tolist():
            yield Batch(self.split.inputs(batches[b]), self.split.y[batches[b]])


# Like a patch's replacement (bugzoo.bugs.base.Patch), the loader does not name the module it
# was planted from: it passes for a loader of the data package.
PrebatchedLoader.__module__ = BatchLoader.__module__


def batches_shuffled(self) -> BatchLoader:
    # The mistake: the training rows come grouped by class (exported class by class) and the
    # pipeline batches first and shuffles second: it shuffles whole batches, each of which
    # holds the rows of one class.
    rows = self.data.train.subset(self.data.train.y.argsort(stable=True))
    return PrebatchedLoader(rows, self.cfg.harness.batch_size, shuffle=True, seed=self.seed,
                            drop_last=True)


class ShuffleAfterBatching(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_train_loader", batches_shuffled)


BUG = ShuffleAfterBatching(
    id="shuffle_after_batching",
    title="Batches shuffled instead of rows: one class per batch",
    category="data",
    taxonomy={
        "H.api.shuffle_position": "literal",
        "H.training.preproc_missing.shuffling":
            "partial: there is a shuffle, in the wrong place: the rows are never shuffled",
        "J.CPP": "partial: one ordering step; most faults of the type are label encoding and "
                 "reshaping",
    },
    honours_onset=False,
    since="1.1",
    symptom=("the training loss jumps up and down from one step to the next instead of falling "
             "smoothly, and validation accuracy ends below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Shuffling is meant to make every batch a random sample of the data. Cutting "
                 "batches first and shuffling them afterwards (tf.data's batch().shuffle(), or "
                 "a list of pre-cut batches handed to a shuffling loader) only reorders the "
                 "batches: on data stored class by class every batch still holds a single "
                 "class. Each step pushes the model towards whichever class came up, the "
                 "gradient's noise is far larger than a random batch's, and BatchNorm sees "
                 "single-class statistics. Shuffle the rows, then batch."),
    buggy="""\
x, y = load_export()                                 # rows grouped by class
batches = list(zip(x.split(32), y.split(32)))        # cut in storage order
loader = DataLoader(batches, batch_size=None, shuffle=True)   # shuffles whole batches""",
    fixed="""\
x, y = load_export()                                 # rows grouped by class
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)   # shuffles rows""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("batches shuffled while rows stay grouped by class: a language model's"
                          " data has no class to group by")},
    reproducers={"mlp": Delta(
        patch=(
            ("\n\nclass MLP(nn.Module):",
             "by_label = y_train.argsort(stable=True)   # data exported class by class\n"
             "x_train, y_train = x_train[by_label], y_train[by_label]\n"
             "\n\nclass MLP(nn.Module):"),
            ("    order = torch.randperm(len(x_train))\n",
             "    batches = torch.arange(len(x_train)).split(BATCH)[:len(x_train) // BATCH]\n"
             "    order = torch.cat([batches[j] for j in torch.randperm(len(batches))])\n"),
        ),
        # blobs closer together: on the default, well separated blobs both scripts end near
        # 99% and the move is a few rows of the validation set. Single-class batches swing the
        # gradient from class to class and slow learning down: a short budget (100 steps, 1.6
        # epochs) ends before the buggy run catches up; a larger validation split measures the
        # accuracy finer than the gap
        settings={"SPREAD": 1.0, "STEPS": 100, "N_VAL": 5000},
    ), "resnet": Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "by_label = train[-1].argsort(stable=True)   # data exported class by class\n"
             "train = tuple(t[by_label] for t in train)\n"),
            ("    order = torch.randperm(len(train[-1]))\n",
             "    batches = torch.arange(len(train[-1])).split(BATCH)[:len(train[-1]) // BATCH]\n"
             "    order = torch.cat([batches[j] for j in torch.randperm(len(batches))])\n"),
        ),
    )},
)
