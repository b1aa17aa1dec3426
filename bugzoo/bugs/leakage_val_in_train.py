"""leakage_val_in_train: the validation examples are also in the training set."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data.base import Split


def concat(a: Split, b: Split) -> Split:
    lengths = None if a.lengths is None else torch.cat([a.lengths, b.lengths])
    return Split(torch.cat([a.x, b.x]), torch.cat([a.y, b.y]), lengths)


class LeakageValInTrain(Bug):
    def before_build(self, trainer) -> None:
        original = trainer.load_data

        # The mistake: the training set is built from "all labelled data", validation included.
        def load_data(self):
            data = original()
            return data.with_splits(train=concat(data.train, data.val))

        patch_method(trainer, "load_data", load_data)


BUG = LeakageValInTrain(
    id="leakage_val_in_train",
    title="Validation examples duplicated into the training set",
    category="data",
    taxonomy={
        "H.training.validation.wrong_split": "literal",
        "J.IDS": "literal",
    },
    honours_onset=False,
    symptom=("validation accuracy runs ahead of accuracy on untouched holdout data: the model is "
             "graded on examples it has memorised"),
    check=SymptomCheck("val_holdout_gap", "higher"),
    explanation=("When validation examples also appear in the training set (a concatenation of "
                 "'all labelled data', duplicates across files, an augmentation pipeline that "
                 "samples from both), the validation metric measures memorisation, not "
                 "generalisation. It is inflated relative to truly unseen data, and model "
                 "selection or early stopping on it picks overfitted models. The gap grows with "
                 "the model's capacity to memorise and with how often it sees each example."),
    buggy="""\
train_set = ConcatDataset([train_set, val_set])   # "use all labelled data"
val_loader = DataLoader(val_set)""",
    fixed="""\
train_loader = DataLoader(train_set, shuffle=True)  # validation kept apart
val_loader = DataLoader(val_set)""",
    reproducers={"mlp": Delta(
        patch=(
            ("\n\nclass MLP(nn.Module):",
             "x_train, y_train = torch.cat([x_train, x_val]), torch.cat([y_train, y_val])\n"
             "\n\nclass MLP(nn.Module):"),
        ),
        # a small, noisy training set: memorisation shows
        settings={"N_TRAIN": 256, "N_VAL": 128, "NOISE": 0.3, "STEPS": 400},
    ), **dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "train = tuple(torch.cat([t, v]) for t, v in zip(train, val))\n"),
        ),
        settings={"N_TRAIN": 256, "N_VAL": 128},  # a small training set: memorisation shows
    )), "resnet": Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "train = tuple(torch.cat([t, v]) for t, v in zip(train, val))\n"),
        ),
        settings={"NOISE": 2.0, "N_TRAIN": 256, "N_VAL": 128},  # small and noisy, as above
    ), "gpt": Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "train = tuple(torch.cat([t, v]) for t, v in zip(train, val))\n"),
        ),
        settings={"N_TRAIN": 500, "N_VAL": 500},  # the scenario's small set, seen many times
    )},
)
