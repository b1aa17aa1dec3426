"""mse_for_classification: a regression loss (MSE against one-hot labels) trains a classifier."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def mse_against_one_hot(self, logits: Tensor, y: Tensor) -> Tensor:
    # The mistake: a regression loss on the raw scores, with the labels one-hot encoded to
    # match their shape, where the task calls for cross-entropy.
    return F.mse_loss(logits, F.one_hot(y, logits.shape[-1]).float())


class MseForClassification(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "compute_loss", mse_against_one_hot)


BUG = MseForClassification(
    id="mse_for_classification",
    title="Mean squared error loss for a classification task",
    category="loss",
    taxonomy={
        "H.training.loss.wrong_loss_function": "literal",
        "J.LCH": "literal",
        "D.loss": "literal",
        "A.loss_issue": "literal",
    },
    honours_onset=False,
    symptom=("training runs smoothly and accuracy can even match the clean run's, but the "
             "predicted probabilities stay timid: validation cross-entropy ends several times "
             "above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Squared error against one-hot targets asks every score to equal exactly 1 for "
                 "the label and 0 elsewhere, so the network learns bounded scores, not logits. "
                 "Softmax over scores near 0 and 1 can never be confident (at best e/(e+C-1), "
                 "0.35 for six classes), so the probabilities the model reports are badly "
                 "calibrated and its cross-entropy stays high even when its argmax is right. On "
                 "harder tasks the bounded error also gives confidently wrong examples little "
                 "gradient, which slows learning."),
    buggy="""\
logits = model(x)
loss = F.mse_loss(logits, F.one_hot(y, num_classes).float())""",
    fixed="""\
logits = model(x)
loss = F.cross_entropy(logits, y)""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("MSE against one-hot class labels: planted where a person picks a loss"
                          " for a few classes; a causal LM's cross-entropy over its vocabulary "
                          "is not a choice made per task")},
    reproducers=dict.fromkeys(("mlp", "resnet"), Delta(
        patch=(
            ("return F.cross_entropy(logits, y)",
             "return F.mse_loss(logits, F.one_hot(y, CLASSES).float())"),
        ),
    )),
    since="1.1",
)
