"""labels_one_indexed: training labels are 1-indexed (y + 1), wrapped to fit num_classes."""

from __future__ import annotations

from dataclasses import replace

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle


def one_indexed(data: DataBundle) -> DataBundle:
    # The mistake: the training pipeline reads 1-indexed class ids (1..C) and, to silence the
    # "Target C is out of bounds" error, wraps them with % C; validation keeps 0..C-1.
    y = (data.train.y + 1) % data.num_classes
    return data.with_splits(train=replace(data.train, y=y))


class LabelsOneIndexed(Bug):
    def before_build(self, trainer) -> None:
        load = trainer.load_data
        patch_method(trainer, "load_data", lambda self: one_indexed(load()))


BUG = LabelsOneIndexed(
    id="labels_one_indexed",
    title="Training labels off by one (1-indexed, wrapped)",
    category="data",
    models=("mlp", "lstm", "transformer", "resnet"),
    inapplicable={"gpt": ("class ids numbered from 1: a language model's labels are its own "
                          "token ids, never numbered by hand")},
    taxonomy={
        "H.training.data.wrong_labels": "literal",
        "L.labels_double_shift":
            "partial: an off-by-one between inputs and targets, in class space",
        "L.labels_not_shifted": "partial: an off-by-one between inputs and targets, in class space",
    },
    honours_onset=False,
    symptom=("training loss falls normally but validation accuracy is near zero (below chance): the"
             " model learns a consistent relabelling of the classes"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("The training labels come 1-indexed (1..C) while the model and the validation data"
                 " use 0..C-1. Fed as they are, they crash at the first batch holding label C "
                 "(CrossEntropyLoss: an IndexError on CPU, a device-side assert on CUDA), a loud "
                 "bug that needs no detector. The planted version is the usual quick fix of that "
                 "crash: the labels wrapped with % C, which silences the error and shifts every "
                 "class by one (class k is trained as k+1, the last as 0). Training looks healthy; "
                 "every validation prediction is off by one class."),
    buggy="""\
y_train = torch.tensor(df.label.values) % num_classes   # labels are 1..C in this file""",
    fixed="""\
y_train = torch.tensor(df.label.values) - 1             # map 1..C to 0..C-1""",
    reproducers={"mlp": Delta(
        patch=(("x_train, y_train = make_split(${N_TRAIN})\n",
                "x_train, y_train = make_split(${N_TRAIN})\n"
                "y_train = (y_train + 1) % CLASSES\n"),),
    ), **{model: Delta(
        patch=(("make_split(${N_VAL}), make_split(500)\n",
                "make_split(${N_VAL}), make_split(500)\n"
                f"train = (*train[:-1], (train[-1] + 1) % {classes})\n"),),
    ) for model, classes in (("lstm", 2), ("transformer", 2), ("resnet", "CLASSES"))}},
)
