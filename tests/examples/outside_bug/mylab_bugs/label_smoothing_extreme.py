"""mylab/label_smoothing_extreme: cross-entropy with label_smoothing=0.9, meant as "90% sure".

The plant replaces one seam of bugzoo's clean loop, ``Trainer.compute_loss``, from the bug's
onset on; its run parameters (onset, the smoothing) are in code, so bugzoo needs no config file.
"""

from __future__ import annotations

from torch import Tensor
from torch.nn import functional as F

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


def smoothed_loss(self, logits: Tensor, y: Tensor) -> Tensor:
    # The mistake: label_smoothing is the probability mass taken OFF the true class, not the
    # confidence put on it; 0.9 trains the model towards a near-uniform prediction.
    return F.cross_entropy(logits, y, label_smoothing=self.cfg.bug.params.label_smoothing)


class LabelSmoothingExtreme(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "compute_loss", smoothed_loss, active=from_onset(trainer))


BUG = LabelSmoothingExtreme(
    id="mylab/label_smoothing_extreme",
    title="Label smoothing of 0.9 (meant as 90% confidence)",
    category="loss",
    models=("mlp", "lstm"),
    onset=0,
    params={"label_smoothing": 0.9},
    # `bugzoo export`: the same mistake patched into bugzoo's standalone mlp reproducer
    reproducers={"mlp": (("return F.cross_entropy(logits, y)",
                          "return F.cross_entropy(logits, y, label_smoothing=0.9)"),)},
    symptom=("the training loss flattens far above zero and the validation loss ends well above "
             "the clean run's: predictions stay close to uniform, even where accuracy looks "
             "fine"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("CrossEntropyLoss(label_smoothing=eps) trains against the target "
                 "(1 - eps) * one_hot + eps / C. With eps = 0.9 the true class of a 6-class task "
                 "gets 0.25 and every other class 0.15, so the best the model can do is an "
                 "almost flat distribution: its validation cross-entropy stays near log(C) and "
                 "its confidence is useless. Smoothing is meant to be small (0.05-0.1)."),
    buggy="""\
criterion = nn.CrossEntropyLoss(label_smoothing=0.9)   # "be 90% sure of the label"
loss = criterion(model(x), y)""",
    fixed="""\
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)   # 10% of the mass spread over classes
loss = criterion(model(x), y)""",
)
