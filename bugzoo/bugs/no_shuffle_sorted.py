"""no_shuffle_sorted: the training set is sorted by class and read in order (shuffle=False)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Symptom, patch_method
from bugzoo.data import BatchLoader


def sorted_loaders(trainer) -> tuple[BatchLoader, BatchLoader]:
    h = trainer.cfg.harness
    # The mistake: the training rows come grouped by class (as exported from a labelled
    # folder tree) and the loader never shuffles them.
    train = trainer.data.train.subset(trainer.data.train.y.argsort(stable=True))
    return (BatchLoader(train, h.batch_size, shuffle=False, drop_last=True),
            BatchLoader(trainer.data.val, h.eval_batch_size, shuffle=False))


class NoShuffleSorted(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_loaders", sorted_loaders)


BUG = NoShuffleSorted(
    id="no_shuffle_sorted",
    title="Training data sorted by class and not shuffled",
    category="data",
    symptom=Symptom("final_val_acc", "lower",
                    "every batch holds one class; the loss saw-tooths as the class changes and the "
                    "model ends each epoch predicting the last class it saw: validation accuracy "
                    "stays far below the clean run's"),
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
)
