"""log_of_zero: a hand-written log(softmax(x)) with no epsilon, fed to the NLL loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def nll_of_log_softmax(self, logits: Tensor, y: Tensor) -> Tensor:
    # The mistake: softmax underflows to exactly 0 for confident predictions, and log(0) is
    # -inf; its backward computes 0 / 0 = NaN even for classes the loss does not pick.
    # (Flattened as the clean loss is, for the gpt's per-token logits; padded targets are -100,
    # nll_loss's default ignore_index.)
    return F.nll_loss(torch.log(torch.softmax(logits, dim=-1)).flatten(0, -2), y.flatten())


class LogOfZero(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "compute_loss", nll_of_log_softmax, active=from_onset(trainer))


BUG = LogOfZero(
    id="log_of_zero",
    title="log(softmax(x)) without epsilon",
    category="numerics",
    taxonomy={
        "H.training.loss.wrong_calculation": "literal",
        "J.LWC": "literal",
    },
    symptom=("training is normal until the model grows confident; then a probability underflows to "
             "0, the gradient becomes NaN and the weights turn NaN"),
    check=SymptomCheck("nonfinite", "event"),
    explanation=("softmax(x) underflows to exactly 0 in float32 once a logit gap exceeds about "
                 "100. torch.log(0) = -inf and the backward of log divides by the input: "
                 "0 / 0 = NaN for every zero probability, whether or not the loss selects it. "
                 "F.log_softmax computes the same value stably (x - logsumexp(x))."),
    buggy="""\
log_probs = torch.log(torch.softmax(logits, dim=-1))
loss = F.nll_loss(log_probs, y)""",
    fixed="""\
log_probs = F.log_softmax(logits, dim=-1)       # or F.cross_entropy(logits, y)
loss = F.nll_loss(log_probs, y)""",
    models=("mlp", "gpt"),
    onset_note="it shows once some logit gap exceeds ~100",
    reproducers={"mlp": Delta(
        patch=(
            ("return F.cross_entropy(logits, y)",
             "return F.nll_loss(torch.log(torch.softmax(logits, dim=-1)), y)"),
        ),
        settings={"SPREAD": 10.0, "STEPS": 400, "LR": 0.05},
    ), "gpt": Delta(
        patch=(
            ("return F.cross_entropy(logits.transpose(1, 2), y)  # [B, VOCAB, S] against [B, S]",
             "return F.nll_loss(torch.log(torch.softmax(logits, dim=-1)).transpose(1, 2), y)"),
        ),
    )},
)
