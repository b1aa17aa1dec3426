"""silent_broadcast: a hand-written binary loss compares [B, 1] logits with [B] targets."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def binary_loss(self, logits: Tensor, y: Tensor) -> Tensor:
    # Two-class softmax == sigmoid of the logit difference. The mistake: slicing keeps a
    # trailing dimension, so z is [B, 1] while the targets are [B]; the product broadcasts
    # to [B, B] and pairs every prediction with every label.
    z = logits[:, 1:] - logits[:, :1]
    t = y.float()
    return -(t * F.logsigmoid(z) + (1 - t) * F.logsigmoid(-z)).mean()


class SilentBroadcast(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "compute_loss", binary_loss, active=from_onset(trainer))


BUG = SilentBroadcast(
    id="silent_broadcast",
    title="Silent broadcasting in a hand-written loss ([B, 1] vs [B])",
    category="loss",
    taxonomy={
        "H.tensors.input.wrong_shape_method": "literal",
        "H.tensors.input.wrong_shape": "partial: one sub-form: a size-1 axis that broadcasts",
        "H.tensors.shape.missing_squeeze": "literal",
        "H.training.loss.wrong_calculation": "literal",
        "J.TWS": "partial: a missing squeeze only",
        "J.LWC": "literal",
        "J.IWS": "partial: one sub-form: a size-1 axis that broadcasts",
    },
    symptom=("no error or warning; the loss settles at the entropy of the label mix and validation "
             "accuracy stays near chance"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("Elementwise ops broadcast a [B, 1] tensor against a [B] tensor to [B, B]. The "
                 "mean over that matrix is the loss of every prediction against the average "
                 "label, so the pairing of inputs and labels is lost: the optimum predicts the "
                 "batch's base rate for every input. F.binary_cross_entropy would raise a shape "
                 "error; hand-written arithmetic does not."),
    buggy="""\
z = logits[:, 1:] - logits[:, :1]                 # [B, 1]
loss = -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).mean()   # y: [B] -> [B, B]""",
    fixed="""\
z = logits[:, 1] - logits[:, 0]                   # [B]
loss = -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).mean()
assert z.shape == y.shape""",
    models=("lstm", "transformer"),
    inapplicable={"gpt": ("a binary classifier's hand-written loss on [B, 1] against [B]: next-"
                          "token targets are one per position, of many classes")},
    reproducers=dict.fromkeys(("lstm", "transformer"), Delta(
        patch=(("    return F.cross_entropy(logits, y)\n",
                "    z = logits[:, 1:] - logits[:, :1]\n"
                "    t = y.float()\n"
                "    return -(t * F.logsigmoid(z) + (1 - t) * F.logsigmoid(-z)).mean()\n"),),
    )),
)
