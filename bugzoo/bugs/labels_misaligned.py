"""labels_misaligned: the training labels are shuffled separately from the inputs."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.data.base import Split


def shuffle_separately(trainer, data: DataBundle) -> DataBundle:
    g = torch.Generator().manual_seed(trainer.cfg.data.seed)
    train = data.train
    # The mistake: inputs and labels are permuted with two different permutations.
    x_order = torch.randperm(len(train), generator=g)
    y_order = torch.randperm(len(train), generator=g)
    lengths = None if train.lengths is None else train.lengths[x_order]
    return data.with_splits(train=Split(train.x[x_order], train.y[y_order], lengths))


class LabelsMisaligned(Bug):
    def before_build(self, trainer) -> None:
        load = trainer.load_data
        patch_method(trainer, "load_data", lambda self: shuffle_separately(self, load()))


BUG = LabelsMisaligned(
    id="labels_misaligned",
    title="Labels shuffled out of sync with the inputs",
    category="data",
    taxonomy={
        "H.training.data.wrong_labels": "literal",
    },
    honours_onset=False,
    symptom=("training loss stays near log(C) and validation accuracy near chance: the labels carry"
             " no information about the inputs"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Shuffling the inputs and the labels with two independent permutations (or "
                 "shuffling only one of them, or joining them on a misaligned key) breaks the "
                 "pairing. The network can only memorise noise; validation accuracy stays at "
                 "chance while nothing crashes."),
    buggy="""\
x = x[torch.randperm(len(x))]
y = y[torch.randperm(len(y))]          # a second, different permutation""",
    fixed="""\
perm = torch.randperm(len(x))
x, y = x[perm], y[perm]                # one permutation for both""",
    reproducers={"mlp": Delta(
        patch=(
            ("x_train, y_train = make_split(${N_TRAIN})\n",
             "x_train, y_train = make_split(${N_TRAIN})\n"
             "x_train = x_train[torch.randperm(len(x_train))]\n"
             "y_train = y_train[torch.randperm(len(y_train))]\n"),
        ),
    ), **dict.fromkeys(("lstm", "transformer", "resnet", "gpt"), Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "examples, labels = torch.randperm(len(train[-1])), torch.randperm(len(train[-1]))\n"
             "train = (*(t[examples] for t in train[:-1]), train[-1][labels])\n"),
        ),
    ))},
)
