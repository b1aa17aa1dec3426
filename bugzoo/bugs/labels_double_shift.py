"""labels_double_shift: labels shifted in the data pipeline and again by the loss."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method

IGNORE = -100


def shift_shifted_labels(self, labels: Tensor) -> Tensor:
    # The mistake: the collator already shifted the labels (labels = tokens[1:]), and the loss
    # shifts what it is given once more. Position t is scored against token t + 2.
    pad = torch.full_like(labels[:, :1], self.data.pad_id)
    already_shifted = torch.cat([labels[:, 1:], pad], dim=1)
    return torch.cat([already_shifted[:, 1:], torch.full_like(pad, IGNORE)], dim=1)


class LabelsDoubleShift(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "shift_labels", shift_shifted_labels, active=from_onset(trainer))


BUG = LabelsDoubleShift(
    id="labels_double_shift",
    title="Language-model labels shifted twice: each position predicts the token after next",
    category="loss",
    taxonomy={
        "L.labels_double_shift": "literal",
        "H.training.loss.wrong_calculation": "literal",
    },
    symptom=("validation loss stays well above a correctly trained run's, and the model writes "
             "sentences that skip a beat"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Shifting the labels by one belongs in one place. When the data pipeline "
                 "shifts them (labels = tokens[1:]) and the model's loss shifts them again, "
                 "the logits at t are trained on token t + 2: a harder task the model partly "
                 "learns, so the loss falls, just not far enough, and nothing crashes."),
    buggy="""\
labels = tokens[:, 1:]                                   # shifted in the collator...
loss = F.cross_entropy(logits[:, :-1].flatten(0, 1),     # ...and again in the loss
                       labels[:, 1:].flatten())""",
    fixed="""\
labels = tokens                                          # the loss shifts, once
loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())""",
    models=("gpt",),
    references=("https://github.com/huggingface/transformers/pull/44642",),
    since="1.2",
    reproducers={"gpt": Delta(
        patch=(("return F.cross_entropy(logits.transpose(1, 2), y)",
                "return F.cross_entropy(logits[:, :-1].transpose(1, 2), y[:, 1:])"),),
    )},
)
