"""no_shuffle_sorted: the training set is sorted by class and read in order (shuffle=False)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import BatchLoader


def sorted_train_loader(self) -> BatchLoader:
    # The mistake: the training rows come grouped by class (as exported from a labelled
    # folder tree) and the loader never shuffles them.
    rows = self.data.train.subset(self.data.train.y.argsort(stable=True))
    return BatchLoader(rows, self.cfg.harness.batch_size, shuffle=False, drop_last=True)


class NoShuffleSorted(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_train_loader", sorted_train_loader)


BUG = NoShuffleSorted(
    id="no_shuffle_sorted",
    title="Training data sorted by class and not shuffled",
    category="data",
    models=("mlp", "lstm", "transformer", "resnet"),
    inapplicable={"gpt": ("rows sorted by class label: a language model's data has no class to "
                          "sort by")},
    taxonomy={
        "H.training.preproc_missing.shuffling": "literal",
        "H.api.shuffle_position": "partial: no shuffling at all, not shuffling in the wrong place",
        "A.oscillating_loss": "literal",
        "J.CPP":
            "partial: one normalisation or ordering step; most faults of the type are label "
            "encoding and reshaping",
    },
    honours_onset=False,
    symptom=("every batch holds one class; the loss saw-tooths as the class changes and the model "
             "ends each epoch predicting the last class it saw: validation accuracy stays far below"
             " the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Stochastic gradient descent assumes batches are (roughly) independent samples "
                 "of the data. Reading a class-sorted dataset in order gives single-class "
                 "batches: each stretch of steps pulls the model towards one class and undoes "
                 "the previous stretch (catastrophic forgetting), and BatchNorm statistics are "
                 "skewed as well."),
    buggy="""\
rows = sorted(rows, key=lambda r: r.label)        # data exported class by class
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=False)""",
    fixed="""\
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)""",
    reproducers={"mlp": Delta(
        patch=(
            ("\n\nclass MLP(nn.Module):",
             "by_label = y_train.argsort(stable=True)   # data exported class by class\n"
             "x_train, y_train = x_train[by_label], y_train[by_label]\n"
             "\n\nclass MLP(nn.Module):"),
            ("order = torch.randperm(len(x_train))",
             "order = torch.arange(len(x_train))"),
        ),
        settings={"STEPS": 62},  # one epoch: the classes arrive one after another
    ), **dict.fromkeys(("lstm", "transformer", "resnet"), Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "by_label = train[-1].argsort(stable=True)   # data exported class by class\n"
             "train = tuple(t[by_label] for t in train)\n"),
            ("order = torch.randperm(len(train[-1]))",
             "order = torch.arange(len(train[-1]))"),
        ),
        settings={"STEPS": 62},
    ))},
)
