"""eval_on_train: the validation loader iterates over the training split."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import BatchLoader


def val_loader_over_train(self) -> BatchLoader:
    # The mistake: a copy-paste slip makes "validation" read the training split.
    return BatchLoader(self.data.train, self.cfg.harness.eval_batch_size, shuffle=False)


class EvalOnTrain(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_val_loader", val_loader_over_train)


BUG = EvalOnTrain(
    id="eval_on_train",
    title="Validation on the training data",
    category="eval",
    taxonomy={
        "H.training.validation.missing_validation_set":
            "partial: validation runs, but on the training split",
        "H.training.validation.wrong_split": "literal",
        "J.VRM": "partial: validation runs, but on the training split",
    },
    honours_onset=False,
    symptom=("validation accuracy is inflated: it exceeds the accuracy on unseen holdout data by "
             "more than in clean runs"),
    check=SymptomCheck("val_holdout_gap", "higher"),
    explanation=("The validation loader is built from the training split, so 'validation' "
                 "measures memorisation, not generalisation: it looks better than the model "
                 "really is and cannot reveal overfitting."),
    buggy="""\
val_loader = DataLoader(train_set, batch_size=500)""",
    fixed="""\
val_loader = DataLoader(val_set, batch_size=500)""",
    reproducers={"mlp": Delta(
        patch=(
            ("val_loss, val_acc = evaluate(x_val, y_val)",
             "val_loss, val_acc = evaluate(x_train, y_train)"),
        ),
        # a small, noisy training set: memorisation shows
        settings={"N_TRAIN": 256, "N_VAL": 128, "NOISE": 0.3, "STEPS": 400},
    ), **dict.fromkeys(("lstm", "transformer", "gpt"), Delta(
        patch=(
            ("val_loss, val_acc = evaluate(val)",
             "val_loss, val_acc = evaluate(train)"),
        ),
        settings={"N_TRAIN": 256, "N_VAL": 128},  # a small training set: memorisation shows
    )), "resnet": Delta(
        patch=(
            ("val_loss, val_acc = evaluate(val)",
             "val_loss, val_acc = evaluate(train)"),
        ),
        settings={"NOISE": 2.0, "N_TRAIN": 256, "N_VAL": 128},  # small and noisy, as above
    )},
)
