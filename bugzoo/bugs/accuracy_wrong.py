"""accuracy_wrong: validation accuracy compares [B, 1] predictions with [B] labels (a [B, B]
broadcast)."""

from __future__ import annotations

from torch import Tensor

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def count_correct_broadcast(self, logits: Tensor, y: Tensor) -> int:
    # The mistake: argmax keeps its dimension, as in the PyTorch MNIST example, but the labels
    # are not reshaped to match (target.view_as(pred)): [B, 1] == [B] broadcasts to [B, B] and
    # counts every (prediction, label) pair that agrees, not every correct row.
    pred = logits.argmax(dim=1, keepdim=True)
    return pred.eq(y).sum().item()


class AccuracyWrong(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "count_correct", count_correct_broadcast,
                     active=from_onset(trainer))


BUG = AccuracyWrong(
    id="accuracy_wrong",
    title="Validation accuracy from a [B, 1] vs [B] comparison",
    category="eval",
    taxonomy={
        "H.training.validation.wrong_metric": "literal",
        "J.PMC": "literal",
    },
    symptom=("training and validation loss look normal, but the reported validation accuracy "
             "has nothing to do with them: it is far above the accuracy measured on fresh data, "
             "well beyond 100%, and barely moves as the model learns"),
    check=SymptomCheck("val_holdout_gap", "higher"),
    explanation=("pred = logits.argmax(dim=1, keepdim=True) has shape [B, 1]; comparing it with "
                 "labels of shape [B] broadcasts to a [B, B] table that is True wherever sample "
                 "i's prediction equals sample j's label. Its sum depends only on how often each "
                 "class is predicted and occurs (about B*B/C for balanced classes), not on "
                 "which samples are right, so the 'accuracy' comes out near B/C per batch: a "
                 "meaningless number, and nothing crashes because broadcasting is legal."),
    buggy="""\
pred = logits.argmax(dim=1, keepdim=True)          # [B, 1]
correct += pred.eq(y).sum().item()                 # y is [B]
accuracy = correct / len(val_set)""",
    fixed="""\
pred = logits.argmax(dim=1, keepdim=True)          # [B, 1]
correct += pred.eq(y.view_as(pred)).sum().item()
accuracy = correct / len(val_set)""",
    models=("mlp", "lstm"),
    inapplicable={"gpt": ("comparing [B, 1] predictions with [B] labels, a shape only a one-"
                          "label-per-example classifier has")},
    since="1.1",
)
