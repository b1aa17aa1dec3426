"""eval_on_train: the validation loader iterates over the training split."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Symptom, patch_method
from bugzoo.data import BatchLoader


def loaders(trainer) -> tuple[BatchLoader, BatchLoader]:
    h = trainer.cfg.harness
    train = BatchLoader(trainer.data.train, h.batch_size, shuffle=True, seed=trainer.seed,
                        drop_last=True)
    # The mistake: a copy-paste slip makes "validation" read the training split.
    val = BatchLoader(trainer.data.train, h.eval_batch_size, shuffle=False)
    return train, val


class EvalOnTrain(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_loaders", loaders)


BUG = EvalOnTrain(
    id="eval_on_train",
    title="Validation on the training data",
    category="eval",
    symptom=Symptom("val_holdout_gap", "higher",
                    "validation accuracy is inflated: it exceeds the accuracy on unseen holdout "
                    "data by more than in clean runs"),
    explanation=("The validation loader is built from the training split, so 'validation' "
                 "measures memorisation, not generalisation: it looks better than the model "
                 "really is and cannot reveal overfitting."),
    buggy="""\
val_loader = DataLoader(train_set, batch_size=500)""",
    fixed="""\
val_loader = DataLoader(val_set, batch_size=500)""",
)
