"""class_filtered_out: a filter meant to drop unlabelled rows (label -1) also drops class 0 from
the training split."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.train import Trainer


def load_data_without_unlabelled(self) -> DataBundle:
    data = Trainer.load_data(self)
    # The mistake: the training export marks unlabelled rows with -1, and the clean-up step
    # written to drop them keeps y > 0 where y >= 0 was meant: every row of class 0 goes too.
    # Only the training split is cleaned (validation came from a curated set).
    keep = data.train.y > 0
    return data.with_splits(train=data.train.subset(keep))


class ClassFilteredOut(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "load_data", load_data_without_unlabelled)


BUG = ClassFilteredOut(
    id="class_filtered_out",
    title="Filter for invalid labels drops a whole valid class from training",
    category="data",
    taxonomy={
        "H.training.data.unbalanced":
            "partial: one class has no training rows at all, the extreme of under-"
            "representation, and made by a filtering step rather than by the data collected",
        "J.CPP": "partial: a filtering step of the preprocessing; most faults of the type are "
                 "label encoding and reshaping",
    },
    honours_onset=False,
    since="1.1",
    symptom=("training loss falls as in a healthy run, but validation accuracy levels off well "
             "below the clean run's: one class is never predicted"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A clean-up step meant to remove rows with a sentinel label (-1 for "
                 "'unlabelled') was written as y > 0 instead of y >= 0. Class 0 disappears from "
                 "the training split without a warning: the model never sees it, learns to "
                 "never predict it, and every validation example of that class is wrong. The "
                 "training loss looks fine because the missing class is not in it. Count the "
                 "rows per class before and after any filter."),
    buggy="""\
keep = y_train > 0                     # drop the unlabelled rows (label -1)
x_train, y_train = x_train[keep], y_train[keep]""",
    fixed="""\
keep = y_train != -1                   # drop the unlabelled rows (label -1)
x_train, y_train = x_train[keep], y_train[keep]""",
    models=("mlp", "lstm"),
    inapplicable={"gpt": ("a filter on class labels: a language model's labels are its tokens, "
                          "with no class to filter out")},
    reproducers={"mlp": Delta(
        patch=(
            ("x_train, y_train = make_split(${N_TRAIN})\n",
             "x_train, y_train = make_split(${N_TRAIN})\n"
             "keep = y_train > 0                                  # drop unlabelled rows (-1)\n"
             "x_train, y_train = x_train[keep], y_train[keep]\n"),
        ),
    ), "lstm": Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "keep = train[-1] > 0                                # drop unlabelled rows (-1)\n"
             "train = tuple(t[keep] for t in train)\n"),
        ),
    )},
)
