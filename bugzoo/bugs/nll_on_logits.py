"""nll_on_logits: NLLLoss on the model's raw logits (the log_softmax is missing)."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def nll_loss_on_logits(self) -> nn.Module:
    # The mistake: NLLLoss expects log-probabilities, but the model returns raw logits and
    # nothing applies log_softmax in between (CrossEntropyLoss would have).
    return nn.NLLLoss()


class NllOnLogits(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_loss", nll_loss_on_logits)


BUG = NllOnLogits(
    id="nll_on_logits",
    title="NLLLoss on raw logits (log_softmax missing)",
    category="loss",
    taxonomy={
        "H.model.activation.missing_softmax": "literal",
        "H.model.layers.missing_softmax_layer":
            "partial: the missing piece is the log_softmax between the logits and NLLLoss, not "
            "a softmax layer at the end of the model (the model itself is as intended)",
        "A.activation_issue": "literal",
        "D.act": "partial: the output activation is missing rather than swapped for another one",
        "J.LWC": "partial: the loss is the intended one, but its input is of the wrong kind "
                 "(logits for log-probabilities), so every value it computes is wrong",
    },
    honours_onset=False,
    symptom=("the training loss drops below zero and keeps falling without bound while the "
             "logits grow; validation accuracy stays near chance and validation cross-entropy "
             "ends orders of magnitude above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("NLLLoss only picks out -input[y]: it expects log-probabilities, which "
                 "log_softmax would provide. Given raw logits it computes -z_y, which is "
                 "unbounded below: the optimiser raises the label's logit without lowering the "
                 "others, and the cheapest way is to make every logit huge for every input. The "
                 "loss falls forever, nothing pushes the classes apart, and the model ends near "
                 "chance with enormous, meaningless scores."),
    buggy="""\
logits = model(x)                       # the head is a plain nn.Linear
loss = F.nll_loss(logits, y)            # expects log-probabilities""",
    fixed="""\
logits = model(x)
loss = F.nll_loss(F.log_softmax(logits, dim=-1), y)   # or F.cross_entropy(logits, y)""",
    models=("mlp", "transformer", "gpt"),
    reproducers={**dict.fromkeys(("mlp", "transformer"), Delta(
        patch=(
            ("return F.cross_entropy(logits, y)",
             "return F.nll_loss(logits, y)"),
        ),
    )), "gpt": Delta(
        patch=(
            ("return F.cross_entropy(logits.transpose(1, 2), y)",
             "return F.nll_loss(logits.transpose(1, 2), y)"),
        ),
    )},
    since="1.1",
)
